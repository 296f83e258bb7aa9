/* http: libmicrohttpd daemon, body accumulation, routing, tenancy, long-poll
 * suspend/resume, graceful stop, access log (see http.h). Handlers do the
 * work; this file never calls the engine except to register a long-poll
 * waiter, and never logs a raw path (keys live in paths). */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "conn.h"
#include "errors.h"
#include "fiber.h"
#include "logging.h"
#include "loop.h"
#include "metrics.h"
#include "origin.h"
#include "rawjson.h"
#include "tls.h"

/* How long a stop waits for in-flight requests before closing them anyway:
 * below the 30 s a supervisor (and our tests) give a SIGTERM before SIGKILL. */
#define HTTP_DRAIN_MS 25000

/* A long-polling request's link with its waiter. Shared by the request (one
 * reference while it lives) and its waiter (one reference from its opening
 * to its close, after which its callback never runs), so whichever lets go
 * last frees it. One waiter per request, opened before the first attempt and
 * closed at the answer (queen_pop_wait_open): it keeps its place among the
 * queue's waiters across attempts. Fields but w are guarded by
 * srv->poll_lock; w is the request's own (its handler and completion run on
 * its loop). */
struct http_poll {
    queen_waiter *w;             /* the open wait, NULL before it and after its close */
    server *srv;
    edge_loop *loop;             /* whose daemon serves the connection: woken on resume */
    struct MHD_Connection *conn; /* NULL once the request completed */
    bool suspended;              /* in srv->suspended, waiting for the waiter */
    bool fired, woken;           /* the armed waiter fired; with a push or not */
    bool shutdown;               /* resumed by http_stop: answer now */
    bool counted;                /* holds one of its tenant's open-wait places */
    char tenant[QUEEN_TENANT_LEN + 1];
    int refs;
    http_poll *prev, *next;
};

/* Open long-poll waits of one tenant (srv->tenant_polls, under poll_lock):
 * an entry lives while its count is above zero, so the table holds only
 * tenants waiting now. */
typedef struct tenant_polls {
    struct tenant_polls *next;
    int n;
    char tenant[QUEEN_TENANT_LEN + 1];
} tenant_polls;

/* Per-request state kept by MHD between calls of the access handler. */
typedef struct request_state {
    server *srv;
    char *body;
    size_t len, cap;
    bool too_large;
    bool over_budget;   /* the body would have passed QUEEN_MAX_INFLIGHT_BODY_BYTES */
    bool shape_admitted; /* counted and its tree's share of the budget taken */
    size_t tree_charge;  /* budget bytes held for the body's parse tree */
    bool has_query;
    long long started_us;
    unsigned waits;
    http_poll *poll;
    const route *route; /* matched at the last dispatch: what a 499 is counted under */
    bool accounted;     /* counted and logged once: an answer or a 499 */
    bool framing_refused; /* answered 400 at the headers (framing_fault) */
    bool over_cap;      /* its connection came past QUEEN_MAX_CONNECTIONS: 503 */
    /* The handler's run on a fiber, and what it reads until it ends. */
    fiber *fiber;
    bool yielded;       /* the fiber waited for the database: the connection is suspended for it */
    bool answer_ready;  /* it ended after a wait: the resumed access handler sends st->res */
    auth_pending *auth_pending; /* what auth leaves to the fiber (auth_settle_refused), or NULL */
    http_request req;
    http_response res;
    char *params[HTTP_MAX_PARAMS];
    size_t nparams;
    char tenant[QUEEN_TENANT_LEN + 1];
    char producer[AUTH_SUBJECT_MAX + 1]; /* the token's sub, copied: the fiber outlives the dispatch */
} request_state;

/* The URI log callback's verdict, carried to the first access-handler call
 * as the initial con_cls: MHD drops the '?' of an empty query string before
 * the handler sees the URL, and the path routes must refuse even that. Only
 * a marker, never allocated: a request may die before the handler runs. */
static char query_marker;

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

