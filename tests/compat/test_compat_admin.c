/* The reference broker's (Queen MQ) admin and tracing calls, sent exactly as
 * its JS client 0.15 sends them, against a real broker, asserting what that
 * client reads back: the dead-letter page as DLQBuilder.get reads it (total,
 * each message's errorMessage and data; offset=0 on the first page),
 * msg.trace({traceName, data}) inside consume() (traceNames, consumerGroup,
 * eventType), Admin.seekConsumerGroup's {toEnd} / {timestamp},
 * Admin.clearQueue's DELETE /api/v1/queues/:queue/clear and
 * Admin.deleteConsumerGroupForQueue's DELETE
 * /api/v1/consumer-groups/:group/queues/:queue?deleteMetadata=true, and
 * Admin.getMessage / deleteMessage / retryMessage, which name a message by
 * partitionId and transactionId, the dashboard's subscription move, pop
 * maintenance and getPartitions. */
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

/* Pushes n messages {"n": i} to q (partition Default, transactionIds
 * <q>-<i>) as QueueBuilder.push does. */
static void push_n(const char *q, int n)
{
    char *items = strdup("");
    for (int i = 0; i < n; i++) {
        char *next = fmt("%s%s{\"queue\":\"%s\",\"partition\":\"Default\",\"payload\":{\"n\":%d},"
                         "\"transactionId\":\"%s-%d\"}",
                         items, i ? "," : "", q, i, q, i);
        free(items);
        items = next;
    }
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"), fmt("{\"items\":[%s]}", items), 201));
    free(items);
}

/* One pop of q as consume() polls (batch, wait=false), optionally in group. */
static json_t *pop(const char *q, int batch, const char *group)
{
    return http_ok_fmt("GET",
                       fmt("/api/v1/pop/queue/%s?batch=%d&wait=false&timeout=30000%s%s", q, batch,
                           group ? "&consumerGroup=" : "", group ? group : ""),
                       NULL, 200);
}

/* queue(q).dlq().limit(10).get(): GET /api/v1/dlq?queue=&limit=10&offset=0,
 * reading total and each message's errorMessage and data. */
static void dlq_page_reads_total_error_message_and_data(void **state)
{
    (void)state;
    char *q = pgtest_unique("cdlq");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":0}}", q), 200));
    push_n(q, 3);
    json_t *p = pop(q, 3, NULL);
    json_t *msgs = json_object_get(p, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    /* Queen.ack(messages, false, {error}) as the client sends a failure. */
    char *acks = strdup("");
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_array_get(msgs, i);
        char *next = fmt("%s%s{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                         "\"status\":\"failed\",\"error\":\"boom %zu\"}",
                         acks, i ? "," : "", jstr(m, "transactionId"), jstr(m, "partitionId"), jstr(m, "leaseId"), i);
        free(acks);
        acks = next;
    }
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack/batch"), fmt("{\"acknowledgments\":[%s]}", acks), 200));
    free(acks);
    json_decref(p);

    json_t *v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=2&offset=0", q), NULL, 200);
    assert_int_equal(jint(v, "total"), 3); /* every page's total, not the page's size */
    msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    json_t *m = json_array_get(msgs, 0);
    assert_string_equal(jstr(m, "errorMessage"), "boom 0");
    assert_int_equal(jint(json_object_get(m, "data"), "n"), 0);
    json_decref(v);
    /* A later offset would be the first page again here: refused. */
    http_refused_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=2&offset=2", q), NULL, 400, "bad_request",
                     "log_bad_offset");
    free(q);
}

/* msg.trace({traceName, data}) posts {transactionId, partitionId,
 * consumerGroup, traceNames: [..] | null, eventType, data}; the admin's
 * getTracesByName then finds it under each name. */
