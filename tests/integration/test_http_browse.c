/* Browsing the log (README.md, HTTP API > Browsing messages) against a real
 * broker: a partition's messages with their state for a group (pending,
 * leased, consumed, dead) page by page, a message by transactionId, and
 * delete, refused with 409 while a live lease covers the message. */
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

static void states_get_delete(void **state)
{
    (void)state;
    char *q = pgtest_unique("browse");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":0}}", q), 200));
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%1$s\",\"payload\":1,\"transactionId\":\"k1\"},"
                                "{\"queue\":\"%1$s\",\"payload\":2,\"transactionId\":\"k2\"},"
                                "{\"queue\":\"%1$s\",\"payload\":3,\"transactionId\":\"k3\"},"
                                "{\"queue\":\"%1$s\",\"payload\":4,\"transactionId\":\"k4\"}]}",
                                q),
                            201));
    /* k1 consumed, k2 dead, k3 leased, k4 pending. */
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&autoAck=true", q), NULL, 200));
    json_t *p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1", q), NULL, 200);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    json_decref(
        http_ok_fmt("POST", strdup("/api/v1/ack"),
                    fmt("{\"transactionId\":\"k2\",\"partitionId\":\"%s\",\"leaseId\":\"%s\",\"status\":\"failed\"}",
                        jstr(m, "partitionId"), jstr(p, "leaseId")),
                    200));
    json_decref(p);
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&leaseSeconds=300", q), NULL, 200));

    json_t *v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s", q), NULL, 200);
    static const char *const want[] = {"consumed", "dead", "leased", "pending"};
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(jstr(json_array_get(msgs, i), "state"), want[i]);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&limit=3", q), NULL, 200);
    assert_int_equal(jnum(json_object_get(v, "nextAfter")), 3);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&limit=3&after=3", q), NULL, 200);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "k4");
    json_decref(v);
    http_refused(&http_broker, "GET", "/api/v1/messages?limit=5", NULL, 400, "bad_request", "log_bad_queue");

    v = http_ok_fmt("GET", fmt("/api/v1/messages/k4?queue=%s", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "state"), "pending");
    json_decref(v);

    char *del = fmt("/api/v1/messages/k3?queue=%s", q);
    http_refused(&http_broker, "DELETE", del, NULL, 409, "conflict", "log_message_leased");
    free(del);
    v = http_ok_fmt("DELETE", fmt("/api/v1/messages/k4?queue=%s", q), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/messages/k4?queue=%s", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 0);
    json_decref(v);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(states_get_delete),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
