/* bench/http: see http.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime under -std=c11 (run.sh builds without the Makefile's flags) */
#endif
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool wire_step_add(json_t *ops, json_t *kv, json_t *m, const char *out_queue, const char *marker_ns,
                   int ttl_seconds)
{
    const char *mid = json_string_value(json_object_get(m, "id"));
    json_t *tid = json_object_get(m, "transactionId"), *pid = json_object_get(m, "partitionId"),
           *lid = json_object_get(m, "leaseId"), *part = json_object_get(m, "partition");
    if (mid == NULL || tid == NULL || pid == NULL || lid == NULL || part == NULL)
        return false;
    char out_tx[128], marker[128];
    snprintf(out_tx, sizeof out_tx, "out-%s", mid);
    snprintf(marker, sizeof marker, "done:%s", mid);
    json_array_append_new(ops, json_pack("{s:s, s:O, s:O, s:O}", "type", "ack", "transactionId", tid, "partitionId",
                                         pid, "leaseId", lid));
    json_array_append_new(ops, json_pack("{s:s, s:[{s:s, s:O, s:{s:s}, s:s}]}", "type", "push", "items", "queue",
                                         out_queue, "partition", part, "payload", "src", mid, "transactionId",
                                         out_tx));
    json_array_append_new(kv, json_pack("{s:s, s:s, s:s, s:b, s:i}", "op", "putIfAbsent", "ns", marker_ns, "key",
                                         marker, "value", 1, "ttlSeconds", ttl_seconds));
    return true;
}
