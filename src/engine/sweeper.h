/* sweeper: the background maintenance thread of one engine.
 *
 * Every kv_expire_every_ms it deletes expired kv rows through
 * queen.kv_expire_step_v1 over all 64 shards, visiting groups of shards from
 * a start that rotates each cycle, up to kv_expire_max_rows rows per cycle;
 * every retention_interval_ms it runs the log maintenance steps of log_maintenance.sql
 * (partition reclaim, retention, maxWait expiry, trace retention); every
 * USAGE_EVERY cycles it measures kv
 * usage per tenant (kv_usage_measure_v1). No leader: any number of engines
 * sweep together (SKIP LOCKED in SQL). Errors are logged at a limited rate
 * and never stop the thread. */
#ifndef QUEEN_SWEEPER_H
#define QUEEN_SWEEPER_H

#include <stddef.h>

#include "pool.h"
#include "queen.h"

#define SWEEP_SHARDS 64
#define SWEEP_GROUP 8          /* shards per kv_expire_step_v1 call */
#define SWEEP_USAGE_EVERY 60   /* cycles between usage measurements */

typedef struct queen_sweeper queen_sweeper;

typedef struct queen_sweeper_stats {
    unsigned long cycles;
    unsigned long errors;
    unsigned long kv_deleted_total;
    long long kv_lag_ms;          /* backlog age after the last cycle (0: caught up) */
    unsigned long partitions_reclaimed_total;
    unsigned long retention_deleted_total;
    unsigned long usage_measures;
    long long last_cycle_ms;      /* how long the last cycle took */
} queen_sweeper_stats;

/* Starts the thread on pool (which must outlive it) with cfg's cadence and
 * batch settings (copied). NULL with err on failure. */
queen_sweeper *sweeper_start(queen_pool *pool, const queen_config *cfg, char *err, size_t errlen);

/* Wakes the thread out of its wait, joins it and frees it. Returns within
 * one SQL step (a step in flight is not interrupted; it is bounded by
 * kv_expire_batch rows and the statement timeout). NULL is allowed. */
void sweeper_stop(queen_sweeper *s);

void sweeper_get_stats(queen_sweeper *s, queen_sweeper_stats *out);

/* The order in which cycle number `cycle` visits the groups of shards:
 * fills shards[SWEEP_SHARDS] with 0..63, starting at group (cycle mod
 * groups). Pure; for tests. */
void sweeper_shard_order(unsigned long cycle, short shards[SWEEP_SHARDS]);

#endif
