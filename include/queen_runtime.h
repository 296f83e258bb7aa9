/* queen_runtime.h: libqueen inside an event loop. What the HTTP broker
 * (src/server) uses of the engine besides queen.h, and nothing else: the
 * fibers its handlers run on, the executor that sends a fiber's statements
 * on the loop's own pipelined connections, the engine's figures as a table
 * (for a second rendering of queen_stats), the raw JSON scanner values
 * travel through byte for byte, the engine's log, and the broker's share of
 * the settings table. src/server includes this and queen.h and no other
 * engine header (scripts/check-includes.py).
 *
 * No ABI promise beyond one QUEEN_VERSION: pipeline_call and the other
 * structs here are laid out by the caller, so a program built against this
 * header runs on the libqueen it was built with.
 *
 * Yields. Once a loop thread installs an executor (sql_executor_set), every
 * libqueen call that sends a statement, made from a fiber of that thread,
 * hands the statement to the executor and gives the thread back to the
 * loop (fiber_yield) until the answer is in. Every queen.h call that takes
 * a `queen *` may send one (queen_kv_admit only for a tenant it has not
 * seen), except queen_stats_get, queen_stats_json, queen_wait_for_push,
 * queen_poll_open, queen_poll_close and queen_close; queen_poll_step pops,
 * so it yields too. No marker at the call site says so: the ~60 calls keep
 * their queen.h signatures (an executor argument on each would change every
 * embedding program), and the rule above is the marker. So a handler
 * holds no lock across a queen_* call: another fiber of the same
 * thread taking it would wait forever. Off a fiber, or on a thread with no
 * executor, the same calls block on the engine's own pool. */
#ifndef QUEEN_RUNTIME_H
#define QUEEN_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "queen.h"

/* libpq's result, as libpq-fe.h declares it (repeating the typedef is
 * allowed): the executor hands results through without this header
 * needing libpq's. */
typedef struct pg_result PGresult;

/* ---- The log --------------------------------------------------------------
 * One line per event on stderr, with a UTC timestamp and a level.
 * Thread-safe (one write(2) per line). Keys and values never go here. */
bool queen_log_enabled(queen_log_level level);
void queen_log(queen_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) queen_log(QUEEN_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) queen_log(QUEEN_LOG_WARN, __VA_ARGS__)
#define log_info(...) queen_log(QUEEN_LOG_INFO, __VA_ARGS__)
#define log_debug(...) queen_log(QUEEN_LOG_DEBUG, __VA_ARGS__)

/* ---- The broker's share of the settings table ------------------------------ */
/* queen_config's layout (opaque in queen.h): one field per setting of the
 * table (src/engine/config.c, docs/settings.md). The broker reads its
 * settings here on hot paths, where a lookup by name would cost; a program
 * that does is built against the libqueen it runs (see the top). */
