/* args: see args.h. */
#include "args.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

bool arg_int(const http_request *req, const char *name, long long min, long long max, long long *out,
             http_response *res, const char *reason)
{
    char buf[32], detail[128];
    bool bad = false;
    const char *v = http_query_arg(req, name, buf, sizeof buf, &bad);
    if (v == NULL && !bad)
        return true;
    char *end = NULL;
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (bad || *v == '\0' || *end != '\0' || n < min || n > max) {
        snprintf(detail, sizeof detail, "%s must be an integer in %lld..%lld", name, min, max);
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, reason, detail);
        return false;
    }
    *out = n;
    return true;
}

bool arg_bool(const http_request *req, const char *name, bool *out, http_response *res)
{
    char buf[8], detail[96];
    bool bad = false;
    const char *v = http_query_arg(req, name, buf, sizeof buf, &bad);
    if (v == NULL && !bad)
        return true;
    if (!bad && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)) {
        *out = v[0] == 't' || v[0] == '1';
        return true;
    }
    snprintf(detail, sizeof detail, "%s must be true or false", name);
    http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request", detail);
    return false;
}

bool arg_str(const http_request *req, const char *name, char *buf, size_t len, const char **out, http_response *res,
             const char *reason)
{
    bool bad = false;
    const char *v = http_query_arg(req, name, buf, len, &bad);
    if (bad) {
        char detail[96];
        snprintf(detail, sizeof detail, "%s is malformed or too long", name);
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, reason, detail);
        return false;
    }
    if (v != NULL)
        *out = v;
    return true;
}

bool arg_page(const http_request *req, int *limit, long long *after, http_response *res)
{
    long long n = 0;
    *after = 0;
    /* The page's range (1..1000) is SQL's (_log_page_limit_v1, which refuses
     * with the same reason): only a positive int crosses libqueen, whose 0
     * means "absent". */
    if (!arg_int(req, "limit", 1, INT_MAX, &n, res, "log_bad_limit") ||
        !arg_int(req, "after", 0, LLONG_MAX, after, res, "log_bad_after"))
        return false;
    *limit = (int)n;
    return true;
}

bool arg_listing(const http_request *req, listing_args *out, http_response *res)
{
    out->queue = out->partition = out->consumer_group = NULL;
    return arg_str(req, "queue", out->queue_buf, sizeof out->queue_buf, &out->queue, res, "log_bad_queue") &&
           arg_str(req, "partition", out->partition_buf, sizeof out->partition_buf, &out->partition, res,
                   "log_bad_partition") &&
           arg_str(req, "consumerGroup", out->group_buf, sizeof out->group_buf, &out->consumer_group, res,
                   "log_bad_group") &&
           arg_page(req, &out->limit, &out->after, res);
}
