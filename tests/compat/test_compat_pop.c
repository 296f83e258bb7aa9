/* Pop as the reference broker's clients (JS client-v2 QueueBuilder.pop and
 * ConsumerManager#buildParams, the Python client alike) send it, against a
 * real broker: subscriptionMode values other than new (from_beginning),
 * subscriptionFrom (now, an ISO-8601 instant, a malformed one), partitions=N
 * on a queue-level pop (one lease id shared by every partition it claims:
 * renewed as one, acked per message), windowBuffer, the pop
 * by namespace/task labels (GET /api/v1/pop, with its long poll), and the
 * per-message traceId. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static test_broker B;

static int setup(void **state)
{
    (void)state;
    return broker_start(&B, NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* ---- helpers ---------------------------------------------------------------- */

static void push(const char *queue, const char *partition, const char *payload)
{
    char *body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"%s\",\"payload\":%s}]}", queue, partition, payload);
    json_decref(http_ok(&B, "POST", "/api/v1/push", body, 201));
    free(body);
}

static void sql(const char *statement, const char *a, const char *b)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {a, b};
    PQclear(pgtest_exec(c, statement, b ? 2 : 1, p));
    PQfinish(c);
}

static long long sql_int(const char *statement, const char *a)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {a};
    long long v = pgtest_int(c, statement, 1, p);
    PQfinish(c);
    return v;
}

/* The messages of a 200 pop body (owned by body). */
static json_t *messages(json_t *body)
{
    json_t *m = json_object_get(body, "messages");
    assert_true(json_is_array(m));
    return m;
}

/* ---- subscriptionMode ------------------------------------------------------- */

/* The reference treats every mode but new as all; a 4xx would kill the JS
 * consume loop. new-only is the documented alias of new. */
static void subscription_mode_values(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpmode");
    push(q, "Default", "1");
    push(q, "Default", "2");

    char *path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=g1"
                     "&subscriptionMode=from_beginning", q);
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 2);
    json_decref(v);
    free(path);

    path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=g2&subscriptionMode=earliest", q);
    v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 2);
    json_decref(v);
    free(path);

    path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=g3&subscriptionMode=new-only", q);
    json_decref(http_ok(&B, "GET", path, NULL, 204));
    push(q, "Default", "3");
    v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 1);
    assert_int_equal(jnum(json_object_get(json_array_get(messages(v), 0), "data")), 3);
    json_decref(v);
    free(path);
    free(q);
}

/* ---- subscriptionFrom ------------------------------------------------------- */

static void subscription_from_now(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpnow");
    push(q, "Default", "\"old\"");
    push(q, "other", "\"old2\"");
    char *path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=late"
                     "&subscriptionFrom=now", q);
    json_decref(http_ok(&B, "GET", path, NULL, 204)); /* the backlog is skipped, on every partition */
    push(q, "other", "\"fresh\"");
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(messages(v), 0), "data")), "fresh");
    json_decref(v);

    /* Only a new group: an existing one keeps its cursor. */
    char *q2 = pgtest_unique("cpnow");
    push(q2, "Default", "\"x1\"");
    char *first = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=early&autoAck=true", q2);
    json_decref(http_ok(&B, "GET", first, NULL, 200));
    push(q2, "Default", "\"x2\"");
    char *again = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=early&subscriptionFrom=now",
                      q2);
    v = http_ok(&B, "GET", again, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(json_array_get(messages(v), 0), "data")), "x2");
    json_decref(v);
    free(again);
    free(first);
    free(q2);
    free(path);
    free(q);
}

