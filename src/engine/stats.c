/* stats: queen_stats_get, the table of families (stats.h) and the JSON
 * rendering. Reads counters and gauges the other files keep; never touches
 * the database and never takes a pooled connection (a scrape must work when
 * the pool is exhausted: that is when it matters). */
#include "stats.h"

#include <jansson.h>
#include <stdlib.h>

#include "engine.h"
#include "kv.h"
#include "notify.h"
#include "sweeper.h"

/* queen_stats_get copies the kv counters array by array: the engine's slot
 * order must be the public one. */
#define SAME(a, b) ((int)(a) == (int)(b)) /* two enums: compared as ints on purpose */
_Static_assert(SAME(KV_OP_N, QUEEN_STATS_KV_OPS) && SAME(KV_OUT_N, QUEEN_STATS_KV_OUTCOMES), "kv stats dimensions");
_Static_assert(SAME(KV_OP_GET, QUEEN_STATS_KV_GET) && SAME(KV_OP_PUT, QUEEN_STATS_KV_PUT) &&
                   SAME(KV_OP_PUT_IF_ABSENT, QUEEN_STATS_KV_PUT_IF_ABSENT) &&
                   SAME(KV_OP_DELETE, QUEEN_STATS_KV_DELETE) && SAME(KV_OP_INCR, QUEEN_STATS_KV_INCR) &&
                   SAME(KV_OP_GET_MANY, QUEEN_STATS_KV_GET_MANY) && SAME(KV_OP_GET_PREFIX, QUEEN_STATS_KV_GET_PREFIX),
               "kv op order");
_Static_assert(SAME(KV_OUT_APPLIED, QUEEN_STATS_KV_APPLIED) && SAME(KV_OUT_NOT_APPLIED, QUEEN_STATS_KV_NOT_APPLIED) &&
                   SAME(KV_OUT_FOUND, QUEEN_STATS_KV_FOUND) && SAME(KV_OUT_MISSING, QUEEN_STATS_KV_MISSING) &&
                   SAME(KV_OUT_OK, QUEEN_STATS_KV_OK) && SAME(KV_OUT_PRECONDITION, QUEEN_STATS_KV_PRECONDITION) &&
                   SAME(KV_OUT_ERROR, QUEEN_STATS_KV_ERROR),
               "kv outcome order");

static const char *const batch_names[QUEEN_STATS_BATCH_OUTCOMES] = {
    [QUEEN_STATS_BATCH_OK] = "ok",
    [QUEEN_STATS_BATCH_PRECONDITION] = "precondition",
    [QUEEN_STATS_BATCH_ERROR] = "error",
};
static const char *const refusal_names[QUEEN_STATS_REFUSALS] = {
    [QUEEN_STATS_REFUSED_QUOTA_EXCEEDED] = "kv_quota_exceeded",
    [QUEEN_STATS_REFUSED_FEATURE_GATED] = "feature_gated",
    [QUEEN_STATS_REFUSED_RATE_LIMITED] = "rate_limited",
};
static const char *const txn_names[QUEEN_STATS_TXN_OUTCOMES] = {
    [QUEEN_STATS_TXN_SUCCESS] = "success",
    [QUEEN_STATS_TXN_FAILED] = "failed",
    [QUEEN_STATS_TXN_REFUSED] = "refused",
    [QUEEN_STATS_TXN_UNAVAILABLE] = "unavailable",
};

#define AT(field) offsetof(queen_stats, field)
#define COUNTER(path0, path1, name, help, field) \
    {{path0, path1}, name, "counter", help, STATS_NUMBER, AT(field), {{0}}, false}
#define GAUGE(path0, path1, name, help, unit, field) \
    {{path0, path1}, name, "gauge", help, unit, AT(field), {{0}}, false}

/* In the order of queen_stats_json's keys (the shape documented in
 * queen.h); the Prometheus names are what dashboards already query. */
