/* queen.h: the embedded broker (libqueen).
 *
 * An application links libqueen and gets, in-process, every capability the
 * HTTP broker gives over the wire, through the same SQL functions.
 * docs/embedding.md shows how to link it and a minimal program.
 *
 * Threads: one queen handle is shared by any number of threads; every call
 * is thread-safe. queen_open starts two engine threads (the notifier, which
 * LISTENs for pushes and fires long-poll waiters, and, when QUEEN_SWEEPER, the
 * sweeper). queen_close may be called while other threads are inside calls:
 * it refuses new calls (QUEEN_ERR_UNAVAILABLE, reason "closing"), ends
 * waiting pops and fires waiters (woken = false), waits for the calls in
 * flight to return, then frees everything. No call may start after
 * queen_close returned (the handle is gone). */
#ifndef QUEEN_H
#define QUEEN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define QUEEN_VERSION "0.1.0"
#define QUEEN_DEFAULT_TENANT "00000000-0000-0000-0000-000000000001"

typedef enum queen_log_level {
    QUEEN_LOG_ERROR = 0,
    QUEEN_LOG_WARN,
    QUEEN_LOG_INFO,
    QUEEN_LOG_DEBUG,
} queen_log_level;

/* The settings: opaque, named by their QUEEN_* variable or flag name (the
 * one table, docs/settings.md), so a setting added to libqueen changes no
 * struct a program was compiled against. See "Configuration" below. */
typedef struct queen_config queen_config;

/* What went wrong, in a shape every caller can branch on. What each
 * category means for a retry is queen_error_class_of; how the HTTP broker
 * presents it (status, envelope code) is the broker's own business. */
typedef enum queen_error_category {
    QUEEN_OK = 0,
    QUEEN_ERR_BAD_REQUEST,   /* the input is wrong: 22023 and pre-flight refusals */
    QUEEN_ERR_TOO_LARGE,     /* a size budget: 22001 */
    QUEEN_ERR_PRECONDITION,  /* a required kv op lost: 23514, detail parsed */
    QUEEN_ERR_UNAVAILABLE,   /* retry later: pool exhausted, 40001, 40P01, 08, 53, 57, 58 */
    QUEEN_ERR_MISCONFIGURED, /* class 42: the schema is older than the broker */
    QUEEN_ERR_INTERNAL,      /* anything else */
    /* The kv admission's refusals (quota and rate limits); nothing was written. */
    QUEEN_ERR_QUOTA_EXCEEDED, /* a write would pass max_rows / max_bytes */
    QUEEN_ERR_FEATURE_GATED,  /* tenancy on and no enabled kv_quota row */
    QUEEN_ERR_RATE_LIMITED,   /* the tenant's read or write token bucket is empty */
    QUEEN_ERR_CONFLICT,       /* the bundle conflicts with what is committed: a
                                 transaction id seen before, a lease not held */
    /* The broker's authentication (QUEEN_AUTH=jwt): refused before any
     * database work. */
    QUEEN_ERR_UNAUTHORIZED, /* no token, or one that does not verify */
    QUEEN_ERR_FORBIDDEN,    /* a valid token whose role, scopes or tenant do not allow the call */
    QUEEN_ERR_LIMIT_EXCEEDED, /* a per-tenant limit (queues, partitions, traces); nothing was written */
    /* The statement was sent and its answer never came (the connection died
     * or was cut at its deadline): it may have committed. Repeat the call
     * only when repeating is harmless: a read, an idempotent write, a
     * bundle with a transactionId or a required marker. */
    QUEEN_ERR_OUTCOME_UNKNOWN,
} queen_error_category;

/* Largest precondition value carried inline (bytes of JSON text). SQL caps
 * its whole DETAIL at 4096 bytes, so a value that SQL sends always fits. */
#define QUEEN_PRECONDITION_VALUE_MAX 4096
#define QUEEN_TENANT_LEN 36
/* The members no body, op or bundle may carry (refused with *_tenant_not_an_input
 * / tenant_not_an_input): the tenant is an argument, never an input. SQL's
 * kv_apply_v1 names the same three; tests/unit/test_limits.c compares them. */
#define QUEEN_TENANT_FIELDS {"tenant", "tenantId", "_tenant"}

/* Filled by every failing call, every field, so a caller never initialises
 * one (declaring it costs nothing). */
typedef struct queen_error {
    queen_error_category category;
    char sqlstate[6];  /* "" when the error did not come from PostgreSQL */
    char reason[64];   /* opaque id: our SQL's (kv_*, log_*), an engine id, or
                          the category's generic one for PostgreSQL's own errors */
    char detail[1024]; /* human text; names of keys, queues and tenants only here */
    int retry_after_s; /* > 0: a retry may succeed after this many seconds */
    /* QUEEN_ERR_PRECONDITION only: the lost op, from the SQL DETAIL. */
    struct {
        int index; /* position in the ops array */
        char op[16];
        char ns[80];
        char key[520];
        char reason[16]; /* exists | absent | version | limit | type */
        long long version; /* 0: no live row */
        /* The live value's JSON text, byte for byte ("null" when none);
         * value_omitted (value "") when it was too large to carry, with its
         * size in value_bytes: read the key to get it. */
        bool value_omitted;
        size_t value_bytes;
        char value[QUEEN_PRECONDITION_VALUE_MAX + 1];
    } precondition;
} queen_error;

/* The one registry of what a category means to a caller (reasons.txt):
 * whether to retry, and the names the transaction failure body and an
 * error without its own reason carry. */
typedef struct queen_error_class {
    const char *wire_reason; /* the transaction failure body's "reason" */
    const char *reason;      /* the reason given to an error with no own id */
    bool retryable;          /* the same call may succeed later */
    int retry_after_s;       /* retry no sooner than this many seconds; 0: no floor */
} queen_error_class;
const queen_error_class *queen_error_class_of(queen_error_category cat);

