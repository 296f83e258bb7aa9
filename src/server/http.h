/* http: the HTTP edge's requests. Accumulates bodies under the cap and the
 * budget, matches the static route table, resolves the tenant, calls one
 * handler, hands what it rendered to the connection (conn.h), counts it and
 * writes the access log line. Handlers run on fibers of the event loops
 * (loop.h): a handler that waits for the database lets its loop serve
 * others. Long polls hold no fiber while they wait (suspend/resume). Knows
 * no SQL and no socket. */
#ifndef QUEEN_HTTP_H
#define QUEEN_HTTP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "queen.h"
#include "queen_runtime.h"

#define HTTP_MAX_PARAMS 4
/* With QUEEN_TENANCY_HEADER the tenant of a request (queen_tenant_canonical
 * judges it): set by a trusted proxy, never read from a body. */
#define TENANT_HEADER "x-queen-tenant"

/* How many times the request carries header `name` (case-insensitive), and
 * the first one's value and length ("" and 0 when there is none); value and
 * len may be NULL. A header that must appear once is judged by the count. */
struct conn;
unsigned http_header_first(const struct conn *c, const char *name, const char **value, size_t *len);

typedef struct server server;
typedef struct http_poll http_poll;
typedef struct edge_loop edge_loop;

/* Which error vocabulary a route speaks (errors.c maps category -> status
 * and code per family), and whether it is tenant-scoped. */
typedef enum http_family {
    FAMILY_OPS, /* /health, /metrics: no tenant, generic codes */
    FAMILY_LOG, /* messages and the transaction: generic codes */
    FAMILY_KV,  /* the KV routes: kv_* codes (docs/api.md, KV) */
} http_family;

typedef struct http_request {
    const char *method;
    const char *path;            /* raw, still percent-encoded: never log it */
    const char *pattern;         /* the matched route pattern: what logs and metrics say */
    http_family family;
    bool has_query;              /* the URI carried a '?' */
    const char *body;            /* NUL-terminated; may hold NULs before body_len */
    size_t body_len;
    const char *params[HTTP_MAX_PARAMS]; /* path captures, percent-decoded once */
    size_t params_len[HTTP_MAX_PARAMS];
    size_t nparams;
    const char *tenant;          /* canonical lower-case uuid */
    const char *producer;        /* the verified token's sub (QUEEN_AUTH=jwt), or NULL */
    long long started_ms;        /* monotonic ms when the request arrived */
    unsigned waits;              /* how many times this request was suspended so far */
    bool no_wait;                /* answer now: stopping, or a wait could not be registered */
    struct conn *conn;           /* the connection it came on (http_header_first) */
    void *internal;              /* http.c's request state */
} http_request;

typedef struct http_response {
    unsigned status;
    char *body;                  /* malloc'd (taken by http.c), or NULL for none */
    const char *content_type;    /* default application/json */
    char etag[48];               /* sent as ETag when non-empty */
    int retry_after;             /* seconds; sent when > 0 */
    bool suspended;              /* set by http_poll_step: nothing to send yet */
    bool close;                  /* send Connection: close and close after the answer */
    const char *www_authenticate; /* static text: sent as WWW-Authenticate when set (auth.c) */
    const char *const *headers;  /* static text: more name, value pairs to send, NULL-terminated, or NULL */
} http_response;

/* Runs on a fiber of its loop: each queen_* call that reaches the database
 * yields there until its answer is in (queen_runtime.h, "Yields"), so a
 * handler holds no lock across one. */
typedef void (*route_handler)(server *srv, const http_request *req, http_response *res);

/* operator: the broker-wide routes (maintenance, /metrics), above every
 * tenant's admin. */
typedef enum auth_role { ROLE_NONE, ROLE_READ, ROLE_WRITE, ROLE_ADMIN, ROLE_OPERATOR } auth_role;

/* What a route touches, for the scope check: which of its inputs name a
 * KV key or a queue, and with which access. */
