/* http: a request from its head to its answer: body accumulation under the
 * cap and the budget, dispatch (router.c finds the route), tenancy, graceful
 * stop, access log (see http.h); long polls are longpoll.c's. Connections, parsing and deadlines are
 * conn.c's. Handlers do the work; this file never calls the engine except
 * to register a long-poll waiter, and never logs a raw path (keys live in
 * paths). */
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
#include "h1.h"
#include "errors.h"
#include "queen_runtime.h"
#include "longpoll.h"
#include "loop.h"
#include "metrics.h"
#include "origin.h"
#include "tls.h"

/* How long a stop waits for in-flight requests before closing them anyway:
 * below the 30 s a supervisor (and our tests) give a SIGTERM before SIGKILL. */
#define HTTP_DRAIN_MS 25000

/* A request's state from its head to its end (conn_request). */
typedef struct request_state {
    server *srv;
    conn *c;
    const char *path;   /* the target up to '?', in the connection's head buffer */
    const char *query;  /* after '?', or NULL */
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
    bool over_cap;      /* its connection came past QUEEN_MAX_CONNECTIONS: 503 */
    bool close_after;   /* refused before its body was read whole: the connection closes after the answer */
    /* The handler's run on a fiber, and what it reads until it ends. */
    fiber *fiber;
    bool yielded;       /* the fiber waited for the database: the connection is suspended for it */
    auth_pending *auth_pending; /* what auth leaves to the fiber (auth_settle_refused), or NULL */
    http_request req;
    http_response res;
    char *params[HTTP_MAX_PARAMS];
    size_t nparams;
    char tenant[QUEEN_TENANT_LEN + 1];
    char producer[AUTH_SUBJECT_MAX + 1]; /* the token's sub, copied: the fiber outlives the dispatch */
} request_state;

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