/* The members describing a lost required op, without braces, to splice
 * into a body: "failedIndex":index_offset+index,"kvReason","version" and
 * "value" (PostgreSQL's text, byte for byte), or "valueOmitted":true,
 * "valueBytes":n when the value was too large to carry. malloc'd; NULL when
 * err is not a precondition failure or out of memory. */
char *queen_error_precondition_json(const queen_error *err, int index_offset);

/* A tenant argument in canonical form: NULL or "" is QUEEN_DEFAULT_TENANT;
 * an 8-4-4-4-12 hex uuid in any case is that tenant, lower-cased; anything
 * else is refused (-1). Every call of libqueen applies it to its tenant
 * argument and refuses with QUEEN_ERR_BAD_REQUEST "bad_tenant". */
int queen_tenant_canonical(const char *tenant, char out[QUEEN_TENANT_LEN + 1]);

typedef struct queen queen;

/* ---- Configuration and schema (the same table the broker uses) -----------
 * queen_config_new() holds every default; then queen_config_from_env()
 * and/or queen_config_set() (by QUEEN_* name or flag name: "QUEEN_PG_POOL"
 * or "pg-pool"); queen_config_free() releases it (NULL allowed). Each
 * returns 0, or -1 with a message naming the setting in err. The getters
 * read one setting by the same names: 0, or -1 when no setting has that
 * name or it is of another type (a log level reads as an int: a
 * queen_log_level; a string setting may read as NULL: not set).
 * queen_schema_apply() applies sql/ (compiled in) to QUEEN_PG_URL,
 * idempotently: call it once before queen_open in a program that owns its
 * database (the broker does it at boot). */
queen_config *queen_config_new(void);
void queen_config_free(queen_config *cfg);
int queen_config_from_env(queen_config *cfg, char *err, size_t errlen);
int queen_config_set(queen_config *cfg, const char *name, const char *value, char *err, size_t errlen);
int queen_config_get_int(const queen_config *cfg, const char *name, int *out);
int queen_config_get_bool(const queen_config *cfg, const char *name, bool *out);
int queen_config_get_string(const queen_config *cfg, const char *name, const char **out);
int queen_schema_apply(const queen_config *cfg, char *err, size_t errlen);
/* Fills every setting whose 0 means "default" or "derived", from the one
 * table: QUEEN_PG_POOL 0 -> four per CPU core, at least 8; QUEEN_HTTP_THREADS
 * 0 -> the resolved pool; a numeric setting whose minimum is 1 or more and
 * holds 0 (or less) -> its default; a NULL string -> its default. Booleans
 * are left alone (false is a value). Idempotent. queen_open resolves its
 * own copy; call it to read (with the getters) the values the engine will use. */
void queen_config_resolve(queen_config *cfg);
/* The engine logs one line per event to stderr (never keys or values);
 * this sets the process-wide level (QUEEN_LOG_LEVEL is what the broker
 * passes). Default: QUEEN_LOG_INFO. */
void queen_log_set_level(queen_log_level level);

/* Opens the engine on cfg (copied; cfg may be freed after): a connection
 * pool of QUEEN_PG_POOL connections to QUEEN_PG_URL, the notifier thread
 * and, when QUEEN_SWEEPER, the sweeper thread. The copy is resolved with
 * queen_config_resolve, so a zeroed setting takes its default. Does not
 * apply the schema. NULL with err filled (QUEEN_ERR_UNAVAILABLE when the
 * database cannot be reached). Safe
 * to call from several threads at once (handles share nothing). */
queen *queen_open(const queen_config *cfg, queen_error *err);
/* See "Threads" above. NULL is allowed. */
void queen_close(queen *q);

/* ---- Memory and results -------------------------------------------------
 * Every function returning char * returns JSON text rendered by PostgreSQL,
 * malloc'd: the caller free()s it. Every int-returning call returns 0 on
 * success, or -1 with *err filled (err may be NULL). The tenant argument is
 * a uuid text in any case (see queen_tenant_canonical); NULL means
 * QUEEN_DEFAULT_TENANT. */

/* ---- KV (sql/kv.sql: queen.kv_apply_v1) ------------------------------
 * ops_json: a JSON array of ops (docs/api.md, KV). *results_json: the
 * array of results aligned by index. in_wire applies the wire budgets.
 * Before SQL: the input guards (QUEEN_KV_MAX_* clamped to SQL's budgets:
 * op and key counts, key and value bytes, NUL names, tenant fields) and the
 * tenant's quota and rate (queen_kv_admit), each refusal with SQL's reason.
 * A required op that loses: -1 with category QUEEN_ERR_PRECONDITION and
 * err->precondition filled from the SQL DETAIL. */
int queen_kv_apply(queen *q, const char *tenant, const char *ops_json, bool in_wire, char **results_json,
                   queen_error *err);

/* ---- KV quota and rate limits (sql/kv_quota.sql) -------------------
 * The admission of one kv call by tenant, before it is sent: reads and
 * writes are its ops (get/getMany/getPrefix one read each; put/putIfAbsent/
 * incr/delete one write each), creating the ops that may create a key (put,
 * putIfAbsent, incr: each counted +1 row, since only SQL knows whether the
 * key exists) and bytes their values' bytes (raw JSON). Runs no SQL except
 * once for a tenant this handle has not seen (or has evicted after a minute
 * idle); the figures come from a refresh every QUEEN_KV_QUOTA_REFRESH_MS.
 * Soft: with N handles (brokers) on one database a tenant may pass max_rows
 * or max_bytes by at most (N - 1) x its headroom at the last refresh.
 * Returns 0 (admitted: the tokens are taken and the rows/bytes counted), or
 * -1 with err: QUEEN_ERR_FEATURE_GATED (tenancy on: QUEEN_TENANCY_HEADER or QUEEN_AUTH "jwt"; and the tenant
 * has no kv_quota row or enabled = false), QUEEN_ERR_QUOTA_EXCEEDED (never
 * for a call with creating = 0 and bytes = 0: reads and deletes are never
 * refused for being full), QUEEN_ERR_RATE_LIMITED (*retry_after_s = whole
 * seconds until a token, >= 1; retry_after_s may be NULL), or what the
 * first load met (QUEEN_ERR_UNAVAILABLE, ...). queen_kv_apply, the typed
 * kv calls and queen_transaction (its kv part) make this same admission
 * themselves, after their input guards and before any connection is
 * taken, so every caller meets the same limits; call this only to ask
 * ahead (each call takes tokens and counts rows). */