struct queen_config {
    char *pg_url;
    char *bind;
    int port;
    queen_log_level log_level;
    char *dev_dir;
    int dev_pg_port;
    int schema_lock_wait_ms;
    int schema_lock_timeout_ms;
    int schema_retries;
    int pg_pool;
    int stmt_timeout_ms;
    int pg_acquire_timeout_ms;
    int http_threads;
    int pg_pipeline_depth;
    int pg_write_group_wait_ms;
    int max_body_bytes;
    int max_connections;
    int request_read_timeout_ms;
    int idle_timeout_ms;
    int response_write_timeout_ms;
    int max_inflight_answer_bytes;
    int drain_quiet_ms;
    int max_poll_timeout_ms; /* the HTTP long poll's timeout is at most this */
    int max_inflight_body_bytes;
    int max_body_values;
    int max_body_depth;
    bool sweeper;
    int kv_expire_every_ms;
    int kv_expire_batch;
    int kv_expire_max_rows;
    int partition_idle_seconds;
    int trace_retention_seconds;
    int retention_interval_ms; /* the sweeper's log_maintenance.sql maintenance (retention) cadence */
    bool tenancy_header;
    bool trusted_proxy;
    int kv_max_ops_per_call;
    int kv_max_keys_per_call;
    int kv_max_value_bytes;
    int kv_max_key_bytes;
    bool access_log;
    int slow_request_ms; /* warn about a request this slow (0: never) */
    int kv_quota_refresh_ms;
    char *auth;
    char *jwt_secret;
    char *jwt_public_keys;
    char *jwt_jwks;
    char *jwt_jwks_ca;
    int jwt_jwks_refresh_s;
    int jwt_jwks_min_refetch_s; /* fewest seconds between fetches asked for by unknown kids */
    char *jwt_issuer;
    char *jwt_audience;
    int jwt_leeway_s;
    char *jwt_tenant_claim;
    bool jwt_default_tenant;
    char *tls_cert;
    char *tls_key;
    char *tls_min_version;  /* "1.2" or "1.3" */
    char *tls_ciphers;      /* TLS 1.2 suites, OpenSSL cipher-list syntax */
    char *tls_ciphersuites; /* TLS 1.3 suites */
    char *allowed_origins; /* Origin values served besides the broker's own (src/server/origin.h) */
    char *allowed_hosts;   /* Host names served with QUEEN_AUTH=off besides addresses and localhost */
    /* QUEEN_ENCRYPTION_KEY (docs/api.md, Payload encryption). Without one, a
     * push into a queue with encryptionEnabled is refused
     * (QUEEN_ERR_UNAVAILABLE "encryption_key_missing", nothing stored), and
     * a popped message of such a queue comes with "data": null and
     * "encryptionError" instead of its ciphertext. */
    char *encryption_key;
    /* Per-tenant limits (docs/settings.md): the first four reach SQL
     * as session settings (queen._tenant_limit_v1); 0 is no limit. */
    int max_queues_per_tenant;
    int max_partitions_per_tenant;
    int max_traces_per_tenant;
    int max_trace_bytes_per_tenant;
    int max_long_polls_per_tenant; /* 0: a quarter of max_connections */
    /* How long a database statement may go unanswered after it was asked
     * for (waiting for a connection included) before it is cancelled and its
     * connection dropped (QUEEN_ERR_OUTCOME_UNKNOWN). */
    int request_deadline_ms;
};

/* A caller-owned queen_config (on the stack): every default, strings
 * pointing at static text; queen_config_clear releases what
 * queen_config_set allocated (queen_config_free is for queen_config_new's). */
void queen_config_defaults(queen_config *cfg);
void queen_config_clear(queen_config *cfg);

/* Parses --name=value / --name value flags from argv (after the subcommand).
 * Returns the number of arguments consumed, or -1 with err set. */