const stats_family stats_families[] = {
    GAUGE("pool", "size", "queen_pool_size", "Database connections in the pool.", STATS_NUMBER, pool.size),
    GAUGE("pool", "inUse", "queen_pool_in_use", "Pooled connections handed out now.", STATS_NUMBER, pool.in_use),
    GAUGE("pool", "waiting", "queen_pool_waiting", "Callers waiting for a pooled connection now.", STATS_NUMBER,
          pool.waiting),
    COUNTER("pool", "acquiredTotal", "queen_pool_acquired_total", "Pooled connections handed out.",
            pool.acquired_total),
    COUNTER("pool", "timeoutsTotal", "queen_pool_timeouts_total",
            "Waits for a connection that ended unavailable (503).", pool.timeouts_total),
    COUNTER("pool", "reconnectsTotal", "queen_pool_reconnects_total", "Broken connections replaced.",
            pool.reconnects_total),
    {{"kv", "ops"},
     "queen_kv_ops_total",
     "counter",
     "Single-op kv calls (the path routes, the typed API) by op and outcome.",
     STATS_NUMBER,
     AT(kv.ops),
     {{"op", kv_op_names, KV_OP_N}, {"outcome", kv_outcome_names, KV_OUT_N}},
     true /* most op/outcome pairs cannot happen (a get is never "applied") */},
    {{"kv", "batch"},
     "queen_kv_batches_total",
     "counter",
     "kv batch calls by outcome.",
     STATS_NUMBER,
     AT(kv.batch),
     {{"outcome", batch_names, QUEEN_STATS_BATCH_OUTCOMES}, {0}},
     false},
    {{"kv", "quotaRefusals"},
     "queen_kv_quota_refusals_total",
     "counter",
     "kv calls refused by quota, grant or rate limit, by reason.",
     STATS_NUMBER,
     AT(kv.quota_refusals),
     {{"reason", refusal_names, QUEEN_STATS_REFUSALS}, {0}},
     false},
    {{"transactions", NULL},
     "queen_transactions_total",
     "counter",
     "Transaction bundles by outcome.",
     STATS_NUMBER,
     AT(transactions),
     {{"outcome", txn_names, QUEEN_STATS_TXN_OUTCOMES}, {0}},
     false},
    COUNTER("pops", "total", "queen_pops_total", "Pop attempts (one per long-poll round).", pops.total),
    COUNTER("pops", "empty", "queen_pops_empty_total", "Pop attempts that found nothing.", pops.empty),
    COUNTER("pops", "waits", "queen_pops_waits_total", "Pop calls that wait for a message (long polls).",
            pops.waits),
    COUNTER("pops", "openFailures", "queen_pops_open_failures_total",
            "Sealed payloads of encrypted queues that did not open (no key, a retired key, altered or moved): "
            "delivered with data null and encryptionError.",
            pops.open_failures),
    GAUGE("sweeper", "enabled", "queen_sweeper_enabled", "1 when this process runs the sweeper.", STATS_FLAG,
          sweeper.enabled),
    COUNTER("sweeper", "deletedTotal", "queen_sweeper_deleted_total", "Expired kv rows deleted.",
            sweeper.deleted_total),
    GAUGE("sweeper", "lagMs", "queen_sweeper_lag_seconds", "Age of the oldest expired row seen by the last pass.",
          STATS_MS, sweeper.lag_ms),
    COUNTER("sweeper", "cycles", "queen_sweeper_cycles_total", "Sweeper passes.", sweeper.cycles),
    COUNTER("sweeper", "errors", "queen_sweeper_errors_total", "Sweeper passes that failed.", sweeper.errors),
    COUNTER("sweeper", "partitionsReclaimedTotal", "queen_sweeper_partitions_reclaimed_total",
            "Idle empty partitions reclaimed.", sweeper.partitions_reclaimed_total),
    COUNTER("sweeper", "retentionDeletedTotal", "queen_sweeper_retention_deleted_total",
            "Messages deleted by retention.", sweeper.retention_deleted_total),
    COUNTER("sweeper", "usageMeasures", "queen_sweeper_usage_measures_total", "kv usage measurements taken.",
            sweeper.usage_measures),
    GAUGE("sweeper", "lastCycleMs", "queen_sweeper_last_cycle_seconds", "Duration of the last pass.", STATS_MS,
          sweeper.last_cycle_ms),
    GAUGE("notifier", "connected", "queen_notifier_connected", "1 while the LISTEN connection is up.", STATS_FLAG,
          notifier.connected),
    COUNTER("notifier", "reconnects", "queen_notifier_reconnects_total", "LISTEN connection re-opened.",
            notifier.reconnects),
    COUNTER("notifier", "notifies", "queen_notifier_notifies_total", "Push notifications received.",
            notifier.notifies),
    COUNTER("notifier", "announced", "queen_notifier_announced_total",
            "Committed pushes whose notifications were handed to the notifier.", notifier.announced),
    COUNTER("notifier", "announceStatements", "queen_notifier_announce_statements_total",
            "Statements that sent them (one per batch gathered while the previous was in flight).",
            notifier.announce_statements),
    COUNTER("notifier", "announceDropped", "queen_notifier_announce_dropped_total",
            "Push notifications dropped (stopping, or the notifier too far behind); waiters re-check.",
            notifier.announce_dropped),
    COUNTER("notifier", "localWakes", "queen_notifier_local_wakes_total",
            "Long-poll waiters woken from this broker's own pushes, without the NOTIFY's round trip.",
            notifier.local_wakes),
    COUNTER("notifier", "checks", "queen_notifier_checks_total",
            "Statements asking which waited-on queues have something to pop (queen.log_poppable_v1): one per "
            "second while long polls wait, plus one after woken waiters took messages.",
            notifier.checks),
    COUNTER("notifier", "checkTicks", "queen_notifier_check_ticks_total",
            "Seconds in which waiting long polls were checked (one statement for all of them).",
            notifier.check_ticks),
    COUNTER("notifier", "checkWakes", "queen_notifier_check_wakes_total",
            "Long-poll waiters woken because a check found something for them.", notifier.check_wakes),
    COUNTER("notifier", "pushWakes", "queen_notifier_push_wakes_total",
            "Long-poll waiters woken by pushes (as many per consumer group as messages were queued).",
            notifier.push_wakes),
    GAUGE("waiters", NULL, "queen_push_waiters", "Long-poll waiters registered with the engine.", STATS_NUMBER,
          waiters),
};
const size_t stats_family_count = sizeof stats_families / sizeof stats_families[0];