int queen_kv_admit(queen *q, const char *tenant, int reads, int writes, int creating, long bytes, int *retry_after_s,
                   queen_error *err);

/* Expiry is explicit on every write: QUEEN_FOREVER or a ttl in seconds > 0;
 * 0 and every other negative are refused (kv_bad_ttl). LONG_MIN, not 0 or
 * -1, so that no ttl computed by arithmetic (a deadline minus now, an
 * unset zero) stores a key forever by accident. */
#define QUEEN_FOREVER LONG_MIN

/* Typed conveniences: each builds one op (jansson), sends it to
 * kv_apply_v1 in one prepared call, and returns the single result element
 * (JSON object text, caller frees). value_json is JSON text (e.g. "42",
 * "{\"a\":1}", "null"; required on puts), placed into the op by PostgreSQL
 * so numbers stay exact. expect < 0 means no expect. Refused before SQL
 * (QUEEN_ERR_BAD_REQUEST): NULL or non-UTF-8 names, ttl_seconds < 0, a
 * non-finite delta/min/max. A required op that loses: -1 with
 * QUEEN_ERR_PRECONDITION and err->precondition filled. */
int queen_kv_get(queen *q, const char *tenant, const char *ns, const char *key, char **result_json,
                 queen_error *err);
int queen_kv_put(queen *q, const char *tenant, const char *ns, const char *key, const char *value_json,
                 long ttl_seconds, long long expect, bool required, char **result_json, queen_error *err);
int queen_kv_put_if_absent(queen *q, const char *tenant, const char *ns, const char *key, const char *value_json,
                           long ttl_seconds, bool required, char **result_json, queen_error *err);
int queen_kv_delete(queen *q, const char *tenant, const char *ns, const char *key, long long expect,
                    bool required, char **result_json, queen_error *err);
/* min/max: NULL for none. */
int queen_kv_incr(queen *q, const char *tenant, const char *ns, const char *key, double delta, const double *min,
                  const double *max, long ttl_seconds, bool required, char **result_json, queen_error *err);
int queen_kv_get_many(queen *q, const char *tenant, const char *ns, const char *const *keys, size_t nkeys,
                      char **result_json, queen_error *err);
/* after: NULL for the first page; limit 0 for the default (100). */
int queen_kv_get_prefix(queen *q, const char *tenant, const char *ns, const char *prefix, const char *after,
                        int limit, bool keys_only, char **result_json, queen_error *err);

/* Console reads (queen.kv_list_v1 / kv_namespaces_v1). list: prefix NULL or
 * "" lists the namespace, limit 0 the default (100); the result is
 * {rows, truncated, nextAfter, bytes}. namespaces: the route's body,
 * {"namespaces":[{"namespace","keys"}]} in byte order. */
int queen_kv_list(queen *q, const char *tenant, const char *ns, const char *prefix, const char *after, int limit,
                  bool keys_only, bool include_expired, char **result_json, queen_error *err);
int queen_kv_namespaces(queen *q, const char *tenant, char **result_json, queen_error *err);
/* The tenant's quota and last usage measurement (queen.kv_quota_read_v1):
 * {"tenant","hasQuota","enabled","maxRows","maxBytes","maxReadsPerSec",
 * "maxWritesPerSec","rows","bytes","sampled","computedAt"}; a null max is
 * unlimited, hasQuota false when the tenant has no quota row. */
int queen_kv_quota(queen *q, const char *tenant, char **result_json, queen_error *err);

/* ---- Messages (sql/log_*.sql; shapes in docs/sql-log.md) ----------------------------- */
int queen_push(queen *q, const char *tenant, const char *items_json, char **results_json, queen_error *err);
/* queen_push stamping each message with producer (the caller's verified
 * identity, e.g. a token's sub; NULL or "" for none), which pop returns as
 * "producer". Never taken from the items. */
int queen_push_as(queen *q, const char *tenant, const char *producer, const char *items_json, char **results_json,
                  queen_error *err);

typedef struct queen_pop_options {
    const char *queue;             /* the queue; NULL: pop by labels */
    const char *partition;         /* NULL: any partition with work */
    const char *namespace_label;   /* queue NULL: the queues labelled so (NULL: any) */
    const char *task_label;        /* queue NULL: likewise; one of the two is required */
    const char *consumer_group;    /* NULL: __QUEUE_MODE__ */
    int batch;                     /* 0: 200; the cap of the whole call */
    int lease_seconds;             /* 0: the queue's leaseTime */
    int partitions;                /* 0: 1; partition NULL: claim up to this many */
    bool auto_ack;
    const char *subscription_mode; /* NULL or "all" (any value), "new"/"new-only" */
    const char *subscription_from; /* NULL, "now" or an ISO-8601 instant: a new group's start */
    bool wait;                     /* block until a message or timeout */
    int timeout_ms;                /* with wait; 0: QUEEN_POP_DEFAULT_TIMEOUT_MS */
} queen_pop_options;

/* *body_json is the pop body, or NULL when nothing was available (HTTP 204).
 * With wait: blocks the calling thread (holding no database connection)
 * until a message is popped or timeout_ms passed; a push to the queue (by
 * labels: to any queue of the tenant) wakes it within milliseconds.
 * queen_close ends the wait (0, NULL body). */
