/* Dead letters through libqueen itself (no HTTP): queen_dlq_list with its
 * cursor, queen_dlq_requeue (attempt reset, once; and from eight threads at
 * the same moment, each dead letter once), queen_dlq_delete, and the
 * refusals (QUEEN_ERR_BAD_REQUEST with the SQL's reason). */
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

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

/* n dead letters in queue (retryLimit 0): pushed, popped, failed. */
static void make_dead_letters(queen *q, const char *tenant, const char *queue, int n)
{
    char *out = NULL;
    queen_error e = {0};
    must(queen_configure(q, tenant, queue, "{\"retryLimit\":0}", &out, &e), &e);
    free(out);
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        char txn[16];
        snprintf(txn, sizeof txn, "t%d", i);
        json_array_append_new(items, json_pack("{s:s, s:i, s:s}", "queue", queue, "payload", i, "transactionId", txn));
    }
    char *text = json_dumps(items, JSON_COMPACT);
    json_decref(items);
    must(queen_push(q, tenant, text, &out, &e), &e);
    free(out);
    free(text);
    queen_pop_options o = {.queue = queue, .batch = n};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    json_t *body = take_json(out);
    json_t *acks = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(body, "messages"), i, m)
    {
        json_array_append_new(acks, json_pack("{s:s, s:s, s:s, s:s}", "transactionId", jstr(m, "transactionId"),
                                              "partitionId", jstr(m, "partitionId"), "leaseId", jstr(m, "leaseId"),
                                              "status", "failed"));
    }
    assert_int_equal(json_array_size(acks), n);
    text = json_dumps(acks, JSON_COMPACT);
    json_decref(acks);
    json_decref(body);
    must(queen_ack(q, tenant, text, NULL, &out, &e), &e);
    free(out);
    free(text);
}

static json_t *list(queen *q, const char *tenant, const queen_dlq_query *query)
{
    char *out = NULL;
    queen_error e = {0};
    must(queen_dlq_list(q, tenant, query, &out, &e), &e);
    return take_json(out);
}

static void list_requeue_delete(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-dlq-");
    make_dead_letters(q, tenant, queue, 3);

    queen_dlq_query page = {.queue = queue, .limit = 2};
    json_t *v = list(q, tenant, &page);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "t0");
    page.after = jnum(json_object_get(v, "nextAfter"));
    long long id0 = jint(json_array_get(json_object_get(v, "messages"), 0), "id");
    json_decref(v);
    v = list(q, tenant, &page);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    assert_true(json_is_null(json_object_get(v, "nextAfter")));
    json_decref(v);
    /* Another tenant sees none of them. */
    char other[37];
    wire_uuid4(other);
    v = list(q, other, NULL);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 0);
    json_decref(v);

    char *out = NULL;
    queen_error e = {0};
    char ids[32];
    snprintf(ids, sizeof ids, "[%lld]", id0);
    must(queen_dlq_requeue(q, tenant, queue, ids, 0, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(jint(v, "requeued"), 1);
    assert_int_equal(jint(v, "remaining"), 2);
    json_decref(v);
    queen_pop_options o = {.queue = queue, .batch = 10, .auto_ack = true};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "messages"), 0), "transactionId"), "t0");
    assert_int_equal(jint(json_array_get(json_object_get(v, "messages"), 0), "deliveryAttempt"), 1);
    json_decref(v);

    /* Refusals. */
    assert_int_equal(queen_dlq_requeue(q, tenant, queue, "[0]", 0, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(e.reason, "log_bad_ids");
    queen_dlq_query bad = {.limit = 1001};
    assert_int_equal(queen_dlq_list(q, tenant, &bad, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_limit");
    assert_int_equal(queen_dlq_delete(q, tenant, 0, NULL, &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_request");

    must(queen_dlq_delete(q, tenant, 0, queue, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(jint(v, "deleted"), 2);
    json_decref(v);
    free(queue);
    queen_close(q);
}

#define THREADS 8
#define LETTERS 30

typedef struct requeuer {
    queen *q;
    const char *tenant, *queue;
    const long long *ids;
    int index;
    pthread_barrier_t *start;
    long long requeued;
    int failures;
} requeuer;

static void *requeuer_main(void *arg)
{
    requeuer *r = arg;
    pthread_barrier_wait(r->start);
    for (int k = 0; k < LETTERS; k++) {
        char ids[32];
        snprintf(ids, sizeof ids, "[%lld]", r->ids[(k + r->index * 3) % LETTERS]);
        char *out = NULL;
        queen_error e = {0};
        if (queen_dlq_requeue(r->q, r->tenant, r->queue, ids, 0, &out, &e) != 0) {
            r->failures++;
            continue;
        }
        json_t *v = take_json(out);
        r->requeued += jint(v, "requeued");
        json_decref(v);
    }
    return NULL;
}

static void concurrent_requeue_exactly_once(void **state)
{
    (void)state;
    queen *q = engine_open(THREADS);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-dlqc-");
    make_dead_letters(q, tenant, queue, LETTERS);
    queen_dlq_query all = {.queue = queue, .limit = 1000};
    json_t *v = list(q, tenant, &all);
    long long ids[LETTERS];
    for (int i = 0; i < LETTERS; i++)
        ids[i] = jint(json_array_get(json_object_get(v, "messages"), (size_t)i), "id");
    json_decref(v);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    requeuer rs[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        rs[i] = (requeuer){.q = q, .tenant = tenant, .queue = queue, .ids = ids, .index = i, .start = &start};
        pthread_create(&th[i], NULL, requeuer_main, &rs[i]);
    }
    long long total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += rs[i].requeued;
        assert_int_equal(rs[i].failures, 0);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(total, LETTERS);

    char *out = NULL;
    queen_error e = {0};
    queen_pop_options o = {.queue = queue, .batch = 1000, .auto_ack = true};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    v = take_json(out);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), LETTERS);
    json_decref(v);
    free(queue);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_requeue_delete),
        cmocka_unit_test(concurrent_requeue_exactly_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