static void subscription_from_instant(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpts");
    push(q, "Default", "1");
    push(q, "Default", "2");
    push(q, "Default", "3");
    sql("UPDATE queen.log_messages m SET created_at = CASE m.msg_offset WHEN 1 THEN timestamptz '2020-01-01Z' "
        "WHEN 2 THEN timestamptz '2020-06-01Z' ELSE m.created_at END FROM queen.log_partitions p, queen.queues qq "
        "WHERE p.id = m.partition_id AND qq.id = p.queue_id AND qq.name = $1",
        q, NULL);
    char *path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=replay"
                     "&subscriptionFrom=2020-03-01T00:00:00.000Z", q);
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 2);
    assert_int_equal(jnum(json_object_get(json_array_get(messages(v), 0), "data")), 2);
    json_decref(v);
    free(path);

    /* Malformed: 400, and the group is not created. */
    path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=bad&subscriptionFrom=yesterday", q);
    http_refused(&B, "GET", path, NULL, 400, "bad_request", "log_bad_subscription_from");
    free(path);
    path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&consumerGroup=bad"
               "&subscriptionFrom=2020-02-30T00:00:00Z", q);
    http_refused(&B, "GET", path, NULL, 400, "bad_request", "log_bad_subscription_from");
    free(path);
    assert_int_equal(sql_int("SELECT count(*) FROM queen.log_consumers WHERE consumer_group = $1", "bad"), 0);
    free(q);
}

/* ---- partitions=N ----------------------------------------------------------- */

static void partitions_many(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpparts");
    push(q, "a", "1");
    push(q, "b", "2");
    push(q, "c", "3");
    push(q, "d", "4");
    char *path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000&partitions=3", q);
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    json_t *ms = messages(v);
    assert_int_equal(json_array_size(ms), 3); /* three partitions of the four, one message each */
    /* One lease id on every message, whatever its partition (the body's
     * own): the client renews once per lease id (popV4SharedLeaseRenew). */
    const char *lease = jstr(v, "leaseId");
    assert_non_null(lease);
    json_t *acks = json_array();
    json_t *parts = json_object();
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) {
        const char *part = jstr(m, "partitionId");
        assert_non_null(part);
        assert_string_equal(jstr(m, "leaseId"), lease);
        json_object_set(parts, part, json_true());
        json_array_append_new(acks, json_pack("{s:s, s:s, s:s, s:s}", "transactionId", jstr(m, "transactionId"),
                                              "partitionId", part, "leaseId", lease, "status", "completed"));
    }
    assert_int_equal(json_object_size(parts), 3);
    assert_int_equal(sql_int("SELECT count(*) FROM queen.log_consumers WHERE lease_id = $1::uuid", lease), 3);

    /* A second consumer claims none of the three while the lease lives. */
    json_t *other = http_ok(&B, "GET", path, NULL, 200);
    json_array_foreach(messages(other), i, m) {
        assert_null(json_object_get(parts, jstr(m, "partitionId")));
        assert_string_not_equal(jstr(m, "leaseId"), lease);
    }
    assert_int_equal(json_array_size(messages(other)), 1);
    json_decref(other);

    /* One renew moves every partition's expiry. */
    sql("UPDATE queen.log_consumers SET lease_expires_at = now() + interval '5 seconds' WHERE lease_id = $1::uuid",
        lease, NULL);
    char *ext = fmt("/api/v1/lease/%s/extend", lease);
    json_t *r = http_ok(&B, "POST", ext, "{\"seconds\":600}", 200);
    assert_true(jtrue(r, "success"));
    assert_non_null(jstr(r, "newExpiresAt"));
    json_decref(r);
    free(ext);
    assert_int_equal(sql_int("SELECT count(*) FROM queen.log_consumers WHERE lease_id = $1::uuid "
                             "AND lease_expires_at > now() + interval '500 seconds'", lease),
                     3);

    /* Every message acks with that lease id; the lease is then gone. */
    json_t *batch = json_pack("{s:s, s:o}", "consumerGroup", "__QUEUE_MODE__", "acknowledgments", acks);
    char *text = json_dumps(batch, JSON_COMPACT);
    r = http_ok(&B, "POST", "/api/v1/ack/batch", text, 200);
    json_array_foreach(r, i, m) assert_true(jtrue(m, "success"));
    json_decref(r);
    free(text);
    json_decref(batch);
    assert_int_equal(sql_int("SELECT count(*) FROM queen.log_consumers WHERE lease_id = $1::uuid", lease), 0);
    json_decref(parts);
    json_decref(v);
    free(path);

    /* batch caps the whole call, not each partition (new partitions: the
     * second consumer still holds one of the first four). */
    push(q, "e", "5");
    push(q, "e", "6");
    push(q, "f", "7");
    path = fmt("/api/v1/pop/queue/%s?batch=2&wait=false&timeout=30000&partitions=2", q);
    v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 2);
    json_decref(v);
    free(path);
    http_refused(&B, "GET", "/api/v1/pop/queue/x?partitions=0", NULL, 400, "bad_request", "log_bad_partitions");
    free(q);
}

