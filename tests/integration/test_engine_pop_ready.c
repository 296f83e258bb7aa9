/* The ready rows of sql/log_schema.sql + log_pop.sql under concurrency, on two real sessions:
 * a pop that finds a partition drained removes its ready row only when no
 * push can commit a message into it unseen. Both orders of the race:
 *   - a push in flight (its partition lock held, its message not yet
 *     visible) while a pop drains what it can see: the row must stay, or
 *     the pushed message would sit with no row and no pop would find it;
 *   - a pop that removed the row and has not committed while a push comes:
 *     the push waits for it and puts the row back.
 * Each ends with the message being found by a queue-level pop. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"
#include "testutil.h"

typedef struct {
    PGconn *a, *b;
    char *tenant;
    char *queue;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->a = pgtest_connect();
    f->b = pgtest_connect();
    f->tenant = pgtest_scalar(f->a, "SELECT gen_random_uuid()::text", 0, NULL);
    f->queue = pgtest_unique("ready");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    free(f->tenant);
    free(f->queue);
    free(f);
    return 0;
}

static void push(PGconn *conn, const fixture *f, const char *payload)
{
    char *items = fmt("[{\"queue\":\"%s\",\"partition\":\"p\",\"payload\":\"%s\"}]", f->queue, payload);
    const char *params[] = {f->tenant, items};
    PQclear(pgtest_exec(conn, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)", 2, params));
    free(items);
}

/* A queue-level autoAck pop of one message: its payload, or NULL. */
static char *pop(PGconn *conn, const fixture *f)
{
    const char *params[] = {f->tenant, f->queue};
    return pgtest_scalar(conn,
                         "SELECT queen.log_pop_v1($1::uuid, $2, NULL, NULL, 1, NULL, true, NULL) "
                         "-> 'messages' -> 0 ->> 'data'",
                         2, params);
}

static long long ready_rows(PGconn *conn, const fixture *f)
{
    const char *params[] = {f->tenant, f->queue};
    return pgtest_int(conn,
                      "SELECT count(*) FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id "
                      "JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1::uuid AND q.name = $2",
                      2, params);
}

static void expect_pop(PGconn *conn, const fixture *f, const char *want)
{
    char *got = pop(conn, f);
    if (want == NULL) {
        assert_null(got);
    } else {
        assert_non_null(got);
        assert_string_equal(got, want);
    }
    free(got);
}

/* The group subscribed and its partition drained: no ready row. */
static void subscribed_and_drained(const fixture *f)
{
    push(f->a, f, "m0");
    expect_pop(f->a, f, "m0");
    assert_int_equal(ready_rows(f->a, f), 0);
}

static void a_push_in_flight_keeps_the_row(void **state)
{
    fixture *f = *state;
    subscribed_and_drained(f);
    push(f->a, f, "m1");
    assert_int_equal(ready_rows(f->a, f), 1);

    PQclear(pgtest_exec(f->b, "BEGIN", 0, NULL));
    push(f->b, f, "m2"); /* holds the partition, m2 not yet visible */
    /* Takes m1, then looks: drained as far as it can see, but the push in
     * flight holds the partition, so the row stays. */
    expect_pop(f->a, f, "m1");
    assert_int_equal(ready_rows(f->a, f), 1);
    PQclear(pgtest_exec(f->b, "COMMIT", 0, NULL));

    expect_pop(f->a, f, "m2");
    assert_int_equal(ready_rows(f->a, f), 0);
    expect_pop(f->a, f, NULL);
}

static bool push_waits_on_a_lock(const fixture *f)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(f->b));
    const char *params[] = {pid};
    return pgtest_int(f->a, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int AND wait_event_type = 'Lock'", 1,
                      params) == 1;
}

static void a_push_after_the_drain_puts_the_row_back(void **state)
{
    fixture *f = *state;
    subscribed_and_drained(f);
    push(f->a, f, "m1");

    PQclear(pgtest_exec(f->a, "BEGIN", 0, NULL));
    expect_pop(f->a, f, "m1"); /* drains: the row is deleted, the partition held FOR SHARE */
    assert_int_equal(ready_rows(f->a, f), 0);

    char *items = fmt("[{\"queue\":\"%s\",\"partition\":\"p\",\"payload\":\"m2\"}]", f->queue);
    const char *params[] = {f->tenant, items};
    assert_int_equal(PQsendQueryParams(f->b, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)", 2, NULL, params, NULL,
                                       NULL, 0),
                     1);
    WAIT_UNTIL(push_waits_on_a_lock(f), 10000, "the push never waited for the draining pop");
    PQclear(pgtest_exec(f->a, "COMMIT", 0, NULL));
    PGresult *r;
    while ((r = PQgetResult(f->b)) != NULL) {
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        PQclear(r);
    }
    free(items);

    assert_int_equal(ready_rows(f->a, f), 1);
    expect_pop(f->a, f, "m2");
    expect_pop(f->a, f, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_push_in_flight_keeps_the_row, setup, teardown),
        cmocka_unit_test_setup_teardown(a_push_after_the_drain_puts_the_row_back, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