typedef enum resource_kind {
    RES_NONE,         /* nothing tenant data: /health, /metrics, the console's files */
    RES_KV_PATH,      /* params ns, key */
    RES_KV_BATCH,     /* the body's operations: ns and key, keys or prefix each */
    RES_KV_LIST,      /* the body's namespace and prefix */
    RES_KV_ALL,       /* every namespace: the listing */
    RES_QUEUE_PATH,   /* params[0] is a queue */
    RES_QUEUE_PATH2,  /* params[1] is a queue (params[0] a consumer group) */
    RES_QUEUE_PUSH,   /* the body's items[].queue */
    RES_QUEUE_BODY,   /* the body's queue (configure) */
    RES_QUEUE_ALL,    /* every queue: the listings, pop by labels, a dead letter by id */
    RES_PARTITION,    /* the body's partitionId (ack, trace): the queue it belongs to */
    RES_PARTITIONS,   /* the body's acknowledgments[].partitionId (ack batch) */
    RES_LEASE_PATH,   /* params[0] is a lease id: the queue of the cursor holding it */
    RES_TRANSACTION,  /* the bundle's pushes, acks (by partition), required leases and kv ops */
    RES_STREAM_QUERY, /* a stream query's body: source_queue read, sink_queue write */
    RES_STREAM_CYCLE, /* a stream cycle's body: partition_id read (its queue), push_items[].queue write */
    RES_STREAM_STATE, /* a stream state read's partition_id: read on its queue */
    RES_BROKER,       /* broker-wide, no tenant's: maintenance, the broker's metrics */
} resource_kind;

typedef enum access_level { ACCESS_READ = ROLE_READ, ACCESS_WRITE = ROLE_WRITE } access_level;

typedef struct route {
    const char *method;
    const char *pattern;         /* ":name" captures one segment, "*name" the rest */
    route_handler handler;
    http_family family;
    auth_role role;              /* at least; a route's inputs may ask for more (a kv write op) */
    resource_kind resource;      /* what it names, for the scope check */
    access_level access;         /* what it does to those resources */
} route;

struct server {
    queen *engine;
    const queen_config *cfg;
    edge_loop *loops;            /* the event loops (loop.h), each with its connections and database connections */
    int nloops;
    pipeline_figures db_figures; /* the loops' database connections, summed */
    /* Long polls: the suspended requests, so a stop can resume them. */
    pthread_mutex_t poll_lock;
    http_poll *suspended;
    atomic_int nsuspended;
    struct tenant_polls *tenant_polls[64]; /* open long-poll waits by tenant, under poll_lock */
    atomic_bool stopping;
    atomic_int inflight;         /* requests between their first byte and their completion */
    atomic_llong body_bytes;     /* body buffer bytes held by requests now (QUEEN_MAX_INFLIGHT_BODY_BYTES) */
    struct conn_guard *guard;    /* the connection cap and deadlines (conn.h) */
    struct auth_state *auth;     /* QUEEN_AUTH=jwt's keys and rules (auth.h); NULL when off */
    struct tls_ctx *tls;         /* the HTTPS listener's context (tls.h); NULL for plain HTTP */
};

/* Starts the daemon on cfg->bind:cfg->port. Returns 0 or -1 (logged). */
int http_start(server *srv);
/* Graceful stop: stops accepting, answers every suspended long poll (204),
 * waits (bounded) for in-flight requests to complete, then stops the daemon.
 * The engine is still open throughout; the caller closes it after. */
void http_stop(server *srv);

/* The route of method and path (router.c): its row, with the captures in
 * params (free with http_free_params); NULL when none, *path_matched
 * telling a 405 from a 404. *bad_path: a capture holds a bad escape (400). */
const route *route_find(const char *method, const char *path, char **params, size_t *lens, size_t *nparams,
                        bool *path_matched, bool *bad_path);

/* Route matching, exposed for unit tests: 1 on match with captures decoded
 * into params (malloc'd; free with http_free_params) and their lengths, 0 on
 * no match, -1 when the path has the route's shape but a capture holds a bad
 * escape or an encoded NUL (a 400, not a 404). */
int http_match(const char *pattern, const char *path, char **params, size_t *lens, size_t *nparams);
void http_free_params(char **params, size_t nparams);

/* Decodes %XX exactly once into a new string (length in *out_len when not
 * NULL); NULL on a bad escape or an encoded NUL (a key can never hold one). */
