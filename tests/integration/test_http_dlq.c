/* The dead-letter routes (docs/api.md, Dead letters) against a real
 * broker: messages failed past retryLimit are listed page by page with their
 * transactionId, requeued (delivered again as attempt 1, once) and deleted;
 * bad arguments are 400s that write nothing; and eight operators requeueing
 * the same dead letters at the same moment append each exactly once. */
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

/* A 400 refusal with reason, for a path and a body made with fmt(). */
static void no(const char *method, char *path, char *body, const char *reason)
{
    http_refused_fmt(method, path, body, 400, "bad_request", reason);
}

/* n messages t0..t(n-1) pushed to q (retryLimit 0), popped as one batch and
 * failed as one batch: n dead letters. */
static void make_dead_letters(const char *q, int n)
{
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":0}}", q), 200));
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        char txn[16];
        snprintf(txn, sizeof txn, "t%d", i);
        json_array_append_new(items, json_pack("{s:s, s:s, s:{s:i}, s:s}", "queue", q, "partition", "p", "payload",
                                               "n", i, "transactionId", txn));
    }
    json_t *doc = json_pack("{s:o}", "items", items);
    char *body = json_dumps(doc, 0);
    json_decref(doc);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", body, 201));
    json_t *popped = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=%d", q, n), NULL, 200);
    json_t *msgs = json_object_get(popped, "messages");
    assert_int_equal(json_array_size(msgs), n);
    json_t *acks = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        json_array_append_new(acks, json_pack("{s:s, s:s, s:s, s:s, s:s}", "transactionId", jstr(m, "transactionId"),
                                              "partitionId", jstr(m, "partitionId"), "leaseId", jstr(m, "leaseId"),
                                              "status", "failed", "error", "boom"));
    }
    doc = json_pack("{s:o}", "acknowledgments", acks);
    char *ab = json_dumps(doc, 0);
    json_decref(doc);
    json_t *res = http_ok(&http_broker, "POST", "/api/v1/ack/batch", ab, 200);
    json_array_foreach(res, i, m)
    {
        assert_true(jtrue(m, "dlq"));
    }
    json_decref(res);
    json_decref(popped);
    free(ab);
    free(body);
}

static void list_requeue_delete(void **state)
{
    (void)state;
    char *q = pgtest_unique("dlq");
    make_dead_letters(q, 3);

    json_t *v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    assert_string_equal(jstr(json_array_get(msgs, 0), "transactionId"), "t0");
    assert_string_equal(jstr(json_array_get(msgs, 0), "reason"), "failed");
    assert_string_equal(jstr(json_array_get(msgs, 0), "errorMessage"), "boom");
    assert_true(json_is_null(json_object_get(v, "nextAfter")));
    long long id0 = jint(json_array_get(msgs, 0), "id"), id1 = jint(json_array_get(msgs, 1), "id");
    json_decref(v);

    /* Pages of two: the cursor is the last id. */
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=2", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2);
    long long next = jnum(json_object_get(v, "nextAfter"));
    assert_int_equal(next, id1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=2&after=%lld", q, next), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "t2");
    json_decref(v);

    /* Refusals write nothing. */
    http_refused(&http_broker, "GET", "/api/v1/dlq?limit=0", NULL, 400, "bad_request", "log_bad_limit");
    http_refused(&http_broker, "GET", "/api/v1/dlq?after=-1", NULL, 400, "bad_request", "log_bad_after");
    http_refused(&http_broker, "POST", "/api/v1/dlq/requeue", "{}", 400, "bad_request", "log_bad_queue");
    no("POST", strdup("/api/v1/dlq/requeue"), fmt("{\"queue\":\"%s\",\"ids\":[1.5]}", q), "log_bad_ids");
    no("POST", strdup("/api/v1/dlq/requeue"), fmt("{\"queue\":\"%s\",\"id\":1}", q), "log_bad_request");
    http_refused(&http_broker, "DELETE", "/api/v1/dlq/abc", NULL, 400, "bad_request", "log_bad_ids");
    http_refused(&http_broker, "DELETE", "/api/v1/dlq", NULL, 400, "bad_request", "log_bad_queue");
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 3);
    json_decref(v);

    /* Requeue t0: the next pop delivers it as attempt 1, once. */
    v = http_ok_fmt("POST", strdup("/api/v1/dlq/requeue"), fmt("{\"queue\":\"%s\",\"ids\":[%lld]}", q, id0), 200);
    assert_int_equal(jint(v, "requeued"), 1);
    assert_int_equal(jint(v, "remaining"), 2);
    json_decref(v);
    v = http_ok_fmt("POST", strdup("/api/v1/dlq/requeue"), fmt("{\"queue\":\"%s\",\"ids\":[%lld]}", q, id0), 200);
    assert_int_equal(jint(v, "requeued"), 0);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=10&autoAck=true", q), NULL, 200);
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    assert_string_equal(jstr(m, "transactionId"), "t0");
    assert_int_equal(jint(m, "deliveryAttempt"), 1);
    json_decref(v);

    /* Delete one by id, then the rest of the queue. */
    v = http_ok_fmt("DELETE", fmt("/api/v1/dlq/%lld", id1), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    v = http_ok_fmt("DELETE", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 1);
    json_decref(v);
    v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 0);
    json_decref(v);
    free(q);
}

