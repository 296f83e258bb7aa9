/* h1: see h1.h. The only file that knows http_parser. */
#include "h1.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct h1 {
    http_parser hp;
    /* The head, as parsed. */
    char *method;
    char *target;
    size_t target_len;
    h1_header headers[H1_MAX_HEADERS];
    size_t nheaders;
    bool overflow;      /* more than H1_MAX_HEADERS */
    bool http10, keep_alive, expect_continue, chunked, has_body;
    long long content_length;
    bool head_done;     /* http_parser reached the end of the headers */
    /* Where the head's check stopped (offsets into the buffer, which may
     * move between calls but keeps its bytes in place): a head that
     * trickles in is not checked again from its start per piece; a line
     * that arrives in pieces is read once as it comes, once at its LF. */
    size_t scan_start, scan_pos, scan_line, scan_lines;
    bool scan_started;
    bool message_done;  /* ... and of the message */
    /* The body feed. */
    const h1_body_sink *sink;
    const char *cursor; /* where the framing run being counted starts in this feed */
    size_t framing;     /* framing bytes since the last piece of body */
    bool sink_refused, framing_over;
};

/* RFC 9110 tchar: letters, digits and !#$%&'*+-.^_`|~ (one load a byte;
 * header names are read on every request). Bytes from 0x80 are not. */
static const unsigned char tchar[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0,
};

static bool is_tchar(unsigned char c)
{
    return tchar[c] != 0;
}

/* ---- http_parser callbacks ------------------------------------------------ */

static int on_url(http_parser *hp, const char *at, size_t len)
{
    h1 *p = hp->data;
    p->target = (char *)at;
    p->target_len = len;
    return 0;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
    h1 *p = hp->data;
    if (p->nheaders >= H1_MAX_HEADERS) {
        p->overflow = true;
        return 0;
    }
    p->headers[p->nheaders++] = (h1_header){.name = at, .name_len = len, .value = at + len, .value_len = 0};
    return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
    h1 *p = hp->data;
    if (p->overflow || p->nheaders == 0)
        return 0;
    h1_header *h = &p->headers[p->nheaders - 1];
    h->value = at;
    h->value_len = len;
    return 0;
}

