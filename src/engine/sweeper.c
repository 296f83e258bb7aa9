/* sweeper: the maintenance loop (see sweeper.h). Owns its thread and its
 * counters; borrows pooled connections one SQL step at a time so request
 * traffic is never starved by a long cycle. Must never build SQL against a
 * table (it calls kv_expire_step_v1, kv_usage_measure_v1 and the log_maintenance.sql steps),
 * never be needed for correctness (every read already hides expired rows),
 * and never stop on an error: it logs (rate-limited) and tries next cycle. */
#include "sweeper.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logging.h"
#include "sqlcall.h"
#include "util.h"

#define LOG_EVERY_MS 10000
/* kv_usage_measure_v1 samples 8 shards of 64 once the table's planner
 * estimate passes a million rows: a full count of a big table every minute
 * is a scan a broker should not pay. By analogy, not measured. */
#define USAGE_SAMPLE_ABOVE_ROWS "1000000"
#define USAGE_SAMPLE_SHARDS "8"

struct queen_sweeper {
    queen_pool *pool;
    queen_config cfg; /* its numbers only; the strings are not used here */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a wall-clock jump must not stall the sweeper */
    bool stop;
    queen_sweeper_stats st; /* under mu */
    long long last_log_ms;
    unsigned long suppressed;
};

void sweeper_shard_order(unsigned long cycle, short shards[SWEEP_SHARDS])
{
    unsigned groups = SWEEP_SHARDS / SWEEP_GROUP;
    unsigned start = (unsigned)(cycle % groups);
    for (unsigned g = 0; g < groups; g++)
        for (unsigned i = 0; i < SWEEP_GROUP; i++)
            shards[g * SWEEP_GROUP + i] = (short)(((start + g) % groups) * SWEEP_GROUP + i);
}

static bool stopping(queen_sweeper *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* At most one line per LOG_EVERY_MS; the lines in between are counted and
 * the next line says how many were dropped. Only the sweeper thread calls. */
static void note_error(queen_sweeper *s, const char *what, const queen_error *err)
{
    pthread_mutex_lock(&s->mu);
    s->st.errors++;
    pthread_mutex_unlock(&s->mu);
    long long now = engine_now_ms();
    if (s->last_log_ms != 0 && now - s->last_log_ms < LOG_EVERY_MS) {
        s->suppressed++;
        return;
    }
    if (s->suppressed > 0)
        log_warn("sweeper: %s failed: %s %s (%s); %lu similar lines suppressed", what, err->sqlstate, err->reason,
                 err->detail, s->suppressed);
    else
        log_warn("sweeper: %s failed: %s %s (%s)", what, err->sqlstate, err->reason, err->detail);
    s->last_log_ms = now;
    s->suppressed = 0;
}

/* Runs one step that returns a JSON object; *obj is the parsed result
 * (caller decrefs). -1 on failure, logged. */
static int step(queen_sweeper *s, const char *what, const char *name, const char *sql, int nparams,
                const char *const *params, json_t **obj)
{
    queen_error err = {0};
    char *text = NULL;
    *obj = NULL;
    if (sql_call_text(s->pool, name, sql, nparams, params, &text, &err) != 0) {
        note_error(s, what, &err);
        return -1;
    }
    *obj = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!json_is_object(*obj)) {
        json_decref(*obj);
        *obj = NULL;
        queen_error_set(&err, QUEEN_ERR_INTERNAL, "bad_result", "%s returned no JSON object", name);
        note_error(s, what, &err);
        return -1;
    }
    return 0;
}

static long long json_int(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    return json_is_integer(v) ? (long long)json_integer_value(v) : json_is_real(v) ? (long long)json_real_value(v) : 0;
}

/* The kv part of one cycle. Returns -1 when a step failed (the rest of the
 * cycle is skipped: a database that is down would fail every step). */
