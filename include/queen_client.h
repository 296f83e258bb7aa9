/* queen_client.h: the remote client (libqueenclient), over HTTP to one or
 * more Queen brokers.
 *
 * Every operation libqueen offers in-process has a call here with the same
 * name after the prefix (queen_kv_get -> queen_client_kv_get), the same
 * arguments in the same order (the queen * handle becomes a queen_client *,
 * queen_error a queen_client_error) and the same JSON texts as results, so
 * moving an application from the embedded engine to a remote broker changes
 * the prefix and the link line, not the logic. The two libraries export
 * different symbols and may be linked into one program.
 *
 * The client validates nothing the broker validates: it shapes each call,
 * sends it, and hands back what the broker answered. Values, payloads and
 * ops are JSON text passed through byte for byte (0.1 and
 * 12345678901234567890 survive exactly); results are the broker's JSON text.
 *
 * Threads: one queen_client is shared by any number of threads; every call
 * is thread-safe. Connections are kept alive and reused (a small pool of
 * libcurl handles). queen_client_close must be called once no call is in
 * flight.
 *
 * Retries (clients/conformance/README.md, "Retry rules", is the contract):
 * an attempt that got no connection, or a 503 db_unavailable (the
 * statement never reached the database), is retried for every call; a 429,
 * another 503, a 504 (db_outcome_unknown: it may have committed), a timeout
 * or a broken connection only for calls a repeat cannot harm (reads, puts and deletes without expect, configure, acks, lease
 * renewal, pushes and transactions that carry a transactionId). Waits are
 * a jittered exponential backoff, or the answer's Retry-After when longer,
 * capped by max_backoff_ms. With several URLs the client sends to the last
 * one that answered and moves to the next one on a retry (not on a 429). */
#ifndef QUEEN_CLIENT_H
#define QUEEN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "queen.h" /* QUEEN_FOREVER, queen_error_category, queen_pop_options */

#define QUEEN_CLIENT_VERSION "0.1.0"

typedef struct queen_client queen_client;

struct queen_client_error; /* below; the retry hook takes one */

typedef struct queen_client_options {
    /* Broker base URLs ("http://127.0.0.1:6632"), tried in order for
     * failover. At least one. */
    const char *const *urls;
    size_t nurls;
    const char *token;     /* NULL: none; else sent as Authorization: Bearer */
    int max_attempts;      /* per call, the first included; 0: 3 */
    int backoff_ms;        /* base of the backoff; 0: 50 */
    int max_backoff_ms;    /* cap of one wait, Retry-After included; 0: 5000 */
    int timeout_ms;        /* one attempt (a long poll adds its wait); 0: 30000 */
    int connect_timeout_ms;/* 0: 3000 */
    /* The retry hook (clients/API.md): NULL, or called on the calling thread
     * before every retry with on_retry_ctx, the attempt that failed (1 for
     * the first), its error and the wait before the next attempt. */
    void (*on_retry)(void *ctx, int attempt, const struct queen_client_error *err, int wait_ms);
    void *on_retry_ctx;
} queen_client_options;

/* What went wrong. Filled whole by every failing call. */
typedef struct queen_client_error {
    queen_error_category category; /* as libqueen's, from the status and code */
    int status;                    /* HTTP status; 0: no HTTP answer; 200: a KV precondition verdict */
    char code[64];                 /* the envelope's code, or the client's own:
                                      unreachable, timeout, transport, bad_response, out_of_memory */
    char reason[64];               /* the envelope's reason (the client's own: = code) */
    char detail[1024];             /* the envelope's detail, or the client's words */
    int retry_after_s;             /* the last answer's Retry-After; 0: none */
    int attempts;                  /* HTTP attempts made, the first included */
    /* category QUEEN_ERR_PRECONDITION only: the lost op, from the verdict. */
    struct {
        int index; /* failedIndex */
        char reason[16]; /* kvReason: exists | absent | version | limit | type */
        long long version; /* 0: no live row */
        bool value_omitted;
        size_t value_bytes;
        char value[QUEEN_PRECONDITION_VALUE_MAX + 1]; /* the live value's JSON text as sent ("null": none) */
    } precondition;
} queen_client_error;

/* clients/API.md's error kind of e, the same set in every client:
 * "bad_request", "auth", "not_found", "conflict", "precondition",
 * "rate_limited", "unavailable", "server" or "transport" (a static string). */
const char *queen_client_error_kind(const queen_client_error *e);