int queen_pop(queen *q, const char *tenant, const queen_pop_options *opts, char **body_json, queen_error *err);

/* acks_json: an array of ack items; group: the batch-level consumerGroup or NULL. */
int queen_ack(queen *q, const char *tenant, const char *acks_json, const char *group, char **results_json,
              queen_error *err);
int queen_lease_extend(queen *q, const char *tenant, const char *lease_id, int seconds, char **result_json,
                       queen_error *err);
/* The queue each partition or lease id names (queen.log_queues_of_v1), for
 * a scope check before an ack, trace or lease extension: refs_json
 * [{"partitionId": id} | {"leaseId": id}], names_json the same length of
 * queue names, null where the id is not a uuid, unknown or another
 * tenant's. Reads only. */
int queen_queues_of(queen *q, const char *tenant, const char *refs_json, char **names_json, queen_error *err);
/* Creates or reconfigures a queue (queen.log_configure_v1; docs/api.md,
 * Messages > Configure). options_json: an object of option names (NULL: {}); an
 * option not given keeps its stored value. The result echoes every option's
 * effective value and "storedOnly", the names stored but not acted on yet.
 * queen_configure_ex adds the rest of POST /api/v1/configure: label_namespace
 * and label_task, the queue's labels (NULL or "": keep the queue's; an
 * options_json "namespace" / "task" wins), and mode NULL or "merge", or
 * "replace" (every option not given goes back to its default). */
int queen_configure(queen *q, const char *tenant, const char *queue, const char *options_json, char **result_json,
                    queen_error *err);
int queen_configure_ex(queen *q, const char *tenant, const char *queue, const char *options_json,
                       const char *label_namespace, const char *label_task, const char *mode, char **result_json,
                       queen_error *err);
int queen_queues(queen *q, const char *tenant, char **result_json, queen_error *err);
int queen_queue_delete(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err);

/* ---- Dead letters (sql/log_dlq.sql) -----------------------------------
 * Messages that failed past their queue's retryLimit (reason "failed") or
 * waited past its maxWaitTimeSeconds (reason "expired"). Every call answers
 * the body PostgreSQL rendered (caller frees) or -1 with err
 * (QUEEN_ERR_BAD_REQUEST for a refused argument, reasons log_bad_*).
 * queen_dlq_list: {"messages":[{id, messageId, transactionId, queue,
 *   partition, partitionId, consumerGroup, offset, data, errorMessage,
 *   retryCount, reason, createdAt, failedAt}], "nextAfter": id | null}, oldest
 *   first; NULL filters match all; limit 0 = 100 (1..1000); after 0 = from
 *   the start, else the nextAfter of the previous page.
 * queen_dlq_requeue: appends the queue's dead letters (ids_json, a JSON array
 *   of ids, or NULL for all, at most max per call; 0 = 1000) back to their
 *   partitions for their consumer group only, as attempt 1, and deletes them:
 *   {"queue","requeued","remaining","messages":[{id, messageId,
 *   transactionId, partition, partitionId, consumerGroup, offset}]}. Exactly
 *   once: two concurrent requeues of one dead letter append it once.
 * queen_dlq_delete: the dead letter id (> 0), or with id 0 every one of
 *   queue: {"deleted": n}. */
typedef struct queen_dlq_query {
    const char *queue, *partition, *consumer_group; /* NULL: any */
    int limit;
    long long after;
} queen_dlq_query;
int queen_dlq_list(queen *q, const char *tenant, const queen_dlq_query *query, char **result_json, queen_error *err);
int queen_dlq_requeue(queen *q, const char *tenant, const char *queue, const char *ids_json, int max,
                      char **result_json, queen_error *err);
int queen_dlq_delete(queen *q, const char *tenant, long long id, const char *queue, char **result_json,
                     queen_error *err);

/* ---- Streams (sql/streams.sql) ----------------------------------------
 * The server side of the reference's streaming SDK: state, sink pushes and
 * the source ack of one cycle commit in one transaction. Each call takes the
 * body of its HTTP route (docs/openapi.yaml, the /streams/v1 paths) as JSON text and
 * answers its 200 body; refusals are -1 with err (nothing written):
 * queen_streams_register: {name, source_queue, sink_queue?, config_hash,
 *   reset?} -> {success, query_id, name, config_hash, fresh, reset}. The
 *   same name with another config_hash: QUEEN_ERR_CONFLICT,
 *   streams_config_mismatch, unless reset is true (the state is deleted).
 * queen_streams_state_get: {query_id, partition_id, keys?, key_prefix?,
 *   ripe_at_or_before?} -> {success, rows: [{key, value, updated_at}]}.
 * queen_streams_cycle: {query_id, partition_id, consumer_group?, state_ops?,
 *   push_items?, ack?: {transactionId, leaseId, status?, count?} | null,
 *   release_lease? = true} -> {success, query_id, partition_id, queueName,
 *   state_ops_applied, push_results, ack_result}. QUEEN_ERR_CONFLICT,
 *   streams_lease_lost: the ack's lease is no longer the live lease of the
 *   source cursor. QUEEN_ERR_BAD_REQUEST: streams_bad_*,
 *   streams_query_not_found, streams_partition_not_source, and the push's
 *   and the ack's own log_bad_*. QUEEN_ERR_OUTCOME_UNKNOWN: the connection
 *   died under the call; the cycle committed or not, and a retry of it is
 *   refused with streams_lease_lost when it had. */
int queen_streams_register(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);
int queen_streams_state_get(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);
int queen_streams_cycle(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);