size_t stats_cells(const stats_family *f)
{
    size_t n = 1;
    for (int d = 0; d < 2 && f->dim[d].label != NULL; d++)
        n *= (size_t)f->dim[d].n;
    return n;
}

long long stats_cell(const queen_stats *s, const stats_family *f, size_t k)
{
    const long long *first = (const long long *)((const char *)s + f->offset);
    return first[k];
}

void stats_cell_labels(const stats_family *f, size_t k, int *i0, int *i1)
{
    int n1 = f->dim[0].label != NULL && f->dim[1].label != NULL ? f->dim[1].n : 1;
    *i0 = (int)(k / (size_t)n1);
    *i1 = (int)(k % (size_t)n1);
}

static unsigned long load(atomic_ulong *c)
{
    return atomic_load(c);
}

int queen_stats_get(queen *q, queen_stats *out)
{
    if (out == NULL || !engine_enter(q, NULL))
        return -1;
    *out = (queen_stats){0};
    queen_pool_stats ps;
    queen_pool_get_stats(q->pool, &ps);
    out->pool.size = ps.size;
    out->pool.in_use = ps.in_use;
    out->pool.waiting = ps.waiting;
    out->pool.acquired_total = (long long)ps.acquired_total;
    out->pool.timeouts_total = (long long)ps.timeouts_total;
    out->pool.reconnects_total = (long long)ps.reconnects_total;

    queen_counters *c = &q->counters;
    for (int op = 0; op < KV_OP_N; op++)
        for (int o = 0; o < KV_OUT_N; o++)
            out->kv.ops[op][o] = (long long)load(&c->kv_typed[op][o]);
    out->kv.batch[QUEEN_STATS_BATCH_OK] = (long long)load(&c->kv_batch[BATCH_OK]);
    out->kv.batch[QUEEN_STATS_BATCH_PRECONDITION] = (long long)load(&c->kv_batch[BATCH_PRECONDITION]);
    out->kv.batch[QUEEN_STATS_BATCH_ERROR] = (long long)load(&c->kv_batch[BATCH_ERROR]);
    /* The engine's slots are quota_verdict - 1: gated, full, rate. */
    out->kv.quota_refusals[QUEEN_STATS_REFUSED_FEATURE_GATED] = (long long)load(&c->kv_quota_refusals[0]);
    out->kv.quota_refusals[QUEEN_STATS_REFUSED_QUOTA_EXCEEDED] = (long long)load(&c->kv_quota_refusals[1]);
    out->kv.quota_refusals[QUEEN_STATS_REFUSED_RATE_LIMITED] = (long long)load(&c->kv_quota_refusals[2]);
    out->transactions[QUEEN_STATS_TXN_SUCCESS] = (long long)load(&c->txn[TXN_SUCCESS]);
    out->transactions[QUEEN_STATS_TXN_FAILED] = (long long)load(&c->txn[TXN_FAILED]);
    out->transactions[QUEEN_STATS_TXN_REFUSED] = (long long)load(&c->txn[TXN_REFUSED]);
    out->transactions[QUEEN_STATS_TXN_UNAVAILABLE] = (long long)load(&c->txn[TXN_UNAVAILABLE]);
    out->pops.total = (long long)load(&c->pops);
    out->pops.empty = (long long)load(&c->pops_empty);
    out->pops.waits = (long long)load(&c->pop_waits);
    out->pops.open_failures = (long long)load(&c->open_failures);

    if (q->sweeper != NULL) {
        queen_sweeper_stats ss;
        sweeper_get_stats(q->sweeper, &ss);
        out->sweeper.enabled = 1;
        out->sweeper.deleted_total = (long long)ss.kv_deleted_total;
        out->sweeper.lag_ms = ss.kv_lag_ms;
        out->sweeper.cycles = (long long)ss.cycles;
        out->sweeper.errors = (long long)ss.errors;
        out->sweeper.partitions_reclaimed_total = (long long)ss.partitions_reclaimed_total;
        out->sweeper.retention_deleted_total = (long long)ss.retention_deleted_total;
        out->sweeper.usage_measures = (long long)ss.usage_measures;
        out->sweeper.last_cycle_ms = ss.last_cycle_ms;
    }
    out->notifier.connected = notifier_connected(q->notifier) ? 1 : 0;
    out->notifier.reconnects = (long long)notifier_reconnects(q->notifier);
    out->notifier.notifies = (long long)notifier_notifies(q->notifier);
    out->notifier.announced = (long long)notifier_announced(q->notifier);
    out->notifier.announce_statements = (long long)notifier_announce_statements(q->notifier);
    out->notifier.announce_dropped = (long long)notifier_announce_dropped(q->notifier);
    out->notifier.local_wakes = (long long)notifier_local_wakes(q->notifier);
    out->notifier.checks = (long long)notifier_checks(q->notifier);
    out->notifier.check_ticks = (long long)notifier_check_ticks(q->notifier);
    out->notifier.check_wakes = (long long)notifier_check_wakes(q->notifier);
    out->notifier.push_wakes = (long long)notifier_push_wakes(q->notifier);
    out->waiters = (long long)notifier_waiting(q->notifier);
    engine_leave(q);
    return 0;
}

