/* test_kv_concurrency: queen.kv under several real connections at once
 * (kv_apply_v1 rules 4, 8, 10 of tests/sql/kv.sql, and expiry), against the database in
 * QUEEN_TEST_PG_URL with the schema applied.
 *
 * What a single pgTAP session cannot show:
 *   - 32 concurrent putIfAbsent on one key: exactly one applies, every loser
 *     reports the winner's value and version (the ON CONFLICT arm locks the
 *     row before its WHERE, and the verdict read is not stale);
 *   - 16 connections x 20 incr max:100: exactly 100 admitted, final value 100
 *     (limits never saturate; incr is an admission decision);
 *   - the lock order: 8 connections x 200 calls, each writing 5 of 8 keys in
 *     random INPUT order. Through kv_apply_v1: zero 40P01. The control run
 *     sends the same workload as plain UPDATEs in input order, one
 *     transaction per call, and must deadlock at least once: that is what
 *     proves the first half can fail;
 *   - the sweeper never waits: a row another transaction holds is skipped.
 *
 * Worker threads use raw libpq and only record what happened; every cmocka
 * assertion runs on the main thread (cmocka's failure path is not
 * thread-safe). Each run uses fresh namespaces (pgtest_unique), so reruns and
 * concurrent suites never collide. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pgtest.h"
#include "testutil.h"

#define DEFAULT_TENANT "00000000-0000-0000-0000-000000000001"

/* One kv_apply_v1 call (HTTP budgets, now()) and the first result element's
 * verdict fields as text. */
static const char *const KV_CALL =
    "SELECT r->0->>'applied', r->0->>'value', r->0->>'version', r->0->>'reason'"
    "  FROM (SELECT queen.kv_apply_v1($1::jsonb, '" DEFAULT_TENANT "', NULL, false) AS r) AS s";

static void copy_field(char *dst, size_t n, const PGresult *res, int col)
{
    snprintf(dst, n, "%s", PQgetisnull(res, 0, col) ? "(null)" : PQgetvalue(res, 0, col));
}

/* ------------------------------------------------------------------ */
/* 32 concurrent putIfAbsent on one key                                 */
/* ------------------------------------------------------------------ */

#define PIA_WORKERS 32

typedef struct {
    const char *ns;
    int id;
    pthread_barrier_t *start;
    int done; /* 1 when the call returned a row */
    char applied[16], value[64], version[32], reason[32], err[256];
} pia_worker;

static void *pia_run(void *arg)
{
    pia_worker *w = arg;
    PGconn *conn = pgtest_connect_quiet(w->err, sizeof w->err);
    char ops[256];
    snprintf(ops, sizeof ops,
             "[{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"marker\",\"value\":%d,\"forever\":true}]", w->ns, w->id);
    const char *params[1] = {ops};

    pthread_barrier_wait(w->start); /* everyone connected: fire together */
    if (conn == NULL)
        return NULL;
    PGresult *res = PQexecParams(conn, KV_CALL, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        copy_field(w->applied, sizeof w->applied, res, 0);
        copy_field(w->value, sizeof w->value, res, 1);
        copy_field(w->version, sizeof w->version, res, 2);
        copy_field(w->reason, sizeof w->reason, res, 3);
        w->done = 1;
    } else {
        snprintf(w->err, sizeof w->err, "%s", PQresultErrorMessage(res));
    }
    PQclear(res);
    PQfinish(conn);
    return NULL;
}

static void test_put_if_absent_race(void **state)
{
    (void)state;
    char *ns = pgtest_unique("tkv-pia-");
    pia_worker workers[PIA_WORKERS];
    pthread_t threads[PIA_WORKERS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, PIA_WORKERS);

    memset(workers, 0, sizeof workers);
    for (int i = 0; i < PIA_WORKERS; i++) {
        workers[i] = (pia_worker){.ns = ns, .id = i, .start = &start};
        assert_int_equal(pthread_create(&threads[i], NULL, pia_run, &workers[i]), 0);
    }
    for (int i = 0; i < PIA_WORKERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);

    int winners = 0, winner = -1;
    for (int i = 0; i < PIA_WORKERS; i++) {
        if (!workers[i].done)
            fail_msg("worker %d: %s", i, workers[i].err);
        if (strcmp(workers[i].applied, "true") == 0) {
            winners++;
            winner = i;
        }
    }
    assert_int_equal(winners, 1);
    char want_value[16];
    snprintf(want_value, sizeof want_value, "%d", winner);
    assert_string_equal(workers[winner].value, want_value);
    for (int i = 0; i < PIA_WORKERS; i++) {
        if (i == winner)
            continue;
        /* every loser saw the winner: its value, its version, reason exists */
        assert_string_equal(workers[i].applied, "false");
        assert_string_equal(workers[i].reason, "exists");
        assert_string_equal(workers[i].value, workers[winner].value);
        assert_string_equal(workers[i].version, workers[winner].version);
    }
    free(ns);
}

