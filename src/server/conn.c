/* conn: connections and the request state machine (see conn.h).
 *
 * Sockets are edge-triggered in epoll with every event wanted from the start
 * (in, out, peer hang-up), so a connection costs no epoll_ctl after its
 * accept: rd_ready remembers that the socket may hold unread bytes (cleared
 * by a short read or EAGAIN), and a write that would block just waits for
 * the next EPOLLOUT. A connection is read only in READ_HEAD and READ_BODY:
 * the bytes of a pipelined request wait in the kernel (or in the buffer)
 * until the answer before it is written, so answers go out in order.
 *
 * Memory: an idle connection holds this struct and no buffer (the head
 * buffer is freed between requests when nothing is pipelined behind). The
 * answer being written is counted in the server's answer_bytes and freed
 * when sent or at the write deadline; a large one is its own mapping (the
 * broker's mmap threshold, main.c), so the system gets it back then. */
#include "conn.h"

#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "queen_runtime.h"
#include "loop.h"
#include "tls.h"

/* The request's states (conn.h's diagram). */
typedef enum conn_state {
    ST_READ_HEAD, /* idle (no byte yet) or reading a head */
    ST_READ_BODY,
    ST_ENGINE,    /* the handler runs or waits for the database */
    ST_POLL,      /* a long poll waits for its waiter */
    ST_WRITE,
    ST_DRAIN,     /* answered and closing: what the client still sends is read and dropped */
    ST_CLOSED,
} conn_state;

/* What moves a connection: its socket, the clock, the request's handler. */
typedef enum conn_event {
    EV_IO,       /* the socket became readable or writable */
    EV_HANGUP,   /* the peer closed its side or the socket failed */
    EV_TICK,     /* a deadline may have passed */
    EV_ANSWERED, /* the handler's answer is ready (after a wait) */
    EV_RESUMED,  /* a long poll was woken */
    EV_SHUTDOWN, /* the loop ends */
} conn_event;

/* Head buffer: grown by doubling from this up to the head's limit. */
#define CONN_HEAD_BUF 2048
/* Body bytes read per system call (the loop's scratch buffer). */
#define CONN_SCRATCH (64 * 1024)
/* How long a closing connection's unread input is drained, so the close
 * does not reset the connection before the client read its answer. */
#define CONN_DRAIN_MS 2000
#define LOG_EVERY_MS 10000

struct conn {
    loop_watch watch; /* first: epoll hands this pointer back */
    conn_set *set;
    conn *prev, *next;  /* set->all */
    conn *next_flush;   /* set->flush */
    bool queued;        /* in set->flush */
    int fd;
    struct tls_session *tls;
    conn_state state;
    bool admitted;      /* counted against the cap */
    bool rd_ready;      /* the socket may hold unread bytes */
    bool peer_eof;      /* the peer will send no more */
    bool keep_alive;    /* the request in progress allows another after it */
    bool in_step;       /* conn_step is on the stack: answers wait for it */
    bool answer_ready;  /* out holds an answer not yet started */
    bool poll_ready;    /* the handler suspended after a wait: POLL next */
    bool doomed;        /* closed while its handler runs: freed when the handler ends */
    bool abort_close;   /* cut: reset, so the kernel drops the unsent answer too */
    long long since_ms; /* when the current state's deadline began */
    long long deadline_ms; /* 0: none */
    /* Input: [in_off, in_len) of in are bytes not yet parsed. The head of the
     * request in progress lives in in until the request ends. */
    char *in;
    size_t in_len, in_off, in_cap;
    size_t head_len;    /* bytes of in taken by the head in progress (0: none yet) */
    char *spill;        /* bytes after the body read with it: the next request's */
    size_t spill_len;
    h1 *parser;
    void *request;      /* http.c's */
    /* Output: the head, then the body. */
    char *out_head;
    size_t out_head_len;
    char *out_body;
    size_t out_body_len;
    size_t out_sent;    /* over head then body */
    bool close_after;
};

typedef struct conn_guard {
    long cap, limit;
    long long answer_budget;
    int read_ms, idle_ms, write_ms, tick_ms;
    atomic_llong open, admitted;
    atomic_llong refused, read_timeouts, idle_closed, write_timeouts, answer_bytes;
    atomic_llong refused_unlogged, timeouts_unlogged;
    atomic_llong refused_logged_at, timeouts_logged_at;
} conn_guard;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