/* ---- Stream windows (sql/stream_windows.sql) ---------------------------------
 * The older window API (docs/streams-windows.md): tumbling time windows over
 * source queues, handed out per (stream, consumer group, key) under a
 * lease. Each takes the body of its HTTP route (docs/openapi.yaml, the
 * /api/v1/stream paths) as JSON text; on 0 *result_json is the 200 body.
 * queen_stream_window_poll never waits: {"window": null} when none is ready
 * (the route's long poll re-polls). QUEEN_ERR_BAD_REQUEST: streams_window_*,
 * log_bad_group; QUEEN_ERR_CONFLICT: streams_window_lease_lost (ack, renew). */
int queen_stream_window_define(queen *q, const char *tenant, const char *body_json, char **result_json,
                               queen_error *err);
int queen_stream_window_poll(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);
int queen_stream_window_ack(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);
int queen_stream_window_renew(queen *q, const char *tenant, const char *body_json, char **result_json,
                              queen_error *err);
int queen_stream_window_seek(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err);
/* The resource reads and the delete (GET, DELETE /api/v1/resources/streams...);
 * get, consumers and delete answer the JSON text null for a name the tenant
 * has no stream of (the route's 404). */
int queen_stream_window_list(queen *q, const char *tenant, char **result_json, queen_error *err);
int queen_stream_window_stats(queen *q, const char *tenant, char **result_json, queen_error *err);
int queen_stream_window_get(queen *q, const char *tenant, const char *name, char **result_json, queen_error *err);
int queen_stream_window_consumers(queen *q, const char *tenant, const char *name, char **result_json,
                                  queen_error *err);
int queen_stream_window_delete(queen *q, const char *tenant, const char *name, char **result_json, queen_error *err);

/* ---- Consumer groups (sql/log_groups.sql) -----------------------------
 * queen_groups: {"consumerGroups":[{name, lagMessages, lagSeconds, queues:
 *   [{queue, lagMessages, lagSeconds, partitions: [{partition, partitionId,
 *   committedOffset, headOffset, lagMessages, lagSeconds, leaseId,
 *   leaseExpiresAt}]}]}]}. group NULL: every group; min_lag_seconds < 0:
 *   every cursor, else the lagging view (partitions whose oldest unconsumed
 *   message is at least that old).
 * queen_group_seek: to is "beginning", "end" or an ISO-8601 instant; moves
 *   the group's cursor on every partition of queue. Refused while the group
 *   holds a live lease there: -1, QUEEN_ERR_CONFLICT, reason
 *   log_group_leased (nothing moved; seek again after the lease).
 * queen_group_delete: the group's cursors on queue (NULL: every queue);
 *   refused likewise under a live lease. {"consumerGroup","deleted"}.
 * queen_group_subscription: moves the start of the group's subscriptions
 *   (every queue of the tenant) to from (ISO-8601 or "now"): where its first
 *   cursor on a partition it has not read yet starts; its cursors stay.
 *   {"consumerGroup","subscriptionTimestamp","queues"}. */
int queen_groups(queen *q, const char *tenant, const char *group, int min_lag_seconds, char **result_json,
                 queen_error *err);
int queen_group_seek(queen *q, const char *tenant, const char *group, const char *queue, const char *to,
                     char **result_json, queen_error *err);
int queen_group_delete(queen *q, const char *tenant, const char *group, const char *queue, char **result_json,
                       queen_error *err);
int queen_group_subscription(queen *q, const char *tenant, const char *group, const char *from, char **result_json,
                             queen_error *err);

/* ---- Browsing the log (sql/log_browse.sql) ----------------------------
 * A message's state is for one consumer group (NULL: queue mode): pending,
 * leased (in a live lease's batch), consumed or dead (its dead letter).
 * queen_messages_list: a partition's stored messages (partition NULL:
 *   "Default") in offset order, {"messages":[{id, transactionId, queue,
 *   partition, partitionId, offset, data, traceId, producer, createdAt,
 *   consumerGroup, state}], "nextAfter": offset | null}; limit 0 = 100
 *   (1..1000), after 0 = from the start.
 * queen_message_get: the messages with that transactionId (queue NULL: any),
 *   {"messages":[...]} (usually one; a requeued dead letter adds its copy).
 * queen_message_delete: deletes queue's messages with that transactionId
 *   (partition NULL: any); refused while a live lease covers one: -1,
 *   QUEEN_ERR_CONFLICT, reason log_message_leased. {"deleted": n}.
 * queen_message_at: the message (partition_id, transaction_id) of the tenant
 *   with its state for group (NULL: queue mode), and errorMessage and
 *   retryCount when it is the group's dead letter; the JSON text null when
 *   there is none. partition_id not a uuid: 400 log_bad_partition_id.
 * queen_message_delete_at: queen_message_delete on that message:
 *   {"deleted": n, "partitionId", "transactionId"}.
 * queen_message_retry: requeues the message's dead letters (every group's),
 *   as queen_dlq_requeue: {"retried": bool, "requeued": n, "partitionId",
 *   "transactionId"}; retried false when it is no dead letter. */
typedef struct queen_messages_query {
    const char *queue, *partition, *consumer_group;
    int limit;
    long long after;
} queen_messages_query;
int queen_messages_list(queen *q, const char *tenant, const queen_messages_query *query, char **result_json,
                        queen_error *err);
int queen_message_get(queen *q, const char *tenant, const char *transaction_id, const char *queue, const char *group,
                      char **result_json, queen_error *err);
int queen_message_delete(queen *q, const char *tenant, const char *queue, const char *transaction_id,
                         const char *partition, char **result_json, queen_error *err);
int queen_message_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                     const char *group, char **result_json, queen_error *err);
int queen_message_delete_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err);
int queen_message_retry(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                        char **result_json, queen_error *err);

