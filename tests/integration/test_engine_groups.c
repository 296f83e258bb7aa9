/* Consumer groups through libqueen itself (no HTTP): queen_groups (the view
 * and the lagging view), queen_group_seek (QUEEN_ERR_CONFLICT
 * log_group_leased while a lease is live, then beginning and end) and
 * queen_group_delete. */
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

static json_t *view(queen *q, const char *tenant, const char *group, int min_lag)
{
    char *out = NULL;
    queen_error e = {0};
    must(queen_groups(q, tenant, group, min_lag, &out, &e), &e);
    return take_json(out);
}

static void groups_seek_delete(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-grp-");
    char *items = fmt("[{\"queue\":\"%1$s\",\"payload\":1,\"transactionId\":\"x1\"},"
                      "{\"queue\":\"%1$s\",\"payload\":2,\"transactionId\":\"x2\"}]",
                      queue);
    char *out = NULL;
    queen_error e = {0};
    must(queen_push(q, tenant, items, &out, &e), &e);
    free(out);
    free(items);
    queen_pop_options o = {.queue = queue, .consumer_group = "g", .batch = 1};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    json_t *popped = take_json(out);

    json_t *v = view(q, tenant, "g", -1);
    json_t *part = json_array_get(json_object_get(json_array_get(json_object_get(
                                      json_array_get(json_object_get(v, "consumerGroups"), 0), "queues"), 0),
                                  "partitions"), 0);
    assert_int_equal(jint(part, "lagMessages"), 2);
    assert_string_equal(jstr(part, "leaseId"), jstr(popped, "leaseId"));
    json_decref(v);
    v = view(q, tenant, "g", 0);
    assert_int_equal(json_array_size(json_object_get(v, "consumerGroups")), 1);
    json_decref(v);
    v = view(q, tenant, "g", 86400);
    assert_int_equal(json_array_size(json_object_get(v, "consumerGroups")), 0);
    json_decref(v);
    assert_int_equal(queen_groups(q, tenant, "", -1, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_group");

    /* Refused while the lease is live. */
    assert_int_equal(queen_group_seek(q, tenant, "g", queue, "end", &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_CONFLICT);
    assert_string_equal(e.reason, "log_group_leased");
    assert_int_equal(queen_group_delete(q, tenant, "g", NULL, &out, &e), -1);
    assert_string_equal(e.reason, "log_group_leased");

    json_t *m = json_array_get(json_object_get(popped, "messages"), 0);
    char *ack = fmt("[{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}]", jstr(m, "transactionId"),
                    jstr(m, "partitionId"), jstr(popped, "leaseId"));
    must(queen_ack(q, tenant, ack, "g", &out, &e), &e);
    free(out);
    free(ack);
    json_decref(popped);

    must(queen_group_seek(q, tenant, "g", queue, "beginning", &out, &e), &e);
    free(out);
    o.batch = 10;
    o.auto_ack = true;
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2);
    json_decref(v);
    must(queen_group_seek(q, tenant, "g", queue, "beginning", &out, &e), &e);
    free(out);
    must(queen_group_seek(q, tenant, "g", queue, "end", &out, &e), &e);
    free(out);
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_null(out);
    assert_int_equal(queen_group_seek(q, tenant, "g", queue, "soon", &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_seek");

    must(queen_group_delete(q, tenant, "g", queue, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    free(queue);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(groups_seek_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
