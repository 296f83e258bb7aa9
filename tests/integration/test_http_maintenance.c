/* Maintenance mode (docs/api.md, Maintenance mode) across two real
 * brokers on one database: switched on through one, the other refuses pushes
 * (503, reason maintenance, Retry-After) and answers pops with nothing while
 * acks and reads keep working; switched off, pushes are accepted again and
 * the message held back is popped. The switch is shared by every test on the
 * database: teardown always turns it off. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static test_broker A, B;

static void switch_off_in_database(void)
{
    PGconn *c = pgtest_connect();
    free(pgtest_scalar(c, "SELECT queen.system_maintenance_set_v1(false)::text", 0, NULL));
    PQfinish(c);
}

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", NULL};
    return broker_start(&A, env) && broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    switch_off_in_database();
    int a = broker_stop(&A), b = broker_stop(&B);
    return a == 0 && b == 0 ? 0 : -1;
}

static long push_status(const test_broker *b, const char *body, char **retry_after)
{
    http_reply r = broker_http(b, "POST", "/api/v1/push", body, NULL);
    long st = r.status;
    if (retry_after != NULL)
        *retry_after = http_reply_header(&r, "Retry-After");
    http_reply_free(&r);
    return st;
}

static void switch_holds_across_brokers(void **state)
{
    (void)state;
    char *q = pgtest_unique("maint");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"before\"}]}", q);
    char *push2 = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":2,\"transactionId\":\"during\"}]}", q);
    char *pop = fmt("/api/v1/pop/queue/%s?batch=10&autoAck=true", q);
    json_decref(http_ok(&B, "POST", "/api/v1/push", push, 201));

    json_t *v = http_ok(&A, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", 200);
    assert_true(jtrue(v, "maintenance"));
    json_decref(v);
    /* B learns it from the database, by itself. */
    WAIT_UNTIL(push_status(&B, push2, NULL) == 503, 5000, "broker B never saw maintenance mode");
    char *retry = NULL;
    assert_int_equal(push_status(&B, push2, &retry), 503);
    assert_non_null(retry);
    assert_string_equal(retry, "1");
    free(retry);
    http_refused(&B, "POST", "/api/v1/push", push2, 503, "unavailable", "maintenance");
    char *txn = fmt("{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":3}]}]}", q);
    http_refused(&B, "POST", "/api/v1/transaction", txn, 503, "unavailable", "maintenance");
    /* Pops find nothing; reads work. */
    json_decref(http_ok(&B, "GET", pop, NULL, 204));
    json_decref(http_ok(&B, "GET", "/api/v1/resources/queues", NULL, 200));
    v = http_ok(&B, "GET", "/api/v1/system/maintenance", NULL, 200);
    assert_true(jtrue(v, "maintenance"));
    assert_non_null(jstr(v, "since"));
    json_decref(v);
    json_decref(http_ok(&B, "PUT", "/api/v1/kv/app/maint", "{\"value\":1,\"ttlSeconds\":60}", 200));

    json_decref(http_ok(&A, "POST", "/api/v1/system/maintenance", "{\"enabled\":false}", 200));
    WAIT_UNTIL(push_status(&B, push2, NULL) == 201, 5000, "broker B never saw maintenance end");
    v = http_ok(&B, "GET", pop, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2); /* before, and during (now accepted) */
    json_decref(v);
    http_refused(&A, "POST", "/api/v1/system/maintenance", "{\"enabled\":\"yes\"}", 400, "bad_request", NULL);
    free(txn);
    free(pop);
    free(push2);
    free(push);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(switch_holds_across_brokers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
