/* jdoc: see jdoc.h. A recursive-descent reader; depth is bounded so a
 * hostile answer cannot exhaust the stack. */
#include "jdoc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JD_MAX_DEPTH 512

typedef struct parser {
    const char *begin, *s, *end;
    char *err;
    size_t errlen;
    int depth;
} parser;

static void fail(parser *p, const char *what)
{
    if (p->err != NULL && p->errlen > 0 && p->err[0] == '\0')
        snprintf(p->err, p->errlen, "%s at byte %zu", what, (size_t)(p->s - p->begin));
}

static void skip_ws(parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static void node_free(jd *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->n; i++) {
        node_free(v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v->owned);
    free(v);
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote; decodes into a malloc'd buffer. */
static char *parse_string(parser *p, size_t *outlen)
{
    p->s++;
    const char *start = p->s;
    size_t cap = 0;
    while (p->s < p->end && *p->s != '"') {
        if (*p->s == '\\')
            p->s++;
        p->s++;
        cap++;
    }
    if (p->s >= p->end) {
        fail(p, "unterminated string");
        return NULL;
    }
    char *out = malloc(cap * 4 + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    const char *s = start;
    while (s < p->s) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20) {
            free(out);
            fail(p, "control character in string");
            return NULL;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            s++;
            continue;
        }
        s++;
        switch (*s) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (p->s - s < 5 || hex4(s + 1, &cp) != 0) {
                free(out);
                fail(p, "bad \\u escape");
                return NULL;
            }
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p->s - s >= 7 && s[1] == '\\' && s[2] == 'u' &&
                hex4(s + 3, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            o += put_utf8(out + o, cp);
            break;
        }
        default:
            free(out);
            fail(p, "bad escape");
            return NULL;
        }
        s++;
    }
    out[o] = '\0';
    *outlen = o;
    p->s++; /* the closing quote */
    return out;
}

static jd *parse_value(parser *p);

static int grow(jd *v, size_t *cap, bool keys)
{
    if (v->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    jd **items = realloc(v->items, nc * sizeof *items);
    if (items == NULL)
        return -1;
    v->items = items;
    if (keys) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (k == NULL)
            return -1;
        v->keys = k;
    }
    *cap = nc;
    return 0;
}

static jd *parse_container(parser *p, jd *v, bool object)
{
    char close = object ? '}' : ']';
    size_t cap = 0;
    if (++p->depth > JD_MAX_DEPTH) {
        fail(p, "nested too deep");
        return NULL;
    }
    p->s++;
    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        p->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            size_t kl;
            if (p->s >= p->end || *p->s != '"') {
                fail(p, "expected a member name");
                return NULL;
            }
            key = parse_string(p, &kl);
            if (key == NULL)
                return NULL;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') {
                free(key);
                fail(p, "expected ':'");
                return NULL;
            }
            p->s++;
        }
        jd *item = parse_value(p);
        if (item == NULL || grow(v, &cap, object) != 0) {
            free(key);
            node_free(item);
            return NULL;
        }
        v->items[v->n] = item;
        if (object)
            v->keys[v->n] = key;
        v->n++;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            p->depth--;
            return v;
        }
        fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        return NULL;
    }
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static jd *parse_value(parser *p)
{
    skip_ws(p);
    if (p->s >= p->end) {
        fail(p, "unexpected end");
        return NULL;
    }
    jd *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->raw = p->s;
    jd *ok = v;
    char c = *p->s;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JD_OBJECT : JD_ARRAY;
        ok = parse_container(p, v, c == '{');
    } else if (c == '"') {
        v->type = JD_STRING;
        v->str = parse_string(p, &v->strlen);
        ok = v->str != NULL ? v : NULL;
    } else if (p->end - p->s >= 4 && memcmp(p->s, "true", 4) == 0) {
        v->type = JD_BOOL;
        v->boolean = true;
        p->s += 4;
    } else if (p->end - p->s >= 5 && memcmp(p->s, "false", 5) == 0) {
        v->type = JD_BOOL;
        p->s += 5;
    } else if (p->end - p->s >= 4 && memcmp(p->s, "null", 4) == 0) {
        v->type = JD_NULL;
        p->s += 4;
    } else if (c == '-' || is_digit(c)) {
        v->type = JD_NUMBER;
        if (*p->s == '-')
            p->s++;
        if (p->s >= p->end || !is_digit(*p->s))
            ok = NULL;
        else if (*p->s == '0')
            p->s++;
        else
            while (p->s < p->end && is_digit(*p->s))
                p->s++;
        if (ok != NULL && p->s < p->end && *p->s == '.') {
            p->s++;
            if (p->s >= p->end || !is_digit(*p->s))
                ok = NULL;
            while (p->s < p->end && is_digit(*p->s))
                p->s++;
        }
        if (ok != NULL && p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
            p->s++;
            if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
                p->s++;
            if (p->s >= p->end || !is_digit(*p->s))
                ok = NULL;
            while (p->s < p->end && is_digit(*p->s))
                p->s++;
        }
        if (ok == NULL)
            fail(p, "bad number");
    } else {
        fail(p, "unexpected character");
        ok = NULL;
    }
    if (ok == NULL) {
        node_free(v);
        return NULL;
    }
    v->rawlen = (size_t)(p->s - v->raw);
    return v;
}

