/* Pushes that arrive together commit as one group (src/engine/log.c,
 * log_push_group_v1 in sql/log_push.sql) against a real broker: a client cannot tell
 * a grouped push from one sent alone (the same statuses, result shapes,
 * refusals and dedup), a refused push fails no other, every grouped push's
 * queue is notified, and pushes to one partition keep the order they were
 * answered in while they share groups with others. The broker's coalesced
 * counters (GET /metrics, http.database) say the group happened. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"

/* The kv quota refresher's read shares the loop's connections: once an hour
 * here, so what is in flight and waiting is only the test's. */
#define QUOTA_QUIET "QUEEN_KV_QUOTA_REFRESH_MS=3600000"

typedef struct request {
    const test_broker *b;
    char *body;
    long status;
    char *reply;
    pthread_t thread;
} request;

static void *send_push(void *arg)
{
    request *r = arg;
    http_reply rep = broker_http(r->b, "POST", "/api/v1/push", r->body, NULL);
    r->status = rep.status;
    r->reply = rep.body ? strdup(rep.body) : NULL;
    http_reply_free(&rep);
    return NULL;
}

static long long db_figure(const test_broker *b, const char *name)
{
    return http_metric(b, "http", "database", name);
}

/* Since the figures read at statements0 and calls0: at least one shared
 * statement, each answering two calls or more, n calls at most. */
static void assert_shared_statements(const test_broker *b, long long statements0, long long calls0, int n)
{
    long long shared = db_figure(b, "coalescedStatementsTotal") - statements0;
    long long grouped = db_figure(b, "coalescedCallsTotal") - calls0;
    if (shared < 1 || grouped < 2 * shared || grouped > n)
        fail_msg("%lld calls in %lld shared statements, of %d sent together", grouped, shared, n);
}

/* Backends waiting for the lock session's locks, seen from a connection of
 * its own. */
static long long blocked_by(PGconn *watch, PGconn *lock)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(lock));
    const char *params[] = {pid};
    return pgtest_int(watch, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))", 1,
                      params);
}

/* Locks partition 'held' of queue q in an open transaction on lock, then
 * sends held (a push to it) and waits until it blocks on that lock: one
 * push in flight that goes on only when lock rolls back. */
static void hold_push_on_partition_lock(request *held, PGconn *lock, PGconn *watch, const char *q)
{
    PQclear(pgtest_exec(lock, "BEGIN", 0, NULL));
    const char *lp[] = {q};
    PQclear(pgtest_exec(lock,
                        "SELECT 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id "
                        "WHERE q.name = $1 AND lp.name = 'held' FOR UPDATE OF lp",
                        1, lp));
    assert_int_equal(pthread_create(&held->thread, NULL, send_push, held), 0);
    WAIT_UNTIL(blocked_by(watch, lock) == 1, 10000, "the held push never blocked on the partition lock");
}

/* The pushes of one round, to queues named after q: two with one
 * transactionId on one partition, a plain one, a refused one (no payload),
 * one over two partitions and a second queue, one to a third queue. */
enum { NPUSH = 6 };
static void round_bodies(char *bodies[NPUSH], const char *q)
{
    bodies[0] = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"a\",\"payload\":1,\"transactionId\":\"t1\"}]}", q);
    bodies[1] = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"a\",\"payload\":2,\"transactionId\":\"t1\"}]}", q);
    bodies[2] = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"b\",\"payload\":{\"n\":3}}]}", q);
    bodies[3] = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"b\"}]}", q);
    bodies[4] = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"a\",\"payload\":5},"
                    "{\"queue\":\"%s_two\",\"payload\":6,\"traceId\":\"0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b\"}]}",
                    q, q);
    bodies[5] = fmt("{\"items\":[{\"queue\":\"%s_three\",\"payload\":7}]}", q);
}

/* What a client sees of an answer, ids aside: the status and, per result,
 * its keys, status, queue suffix and index; or the error envelope's code,
 * reason and detail. */