char *http_percent_decode(const char *s, size_t len, size_t *out_len);

/* A query argument of the request, percent-decoded once into buf; NULL when
 * absent. *bad is set when it is present but malformed or too long. */
const char *http_query_arg(const http_request *req, const char *name, char *buf, size_t buflen, bool *bad);

/* Long polls, without pinning a worker thread per waiting client. The wait
 * is the engine's (queen_poll, queen.h); a handler steps it:
 *
 *   switch (http_poll_step(srv, req, &opts, &body, &err, res)) {
 *   SUSPENDED: return; MESSAGES: answer body; NOTHING: answer "nothing";
 *   ERROR: answer err; OVER_LIMIT: answer 429; CANNOT: pop once without waiting;
 *   }
 *
 * A suspended request is resumed when the engine says step again (a push
 * to what it waits for, the engine's check found something, its timeout)
 * or when the broker stops; its handler then runs again with req->waits +
 * 1, and req->no_wait set when it must answer now (stop). */
typedef enum http_poll_verdict {
    HTTP_POLL_SUSPENDED,  /* res->suspended is set: return without answering */
    HTTP_POLL_MESSAGES,   /* *body holds what was popped */
    HTTP_POLL_NOTHING,    /* timed out or stopping: answer "nothing" now */
    HTTP_POLL_ERROR,      /* err says why */
    HTTP_POLL_OVER_LIMIT, /* the tenant has QUEEN_MAX_LONG_POLLS_PER_TENANT waits open: nothing attempted */
    HTTP_POLL_CANNOT,     /* no wait could be opened (stopping, the engine refused) */
} http_poll_verdict;

/* Opens the request's wait at its first dispatch (opts as queen_poll_open
 * takes them, timeout_ms the time it has left), then steps it. */
http_poll_verdict http_poll_step(server *srv, const http_request *req, const queen_pop_options *opts,
                                 char **body, queen_error *err, http_response *res);
/* A long poll that is not a pop (the stream window poll): the handler
 * attempts; finding nothing, it arms one wait for a push to queue (NULL:
 * any queue of the tenant), a second's re-check, or timeout_ms, whichever
 * comes first (queen_wait_for_push). SUSPENDED: return without answering;
 * the handler runs again (req->waits + 1, req->no_wait at a stop) and
 * attempts again, judging its own deadline. OVER_LIMIT and CANNOT as
 * http_poll_step's (CANNOT: answer "nothing"). */
http_poll_verdict http_wait_push(server *srv, const http_request *req, const char *queue, int timeout_ms,
                                 http_response *res);
/* The open-wait cap per tenant in force (the setting, or a quarter of the
 * connection cap in force). */
int http_poll_tenant_cap(const server *srv);

/* ---- The request's hooks, called by its connection (conn.c) on its loop -- */

/* The head is parsed (conn_head): the request begins. May answer at once
 * (a refusal from the head alone: past the cap, a body over the cap). */
void http_on_head(server *srv, struct conn *c);
/* A piece of body; false when it was refused (413, or 503 past the budget):
 * the refusal is answered, the connection closes after it. */
bool http_on_body(struct conn *c, const char *p, size_t n);
typedef enum http_verdict {
    HTTP_ANSWERED, /* conn_answer was called */
    HTTP_ENGINE,   /* the handler waits for the database: answered later */
    HTTP_POLL,     /* a long poll waits: conn_resume when woken */
} http_verdict;
/* The request is whole: refused, or run by its handler. */
http_verdict http_on_complete(server *srv, struct conn *c);
/* The edge refused the request itself (malformed, read deadline): counted
 * and logged as an unmatched request. */
void http_on_refused(server *srv, struct conn *c, unsigned status);
/* The request ends: answered, or not (its client left: a long poll is
 * counted 499). Frees what it held. */
void http_on_end(server *srv, struct conn *c, bool answered);
/* Long polls woken for this loop: dispatched again (loop.c, each turn). */
void http_run_resumed(edge_loop *L);

/* Monotonic milliseconds. */
long long http_now_ms(void);

/* The one route table (routes.c). */
extern const route http_routes[];
extern const size_t http_route_count;

#endif