/* ---- windowBuffer ----------------------------------------------------------- */

/* The reference's pushWindowBuffer: windowBuffer 2, three messages pushed at
 * once; a pop right away gets nothing ("Message not delayed" otherwise), and
 * once the partition has been quiet 2 s one pop of batch 4 gets all three. */
static void window_buffer_holds_a_burst(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpwin");
    char *body = fmt("{\"queue\":\"%s\",\"options\":{\"windowBuffer\":2}}", q);
    json_t *c = http_ok(&B, "POST", "/api/v1/configure", body, 200);
    assert_true(jtrue(c, "configured"));
    json_decref(c);
    free(body);
    body = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":{\"message\":\"Hello, world 1!\"}},"
               "{\"queue\":\"%s\",\"payload\":{\"message\":\"Hello, world 2!\"}},"
               "{\"queue\":\"%s\",\"payload\":{\"message\":\"Hello, world 3!\"}}]}",
               q, q, q);
    long long pushed = now_ms();
    json_decref(http_ok(&B, "POST", "/api/v1/push", body, 201));
    free(body);
    char *one = fmt("/api/v1/pop/queue/%s?batch=1&wait=false", q);
    json_decref(http_ok(&B, "GET", one, NULL, 204));
    /* Poll until the window lets the partition go (no fixed sleep). */
    char *four = fmt("/api/v1/pop/queue/%s?batch=4&wait=false", q);
    json_t *v = NULL;
    long long deadline = now_ms() + 10000;
    while (v == NULL && now_ms() < deadline) {
        http_reply r = broker_http(&B, "GET", four, NULL, NULL);
        if (r.status == 200)
            v = json_of(&r);
        else
            assert_int_equal(r.status, 204);
        http_reply_free(&r);
        if (v == NULL)
            pause_ms(100);
    }
    long long took = now_ms() - pushed;
    print_message("# windowBuffer 2: the burst delivered %lld ms after the push\n", took);
    assert_non_null(v);
    assert_true(took >= 1900);
    assert_int_equal(json_array_size(messages(v)), 3);
    json_decref(v);
    free(four);
    free(one);
    free(q);
}

/* ---- pop by labels ---------------------------------------------------------- */

static void label(const char *queue, const char *ns, const char *task)
{
    sql("UPDATE queen.queues SET namespace = $2 WHERE name = $1", queue, ns);
    if (task)
        sql("UPDATE queen.queues SET task = $2 WHERE name = $1", queue, task);
}