/* ---- Traces (sql/log_traces.sql) --------------------------------------
 * queen_trace_add: records a trace event named name with data_json (any
 *   JSON text, or NULL) against the message (partition_id, transaction_id)
 *   of the tenant: {"recorded":true,"id","createdAt"}. Refusals (400):
 *   log_bad_partition_id (not the tenant's partition), log_bad_trace_name;
 *   413 log_trace_too_large (data over 64 KiB). Kept
 *   QUEEN_TRACE_RETENTION_SECONDS.
 * queen_traces_by_message: {"traces":[{id, traceName, transactionId,
 *   partitionId, queue, partition, data, createdAt}]} in recorded order.
 * queen_traces_by_name: the tenant's traces of that name, {"traces":[...],
 *   "nextAfter": id | null}; limit 0 = 100 (1..1000), after 0 = the start. */
int queen_trace_add(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                    const char *name, const char *data_json, char **result_json, queen_error *err);
int queen_traces_by_message(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err);
int queen_traces_by_name(queen *q, const char *tenant, const char *name, int limit, long long after,
                         char **result_json, queen_error *err);
/* queen_trace_names: the names the tenant's traces carry, most recently seen
 *   first, at most limit (0 = 50; 1..1000): {"names":[{traceName,
 *   traceCount, messageCount, lastSeen}], "total"}. */
int queen_trace_names(queen *q, const char *tenant, int limit, char **result_json, queen_error *err);

/* ---- Maintenance mode (sql/system_maintenance.sql) --------------------
 * One switch for the whole database, so every broker on it sees it within a
 * second. While it is on, pushes (queen_push*, and a queen_transaction
 * holding a push) are refused with QUEEN_ERR_UNAVAILABLE reason
 * "maintenance" (retry later), and queen_pop finds nothing (a waiting pop
 * waits); acks, reads and the kv work as usual. No push is accepted and
 * held back: what is acknowledged is committed.
 * Pop maintenance is a second switch that stops deliveries alone: queen_pop
 * finds nothing, pushes, acks and reads go on.
 * queen_maintenance: {"maintenance": bool, "since": instant | null,
 *   "popMaintenance": bool, "popSince": instant | null}.
 * queen_maintenance_set, queen_pop_maintenance_set: switch one; the same
 *   object plus "changed". */
int queen_maintenance(queen *q, char **result_json, queen_error *err);
int queen_maintenance_set(queen *q, bool enabled, char **result_json, queen_error *err);
int queen_pop_maintenance_set(queen *q, bool enabled, char **result_json, queen_error *err);

/* ---- Resources (sql/log_resources.sql) --------------------------------
 * What an admin client and the console read. Message states are queue
 * mode's (as queen_queues counts them).
 * queen_overview: {queues, partitions, consumerGroups, messages: {total,
 *   pending, processing, deadLetters}, pushedLastMinute}.
 * queen_labels: kind "namespace" or "task": {"namespaces"|"tasks":
 *   [{name, queues}]}.
 * queen_queue_detail: {name, queueId, namespace, task, createdAt,
 *   updatedAt, options, partitions, messages, deadLetters, consumerGroups};
 *   an unknown queue is 400 log_no_such_queue.
 * queen_queue_partitions: {queue, partitions: [{name, partitionId,
 *   headOffset, messages, createdAt, lastPushAt}]}.
 * queen_partitions: the tenant's partitions (of queue when not NULL) with
 *   at least min_depth pending messages, deepest first, at most limit (0 =
 *   100; 1..1000): {partitions: [{id, name, queue, namespace, task,
 *   createdAt, lastPushAt, headOffset, depth, processing, total}]}.
 * queen_queue_clear: deletes every stored message of the queue (cursors,
 *   options and dead letters stay): {queue, deleted}; refused while a live
 *   lease holds part of it (QUEEN_ERR_CONFLICT, log_message_leased). */
int queen_overview(queen *q, const char *tenant, char **result_json, queen_error *err);
int queen_labels(queen *q, const char *tenant, const char *kind, char **result_json, queen_error *err);
int queen_queue_detail(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err);
int queen_queue_partitions(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err);
int queen_partitions(queen *q, const char *tenant, const char *queue, long long min_depth, int limit,
                     char **result_json, queen_error *err);
int queen_queue_clear(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err);

/* ---- Status (sql/log_status.sql) -------------------------------------
 * The dashboard reads under the reference broker's names. Counts come from
 * offsets (two index probes per partition, never a count of messages):
 * docs/compat.md, "Dashboard status", says what that counts.
 * queen_status_queues: {queues: [{id, name, namespace, task, createdAt,
 *   partitions, messages: {total, pending, processing}}], pagination:
 *   {limit, offset}}, newest first; namespace / task filter when not NULL;
 *   limit 0 = 100 (1..1000), offset >= 0.
 * queen_status_queue: {queue: {id, name, ..., config}, partitions: [...],
 *   totals}, or the text null when the tenant has no such queue.
 * queen_status_analytics: {dataPoints: [{timestamp, messages}], interval,
 *   from, to}: messages pushed per UTC bucket; every member of the query
 *   may be NULL (interval hour, to now, from to - 24 h); from and to are
 *   ISO-8601 or "now". Refusals (400): log_bad_interval, log_bad_from,
 *   log_bad_to, log_bad_range.
 * queen_message_dlq: moves the message (partition_id, transaction_id) to
 *   the dead letters of every group that has not consumed it, and deletes
 *   it, in one transaction: {moved: true, partitionId, transactionId,
 *   deadLetters: [{id, consumerGroup}]}, or the text null when the tenant's
 *   partition stores no such message. Refused (409, nothing written):
 *   log_message_leased, log_message_consumed.
 * queen_pg_stats: the database's statistics for the queen schema (cache hit
 *   ratios, dead tuples, HOT updates, queries over 1 s, sizes): broker-wide,
 *   no tenant's. */
typedef struct queen_analytics_query {
    const char *from, *to, *interval, *queue, *namespace_, *task;
} queen_analytics_query;
int queen_status_queues(queen *q, const char *tenant, const char *namespace_, const char *task, int limit,
                        long long offset, char **result_json, queen_error *err);