/* ---- Handle ---------------------------------------------------------------- */
void queen_client_options_defaults(queen_client_options *o);
/* Copies what it needs from o. Makes no connection (the first call does).
 * With no URL in o it reads QUEEN_URL (a comma-separated list, failover
 * order), as every Queen client does. NULL with err filled when there is no
 * URL either way or memory runs out. */
queen_client *queen_client_open(const queen_client_options *o, queen_client_error *err);
void queen_client_close(queen_client *c);

/* A view of base whose calls bound every attempt by timeout_ms (a long poll
 * still adds its wait) instead of base's timeout_ms: the per-call timeout.
 * It shares base's connection pool, URLs, token, retry settings and
 * counters, is as thread-safe as base, and is closed with
 * queen_client_close, which frees the view only. Close every view before
 * base. NULL if base is NULL, timeout_ms <= 0 or memory runs out. */
queen_client *queen_client_with_timeout(queen_client *base, int timeout_ms);
/* Attempts made beyond the first, by every call of this handle so far
 * (a counter for tests and metrics). */
long long queen_client_retries(queen_client *c);

/* ---- Memory and results ------------------------------------------------------
 * Every char ** result is the broker's JSON text, malloc'd (free() it).
 * Every int-returning call returns 0, or -1 with *err filled (err may be
 * NULL). tenant: a uuid sent as the x-queen-tenant header (for a broker
 * behind a proxy with tenancy on); NULL: no header, the default tenant. */

/* GET /health: 0 with the broker's version in version (may be NULL). */
int queen_client_health(queen_client *c, char *version, size_t len, queen_client_error *err);

/* ---- KV -----------------------------------------------------------------------
 * ops_json: a JSON array of ops, sent as they are. *results_json: the
 * array aligned by index. A required op that loses: -1, category
 * QUEEN_ERR_PRECONDITION (status 200, code kv_precondition), precondition
 * filled. */
int queen_client_kv_apply(queen_client *c, const char *tenant, const char *ops_json, char **results_json,
                          queen_client_error *err);

/* One op each; *result_json is the single result element. ns and key are
 * sent as they are (any bytes, '/' and '%' included: the client escapes
 * them once for the path). value_json is JSON text, sent byte for byte.
 * ttl_seconds: QUEEN_FOREVER or seconds > 0; anything else is refused
 * before anything is sent (-1, category QUEEN_ERR_BAD_REQUEST, status 0,
 * code bad_argument: clients/API.md, "Expiry"). expect < 0: none. */
int queen_client_kv_get(queen_client *c, const char *tenant, const char *ns, const char *key, char **result_json,
                        queen_client_error *err);
int queen_client_kv_put(queen_client *c, const char *tenant, const char *ns, const char *key, const char *value_json,
                        long ttl_seconds, long long expect, bool required, char **result_json,
                        queen_client_error *err);
int queen_client_kv_put_if_absent(queen_client *c, const char *tenant, const char *ns, const char *key,
                                  const char *value_json, long ttl_seconds, bool required, char **result_json,
                                  queen_client_error *err);
int queen_client_kv_delete(queen_client *c, const char *tenant, const char *ns, const char *key, long long expect,
                           bool required, char **result_json, queen_client_error *err);
/* delta, min, max go out as the shortest text that reads back as the same
 * double. min/max: NULL for none. */
int queen_client_kv_incr(queen_client *c, const char *tenant, const char *ns, const char *key, double delta,
                         const double *min, const double *max, long ttl_seconds, bool required, char **result_json,
                         queen_client_error *err);
int queen_client_kv_get_many(queen_client *c, const char *tenant, const char *ns, const char *const *keys,
                             size_t nkeys, char **result_json, queen_client_error *err);
/* One page. after: NULL for the first; limit 0: the broker's default. */
int queen_client_kv_get_prefix(queen_client *c, const char *tenant, const char *ns, const char *prefix,
                               const char *after, int limit, bool keys_only, char **result_json,
                               queen_client_error *err);

/* Every row under prefix, page after page (each of page_limit rows; 0: the
 * broker's default) until a page is not truncated: row_fn gets each row
 * object's JSON text in key order; a non-zero return stops the scan early.
 * Returns the number of pages read, or -1 with err. */
typedef int (*queen_client_row_fn)(void *ctx, const char *row_json);
int queen_client_kv_scan(queen_client *c, const char *tenant, const char *ns, const char *prefix, int page_limit,
                         bool keys_only, queen_client_row_fn row_fn, void *ctx, queen_client_error *err);

