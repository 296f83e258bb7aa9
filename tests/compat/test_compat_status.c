/* The reference broker's (Queen MQ) dashboard reads and moveMessageToDLQ,
 * sent exactly as its JS client 0.15 Admin sends them (getQueueStats,
 * getQueueDetail, getAnalytics, getSystemMetrics, getWorkerMetrics,
 * getPostgresStats: GETs with the caller's params as the query string;
 * moveMessageToDLQ: POST .../dlq with {}), against a real broker, asserting
 * the fields the reference's dashboard reads back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static json_t *find_named(json_t *arr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) if (strcmp(jstr(e, "name"), name) == 0) return e;
    return NULL;
}

static long long msgs(const json_t *o, const char *k)
{
    return jint(json_object_get(o, "messages"), k);
}

/* Admin.getQueueStats({namespace, limit, offset}) and
 * Admin.getQueueDetail(name): counts live, from the log. */
static void queue_status_list_and_detail(void **state)
{
    (void)state;
    char *q = pgtest_unique("cstat"), *ns = pgtest_unique("ns");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"namespace\":\"%s\",\"options\":{\"retryLimit\":2}}", q, ns),
                            200));
    push_n(q, 3);
    json_t *p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false", q), NULL, 200);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);

    json_t *v = http_ok_fmt("GET", fmt("/api/v1/status/queues?namespace=%s&limit=10&offset=0", ns), NULL, 200);
    json_t *e = find_named(json_object_get(v, "queues"), q);
    assert_non_null(e);
    assert_int_equal(json_array_size(json_object_get(v, "queues")), 1);
    assert_string_equal(jstr(e, "namespace"), ns);
    assert_int_equal(jint(e, "partitions"), 1);
    assert_int_equal(msgs(e, "total"), 3);
    assert_int_equal(msgs(e, "pending"), 2);
    assert_int_equal(msgs(e, "processing"), 1);
    assert_int_equal(jint(json_object_get(v, "pagination"), "limit"), 10);
    json_decref(v);

    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"completed\"}",
                                jstr(m, "transactionId"), jstr(m, "partitionId"), jstr(m, "leaseId")),
                            200));
    json_decref(p);
    v = http_ok_fmt("GET", fmt("/api/v1/status/queues/%s", q), NULL, 200);
    json_t *queue = json_object_get(v, "queue");
    assert_string_equal(jstr(queue, "name"), q);
    assert_int_equal(jint(json_object_get(queue, "config"), "retryLimit"), 2);
    json_t *part = json_array_get(json_object_get(v, "partitions"), 0);
    assert_string_equal(jstr(part, "name"), "Default");
    assert_int_equal(msgs(part, "total"), 3);
    assert_int_equal(msgs(part, "completed"), 1);
    assert_int_equal(msgs(part, "pending"), 2);
    assert_int_equal(msgs(part, "processing"), 0);
    assert_non_null(jstr(part, "oldestMessage"));
    json_t *totals = json_object_get(v, "totals");
    assert_int_equal(msgs(totals, "total"), 3);
    assert_int_equal(jint(totals, "completed"), 1);
    json_decref(v);

    http_refused_fmt("GET", fmt("/api/v1/status/queues/%s-none", q), NULL, 404, "not_found", "log_no_such_queue");
    http_refused_fmt("GET", strdup("/api/v1/status/queues?limit=0"), NULL, 400, "bad_request", "log_bad_limit");
    free(q);
    free(ns);
}

/* Admin.getAnalytics({queue, interval, from}): messages pushed per bucket. */
static void analytics_buckets(void **state)
{
    (void)state;
    char *q = pgtest_unique("cana");
    push_n(q, 2);
    char from[32];
    time_t t = time(NULL) - 300;
    strftime(from, sizeof from, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/status/analytics?queue=%s&interval=minute&from=%s", q, from), NULL,
                            200);
    assert_string_equal(jstr(v, "interval"), "minute");
    json_t *pts = json_object_get(v, "dataPoints");
    assert_true(json_array_size(pts) >= 5);
    long long sum = 0;
    size_t i;
    json_t *e;
    json_array_foreach(pts, i, e)
    {
        assert_non_null(jstr(e, "timestamp"));
        sum += jint(e, "messages");
    }
    assert_int_equal(sum, 2);
    json_decref(v);
    http_refused_fmt("GET", fmt("/api/v1/status/analytics?queue=%s&interval=week", q), NULL, 400, "bad_request",
                     "log_bad_interval");
    http_refused_fmt("GET", strdup("/api/v1/status/analytics?from=yesterday"), NULL, 400, "bad_request",
                     "log_bad_from");
    free(q);
}

/* Admin.getSystemMetrics(), getWorkerMetrics(), getPostgresStats(): this
 * broker's figures under the reference's names. */