static void trace_body_of_consume(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctrace");
    push_n(q, 1);
    json_t *p = pop(q, 1, "g1");
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    char *name_a = pgtest_unique("step"), *name_b = pgtest_unique("order");
    json_t *v = http_ok_fmt("POST", strdup("/api/v1/traces"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"consumerGroup\":\"g1\","
                                "\"traceNames\":[\"%s\",\"%s\"],\"eventType\":\"info\",\"data\":{\"step\":1}}",
                                jstr(m, "transactionId"), jstr(m, "partitionId"), name_a, name_b),
                            201);
    assert_true(jtrue(v, "recorded"));
    json_decref(v);
    const char *names[] = {name_a, name_b};
    for (int i = 0; i < 2; i++) {
        v = http_ok_fmt("GET", fmt("/api/v1/traces/by-name/%s", names[i]), NULL, 200);
        json_t *t = json_array_get(json_object_get(v, "traces"), 0);
        assert_non_null(t);
        assert_string_equal(jstr(t, "transactionId"), jstr(m, "transactionId"));
        assert_int_equal(jint(json_object_get(t, "data"), "step"), 1);
        json_decref(v);
    }
    /* traceName absent: the client sends traceNames null; recorded all the
     * same, found with the message's traces. */
    json_decref(http_ok_fmt("POST", strdup("/api/v1/traces"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"consumerGroup\":\"__QUEUE_MODE__\","
                                "\"traceNames\":null,\"eventType\":\"info\",\"data\":{\"step\":2}}",
                                jstr(m, "transactionId"), jstr(m, "partitionId")),
                            201));
    v = http_ok_fmt("GET", fmt("/api/v1/traces/%s/%s", jstr(m, "partitionId"), jstr(m, "transactionId")), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 3);
    json_decref(v);
    /* Admin.getTraceNames({limit}): both names, one message each. */
    v = http_ok_fmt("GET", strdup("/api/v1/traces/names?limit=1000&offset=0"), NULL, 200);
    size_t i, seen = 0;
    json_t *n;
    json_array_foreach(json_object_get(v, "trace_names"), i, n)
    {
        if (strcmp(jstr(n, "trace_name"), name_a) == 0 || strcmp(jstr(n, "trace_name"), name_b) == 0) {
            assert_int_equal(jint(n, "trace_count"), 1);
            assert_int_equal(jint(n, "message_count"), 1);
            assert_non_null(json_string_value(json_object_get(n, "last_seen")));
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    assert_true(jint(v, "total") >= 2);
    assert_int_equal(jint(json_object_get(v, "pagination"), "limit"), 1000);
    assert_int_equal(jint(json_object_get(v, "pagination"), "offset"), 0);
    json_decref(v);
    /* A name that is no string writes nothing. */
    http_refused_fmt("POST", strdup("/api/v1/traces"),
                     fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"traceNames\":[7],\"data\":{}}",
                         jstr(m, "transactionId"), jstr(m, "partitionId")),
                     400, "bad_request", "log_bad_trace_name");
    json_decref(p);
    free(name_a);
    free(name_b);
    free(q);
}

/* Admin.seekConsumerGroup(group, queue, {toEnd: true}) and ({timestamp}). */
static void seek_body_of_the_client(void **state)
{
    (void)state;
    char *q = pgtest_unique("cseek");
    push_n(q, 2);
    json_t *p = pop(q, 1, "g1");
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"completed\",\"consumerGroup\":\"g1\"}",
                                jstr(m, "transactionId"), jstr(m, "partitionId"), jstr(m, "leaseId")),
                            200));
    json_decref(p);
    json_t *v = http_ok_fmt("POST", fmt("/api/v1/consumer-groups/g1/queues/%s/seek", q), strdup("{\"toEnd\":true}"),
                            200);
    assert_int_equal(jint(json_array_get(json_object_get(v, "partitions"), 0), "committedOffset"), 2);
    json_decref(v);
    v = http_ok_fmt("POST", fmt("/api/v1/consumer-groups/g1/queues/%s/seek", q),
                    strdup("{\"timestamp\":\"2000-01-01T00:00:00.000Z\"}"), 200);
    assert_int_equal(jint(json_array_get(json_object_get(v, "partitions"), 0), "committedOffset"), 0);
    json_decref(v);
    http_refused_fmt("POST", fmt("/api/v1/consumer-groups/g1/queues/%s/seek", q), strdup("{\"toEnd\":false}"), 400,
                     "bad_request", "log_bad_request");
    http_refused_fmt("POST", fmt("/api/v1/consumer-groups/g1/queues/%s/seek", q),
                     strdup("{\"toEnd\":true,\"timestamp\":\"2000-01-01T00:00:00Z\"}"), 400, "bad_request",
                     "log_bad_request");
    free(q);
}

/* Admin.clearQueue(name) and Admin.deleteConsumerGroupForQueue(group, q). */
static void clear_and_group_delete_paths(void **state)
{
    (void)state;
    char *q = pgtest_unique("cclear");
    push_n(q, 2);
    http_refused_fmt("DELETE", fmt("/api/v1/queues/%s/clear?partition=Default", q), NULL, 400, "bad_request",
                     "log_bad_partition");
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2); /* the refusal wrote nothing */
    json_decref(v);
    /* g2 consumes one: a cursor, which the delete takes. */
    json_t *p = pop(q, 1, "g2");
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"completed\",\"consumerGroup\":\"g2\"}",
                                jstr(m, "transactionId"), jstr(m, "partitionId"), jstr(m, "leaseId")),
                            200));
    json_decref(p);
    v = http_ok_fmt("DELETE", fmt("/api/v1/consumer-groups/g2/queues/%s?deleteMetadata=true", q), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    free(q);

    q = pgtest_unique("cclear");
    push_n(q, 2);
    v = http_ok_fmt("DELETE", fmt("/api/v1/queues/%s/clear", q), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 2);
    json_decref(v);
    free(q);
}

