/* jbuf: see jbuf.h. */
#include "jbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(jbuf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap : 64;
    while (nc < b->len + more + 1)
        nc *= 2;
    char *s = realloc(b->s, nc);
    if (s == NULL) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = nc;
    return true;
}

void jbuf_raw(jbuf *b, const char *s, size_t len)
{
    if (!reserve(b, len))
        return;
    memcpy(b->s + b->len, s, len);
    b->len += len;
    b->s[b->len] = '\0';
}

void jbuf_add(jbuf *b, const char *s) { jbuf_raw(b, s, strlen(s)); }

void jbuf_printf(jbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void jbuf_str(jbuf *b, const char *s)
{
    if (s == NULL) {
        jbuf_add(b, "null");
        return;
    }
    jbuf_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': jbuf_add(b, "\\\""); break;
        case '\\': jbuf_add(b, "\\\\"); break;
        case '\n': jbuf_add(b, "\\n"); break;
        case '\r': jbuf_add(b, "\\r"); break;
        case '\t': jbuf_add(b, "\\t"); break;
        default:
            if (*p < 0x20)
                jbuf_printf(b, "\\u%04x", *p);
            else
                jbuf_raw(b, (const char *)p, 1);
        }
    }
    jbuf_add(b, "\"");
}

void jbuf_pct(jbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~') {
            jbuf_raw(b, (const char *)p, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            jbuf_raw(b, e, 3);
        }
    }
}

void jbuf_double(jbuf *b, double d)
{
    char t[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, d);
        if (strtod(t, NULL) == d)
            break;
    }
    jbuf_add(b, t);
}

char *jbuf_take(jbuf *b)
{
    char *s = b->oom ? NULL : b->s != NULL ? b->s : strdup("");
    if (b->oom)
        free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    return s;
}

void jbuf_free(jbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}