static char *shape(long status, const char *reply, const char *q)
{
    json_t *v = json_parse(reply);
    char *out = fmt("%ld:", status);
    if (status != 201) {
        char *next = fmt("%s%s|%s|%s", out, jstr(v, "code"), jstr(v, "reason"), jstr(v, "detail"));
        free(out);
        json_decref(v);
        return next;
    }
    size_t i;
    json_t *r;
    json_array_foreach(v, i, r)
    {
        const char *key;
        json_t *val;
        char *keys = strdup("");
        json_object_foreach(r, key, val)
        {
            char *k = fmt("%s%s,", keys, key);
            free(keys);
            keys = k;
        }
        const char *queue = jstr(r, "queueName");
        char *next = fmt("%s[%s %lld %s %s]", out, keys, jint(r, "index"), jstr(r, "status"),
                         strncmp(queue, q, strlen(q)) == 0 ? queue + strlen(q) : "?");
        free(keys);
        free(out);
        out = next;
    }
    json_decref(v);
    return out;
}

/* The two pushes of one transactionId: one queued, one a duplicate naming
 * the queued one's message (whichever went first). */
static void one_queued_one_duplicate(const char *a, const char *b)
{
    json_t *xa = json_parse(a), *ya = json_parse(b);
    json_t *x = json_array_get(xa, 0), *y = json_array_get(ya, 0);
    json_t *queued = strcmp(jstr(x, "status"), "queued") == 0 ? x : y;
    json_t *dup = queued == x ? y : x;
    assert_string_equal(jstr(queued, "status"), "queued");
    assert_string_equal(jstr(dup, "status"), "duplicate");
    assert_string_equal(jstr(dup, "message_id"), jstr(queued, "message_id"));
    json_decref(xa);
    json_decref(ya);
}

/* Waits until a notification names every one of the queues. */
static void notified(PGconn *listener, const char *const *queues, int n)
{
    bool seen[8] = {false};
    int left = n;
    long long until = now_ms() + 10000;
    while (left > 0) {
        PGnotify *note;
        while (left > 0 && (note = PQnotifies(listener)) != NULL) {
            for (int i = 0; i < n; i++) {
                char *want = fmt("%s:%s", QUEEN_DEFAULT_TENANT, queues[i]);
                /* '<tenant>:<queue>', then (a push's count) a unit separator and the count */
                size_t wl = strlen(want);
                if (!seen[i] && strncmp(note->extra, want, wl) == 0 &&
                    (note->extra[wl] == '\0' || note->extra[wl] == '\x1f')) {
                    seen[i] = true;
                    left--;
                }
                free(want);
            }
            PQfreemem(note);
        }
        if (left == 0)
            break;
        long long wait = until - now_ms();
        if (wait <= 0)
            fail_msg("%d queue(s) of the group were never notified", left);
        struct pollfd pfd = {.fd = PQsocket(listener), .events = POLLIN};
        poll(&pfd, 1, (int)wait);
        PQconsumeInput(listener);
    }
}

/* One connection: a push held on a partition lock keeps the connection busy
 * while the round's pushes arrive and wait; when the lock goes they leave as
 * one statement. The same pushes sent one at a time (each alone) on fresh
 * queues answer the same. */