long conn_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            log_warn("http: cannot raise the open-file limit from %llu to %llu: %s", (unsigned long long)was,
                     (unsigned long long)rl.rlim_max, strerror(errno));
            rl.rlim_cur = was;
        } else {
            log_info("http: open-file limit %llu (raised from %llu to the hard limit)",
                     (unsigned long long)rl.rlim_cur, (unsigned long long)was);
        }
    } else {
        log_info("http: open-file limit %llu (the hard limit)", (unsigned long long)rl.rlim_cur);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)1 << 30 ? 1L << 30 : (long)rl.rlim_cur;
}

/* The cap's headroom: connections still accepted past the cap, only to
 * answer them 503. */
static long headroom_of(long cap)
{
    return cap / 8 + 16;
}

int conn_guard_start(server *srv, long nofile)
{
    const queen_config *cfg = srv->cfg;
    long threads = cfg->http_threads > 0 ? cfg->http_threads : 1;
    /* Descriptors that are not client connections: the database pool, the
     * threads' wake-up counters and epoll sets, the listeners, logs, slack. */
    long avail = nofile - cfg->pg_pool - 3 * threads - 64;
    long cap = cfg->max_connections;
    if (cap + headroom_of(cap) > avail) {
        long fits = (avail - 16) * 8 / 9;
        if (fits < threads)
            fits = threads;
        log_warn("http: the open-file limit %ld fits %ld connections, not QUEEN_MAX_CONNECTIONS=%ld: the cap is %ld",
                 nofile, fits, cap, fits);
        cap = fits;
    }
    conn_guard *g = calloc(1, sizeof *g);
    if (g == NULL)
        return -1;
    g->cap = cap;
    g->limit = cap + headroom_of(cap);
    g->read_ms = cfg->request_read_timeout_ms;
    g->idle_ms = cfg->idle_timeout_ms;
    g->write_ms = cfg->response_write_timeout_ms;
    g->answer_budget = cfg->max_inflight_answer_bytes;
    int shortest = g->read_ms < g->idle_ms ? g->read_ms : g->idle_ms;
    if (g->write_ms < shortest)
        shortest = g->write_ms;
    g->tick_ms = shortest / 10 < 10 ? 10 : shortest / 10 > 1000 ? 1000 : shortest / 10;
    srv->guard = g;
    log_info("http: at most %ld connections (then 503), request read deadline %d ms, idle timeout %d ms, answer "
             "write deadline %d ms",
             cap, g->read_ms, g->idle_ms, g->write_ms);
    return 0;
}

void conn_guard_free(server *srv)
{
    free(srv->guard);
    srv->guard = NULL;
}

void conn_figures_get(const server *srv, conn_figures *out)
{
    memset(out, 0, sizeof *out);
    conn_guard *g = srv->guard;
    if (g == NULL)
        return;
    out->open = atomic_load(&g->open);
    out->cap = g->cap;
    out->refused = atomic_load(&g->refused);
    out->read_timeouts = atomic_load(&g->read_timeouts);
    out->idle_closed = atomic_load(&g->idle_closed);
    out->write_timeouts = atomic_load(&g->write_timeouts);
    out->answer_bytes = atomic_load(&g->answer_bytes);
}

/* One line per kind per LOG_EVERY_MS, with how many since the last. */
static void flush_log(atomic_llong *unlogged, atomic_llong *logged_at, long long now, const char *what,
                      long setting, const conn_guard *g)
{
    long long at = atomic_load(logged_at);
    if (atomic_load(unlogged) == 0 || (at != 0 && now - at < LOG_EVERY_MS))
        return;
    if (!atomic_compare_exchange_strong(logged_at, &at, now))
        return; /* another loop writes it */
    long long n = atomic_exchange(unlogged, 0);
    log_warn("http: %s: %lld since the last such line (limit %ld; %lld connection(s) open)", what, n, setting,
             (long long)atomic_load(&g->open));
}

/* ---- Small accessors for http.c ---------------------------------------------- */

const h1 *conn_head(const conn *c)
{
    return c->parser;
}

void *conn_request(const conn *c)
{
    return c->request;
}

void conn_set_request(conn *c, void *req)
{
    c->request = req;
}

edge_loop *conn_loop(const conn *c)
{
    return c->set->loop;
}