long long http_now_ms(void)
{
    return now_us() / 1000;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

char *http_percent_decode(const char *s, size_t len, size_t *out_len)
{
    char *out = malloc(len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    if (out_len != NULL)
        *out_len = o;
    return out;
}

void http_free_params(char **params, size_t nparams)
{
    for (size_t i = 0; i < nparams; i++)
        free(params[i]);
}

int http_match(const char *pattern, const char *path, char **params, size_t *lens, size_t *nparams)
{
    *nparams = 0;
    int verdict = 0;
    const char *p = pattern, *u = path;
    while (*p != '\0') {
        if (*p == ':' || *p == '*') {
            bool rest = *p == '*';
            while (*p != '\0' && *p != '/')
                p++;
            const char *end = rest ? u + strlen(u) : strchrnul(u, '/');
            if (end == u || *nparams >= HTTP_MAX_PARAMS)
                goto nomatch;
            size_t n = 0;
            char *value = http_percent_decode(u, (size_t)(end - u), &n);
            if (value == NULL) {
                /* The shape fits; keep matching so a bad escape in a path
                 * that is otherwise this route's answers 400, not 404. */
                verdict = -1;
                value = strdup("");
            } else if (n == 0) {
                free(value);
                goto nomatch;
            }
            if (value == NULL)
                goto nomatch;
            lens[*nparams] = n;
            params[(*nparams)++] = value;
            u = end;
            continue;
        }
        if (*p != *u)
            goto nomatch;
        p++;
        u++;
    }
    if (*u == '\0')
        return verdict < 0 ? -1 : 1;
nomatch:
    http_free_params(params, *nparams);
    *nparams = 0;
    return 0;
}

typedef struct arg_lookup {
    const char *name;
    const char *value;
    bool found;
} arg_lookup;

/* MHD_lookup_connection_value cannot tell "?wait" from absent; iterate. */
static enum MHD_Result find_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    arg_lookup *a = cls;
    if (strcmp(key, a->name) == 0) {
        a->value = value ? value : "";
        a->found = true;
        return MHD_NO;
    }
    return MHD_YES;
}

const char *http_query_arg(const http_request *req, const char *name, char *buf, size_t buflen, bool *bad)
{
    arg_lookup a = {.name = name};
    MHD_get_connection_values(req->mhd, MHD_GET_ARGUMENT_KIND, find_arg, &a);
    if (!a.found)
        return NULL;
    /* The unescape callback keeps arguments as sent (see keep_escaped), so
     * they are decoded here, once, like path captures. */
    size_t n = 0;
    char *v = http_percent_decode(a.value, strlen(a.value), &n);
    if (v == NULL || n + 1 > buflen) {
        free(v);
        *bad = true;
        return NULL;
    }
    memcpy(buf, v, n + 1);
    free(v);
    return buf;
}

/* ---- Long polls --------------------------------------------------------- */

static void poll_resume_locked(server *srv, http_poll *p)
{
    p->suspended = false;
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        srv->suspended = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    atomic_fetch_sub(&srv->nsuspended, 1);
    MHD_resume_connection(p->conn);
    if (p->loop != NULL)
        loop_wake(p->loop);
}

/* The waiter's callback, on an engine thread, outside the engine's locks:
 * record the verdict and resume the request if it is suspended (its handler
 * re-runs the attempt; nothing is popped here). */
static void poll_wake(void *ctx, bool woken)
{
    http_poll *p = ctx;
    server *srv = p->srv;
    pthread_mutex_lock(&srv->poll_lock);
    p->fired = true;
    p->woken = woken;
    if (p->suspended)
        poll_resume_locked(srv, p);
    pthread_mutex_unlock(&srv->poll_lock);
}

int http_poll_tenant_cap(const server *srv)
{
    if (srv->cfg->max_long_polls_per_tenant > 0)
        return srv->cfg->max_long_polls_per_tenant;
    conn_figures f;
    conn_figures_get(srv, &f);
    long long cap = f.cap > 0 ? f.cap : srv->cfg->max_connections;
    return cap / 4 > 0 ? (int)(cap / 4) : 1;
}

static tenant_polls **tenant_polls_slot(server *srv, const char *tenant)
{
    unsigned h = 2166136261u;
    for (const char *t = tenant; *t; t++)
        h = (h ^ (unsigned char)*t) * 16777619u;
    tenant_polls **at = &srv->tenant_polls[h % (sizeof srv->tenant_polls / sizeof srv->tenant_polls[0])];
    while (*at != NULL && strcmp((*at)->tenant, tenant) != 0)
        at = &(*at)->next;
    return at;
}

/* One of the tenant's open-wait places, or false when it holds all of them
 * (or memory is short). Under poll_lock. A place is held from the wait's
 * open to its close, whether the request is suspended or attempting, so a
 * tenant's waits can never hold more connections than its cap. */
static bool tenant_poll_take_locked(server *srv, http_poll *p, const char *tenant)
{
    tenant_polls **at = tenant_polls_slot(srv, tenant);
    if (*at == NULL) {
        *at = calloc(1, sizeof **at);
        if (*at == NULL)
            return false;
        snprintf((*at)->tenant, sizeof (*at)->tenant, "%s", tenant);
    }
    if ((*at)->n >= http_poll_tenant_cap(srv)) {
        if ((*at)->n == 0) { /* never kept empty */
            free(*at);
            *at = NULL;
        }
        return false;
    }
    (*at)->n++;
    p->counted = true;
    snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
    return true;
}

static void tenant_poll_give_locked(server *srv, http_poll *p)
{
    if (!p->counted)
        return;
    p->counted = false;
    tenant_polls **at = tenant_polls_slot(srv, p->tenant);
    if (*at != NULL && --(*at)->n <= 0) {
        tenant_polls *gone = *at;
        *at = gone->next;
        free(gone);
    }
}

/* Closes the request's wait, if open, and lets go of the waiter's
 * reference. Never under poll_lock: the close waits for a callback in
 * progress, which takes it. */
static void poll_close(server *srv, http_poll *p, bool popped)
{
    if (p == NULL || p->w == NULL)
        return;
    queen_pop_wait_close(srv->engine, p->w, popped);
    p->w = NULL;
    pthread_mutex_lock(&srv->poll_lock);
    tenant_poll_give_locked(srv, p);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&srv->poll_lock);
    if (last)
        free(p);
}

void http_poll_close(server *srv, const http_request *req, bool popped)
{
    request_state *st = req->internal;
    poll_close(srv, st->poll, popped);
}

bool http_poll_arm(server *srv, const http_request *req, const queen_pop_options *opts, int timeout_ms,
                   bool *over_limit)
{
    *over_limit = false;
    request_state *st = req->internal;
    if (timeout_ms <= 0 || atomic_load(&srv->stopping))
        return false;
    if (st->poll != NULL && st->poll->w != NULL) {
        /* Open since an earlier attempt: a wake before this attempt is this
         * attempt's; one during it shows as fired. */
        pthread_mutex_lock(&srv->poll_lock);
        st->poll->fired = st->poll->woken = false;
        pthread_mutex_unlock(&srv->poll_lock);
        return true;
    }
    http_poll *p = st->poll;
    if (p == NULL) {
        p = calloc(1, sizeof *p);
        if (p == NULL)
            return false;
        p->srv = srv;
        p->loop = loop_current();
        p->conn = req->mhd;
        p->refs = 1; /* the request's */
        st->poll = p;
    }
    pthread_mutex_lock(&srv->poll_lock);
    if (!tenant_poll_take_locked(srv, p, req->tenant)) {
        pthread_mutex_unlock(&srv->poll_lock);
        *over_limit = true;
        return false;
    }
    p->fired = p->woken = false;
    p->refs++; /* the waiter's, taken before it can fire */
    pthread_mutex_unlock(&srv->poll_lock);
    /* Never call the engine holding poll_lock: its callback takes it. */
    p->w = queen_pop_wait_open(srv->engine, req->tenant, opts, timeout_ms, poll_wake, p);
    if (p->w == NULL) {
        pthread_mutex_lock(&srv->poll_lock);
        p->refs--; /* the request still holds one */
        tenant_poll_give_locked(srv, p);
        pthread_mutex_unlock(&srv->poll_lock);
        return false;
    }
    return true;
}