static void grouped_pushes_answer_as_pushes_sent_alone(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *q = pgtest_unique("pgrp"), *solo = pgtest_unique("psolo");
    char *held_body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"held\",\"payload\":0}]}", q);
    json_decref(http_ok(&b, "POST", "/api/v1/push", held_body, 201));

    PGconn *listener = pgtest_connect();
    PQclear(pgtest_exec(listener, "LISTEN queen_push", 0, NULL));
    PGconn *lock = pgtest_connect(), *watch = pgtest_connect();
    request held = {.b = &b, .body = held_body};
    hold_push_on_partition_lock(&held, lock, watch, q);

    long long statements = db_figure(&b, "coalescedStatementsTotal");
    long long calls = db_figure(&b, "coalescedCallsTotal"), retries = db_figure(&b, "coalescedRetriesTotal");
    char *bodies[NPUSH];
    round_bodies(bodies, q);
    request grouped[NPUSH];
    for (int i = 0; i < NPUSH; i++) {
        grouped[i] = (request){.b = &b, .body = bodies[i]};
        assert_int_equal(pthread_create(&grouped[i].thread, NULL, send_push, &grouped[i]), 0);
    }
    WAIT_UNTIL(db_figure(&b, "waiting") == NPUSH, 10000, "the pushes did not all wait behind the held one");
    PQclear(pgtest_exec(lock, "ROLLBACK", 0, NULL));
    pthread_join(held.thread, NULL);
    assert_int_equal(held.status, 201);
    for (int i = 0; i < NPUSH; i++)
        pthread_join(grouped[i].thread, NULL);
    /* They shared statements (fewer statements than the calls they
     * answered) and the refused one failed none (no group ran again). How
     * many shared is not fixed: a push whose request re-read the
     * maintenance switch first (engine/maintenance.c, every 500 ms, so at
     * any moment under load) counted as waiting while that read waited, and
     * reached the pipeline after the others had left. What each answered is
     * checked below against the same pushes sent alone. */
    assert_shared_statements(&b, statements, calls, NPUSH);
    assert_int_equal(db_figure(&b, "coalescedRetriesTotal"), retries);
    char *two = fmt("%s_two", q), *three = fmt("%s_three", q);
    const char *queues[] = {two, three};
    notified(listener, queues, 2);

    /* The same pushes one at a time: each alone. */
    char *alone_bodies[NPUSH];
    round_bodies(alone_bodies, solo);
    statements = db_figure(&b, "coalescedStatementsTotal");
    char *g[NPUSH], *a[NPUSH];
    for (int i = 0; i < NPUSH; i++) {
        request alone = {.b = &b, .body = alone_bodies[i]};
        send_push(&alone);
        g[i] = shape(grouped[i].status, grouped[i].reply, q);
        a[i] = shape(alone.status, alone.reply, solo);
        free(alone.reply);
        free(alone_bodies[i]);
    }
    /* The two of one transactionId: which one the group applied first is
     * the order they arrived in, unknown here; alone, the first sent. */
    if (strcmp(g[0], g[1]) > 0) {
        char *t = g[0];
        g[0] = g[1];
        g[1] = t;
    }
    if (strcmp(a[0], a[1]) > 0) {
        char *t = a[0];
        a[0] = a[1];
        a[1] = t;
    }
    for (int i = 0; i < NPUSH; i++) {
        assert_string_equal(g[i], a[i]);
        free(g[i]);
        free(a[i]);
    }
    assert_int_equal(db_figure(&b, "coalescedStatementsTotal"), statements);
    assert_int_equal(grouped[3].status, 400);
    assert_non_null(strstr(grouped[3].reply, "log_bad_payload"));
    one_queued_one_duplicate(grouped[0].reply, grouped[1].reply);
    /* What the group wrote: a, b and the other queues, nothing of the refused push. */
    const char *cp[] = {q};
    assert_int_equal(pgtest_int(watch,
                                "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions lp "
                                "ON lp.id = m.partition_id JOIN queen.queues q ON q.id = lp.queue_id "
                                "WHERE q.name IN ($1, $1 || '_two', $1 || '_three') AND lp.name <> 'held'",
                                1, cp),
                     5);

    for (int i = 0; i < NPUSH; i++) {
        free(bodies[i]);
        free(grouped[i].reply);
    }
    free(held.reply);
    free(held_body);
    free(two);
    free(three);
    free(q);
    free(solo);
    PQfinish(listener);
    PQfinish(lock);
    PQfinish(watch);
    assert_int_equal(broker_stop(&b), 0);
}

/* Writers that each push to one partition one message at a time (the next
 * once the previous is answered), on one connection: their pushes share
 * groups, and every writer's messages stand in the partition in the order
 * it sent them. */
enum { WRITERS = 4, PER_WRITER = 25 };
typedef struct writer {
    const test_broker *b;
    const char *q;
    int w;
    int failures;
    pthread_t thread;
} writer;

static void *write_in_order(void *arg)
{
    writer *wr = arg;
    for (int n = 0; n < PER_WRITER; n++) {
        char *body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"ord\",\"payload\":{\"w\":%d,\"n\":%d}}]}",
                         wr->q, wr->w, n);
        http_reply r = broker_http(wr->b, "POST", "/api/v1/push", body, NULL);
        if (r.status != 201)
            wr->failures++;
        http_reply_free(&r);
        free(body);
    }
    return NULL;
}