int queen_status_queue(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err);
int queen_status_analytics(queen *q, const char *tenant, const queen_analytics_query *query, char **result_json,
                           queen_error *err);
int queen_message_dlq(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                      char **result_json, queen_error *err);
int queen_pg_stats(queen *q, char **result_json, queen_error *err);

/* ---- The transaction bundle (log_transaction_wire_v1) --------------------
 * bundle_json: {"operations":[...], "requiredLeases":[...], "kv":[...]} (the
 * tenant is the argument, never the body). A kv-only bundle goes straight to
 * kv_apply_v1(..., true). On 0, *result_json is the 200 body: success true
 * with results, or {"transactionId","success":false,"reason","error",
 * "results":[]} with reason bad_request | duplicate | ack_rejected |
 * kv_precondition | payload_too_large | misaligned | db_error (plus
 * failedIndex/kvReason/version/value for kv_precondition, "detail", and
 * "retryable":true where the same bundle may succeed later); nothing was
 * written. Returns -1 only where no such body applies:
 *   QUEEN_ERR_BAD_REQUEST   refused before SQL (400): reason bad_body,
 *     tenant_not_an_input, log_kv_in_operations, log_bad_request,
 *     log_bad_tenant, kv_bad_request, kv_tenant_not_an_input,
 *     kv_get_prefix_not_allowed_in_transaction, kv_too_many_ops (> 64),
 *     kv_too_many_keys (> 256);
 *   QUEEN_ERR_UNAVAILABLE   pool exhausted, closing, or the connection died
 *     during the call: then the outcome is UNKNOWN (it may have committed);
 *     retry the same bundle, with a required putIfAbsent marker to make the
 *     retry safe. */
int queen_transaction(queen *q, const char *tenant, const char *bundle_json, char **result_json, queen_error *err);
/* queen_transaction whose pushes are stamped with producer (see queen_push_as). */
int queen_transaction_as(queen *q, const char *tenant, const char *producer, const char *bundle_json,
                         char **result_json, queen_error *err);

/* ---- Long-poll support ----------------------------------------------------
 * Registers a one-shot callback, for callers that cannot block a thread per
 * waiting client and wait for something else than a pop (a waiting pop is
 * queen_poll, below). It fires exactly once:
 *   woken = true   re-check now: a push to (tenant, queue) committed, or the
 *                  engine re-established its LISTEN connection (pushes may
 *                  have gone unheard), or 1 s passed since registration (a
 *                  message can become available without a push: an expired
 *                  or released lease; and a push that committed between the
 *                  caller's empty pop and this registration is caught).
 *   woken = false  timeout_ms passed, or queen_close ran.
 * So the caller's loop is: pop; empty -> register with the time left;
 * on woken pop again; on not woken (or no time left) answer "nothing".
 * fn runs on the engine's notifier thread with no engine lock held: it may
 * call queen_wait_for_push again and may hand a request back to an event loop, but must
 * not block (no queen_pop from inside it: every other waiter waits for it).
 * Callable from any thread. The returned handle is an opaque token that
 * says "registered"; the engine frees it after fn returned, so never
 * dereference it. queue NULL: a push to any queue of the tenant wakes it.
 * NULL when it cannot register (closing, or queue longer than 255 bytes):
 * then fn is never called. */
typedef struct queen_waiter queen_waiter;
typedef void (*queen_wake_fn)(void *ctx, bool woken);
queen_waiter *queen_wait_for_push(queen *q, const char *tenant, const char *queue, int timeout_ms, queen_wake_fn fn,
                                  void *ctx);

/* A waiting pop without a blocked thread (the HTTP long poll; queen_pop
 * with wait is the same, blocking on it). It stays registered, in order of
 * opening, from its first attempt to its answer: a push of k messages wakes
 * the first k sleeping of each consumer group (a pop that took messages
 * leaves; one that found nothing goes back in its place with its
 * deadline), and once a second the engine asks the database in ONE
 * statement which waited-on (queue, group, partition) have something to
 * pop and wakes only as many as nobody pops for yet. The caller drives it:
 *   p = queen_poll_open(q, tenant, opts, fn, ctx);   // the wait opens here
 *   for (;;) switch (queen_poll_step(p, &body, &err)) {
 *       case QUEEN_POLL_SLEEP: wait for fn(ctx), then step again;
 *       default: queen_poll_close(p); answer (messages, nothing or err);
 *   }
 * A step pops (queen_pop without wait, on the calling thread) as often as
 * wakes that came during its attempts ask, and sleeps only when no wake
 * is pending. fn runs once after each step that returned SLEEP, possibly
 * before that step's caller saw the verdict, on the engine's notifier
 * thread with no engine lock held: it must not block (hand the request
 * back to an event loop, signal a thread). opts: what queen_pop takes
 * (copied); timeout_ms the wait (0: QUEEN_POP_DEFAULT_TIMEOUT_MS), wait
 * not read. Close every opened poll exactly once, before queen_close; the
 * close waits for an fn in progress, so never close holding a lock fn
 * takes. NULL when it cannot open (closing, a bad tenant, a name longer
 * than 255 bytes, no memory): then pop once without waiting. */
#define QUEEN_POP_DEFAULT_TIMEOUT_MS 30000
typedef struct queen_poll queen_poll;
typedef void (*queen_poll_wake_fn)(void *ctx);
typedef enum queen_poll_state {
    QUEEN_POLL_MESSAGES, /* *body_json holds what was popped */
    QUEEN_POLL_NOTHING,  /* its time is up, or the engine closes: answer "nothing" */
    QUEEN_POLL_SLEEP,    /* nothing yet: step again once fn was called */
    QUEEN_POLL_ERROR,    /* the attempt failed: err says why */
} queen_poll_state;
queen_poll *queen_poll_open(queen *q, const char *tenant, const queen_pop_options *opts, queen_poll_wake_fn fn,
                            void *ctx);