bool conn_over_cap(server *srv, conn *c)
{
    if (c->admitted)
        return false;
    conn_guard *g = srv->guard;
    atomic_fetch_add(&g->refused, 1);
    atomic_fetch_add(&g->refused_unlogged, 1);
    return true;
}

/* ---- Reading and writing, plain or TLS ----------------------------------------- */

/* > 0 bytes read, 0 end of stream, -1 nothing now, -2 failed. */
static ssize_t io_read(conn *c, char *buf, size_t n)
{
    if (c->tls != NULL)
        return tls_read(c->tls, buf, n);
    ssize_t r = recv(c->fd, buf, n, 0);
    if (r >= 0)
        return r;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
}

/* Writes what is left of the answer: true when all of it is out; false
 * when the socket is full (*failed false) or failed. */
static bool io_flush(conn *c, bool *failed)
{
    *failed = false;
    size_t total = c->out_head_len + c->out_body_len;
    while (c->out_sent < total) {
        ssize_t w;
        if (c->tls != NULL) {
            const char *p = c->out_sent < c->out_head_len ? c->out_head + c->out_sent
                                                          : c->out_body + (c->out_sent - c->out_head_len);
            size_t n = c->out_sent < c->out_head_len ? c->out_head_len - c->out_sent : total - c->out_sent;
            w = tls_write(c->tls, p, n);
        } else {
            struct iovec iov[2];
            int k = 0;
            if (c->out_sent < c->out_head_len)
                iov[k++] = (struct iovec){c->out_head + c->out_sent, c->out_head_len - c->out_sent};
            size_t body_off = c->out_sent > c->out_head_len ? c->out_sent - c->out_head_len : 0;
            if (c->out_body_len > body_off)
                iov[k++] = (struct iovec){c->out_body + body_off, c->out_body_len - body_off};
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
            w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
            if (w < 0)
                w = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
        }
        if (w == -1)
            return false;
        if (w < 0) {
            *failed = true;
            return false;
        }
        c->out_sent += (size_t)w;
    }
    return true;
}

static void out_free(conn *c)
{
    size_t held = c->out_head_len + c->out_body_len;
    if (held > 0)
        atomic_fetch_sub(&((conn_guard *)c->set->srv->guard)->answer_bytes, (long long)held);
    free(c->out_head);
    free(c->out_body);
    c->out_head = c->out_body = NULL;
    c->out_head_len = c->out_body_len = c->out_sent = 0;
}

static void queue_flush(conn *c);

/* ---- Rendering an answer --------------------------------------------------------- */

