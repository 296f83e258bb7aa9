/* jbuf: a growing text buffer for building request bodies and URLs. Raw
 * JSON given by the caller (values, payloads, ops) is appended as it is, so
 * its numbers are never reinterpreted; names are escaped as JSON strings or
 * percent-encoded for paths and queries. An allocation failure is sticky:
 * jbuf_take then returns NULL. */
#ifndef QUEEN_CLIENT_JBUF_H
#define QUEEN_CLIENT_JBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct jbuf {
    char *s;
    size_t len, cap;
    bool oom;
} jbuf;

void jbuf_raw(jbuf *b, const char *s, size_t len);
void jbuf_add(jbuf *b, const char *s);
void jbuf_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string literal (quotes included); NULL appends null. */
void jbuf_str(jbuf *b, const char *s);
/* s percent-encoded for one path segment or query value: everything but
 * the unreserved characters, so '/' and '%' inside a key stay inside it. */
void jbuf_pct(jbuf *b, const char *s);
/* A double as the shortest text that reads back as the same double. */
void jbuf_double(jbuf *b, double d);
/* The text (malloc'd, NUL-terminated; "" when empty), or NULL after an
 * allocation failure; b is reset either way. */
char *jbuf_take(jbuf *b);
void jbuf_free(jbuf *b);

#endif