queen_poll_state queen_poll_step(queen_poll *p, char **body_json, queen_error *err);
void queen_poll_close(queen_poll *p);

/* ---- Figures for /metrics -------------------------------------------------
 * The engine's counters and gauges. Reading them never touches the database
 * nor takes a pooled connection: a scrape must work while the pool is
 * exhausted, which is when it matters. Every field is a long long so that
 * one table in the engine (src/engine/stats.h) can walk the struct for both
 * renderings, JSON (queen_stats_json, /metrics) and Prometheus
 * (/metrics/prometheus); flags are 0 or 1, durations milliseconds. */
/* Indices of the arrays below; the names are those of the JSON keys and
 * the Prometheus labels. */
enum { /* kv.ops first index */
    QUEEN_STATS_KV_GET, QUEEN_STATS_KV_PUT, QUEEN_STATS_KV_PUT_IF_ABSENT, QUEEN_STATS_KV_DELETE,
    QUEEN_STATS_KV_INCR, QUEEN_STATS_KV_GET_MANY, QUEEN_STATS_KV_GET_PREFIX, QUEEN_STATS_KV_OPS
};
enum { /* kv.ops second index */
    QUEEN_STATS_KV_APPLIED, QUEEN_STATS_KV_NOT_APPLIED, QUEEN_STATS_KV_FOUND, QUEEN_STATS_KV_MISSING,
    QUEEN_STATS_KV_OK, QUEEN_STATS_KV_PRECONDITION, QUEEN_STATS_KV_ERROR, QUEEN_STATS_KV_OUTCOMES
};
enum { QUEEN_STATS_BATCH_OK, QUEEN_STATS_BATCH_PRECONDITION, QUEEN_STATS_BATCH_ERROR, QUEEN_STATS_BATCH_OUTCOMES };
enum { /* kv.quota_refusals */
    QUEEN_STATS_REFUSED_QUOTA_EXCEEDED, QUEEN_STATS_REFUSED_FEATURE_GATED, QUEEN_STATS_REFUSED_RATE_LIMITED,
    QUEEN_STATS_REFUSALS
};
enum { /* transactions */
    QUEEN_STATS_TXN_SUCCESS, QUEEN_STATS_TXN_FAILED, QUEEN_STATS_TXN_REFUSED, QUEEN_STATS_TXN_UNAVAILABLE,
    QUEEN_STATS_TXN_OUTCOMES
};

typedef struct queen_stats {
    struct {
        long long size, in_use, waiting; /* now */
        long long acquired_total, timeouts_total, reconnects_total;
    } pool;
    struct {
        long long ops[QUEEN_STATS_KV_OPS][QUEEN_STATS_KV_OUTCOMES]; /* typed conveniences */
        long long batch[QUEEN_STATS_BATCH_OUTCOMES];                /* queen_kv_apply, per call */
        long long quota_refusals[QUEEN_STATS_REFUSALS];             /* queen_kv_admit, by reason */
    } kv;
    long long transactions[QUEEN_STATS_TXN_OUTCOMES];
    struct {
        long long total, empty; /* attempts (one per long-poll round), and those that found nothing */
        long long waits;        /* queen_pop calls with wait */
        /* sealed payloads that did not open (pop, browse, dead letters):
         * delivered as data null with encryptionError (docs/api.md, Payload encryption) */
        long long open_failures;
    } pops;
    struct {
        long long enabled; /* this handle runs the sweeper (QUEEN_SWEEPER) */
        long long deleted_total, lag_ms, cycles, errors, partitions_reclaimed_total, retention_deleted_total,
            usage_measures, last_cycle_ms;
    } sweeper;
    struct {
        long long connected, reconnects, notifies; /* the LISTEN connection */
        /* pushes' notifications handed to the notifier, the statements that
         * sent them (one per batch), and those dropped */
        long long announced, announce_statements, announce_dropped, local_wakes;
        /* waiting pops: the check statements (one per tick while any wait,
         * plus one after woken waiters took messages), the ticks that sent
         * one, the waiters checks woke and those pushes woke */
        long long checks, check_ticks, check_wakes, push_wakes;
    } notifier;
    long long waiters; /* long-poll waiters registered now */
} queen_stats;

/* Fills *out: 0, or -1 when q or out is NULL or q is closing. */
int queen_stats_get(queen *q, queen_stats *out);

/* The same figures as a JSON object (malloc'd, caller frees; NULL when
 * closing). Shape:
 *  "pool": {size, inUse, waiting, acquiredTotal, timeoutsTotal, reconnectsTotal}
 *  "kv": {"ops": {"get"|"put"|"putIfAbsent"|"delete"|"incr"|"getMany"|
 *          "getPrefix": {"applied"|"notApplied"|"found"|"missing"|"ok"|
 *          "precondition"|"error": n}}   (typed conveniences, per op; an
 *                                         outcome at 0 is left out)
 *         "batch": {ok, precondition, error},  (queen_kv_apply, per call)
 *         "quotaRefusals": {kv_quota_exceeded, feature_gated, rate_limited}}
 *                                               (queen_kv_admit)
 *  "transactions": {success, failed, refused, unavailable}
 *  "pops": {total, empty, waits, openFailures}
 *  "sweeper": {enabled, deletedTotal, lagMs, cycles, errors,
 *              partitionsReclaimedTotal, retentionDeletedTotal, usageMeasures, lastCycleMs}
 *  "notifier": {connected, reconnects, notifies, announced, announceStatements,
 *               announceDropped, localWakes, checks, checkTicks, checkWakes, pushWakes}, "waiters": n
 * (enabled and connected are booleans). */
char *queen_stats_json(queen *q);

/* A real database round trip. On success writes the server's version text
 * ("PostgreSQL 15.x") into version. */
int queen_health(queen *q, char *version, size_t len, queen_error *err);

#endif