/* The console reads (POST /api/v1/resources/kv/list, GET .../namespaces). */
int queen_client_kv_list(queen_client *c, const char *tenant, const char *ns, const char *prefix, const char *after,
                         int limit, bool keys_only, bool include_expired, char **result_json,
                         queen_client_error *err);
int queen_client_kv_namespaces(queen_client *c, const char *tenant, char **result_json, queen_client_error *err);

/* ---- Messages -------------------------------------------------------------- */
/* items_json: the array of push items ({"queue","partition","payload","transactionId",...}). */
int queen_client_push(queen_client *c, const char *tenant, const char *items_json, char **results_json,
                      queen_client_error *err);
/* libqueen's options. *body_json: the pop body, or NULL when nothing was
 * available (204). With wait, the call lasts up to timeout_ms more. */
int queen_client_pop(queen_client *c, const char *tenant, const queen_pop_options *opts, char **body_json,
                     queen_client_error *err);
int queen_client_ack(queen_client *c, const char *tenant, const char *acks_json, const char *group,
                     char **results_json, queen_client_error *err);
int queen_client_lease_extend(queen_client *c, const char *tenant, const char *lease_id, int seconds,
                              char **result_json, queen_client_error *err);
int queen_client_configure(queen_client *c, const char *tenant, const char *queue, const char *options_json,
                           char **result_json, queen_client_error *err);
int queen_client_configure_ex(queen_client *c, const char *tenant, const char *queue, const char *options_json,
                              const char *label_namespace, const char *label_task, const char *mode,
                              char **result_json, queen_client_error *err);
int queen_client_queues(queen_client *c, const char *tenant, char **result_json, queen_client_error *err);
int queen_client_queue_delete(queen_client *c, const char *tenant, const char *queue, char **result_json,
                              queen_client_error *err);

/* ---- Dead letters: libqueen's queen_dlq_* (queen.h describes the bodies) ---- */
int queen_client_dlq_list(queen_client *c, const char *tenant, const queen_dlq_query *query, char **result_json,
                          queen_client_error *err);
/* ids_json: a JSON array of dead-letter ids, or NULL for all; max 0: the broker's 1000. */
int queen_client_dlq_requeue(queen_client *c, const char *tenant, const char *queue, const char *ids_json, int max,
                             char **result_json, queen_client_error *err);
/* id > 0: that dead letter; id 0: every one of queue. */
int queen_client_dlq_delete(queen_client *c, const char *tenant, long long id, const char *queue, char **result_json,
                            queen_client_error *err);

/* ---- Transactions -------------------------------------------------------------
 * bundle_json: {"operations":[...],"requiredLeases":[...],"kv":[...]}. On 0,
 * *result_json is the broker's 200 body: success true with results, or
 * success false (rolled back: reason, failedIndex, ...), as libqueen's
 * queen_transaction returns it. -1 only for a refusal (4xx) or when no
 * answer could be had. */
int queen_client_transaction(queen_client *c, const char *tenant, const char *bundle_json, char **result_json,
                             queen_client_error *err);

/* The builder: operations keep the order they were added in (consecutive
 * pushes share one push operation); kv ops go in the kv array. Each adder
 * returns 0, or -1 when memory ran out (the builder then refuses commit). */
typedef struct queen_client_tx queen_client_tx;
queen_client_tx *queen_client_tx_new(void);
void queen_client_tx_free(queen_client_tx *tx);
/* status NULL: completed; group NULL: the queue mode. */
int queen_client_tx_ack(queen_client_tx *tx, const char *transaction_id, const char *partition_id,
                        const char *lease_id, const char *status, const char *group);
/* partition, transaction_id: NULL for none. payload_json: JSON text. */
int queen_client_tx_push(queen_client_tx *tx, const char *queue, const char *partition, const char *payload_json,
                         const char *transaction_id);
/* op_json: one kv op object, sent as it is. */
int queen_client_tx_kv(queen_client_tx *tx, const char *op_json);
/* The typed kv ops, as queen_client_kv_put and its siblings take them
 * (expiry, expect < 0: none). -1 with err filled: an expiry that is not
 * exactly one (bad_argument, nothing added) or memory ran out. */
int queen_client_tx_kv_put(queen_client_tx *tx, const char *ns, const char *key, const char *value_json,
                           long ttl_seconds, long long expect, bool required, queen_client_error *err);
int queen_client_tx_kv_put_if_absent(queen_client_tx *tx, const char *ns, const char *key, const char *value_json,
                                     long ttl_seconds, bool required, queen_client_error *err);