http_poll_verdict http_poll_suspend(server *srv, const http_request *req, http_response *res)
{
    request_state *st = req->internal;
    http_poll *p = st->poll;
    if (p == NULL)
        return HTTP_POLL_DONE;
    pthread_mutex_lock(&srv->poll_lock);
    if (atomic_load(&srv->stopping)) {
        pthread_mutex_unlock(&srv->poll_lock);
        return HTTP_POLL_DONE;
    }
    if (p->fired) { /* during the attempt: no suspension, no lost wake-up */
        bool woken = p->woken;
        pthread_mutex_unlock(&srv->poll_lock);
        return woken ? HTTP_POLL_RETRY : HTTP_POLL_DONE;
    }
    pthread_mutex_unlock(&srv->poll_lock);
    /* Back in its place among the queue's waiters (outside poll_lock: this
     * may wait for the callback). */
    switch (p->w ? queen_pop_wait_again(srv->engine, p->w) : QUEEN_WAIT_DONE) {
    case QUEEN_WAIT_RETRY:
        return HTTP_POLL_RETRY;
    case QUEEN_WAIT_DONE:
        return HTTP_POLL_DONE;
    case QUEEN_WAIT_SLEEP:
        break;
    }
    pthread_mutex_lock(&srv->poll_lock);
    if (atomic_load(&srv->stopping)) {
        pthread_mutex_unlock(&srv->poll_lock);
        return HTTP_POLL_DONE;
    }
    if (p->fired) { /* since it went back: the sleep is over already */
        bool woken = p->woken;
        pthread_mutex_unlock(&srv->poll_lock);
        return woken ? HTTP_POLL_RETRY : HTTP_POLL_DONE;
    }
    /* Suspended under the lock the callback takes, so a resume can only
     * follow this suspend (MHD_resume_connection is undefined otherwise). */
    p->suspended = true;
    p->prev = NULL;
    p->next = srv->suspended;
    if (p->next != NULL)
        p->next->prev = p;
    srv->suspended = p;
    atomic_fetch_add(&srv->nsuspended, 1);
    /* After a wait for the database the connection is suspended already:
     * it stays so, now on the waiter's account. */
    if (!st->yielded)
        MHD_suspend_connection(req->mhd);
    st->yielded = false;
    pthread_mutex_unlock(&srv->poll_lock);
    st->waits++;
    res->suspended = true;
    return HTTP_POLL_SUSPENDED;
}

/* A resumed long poll whose client hung up while it was suspended (MHD does
 * not watch suspended sockets): no pop for nobody, no message leased to a
 * closed socket. */
static bool peer_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- Request lifecycle ----------------------------------------------------- */

static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *con)
{
    (void)cls;
    conn_request_reading(con); /* the read deadline runs */
    return strchr(uri, '?') != NULL ? &query_marker : NULL;
}

/* ---- Body buffers under the global budget ------------------------------- */

/* Takes n bytes of the budget shared by every request, or none. Two racing
 * takers may both be refused when only one would have fit: the refusal is a
 * 503 the client retries, never an overshoot. */
static bool budget_take(server *srv, size_t n)
{
    long long after = atomic_fetch_add(&srv->body_bytes, (long long)n) + (long long)n;
    if (after > (long long)srv->cfg->max_inflight_body_bytes) {
        atomic_fetch_sub(&srv->body_bytes, (long long)n);
        return false;
    }
    return true;
}

/* Frees the body and gives its whole buffer back to the budget. */
/* Past this much body plus parse tree, the memory a request took is handed
 * back to the system when it ends: its tree is many small blocks freed into
 * the thread's malloc arena, which glibc keeps (measured: two pushes of a
 * 400,000-value payload left the broker at 44 MB from 11, for good). Small
 * requests skip it: trimming costs a walk of the arenas. */
#define HTTP_TRIM_AFTER_BYTES (4u << 20)

static void body_drop(server *srv, request_state *st)
{
    size_t held = st->cap + st->tree_charge;
    if (held > 0)
        atomic_fetch_sub(&srv->body_bytes, (long long)held);
    st->tree_charge = 0;
    free(st->body);
    st->body = NULL;
    st->len = st->cap = 0;
    if (held >= HTTP_TRIM_AFTER_BYTES)
        malloc_trim(0);
}

/* The declared Content-Length, or -1 when absent (chunked) or unreadable. */
static long long declared_length(struct MHD_Connection *c)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (v == NULL || *v < '0' || *v > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    return errno == 0 && *end == '\0' ? n : -1;
}

/* Whether the request declares a body larger than the cap: refused from
 * its headers, never read. */
static bool declared_over_cap(server *srv, struct MHD_Connection *c)
{
    long long declared = declared_length(c);
    return declared >= 0 && (unsigned long long)declared > (unsigned long long)srv->cfg->max_body_bytes;
}

/* The buffer size for len + n bytes and the NUL: the declared length at
 * once when there is one (one allocation, and the budget sees the whole body
 * before most of it arrives), else doubling, never past the body cap. */
static size_t body_capacity(const request_state *st, long long declared, size_t n, size_t max)
{
    size_t need = st->len + n + 1;
    if (declared >= 0 && (size_t)declared + 1 >= need)
        return (size_t)declared + 1;
    size_t ncap = st->cap ? st->cap : 1024;
    while (ncap < need)
        ncap *= 2;
    return ncap > max + 1 ? max + 1 : ncap;
}

