/* errors: every error body goes out through http_error(); every category ->
 * status decision is one row of status_map. Never calls the engine. */
#include "errors.h"

#include "rawjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void http_json(http_response *res, unsigned status, json_t *value)
{
    res->status = status;
    free(res->body);
    res->body = value ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(value);
    if (res->body == NULL) { /* only out of memory or a NULL value from a failed json_pack */
        res->status = 500;
        res->body = strdup("{\"error\":\"internal_error\",\"reason\":\"render_failed\",\"detail\":\"\"}");
    }
}

void http_text(http_response *res, unsigned status, char *text)
{
    res->status = status;
    free(res->body);
    res->body = text;
}

void http_wrap(http_response *res, unsigned status, const char *prefix, const char *raw, size_t raw_len,
               const char *suffix)
{
    size_t a = strlen(prefix), c = strlen(suffix);
    char *out = malloc(a + raw_len + c + 1);
    if (out == NULL) {
        http_error(res, 500, "internal_error", "out_of_memory", "");
        return;
    }
    memcpy(out, prefix, a);
    memcpy(out + a, raw, raw_len);
    memcpy(out + a + raw_len, suffix, c + 1);
    http_text(res, status, out);
}

void http_error(http_response *res, unsigned status, const char *code, const char *reason, const char *detail)
{
    json_t *body = json_pack("{s:s, s:s, s:s}", "error", code, "reason", reason ? reason : code, "detail",
                             detail ? detail : "");
    if (body == NULL) /* reason or detail was not UTF-8 */
        body = json_pack("{s:s, s:s, s:s}", "error", code, "reason", code, "detail", "");
    http_json(res, status, body);
    res->content_type = NULL;
}

/* (family, category) -> (status, error code, Retry-After). One table for
 * every route: the KV routes speak README.md's kv_* codes, the others the
 * generic ones. A lost required KV op is a verdict, hence 200 (rendered by
 * http_engine_error); elsewhere it cannot happen and would be a 409. */
static const struct {
    bool kv;
    queen_error_category category;
    unsigned status;
    const char *code;
    int retry_after;
} status_map[] = {
    {true, QUEEN_ERR_BAD_REQUEST, 400, "kv_bad_request", 0},
    {true, QUEEN_ERR_TOO_LARGE, 413, "payload_too_large", 0},
    {true, QUEEN_ERR_PRECONDITION, 200, "kv_precondition", 0},
    {true, QUEEN_ERR_UNAVAILABLE, 503, "kv_unavailable", 1},
    {true, QUEEN_ERR_MISCONFIGURED, 500, "kv_misconfigured", 0},
    {true, QUEEN_ERR_INTERNAL, 500, "kv_error", 0},
    {false, QUEEN_ERR_BAD_REQUEST, 400, "bad_request", 0},
    {false, QUEEN_ERR_TOO_LARGE, 413, "payload_too_large", 0},
    {false, QUEEN_ERR_PRECONDITION, 409, "precondition_failed", 0},
    {false, QUEEN_ERR_UNAVAILABLE, 503, "unavailable", 1},
    {false, QUEEN_ERR_MISCONFIGURED, 500, "misconfigured", 0},
    {false, QUEEN_ERR_INTERNAL, 500, "internal_error", 0},
    /* queen_kv_admit's refusals: the same codes on the KV routes and on the
     * transaction's kv pre-flight. The rate's Retry-After is the engine's
     * figure (http_engine_error_retry); 1 is its floor. */
    {true, QUEEN_ERR_QUOTA_EXCEEDED, 403, "kv_quota_exceeded", 0},
    {true, QUEEN_ERR_FEATURE_GATED, 403, "feature_gated", 0},
    {true, QUEEN_ERR_RATE_LIMITED, 429, "rate_limited", 1},
    {false, QUEEN_ERR_QUOTA_EXCEEDED, 403, "kv_quota_exceeded", 0},
    {false, QUEEN_ERR_FEATURE_GATED, 403, "feature_gated", 0},
    {false, QUEEN_ERR_RATE_LIMITED, 429, "rate_limited", 1},
};

static size_t lookup(http_family fam, queen_error_category cat)
{
    bool kv = fam == FAMILY_KV;
    for (size_t i = 0; i < sizeof status_map / sizeof status_map[0]; i++)
        if (status_map[i].kv == kv && status_map[i].category == cat)
            return i;
    return kv ? 5 : 11; /* internal */
}

void http_refuse(http_response *res, http_family fam, queen_error_category cat, const char *reason,
                 const char *detail)
{
    size_t i = lookup(fam, cat);
    http_error(res, status_map[i].status, status_map[i].code, reason, detail);
    res->retry_after = status_map[i].retry_after;
}

/* The KV verdict body. `value` is the live value as PostgreSQL rendered it,
 * spliced in byte for byte; text that does not parse (a DETAIL cut at its
 * cap) becomes null rather than a broken body. */
static void precondition_verdict(http_response *res, unsigned status, const queen_error *err)
{
    json_t *body = json_pack("{s:b, s:s, s:i, s:s, s:I}", "ok", 0, "reason", "kv_precondition", "failedIndex",
                             err->precondition.index, "kvReason", err->precondition.reason, "version",
                             (json_int_t)err->precondition.version);
    char *head = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (head == NULL) {
        http_error(res, 500, "kv_error", "render_failed", "");
        return;
    }
    /* PostgreSQL rendered it, so only a cut can break it; jansson would
     * also refuse a legal 2^64, hence the structural check. */
    const char *value = err->precondition.value;
    rawjson_span v = rawjson_trim((rawjson_span){value, strlen(value)});
    if (v.len == 0 || rawjson_value_len(v) != v.len)
        value = "null";
    /* Over the DETAIL cap SQL drops the value and says so; pass that on, as
     * the transaction's failure body does, so null is not mistaken for it. */
    rawjson_span omitted;
    bool dropped = rawjson_member((rawjson_span){err->detail, strlen(err->detail)}, "valueOmitted", &omitted) &&
                   omitted.len == 4 && memcmp(omitted.p, "true", 4) == 0;
    head[strlen(head) - 1] = '\0'; /* reopen the object to append the raw value */
    char *out = NULL;
    int n = asprintf(&out, "%s,\"value\":%s%s}", head, value, dropped ? ",\"valueOmitted\":true" : "");
    free(head);
    if (n < 0) {
        http_error(res, 500, "kv_error", "out_of_memory", "");
        return;
    }
    http_text(res, status, out);
}

void http_engine_error(http_response *res, http_family fam, const queen_error *err)
{
    size_t i = lookup(fam, err->category);
    if (err->category == QUEEN_ERR_PRECONDITION && status_map[i].status == 200) {
        precondition_verdict(res, 200, err);
        return;
    }
    http_refuse(res, fam, err->category, err->reason[0] ? err->reason : status_map[i].code, err->detail);
}

void http_engine_error_retry(http_response *res, http_family fam, const queen_error *err, int retry_after_s)
{
    http_engine_error(res, fam, err);
    if (res->retry_after > 0 && retry_after_s > res->retry_after)
        res->retry_after = retry_after_s;
}

void http_bad_body(http_response *res, const json_error_t *jerr)
{
    char detail[JSON_ERROR_TEXT_LENGTH + 64];
    snprintf(detail, sizeof detail, "%s at line %d, column %d", jerr->text, jerr->line, jerr->column);
    http_error(res, 400, "bad_body", "invalid_json", detail);
}

void http_not_found(http_response *res)
{
    http_json(res, 404, json_pack("{s:s, s:s}", "error", "Not Found", "code", "no_such_route"));
}
