/* args: query-string arguments of the queue routes, each judged the same way
 * everywhere: absent leaves *out alone; present but malformed answers 400
 * (FAMILY_LOG's vocabulary) with the reason given and returns false. */
#ifndef QUEEN_ARGS_H
#define QUEEN_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"

/* An integer in [min, max]. */
bool arg_int(const http_request *req, const char *name, long long min, long long max, long long *out,
             http_response *res, const char *reason);
/* true/1 or false/0. */
bool arg_bool(const http_request *req, const char *name, bool *out, http_response *res);
/* Text (percent-decoded) into buf; *out points into buf. */
bool arg_str(const http_request *req, const char *name, char *buf, size_t len, const char **out, http_response *res,
             const char *reason);

/* The keyset page of every listing: limit (a positive int, log_bad_limit;
 * SQL refuses one past its page) and after (>= 0, log_bad_after); each 0
 * when absent. */
bool arg_page(const http_request *req, int *limit, long long *after, http_response *res);

/* The filters and page that GET /api/v1/messages and GET /api/v1/dlq take,
 * judged in this order: queue, partition, consumerGroup (NULL when absent;
 * they point into the struct, which therefore is not copied), limit, after. */
typedef struct listing_args {
    char queue_buf[1024], partition_buf[1024], group_buf[1024];
    const char *queue, *partition, *consumer_group;
    int limit;
    long long after;
} listing_args;
bool arg_listing(const http_request *req, listing_args *out, http_response *res);

#endif