/* Appends one chunk MHD read. A body over the cap or the budget is dropped
 * at once and the rest of it read and discarded; dispatch answers 413/503. */
static enum MHD_Result body_append(server *srv, struct MHD_Connection *c, request_state *st, const char *data,
                                   size_t n)
{
    if (st->too_large || st->over_budget)
        return MHD_YES;
    size_t max = (size_t)srv->cfg->max_body_bytes;
    long long declared = st->cap == 0 ? declared_length(c) : -1;
    if (st->len + n > max || (declared >= 0 && (unsigned long long)declared > max)) {
        st->too_large = true;
        body_drop(srv, st);
        return MHD_YES;
    }
    if (st->len + n + 1 > st->cap) {
        size_t ncap = body_capacity(st, declared, n, max);
        if (!budget_take(srv, ncap - st->cap)) {
            st->over_budget = true;
            body_drop(srv, st);
            return MHD_YES;
        }
        char *nb = realloc(st->body, ncap);
        if (nb == NULL) {
            atomic_fetch_sub(&srv->body_bytes, (long long)(ncap - st->cap));
            return MHD_NO;
        }
        st->body = nb;
        st->cap = ncap;
    }
    memcpy(st->body + st->len, data, n);
    st->len += n;
    st->body[st->len] = '\0';
    return MHD_YES;
}

/* jansson 2.14 on x86-64 takes at most about 240 bytes per value it builds
 * (an empty object in an array, allocator overhead included; an empty array
 * 140, a short string 90, a number 45): what a body's tree is charged. */
#define TREE_BYTES_PER_VALUE 256

/* Counts the body's values and nesting before any route parses it, so a
 * body of tiny elements (3 bytes of "{}," make 240 bytes of tree) is
 * refused for what it holds, and the tree's memory is taken from the same
 * budget as the raw bytes, so parse trees cannot multiply it. true when res
 * holds a refusal. */
static bool body_shape_refused(server *srv, request_state *st, http_family family, http_response *res)
{
    if (st->shape_admitted || st->len == 0)
        return false;
    const queen_config *cfg = srv->cfg;
    rawjson_shape shape = rawjson_measure((rawjson_span){st->body, st->len}, (size_t)cfg->max_body_values,
                                          (size_t)cfg->max_body_depth);
    char detail[200];
    if (shape.depth > (size_t)cfg->max_body_depth) {
        snprintf(detail, sizeof detail, "the body nests arrays and objects deeper than %d levels (QUEEN_MAX_BODY_DEPTH)",
                 cfg->max_body_depth);
        http_refuse(res, family, QUEEN_ERR_BAD_REQUEST, "body_too_deep", detail);
        return true;
    }
    size_t charge = shape.values * TREE_BYTES_PER_VALUE;
    if (shape.values > (size_t)cfg->max_body_values ||
        st->cap + charge > (size_t)cfg->max_inflight_body_bytes) { /* could never fit: no retry */
        snprintf(detail, sizeof detail,
                 "the body holds more than %d JSON values (QUEEN_MAX_BODY_VALUES) or more than "
                 "QUEEN_MAX_INFLIGHT_BODY_BYTES can parse; split it",
                 cfg->max_body_values);
        if (shape.values <= (size_t)cfg->max_body_values)
            snprintf(detail, sizeof detail,
                     "the body's %zu JSON values would take more than QUEEN_MAX_INFLIGHT_BODY_BYTES (%d) to "
                     "parse; split it",
                     shape.values, cfg->max_inflight_body_bytes);
        http_refuse(res, family, QUEEN_ERR_TOO_LARGE, "body_too_many_values", detail);
        return true;
    }
    if (!budget_take(srv, charge)) {
        snprintf(detail, sizeof detail,
                 "request bodies and parse trees now would pass %d bytes (QUEEN_MAX_INFLIGHT_BODY_BYTES); retry "
                 "shortly",
                 cfg->max_inflight_body_bytes);
        http_refuse(res, family, QUEEN_ERR_UNAVAILABLE, "body_budget_exhausted", detail);
        return true;
    }
    st->tree_charge = charge;
    st->shape_admitted = true;
    return false;
}

/* Counts and logs one finished request: the pattern, never the path. */
static void account(server *srv, const char *method, const route *r, unsigned status, request_state *st)
{
    st->accounted = true;
    double seconds = (double)(now_us() - st->started_us) / 1e6;
    metrics_record(r, method, status, seconds);
    /* An unmatched method is the client's text: logged as its label. */
    const char *label = r ? method : metrics_method_label(method), *pattern = r ? r->pattern : "(unmatched)";
    if (srv->cfg->access_log)
        log_info("http %s %s %u %.2fms", label, pattern, status, seconds * 1e3);
    /* A stall leaves a trace in a quiet log (warn level, access log off) -
     * except a long poll, whose wait for a push is its purpose. */
    if (srv->cfg->slow_request_ms > 0 && st->waits == 0 && seconds * 1e3 >= srv->cfg->slow_request_ms)
        log_warn("slow request: http %s %s %u %.2fms (QUEEN_SLOW_REQUEST_MS=%d)", label, pattern, status,
                 seconds * 1e3, srv->cfg->slow_request_ms);
}

