/* The transaction wire (queen.log_transaction_wire_v1, sql/log_transaction_wire.sql)
 * over real connections: marker + push + ack commit together; with the
 * marker already present (required:true) nothing lands, the cursor does not
 * move and kv_apply_v1's 23514 DETAIL reaches the caller intact; the other
 * failures arrive as their documented (SQLSTATE, message); overlapping
 * bundles given in opposite orders never deadlock (the lock order is decided
 * in SQL). Own random tenant per run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"
#include "wire.h"

static char tenant[37];

/* The bundle of one consumed message, built in SQL so C handles no JSON:
 * $1 tenant, $2 source partitionId, $3 source transactionId, $4 leaseId,
 * $5 output queue, $6 marker namespace. */
static const char *const bundle_sql =
    "SELECT queen.log_transaction_wire_v1($1::uuid, jsonb_build_object("
    " 'operations', jsonb_build_array("
    "   jsonb_build_object('type', 'push', 'items', jsonb_build_array(jsonb_build_object("
    "     'queue', $5::text, 'payload', jsonb_build_object('src', $3::text), 'transactionId', 'eff-' || $3))),"
    "   jsonb_build_object('type', 'ack', 'transactionId', $3::text, 'partitionId', $2::text, 'leaseId', $4::text)),"
    " 'kv', jsonb_build_array(jsonb_build_object('op', 'putIfAbsent', 'ns', $6::text, 'key', 'done:' || $3,"
    "   'value', true, 'forever', true, 'required', true))))::text";

typedef struct popped {
    char part[40], lease[40], tx[64];
} popped;

static void push_one(PGconn *c, const char *q, const char *tx)
{
    const char *p[3] = {tenant, q, tx};
    PQclear(pgtest_exec(c, "SELECT queen.log_push_v1($1::uuid, jsonb_build_array(jsonb_build_object("
                           "'queue', $2::text, 'payload', 1, 'transactionId', $3::text)))", 3, p));
}

static popped pop_one(PGconn *c, const char *q)
{
    const char *p[2] = {tenant, q};
    PGresult *r = pgtest_exec(c, "SELECT b->>'partitionId', b->>'leaseId', b->'messages'->0->>'transactionId'"
                                 " FROM (SELECT queen.log_pop_v1($1::uuid, $2, NULL, NULL, 1, 30, false, NULL) b) s"
                                 " WHERE b IS NOT NULL", 2, p);
    assert_int_equal(PQntuples(r), 1);
    popped m;
    snprintf(m.part, sizeof m.part, "%s", PQgetvalue(r, 0, 0));
    snprintf(m.lease, sizeof m.lease, "%s", PQgetvalue(r, 0, 1));
    snprintf(m.tx, sizeof m.tx, "%s", PQgetvalue(r, 0, 2));
    PQclear(r);
    return m;
}

static PGresult *run_bundle(PGconn *c, const popped *m, const char *out, const char *ns)
{
    const char *p[6] = {tenant, m->part, m->tx, m->lease, out, ns};
    return pgtest_try(c, bundle_sql, 6, p);
}

static long count_msgs(PGconn *c, const char *q)
{
    const char *p[2] = {tenant, q};
    return pgtest_int(c, "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id"
                         " JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1::uuid AND q.name = $2", 2, p);
}

static long cursor_of(PGconn *c, const char *part)
{
    return pgtest_int(c, "SELECT committed_offset FROM queen.log_consumers WHERE partition_id = $1::uuid"
                         " AND consumer_group = '__QUEUE_MODE__'", 1, (const char *const[]){part});
}

static void marker_push_ack_succeed_together(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *in = pgtest_unique("wire_in_"), *out = pgtest_unique("wire_out_");
    push_one(c, in, "s1");
    popped m = pop_one(c, in);
    PGresult *r = run_bundle(c, &m, out, "wire");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    const char *p[1] = {PQgetvalue(r, 0, 0)};
    char *shape = pgtest_scalar(c, "SELECT ($1::jsonb->>'success') || ' ' || (SELECT string_agg(e->>'type', ',')"
                                   " FROM jsonb_array_elements($1::jsonb->'results') e)", 1, p);
    assert_string_equal(shape, "true push,ack,kv");
    PQclear(r);
    assert_int_equal(count_msgs(c, out), 1);
    assert_int_equal(cursor_of(c, m.part), 1);
    const char *pk[1] = {tenant};
    char *found = pgtest_scalar(c, "SELECT queen.kv_apply_v1('[{\"op\":\"get\",\"ns\":\"wire\",\"key\":\"done:s1\"}]',"
                                   " $1::uuid, now(), false)->0->>'found'", 1, pk);
    assert_string_equal(found, "true");
    free(found);
    free(shape);
    free(in);
    free(out);
    PQfinish(c);
}

