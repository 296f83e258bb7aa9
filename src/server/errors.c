/* errors: every error body goes out through http_error(); every category ->
 * status decision is http_error_classes (generated from the error registry). */
#include "errors.h"

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
        res->body = strdup("{\"error\":\"render_failed\",\"code\":\"internal_error\",\"reason\":\"render_failed\","
                           "\"detail\":\"\"}");
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

/* error is what the reference broker's clients show a person (Error.message
 * is body.error), so it carries the explanation; code is what a program
 * branches on (their Error.code is body.code). */
void http_error(http_response *res, unsigned status, const char *code, const char *reason, const char *detail)
{
    if (reason == NULL)
        reason = code;
    if (detail == NULL)
        detail = "";
    json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "error", detail[0] ? detail : reason, "code", code, "reason",
                             reason, "detail", detail);
    if (body == NULL) /* reason or detail was not UTF-8 */
        body = json_pack("{s:s, s:s, s:s, s:s}", "error", code, "code", code, "reason", code, "detail", "");
    http_json(res, status, body);
    res->content_type = NULL;
}

const http_error_class *http_error_class_of(queen_error_category cat)
{
    if ((int)cat < 0 || (size_t)cat >= http_error_class_count || http_error_classes[cat].code == NULL)
        cat = QUEEN_ERR_INTERNAL;
    return &http_error_classes[cat];
}

void http_refuse(http_response *res, http_family fam, queen_error_category cat, const char *reason,
                 const char *detail)
{
    const http_error_class *h = http_error_class_of(cat);
    http_error(res, h->status, fam == FAMILY_KV ? h->kv_code : h->code, reason, detail);
    res->retry_after = queen_error_class_of(cat)->retry_after_s;
}

/* The KV verdict body: a lost required op is an answer, not a fault. */
static void precondition_verdict(http_response *res, const queen_error *err)
{
    char *members = queen_error_precondition_json(err, 0), *out = NULL;
    if (members == NULL || asprintf(&out, "{\"ok\":false,\"reason\":\"kv_precondition\",%s}", members) < 0) {
        free(members);
        http_error(res, 500, "kv_error", "out_of_memory", "");
        return;
    }
    free(members);
    http_text(res, 200, out);
}

void http_engine_error(http_response *res, http_family fam, const queen_error *err)
{
    if (err->category == QUEEN_ERR_PRECONDITION && fam == FAMILY_KV) {
        precondition_verdict(res, err);
        return;
    }
    const queen_error_class *c = queen_error_class_of(err->category);
    http_refuse(res, fam, err->category, err->reason[0] ? err->reason : c->reason, err->detail);
    /* The registry's figure is a floor; the engine may know better. */
    if (res->retry_after > 0 && err->retry_after_s > res->retry_after)
        res->retry_after = err->retry_after_s;
}

void http_bad_body(http_response *res, const json_error_t *jerr)
{
    char detail[JSON_ERROR_TEXT_LENGTH + 64];
    snprintf(detail, sizeof detail, "%s at line %d, column %d", jerr->text, jerr->line, jerr->column);
    http_error(res, 400, "bad_body", "invalid_json", detail);
}

void http_not_found(http_response *res)
{
    /* "error" and "code" as the reference broker answers them; reason and
     * detail make it the envelope every other refusal is. */
    http_json(res, 404, json_pack("{s:s, s:s, s:s, s:s}", "error", "Not Found", "code", "no_such_route", "reason",
                                  "no_such_route", "detail", "no route of this broker takes this path"));
}