static void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    conn_request_done(connection); /* idle again: the idle timeout runs */
    request_state *st = *con_cls;
    *con_cls = NULL;
    if (st == NULL || (void *)st == &query_marker)
        return;
    /* A suspended poll whose client hung up may be ended by MHD itself (it
     * read the EOF when the connection resumed) before the access handler
     * could see it: count it here, once, as the 499 it is. */
    if (st->poll != NULL && !st->accounted && st->route != NULL)
        account(st->srv, st->route->method, st->route, 499, st);
    if (st->poll != NULL) {
        server *srv = st->srv;
        poll_close(srv, st->poll, false); /* not answered with messages, or closed then */
        pthread_mutex_lock(&srv->poll_lock);
        st->poll->conn = NULL;
        bool last = --st->poll->refs == 0;
        pthread_mutex_unlock(&srv->poll_lock);
        if (last)
            free(st->poll);
    }
    atomic_fetch_sub(&st->srv->inflight, 1);
    body_drop(st->srv, st); /* whatever the outcome: answered, refused, or the client left */
    auth_pending_free(st->auth_pending);
    http_free_params(st->params, st->nparams);
    free(st->res.body);
    free(st);
}

static enum MHD_Result send_response(server *srv, struct MHD_Connection *connection, http_response *res)
{
    size_t len = res->body ? strlen(res->body) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, res->body ? res->body : (void *)"",
                                                             res->body ? MHD_RESPMEM_MUST_FREE
                                                                       : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        free(res->body);
        res->body = NULL;
        return MHD_NO;
    }
    res->body = NULL; /* MHD owns it now */
    if (len > 0 || res->content_type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                res->content_type ? res->content_type : "application/json");
    if (res->etag[0] != '\0')
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, res->etag);
    if (res->www_authenticate != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, res->www_authenticate);
    for (const char *const *h = res->headers; h != NULL && h[0] != NULL && h[1] != NULL; h += 2)
        MHD_add_response_header(r, h[0], h[1]);
    if (res->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", res->retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    /* While stopping, a keep-alive client must not send its next request
     * here: close after this answer. */
    if (res->close || atomic_load(&srv->stopping))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(connection, res->status, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- The tenant header ---------------------------------------------------- */

typedef struct header_count {
    const char *name;
    size_t name_len;
    unsigned count;
    const char *value;
    size_t len;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_len,
                                    const char *value, size_t value_len)
{
    (void)kind;
    header_count *h = cls;
    if (key_len == h->name_len && strncasecmp(key, h->name, key_len) == 0 && h->count++ == 0) {
        h->value = value ? value : "";
        h->len = value ? value_len : 0;
    }
    return MHD_YES;
}

unsigned http_header_first(struct MHD_Connection *c, const char *name, const char **value, size_t *len)
{
    header_count h = {.name = name, .name_len = strlen(name), .value = ""};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_header, &h);
    if (value != NULL)
        *value = h.value;
    if (len != NULL)
        *len = h.len;
    return h.count;
}

/* The tenant the proxy named, canonical in out; NULL, or why it is refused.
 * Absent is the default tenant. Every other shape but one canonical uuid is
 * refused rather than guessed at: a second header (a proxy that appends
 * instead of replacing would let the client's own come first), an empty
 * one (a proxy that failed to fill it in must not mean the default tenant),
 * and a NUL inside (a C string would stop at it and read a valid prefix). */
static const char *request_tenant(struct MHD_Connection *c, char out[QUEEN_TENANT_LEN + 1])
{
    const char *value;
    size_t len;
    unsigned count = http_header_first(c, TENANT_HEADER, &value, &len);
    if (count == 0) {
        memcpy(out, QUEEN_DEFAULT_TENANT, QUEEN_TENANT_LEN + 1);
        return NULL;
    }
    if (count > 1)
        return "x-queen-tenant must appear once";
    if (len == 0)
        return "x-queen-tenant is present but empty";
    if (memchr(value, '\0', len) != NULL || queen_tenant_canonical(value, out) != 0)
        return "x-queen-tenant must be a canonical uuid (8-4-4-4-12 hex)";
    return NULL;
}

/* Past the cap: a server-side limit the client retries (503, Retry-After),
 * on a connection that closes after the answer so it frees its place. */
static void refuse_over_cap(server *srv, http_response *res, http_family family)
{
    conn_figures f;
    conn_figures_get(srv, &f);
    char detail[160];
    snprintf(detail, sizeof detail,
             "the broker serves %lld connections at once (QUEEN_MAX_CONNECTIONS); retry shortly", f.cap);
    http_refuse(res, family, QUEEN_ERR_UNAVAILABLE, "too_many_connections", detail);
    res->close = true;
}

/* Sends what a handler or a refusal rendered, counts it and logs it. */
static enum MHD_Result answer(server *srv, struct MHD_Connection *connection, const char *method, const route *r,
                              request_state *st, http_response *res)
{
    /* The answer is rendered (it never points into the body): give the
     * body's bytes back now, not when MHD has sent the answer, so a client
     * that sends its next body as soon as it reads this answer finds them
     * free. */
    body_drop(srv, st);
    unsigned status = res->status;
    enum MHD_Result ok = send_response(srv, connection, res);
    account(srv, method, r, status, st);
    return ok;
}

/* The fiber's body: the handler, then, when it waited on the way, the hand
 * back to the loop's daemon (the access handler, called again on resume,
 * sends the answer). A handler that never waited returns into
 * run_handler, which answers at once. */
static void task_main(void *arg)
{
    request_state *st = arg;
    /* A scoped token's acks, traces and lease extensions: their queues are
     * known only to the database, so judged here, where a statement may
     * wait, and before the handler writes anything. */
    auth_pending *pending = st->auth_pending;
    st->auth_pending = NULL;
    if (pending == NULL || !auth_settle_refused(st->srv, pending, st->route, st->tenant, &st->res))
        st->route->handler(st->srv, &st->req, &st->res);
    http_free_params(st->params, st->nparams);
    st->nparams = 0;
    if (!st->yielded)
        return;
    st->yielded = false;
    st->fiber = NULL; /* the loop frees it when it sees it ended */
    if (st->res.suspended) /* a long poll: its waiter resumes the connection */
        return;
    st->answer_ready = true;
    MHD_resume_connection(st->req.mhd);
}

/* Runs the matched route's handler on a fiber of this loop. */
static enum MHD_Result run_handler(server *srv, struct MHD_Connection *connection, const char *method,
                                   const char *url, request_state *st, const route *found, char **params,
                                   const size_t *lens, size_t nparams, const char *tenant, const char *producer)
{
    bool no_wait = atomic_load(&srv->stopping);
    if (st->poll != NULL) {
        pthread_mutex_lock(&srv->poll_lock);
        no_wait = no_wait || st->poll->shutdown || (st->poll->fired && !st->poll->woken);
        pthread_mutex_unlock(&srv->poll_lock);
    }
    memcpy(st->tenant, tenant, sizeof st->tenant);
    snprintf(st->producer, sizeof st->producer, "%s", producer ? producer : "");
    st->nparams = nparams;
    st->req = (http_request){
        .method = method,
        .path = url,
        .pattern = found->pattern,
        .family = found->family,
        .has_query = st->has_query,
        .body = st->body ? st->body : "",
        .body_len = st->len,
        .nparams = nparams,
        .tenant = st->tenant,
        .producer = producer ? st->producer : NULL,
        .started_ms = st->started_us / 1000,
        .waits = st->waits,
        .no_wait = no_wait,
        .mhd = connection,
        .internal = st,
    };
    for (size_t i = 0; i < nparams; i++) {
        st->params[i] = params[i];
        st->req.params[i] = params[i];
        st->req.params_len[i] = lens[i];
    }
    st->res = (http_response){.status = 500};
    st->yielded = false;
    st->fiber = fiber_new(task_main, st);
    if (st->fiber == NULL) {
        /* No memory for a fiber: run here; its database calls then block
         * this loop on the engine's own pool, slower but answered. */
        task_main(st);
    } else if (!fiber_resume(st->fiber)) {
        /* Waiting for the database: the loop resumes the fiber when the
         * answer is in; nothing is sent until then. */
        st->yielded = true;
        MHD_suspend_connection(connection);
        return MHD_YES;
    } else {
        fiber_free(st->fiber);
    }
    st->fiber = NULL;
    if (st->res.suspended) /* answered (and accounted) when the handler runs again */
        return MHD_YES;
    return answer(srv, connection, method, found, st, &st->res);
}

/* The fiber ended after a wait: its answer goes out now. */
static enum MHD_Result send_ready_answer(server *srv, struct MHD_Connection *connection, const char *method,
                                         request_state *st)
{
    st->answer_ready = false;
    return answer(srv, connection, method, st->route, st, &st->res);
}

/* Routes a complete request: the edge's own refusals answer here, anything
 * else goes to its handler. */
static enum MHD_Result dispatch(server *srv, struct MHD_Connection *connection, const char *method,
                                const char *url, request_state *st)
{
    http_response res = {.status = 500};
    char *params[HTTP_MAX_PARAMS];
    size_t lens[HTTP_MAX_PARAMS];
    size_t nparams = 0;
    const route *found = NULL;
    bool path_matched = false, bad_path = false;
    for (size_t i = 0; i < http_route_count; i++) {
        int m = http_match(http_routes[i].pattern, url, params, lens, &nparams);
        if (m == 0)
            continue;
        path_matched = true;
        if (strcmp(http_routes[i].method, method) == 0) {
            found = &http_routes[i];
            bad_path = m < 0;
            break;
        }
        http_free_params(params, nparams);
        nparams = 0;
    }
    http_family family = found ? found->family : FAMILY_OPS;
    st->route = found;
    char tenant[QUEEN_TENANT_LEN + 1] = QUEEN_DEFAULT_TENANT;
    auth_identity who;
    const char *tenant_fault = NULL;
    if (st->over_cap) {
        refuse_over_cap(srv, &res, family);
    } else if (st->too_large) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body exceeds %d bytes (QUEEN_MAX_BODY_BYTES)", srv->cfg->max_body_bytes);
        http_refuse(&res, family, QUEEN_ERR_TOO_LARGE, "body_too_large", detail);
    } else if (st->over_budget) {
        /* A server-side limit, not the client's fault: 503, Retry-After. */
        char detail[160];
        snprintf(detail, sizeof detail,
                 "request bodies buffered now would pass %d bytes (QUEEN_MAX_INFLIGHT_BODY_BYTES); retry shortly",
                 srv->cfg->max_inflight_body_bytes);
        http_refuse(&res, family, QUEEN_ERR_UNAVAILABLE, "body_budget_exhausted", detail);
    } else if (origin_refused(srv->cfg, auth_enabled(srv), connection, family, &res)) {
        /* a browser page of another origin, or a name re-pointed at us: 403 */
    } else if (found == NULL) {
        if (path_matched)
            http_error(&res, 405, "method_not_allowed", "method_not_allowed", "this path does not take that method");
        else
            http_not_found(&res);
    } else if (bad_path) {
        http_refuse(&res, family, QUEEN_ERR_BAD_REQUEST, family == FAMILY_KV ? "kv_bad_key" : "bad_path",
                    "a percent-escape in the path is malformed or encodes a NUL byte");
    } else if (origin_content_type_refused(connection, method, st->len > 0, &res)) {
        /* 415: a body any page could have sent (a form, text/plain) */
    } else if (family != FAMILY_OPS && srv->cfg->tenancy_header &&
               (tenant_fault = request_tenant(connection, tenant)) != NULL) {
        http_refuse(&res, family, QUEEN_ERR_BAD_REQUEST, "bad_tenant", tenant_fault);
    } else if (body_shape_refused(srv, st, family, &res)) {
        /* res holds the refusal; the body was never parsed */
    } else if (auth_refused(srv, connection, found, params, nparams, st->body, st->len, tenant, &who, &res)) {
        /* 401/403 in res; the token's tenant is in tenant otherwise */
    } else {
        const char *producer = who.authenticated && who.subject[0] ? who.subject : NULL;
        auth_pending_free(st->auth_pending); /* a long poll's earlier dispatch's, never settled */
        st->auth_pending = who.pending;
        return run_handler(srv, connection, method, url, st, found, params, lens, nparams, tenant, producer);
    }
    http_free_params(params, nparams);
    return answer(srv, connection, method, found, st, &res);
}

