/* The sweeper thread through libqueen: rows with a 1 s ttl are deleted from
 * the table within a few seconds at a fast cadence while forever rows stay;
 * the usage measurement runs; the counters say so; and queen_close stops a
 * sweeper that is waiting for its next cycle at once (condvar, not sleep).
 * The test reads the table directly to prove rows are gone from disk, not
 * just hidden (reads already hide expired rows without any sweeper). A
 * database without the schema shows errors are counted, logged at a
 * limited rate and never stop the thread. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

static queen *open_engine(bool sweeper, int every_ms)
{
    queen_config cfg;
    engine_config(&cfg, pgtest_url(), 2);
    cfg.sweeper = sweeper;
    cfg.kv_expire_every_ms = every_ms;
    cfg.kv_expire_batch = 7; /* small, so one cycle needs several steps */
    return engine_open_config(&cfg);
}

static long long rows_of(PGconn *admin, const char *tenant)
{
    const char *params[] = {tenant};
    return pgtest_int(admin, "SELECT count(*) FROM queen.kv WHERE tenant_id = $1::uuid", 1, params);
}

static void expired_rows_are_deleted_within_seconds(void **state)
{
    (void)state;
    queen *q = open_engine(true, 100);
    char tenant[37];
    wire_uuid4(tenant);
    char *ns = pgtest_unique("sweep-");
    queen_error e = {0};
    char *out;
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "ttl-%d", i);
        if (queen_kv_put(q, tenant, ns, key, "1", 1, -1, false, &out, &e) != 0)
            fail_msg("put: %s", e.detail);
        free(out);
    }
    assert_int_equal(queen_kv_put(q, tenant, ns, "keep", "1", QUEEN_FOREVER, -1, false, &out, &e), 0);
    free(out);
    PGconn *admin = pgtest_connect();
    assert_int_equal(rows_of(admin, tenant), 41);
    long long t0 = now_ms(), gone_at = 0;
    while (now_ms() - t0 < 8000) {
        if (rows_of(admin, tenant) == 1) {
            gone_at = now_ms() - t0;
            break;
        }
        usleep(50 * 1000);
    }
    if (gone_at == 0)
        fail_msg("expired rows still on disk after 8 s: %lld left", rows_of(admin, tenant) - 1);
    print_message("# 40 rows with ttl 1 s gone from the table %lld ms after the writes\n", gone_at);
    assert_true(gone_at < 4000);
    assert_true(engine_stat(q, "sweeper", "enabled"));
    assert_true(engine_stat(q, "sweeper", "deletedTotal") >= 40);
    assert_true(engine_stat(q, "sweeper", "cycles") >= 5);
    assert_int_equal(engine_stat(q, "sweeper", "errors"), 0);
    assert_true(engine_stat(q, "sweeper", "usageMeasures") >= 1);
    assert_true(pgtest_int(admin, "SELECT count(*) FROM queen.kv_usage", 0, NULL) >= 1);
    /* The forever row is untouched. */
    assert_int_equal(queen_kv_get(q, tenant, ns, "keep", &out, &e), 0);
    assert_non_null(strstr(out, "\"found\": true"));
    free(out);
    PQfinish(admin);
    free(ns);
    queen_close(q);
}

static void close_stops_a_waiting_sweeper_at_once(void **state)
{
    (void)state;
    queen *q = open_engine(true, 600000); /* next cycle in ten minutes */
    long long until = now_ms() + 5000;
    while (engine_stat(q, "sweeper", "cycles") < 1 && now_ms() < until)
        usleep(10 * 1000);
    assert_int_equal(engine_stat(q, "sweeper", "cycles"), 1);
    long long t0 = now_ms();
    queen_close(q);
    long long took = now_ms() - t0;
    print_message("# queen_close with the sweeper mid-wait: %lld ms\n", took);
    assert_true(took < 500);

    /* Switched off, there is no thread and the figures say so. */
    q = open_engine(false, 100);
    assert_false(engine_stat(q, "sweeper", "enabled"));
    queen_close(q);
}

