/* Browsing the log through libqueen (no HTTP): queen_messages_list with
 * states and its cursor, queen_message_get, queen_message_delete refused
 * (QUEEN_ERR_CONFLICT log_message_leased) while leased. */
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

static void browse(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-browse-");
    char *items = fmt("[{\"queue\":\"%1$s\",\"payload\":1,\"transactionId\":\"a\"},"
                      "{\"queue\":\"%1$s\",\"payload\":2,\"transactionId\":\"b\"}]",
                      queue);
    char *out = NULL;
    queen_error e = {0};
    must(queen_push(q, tenant, items, &out, &e), &e);
    free(out);
    free(items);
    queen_pop_options o = {.queue = queue, .batch = 1, .lease_seconds = 300};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    free(out);

    queen_messages_query mq = {.queue = queue};
    must(queen_messages_list(q, tenant, &mq, &out, &e), &e);
    json_t *v = take_json(out);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "state"), "leased");
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 1), "state"), "pending");
    json_decref(v);
    mq.consumer_group = "other";
    mq.limit = 1;
    must(queen_messages_list(q, tenant, &mq, &out, &e), &e);
    v = take_json(out);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "state"), "pending");
    assert_int_equal(jnum(json_object_get(v, "nextAfter")), 1);
    json_decref(v);
    mq.limit = 5000;
    assert_int_equal(queen_messages_list(q, tenant, &mq, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_limit");

    must(queen_message_get(q, tenant, "b", NULL, NULL, &out, &e), &e);
    v = take_json(out);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "queue"), queue);
    json_decref(v);

    assert_int_equal(queen_message_delete(q, tenant, queue, "a", NULL, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_CONFLICT);
    assert_string_equal(e.reason, "log_message_leased");
    must(queen_message_delete(q, tenant, queue, "b", NULL, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    free(queue);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(browse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