/* ---- Message framing (RFC 9112) ------------------------------------------- */

typedef struct framing_headers {
    unsigned content_length, transfer_encoding, host;
    bool chunked_only; /* every Transfer-Encoding seen is exactly "chunked" */
} framing_headers;

static enum MHD_Result collect_framing(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_len,
                                       const char *value, size_t value_len)
{
    (void)kind;
    framing_headers *f = cls;
    if (key_len == 14 && strncasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH, key_len) == 0) {
        f->content_length++;
    } else if (key_len == 17 && strncasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING, key_len) == 0) {
        f->transfer_encoding++;
        if (value == NULL || value_len != 7 || strncasecmp(value, "chunked", 7) != 0)
            f->chunked_only = false;
    } else if (key_len == 4 && strncasecmp(key, MHD_HTTP_HEADER_HOST, key_len) == 0) {
        f->host++;
    }
    return MHD_YES;
}

/* Why the request's framing is refused, or NULL. A body whose end two
 * parties could place differently is how a request is smuggled past a proxy
 * (libmicrohttpd takes the first Content-Length, a proxy may take the last
 * or the chunking); a coding other than plain chunked is one we cannot
 * undo, and libmicrohttpd would wait for it until the connection timeout. */
static const char *framing_fault(struct MHD_Connection *c, const char *version)
{
    framing_headers f = {.chunked_only = true};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, collect_framing, &f);
    if (f.content_length > 1)
        return "more than one Content-Length header";
    if (f.content_length > 0 && f.transfer_encoding > 0)
        return "both Content-Length and Transfer-Encoding";
    if (f.transfer_encoding > 1 || !f.chunked_only)
        return "Transfer-Encoding must be exactly chunked";
    if (f.host != 1 && version != NULL && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
        return "an HTTP/1.1 request needs exactly one Host header";
    return NULL;
}

