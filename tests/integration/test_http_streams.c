/* The stream routes (docs/api.md, Streams) against a real broker,
 * with the bodies the reference's streaming SDK sends: register a query
 * (fresh, resumed, refused 409 for another config_hash, reset), read state,
 * commit a cycle (state, sink push and source ack together; the sink's long
 * poll woken by it), the same cycle again refused 409 with nothing written,
 * a flush without an ack, and 400s for bad input. */
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
#include "notify.h"
#include "pgtest.h"
#include "testutil.h"

static long long polls_waiting(void)
{
    return http_metric(&http_broker, "http", NULL, "longPollsWaiting");
}

/* How many messages queue q holds, counted by a pop that consumes them all. */
static size_t drain(const char *q)
{
    char *path = fmt("/api/v1/pop/queue/%s?batch=100&autoAck=true", q);
    http_reply r = broker_http(&http_broker, "GET", path, NULL, NULL);
    free(path);
    if (r.status != 200 && r.status != 204)
        fail_msg("pop answered %ld: %s", r.status, r.body);
    size_t n = 0;
    if (r.status == 200) {
        json_t *v = json_of(&r);
        n = json_array_size(json_object_get(v, "messages"));
        json_decref(v);
    }
    http_reply_free(&r);
    return n;
}

static void register_state_cycle(void **state)
{
    (void)state;
    char *src = pgtest_unique("ssrc"), *sink = pgtest_unique("ssink"), *name = pgtest_unique("query");
    char *group = fmt("streams.%s", name);

    /* Registration: fresh, resumed, refused, as the SDK's registerQuery. */
    char *reg = fmt("{\"name\":\"%s\",\"source_queue\":\"%s\",\"sink_queue\":\"%s\",\"config_hash\":\"abc\","
                    "\"reset\":false}",
                    name, src, sink);
    json_t *r = http_ok(&http_broker, "POST", "/streams/v1/queries", reg, 200);
    assert_true(jtrue(r, "success"));
    assert_true(jtrue(r, "fresh"));
    assert_false(jtrue(r, "reset"));
    assert_string_equal(jstr(r, "name"), name);
    assert_string_equal(jstr(r, "config_hash"), "abc");
    char *qid = strdup(jstr(r, "query_id"));
    json_decref(r);
    r = http_ok(&http_broker, "POST", "/streams/v1/queries", reg, 200);
    assert_string_equal(jstr(r, "query_id"), qid);
    assert_false(jtrue(r, "fresh"));
    json_decref(r);
    char *changed = fmt("{\"name\":\"%s\",\"source_queue\":\"%s\",\"config_hash\":\"xyz\"}", name, src);
    http_reply rr = broker_http(&http_broker, "POST", "/streams/v1/queries", changed, NULL);
    http_expect(&rr, 409, "conflict", "streams_config_mismatch");
    json_t *body = json_of(&rr);
    /* The SDK shows body.error and its tests match this phrase. */
    assert_non_null(strstr(jstr(body, "error"), "config_hash mismatch"));
    json_decref(body);
    http_reply_free(&rr);

    /* A batch of three on one partition, popped under a lease by the query's group. */
    char *items = fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"p1\",\"payload\":{\"amount\":1}},"
                      "{\"queue\":\"%1$s\",\"partition\":\"p1\",\"payload\":{\"amount\":2}},"
                      "{\"queue\":\"%1$s\",\"partition\":\"p1\",\"payload\":{\"amount\":3}}]}",
                      src);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", items, 201));
    json_t *popped = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?consumerGroup=%s&batch=3", src, group), NULL, 200);
    json_t *msgs = json_object_get(popped, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    json_t *last = json_array_get(msgs, 2);
    char *pid = strdup(jstr(last, "partitionId")), *lease = strdup(jstr(last, "leaseId"));
    char *txn = strdup(jstr(last, "transactionId"));
    json_decref(popped);

    /* No state yet, as the SDK's getState reads it. */
    char *get = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"keys\":[]}", qid, pid);
    r = http_ok(&http_broker, "POST", "/streams/v1/state/get", get, 200);
    assert_true(jtrue(r, "success"));
    assert_int_equal(json_array_size(json_object_get(r, "rows")), 0);
    json_decref(r);

    /* The cycle, as the SDK's commitCycle sends it; a long poll on the sink
     * waits meanwhile and is woken by the cycle's push. */
    char *lp = fmt("/api/v1/pop/queue/%s?wait=true&timeout=10000&autoAck=true", sink);
    timed_get waiter = {.b = &http_broker, .path = lp};
    pthread_t t;
    long long waiting = polls_waiting();
    pthread_create(&t, NULL, timed_get_run, &waiter);
    WAIT_UNTIL(polls_waiting() > waiting, 5000, "the long poll was never suspended");
    char *cycle = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"consumer_group\":\"%s\","
                      "\"state_ops\":[{\"type\":\"upsert\",\"key\":\"w\\u001fp1\",\"value\":{\"acc\":6,\"windowEnd\":60000}}],"
                      "\"push_items\":[{\"queue\":\"%s\",\"partition\":\"p1\",\"payload\":{\"sum\":6}}],"
                      "\"ack\":{\"transactionId\":\"%s\",\"leaseId\":\"%s\",\"status\":\"completed\",\"count\":3},"
                      "\"release_lease\":true}",
                      qid, pid, group, sink, txn, lease);
    r = http_ok(&http_broker, "POST", "/streams/v1/cycle", cycle, 200);
    assert_true(jtrue(r, "success"));
    assert_string_equal(jstr(r, "query_id"), qid);
    assert_string_equal(jstr(r, "partition_id"), pid);
    assert_int_equal(jint(r, "state_ops_applied"), 1);
    assert_int_equal(json_array_size(json_object_get(r, "push_results")), 1);
    json_t *ack = json_object_get(r, "ack_result");
    assert_true(jtrue(ack, "success"));
    assert_true(jtrue(ack, "lease_released"));
    assert_false(jtrue(ack, "dlq"));
    assert_int_equal(jint(ack, "count"), 3);
    json_decref(r);
    pthread_join(t, NULL);
    assert_int_equal(waiter.status, 200);
    if (waiter.took_ms >= NOTIFY_RECHECK_MS)
        fail_msg("the sink's long poll answered after %lld ms: the cycle's push did not wake it", waiter.took_ms);

    r = http_ok(&http_broker, "POST", "/streams/v1/state/get", get, 200);
    json_t *row = json_array_get(json_object_get(r, "rows"), 0);
    assert_string_equal(jstr(row, "key"), "w\x1fp1");
    assert_int_equal(jint(json_object_get(row, "value"), "acc"), 6);
    assert_non_null(jstr(row, "updated_at"));
    json_decref(r);

    /* The same cycle again (its response lost, say): the lease is gone, so
     * it is refused and writes nothing. */
    rr = broker_http(&http_broker, "POST", "/streams/v1/cycle", cycle, NULL);
    http_expect(&rr, 409, "conflict", "streams_lease_lost");
    http_reply_free(&rr);
    assert_int_equal(drain(sink), 0);
    json_decref(http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?consumerGroup=%s", src, group), NULL, 204));

    /* A flush: no ack, a state delete and a push. */
    char *flush = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"consumer_group\":\"%s\","
                      "\"state_ops\":[{\"type\":\"delete\",\"key\":\"w\\u001fp1\"}],"
                      "\"push_items\":[{\"queue\":\"%s\",\"payload\":{\"flushed\":true}}],\"ack\":null}",
                      qid, pid, group, sink);
    r = http_ok(&http_broker, "POST", "/streams/v1/cycle", flush, 200);
    assert_true(json_is_null(json_object_get(r, "ack_result")));
    json_decref(r);
    assert_int_equal(drain(sink), 1);
    r = http_ok(&http_broker, "POST", "/streams/v1/state/get", get, 200);
    assert_int_equal(json_array_size(json_object_get(r, "rows")), 0);
    json_decref(r);

    /* Reset with consent. */
    char *reset = fmt("{\"name\":\"%s\",\"source_queue\":\"%s\",\"config_hash\":\"xyz\",\"reset\":true}", name, src);
    r = http_ok(&http_broker, "POST", "/streams/v1/queries", reset, 200);
    assert_true(jtrue(r, "reset"));
    assert_string_equal(jstr(r, "query_id"), qid);
    json_decref(r);

    /* Bad input: 400, nothing written. */
    http_refused(&http_broker, "POST", "/streams/v1/cycle", "{\"query_id\":", 400, "bad_body", "invalid_json");
    http_refused(&http_broker, "POST", "/streams/v1/cycle", "{\"query_id\":\"nope\",\"partition_id\":\"x\"}", 400,
                 "bad_request", "streams_bad_query_id");
    http_refused(&http_broker, "POST", "/streams/v1/state/get", "[]", 400, "bad_request", "streams_bad_request");
    http_refused(&http_broker, "POST", "/streams/v1/queries", "{\"source_queue\":\"q\",\"config_hash\":\"h\"}", 400,
                 "bad_request", "streams_bad_name");
    http_refused_fmt("POST", strdup("/streams/v1/cycle"),
                     fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"state_ops\":[{\"type\":\"merge\",\"key\":\"k\"}],"
                         "\"push_items\":[{\"queue\":\"%s\",\"payload\":1}]}",
                         qid, pid, sink),
                     400, "bad_request", "streams_bad_state_op");
    http_refused_fmt("POST", strdup("/streams/v1/cycle"),
                     fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"ack\":{\"transactionId\":\"%s\"}}", qid, pid,
                         txn),
                     400, "bad_request", "streams_bad_ack");
    assert_int_equal(drain(sink), 0);

    free(src);
    free(sink);
    free(name);
    free(group);
    free(reg);
    free(qid);
    free(changed);
    free(items);
    free(pid);
    free(lease);
    free(txn);
    free(get);
    free(lp);
    free(cycle);
    free(flush);
    free(reset);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(register_state_cycle),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