/* Queue maintenance (retention among it) keeps its own cadence,
 * QUEEN_RETENTION_INTERVAL_MS, however rare the kv pass is: with the kv
 * pass every ten minutes and maintenance every 200 ms, a consumed message of
 * a queue with retentionSeconds 1 is gone from disk within seconds, while
 * the kv pass ran once. (Queen MQ's suite sets RETENTION_INTERVAL=2000.) */
static void retention_runs_at_its_own_interval(void **state)
{
    (void)state;
    queen_config cfg;
    engine_config(&cfg, pgtest_url(), 2);
    cfg.sweeper = true;
    cfg.kv_expire_every_ms = 600000;
    cfg.retention_interval_ms = 200;
    queen *q = engine_open_config(&cfg);
    char tenant[37];
    wire_uuid4(tenant);
    queen_error e = {0};
    char *out = NULL;
    if (queen_configure(q, tenant, "ret", "{\"retentionSeconds\": 1}", &out, &e) != 0)
        fail_msg("configure: %s", e.detail);
    free(out);
    if (queen_push(q, tenant, "[{\"queue\":\"ret\",\"payload\":1},{\"queue\":\"ret\",\"payload\":2}]", &out, &e) != 0)
        fail_msg("push: %s", e.detail);
    free(out);
    queen_pop_options o = {.queue = "ret", .batch = 10, .auto_ack = true};
    assert_int_equal(queen_pop(q, tenant, &o, &out, &e), 0);
    assert_non_null(out);
    free(out);
    PGconn *admin = pgtest_connect();
    const char *params[] = {tenant};
    const char *count = "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id "
                        "JOIN queen.queues qu ON qu.id = p.queue_id WHERE qu.tenant_id = $1::uuid";
    assert_int_equal(pgtest_int(admin, count, 1, params), 2);
    long long t0 = now_ms(), gone_at = -1;
    while (now_ms() - t0 < 8000) {
        if (pgtest_int(admin, count, 1, params) == 0) {
            gone_at = now_ms() - t0;
            break;
        }
        usleep(50 * 1000);
    }
    print_message("# consumed messages (retentionSeconds 1) gone %lld ms after the pop\n", gone_at);
    assert_true(gone_at >= 0);
    assert_true(gone_at < 4000);
    assert_int_equal(engine_stat(q, "sweeper", "cycles"), 1);
    assert_int_equal(engine_stat(q, "sweeper", "errors"), 0);
    PQfinish(admin);
    queen_close(q);
}

/* A database without the schema: every step fails (42883). The sweeper
 * keeps cycling, counts each error, logs at most one line per 10 s, and
 * still stops at once. stderr is captured to count the lines. */
static void errors_are_counted_rate_limited_and_never_fatal(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("sweepbare_", &db);
    char path[] = "/tmp/queen_sweeper_log_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);

    queen_config cfg;
    engine_config(&cfg, url, 1);
    cfg.sweeper = true;
    cfg.kv_expire_every_ms = 20;
    queen *q = engine_open_config(&cfg);
    long long until = now_ms() + 5000;
    while (engine_stat(q, "sweeper", "errors") < 10 && now_ms() < until)
        usleep(10 * 1000);
    long long errors = engine_stat(q, "sweeper", "errors"), cycles = engine_stat(q, "sweeper", "cycles");
    long long t0 = now_ms();
    queen_close(q);
    long long took = now_ms() - t0;

    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    char line[2048];
    int lines = 0;
    while (fgets(line, sizeof line, f))
        lines += strstr(line, "sweeper:") != NULL;
    fclose(f);
    unlink(path);
    pgtest_drop_database(db);
    free(db);
    free(url);

    assert_true(errors >= 10);
    assert_true(cycles >= 10); /* it kept going */
    assert_int_equal(lines, 1);
    assert_true(took < 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(expired_rows_are_deleted_within_seconds),
        cmocka_unit_test(close_stops_a_waiting_sweeper_at_once),
        cmocka_unit_test(retention_runs_at_its_own_interval),
        cmocka_unit_test(errors_are_counted_rate_limited_and_never_fatal),
    };
    return cmocka_run_group_tests_name("engine_sweeper", tests, NULL, NULL);
}