static void broker_metrics(void **state)
{
    (void)state;
    json_t *v = http_ok_fmt("GET", strdup("/api/v1/analytics/system-metrics"), NULL, 200);
    assert_int_equal(jint(v, "replicaCount"), 1);
    json_t *pt = json_array_get(json_object_get(json_array_get(json_object_get(v, "replicas"), 0), "timeSeries"), 0);
    json_t *metrics = json_object_get(pt, "metrics");
    assert_true(jint(json_object_get(json_object_get(metrics, "memory"), "rss_bytes"), "last") > 0);
    assert_true(jint(json_object_get(json_object_get(metrics, "database"), "pool_size"), "last") > 0);
    assert_non_null(json_object_get(json_object_get(metrics, "cpu"), "user_us"));
    json_decref(v);

    char *q = pgtest_unique("cwm");
    push_n(q, 1);
    free(q);
    v = http_ok_fmt("GET", strdup("/api/v1/analytics/worker-metrics"), NULL, 200);
    assert_true(jint(json_object_get(v, "summary"), "totalPushRequests") >= 1);
    json_t *w = json_array_get(json_object_get(v, "workers"), 0);
    assert_non_null(w);
    assert_true(jint(w, "dbConnections") >= 1);
    assert_int_equal(json_array_size(json_object_get(v, "timeSeries")), 1);
    json_decref(v);

    v = http_ok_fmt("GET", strdup("/api/v1/analytics/postgres-stats"), NULL, 200);
    assert_non_null(jstr(v, "database"));
    json_t *sizes = json_object_get(v, "tableSizes");
    bool seen = false;
    size_t i;
    json_t *e;
    json_array_foreach(sizes, i, e) seen = seen || strcmp(jstr(e, "table"), "log_messages") == 0;
    assert_true(seen);
    assert_non_null(json_object_get(json_object_get(v, "cacheSummary"), "tables"));
    json_decref(v);
}

/* Admin.moveMessageToDLQ(partitionId, transactionId): POST .../dlq {}. */
static void move_message_to_dlq(void **state)
{
    (void)state;
    char *q = pgtest_unique("cmove"), *g = pgtest_unique("g");
    push_n(q, 3);
    /* g consumes message 0 (autoAck): a subscriber that has read it. */
    json_t *p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&autoAck=true&consumerGroup=%s", q, g),
                            NULL, 200);
    char *pid = strdup(jstr(json_array_get(json_object_get(p, "messages"), 0), "partitionId"));
    json_decref(p);
    char *t0 = fmt("%s-0", q), *t1 = fmt("%s-1", q), *t2 = fmt("%s-2", q);

    http_refused_fmt("POST", fmt("/api/v1/messages/%s/%s/dlq", pid, t0), strdup("{}"), 409, "conflict",
                     "log_message_consumed");
    json_t *v = http_ok_fmt("POST", fmt("/api/v1/messages/%s/%s/dlq", pid, t1), strdup("{}"), 200);
    assert_true(jtrue(v, "moved"));
    assert_int_equal(json_array_size(json_object_get(v, "deadLetters")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "deadLetters"), 0), "consumerGroup"), g);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=10&offset=0", q), NULL, 200);
    assert_int_equal(jint(v, "total"), 1);
    json_t *d = json_array_get(json_object_get(v, "messages"), 0);
    assert_string_equal(jstr(d, "errorMessage"), "moved to the dead letters by an operator");
    assert_string_equal(jstr(d, "transactionId"), t1);
    assert_int_equal(jint(json_object_get(d, "data"), "n"), 1);
    json_decref(v);
    http_refused_fmt("GET", fmt("/api/v1/messages/%s/%s", pid, t1), NULL, 404, "not_found", "log_message_not_found");

    /* g's next pop skips it and leases message 2: moving that one waits. */
    p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&consumerGroup=%s", q, g), NULL, 200);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    assert_string_equal(jstr(m, "transactionId"), t2);
    http_refused_fmt("POST", fmt("/api/v1/messages/%s/%s/dlq", pid, t2), strdup("{}"), 409, "conflict",
                     "log_message_leased");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/ack"),
                            fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\","
                                "\"status\":\"completed\",\"consumerGroup\":\"%s\"}",
                                t2, pid, jstr(m, "leaseId"), g),
                            200));
    json_decref(p);

    /* retryMessage brings it back to g. */
    v = http_ok_fmt("POST", fmt("/api/v1/messages/%s/%s/retry", pid, t1), strdup("{}"), 200);
    assert_int_equal(jint(v, "requeued"), 1);
    json_decref(v);
    p = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false&autoAck=true&consumerGroup=%s", q, g), NULL,
                    200);
    assert_string_equal(jstr(json_array_get(json_object_get(p, "messages"), 0), "transactionId"), t1);
    json_decref(p);

    http_refused_fmt("POST", fmt("/api/v1/messages/%s/none/dlq", pid), strdup("{}"), 404, "not_found",
                     "log_message_not_found");
    http_refused_fmt("POST", fmt("/api/v1/messages/not-a-uuid/%s/dlq", t1), strdup("{}"), 400, "bad_request",
                     "log_bad_partition_id");

    /* A queue nobody has read: the dead letter is queue mode's. */
    char *q2 = pgtest_unique("cmove");
    push_n(q2, 1);
    v = http_ok_fmt("GET", fmt("/api/v1/messages?queue=%s", q2), NULL, 200);
    char *pid2 = strdup(jstr(json_array_get(json_object_get(v, "messages"), 0), "partitionId"));
    json_decref(v);
    char *t20 = fmt("%s-0", q2);
    json_decref(http_ok_fmt("POST", fmt("/api/v1/messages/%s/%s/dlq", pid2, t20), strdup("{}"), 200));
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&wait=false", q2), NULL, 204));
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q2), NULL, 200);
    assert_int_equal(jint(v, "total"), 1);
    json_decref(v);

    free(q);
    free(g);
    free(pid);
    free(t0);
    free(t1);
    free(t2);
    free(q2);
    free(pid2);
    free(t20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queue_status_list_and_detail),
        cmocka_unit_test(analytics_buckets),
        cmocka_unit_test(broker_metrics),
        cmocka_unit_test(move_message_to_dlq),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