static int on_headers_complete(http_parser *hp)
{
    h1 *p = hp->data;
    p->head_done = true;
    p->has_body = (hp->flags & F_CHUNKED) != 0 || (hp->flags & F_CONTENTLENGTH && hp->content_length > 0);
    p->chunked = (hp->flags & F_CHUNKED) != 0;
    p->content_length = hp->flags & F_CONTENTLENGTH ? (long long)hp->content_length : -1;
    p->keep_alive = http_should_keep_alive(hp) != 0;
    return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
    h1 *p = hp->data;
    if (p->cursor != NULL && at > p->cursor)
        p->framing += (size_t)(at - p->cursor);
    if (p->framing > H1_MAX_FRAMING) {
        p->framing_over = true;
        return -1;
    }
    p->framing = 0;
    p->cursor = at + len;
    if (p->sink != NULL && !p->sink->data(p->sink->ctx, at, len)) {
        p->sink_refused = true;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *hp)
{
    h1 *p = hp->data;
    p->message_done = true;
    /* Stop here: what follows is the next request, read after this one's
     * answer (pipelined requests are answered in order). */
    http_parser_pause(hp, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- life ------------------------------------------------------------------- */

h1 *h1_new(void)
{
    h1 *p = malloc(sizeof *p);
    if (p != NULL) {
        p->method = NULL;
        h1_reset(p);
    }
    return p;
}

void h1_free(h1 *p)
{
    if (p == NULL)
        return;
    free(p->method);
    free(p);
}

void h1_reset(h1 *p)
{
    free(p->method);
    memset(p, 0, sizeof *p);
    http_parser_init(&p->hp, HTTP_REQUEST);
    p->hp.data = p;
    p->content_length = -1;
}

/* ---- the head ----------------------------------------------------------------- */

static long refuse(h1_error *err, unsigned status, const char *reason, const char *detail)
{
    err->status = status;
    err->reason = reason;
    err->detail = detail;
    return -1;
}

/* The refusal for the first NUL or bare CR in [s, e) (inside a line every
 * CR is bare: its LF would have ended the line); 0 when there is none. The
 * line checks refuse these bytes too, under their own names; this names the
 * byte instead, as a scan of the bytes in their order would. */
static long byte_refusal(const char *s, const char *e, h1_error *err)
{
    for (; s < e; s++) {
        if (*s == '\0')
            return refuse(err, 400, "bad_header", "a NUL byte in the request line or a header");
        if (*s == '\r')
            return refuse(err, 400, "bad_header", "a CR not followed by LF");
    }
    return 0;
}

/* The request line [s, e): method SP target SP HTTP/d.d. */
static long check_request_line(const char *s, const char *e, h1_error *err)
{
    const char *m = s;
    while (m < e && is_tchar((unsigned char)*m))
        m++;
    if (m == s || m >= e || *m != ' ')
        return refuse(err, 400, "bad_request_line", "the request line is not: method, space, target, space, version");
    const char *t = m + 1, *te = t;
    while (te < e && (unsigned char)*te > ' ' && *te != 0x7f)
        te++;
    if (te == t || te >= e || *te != ' ')
        return refuse(err, 400, "bad_request_line", "the request line is not: method, space, target, space, version");
    const char *v = te + 1;
    if (e - v != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
        v[7] > '9')
        return refuse(err, 400, "bad_request_line", "the request line does not end with HTTP/<digit>.<digit>");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return refuse(err, 505, "http_version_not_supported", "this broker speaks HTTP/1.0 and HTTP/1.1");
    return 0;
}

/* A header line [s, e): token ':' value, value of VCHAR, obs-text, SP, HT. */
static long check_header_line(const char *s, const char *e, h1_error *err)
{
    if (*s == ' ' || *s == '\t')
        return refuse(err, 400, "bad_header", "a header line begins with a space or tab (obsolete line folding)");
    const char *n = s;
    while (n < e && is_tchar((unsigned char)*n))
        n++;
    if (n == s || n >= e || *n != ':')
        return refuse(err, 400, "bad_header",
                      "a header name is not a token followed at once by ':' (no space or tab before the colon)");
    for (const char *v = n + 1; v < e; v++) {
        unsigned char c = (unsigned char)*v;
        if ((c < ' ' && c != '\t') || c == 0x7f)
            return refuse(err, 400, "bad_header", "a header value holds a control character");
    }
    return 0;
}

static bool name_is(const h1_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

/* Trims blanks around a value (the parser keeps the trailing ones). */
static void trim(h1_header *h)
{
    while (h->value_len > 0 && (h->value[0] == ' ' || h->value[0] == '\t')) {
        h->value++;
        h->value_len--;
    }
    while (h->value_len > 0 && (h->value[h->value_len - 1] == ' ' || h->value[h->value_len - 1] == '\t'))
        h->value_len--;
}

/* Framing the parser would settle one way and a proxy another: refused. */
static long check_framing(h1 *p, h1_error *err)
{
    unsigned cl = 0, te = 0, host = 0;
    bool chunked_only = true;
    for (size_t i = 0; i < p->nheaders; i++) {
        h1_header *h = &p->headers[i];
        trim(h);
        if (name_is(h, "content-length")) {
            cl++;
            if (h->value_len == 0 || h->value_len > 18)
                return refuse(err, 400, "bad_framing", "Content-Length is not a number");
            for (size_t k = 0; k < h->value_len; k++)
                if (h->value[k] < '0' || h->value[k] > '9')
                    return refuse(err, 400, "bad_framing", "Content-Length is not a number");
        } else if (name_is(h, "transfer-encoding")) {
            te++;
            if (h->value_len != 7 || strncasecmp(h->value, "chunked", 7) != 0)
                chunked_only = false;
        } else if (name_is(h, "host")) {
            host++;
        } else if (name_is(h, "expect")) {
            if (h->value_len == 12 && strncasecmp(h->value, "100-continue", 12) == 0)
                p->expect_continue = true;
        }
    }
    if (cl > 1)
        return refuse(err, 400, "bad_framing", "more than one Content-Length header");
    if (cl > 0 && te > 0)
        return refuse(err, 400, "bad_framing", "both Content-Length and Transfer-Encoding");
    if (te > 1 || !chunked_only)
        return refuse(err, 400, "bad_framing", "Transfer-Encoding must be exactly chunked");
    if (host != 1 && !p->http10)
        return refuse(err, 400, "bad_framing", "an HTTP/1.1 request needs exactly one Host header");
    return 0;
}

long h1_head(h1 *p, char *buf, size_t len, h1_error *err)
{
    /* Empty lines before the request line are allowed (RFC 9112 2.2). */
    size_t start = p->scan_start;
    if (!p->scan_started) {
        start = p->scan_pos;
        while (start < len && (buf[start] == '\r' || buf[start] == '\n')) {
            if (buf[start] == '\r' && start + 1 < len && buf[start + 1] != '\n')
                return refuse(err, 400, "bad_request_line", "a CR not followed by LF");
            if (buf[start] == '\r' && start + 1 >= len)
                break;
            start++;
        }
        p->scan_pos = start;
        if (start >= len || buf[start] == '\r')
            return start >= H1_MAX_HEAD ? refuse(err, 431, "headers_too_large", "the request head is too large") : 0;
        p->scan_started = true;
        p->scan_start = p->scan_line = start;
    }
    /* One pass: each line is found with memchr and read once by its own
     * check, which refuses every byte a line may not hold, NUL and CR
     * included (the reason then named by the byte, as the bytes came). A
     * line whose LF has not come yet is checked byte by byte as it arrives,
     * so a NUL or an oversize line is refused before its end. */
    size_t line = p->scan_line, nlines = p->scan_lines, end = 0, i = p->scan_pos;
    const char *lf;
    while (i < len && (lf = memchr(buf + i, '\n', len - i)) != NULL) {
        size_t at = (size_t)(lf - buf);
        const char *s = buf + line, *e = lf;
        if (e > s && e[-1] == '\r')
            e--;
        if (e == s && nlines > 0) {
            end = at + 1;
            break;
        }
        /* The first byte of the line at or past a limit: the request line's
         * (414, checked first) or the head's (431). */
        size_t lim = H1_MAX_HEAD;
        unsigned lim_status = 431;
        if (nlines == 0 && start + H1_MAX_LINE <= lim) {
            lim = start + H1_MAX_LINE;
            lim_status = 414;
        }
        if ((size_t)(e - buf) > lim) {
            const char *first = buf + lim > s ? buf + lim : s;
            if (byte_refusal(s, first + 1, err) < 0)
                return -1;
            return lim_status == 414 ? refuse(err, 414, "uri_too_long", "the request line is longer than 8192 bytes")
                                     : refuse(err, 431, "headers_too_large",
                                              "the request head is longer than 32768 bytes");
        }
        long bad = nlines == 0 ? check_request_line(s, e, err) : check_header_line(s, e, err);
        if (bad < 0) {
            byte_refusal(s, e, err);
            return -1;
        }
        if (nlines == 0)
            p->http10 = e[-1] == '0';
        if (nlines++ > H1_MAX_HEADERS)
            return refuse(err, 431, "headers_too_large", "the request has more than 64 headers");
        line = i = at + 1;
    }
    if (end == 0) {
        /* The line in progress, from where the last call left it. */
        for (; i < len; i++) {
            char c = buf[i];
            if (c == '\0')
                return refuse(err, 400, "bad_header", "a NUL byte in the request line or a header");
            if (c == '\r') {
                if (i + 1 >= len)
                    break; /* its LF may come */
                return refuse(err, 400, "bad_header", "a CR not followed by LF");
            }
            if (nlines == 0 && i - start >= H1_MAX_LINE)
                return refuse(err, 414, "uri_too_long", "the request line is longer than 8192 bytes");
            if (i >= H1_MAX_HEAD)
                return refuse(err, 431, "headers_too_large", "the request head is longer than 32768 bytes");
        }
    }
    p->scan_pos = i;
    p->scan_line = line;
    p->scan_lines = nlines;
    if (end == 0) {
        if (nlines == 0 && len - start >= H1_MAX_LINE)
            return refuse(err, 414, "uri_too_long", "the request line is longer than 8192 bytes");
        if (len >= H1_MAX_HEAD)
            return refuse(err, 431, "headers_too_large", "the request head is longer than 32768 bytes");
        return 0;
    }
    /* The method is the edge's to judge (an unknown one is 404 or 405 with a
     * bounded label); http_parser knows only its own list, so it is given a
     * neutral token in its place and parses the rest as sent. */
    const char *sp = memchr(buf + start, ' ', end - start);
    size_t mlen = (size_t)(sp - (buf + start));
    p->method = malloc(mlen + 1);
    if (p->method == NULL)
        return refuse(err, 503, "out_of_memory", "the broker is short of memory");
    memcpy(p->method, buf + start, mlen);
    p->method[mlen] = '\0';
    http_parser_execute(&p->hp, &settings, "PUT", 3);
    size_t rest = end - start - mlen;
    size_t got = http_parser_execute(&p->hp, &settings, sp, rest);
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    if ((e != HPE_OK && e != HPE_PAUSED) || got != rest || !p->head_done) {
        /* Framing the parser refused (a coding other than chunked, say) is
         * named as such. */
        if (check_framing(p, err) < 0)
            return -1;
        if (e == HPE_UNEXPECTED_CONTENT_LENGTH || e == HPE_INVALID_CONTENT_LENGTH)
            return refuse(err, 400, "bad_framing", http_errno_description(e));
        if (e == HPE_HEADER_OVERFLOW)
            return refuse(err, 431, "headers_too_large", "the request head is too large");
        return refuse(err, 400, "bad_request", http_errno_description(e));
    }
    if (p->overflow)
        return refuse(err, 431, "headers_too_large", "the request has more than 64 headers");
    if (check_framing(p, err) < 0)
        return -1;
    if (p->hp.upgrade)
        p->keep_alive = false;
    p->target[p->target_len] = '\0'; /* the space after it: the head is parsed */
    return (long)end;
}

const char *h1_method(const h1 *p)
{
    return p->method;
}

const char *h1_target(const h1 *p)
{
    return p->target;
}

bool h1_http10(const h1 *p)
{
    return p->http10;
}

bool h1_keep_alive(const h1 *p)
{
    return p->keep_alive;
}

bool h1_expect_continue(const h1 *p)
{
    return p->expect_continue && !p->http10;
}

bool h1_chunked(const h1 *p)
{
    return p->chunked;
}

long long h1_content_length(const h1 *p)
{
    return p->content_length;
}

size_t h1_header_count(const h1 *p)
{
    return p->nheaders;
}

const h1_header *h1_header_at(const h1 *p, size_t i)
{
    return i < p->nheaders ? &p->headers[i] : NULL;
}

unsigned h1_header_find(const h1 *p, const char *name, const char **value, size_t *len)
{
    unsigned count = 0;
    if (value != NULL)
        *value = "";
    if (len != NULL)
        *len = 0;
    for (size_t i = 0; i < p->nheaders; i++) {
        if (!name_is(&p->headers[i], name))
            continue;
        if (count++ == 0) {
            if (value != NULL)
                *value = p->headers[i].value;
            if (len != NULL)
                *len = p->headers[i].value_len;
        }
    }
    return count;
}

bool h1_has_body(const h1 *p)
{
    return p->has_body && !p->message_done;
}

/* ---- the body ---------------------------------------------------------------- */

long h1_body(h1 *p, const char *data, size_t n, const h1_body_sink *sink, bool *done, h1_error *err)
{
    *done = p->message_done;
    if (p->message_done || n == 0)
        return 0;
    p->sink = sink;
    p->cursor = data;
    size_t got = http_parser_execute(&p->hp, &settings, data, n);
    p->sink = NULL;
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    if (p->sink_refused) {
        err->status = 0;
        return -1;
    }
    if (p->framing_over)
        return refuse(err, 400, "bad_chunk", "chunk framing (a size line, extensions or trailers) past 4096 bytes");
    if (e != HPE_OK && e != HPE_PAUSED)
        return refuse(err, 400, "bad_chunk", http_errno_description(e));
    if (!p->message_done) {
        /* Framing bytes at the end of this feed count toward the next. */
        if (p->cursor < data + got)
            p->framing += (size_t)(data + got - p->cursor);
        if (p->chunked && p->framing > H1_MAX_FRAMING)
            return refuse(err, 400, "bad_chunk",
                          "chunk framing (a size line, extensions or trailers) past 4096 bytes");
    }
    p->cursor = NULL;
    *done = p->message_done;
    return (long)got;
}