static const char *reason_phrase(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

/* The Date header's text, rendered once a second per thread. */
static const char *http_date(void)
{
    static _Thread_local time_t at;
    static _Thread_local char text[40];
    time_t now = time(NULL);
    if (now != at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        at = now;
    }
    return text;
}

typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (np == NULL) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_header(strbuf *b, const char *name, const char *value)
{
    sb_str(b, name);
    sb_add(b, ": ", 2);
    sb_str(b, value);
    sb_add(b, "\r\n", 2);
}

/* Answers up to this size are never refused for the budget: the socket's
 * buffer takes them whole at once, so they are not held. */
#define CONN_SMALL_ANSWER (16 * 1024)

/* Takes len bytes of the answer budget, or none (then the caller answers
 * 503). One answer is always admitted when none other is held, so an answer
 * larger than the budget still goes out alone. */
static bool answer_budget_take(conn_guard *g, size_t len)
{
    long long before = atomic_fetch_add(&g->answer_bytes, (long long)len);
    if (len <= CONN_SMALL_ANSWER || before == 0 || before + (long long)len <= g->answer_budget)
        return true;
    atomic_fetch_sub(&g->answer_bytes, (long long)len);
    return false;
}

void conn_answer(conn *c, http_response *res)
{
    server *srv = c->set->srv;
    conn_guard *g = srv->guard;
    out_free(c);
    char *body = res->body;
    res->body = NULL;
    size_t len = body != NULL ? strlen(body) : 0;
    http_response busy = {.status = 503}; /* the refusal below answers in res's place */
    if (len > 0 && !answer_budget_take(g, len)) {
        /* Held answers (clients slow to read them) fill the budget: this
         * one is not held too; the client retries. */
        free(body);
        char detail[192];
        snprintf(detail, sizeof detail,
                 "answers held for clients still reading them would pass %lld bytes "
                 "(QUEEN_MAX_INFLIGHT_ANSWER_BYTES); retry shortly",
                 g->answer_budget);
        http_error(&busy, 503, "unavailable", "answer_budget_exhausted", detail);
        busy.retry_after = 1;
        busy.close = res->close;
        res = &busy;
        body = busy.body;
        busy.body = NULL;
        len = body != NULL ? strlen(body) : 0;
        atomic_fetch_add(&g->answer_bytes, (long long)len);
    }
    size_t taken = len; /* of the budget so far: the body */
    bool no_body = res->status == 204 || res->status == 304 || res->status < 200;
    bool head_only = c->parser != NULL && h1_method(c->parser) != NULL && strcmp(h1_method(c->parser), "HEAD") == 0;
    /* While stopping, a keep-alive client must not send its next request
     * here: close after this answer. */
    c->close_after = c->close_after || res->close || !c->keep_alive || atomic_load(&srv->stopping);
    strbuf b = {0};
    char line[64];
    int n = snprintf(line, sizeof line, "HTTP/1.1 %u %s\r\n", res->status, reason_phrase(res->status));
    sb_add(&b, line, (size_t)n);
    sb_header(&b, "Date", http_date());
    if (!no_body && (len > 0 || res->content_type != NULL))
        sb_header(&b, "Content-Type", res->content_type ? res->content_type : "application/json");
    if (res->etag[0] != '\0')
        sb_header(&b, "ETag", res->etag);
    if (res->www_authenticate != NULL)
        sb_header(&b, "WWW-Authenticate", res->www_authenticate);
    for (const char *const *h = res->headers; h != NULL && h[0] != NULL && h[1] != NULL; h += 2)
        sb_header(&b, h[0], h[1]);
    if (res->retry_after > 0) {
        snprintf(line, sizeof line, "%d", res->retry_after);
        sb_header(&b, "Retry-After", line);
    }
    if (!no_body) {
        snprintf(line, sizeof line, "%zu", len);
        sb_header(&b, "Content-Length", line);
    }
    if (c->close_after)
        sb_header(&b, "Connection", "close");
    sb_add(&b, "\r\n", 2);
    if (b.failed || no_body || head_only) {
        free(body);
        body = NULL;
        len = 0;
    }
    if (b.failed) {
        free(b.p);
        b.p = NULL;
        b.len = 0;
        c->close_after = true; /* out of memory: the connection ends without an answer */
    }
    c->out_head = b.p;
    c->out_head_len = b.len;
    c->out_body = body;
    c->out_body_len = len;
    c->out_sent = 0;
    /* Held now: the head and the body as kept (a HEAD's, a 204's body is
     * dropped); out_free gives back the same. */
    atomic_fetch_add(&g->answer_bytes, (long long)(c->out_head_len + c->out_body_len) - (long long)taken);
    c->answer_ready = true;
    /* From a fiber that ended: the loop writes it once its stack is its
     * own. */
    queue_flush(c);
}

/* ---- The state machine ------------------------------------------------------------ */

static void conn_step(conn *c, conn_event ev);

static void enter(conn *c, conn_state st, long long now)
{
    conn_guard *g = c->set->srv->guard;
    c->state = st;
    c->since_ms = now;
    switch (st) {
    case ST_READ_HEAD:
        c->deadline_ms = now + (c->in_len > c->in_off ? g->read_ms : g->idle_ms);
        break;
    case ST_READ_BODY:
        break; /* the read deadline runs on from the head's first byte */
    case ST_WRITE:
        c->deadline_ms = now + g->write_ms;
        break;
    case ST_DRAIN:
        c->deadline_ms = now + CONN_DRAIN_MS;
        break;
    default:
        c->deadline_ms = 0;
        break;
    }
}

/* The request in progress ends: answered, refused, or its client left. */
static void request_end(conn *c, bool answered)
{
    if (c->request != NULL)
        http_on_end(c->set->srv, c, answered);
    c->request = NULL;
    if (c->parser != NULL)
        h1_reset(c->parser);
    /* The head's bytes go; what was pipelined behind it stays. */
    c->head_len = 0;
    if (c->spill != NULL) {
        free(c->in);
        c->in = c->spill;
        c->in_len = c->in_cap = c->spill_len;
        c->in_off = 0;
        c->spill = NULL;
        c->spill_len = 0;
    } else if (c->in_off >= c->in_len) {
        free(c->in);
        c->in = NULL;
        c->in_len = c->in_off = c->in_cap = 0;
    } else if (c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
}

static void conn_free(conn *c)
{
    conn_set *s = c->set;
    conn_guard *g = s->srv->guard;
    request_end(c, false);
    out_free(c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->all = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    if (c->queued) { /* rare: closed with its answer queued */
        for (conn **at = &s->flush; *at != NULL; at = &(*at)->next_flush)
            if (*at == c) {
                *at = c->next_flush;
                break;
            }
    }
    if (c->tls != NULL)
        tls_session_free(c->tls);
    if (c->abort_close) {
        struct linger reset = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    }
    close(c->fd); /* also takes it out of the epoll set */
    h1_free(c->parser);
    free(c->in);
    free(c->spill);
    if (c->admitted)
        atomic_fetch_sub(&g->admitted, 1);
    atomic_fetch_sub(&g->open, 1);
    free(c);
    if (s->listen_paused && s->listen_fd >= 0 && atomic_load(&g->open) < g->limit) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_watch};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
            s->listen_paused = false;
    }
}

/* Closes the connection when its step ends; one whose handler still runs
 * (its fiber holds the request) is closed when the handler ends. */
static void conn_close(conn *c)
{
    if (c->state == ST_ENGINE && c->request != NULL) {
        c->doomed = true;
        return;
    }
    c->state = ST_CLOSED;
}

/* Refuses what the edge itself cannot serve: the envelope, then the close. */
static void refuse(conn *c, unsigned status, const char *reason, const char *detail)
{
    http_response res = {.status = status};
    const char *code = status == 505 ? "http_version_not_supported"
                       : status == 414 ? "uri_too_long"
                       : status == 431 ? "headers_too_large"
                       : status == 408 ? "request_timeout"
                       : status == 413 ? "too_large"
                       : status >= 500 ? "unavailable"
                                       : "bad_request";
    http_error(&res, status, code, reason, detail);
    res.close = true;
    http_on_refused(c->set->srv, c, status);
    conn_answer(c, &res);
}

/* A body the parser or the request refused: the connection cannot be
 * trusted for another request. The parser's refusal is answered here; the
 * request's own (413/503) was answered already; without an answer it closes. */
static void body_refused(conn *c, const h1_error *err)
{
    c->keep_alive = false;
    if (err->status != 0)
        refuse(c, err->status, err->reason, err->detail);
    if (!c->answer_ready)
        conn_close(c);
}

/* Feeds the body bytes at hand; true when the body is whole. */
static bool sink_data(void *ctx, const char *p, size_t n)
{
    return http_on_body(ctx, p, n);
}

/* Moves the request on by what is buffered or readable. Returns when it
 * needs more bytes (state unchanged) or when it left the reading states. */
static void read_request(conn *c, long long now)
{
    conn_guard *g = c->set->srv->guard;
    for (;;) {
        if (c->state == ST_READ_HEAD) {
            if (c->in_len > c->in_off) {
                if (c->parser == NULL && (c->parser = h1_new()) == NULL) {
                    conn_close(c);
                    return;
                }
                h1_error err;
                long head = h1_head(c->parser, c->in + c->in_off, c->in_len - c->in_off, &err);
                if (head < 0) {
                    c->keep_alive = false;
                    refuse(c, err.status, err.reason, err.detail);
                    return;
                }
                if (head > 0) {
                    c->head_len = (size_t)head;
                    c->in_off += (size_t)head;
                    c->keep_alive = h1_keep_alive(c->parser) && !c->peer_eof;
                    http_on_head(c->set->srv, c);
                    if (c->answer_ready)
                        return;
                    if (h1_has_body(c->parser)) {
                        if (h1_expect_continue(c->parser) && c->in_off >= c->in_len) {
                            /* Told to go on only now that the head is
                             * judged: a refused body is never sent. */
                            static const char go[] = "HTTP/1.1 100 Continue\r\n\r\n";
                            if (c->tls != NULL)
                                (void)tls_write(c->tls, go, sizeof go - 1);
                            else
                                (void)send(c->fd, go, sizeof go - 1, MSG_NOSIGNAL);
                        }
                        c->state = ST_READ_BODY;
                        continue;
                    }
                    c->state = ST_ENGINE;
                    return;
                }
            }
        } else if (c->state == ST_READ_BODY) {
            if (c->in_len > c->in_off) {
                h1_body_sink sink = {sink_data, c};
                bool done = false;
                h1_error err;
                long took = h1_body(c->parser, c->in + c->in_off, c->in_len - c->in_off, &sink, &done, &err);
                if (took < 0) {
                    body_refused(c, &err);
                    return;
                }
                c->in_off += (size_t)took;
                if (done) {
                    c->state = ST_ENGINE;
                    return;
                }
            }
        } else {
            return;
        }
        if (!c->rd_ready || c->peer_eof) {
            if (c->peer_eof) { /* the request cannot end: nobody left to answer */
                conn_close(c);
            }
            return;
        }
        /* Read more: heads into the connection's buffer (their fields stay
         * there), body bytes through the scratch buffer. */
        ssize_t r;
        size_t want;
        if (c->state == ST_READ_HEAD) {
            if (c->in_off > 0 && c->head_len == 0) {
                memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
                c->in_len -= c->in_off;
                c->in_off = 0;
            }
            if (c->in_cap - c->in_len < 512) {
                size_t ncap = c->in_cap ? c->in_cap * 2 : CONN_HEAD_BUF;
                if (ncap > H1_MAX_HEAD + CONN_HEAD_BUF)
                    ncap = H1_MAX_HEAD + CONN_HEAD_BUF;
                char *nb = ncap > c->in_cap ? realloc(c->in, ncap) : c->in;
                if (nb == NULL) {
                    conn_close(c);
                    return;
                }
                c->in = nb;
                c->in_cap = ncap;
            }
            want = c->in_cap - c->in_len - 1;
            r = io_read(c, c->in + c->in_len, want);
            if (r > 0) {
                if (c->in_len == c->in_off) { /* a request's first byte: its read deadline runs */
                    c->since_ms = now;
                    c->deadline_ms = now + g->read_ms;
                }
                c->in_len += (size_t)r;
            }
        } else {
            want = CONN_SCRATCH;
            r = io_read(c, c->set->scratch, want);
            if (r > 0) {
                h1_body_sink sink = {sink_data, c};
                bool done = false;
                h1_error err;
                long took = h1_body(c->parser, c->set->scratch, (size_t)r, &sink, &done, &err);
                if (took < 0) {
                    body_refused(c, &err);
                    return;
                }
                if ((size_t)took < (size_t)r) { /* pipelined behind the body */
                    c->spill_len = (size_t)r - (size_t)took;
                    c->spill = malloc(c->spill_len + 1);
                    if (c->spill == NULL) {
                        conn_close(c);
                        return;
                    }
                    memcpy(c->spill, c->set->scratch + took, c->spill_len);
                }
                if (done) {
                    c->state = ST_ENGINE;
                    if ((size_t)r < want)
                        c->rd_ready = false;
                    return;
                }
            }
        }
        if (r == 0) {
            c->peer_eof = true;
            c->rd_ready = false;
            if (c->state == ST_READ_HEAD && c->in_len == c->in_off) {
                conn_close(c); /* between requests: a plain close */
                return;
            }
            continue; /* what is buffered may still be whole */
        }
        if (r == -1) {
            c->rd_ready = false;
            return;
        }
        if (r < 0) {
            conn_close(c);
            return;
        }
        if ((size_t)r < want && c->tls == NULL)
            c->rd_ready = false; /* a short read emptied the socket */
    }
}

/* The request is whole: its handler runs (or its refusal is ready). */
static void dispatch(conn *c)
{
    switch (http_on_complete(c->set->srv, c)) {
    case HTTP_ANSWERED:
        break;
    case HTTP_ENGINE:
        c->state = ST_ENGINE;
        break;
    case HTTP_POLL:
        c->state = ST_POLL;
        break;
    }
}

/* Reads and drops what the client still sends after a closing answer. */
static void drain(conn *c)
{
    for (;;) {
        ssize_t r = io_read(c, c->set->scratch, CONN_SCRATCH);
        if (r == -1)
            return;
        if (r <= 0) {
            conn_close(c);
            return;
        }
    }
}

/* The one transition function: every event of every connection comes
 * here, and every state it can leave is left from here. */
static void conn_step(conn *c, conn_event ev)
{
    conn_guard *g = c->set->srv->guard;
    long long now = mono_ms();
    c->in_step = true;
    if (ev == EV_SHUTDOWN) {
        /* The loop's fibers have ended (loop.c fails what waits for the
         * database first): nothing holds the request now. */
        c->state = ST_CLOSED;
    } else if (ev == EV_TICK && c->deadline_ms != 0 && now >= c->deadline_ms) {
        switch (c->state) {
        case ST_READ_HEAD:
        case ST_READ_BODY:
            if (c->state == ST_READ_HEAD && c->in_len == c->in_off && c->head_len == 0) {
                atomic_fetch_add(&g->idle_closed, 1);
                conn_close(c);
            } else {
                char detail[160];
                snprintf(detail, sizeof detail,
                         "the request did not arrive whole within %d ms of its first byte "
                         "(QUEEN_REQUEST_READ_TIMEOUT_MS)",
                         g->read_ms);
                atomic_fetch_add(&g->read_timeouts, 1);
                atomic_fetch_add(&g->timeouts_unlogged, 1);
                c->keep_alive = false;
                refuse(c, 408, "request_read_timeout", detail);
            }
            break;
        case ST_WRITE:
            /* A client that does not read its answer: cut, and its answer's
             * memory returned now, the socket buffer's with it (a plain
             * close would leave the kernel sending the rest). */
            atomic_fetch_add(&g->write_timeouts, 1);
            c->abort_close = true;
            conn_close(c);
            break;
        case ST_DRAIN:
            conn_close(c);
            break;
        default:
            break;
        }
    } else if (ev == EV_HANGUP) {
        /* Reading states find the end of stream by reading (what came
         * before it is still a request); an answer in progress is still
         * written (a half-closed client reads it). */
        if (c->state == ST_POLL) {
            /* A long poll's client went away: no pop for nobody. */
            conn_close(c);
        } else if (c->state == ST_DRAIN) {
            drain(c);
        }
    } else if (ev == EV_RESUMED && c->state == ST_POLL) {
        c->state = ST_ENGINE;
        dispatch(c);
    } else if (ev == EV_ANSWERED && c->poll_ready) {
        c->poll_ready = false;
        if (c->state == ST_ENGINE)
            c->state = ST_POLL;
        if (c->doomed || c->peer_eof)
            c->state = ST_CLOSED; /* its client left while the handler ran */
    }
    if (c->doomed && c->answer_ready) {
        c->answer_ready = false;
        c->state = ST_CLOSED;
    }
    /* Then as far as the connection can go now. */
    for (;;) {
        conn_state before = c->state;
        if (c->answer_ready && c->state != ST_CLOSED) {
            c->answer_ready = false;
            enter(c, ST_WRITE, now);
        }
        switch (c->state) {
        case ST_READ_HEAD:
        case ST_READ_BODY:
            read_request(c, now);
            if (c->state == ST_ENGINE && !c->answer_ready)
                dispatch(c);
            break;
        case ST_WRITE: {
            bool failed;
            if (io_flush(c, &failed)) {
                out_free(c);
                if (c->close_after) {
                    request_end(c, true);
                    if (c->tls != NULL)
                        tls_shutdown(c->tls);
                    shutdown(c->fd, SHUT_WR);
                    enter(c, ST_DRAIN, now);
                } else {
                    request_end(c, true);
                    enter(c, ST_READ_HEAD, now);
                }
            } else if (failed) {
                conn_close(c);
            }
            break;
        }
        case ST_DRAIN:
            drain(c);
            break;
        default:
            break;
        }
        if (c->state == before && !c->answer_ready)
            break;
    }
    c->in_step = false;
    if (c->state == ST_CLOSED)
        conn_free(c);
}

static void queue_flush(conn *c)
{
    if (!c->in_step && !c->queued) {
        c->queued = true;
        c->next_flush = c->set->flush;
        c->set->flush = c;
    }
}

void conn_suspended(conn *c)
{
    c->poll_ready = true;
    queue_flush(c);
}

void conn_resume(conn *c)
{
    conn_step(c, EV_RESUMED);
}

static void on_socket(loop_watch *w, uint32_t events)
{
    conn *c = (conn *)w;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        c->rd_ready = true;
    if (c->tls != NULL)
        c->rd_ready = true; /* a handshake or record may wait on either direction */
    /* A failed socket reads as its end and fails its writes: the step closes
     * it from whatever state it is in. */
    bool hangup = (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0;
    conn_step(c, hangup ? EV_HANGUP : EV_IO);
}

/* ---- Accepting ---------------------------------------------------------------- */

static void on_listen(loop_watch *w, uint32_t events)
{
    (void)events;
    conn_set *s = (conn_set *)((char *)w - offsetof(conn_set, listen_watch));
    conn_guard *g = s->srv->guard;
    for (int i = 0; i < 64 && s->listen_fd >= 0; i++) {
        if (atomic_load(&g->open) >= g->limit) {
            /* Past the headroom: the rest wait in the backlog until a
             * connection closes on this loop. */
            if (epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL) == 0)
                s->listen_paused = true;
            return;
        }
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a transient failure (EMFILE): tried again next turn */
        conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->watch.on_ready = on_socket;
        c->set = s;
        c->fd = fd;
        if (s->tls != NULL && (c->tls = tls_session_new(s->tls, fd)) == NULL) {
            close(fd);
            free(c);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = &c->watch};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            if (c->tls != NULL)
                tls_session_free(c->tls);
            close(fd);
            free(c);
            continue;
        }
        atomic_fetch_add(&g->open, 1);
        if (atomic_fetch_add(&g->admitted, 1) < g->cap) {
            c->admitted = true;
        } else {
            atomic_fetch_sub(&g->admitted, 1);
        }
        c->next = s->all;
        if (s->all != NULL)
            s->all->prev = c;
        s->all = c;
        c->rd_ready = true; /* a client's first bytes often come with the connection */
        enter(c, ST_READ_HEAD, mono_ms());
        conn_step(c, EV_IO);
    }
}

