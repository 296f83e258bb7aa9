/* libqueen's connection pool and lifecycle against a real PostgreSQL:
 * backends killed under it are replaced and the next calls succeed; a pool
 * of one held by a blocked call answers UNAVAILABLE within the acquire
 * timeout; statement_timeout is enforced by the server and the connection
 * stays usable; queen_close ends a waiting pop promptly; handles opened and
 * closed from several threads at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

/* A handle with its own pool size and, when not 0, timeouts. */
static queen *open_engine(int pool, int acquire_ms, int stmt_ms)
{
    queen_config cfg;
    engine_config(&cfg, pgtest_url(), pool);
    if (acquire_ms)
        cfg.pg_acquire_timeout_ms = acquire_ms;
    if (stmt_ms)
        cfg.stmt_timeout_ms = stmt_ms;
    return engine_open_config(&cfg);
}

static void killed_backends_are_replaced(void **state)
{
    (void)state;
    queen *q = open_engine(3, 0, 0);
    char *ns = pgtest_unique("pool-kill-");
    queen_error e = {0};
    char *out;
    assert_int_equal(queen_kv_put(q, NULL, ns, "k", "1", 60, -1, false, &out, &e), 0);
    free(out);
    PGconn *admin = pgtest_connect();
    for (int round = 0; round < 2; round++) {
        long long killed = pgtest_int(admin,
                                      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) "
                                      "FROM pg_stat_activity WHERE application_name = 'queen' "
                                      "AND datname = current_database()",
                                      0, NULL);
        assert_true(killed >= 1);
        /* Every call after the kill succeeds: the dead connections are
         * noticed before use and replaced. */
        for (int i = 0; i < 6; i++) {
            if (queen_kv_get(q, NULL, ns, "k", &out, &e) != 0)
                fail_msg("round %d call %d after the kill: %s %s", round, i, e.reason, e.detail);
            free(out);
        }
        char version[64];
        assert_int_equal(queen_health(q, version, sizeof version, &e), 0);
        assert_non_null(strstr(version, "PostgreSQL"));
    }
    assert_true(engine_stat(q, "pool", "reconnectsTotal") >= 2);
    PQfinish(admin);
    free(ns);
    queen_close(q);
}

typedef struct held {
    queen *q;
    const char *tenant, *ns;
    int rc;
    queen_error e;
    long long took;
} held;

/* Blocks on the row lock the test holds: keeps its pooled connection. */
static void *blocked_put(void *p)
{
    held *h = p;
    char *out = NULL;
    long long t0 = now_ms();
    h->rc = queen_kv_put(h->q, h->tenant, h->ns, "held", "2", 60, -1, false, &out, &h->e);
    h->took = now_ms() - t0;
    free(out);
    return NULL;
}

/* Takes the row lock of (tenant, ns, "held") in an open transaction on
 * admin, through the SQL function like any writer. */
static void lock_row(PGconn *admin, const char *tenant, const char *ns)
{
    PQclear(pgtest_exec(admin, "BEGIN", 0, NULL));
    char ops[256];
    snprintf(ops, sizeof ops, "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"held\",\"value\":1,\"forever\":true}]", ns);
    const char *params[] = {ops, tenant};
    PQclear(pgtest_exec(admin, "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)", 2, params));
}

static void exhausted_pool_answers_unavailable_in_time(void **state)
{
    (void)state;
    queen *q = open_engine(1, 300, 0);
    char tenant[37];
    wire_uuid4(tenant);
    char *ns = pgtest_unique("pool-one-");
    PGconn *admin = pgtest_connect();
    lock_row(admin, tenant, ns);
    held h = {.q = q, .tenant = tenant, .ns = ns};
    pthread_t th;
    pthread_create(&th, NULL, blocked_put, &h);
    /* Wait until the put holds the only connection and waits on the lock:
     * a backend blocked by this admin session is exactly that. */
    char admin_pid[16];
    snprintf(admin_pid, sizeof admin_pid, "%d", PQbackendPID(admin));
    const char *pid_param[] = {admin_pid};
    long long until = now_ms() + 5000;
    while ((engine_stat(q, "pool", "inUse") < 1 ||
            pgtest_int(admin, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", 1,
                       pid_param) < 1) &&
           now_ms() < until)
        usleep(5000);

    char *out = (char *)1;
    queen_error e = {0};
    long long t0 = now_ms();
    assert_int_equal(queen_kv_get(q, tenant, ns, "x", &out, &e), -1);
    long long took = now_ms() - t0;
    assert_null(out);
    assert_int_equal(e.category, QUEEN_ERR_UNAVAILABLE);
    assert_string_equal(e.reason, "db_unavailable");
    print_message("# pool of 1 exhausted: UNAVAILABLE after %lld ms (acquire timeout 300 ms)\n", took);
    assert_true(took >= 290 && took < 1500);
    assert_true(engine_stat(q, "pool", "timeoutsTotal") >= 1);

    PQclear(pgtest_exec(admin, "COMMIT", 0, NULL));
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_int_equal(queen_kv_get(q, tenant, ns, "held", &out, &e), 0); /* the pool is whole again */
    assert_non_null(strstr(out, "\"value\": 2"));
    free(out);
    PQfinish(admin);
    free(ns);
    queen_close(q);
}

