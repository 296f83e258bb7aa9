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

/* ---- body_surely_json: the one-pass judge (see body.h) ---------------------- */

#define SURE_MAX_DEPTH 32
#define SURE_MAX_KEYS 64
#define SURE_MAX_NUMBER 300

typedef struct sure {
    const unsigned char *p, *end;
    rawjson_span keys[SURE_MAX_KEYS]; /* the member names of the objects open now */
    size_t nkeys;
} sure;

static void sure_ws(sure *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool cont(unsigned char c)
{
    return c >= 0x80 && c <= 0xbf;
}

/* Bytes of the well-formed UTF-8 sequence at p (RFC 3629: no overlong form,
 * no surrogate, nothing past U+10FFFF), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    size_t avail = (size_t)(end - p);
    unsigned char c = p[0];
    if (c >= 0xc2 && c <= 0xdf)
        return avail >= 2 && cont(p[1]) ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (avail < 3 || !cont(p[2]))
            return 0;
        unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return p[1] >= lo && p[1] <= hi ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (avail < 4 || !cont(p[2]) || !cont(p[3]))
            return 0;
        unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return p[1] >= lo && p[1] <= hi ? 4 : 0;
    }
    return 0;
}

/* The string token at s->p (its opening quote); *escaped: it holds one. */
static bool sure_string(sure *s, bool *escaped)
{
    const unsigned char *p = s->p + 1, *end = s->end;
    *escaped = false;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            s->p = p + 1;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c < 0x80 && c != '\\') {
            p++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(p, end);
            if (k == 0)
                return false;
            p += k;
            continue;
        }
        *escaped = true;
        if (end - p < 2)
            return false;
        unsigned char e = p[1];
        if (e == 'u') {
            if (end - p < 6)
                return false;
            int v = 0;
            for (int k = 2; k < 6; k++) {
                int h = hex_digit(p[k]);
                if (h < 0)
                    return false;
                v = v * 16 + h;
            }
            /* Surrogate pairs and NUL: jansson's rules, jansson's verdict. */
            if (v == 0 || (v >= 0xd800 && v <= 0xdfff))
                return false;
            p += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
            p += 2;
        } else {
            return false;
        }
    }
    return false;
}

static bool sure_number(sure *s)
{
    const unsigned char *p = s->p, *end = s->end, *start = s->p;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return false;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (p < end && *p == '.') {
        const unsigned char *f = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == f)
            return false;
    }
    /* Without an exponent and within 300 characters a number cannot pass a
     * double's range, which jansson refuses. */
    if ((p < end && (*p == 'e' || *p == 'E')) || p - start > SURE_MAX_NUMBER)
        return false;
    s->p = p;
    return true;
}

static bool sure_word(sure *s, const char *w, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
        return false;
    s->p += n;
    return true;
}

static bool sure_value(sure *s, unsigned depth);

/* A member's value, then ',' (1: another member follows) or the container's
 * close (0: consumed); -1 for anything else. Objects and arrays share it. */
static int sure_member_end(sure *s, unsigned depth, char close)
{
    if (!sure_value(s, depth))
        return -1;
    sure_ws(s);
    if (s->p < s->end && *s->p == ',') {
        s->p++;
        sure_ws(s);
        return 1;
    }
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    return -1;
}

static bool sure_object(sure *s, unsigned depth)
{
    size_t base = s->nkeys;
    s->p++;
    sure_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return true;
    }
    for (;;) {
        if (s->p >= s->end || *s->p != '"' || s->nkeys == SURE_MAX_KEYS)
            return false;
        const unsigned char *k = s->p;
        bool escaped;
        if (!sure_string(s, &escaped) || escaped)
            return false;
        /* Unescaped, the raw tokens compare as the decoded names do. */
        rawjson_span key = {(const char *)k, (size_t)(s->p - k)};
        for (size_t i = base; i < s->nkeys; i++)
            if (s->keys[i].len == key.len && memcmp(s->keys[i].p, key.p, key.len) == 0)
                return false;
        s->keys[s->nkeys++] = key;
        sure_ws(s);
        if (s->p >= s->end || *s->p != ':')
            return false;
        s->p++;
        sure_ws(s);
        int next = sure_member_end(s, depth, '}');
        if (next > 0)
            continue;
        if (next == 0)
            s->nkeys = base;
        return next == 0;
    }
}

static bool sure_array(sure *s, unsigned depth)
{
    s->p++;
    sure_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return true;
    }
    int next;
    do
        next = sure_member_end(s, depth, ']');
    while (next > 0);
    return next == 0;
}

static bool sure_value(sure *s, unsigned depth)
{
    if (s->p >= s->end)
        return false;
    bool escaped;
    switch (*s->p) {
    case '{':
        return depth < SURE_MAX_DEPTH && sure_object(s, depth + 1);
    case '[':
        return depth < SURE_MAX_DEPTH && sure_array(s, depth + 1);
    case '"':
        return sure_string(s, &escaped);
    case 't':
        return sure_word(s, "true", 4);
    case 'f':
        return sure_word(s, "false", 5);
    case 'n':
        return sure_word(s, "null", 4);
    default:
        return sure_number(s);
    }
}

bool body_surely_json(const char *text, size_t len)
{
    sure s = {.p = (const unsigned char *)text, .end = (const unsigned char *)text + len, .nkeys = 0};
    sure_ws(&s);
    if (!sure_value(&s, 0))
        return false;
    sure_ws(&s);
    return s.p == s.end;
}

bool body_check(const http_request *req, http_response *res, bool allow_empty)
{
    if (!body_blank(req) && body_surely_json(req->body, req->body_len))
        return true;
    json_t *v = body_parse(req, res, allow_empty);
    json_decref(v);
    return v != NULL;
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