int conn_set_open(conn_set *s, server *srv, edge_loop *loop, int epfd, int listen_fd, struct tls_ctx *tls)
{
    memset(s, 0, sizeof *s);
    s->srv = srv;
    s->loop = loop;
    s->epfd = epfd;
    s->listen_fd = listen_fd;
    s->tls = tls;
    s->scratch = malloc(CONN_SCRATCH);
    if (s->scratch == NULL)
        return -1;
    s->listen_watch.on_ready = on_listen;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_watch};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev) != 0) {
        free(s->scratch);
        s->scratch = NULL;
        return -1;
    }
    return 0;
}

void conn_set_run(conn_set *s, long long now)
{
    while (s->flush != NULL) {
        conn *c = s->flush;
        s->flush = c->next_flush;
        c->queued = false;
        conn_step(c, EV_ANSWERED);
    }
    if (now < s->next_tick_ms)
        return;
    conn_guard *g = s->srv->guard;
    s->next_tick_ms = now + g->tick_ms;
    for (conn *c = s->all, *next; c != NULL; c = next) {
        next = c->next;
        if (c->deadline_ms != 0 && now >= c->deadline_ms)
            conn_step(c, EV_TICK);
    }
    if (s->listen_paused && s->listen_fd >= 0 && atomic_load(&g->open) < g->limit) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_watch};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
            s->listen_paused = false;
    }
    flush_log(&g->refused_unlogged, &g->refused_logged_at, now,
              "requests refused with 503 past QUEEN_MAX_CONNECTIONS", g->cap, g);
    flush_log(&g->timeouts_unlogged, &g->timeouts_logged_at, now,
              "requests cut with 408 past QUEEN_REQUEST_READ_TIMEOUT_MS", g->read_ms, g);
}

int conn_set_wait_ms(const conn_set *s, long long now)
{
    if (s->flush != NULL)
        return 0;
    long long t = s->next_tick_ms - now;
    return t < 0 ? 0 : t > 1000 ? 1000 : (int)t;
}

void conn_set_quiesce(conn_set *s)
{
    if (s->listen_fd < 0)
        return;
    on_listen(&s->listen_watch, EPOLLIN);
    close(s->listen_fd);
    s->listen_fd = -1;
    s->listen_paused = false;
}

void conn_set_close(conn_set *s)
{
    conn_set_run(s, mono_ms()); /* answers that are ready get their chance */
    while (s->all != NULL)
        conn_step(s->all, EV_SHUTDOWN);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    free(s->scratch);
    s->scratch = NULL;
}
