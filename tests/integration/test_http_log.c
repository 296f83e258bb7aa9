/* The message routes and the transaction (docs/api.md) against a real
 * broker: push (201, duplicate, 400s), pop (200, 204, partition route, bad
 * arguments), long polls (woken by a push well before the timeout; 16 of them
 * on a broker with 2 HTTP threads leave /health answering at once), ack, ack
 * batch, lease extend, configure, queue listing and delete, and the
 * transaction bundle (mixed, kv-only, its 200 failure body with a flat
 * failedIndex, and the edge's 400s, which write nothing). */
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
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "notify.h"
#include "pgtest.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static long long queue_rows(const char *queue)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {queue};
    long long v = pgtest_int(c, "SELECT count(*) FROM queen.queues WHERE name = $1", 1, p);
    PQfinish(c);
    return v;
}

/* ---- push and pop ------------------------------------------------------------ */

static void push_and_pop(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    char *body = fmt("{\"items\":[{\"queue\":\"%1$s\",\"payload\":{\"n\":0.1,\"big\":12345678901234567890},"
                     "\"transactionId\":\"t1\"},{\"queue\":\"%1$s\",\"partition\":\"p2\",\"payload\":null}]}",
                     q);
    json_t *v = http_ok(&http_broker, "POST", "/api/v1/push", body, 201);
    assert_int_equal(json_array_size(v), 2);
    assert_string_equal(jstr(json_array_get(v, 0), "status"), "queued");
    assert_string_equal(jstr(json_array_get(v, 0), "transaction_id"), "t1");
    assert_string_equal(jstr(json_array_get(v, 1), "queueName"), q);
    json_decref(v);
    v = http_ok(&http_broker, "POST", "/api/v1/push", body, 201); /* same transactionId: a duplicate writes nothing */
    assert_string_equal(jstr(json_array_get(v, 0), "status"), "duplicate");
    json_decref(v);

    char *pop = fmt("/api/v1/pop/queue/%s/partition/Default?batch=10", q);
    http_reply r = broker_http(&http_broker, "GET", pop, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "12345678901234567890")); /* payloads byte for byte */
    v = json_of(&r);
    assert_true(json_is_true(json_object_get(v, "success")));
    assert_string_equal(jstr(v, "partition"), "Default");
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    assert_string_equal(jstr(m, "transactionId"), "t1");
    assert_int_equal(jint(m, "deliveryAttempt"), 1);
    assert_non_null(jstr(v, "leaseId"));
    json_decref(v);
    http_reply_free(&r);

    /* the partition is leased: nothing more there; p2 through the queue route */
    r = broker_http(&http_broker, "GET", pop, NULL, NULL);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.len, 0);
    http_reply_free(&r);
    char *any = fmt("/api/v1/pop/queue/%s?autoAck=true&consumerGroup=g%%31", q);
    v = http_ok(&http_broker, "GET", any, NULL, 200);
    assert_string_equal(jstr(v, "consumerGroup"), "g1"); /* query arguments decoded once */
    json_decref(v);
    r = broker_http(&http_broker, "GET", "/api/v1/pop/queue/no-such-queue-anywhere", NULL, NULL);
    assert_int_equal(r.status, 204);
    http_reply_free(&r);

    /* refusals */
    char *nopayload = fmt("{\"items\":[{\"queue\":\"%s\"}]}", q);
    http_refused(&http_broker, "POST", "/api/v1/push", nopayload, 400, "bad_request", NULL);
    http_refused(&http_broker, "POST", "/api/v1/push", "{\"items\":[{\"payload\":1}]}", 400, "bad_request", NULL);
    http_refused(&http_broker, "POST", "/api/v1/push", "{\"items\":{}}", 400, "bad_request", "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/push", "[]", 400, "bad_request", "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/push", "{\"items\":[", 400, "bad_body", "invalid_json");
    static const char *const bad_args[] = {"batch=abc", "batch=0", "batch=", "leaseSeconds=0", "wait=maybe",
                                           "timeout=-1", "autoAck=2", "consumerGroup=%00", "batch=99999999999"};
    for (size_t i = 0; i < sizeof bad_args / sizeof bad_args[0]; i++) {
        char *p = fmt("/api/v1/pop/queue/%s?%s", q, bad_args[i]);
        http_refused(&http_broker, "GET", p, NULL, 400, "bad_request", NULL);
        free(p);
    }
    char *big_batch = fmt("/api/v1/pop/queue/%s?batch=20000", q); /* SQL's range: 1..10000 */
    http_refused(&http_broker, "GET", big_batch, NULL, 400, "bad_request", "log_bad_batch");
    free(big_batch);
    free(q);
    free(body);
    free(pop);
    free(any);
    free(nopayload);
}

