/* The resource reads through libqueen (no HTTP): queen_overview,
 * queen_labels, queen_queue_detail, queen_queue_partitions and
 * queen_queue_clear, with their refusals. */
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

/* The answer of the call just made (rc, *out), parsed and freed. */
static json_t *got(int rc, char **out, const queen_error *e)
{
    must(rc, e);
    return take_json(*out);
}

static void resources(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *out = NULL;
    queen_error e = {0};
    must(queen_configure_ex(q, tenant, "rq", NULL, "ns1", "t1", NULL, &out, &e), &e);
    free(out);
    must(queen_push(q, tenant, "[{\"queue\":\"rq\",\"payload\":1},{\"queue\":\"rq\",\"payload\":2}]", &out, &e), &e);
    free(out);

    json_t *v = got(queen_overview(q, tenant, &out, &e), &out, &e);
    assert_int_equal(jint(json_object_get(v, "messages"), "pending"), 2);
    json_decref(v);
    v = got(queen_labels(q, tenant, "namespace", &out, &e), &out, &e);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "namespaces"), 0), "name"), "ns1");
    json_decref(v);
    assert_int_equal(queen_labels(q, tenant, "colour", &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_request");
    v = got(queen_queue_detail(q, tenant, "rq", &out, &e), &out, &e);
    assert_string_equal(jstr(v, "task"), "t1");
    json_decref(v);
    assert_int_equal(queen_queue_detail(q, tenant, "nope", &out, &e), -1);
    assert_string_equal(e.reason, "log_no_such_queue");
    v = got(queen_queue_partitions(q, tenant, "rq", &out, &e), &out, &e);
    assert_int_equal(jint(json_array_get(json_object_get(v, "partitions"), 0), "messages"), 2);
    json_decref(v);
    v = got(queen_queue_clear(q, tenant, "rq", &out, &e), &out, &e);
    assert_int_equal(jint(v, "deleted"), 2);
    json_decref(v);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