const char *http_query_arg(const http_request *req, const char *name, char *buf, size_t buflen, bool *bad)
{
    const request_state *st = req->internal;
    const char *q = st->query;
    if (q == NULL)
        return NULL;
    size_t name_len = strlen(name);
    /* Arguments are kept as sent and decoded here, once, like path
     * captures; the first of a repeated name counts. */
    while (*q != '\0') {
        const char *end = strchrnul(q, '&');
        const char *eq = memchr(q, '=', (size_t)(end - q));
        const char *key_end = eq ? eq : end;
        if ((size_t)(key_end - q) == name_len && memcmp(q, name, name_len) == 0) {
            const char *v = eq ? eq + 1 : end;
            size_t n = 0;
            char *d = http_percent_decode(v, (size_t)(end - v), &n);
            if (d == NULL || n + 1 > buflen) {
                free(d);
                *bad = true;
                return NULL;
            }
            memcpy(buf, d, n + 1);
            free(d);
            return buf;
        }
        q = *end ? end + 1 : end;
    }
    return NULL;
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

/* The declared Content-Length, or -1 when absent (chunked). */
static long long declared_length(const conn *c)
{
    return h1_content_length(conn_head(c));
}

/* Whether the request declares a body larger than the cap: refused from
 * its headers, never read. */
static bool declared_over_cap(server *srv, const conn *c)
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

/* Appends one piece of decoded body. A body over the cap or the budget is
 * dropped at once and refused there (false): a chunked body is not read to
 * its end before its 413. */
static bool body_append(server *srv, const conn *c, request_state *st, const char *data, size_t n)
{
    if (st->too_large || st->over_budget)
        return false;
    size_t max = (size_t)srv->cfg->max_body_bytes;
    long long declared = st->cap == 0 ? declared_length(c) : -1;
    if (st->len + n > max || (declared >= 0 && (unsigned long long)declared > max)) {
        st->too_large = true;
        body_drop(srv, st);
        return false;
    }
    if (st->len + n + 1 > st->cap) {
        size_t ncap = body_capacity(st, declared, n, max);
        if (!budget_take(srv, ncap - st->cap)) {
            st->over_budget = true;
            body_drop(srv, st);
            return false;
        }
        char *nb = realloc(st->body, ncap);
        if (nb == NULL) {
            atomic_fetch_sub(&srv->body_bytes, (long long)(ncap - st->cap));
            st->over_budget = true;
            body_drop(srv, st);
            return false;
        }
        st->body = nb;
        st->cap = ncap;
    }
    memcpy(st->body + st->len, data, n);
    st->len += n;
    st->body[st->len] = '\0';
    return true;
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

http_poll **http_request_poll(const http_request *req)
{
    return &((request_state *)req->internal)->poll;
}

void http_request_waited(const http_request *req)
{
    ((request_state *)req->internal)->waits++;
}

/* ---- The request's end ------------------------------------------------------ */

void http_on_end(server *srv, conn *c, bool answered)
{
    request_state *st = conn_request(c);
    if (st == NULL)
        return;
    conn_set_request(c, NULL);
    /* A long poll whose client hung up while it waited: counted once, as
     * the 499 it is (nginx's figure for "the client closed the request"). */
    if (!answered && st->poll != NULL && !st->accounted && st->route != NULL)
        account(srv, st->route->method, st->route, 499, st);
    if (st->poll != NULL)
        longpoll_end(srv, st->poll); /* not answered with messages, or closed then */
    atomic_fetch_sub(&srv->inflight, 1);
    body_drop(srv, st); /* whatever the outcome: answered, refused, or the client left */
    auth_pending_free(st->auth_pending);
    http_free_params(st->params, st->nparams);
    free(st->res.body);
    free(st);
}

/* ---- Headers -------------------------------------------------------------------- */

unsigned http_header_first(const conn *c, const char *name, const char **value, size_t *len)
{
    return h1_header_find(conn_head(c), name, value, len);
}

/* The tenant the proxy named, canonical in out; NULL, or why it is refused.
 * Absent is the default tenant. Every other shape but one canonical uuid is
 * refused rather than guessed at: a second header (a proxy that appends
 * instead of replacing would let the client's own come first), an empty
 * one (a proxy that failed to fill it in must not mean the default tenant).
 * A NUL inside never reaches here: the parser refuses it (h1.h). */
static const char *request_tenant(const conn *c, char out[QUEEN_TENANT_LEN + 1])
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
    char copy[QUEEN_TENANT_LEN + 2];
    if (len > QUEEN_TENANT_LEN || memchr(value, '\0', len) != NULL)
        return "x-queen-tenant must be a canonical uuid (8-4-4-4-12 hex)";
    memcpy(copy, value, len);
    copy[len] = '\0';
    if (queen_tenant_canonical(copy, out) != 0)
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
static void answer(server *srv, conn *c, const char *method, const route *r, request_state *st, http_response *res)
{
    /* The answer is rendered (it never points into the body): give the
     * body's bytes back now, not when the answer is written, so a client
     * that sends its next body as soon as it reads this answer finds them
     * free. */
    body_drop(srv, st);
    unsigned status = res->status;
    if (st->close_after)
        res->close = true;
    conn_answer(c, res);
    account(srv, method, r, status, st);
}

/* The fiber's body: the handler, then, when it waited on the way, the hand
 * back to the connection (the loop writes the answer, or the long poll
 * waits). A handler that never waited returns into run_handler, which
 * answers at once. */
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
    if (st->res.suspended) { /* a long poll: its waiter resumes the connection */
        conn_suspended(st->c);
        return;
    }
    answer(st->srv, st->c, st->req.method, st->route, st, &st->res);
}

/* Runs the matched route's handler on a fiber of this loop. */
static http_verdict run_handler(server *srv, conn *c, const char *method, const char *url, request_state *st,
                                const route *found, char **params, const size_t *lens, size_t nparams,
                                const char *tenant, const char *producer)
{
    bool no_wait = atomic_load(&srv->stopping);
    if (st->poll != NULL)
        no_wait = no_wait || longpoll_answer_now(srv, st->poll);
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
        .conn = c,
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
        return HTTP_ENGINE;
    } else {
        fiber_free(st->fiber);
    }
    st->fiber = NULL;
    if (st->res.suspended) /* answered (and accounted) when the handler runs again */
        return HTTP_POLL;
    answer(srv, c, method, found, st, &st->res);
    return HTTP_ANSWERED;
}

