/* h1: the one adapter between the edge and its HTTP/1.1 parser (Debian's
 * libhttp-parser today; llhttp where the distribution ships it: only h1.c
 * changes). Nothing else includes the parser's header.
 *
 * Strict by construction: the head (request line and headers) is checked
 * byte by byte here before the parser sees it, because http_parser built
 * without HTTP_PARSER_STRICT takes a space inside a header name
 * ("Content-Length : 5" becomes an unknown header, and the body a second
 * request: smuggling). Refused with 400: a NUL anywhere in the head, a CR not
 * followed by LF, a header name that is not a token or is followed by
 * anything but ':' (space or tab before the colon), a folded line, a control
 * byte in a value, two Content-Length (equal or not), Content-Length with
 * Transfer-Encoding, a coding other than exactly "chunked". A request line
 * past H1_MAX_LINE is 414, a head past H1_MAX_HEAD or H1_MAX_HEADERS 431, a
 * version other than 1.0/1.1 505. Header values are kept with their true
 * length (a value is never cut at a NUL: there is none).
 *
 * The head is parsed in one piece once its end is in the buffer (pointers
 * into that buffer stay valid until the request ends); the body is fed as it
 * arrives, chunked or not, and handed out decoded. */
#ifndef QUEEN_H1_H
#define QUEEN_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Request line: a 512-byte key fully percent-encoded is 1.5 KB of path. */
#define H1_MAX_LINE 8192
/* The whole head: tokens of up to 8 KB with room for the rest. */
#define H1_MAX_HEAD 32768
#define H1_MAX_HEADERS 64
/* Chunk framing (a size line with its extensions, or the trailers) between
 * two pieces of body: more is not a body, it is a way to hold a buffer. */
#define H1_MAX_FRAMING 4096

typedef struct h1_header {
    const char *name;
    size_t name_len;
    const char *value; /* leading and trailing blanks taken off */
    size_t value_len;
} h1_header;

typedef struct h1_error {
    unsigned status;    /* 400, 413, 414, 431, 505 */
    const char *reason; /* the envelope's reason */
    const char *detail;
} h1_error;

typedef struct h1_body_sink {
    /* One piece of decoded body; false stops the parse (the sink refused
     * the body: its answer is the sink's). */
    bool (*data)(void *ctx, const char *p, size_t n);
    void *ctx;
} h1_body_sink;

typedef struct h1 h1;

/* A parser for one request at a time; NULL when memory is short. */
h1 *h1_new(void);
void h1_free(h1 *p);
/* Ready for the next request on the connection. */
void h1_reset(h1 *p);

/* Looks for a whole head in buf[0..len): > 0 is its length (the head is
 * parsed, its fields readable below), 0 that more bytes are needed, -1 a
 * refusal in *err. Pointers into buf stay valid while buf does. */
long h1_head(h1 *p, char *buf, size_t len, h1_error *err);

/* The parsed head. */
const char *h1_method(const h1 *p);      /* NUL-terminated */
const char *h1_target(const h1 *p);      /* NUL-terminated, as sent */
bool h1_http10(const h1 *p);
bool h1_keep_alive(const h1 *p);         /* what the client asked, by version and Connection */
bool h1_expect_continue(const h1 *p);
bool h1_chunked(const h1 *p);
long long h1_content_length(const h1 *p); /* -1: none */
size_t h1_header_count(const h1 *p);
const h1_header *h1_header_at(const h1 *p, size_t i);
/* How many times header `name` (case-insensitive) appears, and the first
 * one's value and length ("" and 0 when none). */
unsigned h1_header_find(const h1 *p, const char *name, const char **value, size_t *len);

/* Whether the request has a body to read after its head. */
bool h1_has_body(const h1 *p);
/* Feeds bytes after the head: returns how many were taken (the rest belong
 * to the next request) and sets *done at the body's end; -1 is a refusal in
 * *err, or the sink's (err->status 0). */
long h1_body(h1 *p, const char *data, size_t n, const h1_body_sink *sink, bool *done, h1_error *err);

#endif
