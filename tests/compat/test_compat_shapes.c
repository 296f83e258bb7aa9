/* What the reference broker's clients (Queen MQ, JS client-v2 and Python)
 * send and read back, against a real broker: the lease extend answer read as
 * Queen.renew reads it (an object: leaseId, newExpiresAt), push results with
 * partition_id and trace_id, the traceId stored per message, ack results with
 * queueName and partitionName, and an error envelope whose `error` is the
 * sentence HttpClient puts in Error.message (and `code` its Error.code). */
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

#define TRACE_ID "0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"

/* The body QueueBuilder.push sends for one item: queue, partition, payload, a
 * client-made transactionId, and traceId only when the caller gave a UUID. */
static char *push_item(const char *queue, const char *txn, const char *trace)
{
    if (trace == NULL)
        return fmt("{\"queue\":\"%s\",\"partition\":\"Default\",\"payload\":{\"n\":1},\"transactionId\":\"%s\"}", queue,
                   txn);
    return fmt("{\"queue\":\"%s\",\"partition\":\"Default\",\"payload\":{\"n\":1},\"transactionId\":\"%s\","
               "\"traceId\":\"%s\"}",
               queue, txn, trace);
}

/* Pushes one message the way the client does and pops it (no wait, as pop()
 * with wait(false)); returns the pop's answer. */
static json_t *push_and_pop_one(const char *queue, const char *txn)
{
    char *item = push_item(queue, txn, NULL), *body = fmt("{\"items\":[%s]}", item);
    json_decref(http_ok(&B, "POST", "/api/v1/push", body, 201));
    char *pop = fmt("/api/v1/pop/queue/%s?batch=1&wait=false&timeout=30000", queue);
    json_t *v = http_ok(&B, "GET", pop, NULL, 200);
    free(item);
    free(body);
    free(pop);
    return v;
}

/* Queen.renew posts {} and reads result.leaseId ? result.newExpiresAt :
 * result.lease_expires_at (JS); the Python client reads
 * result.get("newExpiresAt"), which fails on an array. */
static void lease_extend_reads_new_expires_at(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    json_t *p = push_and_pop_one(q, "renew-1");
    const char *lease = jstr(json_array_get(json_object_get(p, "messages"), 0), "leaseId");
    assert_non_null(lease);
    char *ext = fmt("/api/v1/lease/%s/extend", lease);
    json_t *v = http_ok(&B, "POST", ext, "{}", 200);
    assert_true(json_is_object(v));
    assert_string_equal(jstr(v, "leaseId"), lease);
    const char *at = jstr(v, "newExpiresAt");
    if (at == NULL)
        fail_msg("no newExpiresAt in %s", json_dumps(v, JSON_COMPACT));
    assert_string_equal(at, jstr(v, "expiresAt")); /* ours, kept */
    assert_true(json_is_true(json_object_get(v, "success")));
    json_decref(v);

    /* a lease that is not live: still an object, newExpiresAt null */
    v = http_ok(&B, "POST", "/api/v1/lease/00000000-0000-0000-0000-000000000000/extend", "{}", 200);
    assert_true(json_is_object(v));
    assert_true(json_is_null(json_object_get(v, "newExpiresAt")));
    assert_true(json_is_false(json_object_get(v, "success")));
    json_decref(v);
    json_decref(p);
    free(ext);
    free(q);
}

/* Push results carry partition_id (the partition's id, what a pop calls
 * partitionId) and trace_id (the traceId pushed, null when none). */
static void push_results_carry_partition_and_trace(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    char *a = push_item(q, "with-trace", TRACE_ID), *b = push_item(q, "without-trace", NULL);
    char *body = fmt("{\"items\":[%s,%s]}", a, b);
    json_t *v = http_ok(&B, "POST", "/api/v1/push", body, 201);
    json_t *r0 = json_array_get(v, 0), *r1 = json_array_get(v, 1);
    assert_string_equal(jstr(r0, "status"), "queued");
    if (jstr(r0, "trace_id") == NULL || jstr(r0, "partition_id") == NULL)
        fail_msg("no trace_id or partition_id in %s", json_dumps(r0, JSON_COMPACT));
    assert_string_equal(jstr(r0, "trace_id"), TRACE_ID);
    if (!json_is_null(json_object_get(r1, "trace_id")))
        fail_msg("trace_id of an item pushed without one: %s", json_dumps(r1, JSON_COMPACT));
    assert_non_null(jstr(r0, "message_id")); /* ours, kept */
    assert_string_equal(jstr(r0, "queueName"), q);

    PGconn *c = pgtest_connect();
    const char *params[] = {q};
    char *pid = pgtest_scalar(c,
                              "SELECT p.id::text FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id "
                              "WHERE q.name = $1 AND p.name = 'Default'",
                              1, params);
    assert_string_equal(jstr(r0, "partition_id"), pid);
    assert_string_equal(jstr(r1, "partition_id"), pid);
    json_decref(v);

    /* a duplicate names the partition and the stored message's trace */
    v = http_ok(&B, "POST", "/api/v1/push", body, 201);
    assert_string_equal(jstr(json_array_get(v, 0), "status"), "duplicate");
    assert_string_equal(jstr(json_array_get(v, 0), "partition_id"), pid);
    assert_string_equal(jstr(json_array_get(v, 0), "trace_id"), TRACE_ID);
    json_decref(v);
    PQfinish(c);
    free(pid);
    free(a);
    free(b);
    free(body);
    free(q);
}