/* Answers a badly framed request at once, before its body, and closes the
 * connection: what follows the headers cannot be told apart from the next
 * request. */
static enum MHD_Result refuse_framing(server *srv, struct MHD_Connection *c, const char *method,
                                      request_state *st, const char *fault)
{
    http_response res = {.status = 400};
    http_error(&res, 400, "bad_request", "bad_framing", fault);
    res.close = true;
    st->framing_refused = true;
    enum MHD_Result ok = send_response(srv, c, &res);
    account(srv, method, NULL, 400, st);
    return ok;
}

/* libmicrohttpd's per-connection memory pool holds the request line, the
 * headers and the response headers, never our bodies (access_handler
 * accumulates them in its own buffer, in chunks of whatever MHD read). MHD
 * zeroes the pool on every request of a keep-alive connection, which was
 * most of the broker's user-space instructions with the 32 KiB default
 * (callgrind, one-op get: 85k instructions per request at 32 KiB, 48k at
 * 8 KiB). 8 KiB admits request line + headers up to about 7 KB (a 512-byte
 * key fully percent-encoded is 1.5 KB of path); beyond, MHD answers 431,
 * as most proxies would before us. */
#ifndef HTTP_CONN_POOL_BYTES
#define HTTP_CONN_POOL_BYTES 8192
#endif
static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls)
{
    server *srv = cls;
    request_state *st = *con_cls;
    if (st == NULL || (void *)st == &query_marker) {
        bool has_query = st != NULL;
        st = calloc(1, sizeof *st);
        if (st == NULL)
            return MHD_NO;
        st->srv = srv;
        st->has_query = has_query;
        st->started_us = now_us();
        atomic_fetch_add(&srv->inflight, 1);
        *con_cls = st;
        /* Answered at once, before any body byte is read (and out of the
         * read deadline's reach while the answer goes out). */
        st->over_cap = conn_over_cap(srv, connection);
        if (st->over_cap)
            return conn_request_handling(connection) ? dispatch(srv, connection, method, url, st) : MHD_NO;
        const char *fault = framing_fault(connection, version);
        if (fault != NULL)
            return refuse_framing(srv, connection, method, st, fault);
        long long declared = declared_length(connection);
        if (declared > 0 && !declared_over_cap(srv, connection) && !budget_take(srv, (size_t)declared + 1)) {
            /* The declared body is charged to the budget at its headers, not
             * when its first bytes reach us: a body that could not be held
             * is refused at once (503), whenever its bytes arrive. */
            st->over_budget = true;
        } else if (declared > 0 && !declared_over_cap(srv, connection)) {
            st->body = malloc((size_t)declared + 1);
            if (st->body == NULL) {
                atomic_fetch_sub(&srv->body_bytes, declared + 1);
                return MHD_NO;
            }
            st->cap = (size_t)declared + 1;
            st->body[0] = '\0';
        }
        if (declared_over_cap(srv, connection)) {
            /* Answered in this first call, before MHD sends "100 Continue"
             * or reads a byte of the body; MHD then discards the rest of
             * the request and closes the connection after the 413. */
            st->too_large = true;
            return dispatch(srv, connection, method, url, st);
        }
        return MHD_YES;
    }
    if (st->framing_refused) { /* answered; whatever body MHD still hands over is dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (conn_cut(connection)) /* past the read deadline: the watchdog answered 408 */
        return MHD_NO;
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return body_append(srv, connection, st, upload_data, n);
    }
    if (st->poll != NULL && peer_gone(connection)) {
        /* 499: nginx's figure for "the client closed the request". */
        account(srv, method, st->route, 499, st);
        return MHD_NO;
    }
    if (st->answer_ready)
        return send_ready_answer(srv, connection, method, st);
    if (!conn_request_handling(connection)) /* cut just now */
        return MHD_NO;
    return dispatch(srv, connection, method, url, st);
}