static void ack_lease_configure_delete(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    char *body = fmt("{\"items\":[{\"queue\":\"%1$s\",\"payload\":1,\"transactionId\":\"a\"},"
                     "{\"queue\":\"%1$s\",\"payload\":2,\"transactionId\":\"b\"}]}",
                     q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", body, 201));
    char *pop = fmt("/api/v1/pop/queue/%s?batch=1", q);
    json_t *p = http_ok(&http_broker, "GET", pop, NULL, 200);
    char *lease = strdup(jstr(p, "leaseId")), *part = strdup(jstr(p, "partitionId"));
    json_decref(p);

    char *ext = fmt("/api/v1/lease/%s/extend", lease);
    json_t *v = http_ok(&http_broker, "POST", ext, "{\"seconds\":120}", 200);
    assert_true(json_is_true(json_object_get(v, "success")));
    assert_true(json_is_true(json_object_get(v, "renewed")));
    assert_non_null(jstr(v, "expiresAt"));
    json_decref(v);
    v = http_ok(&http_broker, "POST", ext, NULL, 200); /* no body: the default 60 s */
    assert_true(json_is_true(json_object_get(v, "success")));
    json_decref(v);
    v = http_ok(&http_broker, "POST", "/api/v1/lease/00000000-0000-0000-0000-00000000abcd/extend", "{}", 200);
    assert_true(json_is_false(json_object_get(v, "success")));
    json_decref(v);
    http_refused(&http_broker, "POST", ext, "{\"seconds\":0}", 400, "bad_request", "log_bad_seconds");
    http_refused(&http_broker, "POST", ext, "{\"seconds\":\"60\"}", 400, "bad_request", "log_bad_seconds");
    http_refused(&http_broker, "POST", ext, "[60]", 400, "bad_request", "log_bad_request");

    char *ack = fmt("{\"transactionId\":\"a\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}", part, lease);
    v = http_ok(&http_broker, "POST", "/api/v1/ack", ack, 200);
    assert_int_equal(json_array_size(v), 1);
    assert_true(json_is_true(json_object_get(json_array_get(v, 0), "success")));
    assert_true(json_is_false(json_object_get(json_array_get(v, 0), "noop")));
    json_decref(v);
    char *batch = fmt("{\"consumerGroup\":\"__QUEUE_MODE__\",\"acknowledgments\":[{\"transactionId\":\"a\","
                      "\"partitionId\":\"%s\"},{\"transactionId\":\"zz\",\"partitionId\":\"%s\"}]}",
                      part, part);
    v = http_ok(&http_broker, "POST", "/api/v1/ack/batch", batch, 200);
    assert_int_equal(json_array_size(v), 2);
    assert_true(json_is_true(json_object_get(json_array_get(v, 0), "noop")));
    assert_true(json_is_false(json_object_get(json_array_get(v, 1), "success"))); /* per item, still 200 */
    json_decref(v);
    http_refused(&http_broker, "POST", "/api/v1/ack/batch", "{\"acknowledgments\":{}}", 400, "bad_request",
                 "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/ack/batch", "{\"consumerGroup\":1,\"acknowledgments\":[]}", 400,
                 "bad_request", NULL);
    http_refused(&http_broker, "POST", "/api/v1/ack", "[]", 400, "bad_request", "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/ack", "{\"transactionId\":\"a\",\"partitionId\":\"not-a-uuid\"}", 400,
                 "bad_request", NULL);

    char *conf = fmt("{\"queue\":\"%s\",\"options\":{\"leaseTime\":30,\"retryLimit\":5}}", q);
    v = http_ok(&http_broker, "POST", "/api/v1/configure", conf, 200);
    assert_true(json_is_true(json_object_get(v, "configured")));
    assert_int_equal(jint(json_object_get(v, "options"), "retryLimit"), 5);
    json_decref(v);
    char *badopt = fmt("{\"queue\":\"%s\",\"options\":{\"leese\":1}}", q);
    http_refused(&http_broker, "POST", "/api/v1/configure", badopt, 400, "bad_request", "log_bad_options");
    http_refused(&http_broker, "POST", "/api/v1/configure", "{\"options\":{}}", 400, "bad_request", "log_bad_queue");
    http_refused(&http_broker, "POST", "/api/v1/configure", "{\"queue\":\"x\",\"options\":[]}", 400, "bad_request",
                 "log_bad_request");

    v = http_ok(&http_broker, "GET", "/api/v1/resources/queues", NULL, 200);
    bool seen = false;
    size_t i;
    json_t *el;
    json_array_foreach(json_object_get(v, "queues"), i, el)
    {
        if (strcmp(jstr(el, "name"), q) == 0) {
            seen = true;
            assert_int_equal(jint(json_object_get(el, "messages"), "total"), 2);
        }
    }
    assert_true(seen);
    json_decref(v);

    char *del = fmt("/api/v1/resources/queues/%s", q);
    v = http_ok(&http_broker, "DELETE", del, NULL, 200);
    assert_true(json_is_true(json_object_get(v, "existed")));
    json_decref(v);
    v = http_ok(&http_broker, "DELETE", del, NULL, 200);
    assert_true(json_is_false(json_object_get(v, "existed")));
    json_decref(v);
    free(q);
    free(body);
    free(pop);
    free(lease);
    free(part);
    free(ext);
    free(ack);
    free(batch);
    free(conf);
    free(badopt);
    free(del);
}

/* ---- the transaction ---------------------------------------------------------- */

static void transaction_bundles(void **state)
{
    (void)state;
    char *q = pgtest_unique("txq"), *ns = pgtest_unique("txns");
    char *mixed = fmt("{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":0.1}]}],"
                      "\"kv\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"marker\",\"value\":true,\"forever\":true}]}",
                      q, ns);
    json_t *v = http_ok(&http_broker, "POST", "/api/v1/transaction", mixed, 200);
    assert_true(json_is_true(json_object_get(v, "success")));
    json_t *res = json_object_get(v, "results");
    assert_int_equal(json_array_size(res), 2);
    assert_string_equal(jstr(json_array_get(res, 0), "type"), "push");
    json_t *kv = json_array_get(res, 1);
    assert_string_equal(jstr(kv, "type"), "kv");
    assert_int_equal(jint(kv, "index"), 1);
    assert_int_equal(jint(kv, "opIndex"), 0);
    assert_true(json_is_true(json_object_get(kv, "applied")));
    json_decref(v);

    /* kv-only */
    char *kvonly = fmt("{\"kv\":[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"marker\"}]}", ns);
    v = http_ok(&http_broker, "POST", "/api/v1/transaction", kvonly, 200);
    assert_true(json_is_true(json_object_get(v, "success")));
    assert_true(json_is_true(json_object_get(json_array_get(json_object_get(v, "results"), 0), "found")));
    json_decref(v);

    /* the marker exists: the whole bundle rolls back, 200 with the failure */
    char *q2 = pgtest_unique("txq");
    char *again = fmt("{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":1},"
                      "{\"queue\":\"%s\",\"payload\":2}]}],"
                      "\"kv\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"marker\",\"value\":1,\"forever\":true,"
                      "\"expect\":0,\"required\":true}]}",
                      q2, q2, ns);
    v = http_ok(&http_broker, "POST", "/api/v1/transaction", again, 200);
    assert_true(json_is_false(json_object_get(v, "success")));
    assert_string_equal(jstr(v, "reason"), "kv_precondition");
    assert_int_equal(jint(v, "failedIndex"), 2); /* 2 push items, then kv 0 */
    assert_string_equal(jstr(v, "kvReason"), "exists");
    assert_int_equal(json_array_size(json_object_get(v, "results")), 0);
    json_decref(v);
    assert_int_equal(queue_rows(q2), 0);

    /* pre-flight refusals: 400, nothing written */
    char *q3 = pgtest_unique("txq");
    char *push3 = fmt("{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q3);
    char *kv_in_ops = fmt("{\"operations\":[%s,{\"type\":\"kv\",\"op\":\"get\"}]}", push3);
    http_refused(&http_broker, "POST", "/api/v1/transaction", kv_in_ops, 400, "bad_request", "log_kv_in_operations");
    char *prefix = fmt("{\"operations\":[%s],\"kv\":[{\"op\":\"getPrefix\",\"ns\":\"%s\",\"prefix\":\"m\"}]}", push3,
                       ns);
    http_refused(&http_broker, "POST", "/api/v1/transaction", prefix, 400, "bad_request",
                 "kv_get_prefix_not_allowed_in_transaction");
    size_t cap = 65 * 80 + 256;
    char *many = malloc(cap);
    int n = snprintf(many, cap, "{\"operations\":[%s],\"kv\":[", push3);
    for (int i = 0; i < 65; i++)
        n += snprintf(many + n, cap - (size_t)n, "%s{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k%d\"}", i ? "," : "", ns,
                      i);
    snprintf(many + n, cap - (size_t)n, "]}");
    http_refused(&http_broker, "POST", "/api/v1/transaction", many, 400, "bad_request", "kv_too_many_ops");
    char *tenant = fmt("{\"operations\":[%s],\"tenant\":\"00000000-0000-0000-0000-000000000002\"}", push3);
    http_refused(&http_broker, "POST", "/api/v1/transaction", tenant, 400, "bad_request", "tenant_not_an_input");
    char *kvtenant = fmt("{\"operations\":[%s],\"kv\":[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k\",\"tenant\":\"x\"}]}",
                         push3, ns);
    http_refused(&http_broker, "POST", "/api/v1/transaction", kvtenant, 400, "bad_request", "kv_tenant_not_an_input");
    char *unknown = fmt("{\"operations\":[%s],\"kvs\":[]}", push3);
    http_refused(&http_broker, "POST", "/api/v1/transaction", unknown, 400, "bad_request", "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/transaction", "{}", 400, "bad_request", "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/transaction", "{\"operations\":[{\"type\":\"pop\"}]}", 400,
                 "bad_request", "log_bad_operation");
    http_refused(&http_broker, "POST", "/api/v1/transaction", "{\"operations\":{}}", 400, "bad_request",
                 "log_bad_request");
    http_refused(&http_broker, "POST", "/api/v1/transaction", "{\"operations\":[", 400, "bad_body", "invalid_json");
    assert_int_equal(queue_rows(q3), 0);
    /* null is absent, over HTTP as embedded and in SQL: one pre-flight. */
    char *kvnull = fmt("{\"operations\":[%s],\"kv\":null,\"requiredLeases\":null}", push3);
    json_t *accepted = http_ok(&http_broker, "POST", "/api/v1/transaction", kvnull, 200);
    assert_true(jtrue(accepted, "success"));
    json_decref(accepted);
    assert_int_equal(queue_rows(q3), 1);
    free(kvnull);
    free(q);
    free(ns);
    free(q2);
    free(q3);
    free(mixed);
    free(kvonly);
    free(again);
    free(push3);
    free(kv_in_ops);
    free(prefix);
    free(many);
    free(tenant);
    free(kvtenant);
    free(unknown);
}

