/* bench/http: what the benchmark's libcurl load generators (wire_bench.c,
 * soak_driver.c) share: a response body that grows as libcurl hands it
 * over, and the monotonic clock they time calls with. */
#ifndef QUEEN_BENCH_HTTP_H
#define QUEEN_BENCH_HTTP_H

#include <stddef.h>

typedef struct {
    char *p; /* NUL-terminated; NULL until the first byte */
    size_t len, cap;
} buf;

/* A CURLOPT_WRITEFUNCTION appending to the buf in its user data (0, which
 * makes libcurl fail the call, when memory is short). */
size_t on_body(char *data, size_t size, size_t nmemb, void *ud);

/* Seconds on the monotonic clock. */
double now_s(void);

#endif
