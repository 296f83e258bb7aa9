/* engine: the queen handle shared by the API files (kv, log, wire, stats)
 * and the in-flight call accounting that lets queen_close() be called while
 * other threads still use the handle. The top of src/engine's layers: the
 * notifier, the sweeper and the quota table are handed what they need and
 * never include this header. Private; applications see only queen.h. */
#ifndef QUEEN_ENGINE_H
#define QUEEN_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "crypt.h"
#include "error.h"
#include "pool.h"
#include "queen.h"
#include "sqlcall.h"
#include "tenant.h"
#include "util.h"

typedef struct queen_notifier queen_notifier;
typedef struct queen_sweeper queen_sweeper;
typedef struct queen_quota queen_quota;

/* Counters of kv calls, read by queen_stats_get (stats.c). Typed
 * conveniences count by op and outcome (their single result is inspected
 * anyway); batch calls count per call, because counting per op would mean
 * parsing every result. */
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
    atomic_ulong open_failures; /* sealed payloads delivered as encryptionError (encryption.c) */
    atomic_ulong kv_quota_refusals[3]; /* gated, full, rate (quota_verdict - 1) */
} queen_counters;

struct queen {
    queen_config cfg; /* strings owned by this copy */
    queen_pool *pool;
    queen_notifier *notifier;
    queen_sweeper *sweeper;
    queen_quota *quota; /* quota.c: the tenant table and its refresh thread */
    queen_counters counters;
    crypt_keyring keyring; /* QUEEN_ENCRYPTION_KEY, parsed at open (crypt.h) */
    /* The database's maintenance switch as this handle last read it
     * (maintenance.c): read again when older than MAINTENANCE_RECHECK_MS. */
    struct {
        atomic_bool on, pops_off, refreshing; /* pops_off: pop maintenance */
        atomic_llong checked_ms;
    } maintenance;

    /* In-flight public calls (see engine_enter). closing is set once, by
     * queen_close; after that every new call fails with "closing". */
    atomic_int active;
    atomic_bool closing;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle_cv;
};

/* Every public call that touches the pool or the notifier brackets itself
 * with these. enter fails (false, err "closing") once queen_close started;
 * queen_close waits until every entered call has left. */
bool engine_enter(queen *q, queen_error *err);
void engine_leave(queen *q);

/* engine_enter plus the tenant judged (tenant.h): the canonical tenant in
 * out, or NULL with err filled and nothing entered. */
const char *engine_enter_tenant(queen *q, const char *tenant, char out[QUEEN_TENANT_LEN + 1], queen_error *err);

/* A tenant-scoped call of one SQL function (enter, run, leave) is a row of
 * the call table: calls.h. */

/* A push's NOTIFY is deferred past its commit (sql/log_push.sql says why): the push
 * or transaction statement sets this first, in a materialized CTE that runs
 * before the call it feeds, and engine_notify_pushed sends it afterwards. */
#define ENGINE_SQL_DEFER_NOTIFY "set_config('queen.notify', 'after_commit', true)"

/* The deferred NOTIFY of a committed push or transaction: results is what
 * log_push_v1 or log_transaction_wire_v1 returned, tenant canonical. Handed
 * to the notifier (notifier_announce), which sends it on its own connection
 * batched with the others; the caller does not wait. A failure costs only a
 * wake-up, which every waiter also gets from its re-check
 * (NOTIFY_RECHECK_MS), so it is logged, not returned. */
void engine_notify_pushed(queen *q, const char *tenant, const char *results);

/* 0 means "the SQL default" (NULL); any other value as decimal text in buf:
 * SQL refuses what is out of range rather than C guessing. */
const char *engine_int_or_null(char *buf, size_t len, long long v);

/* Whether the database's maintenance switch is on (sql/system_maintenance.sql), as last read;
 * read again, by one caller at a time, when older than half a second, so a
 * switch made through any broker holds here within a second. A failed read
 * keeps the last answer. */
bool engine_in_maintenance(queen *q);
/* Whether pops deliver nothing: maintenance, or pop maintenance (sql/system_maintenance.sql),
 * read as engine_in_maintenance reads. */
bool engine_pops_paused(queen *q);

/* Refuses a push under maintenance: QUEEN_ERR_UNAVAILABLE "maintenance"
 * (503 with Retry-After). -1 then, else 0. */
int engine_refuse_push_in_maintenance(queen *q, queen_error *err);

/* Payload encryption (crypt.h, sql/log_encryption.sql; the rules in encryption.c's header).
 * *sealed_items is items_json with the payloads of the items whose queue has
 * encryptionEnabled sealed for their place (an item without a transactionId
 * given a fresh one), malloc'd, or NULL when no item names such a queue or
 * the broker has no key (then the push's SQL refuses such an item: 503
 * encryption_key_missing, sql/log_push.sql). -1 with err. */
int engine_seal_items(queen *q, const char *tenant, const char *items_json, char **sealed_items, queen_error *err);

/* The wire's pushes: -1 with err (400 log_encrypted_queue_in_transaction:
 * its payloads reach SQL as sent) when items_json names a queue with
 * encryptionEnabled. Without a key, 0 at once: the bundle's push then
 * refuses such an item in SQL (503 encryption_key_missing). */
int engine_refuse_encrypted_items(queen *q, const char *tenant, const char *items_json, queen_error *err);

/* Opens, in an answer carrying stored messages ({"messages": [...]}: pop,
 * browse, dead letters), the data of each message of a queue with
 * encryptionEnabled for that message's place, for tenant (canonical); one
 * that does not open becomes "data": null, "encryptionError": <reason>,
 * counted and logged. 0, or -1 with err when the queues could not be
 * looked up (*body kept). */
int engine_open_body(queen *q, const char *tenant, char **body, queen_error *err);

/* rc, the outcome of a call answering stored payloads (the browse and dead-
 * letter listings), after engine_open_body on its answer for tenant as the
 * caller gave it (canonicalised here; a tenant that is not one left the call
 * refused, so there is nothing to open); -1 (answer freed) when opening
 * failed. */
int engine_open_answer(queen *q, const char *tenant, int rc, char **result_json, queen_error *err);

/* sql_call_text on the handle's pool. */
static inline int queen_call_text(queen *q, const char *name, const char *sql, int nparams,
                                  const char *const *params, char **out, queen_error *err)
{
    return sql_call_text(q->pool, name, sql, nparams, params, out, err);
}

#endif
