/* rawjson: spans of validated JSON text (see rawjson.h). Knows nothing of
 * HTTP or the engine; owns no memory. */
#include "rawjson.h"

#include <string.h>

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

rawjson_span rawjson_trim(rawjson_span s)
{
    while (s.len > 0 && is_ws(s.p[0])) {
        s.p++;
        s.len--;
    }
    while (s.len > 0 && is_ws(s.p[s.len - 1]))
        s.len--;
    return s;
}

/* Length of the string token at p (quotes included), 0 if unterminated. */
static size_t string_len(const char *p, const char *end)
{
    const char *q = p + 1;
    while (q < end) {
        if (*q == '\\')
            q += 2;
        else if (*q == '"')
            return (size_t)(q + 1 - p);
        else
            q++;
    }
    return 0;
}

size_t rawjson_value_len(rawjson_span s)
{
    const char *p = s.p, *end = s.p + s.len;
    if (p >= end)
        return 0;
    if (*p == '"')
        return string_len(p, end);
    if (*p != '[' && *p != '{') {
        /* number, true, false, null: runs to the next structural byte */
        const char *q = p;
        while (q < end && !is_ws(*q) && *q != ',' && *q != ']' && *q != '}' && *q != ':')
            q++;
        return (size_t)(q - p);
    }
    /* Containers: count depth, skipping strings (they may hold brackets). */
    int depth = 0;
    for (const char *q = p; q < end;) {
        if (*q == '"') {
            size_t n = string_len(q, end);
            if (n == 0)
                return 0;
            q += n;
            continue;
        }
        if (*q == '[' || *q == '{')
            depth++;
        else if (*q == ']' || *q == '}') {
            if (--depth == 0)
                return (size_t)(q + 1 - p);
        }
        q++;
    }
    return 0;
}

bool rawjson_open(rawjson_iter *it, rawjson_span s, char kind)
{
    s = rawjson_trim(s);
    if (s.len < 2 || s.p[0] != kind)
        return false;
    it->p = s.p + 1;
    it->end = s.p + s.len - 1; /* the closing bracket */
    it->object = kind == '{';
    it->first = true;
    return true;
}

static void skip_ws(rawjson_iter *it)
{
    while (it->p < it->end && is_ws(*it->p))
        it->p++;
}

bool rawjson_next(rawjson_iter *it, rawjson_span *key, rawjson_span *value)
{
    skip_ws(it);
    if (!it->first) {
        if (it->p >= it->end || *it->p != ',')
            return false;
        it->p++;
        skip_ws(it);
    }
    if (it->p >= it->end)
        return false;
    it->first = false;
    if (it->object) {
        size_t klen = string_len(it->p, it->end);
        if (*it->p != '"' || klen == 0)
            return false;
        if (key != NULL)
            *key = (rawjson_span){it->p, klen};
        it->p += klen;
        skip_ws(it);
        if (it->p >= it->end || *it->p != ':')
            return false;
        it->p++;
        skip_ws(it);
    } else if (key != NULL) {
        *key = (rawjson_span){NULL, 0};
    }
    size_t vlen = rawjson_value_len((rawjson_span){it->p, (size_t)(it->end - it->p)});
    if (vlen == 0)
        return false;
    *value = (rawjson_span){it->p, vlen};
    it->p += vlen;
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

bool rawjson_key_is(rawjson_span key, const char *name)
{
    if (key.len < 2 || key.p[0] != '"')
        return false;
    const char *p = key.p + 1, *end = key.p + key.len - 1;
    const char *n = name;
    while (p < end) {
        char c = *p++;
        if (c == '\\') {
            if (p >= end)
                return false;
            char e = *p++;
            switch (e) {
            case 'u': {
                if (end - p < 4)
                    return false;
                int v = hex4(p);
                p += 4;
                if (v < 1 || v > 0x7f) /* our names are ASCII: anything else differs */
                    return false;
                c = (char)v;
                break;
            }
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            default: c = e; break; /* \" \\ \/ */
            }
        }
        if (*n == '\0' || *n != c)
            return false;
        n++;
    }
    return *n == '\0';
}

bool rawjson_member(rawjson_span s, const char *name, rawjson_span *value)
{
    rawjson_iter it;
    if (!rawjson_open(&it, s, '{'))
        return false;
    rawjson_span k, v;
    while (rawjson_next(&it, &k, &v)) {
        if (rawjson_key_is(k, name)) {
            *value = v;
            return true;
        }
    }
    return false;
}

bool rawjson_object_inner(rawjson_span s, rawjson_span *inner)
{
    s = rawjson_trim(s);
    if (s.len < 2 || s.p[0] != '{' || s.p[s.len - 1] != '}')
        return false;
    *inner = rawjson_trim((rawjson_span){s.p + 1, s.len - 2});
    return true;
}

bool rawjson_string_info(rawjson_span s, size_t *bytes, bool *has_nul)
{
    *bytes = 0;
    *has_nul = false;
    if (s.len < 2 || s.p[0] != '"' || s.p[s.len - 1] != '"')
        return false;
    const char *p = s.p + 1, *end = s.p + s.len - 1;
    while (p < end) {
        if (*p != '\\') {
            (*bytes)++;
            p++;
            continue;
        }
        if (end - p < 2)
            return false;
        if (p[1] != 'u') {
            (*bytes)++;
            p += 2;
            continue;
        }
        if (end - p < 6)
            return false;
        int v = hex4(p + 2);
        if (v < 0)
            return false;
        p += 6;
        if (v >= 0xd800 && v <= 0xdbff && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            int lo = hex4(p + 2);
            if (lo >= 0xdc00 && lo <= 0xdfff) { /* a surrogate pair: one 4-byte character */
                *bytes += 4;
                p += 6;
                continue;
            }
        }
        if (v == 0)
            *has_nul = true;
        *bytes += v < 0x80 ? 1 : v < 0x800 ? 2 : 3;
    }
    return true;
}

long rawjson_array_count(rawjson_span s)
{
    rawjson_iter it;
    if (!rawjson_open(&it, s, '['))
        return -1;
    long n = 0;
    rawjson_span v;
    while (rawjson_next(&it, NULL, &v))
        n++;
    return n;
}

rawjson_shape rawjson_measure(rawjson_span s, size_t max_values, size_t max_depth)
{
    rawjson_shape shape = {0, 0};
    size_t depth = 0;
    bool in_scalar = false; /* inside a number or literal: one value however long */
    const char *p = s.p, *end = s.p + s.len;
    while (p < end && shape.values <= max_values && shape.depth <= max_depth) {
        char c = *p;
        if (c == '"') {
            /* Skipped whole, escapes included: brackets in text are text. */
            size_t n = string_len(p, end);
            shape.values++;
            in_scalar = false;
            if (n == 0)
                break;
            p += n;
            continue;
        }
        if (c == '[' || c == '{') {
            shape.values++;
            if (++depth > shape.depth)
                shape.depth = depth;
            in_scalar = false;
        } else if (c == ']' || c == '}') {
            if (depth > 0)
                depth--;
            in_scalar = false;
        } else if (c == ',' || c == ':' || is_ws(c)) {
            in_scalar = false;
        } else if (!in_scalar) {
            shape.values++;
            in_scalar = true;
        }
        p++;
    }
    return shape;
}