/* Routes a complete request: the edge's own refusals answer here, anything
 * else goes to its handler. */
static http_verdict dispatch(server *srv, conn *c, const char *method, const char *url, request_state *st)
{
    http_response res = {.status = 500};
    char *params[HTTP_MAX_PARAMS];
    size_t lens[HTTP_MAX_PARAMS];
    size_t nparams = 0;
    bool path_matched = false, bad_path = false;
    const route *found = route_find(method, url, params, lens, &nparams, &path_matched, &bad_path);
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
    } else if (origin_refused(srv->cfg, auth_enabled(srv), c, family, &res)) {
        /* a browser page of another origin, or a name re-pointed at us: 403 */
    } else if (found == NULL) {
        if (path_matched)
            http_error(&res, 405, "method_not_allowed", "method_not_allowed", "this path does not take that method");
        else
            http_not_found(&res);
    } else if (bad_path) {
        http_refuse(&res, family, QUEEN_ERR_BAD_REQUEST, family == FAMILY_KV ? "kv_bad_key" : "bad_path",
                    "a percent-escape in the path is malformed or encodes a NUL byte");
    } else if (origin_content_type_refused(c, method, st->len > 0, &res)) {
        /* 415: a body any page could have sent (a form, text/plain) */
    } else if (family != FAMILY_OPS && srv->cfg->tenancy_header &&
               (tenant_fault = request_tenant(c, tenant)) != NULL) {
        http_refuse(&res, family, QUEEN_ERR_BAD_REQUEST, "bad_tenant", tenant_fault);
    } else if (body_shape_refused(srv, st, family, &res)) {
        /* res holds the refusal; the body was never parsed */
    } else if (auth_refused(srv, c, found, params, nparams, st->body, st->len, tenant, &who, &res)) {
        /* 401/403 in res; the token's tenant is in tenant otherwise */
    } else {
        const char *producer = who.authenticated && who.subject[0] ? who.subject : NULL;
        auth_pending_free(st->auth_pending); /* a long poll's earlier dispatch's, never settled */
        st->auth_pending = who.pending;
        return run_handler(srv, c, method, url, st, found, params, lens, nparams, tenant, producer);
    }
    http_free_params(params, nparams);
    answer(srv, c, method, found, st, &res);
    return HTTP_ANSWERED;
}


/* ---- The connection's hooks --------------------------------------------------- */

void http_on_head(server *srv, conn *c)
{
    request_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        http_response res = {.status = 503};
        http_error(&res, 503, "unavailable", "out_of_memory", "the broker is short of memory; retry shortly");
        res.retry_after = 1;
        res.close = true;
        conn_answer(c, &res);
        return;
    }
    st->srv = srv;
    st->c = c;
    st->started_us = now_us();
    atomic_fetch_add(&srv->inflight, 1);
    conn_set_request(c, st);
    /* The target is the connection's to keep until the request ends: the
     * query is split off in place. */
    char *target = (char *)h1_target(conn_head(c));
    char *q = strchr(target, '?');
    if (q != NULL) {
        *q = '\0';
        st->query = q + 1;
        st->has_query = true;
    }
    st->path = target;
    const char *method = h1_method(conn_head(c));
    /* Refused from the head alone, before any body byte is read or "100
     * Continue" is sent; the connection closes after the answer (its body,
     * if any, is not read). */
    st->close_after = h1_has_body(conn_head(c));
    st->over_cap = conn_over_cap(srv, c);
    if (st->over_cap) {
        dispatch(srv, c, method, st->path, st);
        return;
    }
    long long declared = declared_length(c);
    if (declared_over_cap(srv, c)) {
        st->too_large = true;
        dispatch(srv, c, method, st->path, st);
        return;
    }
    if (declared > 0 && !budget_take(srv, (size_t)declared + 1)) {
        /* The declared body is charged to the budget at its head, not when
         * its bytes arrive: a body that could not be held is refused at
         * once (503). */
        st->over_budget = true;
        dispatch(srv, c, method, st->path, st);
        return;
    }
    if (declared > 0) {
        st->body = malloc((size_t)declared + 1);
        if (st->body == NULL) {
            atomic_fetch_sub(&srv->body_bytes, declared + 1);
            st->over_budget = true;
            dispatch(srv, c, method, st->path, st);
            return;
        }
        st->cap = (size_t)declared + 1;
        st->body[0] = '\0';
    }
    st->close_after = false;
}

