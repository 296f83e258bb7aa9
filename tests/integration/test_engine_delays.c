/* delayedProcessing and maxWaitTimeSeconds through libqueen (no HTTP, no
 * sweeper): queen_configure sets them, queen_pop honours them (a delayed
 * message stays until it is old enough; a message past maxWaitTimeSeconds is
 * never delivered and queen_dlq_list shows it, reason expired). Ages are set
 * in the database, never waited for. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

static void age(const char *tenant, const char *queue, const char *interval)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {tenant, queue, interval};
    pgtest_int(c,
               "WITH u AS (UPDATE queen.log_messages m SET created_at = m.created_at - $3::interval "
               "FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id "
               "WHERE p.id = m.partition_id AND q.tenant_id = $1::uuid AND q.name = $2 RETURNING 1) "
               "SELECT count(*) FROM u",
               3, p);
    PQfinish(c);
}

static void setup_queue(queen *q, const char *tenant, const char *queue, const char *options)
{
    char *out = NULL;
    queen_error e = {0};
    must(queen_configure(q, tenant, queue, options, &out, &e), &e);
    free(out);
    char *items = fmt("[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"m1\"}]", queue);
    must(queen_push(q, tenant, items, &out, &e), &e);
    free(out);
    free(items);
}

static void delay_and_expiry(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *out = NULL;
    queen_error e = {0};

    char *dq = pgtest_unique("q-delay-");
    setup_queue(q, tenant, dq, "{\"delayedProcessing\":600}");
    queen_pop_options o = {.queue = dq, .auto_ack = true};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_null(out);
    age(tenant, dq, "11 minutes");
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    json_t *v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    json_decref(v);

    char *wq = pgtest_unique("q-wait-");
    setup_queue(q, tenant, wq, "{\"maxWaitTimeSeconds\":600}");
    age(tenant, wq, "11 minutes");
    o.queue = wq;
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_null(out);
    queen_dlq_query dl = {.queue = wq};
    must(queen_dlq_list(q, tenant, &dl, &out, &e), &e);
    v = take_json(out);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "reason"), "expired");
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "m1");
    json_decref(v);

    assert_int_equal(queen_configure(q, tenant, wq, "{\"maxWaitTimeSeconds\":-5}", &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_options");
    free(dq);
    free(wq);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delay_and_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