static void marker_present_nothing_lands_and_detail_reaches_caller(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *in = pgtest_unique("wire_in_"), *out = pgtest_unique("wire_out_");
    push_one(c, in, "s2");
    const char *pk[1] = {tenant};
    PQclear(pgtest_exec(c, "SELECT queen.kv_apply_v1('[{\"op\":\"put\",\"ns\":\"wire\",\"key\":\"done:s2\","
                           "\"value\":\"earlier\",\"forever\":true}]', $1::uuid, now(), false)", 1, pk));
    popped m = pop_one(c, in);
    PGresult *r = run_bundle(c, &m, out, "wire");
    assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "kv_precondition_failed");
    const char *detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
    assert_non_null(detail);
    const char *pd[1] = {detail};
    char *d = pgtest_scalar(c, "SELECT concat_ws('|', $1::jsonb->>'index', $1::jsonb->>'op', $1::jsonb->>'ns',"
                               " $1::jsonb->>'key', $1::jsonb->>'reason', $1::jsonb->>'value',"
                               " ($1::jsonb->>'version')::bigint > 0)", 1, pd);
    assert_string_equal(d, "0|put|wire|done:s2|exists|earlier|t");
    PQclear(r);
    assert_int_equal(count_msgs(c, out), 0);   /* the push did not land */
    assert_int_equal(cursor_of(c, m.part), 0); /* the cursor did not move */

    /* The lease survived the failed bundle: a plain ack still works. */
    const char *pa[3] = {tenant, m.tx, m.part};
    char *ok = pgtest_scalar(c, "SELECT queen.log_ack_v1($1::uuid, jsonb_build_array(jsonb_build_object("
                                "'transactionId', $2::text, 'partitionId', $3::text)), NULL)->0->>'success'", 3, pa);
    assert_string_equal(ok, "true");
    free(ok);
    free(d);
    free(in);
    free(out);
    PQfinish(c);
}

static void failures_arrive_as_documented(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *in = pgtest_unique("wire_in_"), *out = pgtest_unique("wire_out_");
    push_one(c, in, "s3");
    push_one(c, out, "eff-s3"); /* the effect's transactionId is already there */
    popped m = pop_one(c, in);

    PGresult *r = run_bundle(c, &m, out, "wire");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23505");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "log_duplicate");
    PQclear(r);

    popped stale = m;
    snprintf(stale.lease, sizeof stale.lease, "00000000-0000-4000-8000-000000000000");
    r = run_bundle(c, &stale, in, "wire2");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "55000");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "log_ack_rejected");
    const char *pd[1] = {PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL)};
    char *err = pgtest_scalar(c, "SELECT $1::jsonb->>'error'", 1, pd);
    assert_string_equal(err, "lease_mismatch");
    PQclear(r);

    r = pgtest_try(c, "SELECT queen.log_transaction_wire_v1(NULL, '{\"operations\":[]}')", 0, NULL);
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22023");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "log_bad_tenant");
    PQclear(r);
    assert_int_equal(count_msgs(c, out), 1);
    assert_int_equal(cursor_of(c, m.part), 0);
    free(err);
    free(in);
    free(out);
    PQfinish(c);
}

/* Two threads send overlapping bundles whose kv keys and push queues are
 * listed in opposite orders; the SQL sorts its locks, so none deadlocks. */
#define CROSS_ROUNDS 60
static char cross_q[2][64];
static int cross_deadlocks, cross_errors;
static pthread_mutex_t cross_mu = PTHREAD_MUTEX_INITIALIZER;

static void *cross_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    char err[256];
    PGconn *c = pgtest_connect_quiet(err, sizeof err);
    if (c == NULL) {
        pthread_mutex_lock(&cross_mu);
        cross_errors++;
        pthread_mutex_unlock(&cross_mu);
        return NULL;
    }
    const char *qa = cross_q[me], *qb = cross_q[1 - me];
    for (int i = 0; i < CROSS_ROUNDS && PQstatus(c) == CONNECTION_OK; i++) {
        const char *p[4] = {tenant, qa, qb, me ? "1" : "0"};
        PGresult *r = PQexecParams(c,
            "SELECT queen.log_transaction_wire_v1($1::uuid, jsonb_build_object("
            " 'operations', jsonb_build_array(jsonb_build_object('type', 'push', 'items', jsonb_build_array("
            "   jsonb_build_object('queue', $2::text, 'payload', 1), jsonb_build_object('queue', $3::text, 'payload', 2)))),"
            " 'kv', CASE WHEN $4 = '0' THEN"
            "  '[{\"op\":\"incr\",\"ns\":\"cross\",\"key\":\"a\",\"delta\":1,\"forever\":true},"
            "    {\"op\":\"incr\",\"ns\":\"cross\",\"key\":\"b\",\"delta\":1,\"forever\":true}]'::jsonb ELSE"
            "  '[{\"op\":\"incr\",\"ns\":\"cross\",\"key\":\"b\",\"delta\":1,\"forever\":true},"
            "    {\"op\":\"incr\",\"ns\":\"cross\",\"key\":\"a\",\"delta\":1,\"forever\":true}]'::jsonb END))",
            4, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            pthread_mutex_lock(&cross_mu);
            if (st && strcmp(st, "40P01") == 0)
                cross_deadlocks++;
            else
                cross_errors++;
            pthread_mutex_unlock(&cross_mu);
        }
        PQclear(r);
    }
    PQfinish(c);
    return NULL;
}

static void overlapping_bundles_never_deadlock(void **state)
{
    (void)state;
    char *a = pgtest_unique("wire_x_"), *b = pgtest_unique("wire_y_");
    snprintf(cross_q[0], sizeof cross_q[0], "%s", a);
    snprintf(cross_q[1], sizeof cross_q[1], "%s", b);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, cross_worker, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(cross_deadlocks, 0);
    assert_int_equal(cross_errors, 0);
    PGconn *c = pgtest_connect();
    assert_int_equal(count_msgs(c, a), 2 * CROSS_ROUNDS);
    assert_int_equal(count_msgs(c, b), 2 * CROSS_ROUNDS);
    PQfinish(c);
    free(a);
    free(b);
}

int main(void)
{
    wire_uuid4(tenant);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(marker_push_ack_succeed_together),
        cmocka_unit_test(marker_present_nothing_lands_and_detail_reaches_caller),
        cmocka_unit_test(failures_arrive_as_documented),
        cmocka_unit_test(overlapping_bundles_never_deadlock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
