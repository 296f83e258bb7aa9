/* bench/http: what the benchmark's libcurl load generators (wire_bench.c,
 * soak_driver.c) share: a response body that grows as libcurl hands it
 * over, the monotonic clock they time calls with, and the consumer's
 * transaction step they both send. */
#ifndef QUEEN_BENCH_HTTP_H
#define QUEEN_BENCH_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct {
    char *p; /* NUL-terminated; NULL until the first byte */
    size_t len, cap;
} buf;

/* A CURLOPT_WRITEFUNCTION appending to the buf in its user data (0, which
 * makes libcurl fail the call, when memory is short). */
size_t on_body(char *data, size_t size, size_t nmemb, void *ud);

/* Seconds on the monotonic clock. */
double now_s(void);

/* A consumer's step for one popped message m, appended to a transaction
 * bundle's operations and kv arrays: ack it, push {"src": id} to out_queue
 * (same partition, transactionId "out-<id>") and putIfAbsent "done:<id>" in
 * marker_ns for ttl_seconds. false (nothing appended) when m lacks id,
 * transactionId, partitionId, leaseId or partition. */
bool wire_step_add(json_t *ops, json_t *kv, json_t *m, const char *out_queue, const char *marker_ns,
                   int ttl_seconds);

#endif
