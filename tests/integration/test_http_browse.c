/* Browsing the log (docs/api.md, Browsing messages) against a real
 * broker: a partition's messages with their state for a group (pending,
 * leased, consumed, dead) page by page, a message by transactionId, and
 * delete, refused with 409 while a live lease covers the message. And the
 * listing arguments GET /messages shares with GET /dlq (one parser, args.c):
 * each filter and the page reach the listing, each bad one is its 400. */
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

/* GET route?query must answer 400 bad_request with reason. */
static void bad_arg(const char *route, const char *query, const char *reason)
{
    http_refused_fmt("GET", fmt("%s?%s", route, query), NULL, 400, "bad_request", reason);
}

static size_t listed(json_t *v)
{
    size_t n = json_array_size(json_object_get(v, "messages"));
    json_decref(v);
    return n;
}

static void listing_arguments(void **state)
{
    (void)state;
    char *q = pgtest_unique("listing");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":0}}", q), 200));
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"p\",\"payload\":1,"
                                "\"transactionId\":\"t1\"},{\"queue\":\"%1$s\",\"partition\":\"p\","
                                "\"payload\":2,\"transactionId\":\"t2\"}]}",
                                q),
                            201));
    /* t1 fails in group g: a dead letter of g on partition p. */
    json_t *p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s/partition/p?consumerGroup=g&batch=1", q), NULL, 200);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack/batch"),
                            fmt("{\"consumerGroup\":\"g\",\"acknowledgments\":[{\"transactionId\":\"t1\","
                                "\"partitionId\":\"%s\",\"leaseId\":\"%s\",\"status\":\"failed\"}]}",
                                jstr(m, "partitionId"), jstr(p, "leaseId")),
                            200));
    json_decref(p);

    /* Each filter reaches the listing. */
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&partition=p&consumerGroup=g", q), NULL, 200);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(jstr(json_array_get(msgs, 0), "state"), "dead");
    assert_string_equal(jstr(json_array_get(msgs, 1), "state"), "pending");
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&partition=p", q), NULL, 200);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "state"), "pending");
    json_decref(v);
    assert_int_equal(listed(http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s", q), NULL, 200)), 0);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&partition=p&limit=1", q), NULL, 200);
    assert_int_equal(listed(json_incref(v)), 1);
    assert_int_equal(jnum(json_object_get(v, "nextAfter")), 1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s&partition=p&after=1", q), NULL, 200);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "t2");
    assert_int_equal(listed(v), 1);

    assert_int_equal(listed(http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&partition=p&consumerGroup=g", q), NULL, 200)),
                     1);
    assert_int_equal(listed(http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&partition=other", q), NULL, 200)), 0);
    assert_int_equal(listed(http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&consumerGroup=h", q), NULL, 200)), 0);
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=1", q), NULL, 200);
    long long id = jnum(json_object_get(v, "nextAfter"));
    assert_int_equal(id, jint(json_array_get(json_object_get(v, "messages"), 0), "id"));
    json_decref(v);
    assert_int_equal(listed(http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&after=%lld", q, id), NULL, 200)), 0);

    /* Each bad argument is refused with its own reason, on both routes. */
    char *lng = malloc(1101);
    memset(lng, 'a', 1100);
    lng[1100] = '\0';
    static const char *const routes[] = {"/api/v1/messages", "/api/v1/dlq"};
    for (size_t r = 0; r < 2; r++) {
        char *query = fmt("queue=%s", lng);
        bad_arg(routes[r], query, "log_bad_queue");
        free(query);
        query = fmt("queue=%s&partition=%s", q, lng);
        bad_arg(routes[r], query, "log_bad_partition");
        free(query);
        query = fmt("queue=%s&consumerGroup=%s", q, lng);
        bad_arg(routes[r], query, "log_bad_group");
        free(query);
        bad_arg(routes[r], "queue=x&limit=0", "log_bad_limit");
        bad_arg(routes[r], "queue=x&limit=1001", "log_bad_limit");
        bad_arg(routes[r], "queue=x&limit=ten", "log_bad_limit");
        bad_arg(routes[r], "queue=x&after=-1", "log_bad_after");
        bad_arg(routes[r], "queue=x&after=", "log_bad_after");
    }
    /* The page alone, as the trace listing takes it. */
    bad_arg("/api/v1/traces/by-name/x", "limit=0", "log_bad_limit");
    bad_arg("/api/v1/traces/by-name/x", "limit=1001", "log_bad_limit");
    bad_arg("/api/v1/traces/by-name/x", "limit=2147483648", "log_bad_limit");
    bad_arg("/api/v1/traces/by-name/x", "after=-1", "log_bad_after");
    free(lng);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(states_get_delete),
        cmocka_unit_test(listing_arguments),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