/* The member key of obj, created as an empty object when absent. */
static json_t *child(json_t *obj, const char *key)
{
    json_t *c = json_object_get(obj, key);
    if (c == NULL && json_object_set_new(obj, key, c = json_object()) != 0)
        return NULL;
    return c;
}

static json_t *json_value(const stats_family *f, long long v)
{
    return f->unit == STATS_FLAG ? json_boolean(v != 0) : json_integer((json_int_t)v);
}

char *stats_render_json(const queen_stats *s)
{
    json_t *root = json_object();
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        int depth = f->json[1] != NULL ? 2 : 1;
        if (f->dim[0].label == NULL) {
            json_t *parent = depth == 2 ? child(root, f->json[0]) : root;
            json_object_set_new(parent, f->json[depth - 1], json_value(f, stats_cell(s, f, 0)));
            continue;
        }
        json_t *obj = root;
        for (int d = 0; d < depth; d++)
            obj = child(obj, f->json[d]);
        for (size_t k = 0, n = stats_cells(f); k < n; k++) {
            int i0, i1;
            stats_cell_labels(f, k, &i0, &i1);
            json_t *holder = obj;
            const char *key = f->dim[0].values[i0];
            if (f->dim[1].label != NULL) { /* {"get":{"found":n}}: the op's object even when all its cells are 0 */
                holder = child(obj, key);
                key = f->dim[1].values[i1];
            }
            long long v = stats_cell(s, f, k);
            if (!f->sparse || v != 0)
                json_object_set_new(holder, key, json_value(f, v));
        }
    }
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

/* Returns malloc'd JSON text (caller frees), or NULL when q is NULL, closing
 * or memory is short. The shape is documented in queen.h. */
char *queen_stats_json(queen *q)
{
    queen_stats s;
    if (queen_stats_get(q, &s) != 0)
        return NULL;
    return stats_render_json(&s);
}

const json_t *stats_json_cell(const json_t *root, const stats_family *f, size_t k)
{
    const json_t *v = root;
    for (int d = 0; d < 2 && f->json[d] != NULL; d++)
        v = json_object_get(v, f->json[d]);
    if (f->dim[0].label != NULL) {
        int i0, i1;
        stats_cell_labels(f, k, &i0, &i1);
        v = json_object_get(v, f->dim[0].values[i0]);
        if (f->dim[1].label != NULL)
            v = json_object_get(v, f->dim[1].values[i1]);
    }
    return v;
}
