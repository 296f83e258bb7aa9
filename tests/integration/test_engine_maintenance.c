/* Maintenance mode through libqueen (no HTTP): queen_maintenance_set on one
 * handle; another handle on the same database refuses queen_push and a
 * queen_transaction holding a push (QUEEN_ERR_UNAVAILABLE "maintenance"),
 * finds nothing with queen_pop, and still acks (an ack-only transaction
 * commits) and reads. Always switched off at the end. */
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

static queen *Q1, *Q2;

static int setup(void **state)
{
    (void)state;
    Q1 = engine_open(2);
    Q2 = engine_open(2);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char *out = NULL;
    queen_error e = {0};
    int rc = queen_maintenance_set(Q1, false, &out, &e);
    free(out);
    queen_close(Q1);
    queen_close(Q2);
    return rc;
}

static bool push_refused(queen *q, const char *tenant, const char *items)
{
    char *out = NULL;
    queen_error e = {0};
    int rc = queen_push(q, tenant, items, &out, &e);
    free(out);
    return rc == -1 && e.category == QUEEN_ERR_UNAVAILABLE && strcmp(e.reason, "maintenance") == 0;
}

static void maintenance(void **state)
{
    (void)state;
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-maint-");
    char *items = fmt("[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"m\"}]", queue);
    char *out = NULL;
    queen_error e = {0};
    must(queen_push(Q2, tenant, items, &out, &e), &e);
    free(out);
    queen_pop_options o = {.queue = queue, .batch = 1};
    must(queen_pop(Q2, tenant, &o, &out, &e), &e);
    json_t *popped = take_json(out);

    must(queen_maintenance_set(Q1, true, &out, &e), &e);
    free(out);
    WAIT_UNTIL(push_refused(Q2, tenant, items), 5000, "the second handle never saw maintenance mode");
    char *bundle = fmt("{\"operations\":[{\"type\":\"push\",\"items\":%s}]}", items);
    assert_int_equal(queen_transaction(Q2, tenant, bundle, &out, &e), -1);
    assert_string_equal(e.reason, "maintenance");
    assert_true(push_refused(Q2, tenant, "[]")); /* even an empty push: the answer does not depend on content */
    queen_pop_options o2 = {.queue = queue, .batch = 1, .auto_ack = true};
    char *more = fmt("[{\"queue\":\"%s\",\"payload\":2}]", queue);
    must(queen_pop(Q2, tenant, &o2, &out, &e), &e);
    assert_null(out);
    /* Acks and reads work. */
    json_t *m = json_array_get(json_object_get(popped, "messages"), 0);
    char *ack = fmt("{\"operations\":[{\"type\":\"ack\",\"transactionId\":\"m\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}]}",
                    jstr(m, "partitionId"), jstr(popped, "leaseId"));
    must(queen_transaction(Q2, tenant, ack, &out, &e), &e);
    json_t *v = take_json(out);
    assert_true(jtrue(v, "success"));
    json_decref(v);
    must(queen_queues(Q2, tenant, &out, &e), &e);
    free(out);
    must(queen_maintenance(Q2, &out, &e), &e);
    v = take_json(out);
    assert_true(jtrue(v, "maintenance"));
    json_decref(v);

    must(queen_maintenance_set(Q1, false, &out, &e), &e);
    free(out);
    WAIT_UNTIL(!push_refused(Q2, tenant, more), 5000, "the second handle never saw maintenance end");
    json_decref(popped);
    free(ack);
    free(more);
    free(bundle);
    free(items);
    free(queue);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(maintenance),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
