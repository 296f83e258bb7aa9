/* errors: every error body goes out through http_error(). */
#include "errors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void http_json(http_response *res, unsigned status, json_t *value)
{
    res->status = status;
    free(res->body);
    res->body = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(value);
}

void http_error(http_response *res, unsigned status, const char *code, const char *reason, const char *detail)
{
    json_t *body = json_pack("{s:s, s:s, s:s}", "error", code, "reason", reason ? reason : code, "detail",
                             detail ? detail : "");
    if (body == NULL) /* reason or detail was not UTF-8 */
        body = json_pack("{s:s, s:s, s:s}", "error", code, "reason", code, "detail", "");
    http_json(res, status, body);
}

/* Category -> (status, error code, retry). One table for every route. */
static const struct {
    queen_error_category category;
    unsigned status;
    const char *code;
    int retry_after;
} category_map[] = {
    {QUEEN_ERR_BAD_REQUEST, 400, "bad_request", 0},
    {QUEEN_ERR_TOO_LARGE, 413, "payload_too_large", 0},
    {QUEEN_ERR_PRECONDITION, 409, "precondition_failed", 0},
    {QUEEN_ERR_UNAVAILABLE, 503, "unavailable", 1},
    {QUEEN_ERR_MISCONFIGURED, 500, "misconfigured", 0},
    {QUEEN_ERR_INTERNAL, 500, "internal_error", 0},
};

void http_engine_error(http_response *res, const queen_error *err)
{
    for (size_t i = 0; i < sizeof category_map / sizeof category_map[0]; i++) {
        if (category_map[i].category == err->category) {
            http_error(res, category_map[i].status, category_map[i].code, err->reason, err->detail);
            res->retry_after = category_map[i].retry_after;
            return;
        }
    }
    http_error(res, 500, "internal_error", err->reason, err->detail);
}