/* Admin.getMessage(partitionId, transactionId), retryMessage (posts {}) and
 * deleteMessage. */
static void message_by_partition_id(void **state)
{
    (void)state;
    char *q = pgtest_unique("cmsg");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":0}}", q), 200));
    push_n(q, 2);
    json_t *p = pop(q, 1, NULL);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    char *pid = strdup(jstr(m, "partitionId")), *txn0 = fmt("%s-0", q), *txn1 = fmt("%s-1", q);
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"failed\",\"error\":\"bad input\"}",
                                txn0, pid, jstr(m, "leaseId")),
                            200));
    json_decref(p);

    json_t *v = http_ok_fmt("GET", fmt("/api/v1/messages/%s/%s", pid, txn0), NULL, 200);
    assert_string_equal(jstr(v, "transactionId"), txn0);
    assert_string_equal(jstr(v, "partitionId"), pid);
    assert_string_equal(jstr(v, "state"), "dead");
    assert_string_equal(jstr(v, "errorMessage"), "bad input");
    assert_int_equal(jint(json_object_get(v, "data"), "n"), 0);
    json_decref(v);
    http_refused_fmt("GET", fmt("/api/v1/messages/%s/none", pid), NULL, 404, "not_found", "log_message_not_found");
    http_refused_fmt("GET", fmt("/api/v1/messages/not-a-uuid/%s", txn0), NULL, 400, "bad_request",
                     "log_bad_partition_id");

    v = http_ok_fmt("POST", fmt("/api/v1/messages/%s/%s/retry", pid, txn0), strdup("{}"), 200);
    assert_true(jtrue(v, "retried"));
    assert_int_equal(jint(v, "requeued"), 1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    assert_int_equal(jint(v, "total"), 0);
    json_decref(v);
    /* Delivered again: after the pending one, as its copy. */
    p = pop(q, 2, NULL);
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 2);
    assert_string_equal(jstr(json_array_get(json_object_get(p, "messages"), 1), "transactionId"), txn0);
    json_decref(p);
    v = http_ok_fmt("POST", fmt("/api/v1/messages/%s/%s/retry", pid, txn0), strdup("{}"), 200);
    assert_false(jtrue(v, "retried")); /* no dead letter left */
    json_decref(v);

    free(q);
    q = pgtest_unique("cmsg");
    push_n(q, 1);
    p = pop(q, 1, "g1"); /* a group's lease does not let the message go */
    m = json_array_get(json_object_get(p, "messages"), 0);
    free(pid);
    free(txn0);
    pid = strdup(jstr(m, "partitionId"));
    txn0 = fmt("%s-0", q);
    http_refused_fmt("DELETE", fmt("/api/v1/messages/%s/%s", pid, txn0), NULL, 409, "conflict", "log_message_leased");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"completed\",\"consumerGroup\":\"g1\"}",
                                txn0, pid, jstr(m, "leaseId")),
                            200));
    json_decref(p);
    v = http_ok_fmt("DELETE", fmt("/api/v1/messages/%s/%s", pid, txn0), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    http_refused_fmt("GET", fmt("/api/v1/messages/%s/%s", pid, txn0), NULL, 404, "not_found", "log_message_not_found");
    free(pid);
    free(txn0);
    free(txn1);
    free(q);
}

/* POST /api/v1/consumer-groups/:group/subscription {subscriptionTimestamp}
 * (the dashboard's "move subscription"): where the group starts on a
 * partition it has not read yet. */