jd *jd_parse(const char *text, size_t len, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (text == NULL)
        return NULL;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, text, len);
    copy[len] = '\0';
    parser p = {.begin = copy, .s = copy, .end = copy + len, .err = err, .errlen = errlen};
    jd *root = parse_value(&p);
    if (root != NULL) {
        skip_ws(&p);
        if (p.s != p.end) {
            fail(&p, "trailing characters");
            node_free(root);
            root = NULL;
        }
    }
    if (root == NULL) {
        free(copy);
        return NULL;
    }
    root->owned = copy;
    return root;
}

void jd_free(jd *root) { node_free(root); }

const jd *jd_get(const jd *obj, const char *key)
{
    if (obj == NULL || obj->type != JD_OBJECT || key == NULL)
        return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

const jd *jd_at(const jd *arr, size_t i)
{
    if (arr == NULL || arr->type != JD_ARRAY || i >= arr->n)
        return NULL;
    return arr->items[i];
}

const jd *jd_pointer(const jd *v, const char *ptr)
{
    if (ptr == NULL)
        return NULL;
    while (v != NULL && *ptr != '\0') {
        if (*ptr != '/')
            return NULL;
        ptr++;
        const char *end = strchr(ptr, '/');
        size_t len = end != NULL ? (size_t)(end - ptr) : strlen(ptr);
        char *tok = malloc(len + 1);
        if (tok == NULL)
            return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (ptr[i] == '~' && i + 1 < len && (ptr[i + 1] == '0' || ptr[i + 1] == '1')) {
                tok[o++] = ptr[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[o++] = ptr[i];
            }
        }
        tok[o] = '\0';
        if (v->type == JD_OBJECT) {
            v = jd_get(v, tok);
        } else if (v->type == JD_ARRAY) {
            char *e;
            unsigned long idx = strtoul(tok, &e, 10);
            v = (o > 0 && *e == '\0' && (tok[0] != '0' || o == 1)) ? jd_at(v, idx) : NULL;
        } else {
            v = NULL;
        }
        free(tok);
        ptr += len;
    }
    return v;
}

const char *jd_str(const jd *obj, const char *key)
{
    const jd *v = jd_get(obj, key);
    return v != NULL && v->type == JD_STRING ? v->str : NULL;
}

bool jd_true(const jd *obj, const char *key)
{
    const jd *v = jd_get(obj, key);
    return v != NULL && v->type == JD_BOOL && v->boolean;
}

long long jd_int(const jd *obj, const char *key, long long def)
{
    const jd *v = jd_get(obj, key);
    if (v == NULL || v->type != JD_NUMBER || v->rawlen > 19)
        return def;
    long long r = 0;
    size_t i = 0;
    bool neg = v->raw[0] == '-';
    if (neg)
        i++;
    for (; i < v->rawlen; i++) {
        if (!is_digit(v->raw[i]))
            return def;
        r = r * 10 + (v->raw[i] - '0');
    }
    return neg ? -r : r;
}

char *jd_text(const jd *v)
{
    if (v == NULL)
        return NULL;
    char *t = malloc(v->rawlen + 1);
    if (t != NULL) {
        memcpy(t, v->raw, v->rawlen);
        t[v->rawlen] = '\0';
    }
    return t;
}

/* A number's digits without leading or trailing zeros and the decimal
 * exponent of its first digit: equal numbers give equal forms. */
typedef struct decimal {
    bool neg;
    char digits[512];
    size_t ndigits;
    long long exp;
    bool ok;
} decimal;

static void decimal_of(const char *s, size_t len, decimal *d)
{
    memset(d, 0, sizeof *d);
    size_t i = 0;
    if (i < len && s[i] == '-') {
        d->neg = true;
        i++;
    }
    long long point = 0; /* digits before the point */
    bool seen_point = false, leading = true;
    for (; i < len && (is_digit(s[i]) || s[i] == '.'); i++) {
        if (s[i] == '.') {
            seen_point = true;
            continue;
        }
        if (!seen_point)
            point++;
        if (leading && s[i] == '0') { /* a leading zero moves the first digit right */
            point--;
            continue;
        }
        leading = false;
        if (d->ndigits >= sizeof d->digits)
            return; /* too long to compare: ok stays false */
        d->digits[d->ndigits++] = s[i];
    }
    long long e = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        for (; i < len && is_digit(s[i]); i++)
            if (e < 1000000000LL)
                e = e * 10 + (s[i] - '0');
        if (eneg)
            e = -e;
    }
    while (d->ndigits > 0 && d->digits[d->ndigits - 1] == '0')
        d->ndigits--;
    d->exp = point + e;
    if (d->ndigits == 0) { /* zero: sign and exponent do not matter */
        d->neg = false;
        d->exp = 0;
    }
    d->ok = true;
}

bool jd_number_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    decimal x, y;
    decimal_of(a, alen, &x);
    decimal_of(b, blen, &y);
    if (!x.ok || !y.ok)
        return alen == blen && memcmp(a, b, alen) == 0;
    return x.neg == y.neg && x.exp == y.exp && x.ndigits == y.ndigits && memcmp(x.digits, y.digits, x.ndigits) == 0;
}