/* ------------------------------------------------------------------ */
/* 16 connections x 20 incr max:100                                     */
/* ------------------------------------------------------------------ */

#define INCR_WORKERS 16
#define INCR_CALLS 20

typedef struct {
    const char *ns;
    pthread_barrier_t *start;
    int admitted, refused_limit, other;
    char err[256];
} incr_worker;

static void *incr_run(void *arg)
{
    incr_worker *w = arg;
    PGconn *conn = pgtest_connect_quiet(w->err, sizeof w->err);
    char ops[256];
    snprintf(ops, sizeof ops,
             "[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"bucket\",\"delta\":1,\"max\":100,\"forever\":true}]", w->ns);
    const char *params[1] = {ops};

    pthread_barrier_wait(w->start);
    if (conn == NULL) {
        w->other = INCR_CALLS;
        return NULL;
    }
    for (int i = 0; i < INCR_CALLS; i++) {
        PGresult *res = PQexecParams(conn, KV_CALL, 1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
            if (strcmp(PQgetvalue(res, 0, 0), "true") == 0)
                w->admitted++;
            else if (strcmp(PQgetvalue(res, 0, 3), "limit") == 0)
                w->refused_limit++;
            else
                w->other++;
        } else {
            w->other++;
            snprintf(w->err, sizeof w->err, "%s", PQresultErrorMessage(res));
        }
        PQclear(res);
    }
    PQfinish(conn);
    return NULL;
}

static void test_incr_admission(void **state)
{
    (void)state;
    char *ns = pgtest_unique("tkv-incr-");
    incr_worker workers[INCR_WORKERS];
    pthread_t threads[INCR_WORKERS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, INCR_WORKERS);

    memset(workers, 0, sizeof workers);
    for (int i = 0; i < INCR_WORKERS; i++) {
        workers[i] = (incr_worker){.ns = ns, .start = &start};
        assert_int_equal(pthread_create(&threads[i], NULL, incr_run, &workers[i]), 0);
    }
    for (int i = 0; i < INCR_WORKERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);

    int admitted = 0, refused = 0;
    for (int i = 0; i < INCR_WORKERS; i++) {
        if (workers[i].other != 0)
            fail_msg("worker %d: %d unexpected results: %s", i, workers[i].other, workers[i].err);
        admitted += workers[i].admitted;
        refused += workers[i].refused_limit;
    }
    assert_int_equal(admitted, 100);
    assert_int_equal(refused, INCR_WORKERS * INCR_CALLS - 100);

    PGconn *conn = pgtest_connect();
    const char *params[1] = {ns};
    char *value = pgtest_scalar(conn,
                                "SELECT value::text FROM queen.kv WHERE tenant_id = '" DEFAULT_TENANT
                                "' AND namespace = $1 AND key = 'bucket'",
                                1, params);
    assert_non_null(value);
    assert_string_equal(value, "100"); /* never saturated past max, never lost an increment */
    free(value);
    PQfinish(conn);
    free(ns);
}

/* ------------------------------------------------------------------ */
/* Lock order: 8 x 200 calls of 5 keys from 8, random input order        */
/* ------------------------------------------------------------------ */

#define LO_WORKERS 8
#define LO_CALLS 200
#define LO_KEYS 8
#define LO_PICK 5

typedef enum { MODE_KV_APPLY, MODE_PLAIN, MODE_GROUP } lo_mode;

typedef struct {
    const char *ns;
    lo_mode mode;
    unsigned seed;
    pthread_barrier_t *start;
    atomic_int *stop; /* plain mode stops everyone after the first deadlock */
    int committed, deadlocks, other;
    char err[256];
} lo_worker;

