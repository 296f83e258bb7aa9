/* stats: queen_stats_json, the engine's figures for /metrics. Reads
 * counters and gauges the other files keep; never touches the database and
 * never takes a pooled connection (a scrape must work when the pool is
 * exhausted: that is when it matters). */
#include <jansson.h>
#include <stdlib.h>

#include "engine.h"
#include "kv.h"
#include "notify.h"
#include "sweeper.h"

static json_t *counter(atomic_ulong *c)
{
    return json_integer((json_int_t)atomic_load(c));
}

/* Returns malloc'd JSON text (caller frees), or NULL when q is NULL, closing
 * or memory is short. Shape:
 * {"pool":{size,inUse,waiting,acquiredTotal,timeoutsTotal,reconnectsTotal},
 *  "kv":{"ops":{"<op>":{"applied":n,...}}, "batch":{ok,precondition,error},
 *        "quotaRefusals":{kv_quota_exceeded,feature_gated,rate_limited}},
 *  "transactions":{success,failed,refused,unavailable},
 *  "pops":{total,empty,waits},
 *  "sweeper":{enabled,deletedTotal,lagMs,cycles,errors,partitionsReclaimedTotal,
 *             retentionDeletedTotal,usageMeasures,lastCycleMs},
 *  "notifier":{connected,reconnects,notifies}, "waiters":n} */
char *queen_stats_json(queen *q)
{
    if (!engine_enter(q, NULL))
        return NULL;
    queen_pool_stats ps;
    queen_pool_get_stats(q->pool, &ps);
    json_t *o = json_object();
    json_object_set_new(o, "pool",
                        json_pack("{s:i, s:i, s:i, s:I, s:I, s:I}", "size", ps.size, "inUse", ps.in_use, "waiting",
                                  ps.waiting, "acquiredTotal", (json_int_t)ps.acquired_total, "timeoutsTotal",
                                  (json_int_t)ps.timeouts_total, "reconnectsTotal", (json_int_t)ps.reconnects_total));

    json_t *ops = json_object();
    for (int op = 0; op < KV_OP_N; op++) {
        json_t *outcomes = json_object();
        for (int out = 0; out < KV_OUT_N; out++) {
            unsigned long v = atomic_load(&q->counters.kv_typed[op][out]);
            if (v > 0) /* most op/outcome pairs cannot happen (a get is never "applied") */
                json_object_set_new(outcomes, kv_outcome_names[out], json_integer((json_int_t)v));
        }
        json_object_set_new(ops, kv_op_names[op], outcomes);
    }
    json_t *kv = json_object();
    json_object_set_new(kv, "ops", ops);
    json_t *batch = json_object();
    json_object_set_new(batch, "ok", counter(&q->counters.kv_batch[BATCH_OK]));
    json_object_set_new(batch, "precondition", counter(&q->counters.kv_batch[BATCH_PRECONDITION]));
    json_object_set_new(batch, "error", counter(&q->counters.kv_batch[BATCH_ERROR]));
    json_object_set_new(kv, "batch", batch);
    json_object_set_new(kv, "quotaRefusals",
                        json_pack("{s:I, s:I, s:I}", "kv_quota_exceeded",
                                  (json_int_t)atomic_load(&q->counters.kv_quota_refusals[1]), "feature_gated",
                                  (json_int_t)atomic_load(&q->counters.kv_quota_refusals[0]), "rate_limited",
                                  (json_int_t)atomic_load(&q->counters.kv_quota_refusals[2])));
    json_object_set_new(o, "kv", kv);

    json_t *txn = json_object();
    json_object_set_new(txn, "success", counter(&q->counters.txn[TXN_SUCCESS]));
    json_object_set_new(txn, "failed", counter(&q->counters.txn[TXN_FAILED]));
    json_object_set_new(txn, "refused", counter(&q->counters.txn[TXN_REFUSED]));
    json_object_set_new(txn, "unavailable", counter(&q->counters.txn[TXN_UNAVAILABLE]));
    json_object_set_new(o, "transactions", txn);

    json_t *pops = json_object();
    json_object_set_new(pops, "total", counter(&q->counters.pops));
    json_object_set_new(pops, "empty", counter(&q->counters.pops_empty));
    json_object_set_new(pops, "waits", counter(&q->counters.pop_waits));
    json_object_set_new(o, "pops", pops);

    queen_sweeper_stats ss = {0};
    if (q->sweeper)
        sweeper_get_stats(q->sweeper, &ss);
    json_object_set_new(
        o, "sweeper",
        json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "enabled", q->sweeper != NULL, "deletedTotal",
                  (json_int_t)ss.kv_deleted_total, "lagMs", (json_int_t)ss.kv_lag_ms, "cycles",
                  (json_int_t)ss.cycles, "errors", (json_int_t)ss.errors, "partitionsReclaimedTotal",
                  (json_int_t)ss.partitions_reclaimed_total, "retentionDeletedTotal",
                  (json_int_t)ss.retention_deleted_total, "usageMeasures", (json_int_t)ss.usage_measures,
                  "lastCycleMs", (json_int_t)ss.last_cycle_ms));

    json_object_set_new(o, "notifier",
                        json_pack("{s:b, s:I, s:I}", "connected", notifier_connected(q->notifier), "reconnects",
                                  (json_int_t)notifier_reconnects(q->notifier), "notifies",
                                  (json_int_t)notifier_notifies(q->notifier)));
    json_object_set_new(o, "waiters", json_integer((json_int_t)notifier_waiting(q->notifier)));
    engine_leave(q);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}
