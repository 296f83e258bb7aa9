/* engine: the queen handle shared by every engine capability (kv, log, wire,
 * sweeper, notifier, stats) and the helpers they all use: the error door,
 * the one "call a SQL function, get its text" path, and the in-flight call
 * accounting that lets queen_close() be called while other threads still
 * use the handle. Private to src/engine; applications see only queen.h. */
#ifndef QUEEN_ENGINE_H
#define QUEEN_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "pool.h"
#include "queen.h"

typedef struct queen_notifier queen_notifier;
typedef struct queen_sweeper queen_sweeper;
typedef struct queen_quota queen_quota;

/* Counters of kv calls, for queen_stats_json. Typed conveniences count by op
 * and outcome (their single result is inspected anyway); batch calls count
 * per call, because counting per op would mean parsing every result. */
enum { KV_OP_GET, KV_OP_PUT, KV_OP_PUT_IF_ABSENT, KV_OP_DELETE, KV_OP_INCR, KV_OP_GET_MANY, KV_OP_GET_PREFIX, KV_OP_N };
enum { KV_OUT_APPLIED, KV_OUT_NOT_APPLIED, KV_OUT_FOUND, KV_OUT_MISSING, KV_OUT_OK, KV_OUT_PRECONDITION,
       KV_OUT_ERROR, KV_OUT_N };
enum { BATCH_OK, BATCH_PRECONDITION, BATCH_ERROR, BATCH_N };
enum { TXN_SUCCESS, TXN_FAILED, TXN_REFUSED, TXN_UNAVAILABLE, TXN_N };

typedef struct queen_counters {
    atomic_ulong kv_typed[KV_OP_N][KV_OUT_N];
    atomic_ulong kv_batch[BATCH_N];
    atomic_ulong txn[TXN_N];
    atomic_ulong pops, pops_empty, pop_waits;
    atomic_ulong kv_quota_refusals[3]; /* gated, full, rate (quota_verdict - 1) */
} queen_counters;

struct queen {
    queen_config cfg; /* strings owned by this copy */
    queen_pool *pool;
    queen_notifier *notifier;
    queen_sweeper *sweeper;
    queen_quota *quota; /* quota.c: the tenant table and its refresh thread */
    queen_counters counters;

    /* In-flight public calls (see engine_enter). closing is set once, by
     * queen_close; after that every new call fails with "closing". */
    atomic_int active;
    atomic_bool closing;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle_cv;
};

/* Fills err from a failed PGresult (see queen_error_from_fields). */
void queen_error_from_result(queen_error *err, const PGresult *res);

/* The one mapping of a PostgreSQL error to a queen_error: category from the
 * SQLSTATE table, reason = the message (an opaque code for our functions),
 * detail = the DETAIL. A 23514 DETAIL is parsed into err->precondition (the
 * value kept as the exact JSON text PostgreSQL rendered). state NULL means
 * libpq itself failed (connection lost): UNAVAILABLE. */
void queen_error_from_fields(queen_error *err, const char *state, const char *msg, const char *detail);

/* The category of one SQLSTATE (table lookup; exact codes before classes). */
queen_error_category queen_sqlstate_category(const char *state);

/* Fills err with an engine-made error. */
void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Acquires a pooled connection or fills err (UNAVAILABLE). */
queen_pool_conn *queen_acquire(queen *q, queen_error *err);

/* Runs one named prepared statement that returns one row of one column and
 * copies that column: *out is malloc'd text (caller frees) or NULL for SQL
 * NULL. Returns 0, or -1 with err filled (pool exhausted, SQL error). The
 * statement name must be a string literal (the pool keeps the pointer). */
int queen_call_text(queen *q, const char *name, const char *sql, int nparams, const char *const *params, char **out,
                    queen_error *err);

/* Every public call that touches the pool or the notifier brackets itself
 * with these. enter fails (false, err "closing") once queen_close started;
 * queen_close waits until every entered call has left. */
bool engine_enter(queen *q, queen_error *err);
void engine_leave(queen *q);

/* The tenant argument, defaulted: NULL or "" is QUEEN_DEFAULT_TENANT. */
const char *engine_tenant(const char *tenant);

/* Finds the member `name` of the top-level JSON object in text and returns a
 * pointer to the first byte of its value, with its length in *len, or NULL
 * when there is no such member or text is not an object. Does not validate
 * the JSON beyond what it needs to skip values: it is meant for text that
 * PostgreSQL rendered, to lift a value out byte for byte (jansson would turn
 * numbers into doubles). */
const char *json_raw_member(const char *text, const char *name, size_t *len);

/* Makes a libpq message one line: inner newlines and tabs become spaces,
 * trailing whitespace goes (log lines and error details stay single). */
void engine_one_line(char *s);

/* Milliseconds on the monotonic clock. */
long long engine_now_ms(void);

#endif