/* ---- two (eight) operators at once ------------------------------------------ */

#define OPERATORS 8
#define LETTERS 40

typedef struct operator_run {
    const char *queue;
    long long *ids;
    int id_count;
    pthread_barrier_t *start;
    int index;
    long long requeued;
} operator_run;

/* Each operator requeues every dead letter one id at a time (in its own
 * order), then the whole queue: every call races every other operator's. */
static void *operator_main(void *arg)
{
    operator_run *o = arg;
    pthread_barrier_wait(o->start);
    for (int k = 0; k < o->id_count; k++) {
        long long id = o->ids[(k * 7 + o->index * 5) % o->id_count];
        char *body = fmt("{\"queue\":\"%s\",\"ids\":[%lld]}", o->queue, id);
        http_reply r = broker_http(&http_broker, "POST", "/api/v1/dlq/requeue", body, NULL);
        if (r.status == 200) {
            json_t *v = json_parse(r.body);
            o->requeued += jint(v, "requeued");
            json_decref(v);
        } else {
            o->requeued = -1000000; /* an operator refused is a failure of the test */
        }
        http_reply_free(&r);
        free(body);
    }
    char *all = fmt("{\"queue\":\"%s\"}", o->queue);
    http_reply r = broker_http(&http_broker, "POST", "/api/v1/dlq/requeue", all, NULL);
    free(all);
    json_t *v = r.status == 200 ? json_parse(r.body) : NULL;
    o->requeued += v ? jint(v, "requeued") : -1000000;
    json_decref(v);
    http_reply_free(&r);
    return NULL;
}

static void concurrent_requeue_exactly_once(void **state)
{
    (void)state;
    char *q = pgtest_unique("dlqc");
    make_dead_letters(q, LETTERS);
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&limit=1000", q), NULL, 200);
    long long ids[LETTERS];
    for (int i = 0; i < LETTERS; i++)
        ids[i] = jint(json_array_get(json_object_get(v, "messages"), (size_t)i), "id");
    json_decref(v);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, OPERATORS);
    operator_run runs[OPERATORS];
    pthread_t th[OPERATORS];
    for (int i = 0; i < OPERATORS; i++) {
        runs[i] = (operator_run){.queue = q, .ids = ids, .id_count = LETTERS, .start = &start, .index = i};
        pthread_create(&th[i], NULL, operator_main, &runs[i]);
    }
    long long total = 0;
    for (int i = 0; i < OPERATORS; i++) {
        pthread_join(th[i], NULL);
        total += runs[i].requeued;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(total, LETTERS);

    /* In the log: each transactionId twice (the original and one copy). */
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    assert_int_equal(pgtest_int(c,
                                "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions lp ON "
                                "lp.id = m.partition_id JOIN queen.queues qq ON qq.id = lp.queue_id "
                                "WHERE qq.name = $1 AND m.for_group IS NOT NULL",
                                1, p),
                     LETTERS);
    assert_int_equal(pgtest_int(c,
                                "SELECT count(*) FROM (SELECT m.transaction_id FROM queen.log_messages m "
                                "JOIN queen.log_partitions lp ON lp.id = m.partition_id JOIN queen.queues qq "
                                "ON qq.id = lp.queue_id WHERE qq.name = $1 GROUP BY 1 HAVING count(*) <> 2) s",
                                1, p),
                     0);
    assert_int_equal(pgtest_int(c, "SELECT count(*) FROM queen.log_dead_letters WHERE queue_name = $1", 1, p), 0);
    PQfinish(c);
    /* And the group gets each once more. */
    v = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1000&autoAck=true", q), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), LETTERS);
    json_decref(v);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_requeue_delete),
        cmocka_unit_test(concurrent_requeue_exactly_once),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