int queen_client_tx_kv_delete(queen_client_tx *tx, const char *ns, const char *key, long long expect, bool required,
                              queen_client_error *err);
int queen_client_tx_kv_incr(queen_client_tx *tx, const char *ns, const char *key, double delta, const double *min,
                            const double *max, long ttl_seconds, bool required, queen_client_error *err);
int queen_client_tx_require_lease(queen_client_tx *tx, const char *lease_id);
/* The bundle's JSON text (malloc'd), or NULL after an allocation failure. */
char *queen_client_tx_json(const queen_client_tx *tx);
/* queen_client_transaction of the bundle; the builder is kept (free it). */
int queen_client_tx_commit(queen_client *c, const char *tenant, const queen_client_tx *tx, char **result_json,
                           queen_client_error *err);

/* ---- The consume loop -----------------------------------------------------------
 * queen_client_consume pops from a queue with `concurrency` worker threads
 * and calls handler once per message. While a handler runs, its lease is
 * renewed every third of lease_seconds, so a long handler keeps its
 * message. Then the message is settled:
 *   handler returned QUEEN_CLIENT_HANDLED: one transaction commits the ack
 *     together with whatever the handler added to tx (pushes, kv ops: the
 *     effect and the ack commit together, so the effect happens once);
 *     a transaction that rolls back (a lost marker, a lease gone) fails
 *     the message like QUEEN_CLIENT_FAILED;
 *   QUEEN_CLIENT_FAILED: an ack with status failed, so the broker
 *     redelivers it (up to the queue's retryLimit, then dead letters).
 * Clean stop: once *stop is non-zero (set it from any thread, a handler
 * included), workers pop no more, in-flight handlers finish and settle, and
 * queen_client_consume returns 0. It returns -1 with err when the broker
 * refuses the pop itself (4xx: a bad queue name, say); unavailability is
 * waited out with the backoff. */
typedef struct queen_client_message {
    const char *queue, *partition, *partition_id, *lease_id, *transaction_id, *consumer_group;
    const char *payload_json; /* the message's data, as the broker sent it */
    const char *message_json; /* the whole message object */
    int delivery_attempt;
} queen_client_message;

enum { QUEEN_CLIENT_HANDLED = 0, QUEEN_CLIENT_FAILED = 1 };
typedef int (*queen_client_handler)(void *ctx, const queen_client_message *msg, queen_client_tx *tx);

typedef struct queen_client_consume_options {
    const char *tenant;
    const char *queue;
    const char *partition;      /* NULL: any */
    const char *consumer_group; /* NULL: the queue mode */
    int concurrency;            /* worker threads; 0: 1 */
    int batch;                  /* messages per pop; 0: 1 */
    int lease_seconds;          /* per pop and per renewal; 0: 30 */
    int poll_ms;                /* a worker's long poll, and so the longest a stop waits for it; 0: 1000 */
    queen_client_handler handler;
    void *ctx;
    volatile int *stop;         /* required */
} queen_client_consume_options;

int queen_client_consume(queen_client *c, const queen_client_consume_options *o, queen_client_error *err);

/* ---- Reading results without a JSON library --------------------------------------
 * A pop body (queen_client_pop's *body_json) as messages shaped like the
 * consume loop's: strings NUL-terminated (NULL when the broker left the
 * member out), payload_json and message_json the broker's text. All of it
 * lives until queen_client_popped_free, which may precede free(body_json)
 * or follow it. body_json NULL (a 204) gives an empty set; text that is
 * not a pop body gives NULL with err (bad_response).
 *
 *   queen_client_popped *p = queen_client_popped_parse(body, &err);
 *   for (size_t i = 0; i < queen_client_popped_count(p); i++)
 *       puts(queen_client_popped_at(p, i)->payload_json);
 *   queen_client_popped_free(p); */
typedef struct queen_client_popped queen_client_popped;
queen_client_popped *queen_client_popped_parse(const char *body_json, queen_client_error *err);
size_t queen_client_popped_count(const queen_client_popped *p);
/* NULL past the end. */
const queen_client_message *queen_client_popped_at(const queen_client_popped *p, size_t i);
void queen_client_popped_free(queen_client_popped *p);

/* An error category's name, as strerror gives an errno's: "bad_request",
 * "unavailable", "precondition", ... ("unknown" for a value out of range).
 * Static storage; never NULL. */
const char *queen_client_category_name(queen_error_category category);

#endif
