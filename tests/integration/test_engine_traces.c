/* Traces through libqueen (no HTTP): queen_trace_add, queen_traces_by_message,
 * queen_traces_by_name with its cursor, and the refusals (a partition id that
 * is not a uuid, another tenant's partition, data over 64 KiB). */
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

static void traces(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37], other[37];
    wire_uuid4(tenant);
    wire_uuid4(other);
    char *queue = pgtest_unique("q-trace-");
    char *items = fmt("[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"m\"}]", queue);
    char *out = NULL;
    queen_error e = {0};
    must(queen_push(q, tenant, items, &out, &e), &e);
    json_t *pushed = take_json(out);
    char *pid = strdup(jstr(json_array_get(pushed, 0), "partition_id"));
    json_decref(pushed);
    free(items);

    must(queen_trace_add(q, tenant, pid, "m", "a", "{\"k\":[1,2]}", &out, &e), &e);
    free(out);
    must(queen_trace_add(q, tenant, pid, "m", "b", NULL, &out, &e), &e);
    free(out);
    must(queen_traces_by_message(q, tenant, pid, "m", &out, &e), &e);
    json_t *v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 2);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(v, "traces"), 1), "data")));
    json_decref(v);
    must(queen_traces_by_name(q, tenant, "a", 0, 0, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 1);
    json_decref(v);
    must(queen_traces_by_message(q, other, pid, "m", &out, &e), &e);
    v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 0);
    json_decref(v);

    assert_int_equal(queen_trace_add(q, tenant, "not-a-uuid", "m", "a", NULL, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_partition_id");
    assert_int_equal(queen_trace_add(q, other, pid, "m", "a", NULL, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_partition_id");
    char *big = malloc(70010);
    big[0] = '"';
    memset(big + 1, 'x', 70000);
    big[70001] = '"';
    big[70002] = '\0';
    assert_int_equal(queen_trace_add(q, tenant, pid, "m", "a", big, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_TOO_LARGE);
    free(big);
    free(pid);
    free(queue);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