static void statement_timeout_is_enforced_by_the_server(void **state)
{
    (void)state;
    queen *q = open_engine(1, 0, 300);
    char tenant[37];
    wire_uuid4(tenant);
    char *ns = pgtest_unique("pool-slow-");
    PGconn *admin = pgtest_connect();
    lock_row(admin, tenant, ns);
    held h = {.q = q, .tenant = tenant, .ns = ns};
    blocked_put(&h);
    assert_int_equal(h.rc, -1);
    assert_int_equal(h.e.category, QUEEN_ERR_UNAVAILABLE);
    assert_string_equal(h.e.sqlstate, "57014");
    assert_true(h.took >= 290 && h.took < 3000);
    PQclear(pgtest_exec(admin, "ROLLBACK", 0, NULL));
    /* The cancelled statement left the connection usable. */
    char *out;
    queen_error e = {0};
    assert_int_equal(queen_kv_put(q, tenant, ns, "held", "3", 60, -1, false, &out, &e), 0);
    free(out);
    assert_int_equal(engine_stat(q, "pool", "reconnectsTotal"), 0);
    PQfinish(admin);
    free(ns);
    queen_close(q);
}

typedef struct popper {
    queen *q;
    const char *queue;
    int rc;
    char *body;
    long long took;
} popper;

static void *long_pop(void *p)
{
    popper *a = p;
    queen_error e = {0};
    long long t0 = now_ms();
    a->rc = queen_pop(a->q, NULL, &(queen_pop_options){.queue = a->queue, .wait = true, .timeout_ms = 30000},
                      &a->body, &e);
    a->took = now_ms() - t0;
    return NULL;
}

static void close_ends_a_waiting_pop(void **state)
{
    (void)state;
    queen *q = open_engine(2, 0, 0);
    char *queue = pgtest_unique("pool-close-");
    popper a = {.q = q, .queue = queue};
    pthread_t th;
    pthread_create(&th, NULL, long_pop, &a);
    /* Close while the pop is waiting, not before it started. */
    long long until = now_ms() + 5000;
    queen_stats st;
    while ((queen_stats_get(q, &st) != 0 || st.waiters < 1) && now_ms() < until)
        usleep(5000);
    assert_int_equal(st.waiters, 1);
    long long t0 = now_ms();
    queen_close(q); /* while the pop is inside queen_pop */
    long long took = now_ms() - t0;
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    assert_null(a.body);
    assert_true(a.took < 5000);
    print_message("# queen_close with a waiting pop: %lld ms\n", took);
    assert_true(took < 2000);
    free(queue);
}

static void *open_use_close(void *p)
{
    (void)p;
    for (int i = 0; i < 3; i++) {
        queen *q = open_engine(1, 0, 0);
        char version[64];
        queen_error e = {0};
        if (queen_health(q, version, sizeof version, &e) != 0)
            return (void *)1;
        queen_close(q);
    }
    return NULL;
}

static void open_and_close_from_many_threads(void **state)
{
    (void)state;
    enum { N = 4 };
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, open_use_close, NULL);
    for (int i = 0; i < N; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        assert_null(rv);
    }
    /* A database that cannot be reached is UNAVAILABLE at open, not a hang. */
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    queen_config_set(&cfg, "QUEEN_PG_URL", "postgresql://127.0.0.1:1/none?connect_timeout=2", err, sizeof err);
    queen_error e = {0};
    assert_null(queen_open(&cfg, &e));
    assert_int_equal(e.category, QUEEN_ERR_UNAVAILABLE);
    queen_config_clear(&cfg);
    queen_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_backends_are_replaced),
        cmocka_unit_test(exhausted_pool_answers_unavailable_in_time),
        cmocka_unit_test(statement_timeout_is_enforced_by_the_server),
        cmocka_unit_test(close_ends_a_waiting_pop),
        cmocka_unit_test(open_and_close_from_many_threads),
    };
    return cmocka_run_group_tests_name("engine_pool", tests, NULL, NULL);
}
