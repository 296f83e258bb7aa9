/* Moving a message to the dead letters (sql/log_status.sql's log_message_dlq_v1)
 * against pops on other connections: a group's first pop of the partition
 * while a move holds it skips the partition rather than deliver the message
 * being moved, and a first pop already in flight is waited for, its cursor
 * seen and its lease refused. Waits on conditions (pg_stat_activity), never
 * on time. Every run uses its own random tenant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"
#include "testutil.h"

static char tenant[37];

/* q gets partition p0 with one message (read by group g: g's
 * subscription, no cursor on p1) and p1 with a1, a2; returns p1's id. */
static char *setup_queue(PGconn *c, const char *q)
{
    const char *p[2] = {tenant, q};
    PQclear(pgtest_exec(c,
                        "SELECT queen.log_push_v1($1::uuid, jsonb_build_array("
                        " jsonb_build_object('queue', $2::text, 'partition', 'p0', 'payload', 0, 'transactionId', 'z0'),"
                        " jsonb_build_object('queue', $2::text, 'partition', 'p1', 'payload', 1, 'transactionId', 'a1'),"
                        " jsonb_build_object('queue', $2::text, 'partition', 'p1', 'payload', 2, 'transactionId', 'a2')))",
                        2, p));
    PQclear(pgtest_exec(c, "SELECT queen.log_pop_v1($1::uuid, $2, 'p0', 'g', 1, NULL, true, NULL)", 2, p));
    return pgtest_scalar(c,
                         "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
                         " WHERE q.tenant_id = $1::uuid AND q.name = $2 AND p.name = 'p1'",
                         2, p);
}

/* g's pop of q (queue level), leased: the transactionIds it delivered,
 * comma-separated ("" for none). */
static char *pop_g(PGconn *c, const char *q)
{
    const char *p[2] = {tenant, q};
    return pgtest_scalar(c,
                         "SELECT coalesce(string_agg(m->>'transactionId', ',' ORDER BY m->>'transactionId'), '')"
                         " FROM jsonb_array_elements(coalesce(queen.log_pop_v1($1::uuid, $2, NULL, 'g', 10, 60,"
                         " false, NULL) -> 'messages', '[]')) m",
                         2, p);
}

static void first_pop_skips_a_partition_being_moved(void **state)
{
    (void)state;
    PGconn *a = pgtest_connect(), *b = pgtest_connect();
    char *q = pgtest_unique("mv");
    char *pid = setup_queue(a, q);
    /* A pop that waited would hang the test: a bound makes it fail instead. */
    PQclear(pgtest_exec(b, "SET statement_timeout = '20s'", 0, NULL));

    PQclear(pgtest_exec(a, "BEGIN", 0, NULL));
    const char *mp[3] = {tenant, pid, "a1"};
    char *moved = pgtest_scalar(a, "SELECT queen.log_message_dlq_v1($1::uuid, $2, $3) #>> '{deadLetters,0,consumerGroup}'",
                                3, mp);
    assert_string_equal(moved, "g");
    /* While the move holds p1, g's first pop of it finds nothing there. */
    char *got = pop_g(b, q);
    assert_string_equal(got, "");
    free(got);
    PQclear(pgtest_exec(a, "COMMIT", 0, NULL));
    got = pop_g(b, q);
    assert_string_equal(got, "a2");
    free(got);
    const char *dp[2] = {tenant, q};
    assert_int_equal(pgtest_int(a,
                                "SELECT count(*) FROM queen.log_dead_letters WHERE tenant_id = $1::uuid"
                                " AND queue_name = $2 AND transaction_id = 'a1' AND consumer_group = 'g'",
                                2, dp),
                     1);
    free(moved);
    free(pid);
    free(q);
    PQfinish(a);
    PQfinish(b);
}

static void move_waits_for_a_first_pop_in_flight(void **state)
{
    (void)state;
    PGconn *a = pgtest_connect(), *b = pgtest_connect(), *w = pgtest_connect();
    char *q = pgtest_unique("mv");
    char *pid = setup_queue(a, q);
    PQclear(pgtest_exec(a, "SET statement_timeout = '20s'", 0, NULL));

    PQclear(pgtest_exec(b, "BEGIN", 0, NULL));
    char *got = pop_g(b, q); /* g's first pop of p1, not committed yet */
    assert_string_equal(got, "a1,a2");
    free(got);
    char *apid = pgtest_scalar(a, "SELECT pg_backend_pid()::text", 0, NULL);
    const char *mp[3] = {tenant, pid, "a1"};
    assert_int_equal(PQsendQueryParams(a, "SELECT queen.log_message_dlq_v1($1::uuid, $2, $3)", 3, NULL, mp, NULL,
                                       NULL, 0),
                     1);
    /* The move waits on the pop's lock; then the pop commits. */
    const char *wp[1] = {apid};
    long long waiting = 0;
    for (long long deadline = now_ms() + 20000; waiting == 0 && now_ms() < deadline;)
        waiting = pgtest_int(w,
                             "SELECT count(*) FROM pg_stat_activity a, pg_sleep(0.01)"
                             " WHERE a.pid = $1::int AND a.wait_event_type = 'Lock'",
                             1, wp);
    assert_int_equal(waiting, 1);
    PQclear(pgtest_exec(b, "COMMIT", 0, NULL));
    PGresult *r = PQgetResult(a);
    assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "55000");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "log_message_leased");
    PQclear(r);
    while ((r = PQgetResult(a)) != NULL)
        PQclear(r);
    const char *dp[2] = {tenant, q};
    assert_int_equal(pgtest_int(w,
                                "SELECT count(*) FROM queen.log_dead_letters WHERE tenant_id = $1::uuid"
                                " AND queue_name = $2",
                                2, dp),
                     0);
    free(apid);
    free(pid);
    free(q);
    PQfinish(a);
    PQfinish(b);
    PQfinish(w);
}

int main(void)
{
    PGconn *c = pgtest_connect();
    char *t = pgtest_scalar(c, "SELECT gen_random_uuid()::text", 0, NULL);
    snprintf(tenant, sizeof tenant, "%s", t);
    free(t);
    PQfinish(c);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_pop_skips_a_partition_being_moved),
        cmocka_unit_test(move_waits_for_a_first_pop_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