bool http_on_body(conn *c, const char *p, size_t n)
{
    request_state *st = conn_request(c);
    if (st == NULL)
        return false;
    if (body_append(st->srv, c, st, p, n))
        return true;
    /* Past the cap or the budget: answered now, however much more the
     * client means to send (a chunked body is not read to its end). */
    st->close_after = true;
    dispatch(st->srv, c, h1_method(conn_head(c)), st->path, st);
    return false;
}

http_verdict http_on_complete(server *srv, conn *c)
{
    request_state *st = conn_request(c);
    if (st == NULL)
        return HTTP_ANSWERED;
    return dispatch(srv, c, h1_method(conn_head(c)), st->path, st);
}

void http_on_refused(server *srv, conn *c, unsigned status)
{
    request_state *st = conn_request(c);
    const h1 *h = conn_head(c);
    const char *method = h != NULL && h1_method(h) != NULL ? h1_method(h) : "OTHER";
    if (st != NULL) {
        if (!st->accounted)
            account(srv, method, NULL, status, st);
        return;
    }
    request_state once = {.started_us = now_us()};
    account(srv, method, NULL, status, &once);
}

/* ---- Start and stop ------------------------------------------------------------- */

int http_start(server *srv)
{
    pthread_mutex_init(&srv->poll_lock, NULL);
    srv->suspended = NULL;
    atomic_store(&srv->nsuspended, 0);
    atomic_store(&srv->stopping, false);
    atomic_store(&srv->inflight, 0);
    atomic_store(&srv->body_bytes, 0);
    metrics_init();
    if (conn_guard_start(srv, conn_raise_fd_limit()) != 0) {
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    char why[300];
    if (origin_check_settings(srv->cfg, why, sizeof why) != 0) {
        log_error("http: %s", why);
        conn_guard_free(srv);
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    srv->tls = NULL;
    if (tls_open(srv->cfg, &srv->tls) != 0 || loops_start(srv) != 0) {
        tls_close(srv->tls);
        srv->tls = NULL;
        conn_guard_free(srv);
        pthread_mutex_destroy(&srv->poll_lock);
        return -1;
    }
    log_info("http: listening on %s:%d%s with %d event loop(s), %d database connection(s), pipeline depth %d",
             srv->cfg->bind, srv->cfg->port, srv->tls != NULL ? " (HTTPS)" : "", srv->nloops, srv->cfg->pg_pool,
             srv->cfg->pg_pipeline_depth);
    return 0;
}

void http_stop(server *srv)
{
    if (srv->loops == NULL)
        return;
    /* 1. No new connections (each loop closes its listening socket when
     * woken); keep-alive ones get "Connection: close". */
    pthread_mutex_lock(&srv->poll_lock);
    atomic_store(&srv->stopping, true);
    pthread_mutex_unlock(&srv->poll_lock);
    loops_quiesce(srv);

    /* 2. Every suspended long poll answers 204 now. New ones cannot suspend
     * (http_poll_step checks stopping under the same lock). */
    int resumed = longpoll_resume_all(srv);

    /* 3. Let in-flight requests finish and their answers go out. Ending
     * the loops would close connections whose answer is not yet written.
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

    loops_finish(srv);
    tls_close(srv->tls);
    srv->tls = NULL;
    conn_guard_free(srv);
    longpoll_free_tenants(srv); /* only if a request outlived the drain */
    pthread_mutex_destroy(&srv->poll_lock);
}