/* Keep the path exactly as sent: routes decode each capture once, so %2F
 * inside a key stays a slash of the key, not a path separator. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

/* MHD's own timeout restarts on every byte: it only catches a client that
 * stops reading its answer. The watchdog (conn.c) enforces the idle and read
 * deadlines, so this stays above both. */
static unsigned stall_timeout_s(const queen_config *cfg)
{
    int longest = cfg->idle_timeout_ms > cfg->request_read_timeout_ms ? cfg->idle_timeout_ms
                                                                       : cfg->request_read_timeout_ms;
    return longest / 1000 + 2 > 120 ? (unsigned)(longest / 1000 + 2) : 120U;
}

int http_start(server *srv)
{
    pthread_mutex_init(&srv->poll_lock, NULL);
    srv->suspended = NULL;
    atomic_store(&srv->nsuspended, 0);
    atomic_store(&srv->stopping, false);
    atomic_store(&srv->inflight, 0);
    atomic_store(&srv->body_bytes, 0);
    metrics_init();
    unsigned conn_limit = conn_guard_start(srv, conn_raise_fd_limit());
    if (conn_limit == 0) {
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    char why[300];
    if (origin_check_settings(srv->cfg, why, sizeof why) != 0) {
        log_error("http: %s", why);
        conn_guard_stop(srv);
        conn_guard_free(srv);
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    tls_material tls;
    struct MHD_OptionItem tls_opts[TLS_MHD_OPTIONS];
    unsigned tls_flags = 0;
    if (tls_mhd_options(srv->cfg, &tls, tls_opts, &tls_flags) != 0) {
        conn_guard_stop(srv);
        conn_guard_free(srv);
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    loop_daemon_options opts = {
        .access = access_handler,
        .completed = request_completed,
        .uri_log = uri_logged,
        .unescape = keep_escaped,
        .notify_connection = conn_notify,
        .connection_timeout_s = stall_timeout_s(srv->cfg),
        .connection_memory = (size_t)HTTP_CONN_POOL_BYTES,
        /* Each daemon may take the whole cap: the guard counts across them. */
        .connection_limit = conn_limit,
        .extra_flags = tls_flags,
        .extra_options = tls_opts,
    };
    int started = loops_start(srv, &opts);
    tls_material_free(&tls); /* GnuTLS holds its own copy once the daemons started */
    if (started != 0) {
        conn_guard_stop(srv);
        conn_guard_free(srv);
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    log_info("http: listening on %s:%d%s with %d event loop(s), %d database connection(s), pipeline depth %d",
             srv->cfg->bind, srv->cfg->port, tls_flags ? " (HTTPS)" : "", srv->nloops, srv->cfg->pg_pool,
             srv->cfg->pg_pipeline_depth);
    return 0;
}

void http_stop(server *srv)
{
    if (srv->loops == NULL)
        return;
    /* 1. No new connections (each loop quiesces its daemon when woken);
     * keep-alive ones get "Connection: close". */
    pthread_mutex_lock(&srv->poll_lock);
    atomic_store(&srv->stopping, true);
    pthread_mutex_unlock(&srv->poll_lock);
    loops_quiesce(srv);

    /* 2. Every suspended long poll answers 204 now. New ones cannot suspend
     * (http_poll_suspend checks stopping under the same lock). */
    pthread_mutex_lock(&srv->poll_lock);
    int resumed = 0;
    while (srv->suspended != NULL) {
        srv->suspended->shutdown = true;
        poll_resume_locked(srv, srv->suspended);
        resumed++;
    }
    pthread_mutex_unlock(&srv->poll_lock);

    /* 3. Let in-flight requests finish and their answers go out. Stopping
     * the daemons would close connections whose answer is not yet written.
     * Then, while keep-alive connections are still open, serve them for
     * QUEEN_DRAIN_QUIET_MS after the last request ends: a client that sent
     * its next request on an idle connection just before the close would
     * otherwise see the connection drop with no answer, not knowing whether
     * its write happened. Each answer now says Connection: close, so busy
     * clients leave by themselves and the wait ends when the last does. */
    long long deadline = http_now_ms() + HTTP_DRAIN_MS;
    long long quiet_since = -1;
    bool told = false;
    for (;;) {
        long long now = http_now_ms();
        if (now >= deadline)
            break;
        if (atomic_load(&srv->inflight) > 0) {
            quiet_since = -1;
        } else {
            conn_figures cf;
            conn_figures_get(srv, &cf);
            if (quiet_since < 0)
                quiet_since = now;
            if (cf.open > 0 && !told) {
                told = true;
                log_info("http: no request in flight; serving %lld open connection(s) for up to %d ms",
                         cf.open, srv->cfg->drain_quiet_ms);
            }
            if (cf.open == 0 || now - quiet_since >= srv->cfg->drain_quiet_ms)
                break;
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int left = atomic_load(&srv->inflight);
    if (left > 0)
        log_warn("http: %d request(s) still in flight after %d ms; closing them", left, HTTP_DRAIN_MS);
    log_info("http: drained (%d long poll(s) answered at stop)", resumed);

    conn_guard_stop(srv); /* its socket calls end before the daemons close every socket */
    loops_finish(srv);
    conn_guard_free(srv);
    for (size_t i = 0; i < sizeof srv->tenant_polls / sizeof srv->tenant_polls[0]; i++)
        while (srv->tenant_polls[i] != NULL) { /* only if a request outlived the drain */
            tenant_polls *gone = srv->tenant_polls[i];
            srv->tenant_polls[i] = gone->next;
            free(gone);
        }
    pthread_mutex_destroy(&srv->poll_lock);
}