static int sweep_kv(queen_sweeper *s, unsigned long cycle)
{
    const queen_config *cfg = &s->cfg;
    short order[SWEEP_SHARDS];
    sweeper_shard_order(cycle, order);
    long long deleted = 0, lag = 0;
    bool capped = false;
    for (int g = 0; g < SWEEP_SHARDS / SWEEP_GROUP && !capped; g++) {
        char shards[64];
        int off = snprintf(shards, sizeof shards, "{");
        for (int i = 0; i < SWEEP_GROUP; i++)
            off += snprintf(shards + off, sizeof shards - (size_t)off, "%s%d", i ? "," : "", order[g * SWEEP_GROUP + i]);
        snprintf(shards + off, sizeof shards - (size_t)off, "}");
        for (;;) {
            if (stopping(s))
                return 0;
            long long room = (long long)cfg->kv_expire_max_rows - deleted;
            if (room <= 0) {
                capped = true;
                break;
            }
            char rows[24];
            snprintf(rows, sizeof rows, "%lld", room < cfg->kv_expire_batch ? room : (long long)cfg->kv_expire_batch);
            const char *params[] = {shards, rows};
            json_t *r;
            if (step(s, "kv_expire_step_v1", "queen_kv_expire_step",
                     "SELECT queen.kv_expire_step_v1($1::smallint[], now(), $2::integer)::text", 2, params, &r) != 0)
                return -1;
            long long d = json_int(r, "deleted"), l = json_int(r, "lagMs");
            bool done = json_is_true(json_object_get(r, "done"));
            json_decref(r);
            deleted += d;
            pthread_mutex_lock(&s->mu);
            s->st.kv_deleted_total += (unsigned long)d;
            pthread_mutex_unlock(&s->mu);
            if (done)
                break;
            if (l > lag)
                lag = l;
        }
    }
    pthread_mutex_lock(&s->mu);
    s->st.kv_lag_ms = lag;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void sweep_log(queen_sweeper *s)
{
    const queen_config *cfg = &s->cfg;
    char idle[16], max[16];
    snprintf(idle, sizeof idle, "%d", cfg->partition_idle_seconds);
    snprintf(max, sizeof max, "%d", cfg->kv_expire_batch);
    const char *p1[] = {idle, max};
    json_t *r;
    if (step(s, "log_partition_reclaim_step_v1", "queen_partition_reclaim",
             "SELECT queen.log_partition_reclaim_step_v1(now(), $1::integer, $2::integer)::text", 2, p1, &r) != 0)
        return;
    long long reclaimed = json_int(r, "deleted");
    json_decref(r);
    const char *p2[] = {max};
    if (step(s, "log_retention_step_v1", "queen_retention_step",
             "SELECT queen.log_retention_step_v1(now(), $1::integer)::text", 1, p2, &r) != 0)
        return;
    long long retained = json_int(r, "deleted");
    json_decref(r);
    pthread_mutex_lock(&s->mu);
    s->st.partitions_reclaimed_total += (unsigned long)reclaimed;
    s->st.retention_deleted_total += (unsigned long)retained;
    pthread_mutex_unlock(&s->mu);
    /* maxWaitTimeSeconds for cursors no pop is claiming (sql/log_delays.sql). */
    if (step(s, "log_expire_step_v1", "queen_expire_step", "SELECT queen.log_expire_step_v1(now(), $1::integer)::text",
             1, p2, &r) == 0)
        json_decref(r);
    /* Traces past QUEEN_TRACE_RETENTION_SECONDS (sql/log_traces.sql). */
    char keep[16];
    snprintf(keep, sizeof keep, "%d", cfg->trace_retention_seconds);
    const char *p3[] = {keep, max};
    if (step(s, "log_trace_retention_step_v1", "queen_trace_retention",
             "SELECT queen.log_trace_retention_step_v1(now(), $1::integer, $2::integer)::text", 2, p3, &r) == 0)
        json_decref(r);
}

static void sweep_usage(queen_sweeper *s)
{
    const char *params[] = {USAGE_SAMPLE_ABOVE_ROWS, USAGE_SAMPLE_SHARDS};
    json_t *r;
    if (step(s, "kv_usage_measure_v1", "queen_kv_usage_measure",
             "SELECT queen.kv_usage_measure_v1(now(), $1::bigint, $2::integer)::text", 2, params, &r) != 0)
        return;
    json_decref(r);
    pthread_mutex_lock(&s->mu);
    s->st.usage_measures++;
    pthread_mutex_unlock(&s->mu);
}

static void *sweeper_main(void *arg)
{
    queen_sweeper *s = arg;
    /* Two cadences on one thread: the kv pass every kv_expire_every_ms, the
     * log_maintenance.sql maintenance (retention among it) every retention_interval_ms, each
     * due from its own last start; the thread sleeps until the nearer one. */
    long long next_kv = engine_now_ms(), next_maint = next_kv;
    bool ok = true; /* the last kv pass succeeded */
    for (unsigned long cycle = 0;;) {
        long long start = engine_now_ms();
        bool kv_ran = false;
        if (start >= next_kv) {
            ok = sweep_kv(s, cycle) == 0;
            if (ok && cycle % SWEEP_USAGE_EVERY == 0 && !stopping(s))
                sweep_usage(s);
            cycle++;
            kv_ran = true;
            next_kv = start + s->cfg.kv_expire_every_ms;
        }
        /* A failed kv step means the database is away: maintenance waits
         * for a kv pass that succeeds rather than failing too. */
        if (ok && start >= next_maint && !stopping(s)) {
            sweep_log(s);
            next_maint = start + s->cfg.retention_interval_ms;
        }
        long long took = engine_now_ms() - start;

        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long wait = (ok && next_maint < next_kv ? next_maint : next_kv) - engine_now_ms();
        if (wait < 0)
            wait = 0;
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&s->mu);
        if (kv_ran) {
            s->st.cycles++;
            s->st.last_cycle_ms = took;
        }
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
        }
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
    }
    return NULL;
}

queen_sweeper *sweeper_start(queen_pool *pool, const queen_config *cfg, char *err, size_t errlen)
{
    queen_sweeper *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->pool = pool;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    int rc = pthread_create(&s->thread, NULL, sweeper_main, s);
    if (rc != 0) {
        snprintf(err, errlen, "sweeper: pthread_create: %s", strerror(rc));
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void sweeper_stop(queen_sweeper *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void sweeper_get_stats(queen_sweeper *s, queen_sweeper_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}