static void a_partition_keeps_each_writers_order_across_groups(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *q = pgtest_unique("pord");
    long long calls = db_figure(&b, "coalescedCallsTotal"), retries = db_figure(&b, "coalescedRetriesTotal");
    writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.b = &b, .q = q, .w = i};
        assert_int_equal(pthread_create(&w[i].thread, NULL, write_in_order, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_int_equal(w[i].failures, 0);
    }
    /* Four writers on one connection: pushes waited and went together. */
    assert_true(db_figure(&b, "coalescedCallsTotal") > calls);
    assert_int_equal(db_figure(&b, "coalescedRetriesTotal"), retries);

    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    PGresult *r = pgtest_exec(c,
                              "SELECT (m.payload ->> 'w')::int, (m.payload ->> 'n')::int, m.msg_offset "
                              "FROM queen.log_messages m JOIN queen.log_partitions lp ON lp.id = m.partition_id "
                              "JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = 'ord' "
                              "ORDER BY m.msg_offset",
                              1, p);
    assert_int_equal(PQntuples(r), WRITERS * PER_WRITER);
    int next[WRITERS] = {0};
    for (int i = 0; i < PQntuples(r); i++) {
        int wi = atoi(PQgetvalue(r, i, 0)), n = atoi(PQgetvalue(r, i, 1));
        assert_int_equal(atoll(PQgetvalue(r, i, 2)), i + 1); /* offsets without a gap */
        assert_in_range(wi, 0, WRITERS - 1);
        if (n != next[wi])
            fail_msg("writer %d's message %d stands where its %d should", wi, n, next[wi]);
        next[wi]++;
    }
    PQclear(r);
    PQfinish(c);
    free(q);
    assert_int_equal(broker_stop(&b), 0);
}

/* Two event loops: a push stuck on a partition lock is the one push group
 * in flight in the whole broker, so the pushes that arrive meanwhile wait
 * on BOTH loops (each loop has a free connection), and when it ends the
 * loops take turns: at most one group each, every push answered. Without
 * the engine-wide turn the other loop's pushes went at once, as groups half
 * the size that then waited for each other's partition locks. */
static void pushes_on_every_loop_wait_for_the_one_group_in_flight(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=4", "QUEEN_HTTP_THREADS=2", "QUEEN_SWEEPER=0", QUOTA_QUIET,
                                      "QUEEN_PG_WRITE_GROUP_WAIT_MS=60000", NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    WAIT_UNTIL(db_figure(&b, "connections") == 4, 10000, "the loops never had their 4 connections");
    char *q = pgtest_unique("plane");
    char *held_body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"held\",\"payload\":0}]}", q);
    json_decref(http_ok(&b, "POST", "/api/v1/push", held_body, 201));
    PGconn *lock = pgtest_connect(), *watch = pgtest_connect();
    request held = {.b = &b, .body = held_body};
    hold_push_on_partition_lock(&held, lock, watch, q);

    long long statements = db_figure(&b, "coalescedStatementsTotal"), calls = db_figure(&b, "coalescedCallsTotal");
    /* Twelve connections, which the kernel's port sharing places on the
     * loops (with one loop per push group, none of them waited: they had
     * landed on the loop without the held push). */
    enum { N = 12 };
    request w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (request){.b = &b, .body = fmt("{\"items\":[{\"queue\":\"%s_free\",\"partition\":\"p%d\","
                                              "\"payload\":%d}]}",
                                              q, i, i)};
        assert_int_equal(pthread_create(&w[i].thread, NULL, send_push, &w[i]), 0);
    }
    WAIT_UNTIL(db_figure(&b, "waiting") == N, 10000, "pushes went while a push group was in flight: %lld of %d waited",
               db_figure(&b, "waiting"), N);
    assert_int_equal(db_figure(&b, "inFlight"), 1);
    PQclear(pgtest_exec(lock, "ROLLBACK", 0, NULL));
    pthread_join(held.thread, NULL);
    assert_int_equal(held.status, 201);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].thread, NULL);
        assert_int_equal(w[i].status, 201);
        free(w[i].body);
        free(w[i].reply);
    }
    /* Each loop's waiting pushes left as one statement: a shared one, or
     * (a loop that held a single push) that push alone, not counted. */
    long long shared = db_figure(&b, "coalescedStatementsTotal") - statements;
    long long grouped = db_figure(&b, "coalescedCallsTotal") - calls;
    assert_in_range(shared, 1, 2);
    if (!(grouped == N || (grouped == N - 1 && shared == 1)))
        fail_msg("%lld pushes in %lld shared statements: the waiting pushes did not leave one statement per loop",
                 grouped, shared);
    free(held.reply);
    free(held_body);
    PQfinish(lock);
    PQfinish(watch);
    free(q);
    assert_int_equal(broker_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grouped_pushes_answer_as_pushes_sent_alone),
        cmocka_unit_test(a_partition_keeps_each_writers_order_across_groups),
        cmocka_unit_test(pushes_on_every_loop_wait_for_the_one_group_in_flight),
    };
    return cmocka_run_group_tests_name("http_push_group", tests, NULL, NULL);
}