/* LO_PICK distinct keys of LO_KEYS, in random order (partial Fisher-Yates). */
static void pick_keys(unsigned *seed, int out[LO_PICK])
{
    int all[LO_KEYS];
    for (int i = 0; i < LO_KEYS; i++)
        all[i] = i;
    for (int i = 0; i < LO_PICK; i++) {
        int j = i + (int)(rand_r(seed) % (unsigned)(LO_KEYS - i));
        int t = all[i];
        all[i] = all[j];
        all[j] = t;
        out[i] = all[i];
    }
}

static int is_deadlock(const PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    return state != NULL && strcmp(state, "40P01") == 0;
}

/* Counts a call's outcome (committed, deadlocked or another error) and
 * frees its result. */
static void lo_count(lo_worker *w, PGresult *res)
{
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
        w->committed++;
    else if (is_deadlock(res))
        w->deadlocks++;
    else {
        w->other++;
        snprintf(w->err, sizeof w->err, "%s", PQresultErrorMessage(res));
    }
    PQclear(res);
}

/* One call through kv_apply_v1: 5 incr ops in random input order. */
static void lo_call_kv(lo_worker *w, PGconn *conn, const int keys[LO_PICK])
{
    char ops[1024];
    size_t n = 0;
    n += (size_t)snprintf(ops + n, sizeof ops - n, "[");
    for (int k = 0; k < LO_PICK; k++)
        n += (size_t)snprintf(ops + n, sizeof ops - n,
                              "%s{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"k%d\",\"delta\":1,\"forever\":true}",
                              k ? "," : "", w->ns, keys[k]);
    snprintf(ops + n, sizeof ops - n, "]");
    const char *params[1] = {ops};
    PGresult *res = PQexecParams(conn, KV_CALL, 1, NULL, params, NULL, NULL, 0);
    lo_count(w, res);
}

/* The same five increments as a group of five one-op calls
 * (kv_apply_group_v1, the broker's group commit), members in random input
 * order: the group must take them in key order too. */
static void lo_call_group(lo_worker *w, PGconn *conn, const int keys[LO_PICK])
{
    char calls[1024], tenants[256];
    size_t n = (size_t)snprintf(calls, sizeof calls, "["), t = (size_t)snprintf(tenants, sizeof tenants, "[");
    for (int k = 0; k < LO_PICK; k++) {
        n += (size_t)snprintf(calls + n, sizeof calls - n,
                              "%s[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"k%d\",\"delta\":1,\"forever\":true}]",
                              k ? "," : "", w->ns, keys[k]);
        t += (size_t)snprintf(tenants + t, sizeof tenants - t, "%s\"" DEFAULT_TENANT "\"", k ? "," : "");
    }
    snprintf(calls + n, sizeof calls - n, "]");
    snprintf(tenants + t, sizeof tenants - t, "]");
    const char *params[2] = {calls, tenants};
    PGresult *res =
        PQexecParams(conn, "SELECT count(*) FROM queen.kv_apply_group_v1($1::jsonb, $2::jsonb)", 2, NULL, params, NULL,
                     NULL, 0);
    lo_count(w, res);
}

/* The same call as plain statements: one UPDATE per key in INPUT order, in
 * one transaction. This is what a client-side loop would do. */
static void lo_call_plain(lo_worker *w, PGconn *conn, const int keys[LO_PICK])
{
    PQclear(PQexec(conn, "BEGIN"));
    for (int k = 0; k < LO_PICK; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", keys[k]);
        const char *params[2] = {w->ns, key};
        PGresult *res = PQexecParams(conn,
                                     "UPDATE queen.kv SET value = to_jsonb(value::numeric + 1),"
                                     "       version = nextval('queen.kv_version_seq'), updated_at = now()"
                                     " WHERE tenant_id = '" DEFAULT_TENANT "' AND namespace = $1 AND key = $2",
                                     2, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            if (is_deadlock(res)) {
                w->deadlocks++;
                atomic_store(w->stop, 1);
            } else {
                w->other++;
                snprintf(w->err, sizeof w->err, "%s", PQresultErrorMessage(res));
            }
            PQclear(res);
            PQclear(PQexec(conn, "ROLLBACK"));
            return;
        }
        PQclear(res);
    }
    PGresult *res = PQexec(conn, "COMMIT");
    if (PQresultStatus(res) == PGRES_COMMAND_OK)
        w->committed++;
    else {
        w->other++;
        snprintf(w->err, sizeof w->err, "%s", PQresultErrorMessage(res));
    }
    PQclear(res);
}