static void pop_by_labels(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ns"), *a = pgtest_unique("cplab"), *b = pgtest_unique("cplab"),
         *c = pgtest_unique("cplab");
    push(a, "Default", "\"a\"");
    push(b, "Default", "\"b\"");
    push(c, "Default", "\"c\"");
    label(a, ns, "invoice");
    label(b, ns, "email");

    char *path = fmt("/api/v1/pop?batch=10&wait=false&timeout=30000&namespace=%s&task=invoice", ns);
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 1);
    json_t *m = json_array_get(messages(v), 0);
    assert_string_equal(jstr(m, "queue"), a);
    assert_non_null(jstr(m, "partitionId"));
    assert_non_null(jstr(m, "leaseId"));
    json_decref(v);
    free(path);

    /* namespace only, a new group, up to 5 partitions: a's and b's messages, never c's. */
    path = fmt("/api/v1/pop?batch=10&wait=false&timeout=30000&consumerGroup=lg&namespace=%s&partitions=5", ns);
    v = http_ok(&B, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(messages(v)), 2);
    json_t *seen = json_object();
    size_t i;
    json_array_foreach(messages(v), i, m) json_object_set(seen, jstr(m, "queue"), json_true());
    assert_non_null(json_object_get(seen, a));
    assert_non_null(json_object_get(seen, b));
    json_decref(seen);
    json_decref(v);
    json_decref(http_ok(&B, "GET", path, NULL, 204));
    free(path);

    path = fmt("/api/v1/pop?batch=10&wait=false&timeout=30000&task=email&autoAck=true");
    v = http_ok(&B, "GET", path, NULL, 200);
    assert_string_equal(jstr(json_array_get(messages(v), 0), "queue"), b);
    json_decref(v);
    free(path);

    http_refused(&B, "GET", "/api/v1/pop?batch=10&wait=false&timeout=30000", NULL, 400, "bad_request",
                 "log_bad_labels");
    free(ns);
    free(a);
    free(b);
    free(c);
}

static void pop_by_labels_long_poll(void **state)
{
    (void)state;
    char *ns = pgtest_unique("nsw"), *q = pgtest_unique("cplabw");
    push(q, "Default", "0");
    label(q, ns, NULL);
    char *drain = fmt("/api/v1/pop?batch=10&wait=false&timeout=30000&namespace=%s&autoAck=true", ns);
    json_decref(http_ok(&B, "GET", drain, NULL, 200));

    long long before = http_metric(&B, "http", NULL, "longPollsWaiting");
    char *path = fmt("/api/v1/pop?batch=1&wait=true&timeout=20000&namespace=%s&autoAck=true", ns);
    timed_get g = {.b = &B, .path = path};
    pthread_t t;
    pthread_create(&t, NULL, timed_get_run, &g);
    long long deadline = now_ms() + 10000;
    while (http_metric(&B, "http", NULL, "longPollsWaiting") <= before && now_ms() < deadline)
        pause_ms(20);
    push(q, "Default", "1");
    pthread_join(t, NULL);
    assert_int_equal(g.status, 200);
    assert_true(g.took_ms < 10000); /* answered by the push, not the 20 s timeout */
    free(path);
    free(drain);
    free(ns);
    free(q);
}

/* ---- traceId ---------------------------------------------------------------- */

static void trace_id_comes_back(void **state)
{
    (void)state;
    char *q = pgtest_unique("cptrace");
    /* As the client pushes it: traceId on the item, a uuid. */
    char *body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"Default\",\"payload\":1,"
                     "\"traceId\":\"0190f2b4-8c1e-7a3b-9d2f-1c2b3a4d5e6f\"}]}",
                     q);
    json_decref(http_ok(&B, "POST", "/api/v1/push", body, 201));
    free(body);
    push(q, "Default", "2");
    char *path = fmt("/api/v1/pop/queue/%s?batch=10&wait=false&timeout=30000", q);
    json_t *v = http_ok(&B, "GET", path, NULL, 200);
    assert_string_equal(jstr(json_array_get(messages(v), 0), "traceId"), "0190f2b4-8c1e-7a3b-9d2f-1c2b3a4d5e6f");
    assert_true(json_is_null(json_object_get(json_array_get(messages(v), 1), "traceId")));
    json_decref(v);
    free(path);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(subscription_mode_values),
        cmocka_unit_test(subscription_from_now),
        cmocka_unit_test(subscription_from_instant),
        cmocka_unit_test(partitions_many),
        cmocka_unit_test(window_buffer_holds_a_burst),
        cmocka_unit_test(pop_by_labels),
        cmocka_unit_test(pop_by_labels_long_poll),
        cmocka_unit_test(trace_id_comes_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