/* The traceId a push gives is stored with its message (pop returns it). */
static void trace_id_is_stored(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    char *a = push_item(q, "t-stored", TRACE_ID), *b = push_item(q, "t-none", NULL);
    char *body = fmt("{\"items\":[%s,%s]}", a, b);
    json_decref(http_ok(&B, "POST", "/api/v1/push", body, 201));
    PGconn *c = pgtest_connect();
    const char *with[] = {q, "t-stored"}, *without[] = {q, "t-none"};
    static const char *const sql =
        "SELECT m.trace_id::text FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 AND m.transaction_id = $2";
    char *stored = pgtest_scalar(c, sql, 2, with);
    assert_non_null(stored);
    assert_string_equal(stored, TRACE_ID);
    assert_null(pgtest_scalar(c, sql, 2, without));
    PQfinish(c);
    free(stored);
    free(a);
    free(b);
    free(body);
    free(q);
}

/* Queen.ack (single and batch) reads an array of
 * {index, transactionId, success, error, queueName, partitionName, ...}. */
static void ack_results_carry_queue_and_partition(void **state)
{
    (void)state;
    char *q = pgtest_unique("q");
    json_t *p = push_and_pop_one(q, "ack-1");
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    char *single = fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"status\":\"completed\",\"error\":null,"
                       "\"consumerGroup\":null,\"leaseId\":\"%s\"}",
                       jstr(m, "transactionId"), jstr(m, "partitionId"), jstr(m, "leaseId"));
    json_t *v = http_ok(&B, "POST", "/api/v1/ack", single, 200);
    json_t *r = json_array_get(v, 0);
    assert_true(json_is_true(json_object_get(r, "success")));
    if (jstr(r, "queueName") == NULL)
        fail_msg("no queueName in %s", json_dumps(v, JSON_COMPACT));
    assert_string_equal(jstr(r, "queueName"), q);
    assert_string_equal(jstr(r, "partitionName"), "Default");
    json_decref(v);

    /* the batch route, one ack naming a partition that does not exist */
    char *batch = fmt("{\"acknowledgments\":[{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"status\":\"completed\","
                      "\"error\":null},{\"transactionId\":\"x\",\"partitionId\":"
                      "\"00000000-0000-0000-0000-000000000000\",\"status\":\"completed\",\"error\":null}],"
                      "\"consumerGroup\":null}",
                      jstr(m, "transactionId"), jstr(m, "partitionId"));
    v = http_ok(&B, "POST", "/api/v1/ack/batch", batch, 200);
    assert_string_equal(jstr(json_array_get(v, 0), "queueName"), q);
    assert_string_equal(jstr(json_array_get(v, 0), "partitionName"), "Default");
    assert_true(json_is_null(json_object_get(json_array_get(v, 1), "queueName")));
    assert_true(json_is_null(json_object_get(json_array_get(v, 1), "partitionName")));
    json_decref(v);
    json_decref(p);
    free(single);
    free(batch);
    free(q);
}

/* HttpClient makes Error.message from body.error and Error.code from
 * body.code: error must say what went wrong, code is the category. */
static void error_is_a_sentence(void **state)
{
    (void)state;
    char long_name[300];
    memset(long_name, 'q', 256);
    long_name[256] = '\0';
    char *item = push_item(long_name, "e-1", NULL), *body = fmt("{\"items\":[%s]}", item);
    http_reply r = broker_http(&B, "POST", "/api/v1/push", body, NULL);
    assert_int_equal(r.status, 400);
    json_t *v = json_of(&r);
    const char *message = jstr(v, "error");
    assert_non_null(message);
    assert_string_equal(message, "items[0].queue must be a string of 1..255 bytes without control characters");
    assert_string_equal(jstr(v, "code"), "bad_request");
    assert_string_equal(jstr(v, "reason"), "log_bad_queue");
    assert_string_equal(jstr(v, "detail"), message);
    json_decref(v);
    http_reply_free(&r);

    /* a body that is not JSON: error is the parser's message */
    r = broker_http(&B, "POST", "/api/v1/push", "{\"items\":[", NULL);
    assert_int_equal(r.status, 400);
    v = json_of(&r);
    assert_string_equal(jstr(v, "code"), "bad_body");
    assert_non_null(strstr(jstr(v, "error"), "line")); /* jansson's message, with where */
    json_decref(v);
    http_reply_free(&r);
    free(item);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lease_extend_reads_new_expires_at),
        cmocka_unit_test(push_results_carry_partition_and_trace),
        cmocka_unit_test(trace_id_is_stored),
        cmocka_unit_test(ack_results_carry_queue_and_partition),
        cmocka_unit_test(error_is_a_sentence),
    };
    return cmocka_run_group_tests_name("compat_shapes", tests, setup, teardown);
}