static void *lo_run(void *arg)
{
    lo_worker *w = arg;
    PGconn *conn = pgtest_connect_quiet(w->err, sizeof w->err);
    pthread_barrier_wait(w->start);
    if (conn == NULL) {
        w->other++;
        return NULL;
    }
    for (int i = 0; i < LO_CALLS; i++) {
        if (w->mode == MODE_PLAIN && atomic_load(w->stop))
            break; /* proven; every further deadlock costs deadlock_timeout */
        int keys[LO_PICK];
        pick_keys(&w->seed, keys);
        if (w->mode == MODE_KV_APPLY || (w->mode == MODE_GROUP && i % 2 == 1))
            lo_call_kv(w, conn, keys);
        else if (w->mode == MODE_GROUP)
            lo_call_group(w, conn, keys);
        else
            lo_call_plain(w, conn, keys);
    }
    PQfinish(conn);
    return NULL;
}

/* Runs the workload in one mode over fresh keys k0..k7 (created at 0);
 * returns the totals through the out parameters. */
static void lo_workload(lo_mode mode, int *committed, int *deadlocks, char **ns_out)
{
    char *ns = pgtest_unique(mode == MODE_PLAIN ? "tkv-plain-" : mode == MODE_GROUP ? "tkv-group-" : "tkv-lock-");
    PGconn *conn = pgtest_connect();
    char ops[1024];
    size_t n = (size_t)snprintf(ops, sizeof ops, "[");
    for (int k = 0; k < LO_KEYS; k++)
        n += (size_t)snprintf(ops + n, sizeof ops - n, "%s{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"k%d\",\"value\":0,\"forever\":true}",
                              k ? "," : "", ns, k);
    snprintf(ops + n, sizeof ops - n, "]");
    const char *params[1] = {ops};
    PQclear(pgtest_exec(conn, KV_CALL, 1, params));
    PQfinish(conn);

    lo_worker workers[LO_WORKERS];
    pthread_t threads[LO_WORKERS];
    pthread_barrier_t start;
    atomic_int stop;
    atomic_init(&stop, 0);
    pthread_barrier_init(&start, NULL, LO_WORKERS);
    memset(workers, 0, sizeof workers);
    unsigned base = (unsigned)time(NULL);
    for (int i = 0; i < LO_WORKERS; i++) {
        workers[i] = (lo_worker){.ns = ns, .mode = mode, .seed = base * 7919u + (unsigned)i,
                                 .start = &start, .stop = &stop};
        assert_int_equal(pthread_create(&threads[i], NULL, lo_run, &workers[i]), 0);
    }
    for (int i = 0; i < LO_WORKERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);

    *committed = 0;
    *deadlocks = 0;
    for (int i = 0; i < LO_WORKERS; i++) {
        if (workers[i].other != 0)
            fail_msg("worker %d: %d unexpected errors: %s", i, workers[i].other, workers[i].err);
        *committed += workers[i].committed;
        *deadlocks += workers[i].deadlocks;
    }
    *ns_out = ns;
}

static void lock_order_holds(lo_mode mode)
{
    int committed, deadlocks;
    char *ns;
    lo_workload(mode, &committed, &deadlocks, &ns);
    print_message("%s: %d calls committed, %d deadlocks\n",
                  mode == MODE_GROUP ? "groups and kv_apply_v1 calls" : "kv_apply_v1", committed, deadlocks);
    assert_int_equal(deadlocks, 0);
    assert_int_equal(committed, LO_WORKERS * LO_CALLS);

    /* every increment of every committed call landed exactly once */
    PGconn *conn = pgtest_connect();
    const char *params[1] = {ns};
    char *sum = pgtest_scalar(conn,
                              "SELECT sum(value::numeric)::bigint::text FROM queen.kv WHERE tenant_id = '" DEFAULT_TENANT
                              "' AND namespace = $1",
                              1, params);
    char want[32];
    snprintf(want, sizeof want, "%d", LO_WORKERS * LO_CALLS * LO_PICK);
    assert_non_null(sum);
    assert_string_equal(sum, want);
    free(sum);
    PQfinish(conn);
    free(ns);
}

static void test_lock_order_kv_apply(void **state)
{
    (void)state;
    lock_order_holds(MODE_KV_APPLY);
}

