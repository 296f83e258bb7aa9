/* body: request body parsing (see body.h). Never calls the engine. */
#include "body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

rawjson_span body_span(const http_request *req)
{
    return (rawjson_span){req->body, req->body_len};
}

bool body_blank(const http_request *req)
{
    return rawjson_trim(body_span(req)).len == 0;
}

json_t *body_parse(const http_request *req, http_response *res, bool allow_empty)
{
    if (body_blank(req)) {
        if (allow_empty)
            return json_null();
        json_error_t e = {.line = 1, .column = 0};
        snprintf(e.text, sizeof e.text, "the body is empty; this route takes a JSON body");
        http_bad_body(res, &e);
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadb(req->body, req->body_len, BODY_JSON_FLAGS, &jerr);
    if (v == NULL)
        http_bad_body(res, &jerr);
    return v;
}

const char *body_unknown_field(const json_t *obj, const char *const *allowed)
{
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)obj, name, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL && !ok; i++)
            ok = strcmp(name, allowed[i]) == 0;
        if (!ok)
            return name;
    }
    return NULL;
}

const char *body_string(const json_t *obj, const char *name, http_response *res, http_family fam, bool *bad)
{
    const json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v))
        return NULL;
    char detail[128];
    if (!json_is_string(v)) {
        snprintf(detail, sizeof detail, "%s must be a string", name);
    } else if (strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(detail, sizeof detail, "%s may not hold a NUL byte", name);
    } else {
        return json_string_value(v);
    }
    *bad = true;
    http_refuse(res, fam, QUEEN_ERR_BAD_REQUEST, fam == FAMILY_KV ? "kv_bad_request" : "bad_request", detail);
    return NULL;
}

bool body_int(const json_t *v, long long min, long long max, long long *out)
{
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v);
    if (!(d >= (double)min && d <= (double)max)) /* range first: the cast below is then defined */
        return false;
    long long n = (long long)d;
    if ((double)n != d)
        return false;
    *out = n;
    return true;
}

char *span_wrap(const char *prefix, rawjson_span s, const char *suffix)
{
    size_t a = strlen(prefix), c = strlen(suffix);
    char *out = malloc(a + s.len + c + 1);
    if (out != NULL) {
        memcpy(out, prefix, a);
        memcpy(out + a, s.p, s.len);
        memcpy(out + a + s.len, suffix, c + 1);
    }
    return out;
}

char *span_dup(rawjson_span s)
{
    return span_wrap("", s, "");
}