int queen_config_from_args(queen_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Cross-setting rules (tenancy needs a trusted proxy, ...). Give it a
 * resolved config (queen_config_resolve): the rules compare derived values. */
int queen_config_validate(const queen_config *cfg, char *err, size_t errlen);

/* The per-tenant limits SQL enforces, as the options of a connection's
 * startup packet ("-c queen.max_queues_per_tenant=N ..."): every broker
 * and libqueen connection carries them as session settings, read by
 * sql/log_schema.sql's _tenant_limit_v1, so no SQL signature changes for them. */
void queen_config_session_settings(const queen_config *cfg, char *out, size_t n);

/* --help text, and docs/settings.md's markdown table, both from the table. */
void queen_config_print_help(FILE *out);
void queen_config_print_markdown(FILE *out);

/* ---- Fibers -----------------------------------------------------------------
 * Cooperative user-space contexts on one thread. A fiber runs only on the
 * thread that started it and switches only where it calls fiber_yield (the
 * executor's wait), so code between two database calls runs as it would on
 * a thread of its own. */
typedef struct fiber fiber;
typedef void (*fiber_fn)(void *arg);

/* A fiber that will run fn(arg) when first resumed, or NULL (no memory).
 * Stacks are reused: fiber_free keeps a few for the next fiber_new. */
fiber *fiber_new(fiber_fn fn, void *arg);
void fiber_free(fiber *f);

/* Switches from the thread's own stack to f until it yields or returns.
 * Returns true when fn has returned (f may be freed then). */
bool fiber_resume(fiber *f);

/* From inside a fiber: back to whoever resumed it. */
void fiber_yield(void);

/* The fiber running on this thread, or NULL on the thread's own stack. */
fiber *fiber_current(void);

/* One deadline for all the database work of the fiber (a request's
 * handler run): 0 until set; its user (the database executor, pipeline.c)
 * sets it at the fiber's first statement and holds every later one to it. */
long long fiber_deadline_ms(const fiber *f);
void fiber_set_deadline_ms(fiber *f, long long deadline_ms);

/* Frees the stacks this thread keeps for reuse (at thread exit). */
void fiber_release_cache(void);

/* ---- The executor ------------------------------------------------------- */
/* Who runs a statement for the calling thread instead of the pool: the HTTP
 * edge's event loop installs one, so an engine call made from a request's
 * fiber sends its statement on the loop's pipelined connections and yields
 * until the result is in, while the loop serves other requests. exec
 * returns false when it cannot serve this call (not on a fiber): the pool
 * then runs it. Otherwise it fills *res (the caller PQclear()s it) or
 * returns with *res NULL and err filled; *lost says the connection died
 * under the statement, so whether it took effect is unknown. */
/* How calls of one read-only statement may share a round trip: an executor
 * that holds several such calls at once may send them as this one statement
 * instead. Its parameter i is the JSON array of the calls' parameters i, and
 * it returns one row per call, in call order, holding the columns (at most
 * 8) that call's own statement would have returned. When the shared statement
 * fails, each call is run on its own, so every call keeps its own verdict;
 * only statements whose calls may share a transaction qualify (reads). */
typedef struct sql_coalesce {
    const char *name;        /* the shared statement's name (a string literal) */
    const char *sql;         /* the shared statement */
    const char *param_kinds; /* per parameter: 'j' JSON text placed as is, 's' text placed as a JSON string */
    int max_calls;           /* at most this many calls in one */
    /* Calls that arrive while a statement of this kind, sent less than the
     * set's group wait ago, is in flight wait for it (pipeline.h). */
    bool waits_for_group;
    /* With waits_for_group: the wait is for a statement of this kind in
     * flight anywhere in the engine, not only on the caller's event loop,
     * and loops take turns sending one. For statements that serialise on the
     * same rows whichever loop sends them (pushes on their partitions' row
     * locks): two loops' groups in flight at once only wait for each other's
     * commit, and each is half the size (pipeline.h). */
    bool one_per_engine;
} sql_coalesce;

typedef struct sql_executor {
    bool (*exec)(void *ctx, const char *name, const char *sql, int nparams, const char *const *params,
                 const sql_coalesce *coalesce, PGresult **res, bool *lost, queen_error *err);
    void *ctx;
} sql_executor;

/* Installs ex for the calling thread (NULL removes it); ex must outlive it. */
void sql_executor_set(const sql_executor *ex);

/* ---- Pipelined connections (the loop's own executor) ----------------------
 * Non-blocking libpq connections in pipeline mode, owned by one event-loop
 * thread; each statement its own transaction. Deadlines, cancels, coalesced
 * statements and reconnects: src/engine/pipeline.h. Not thread-safe: every
 * call but the figures is made on the loop's thread. */
/* What the loop's epoll carries in data.ptr for every descriptor: the
 * handler of that descriptor's readiness. */
typedef struct loop_watch {
    void (*on_ready)(struct loop_watch *self, uint32_t events);
} loop_watch;

typedef struct pipeline_set pipeline_set;

/* A kind of statement that goes one at a time engine-wide (sql_coalesce's
 * one_per_engine): how many are in flight, when the lane last changed hands,
 * and which set's turn it is (its slot + 1; 0: whoever comes first). */
typedef struct pipeline_lane {
    _Atomic(const sql_coalesce *) kind;
    atomic_int busy;
    atomic_llong since_ms;
    atomic_int turn;
} pipeline_lane;

#define PIPELINE_LANES 4
#define PIPELINE_MAX_SETS 64

typedef struct pipeline_call {
    /* Set by the caller; name is a string literal (connections keep it). */
    const char *name;
    const char *sql;
    int nparams;
    const char *const *params;
    /* Non-NULL: held until pipeline_tick and sent as one statement with the
     * other calls held with the same one (sqlcall.h, sql_coalesce). */
    const sql_coalesce *coalesce;
    /* When the call must be answered (engine_now_ms clock); 0: the set's
     * deadline after submission. A request's own budget goes here. */
    long long deadline_ms;
    void (*done)(struct pipeline_call *call); /* on the loop thread, once */
    void *ctx;
    /* Filled before done: res (caller PQclear()s), or NULL with err. */
    PGresult *res;
    bool lost;
    queen_error err;
    /* The set's. */
    struct pipeline_call *next;
    long long queued_ms;
    long long sent_ms;
    const sql_coalesce *group_kind; /* sent as (or for) a statement of this kind that others wait for */
    pipeline_lane *lane;            /* the engine-wide turn this call holds, released when it finishes */
    pipeline_set *lane_set;
    bool prepare_pending;
} pipeline_call;

typedef struct pipeline_figures {
    atomic_int connections;  /* established now */
    atomic_int in_flight;    /* statements sent, result not yet in */
    atomic_int waiting;      /* calls waiting for room on a connection */
    atomic_ulong sent_total;
    atomic_ulong timeouts_total;
    atomic_ulong reconnects_total;
    atomic_ulong coalesced_statements_total; /* shared statements that answered their calls */
    atomic_ulong coalesced_calls_total;      /* calls answered by one */
    atomic_ulong coalesced_retries_total;    /* calls run alone after their shared statement failed */
    atomic_ulong deadline_cuts_total;        /* connections cut: a sent statement passed its deadline */
    atomic_ulong recycled_total;             /* idle connections replaced after a result past 1 MiB */
    /* Not figures: what the sets of one engine share, because they share
     * this struct. The engine-wide lanes, and the sets a finished lane
     * statement hands the turn to (guarded by sets_lock). */
    pipeline_lane lanes[PIPELINE_LANES];
    atomic_flag sets_lock;
    pipeline_set *sets[PIPELINE_MAX_SETS];
} pipeline_figures;

/* Connects nconns connections (conninfo and statement timeout as the pool's,
 * the timeout lowered by queen_deadline_statement_timeout) and registers them with
 * epfd. Fails when the first cannot be made; the others are retried in the
 * background. deadline_ms: every call's default deadline (above). figures
 * may be shared by several sets (one per loop); it must outlive the set. */
pipeline_set *pipeline_open(const char *conninfo, const char *settings, int nconns, int depth,
                            int statement_timeout_ms, int acquire_timeout_ms, int group_wait_ms, int deadline_ms,
                            int epfd, pipeline_figures *figures, char *err, size_t errlen);


/* Sends the call now or queues it (a coalescable call: holds it for the
 * next pipeline_tick); done() runs later, never inside.
 *
 * A held call whose coalescing waits_for_group stays held while a statement
 * of its kind sent less than group_wait_ms ago is in flight, even when a
 * connection is free: it then goes with everything of its kind that waited
 * meanwhile, as one statement. On two cores a group's fixed cost (its
 * transaction, commit and flush, PL/pgSQL's per-transaction set-up) is most
 * of a one-op write's, so fewer, larger groups do more writes per second;
 * the wait bounds what a slow group (a row lock) costs the writes behind.
 *
 * A kind that is one_per_engine waits for a statement of its kind in flight
 * on ANY set sharing the figures, and the sets take turns: when one
 * finishes, the turn goes to the next set (round robin) whose calls wait
 * for it, which is woken through its own eventfd. Measured 2026-12-04
 * (bench/RESULTS.md): one-message pushes at c=32 over two loops formed
 * groups of 8 per loop whose partition locks made them wait for each
 * other's commit; one lane forms groups of ~16 that never contend. */
void pipeline_submit(pipeline_set *s, pipeline_call *call);

/* Sends the held coalescable calls (the loop calls it once a turn, after
 * the turn's requests have made their calls), then handles the timeouts and
 * reconnects due at now_ms; the next time it wants to run (ms, monotonic),
 * or -1 when nothing is pending. */
long long pipeline_tick(pipeline_set *s, long long now_ms);

/* Fails every waiting and in-flight call (in flight: lost), then closes. */
void pipeline_close(pipeline_set *s);

/* ---- The engine's figures as a table ----------------------------------------
 * One row per family of queen_stats: its JSON path (queen_stats_json), its
 * Prometheus name, type and help, and the cells it covers. Both renderings
 * walk it, so a figure added there appears in both. */
typedef enum stats_unit {
    STATS_NUMBER, /* JSON integer, Prometheus integer */
    STATS_FLAG,   /* JSON true/false, Prometheus 1/0 */
    STATS_MS,     /* JSON milliseconds, Prometheus seconds (its base unit) */
} stats_unit;

/* One label of a family: its Prometheus name and its values, which are also
 * the JSON keys of the cells. */
typedef struct stats_dim {
    const char *label; /* NULL: unused */
    const char *const *values;
    int n;
} stats_dim;

typedef struct stats_family {
    /* JSON path: without labels, the last element is the figure's key;
     * with labels, the object whose keys are the label values. NULL ends a
     * shorter path. */
    const char *json[2];
    const char *name; /* Prometheus family */
    const char *type; /* "counter" or "gauge" */
    const char *help;
    stats_unit unit;
    size_t offset;    /* of the first cell in queen_stats; cells follow row-major over dim */
    stats_dim dim[2]; /* dim[1] only with dim[0] */
    bool sparse;      /* cells at 0 are left out of both renderings */
} stats_family;

extern const stats_family stats_families[];
extern const size_t stats_family_count;

/* Cells a family covers (product of its dims, 1 without labels). */
size_t stats_cells(const stats_family *f);

/* Cell k (row-major over dim) of family f in s. */
long long stats_cell(const queen_stats *s, const stats_family *f, size_t k);

/* The label value indices of cell k: *i0 over dim[0], *i1 over dim[1]
 * (0 when the dim is unused). */
void stats_cell_labels(const stats_family *f, size_t k, int *i0, int *i1);

/* ---- Raw JSON spans ----------------------------------------------------------
 * Byte spans inside JSON text: values travel from a client to PostgreSQL
 * byte for byte (a parser would re-render numbers). Pure: never allocates,
 * never validates beyond what it needs to skip a value; bounded by the span
 * on text that is not JSON. */
typedef struct rawjson_span {
    const char *p;
    size_t len;
} rawjson_span;

/* The span without leading and trailing JSON whitespace. */
rawjson_span rawjson_trim(rawjson_span s);

/* Bytes taken by the one JSON value that starts at s.p (no leading
 * whitespace); 0 when s does not start with a complete value. */
size_t rawjson_value_len(rawjson_span s);

/* Iterates the elements of an array or the members of an object. */
typedef struct rawjson_iter {
    const char *p, *end;
    bool object, first;
} rawjson_iter;

/* Starts on the array ('[') or object ('{') that s (trimmed) holds; false
 * when s holds another kind of value. */
bool rawjson_open(rawjson_iter *it, rawjson_span s, char kind);

/* The next element (key NULL for arrays) or member (key = the raw string
 * token, quotes included). false at the end. */
bool rawjson_next(rawjson_iter *it, rawjson_span *key, rawjson_span *value);

/* Whether a raw string token (quotes included, escapes allowed) spells the
 * ASCII name. */
bool rawjson_key_is(rawjson_span key, const char *name);

/* The value of member `name` of the object s; false when absent or when s
 * is not an object. */
bool rawjson_member(rawjson_span s, const char *name, rawjson_span *value);

/* The text between the braces of the object s, trimmed ("" for {}); false
 * when s is not an object. Used to splice a body's members into an op. */
bool rawjson_object_inner(rawjson_span s, rawjson_span *inner);

/* The decoded size of a raw string token (quotes included): *bytes its
 * UTF-8 bytes once escapes are decoded, *has_nul whether it holds U+0000.
 * false when s is not a string token. */
bool rawjson_string_info(rawjson_span s, size_t *bytes, bool *has_nul);

/* The elements of the array s; -1 when s is not an array. */
long rawjson_array_count(rawjson_span s);

/* What building a tree of s would cost, counted in one pass that allocates
 * nothing: values (every scalar, string, member name and container) and the
 * deepest nesting. The pass stops once either passes its limit (the text is
 * refused then anyway), so its cost is bounded by what it admits. It does
 * not validate: malformed text is counted as far as it goes and left to the
 * parser, which refuses it. */
typedef struct rawjson_shape {
    size_t values;
    size_t depth;
} rawjson_shape;
rawjson_shape rawjson_measure(rawjson_span s, size_t max_values, size_t max_depth);

#endif