/* The reason SQL's wire gives a bundle (called as libqueen calls it), or
 * NULL when it is accepted. */
static char *sql_wire_reason(const char *bundle)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {bundle, QUEEN_DEFAULT_TENANT};
    PGresult *r = PQexecParams(c, "SELECT queen.log_transaction_wire_v1($2::uuid, $1::jsonb)", 2, NULL, p, NULL, NULL, 0);
    const char *msg = PQresultStatus(r) == PGRES_FATAL_ERROR ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char *out = msg ? strdup(msg) : NULL;
    PQclear(r);
    PQfinish(c);
    return out;
}

/* The broker's pre-flight refuses a bundle before SQL sees it; where both
 * judge the same input they give the same reason, SQL's. Each bundle is
 * sent over HTTP and given to SQL directly. */
static void transaction_preflight_agrees_with_sql(void **state)
{
    (void)state;
    static const struct {
        const char *body, *reason;
    } cases[] = {
        {"{\"kv\":[],\"requiredLeases\":{}}", "log_bad_lease_id"},
        {"{\"kv\":[],\"requiredLeases\":\"x\"}", "log_bad_lease_id"},
        {"{\"kv\":{}}", "log_bad_request"},
        {"{\"operations\":[],\"kv\":1}", "log_bad_request"},
        {"{\"kv\":{},\"requiredLeases\":{}}", "log_bad_request"},
        {"{\"operations\":{}}", "log_bad_request"},
        {"{\"operations\":[{\"type\":\"pop\"}]}", "log_bad_operation"},
        {"{\"operations\":[1]}", "log_bad_operation"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *sql = sql_wire_reason(cases[i].body);
        if (sql == NULL || strcmp(sql, cases[i].reason) != 0)
            fail_msg("%s: SQL says %s, expected %s", cases[i].body, sql ? sql : "(accepted)", cases[i].reason);
        free(sql);
        http_refused(&http_broker, "POST", "/api/v1/transaction", cases[i].body, 400, "bad_request", cases[i].reason);
    }
}

/* ---- long polls ------------------------------------------------------------------ */

static long long polls_waiting(void)
{
    return http_metric(&http_broker, "http", NULL, "longPollsWaiting");
}

/* The waiter is also fired by its re-check NOTIFY_RECHECK_MS after it was
 * registered, push or no push: the poll shows that NOTIFY woke it only when
 * it answered before that re-check could have fired, with the notification
 * counted by the notifier. */
static void long_poll_wakes_on_push(void **state)
{
    (void)state;
    char *q = pgtest_unique("lp");
    char *path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=10000", q);
    timed_get p = {.b = &http_broker, .path = path};
    pthread_t t;
    long long waiting = polls_waiting();
    pthread_create(&t, NULL, timed_get_run, &p);
    /* Suspended: its first attempt found nothing, only a wake-up is left. */
    WAIT_UNTIL(polls_waiting() > waiting, 5000, "the long poll was never suspended");
    long long notifies = http_metric(&http_broker, "engine", "notifier", "notifies");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", push, 201));
    pthread_join(t, NULL);
    assert_int_equal(p.status, 200);
    if (p.took_ms >= NOTIFY_RECHECK_MS)
        fail_msg("the long poll answered after %lld ms, not before the %d ms re-check: the NOTIFY did not wake it",
                 p.took_ms, NOTIFY_RECHECK_MS);
    /* The broker woke it from its own announcement; the NOTIFY's round trip
     * through PostgreSQL may come in after the answer. */
    WAIT_UNTIL(http_metric(&http_broker, "engine", "notifier", "notifies") > notifies, 5000,
               "the notifier received no notification (%lld before the push)", notifies);

    /* and without a push, 204 at the timeout, not before */
    char *empty = fmt("/api/v1/pop/queue/%s-none?wait=true&timeout=600", q);
    timed_get e = {.b = &http_broker, .path = empty};
    timed_get_run(&e);
    assert_int_equal(e.status, 204);
    assert_true(e.took_ms >= 550);
    assert_true(e.took_ms < 5000);
    free(q);
    free(path);
    free(push);
    free(empty);
}

/* 16 waiting pops on a broker with 2 HTTP threads: suspended requests hold
 * no thread, so /health answers at once, and each poll ends at its timeout. */
static void long_polls_do_not_pin_threads(void **state)
{
    (void)state;
    enum { N = 16 };
    char *q = pgtest_unique("pin");
    timed_get p[N];
    char *paths[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        paths[i] = fmt("/api/v1/pop/queue/%s-%d?wait=true&timeout=3000", q, i);
        p[i] = (timed_get){.b = &http_broker, .path = paths[i]};
        pthread_create(&t[i], NULL, timed_get_run, &p[i]);
    }
    WAIT_UNTIL(polls_waiting() == N, 2500, "%lld of %d long polls suspended", polls_waiting(), N);
    long long t0 = now_ms();
    http_reply r = broker_http(&http_broker, "GET", "/health", NULL, NULL);
    long long took = now_ms() - t0;
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    if (took > 500)
        fail_msg("/health took %lld ms with %d long polls waiting", took, N);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(p[i].status, 204);
        free(paths[i]);
    }
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(push_and_pop),
        cmocka_unit_test(ack_lease_configure_delete),
        cmocka_unit_test(transaction_bundles),
        cmocka_unit_test(transaction_preflight_agrees_with_sql),
        cmocka_unit_test(long_poll_wakes_on_push),
        cmocka_unit_test(long_polls_do_not_pin_threads),
    };
    return cmocka_run_group_tests_name("http_log", tests, http_broker_setup, http_broker_teardown);
}