static void subscription_moves_group_start(void **state)
{
    (void)state;
    /* Groups of their own: a group's subscriptions are every queue it reads,
     * and other suites share this database. */
    char *q = pgtest_unique("csub"), *g = pgtest_unique("g"), *h = pgtest_unique("h");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"a\",\"payload\":1}]}", q), 201));
    /* g and h read the queue from its beginning: their subscriptions. */
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&autoAck=true&consumerGroup=%s", q, g),
                            NULL, 200));
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&autoAck=true&consumerGroup=%s", q, h),
                            NULL, 200));
    json_t *v = http_ok_fmt("POST", fmt("/api/v1/consumer-groups/%s/subscription", g),
                            strdup("{\"subscriptionTimestamp\":\"2100-01-01T00:00:00.000Z\"}"), 200);
    assert_int_equal(jint(v, "queues"), 1);
    assert_string_equal(jstr(v, "consumerGroup"), g);
    json_decref(v);
    /* A new partition: g now starts past what it holds, h does not. */
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"b\",\"payload\":2}]}", q), 201));
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&consumerGroup=%s", q, g), NULL, 204));
    v = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&consumerGroup=%s", q, h), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    json_decref(v);
    http_refused_fmt("POST", fmt("/api/v1/consumer-groups/%s/subscription", g),
                     strdup("{\"subscriptionTimestamp\":\"yesterday\"}"), 400, "bad_request",
                     "log_bad_subscription_from");
    http_refused_fmt("POST", fmt("/api/v1/consumer-groups/%s/subscription", g), strdup("{}"), 400, "bad_request",
                     "log_bad_subscription_from");
    free(q);
    free(g);
    free(h);
}

/* Admin.setPopMaintenanceMode(enabled) / getPopMaintenanceMode(): pops
 * deliver nothing while pushes go on; the switch is the database's, so the
 * test turns it off again before it ends. */
static void pop_maintenance(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpopm");
    json_t *v = http_ok_fmt("POST", strdup("/api/v1/system/maintenance/pop"), strdup("{\"enabled\":true}"), 200);
    assert_true(jtrue(v, "popMaintenanceMode"));
    assert_true(jtrue(v, "changed"));
    json_decref(v);
    v = http_ok_fmt("GET", strdup("/api/v1/system/maintenance/pop"), NULL, 200);
    assert_true(jtrue(v, "popMaintenanceMode"));
    assert_non_null(jstr(v, "since"));
    json_decref(v);
    push_n(q, 1); /* pushes go on */
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false", q), NULL, 204));
    v = http_ok_fmt("GET", strdup("/api/v1/system/maintenance"), NULL, 200);
    assert_false(jtrue(v, "maintenance")); /* the push switch is another one */
    json_decref(v);
    v = http_ok_fmt("POST", strdup("/api/v1/system/maintenance/pop"), strdup("{\"enabled\":false}"), 200);
    assert_false(jtrue(v, "popMaintenanceMode"));
    json_decref(v);
    v = pop(q, 1, NULL);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    json_decref(v);
    http_refused_fmt("POST", strdup("/api/v1/system/maintenance/pop"), strdup("{\"enabled\":1}"), 400, "bad_request",
                     NULL);
    free(q);
}

/* Admin.getPartitions({queue, minDepth}): the tenant's partitions with
 * their depth, deepest first. */
static void partitions_by_depth(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpart");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":1},"
                                "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":2},"
                                "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":3}]}",
                                q),
                            201));
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/resources/partitions?queue=%s", q), NULL, 200);
    json_t *parts = json_object_get(v, "partitions");
    assert_int_equal(json_array_size(parts), 2);
    assert_string_equal(jstr(json_array_get(parts, 0), "name"), "b");
    assert_int_equal(jint(json_array_get(parts, 0), "depth"), 2);
    assert_string_equal(jstr(json_array_get(parts, 0), "queue"), q);
    assert_int_equal(jint(json_array_get(parts, 1), "total"), 1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/resources/partitions?queue=%s&minDepth=2", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "partitions")), 1);
    json_decref(v);
    http_refused_fmt("GET", fmt("/api/v1/resources/partitions?queue=%s&limit=0", q), NULL, 400, "bad_request",
                     "log_bad_limit");
    free(q);
}

/* Admin.refreshConsumerStats() posts {}: nothing to refresh here. */
static void stats_refresh(void **state)
{
    (void)state;
    json_t *v = http_ok_fmt("POST", strdup("/api/v1/stats/refresh"), strdup("{}"), 200);
    assert_false(jtrue(v, "refreshed"));
    assert_string_equal(jstr(v, "reason"), "always_current");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dlq_page_reads_total_error_message_and_data),
        cmocka_unit_test(trace_body_of_consume),
        cmocka_unit_test(seek_body_of_the_client),
        cmocka_unit_test(clear_and_group_delete_paths),
        cmocka_unit_test(message_by_partition_id),
        cmocka_unit_test(subscription_moves_group_start),
        cmocka_unit_test(pop_maintenance),
        cmocka_unit_test(partitions_by_depth),
        cmocka_unit_test(stats_refresh),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