/* Groups of one-op calls (each member one key, members in random input
 * order) beside multi-op calls over the same keys: zero 40P01, every
 * increment once. The control below shows input order deadlocks. */
static void test_lock_order_groups(void **state)
{
    (void)state;
    lock_order_holds(MODE_GROUP);
}

/* The control: without the sorted apply the same workload deadlocks. If this
 * ever stops failing, the test above proves nothing. */
static void test_lock_order_plain_statements_deadlock(void **state)
{
    (void)state;
    int committed, deadlocks;
    char *ns;
    lo_workload(MODE_PLAIN, &committed, &deadlocks, &ns);
    print_message("plain statements in input order: %d calls committed, %d deadlocks\n", committed, deadlocks);
    assert_true(deadlocks >= 1);
    free(ns);
}

/* ------------------------------------------------------------------ */
/* The sweeper never waits on a row someone else holds                  */
/* ------------------------------------------------------------------ */

static void test_sweeper_skips_locked_rows(void **state)
{
    (void)state;
    char *ns = pgtest_unique("tkv-sweep-");
    PGconn *holder = pgtest_connect();
    PGconn *sweeper = pgtest_connect();
    const char *p1[1] = {ns};

    /* Two rows expired in 1970: nothing else in the suite is that old. */
    PQclear(pgtest_exec(holder,
                        "INSERT INTO queen.kv (namespace, key, value, version, expires_at)"
                        " SELECT $1, k, '1', nextval('queen.kv_version_seq'), '1970-01-01 00:00:00+00'"
                        "   FROM unnest(ARRAY['held', 'free']) AS k",
                        1, p1));
    char *shards = pgtest_scalar(holder,
                                 "SELECT array_agg(DISTINCT shard)::text FROM queen.kv"
                                 " WHERE tenant_id = '" DEFAULT_TENANT "' AND namespace = $1",
                                 1, p1);
    assert_non_null(shards);

    PQclear(pgtest_exec(holder, "BEGIN", 0, NULL));
    PQclear(pgtest_exec(holder,
                        "SELECT 1 FROM queen.kv WHERE tenant_id = '" DEFAULT_TENANT
                        "' AND namespace = $1 AND key = 'held' FOR UPDATE",
                        1, p1));

    PQclear(pgtest_exec(sweeper, "SET statement_timeout = '10s'", 0, NULL));
    const char *p2[1] = {shards};
    double t0 = now_s();
    char *step = pgtest_scalar(sweeper, "SELECT queen.kv_expire_step_v1($1::smallint[], '1971-01-01 00:00:00+00', 1000)::text",
                               1, p2);
    double waited = now_s() - t0;
    assert_non_null(step);
    assert_true(waited < 2.0); /* SKIP LOCKED: it did not wait for the holder */

    char *left = pgtest_scalar(sweeper,
                               "SELECT string_agg(key, ',' ORDER BY key) FROM queen.kv"
                               " WHERE tenant_id = '" DEFAULT_TENANT "' AND namespace = $1",
                               1, p1);
    assert_non_null(left);
    assert_string_equal(left, "held"); /* the free row was swept, the held one skipped */

    PQclear(pgtest_exec(holder, "ROLLBACK", 0, NULL));
    free(step);
    step = pgtest_scalar(sweeper, "SELECT queen.kv_expire_step_v1($1::smallint[], '1971-01-01 00:00:00+00', 1000)->>'done'",
                         1, p2);
    assert_string_equal(step, "true");
    free(left);
    left = pgtest_scalar(sweeper,
                         "SELECT count(*)::text FROM queen.kv WHERE tenant_id = '" DEFAULT_TENANT "' AND namespace = $1",
                         1, p1);
    assert_string_equal(left, "0"); /* released, then swept */

    free(left);
    free(step);
    free(shards);
    PQfinish(holder);
    PQfinish(sweeper);
    free(ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_if_absent_race),
        cmocka_unit_test(test_incr_admission),
        cmocka_unit_test(test_lock_order_kv_apply),
        cmocka_unit_test(test_lock_order_groups),
        cmocka_unit_test(test_lock_order_plain_statements_deadlock),
        cmocka_unit_test(test_sweeper_skips_locked_rows),
    };
    return cmocka_run_group_tests_name("kv_concurrency", tests, NULL, NULL);
}
