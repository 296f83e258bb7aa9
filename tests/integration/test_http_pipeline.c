/* The event loops' database side (src/engine/pipeline.c) against a real
 * broker: with one connection and a pipeline depth above one, statements of
 * different requests travel together on that connection, each its own
 * transaction, and an error in one never touches its neighbours; a request
 * that finds every connection full waits in arrival order and answers 503
 * after QUEEN_PG_ACQUIRE_TIMEOUT_MS; a connection the server drops is
 * replaced without a broker restart; one that received a result past 1 MiB
 * is replaced once idle (libpq keeps its input buffer at that size). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "queen.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

typedef struct request {
    const test_broker *b;
    const char *method, *path, *body;
    long status;
    char *reply;
    pthread_t thread;
    atomic_bool answered;
} request;

static void *send_request(void *arg)
{
    request *r = arg;
    http_reply rep = broker_http(r->b, r->method, r->path, r->body, NULL);
    r->status = rep.status;
    r->reply = rep.body ? strdup(rep.body) : NULL;
    http_reply_free(&rep);
    atomic_store(&r->answered, true);
    return NULL;
}

static void start_request(request *r)
{
    assert_int_equal(pthread_create(&r->thread, NULL, send_request, r), 0);
}

static void finish_request(request *r)
{
    pthread_join(r->thread, NULL);
}

/* Locks (ns, key) of the default tenant in an open transaction on c, so the
 * broker's write to it waits on the row. */
static void hold_row(PGconn *c, const char *ns, const char *key)
{
    PQclear(pgtest_exec(c, "BEGIN", 0, NULL));
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"%s\",\"value\":0,\"forever\":true}]", ns, key);
    const char *params[] = {ops, QUEEN_DEFAULT_TENANT};
    PQclear(pgtest_exec(c, "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)", 2, params));
    free(ops);
}

/* Every broker here refreshes its kv quota figures once an hour, not every
 * 5 s: the refresher's read shares the loop's connections, and these tests
 * count what is in flight and waiting on them. */
#define QUOTA_QUIET "QUEEN_KV_QUOTA_REFRESH_MS=3600000"

static long long in_flight(const test_broker *b)
{
    return http_metric(b, "http", "database", "inFlight");
}

/* Backends waiting for the lock session's row lock, seen from a connection
 * of its own (pg_stat_activity is a snapshot per transaction, and the lock
 * session sits in one). */
static long long blocked_by(PGconn *watch, PGconn *lock)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(lock));
    const char *params[] = {pid};
    PGresult *r = pgtest_exec(
        watch, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))", 1, params);
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

/* The held write is in flight and blocked on the held row. The broker's
 * in-flight figure alone is not enough: the kv quota refresher's read shares
 * the loop's connections and can be the one call in flight, with the held
 * write not sent yet (it then left together with writes meant to queue
 * behind it). */
static void wait_held_write_blocked(const test_broker *b, PGconn *lock)
{
    PGconn *watch = pgtest_connect();
    WAIT_UNTIL(blocked_by(watch, lock) == 1, 10000, "the held write never blocked on the held row");
    WAIT_UNTIL(in_flight(b) == 1, 10000, "the held write is not the one call in flight");
    PQfinish(watch);
}

/* One connection, depth 8: a write blocked on a row lock, then a write that
 * fails its precondition (an SQL error inside its own transaction), a write
 * that succeeds and a read, all sent behind it on the same connection. When
 * the lock goes, each answers for itself. (The failing call has two ops so
 * that it travels as its own statement: one-op writes arriving together
 * may share one, which the next test covers.) */
static void neighbours_on_one_connection_keep_their_own_outcome(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_PG_PIPELINE_DEPTH=8",
                                      "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *ns = pgtest_unique("pipe");
    char *warm = fmt("/api/v1/kv/%s/warm", ns);
    json_decref(http_ok(&b, "PUT", warm, "{\"value\":1,\"forever\":true}", 200));
    WAIT_UNTIL(in_flight(&b) == 0, 10000, "a call stayed in flight after the warm-up");

    PGconn *lock = pgtest_connect();
    hold_row(lock, ns, "held");
    request held = {.b = &b, .method = "PUT", .path = fmt("/api/v1/kv/%s/held", ns),
                    .body = "{\"value\":1,\"forever\":true}"};
    start_request(&held);
    wait_held_write_blocked(&b, lock);

    request failing = {.b = &b, .method = "POST", .path = "/api/v1/kv",
                       .body = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"lost\",\"value\":1,\"forever\":true,"
                                   "\"expect\":7,\"required\":true},{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"warm\"}]",
                                   ns, ns)};
    request ok = {.b = &b, .method = "PUT", .path = fmt("/api/v1/kv/%s/ok", ns), .body = "{\"value\":2,\"forever\":true}"};
    request read = {.b = &b, .method = "GET", .path = warm};
    start_request(&failing);
    start_request(&ok);
    start_request(&read);
    /* All four on the one connection at once: pipelined, not queued. */
    WAIT_UNTIL(in_flight(&b) == 4, 10000, "the later statements were not pipelined behind the held one");
    PQclear(pgtest_exec(lock, "ROLLBACK", 0, NULL));
    finish_request(&held);
    finish_request(&failing);
    finish_request(&ok);
    finish_request(&read);
    assert_int_equal(held.status, 200);
    /* Its precondition error (SQLSTATE 23514, its own transaction rolled
     * back) is its verdict: 200 with the failed index. */
    assert_int_equal(failing.status, 200);
    assert_non_null(strstr(failing.reply, "ailedIndex"));
    assert_int_equal(ok.status, 200);
    assert_int_equal(read.status, 200);
    assert_non_null(strstr(read.reply, "\"found\": true"));
    /* What each wrote is what its own verdict says. */
    json_decref(http_ok(&b, "GET", ok.path, NULL, 200));
    json_decref(http_ok(&b, "GET", held.path, NULL, 200));
    char *lost = fmt("/api/v1/kv/%s/lost", ns);
    http_reply gone = broker_http(&b, "GET", lost, NULL, NULL);
    assert_int_equal(gone.status, 200);
    assert_non_null(strstr(gone.body, "\"found\": false"));
    http_reply_free(&gone);
    free(lost);
    WAIT_UNTIL(in_flight(&b) == 0, 10000, "a call stayed in flight");
    PQfinish(lock);
    free((char *)held.path);
    free((char *)failing.body);
    free((char *)ok.path);
    free(warm);
    free(held.reply);
    free(failing.reply);
    free(ok.reply);
    free(read.reply);
    free(ns);
    assert_int_equal(broker_stop(&b), 0);
}

static long long db_figure(const test_broker *b, const char *name)
{
    return http_metric(b, "http", "database", name);
}

/* Sends the n requests at once and waits until all n queue behind the held
 * write on the broker's one connection; then releases the lock and waits
 * for every answer. */
static void queue_behind_held_write(const test_broker *b, PGconn *lock, const char *ns, request *reqs, int n)
{
    hold_row(lock, ns, "held");
    request held = {.b = b, .method = "PUT", .path = fmt("/api/v1/kv/%s/held", ns), .body = "{\"value\":1,\"forever\":true}"};
    start_request(&held);
    wait_held_write_blocked(b, lock);
    for (int i = 0; i < n; i++)
        start_request(&reqs[i]);
    WAIT_UNTIL(db_figure(b, "waiting") == n, 10000, "the requests did not all queue behind the held write");
    PQclear(pgtest_exec(lock, "ROLLBACK", 0, NULL));
    finish_request(&held);
    assert_int_equal(held.status, 200);
    for (int i = 0; i < n; i++)
        finish_request(&reqs[i]);
    free((char *)held.path);
    free(held.reply);
}

/* Reads that queue behind a busy connection leave together as one shared
 * statement (sql_coalesce): each answered with its own key's value, by the
 * batch and the typed routes alike. One of them refused by SQL (a namespace
 * the C guards let through) fails the shared statement; then each runs alone
 * and gets its own verdict: the refused one 400, the others their values. */
static void queued_reads_share_a_statement_and_keep_their_own_answers(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *ns = pgtest_unique("coal");
    enum { READS = 6 };
    for (int i = 0; i < READS; i++) {
        char *path = fmt("/api/v1/kv/%s/k%d", ns, i);
        char *body = fmt("{\"value\":%d,\"forever\":true}", 100 + i);
        json_decref(http_ok(&b, "PUT", path, body, 200));
        free(path);
        free(body);
    }
    PGconn *lock = pgtest_connect();
    for (int round = 0; round < 2; round++) {
        bool with_refused = round == 1;
        long long calls = db_figure(&b, "coalescedCallsTotal"), retries = db_figure(&b, "coalescedRetriesTotal");
        request reads[READS + 1];
        int n = 0;
        for (int i = 0; i < READS; i++, n++) {
            /* even: the batch route; odd: the typed GET */
            reads[n] = (request){.b = &b, .method = i % 2 ? "GET" : "POST"};
            reads[n].path = i % 2 ? fmt("/api/v1/kv/%s/k%d", ns, i) : strdup("/api/v1/kv");
            reads[n].body = i % 2 ? NULL : fmt("[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k%d\"}]", ns, i);
        }
        if (with_refused)
            reads[n++] = (request){.b = &b, .method = "POST", .path = strdup("/api/v1/kv"),
                                   .body = strdup("[{\"op\":\"get\",\"ns\":\"Not A Namespace\",\"key\":\"k\"}]")};
        /* The one connection busy with a write waiting on a row lock. */
        queue_behind_held_write(&b, lock, ns, reads, n);
        for (int i = 0; i < n; i++) {
            if (i == READS) {
                assert_int_equal(reads[i].status, 400);
                assert_non_null(strstr(reads[i].reply, "kv_bad_namespace"));
                continue;
            }
            assert_int_equal(reads[i].status, 200);
            char *want = fmt("\"value\": %d", 100 + i);
            if (strstr(reads[i].reply, want) == NULL)
                fail_msg("read %d answered %s, not its own key's value", i, reads[i].reply);
            free(want);
        }
        /* Outcomes first (above: each read its own value, the refused one
         * its 400); the figures then say only that reads shared statements,
         * and that the refused one's shared statement ran again member by
         * member (it and at least one neighbour) while without it none
         * did. How many shared is load's business, not the contract's. */
        long long shared = db_figure(&b, "coalescedCallsTotal") - calls;
        long long again = db_figure(&b, "coalescedRetriesTotal") - retries;
        if (shared < 2 || shared > n)
            fail_msg("%lld of %d queued reads answered by a shared statement", shared, n);
        if (with_refused ? again < 2 : again != 0)
            fail_msg("%lld reads ran again alone (%s the refused one)", again, with_refused ? "with" : "without");
        for (int i = 0; i < n; i++) {
            free((char *)reads[i].path);
            free((char *)reads[i].body);
            free(reads[i].reply);
        }
    }
    PQfinish(lock);
    free(ns);
    assert_int_equal(broker_stop(&b), 0);
}

static request kv_post(const test_broker *b, const char *ops_fmt, const char *ns)
{
    return (request){.b = b, .method = "POST", .path = "/api/v1/kv", .body = fmt(ops_fmt, ns)};
}

/* One-op writes that queue behind a busy connection commit as one group
 * (sql/kv_group.sql): one shared statement, and each request still gets
 * the answer its own call would have had (two incr of one key see each
 * other, a putIfAbsent on a live key is not applied, a delete of an absent
 * key says absent). A member whose required op fails fails the group, so
 * nothing of it commits; each then runs alone: that one alone is refused,
 * the others apply once (the counter moves by exactly their deltas). */
static void queued_writes_commit_as_one_group_and_keep_their_own_answers(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *ns = pgtest_unique("wgrp");
    char *path = fmt("/api/v1/kv/%s/n", ns);
    json_decref(http_ok(&b, "PUT", path, "{\"value\":5,\"forever\":true}", 200));
    free(path);
    path = fmt("/api/v1/kv/%s/live", ns);
    json_decref(http_ok(&b, "PUT", path, "{\"value\":\"first\",\"forever\":true}", 200));
    free(path);
    PGconn *lock = pgtest_connect();
    for (int round = 0; round < 2; round++) {
        bool with_refused = round == 1;
        long long statements = db_figure(&b, "coalescedStatementsTotal");
        long long calls = db_figure(&b, "coalescedCallsTotal"), retries = db_figure(&b, "coalescedRetriesTotal");
        request w[6];
        int n = 0;
        w[n++] = kv_post(&b, "[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"n\",\"delta\":1,\"forever\":true}]", ns);
        w[n++] = kv_post(&b, "[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"n\",\"delta\":10,\"forever\":true}]", ns);
        w[n++] = kv_post(&b, "[{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"live\",\"value\":2,\"forever\":true}]", ns);
        w[n++] = kv_post(&b, "[{\"op\":\"delete\",\"ns\":\"%s\",\"key\":\"absent\"}]", ns);
        w[n++] = kv_post(&b, "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"new\",\"value\":3,\"forever\":true}]", ns);
        if (with_refused)
            w[n++] = kv_post(&b, "[{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"live\",\"value\":4,"
                                 "\"forever\":true,\"required\":true}]", ns);
        queue_behind_held_write(&b, lock, ns, w, n);
        long long base = 5 + round * 11;
        for (int i = 0; i < n; i++)
            assert_int_equal(w[i].status, 200);
        /* The two incr answer base+1 and base+11 or base+10 and base+11: either order, never the same value. */
        char *one = fmt("\"value\": %lld", base + 1), *ten = fmt("\"value\": %lld", base + 10),
             *both = fmt("\"value\": %lld", base + 11);
        if (!((strstr(w[0].reply, one) && strstr(w[1].reply, both)) ||
              (strstr(w[1].reply, ten) && strstr(w[0].reply, both))))
            fail_msg("the incr answered %s and %s from %lld", w[0].reply, w[1].reply, base);
        free(one);
        free(ten);
        free(both);
        assert_non_null(strstr(w[2].reply, "\"reason\": \"exists\""));
        assert_non_null(strstr(w[2].reply, "\"value\": \"first\""));
        assert_non_null(strstr(w[3].reply, "\"reason\": \"absent\""));
        assert_non_null(strstr(w[4].reply, "\"applied\": true"));
        /* The figures say only that the writes shared statements (fewer
         * statements than calls) and that the refused member's group ran
         * again member by member (it and at least one neighbour) while
         * without it none did; the exact split is load's business. */
        long long shared = db_figure(&b, "coalescedStatementsTotal") - statements;
        long long together = db_figure(&b, "coalescedCallsTotal") - calls;
        long long again = db_figure(&b, "coalescedRetriesTotal") - retries;
        if (with_refused) {
            assert_non_null(strstr(w[5].reply, "ailedIndex"));
            if (again < 2)
                fail_msg("%lld writes ran again alone after the refused one failed their group", again);
        } else {
            if (shared < 1 || together < 2 * shared || together > n)
                fail_msg("%lld writes in %lld shared statements, of %d queued together", together, shared, n);
            assert_int_equal(again, 0);
        }
        for (int i = 0; i < n; i++) {
            free((char *)w[i].body);
            free(w[i].reply);
        }
    }
    /* Each round moved the counter by 11, once. */
    path = fmt("/api/v1/kv/%s/n", ns);
    http_reply r = broker_http(&b, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, "\"value\": 27") == NULL)
        fail_msg("the counter is %s, not 5 + 2 x 11", r.body);
    http_reply_free(&r);
    free(path);
    PQfinish(lock);
    free(ns);
    assert_int_equal(broker_stop(&b), 0);
}

/* A member that waits on a row lock another transaction holds fails its
 * group after the group's lock_timeout; the members then run alone, so the
 * writes that queued beside it are answered while it still waits. Two
 * connections, both busy with a held write; three writes queue behind
 * them, one of them to a key a second session holds. */
static void a_member_stuck_on_a_lock_does_not_hold_its_group(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=2", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    char *ns = pgtest_unique("wstk");
    PGconn *busy = pgtest_connect(), *stuck = pgtest_connect();
    hold_row(busy, ns, "h1");
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"h2\",\"value\":0,\"forever\":true}]", ns);
    const char *params[] = {ops, QUEEN_DEFAULT_TENANT};
    PQclear(pgtest_exec(busy, "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)", 2, params));
    free(ops);
    hold_row(stuck, ns, "x");
    request held[2] = {
        {.b = &b, .method = "PUT", .path = fmt("/api/v1/kv/%s/h1", ns), .body = "{\"value\":1,\"forever\":true}"},
        {.b = &b, .method = "PUT", .path = fmt("/api/v1/kv/%s/h2", ns), .body = "{\"value\":1,\"forever\":true}"},
    };
    /* One after the other, so that each goes alone on its own connection:
     * blocked on busy's row in PostgreSQL, not only counted in flight (the
     * quota refresher's read can be the call in flight: see
     * wait_held_write_blocked). */
    PGconn *watch = pgtest_connect();
    for (int i = 0; i < 2; i++) {
        start_request(&held[i]);
        WAIT_UNTIL(blocked_by(watch, busy) == i + 1, 10000, "held write %d never blocked on its row", i);
    }
    PQfinish(watch);
    request w[3] = {
        kv_post(&b, "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"x\",\"value\":1,\"forever\":true}]", ns),
        kv_post(&b, "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"a\",\"value\":1,\"forever\":true}]", ns),
        kv_post(&b, "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"b\",\"value\":1,\"forever\":true}]", ns),
    };
    long long retries = db_figure(&b, "coalescedRetriesTotal");
    for (int i = 0; i < 3; i++)
        start_request(&w[i]);
    WAIT_UNTIL(db_figure(&b, "waiting") >= 3, 10000, "the three writes did not queue behind the held ones");
    PQclear(pgtest_exec(busy, "ROLLBACK", 0, NULL));
    for (int i = 0; i < 2; i++) {
        finish_request(&held[i]);
        assert_int_equal(held[i].status, 200);
    }
    /* The group met the held key, gave up, and its members went alone: a
     * and b answer while x still waits on the second session's lock (not
     * only when the statement timeout, 30 s, ends the group). */
    WAIT_UNTIL(atomic_load(&w[1].answered) && atomic_load(&w[2].answered), 10000,
               "the writes grouped with a stuck one waited with it");
    finish_request(&w[1]);
    finish_request(&w[2]);
    assert_int_equal(w[1].status, 200);
    assert_int_equal(w[2].status, 200);
    /* Grouped with the stuck one and then run alone: how the three were
     * split into groups depends on when each connection came free (two or
     * three in the group, and a stuck member's own retry may fail a second
     * group), so the count is a lower bound, not an exact figure. */
    assert_true(db_figure(&b, "coalescedRetriesTotal") - retries >= 2);
    WAIT_UNTIL(in_flight(&b) == 1, 10000, "more than the stuck write stayed in flight");
    PQclear(pgtest_exec(stuck, "ROLLBACK", 0, NULL));
    finish_request(&w[0]);
    assert_int_equal(w[0].status, 200);
    for (int i = 0; i < 3; i++) {
        free((char *)w[i].body);
        free(w[i].reply);
    }
    for (int i = 0; i < 2; i++) {
        free((char *)held[i].path);
        free(held[i].reply);
    }
    PQfinish(busy);
    PQfinish(stuck);
    free(ns);
    assert_int_equal(broker_stop(&b), 0);
}

/* Starts n one-op puts to keys w0..w(n-1) of ns. */
static void start_puts(const test_broker *b, const char *ns, request *w, int n)
{
    for (int i = 0; i < n; i++) {
        w[i] = (request){.b = b, .method = "PUT", .path = fmt("/api/v1/kv/%s/w%d", ns, i),
                         .body = "{\"value\":1,\"forever\":true}"};
        start_request(&w[i]);
    }
}

static bool all_answered(request *w, int n)
{
    for (int i = 0; i < n; i++)
        if (!atomic_load(&w[i].answered))
            return false;
    return true;
}

static void finish_puts(request *w, int n)
{
    for (int i = 0; i < n; i++) {
        finish_request(&w[i]);
        assert_int_equal(w[i].status, 200);
        free((char *)w[i].path);
        free(w[i].reply);
    }
}

/* A one-op write on a row another session holds: in flight on one of the
 * loop's two connections until stuck_write_end releases the row. */
typedef struct stuck_write {
    PGconn *lock;
    char *ns;
    request held;
} stuck_write;

static void stuck_write_begin(stuck_write *sw, const test_broker *b, const char *prefix)
{
    WAIT_UNTIL(db_figure(b, "connections") == 2, 10000, "the loop never had 2 connections");
    sw->ns = pgtest_unique(prefix);
    sw->lock = pgtest_connect();
    hold_row(sw->lock, sw->ns, "held");
    sw->held = (request){.b = b, .method = "PUT", .path = fmt("/api/v1/kv/%s/held", sw->ns),
                         .body = "{\"value\":1,\"forever\":true}"};
    start_request(&sw->held);
    wait_held_write_blocked(b, sw->lock);
}

static void stuck_write_end(stuck_write *sw)
{
    PQclear(pgtest_exec(sw->lock, "ROLLBACK", 0, NULL));
    finish_request(&sw->held);
    assert_int_equal(sw->held.status, 200);
    PQfinish(sw->lock);
    free((char *)sw->held.path);
    free(sw->held.reply);
    free(sw->ns);
}

/* A one-op write that arrives while a write group of its loop is in flight
 * waits for that group even with a connection free, and what waited goes
 * as one group when it ends (QUEEN_PG_WRITE_GROUP_WAIT_MS, here longer than
 * the test). Two connections: one carries the stuck write, the other stays
 * free while five writes wait. */
static void writes_wait_for_the_group_in_flight_not_for_a_connection(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=2", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET,
                                      "QUEEN_PG_WRITE_GROUP_WAIT_MS=60000", NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    stuck_write sw;
    stuck_write_begin(&sw, &b, "wwait");
    enum { N = 5 };
    request w[N];
    long long statements = db_figure(&b, "coalescedStatementsTotal"), calls = db_figure(&b, "coalescedCallsTotal");
    start_puts(&b, sw.ns, w, N);
    WAIT_UNTIL(db_figure(&b, "waiting") == N, 10000, "the writes did not wait for the group in flight");
    assert_int_equal(in_flight(&b), 1); /* the second connection stayed free */
    stuck_write_end(&sw);
    finish_puts(w, N);
    assert_int_equal(db_figure(&b, "coalescedStatementsTotal") - statements, 1);
    assert_int_equal(db_figure(&b, "coalescedCallsTotal") - calls, N);
    assert_int_equal(broker_stop(&b), 0);
}

/* The wait is bounded: a write stuck on a row lock holds the writes behind
 * it back for QUEEN_PG_WRITE_GROUP_WAIT_MS, then they go on the free
 * connection and are answered while it still waits (not when the acquire
 * timeout ends them with 503). */
static void a_stuck_write_holds_the_others_back_only_for_the_wait(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=2", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET,
                                      "QUEEN_PG_WRITE_GROUP_WAIT_MS=50", "QUEEN_PG_ACQUIRE_TIMEOUT_MS=20000", NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    stuck_write sw;
    stuck_write_begin(&sw, &b, "wbnd");
    enum { N = 5 };
    request w[N];
    start_puts(&b, sw.ns, w, N);
    WAIT_UNTIL(all_answered(w, N), 10000, "the writes behind a stuck one waited for it");
    assert_false(atomic_load(&sw.held.answered));
    finish_puts(w, N);
    stuck_write_end(&sw);
    assert_int_equal(broker_stop(&b), 0);
}

/* Every backend of the broker's application name terminated: the loops
 * replace their connections and serve again, no restart. */
static void dropped_connections_come_back(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=2", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    WAIT_UNTIL(http_metric(&b, "http", "database", "connections") == 2, 10000, "the loop never had 2 connections");
    long long before = http_metric(&b, "http", "database", "reconnectsTotal");
    PGconn *c = pgtest_connect();
    PQclear(pgtest_exec(c,
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'queen' "
                        "AND pid <> pg_backend_pid() AND query NOT ILIKE '%LISTEN%'",
                        0, NULL));
    PQfinish(c);
    /* Served again once a connection is back (a request that met the
     * dropped one may have answered 503: its outcome was unknown). */
    http_reply r = {0};
    WAIT_UNTIL((http_reply_free(&r), r = broker_http(&b, "GET", "/api/v1/kv/ns/absent", NULL, NULL),
                r.status == 200),
               10000, "the broker never served again after its connections were dropped: %ld", r.status);
    http_reply_free(&r);
    assert_true(http_metric(&b, "http", "database", "reconnectsTotal") > before);
    assert_int_equal(broker_stop(&b), 0);
}

/* A listing past 1 MiB: the one connection that carried it is closed and
 * opened again once idle, so libpq's input buffer (grown to that answer's
 * size, never shrunk) goes back; it is not counted as a failure, and the
 * next request is served. A small answer replaces nothing. */
static void a_connection_that_received_a_large_result_is_replaced(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", QUOTA_QUIET, NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    WAIT_UNTIL(http_metric(&b, "http", "database", "connections") == 1, 10000, "the loop never had its connection");
    enum { MESSAGES = 6, PAYLOAD = 256 * 1024 };
    char *payload = malloc(PAYLOAD + 1);
    assert_non_null(payload);
    memset(payload, 'x', PAYLOAD);
    payload[PAYLOAD] = '\0';
    for (int i = 0; i < MESSAGES; i++) {
        json_t *body = json_pack("{s:[{s:s, s:s}]}", "items", "queue", "pipe_large", "payload", payload);
        char *text = json_dumps(body, JSON_COMPACT);
        http_reply r = broker_http(&b, "POST", "/api/v1/push", text, NULL);
        assert_int_equal(r.status, 201);
        http_reply_free(&r);
        free(text);
        json_decref(body);
    }
    free(payload);
    long long reconnects = http_metric(&b, "http", "database", "reconnectsTotal");
    http_reply r = broker_http(&b, "GET", "/api/v1/messages?queue=pipe_large&limit=100", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_true(r.body != NULL && strlen(r.body) > (size_t)MESSAGES * PAYLOAD);
    http_reply_free(&r);
    WAIT_UNTIL(http_metric(&b, "http", "database", "recycledTotal") == 1, 10000,
               "the connection that received a %d-byte result was not replaced", MESSAGES * PAYLOAD);
    r = broker_http(&b, "GET", "/api/v1/kv/ns/absent", NULL, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(http_metric(&b, "http", "database", "recycledTotal"), 1);
    assert_int_equal(http_metric(&b, "http", "database", "reconnectsTotal"), reconnects);
    WAIT_UNTIL(http_metric(&b, "http", "database", "connections") == 1, 10000, "the replacement never connected");
    assert_int_equal(broker_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(neighbours_on_one_connection_keep_their_own_outcome),
        cmocka_unit_test(dropped_connections_come_back),
        cmocka_unit_test(a_connection_that_received_a_large_result_is_replaced),
        cmocka_unit_test(queued_reads_share_a_statement_and_keep_their_own_answers),
        cmocka_unit_test(queued_writes_commit_as_one_group_and_keep_their_own_answers),
        cmocka_unit_test(a_member_stuck_on_a_lock_does_not_hold_its_group),
        cmocka_unit_test(writes_wait_for_the_group_in_flight_not_for_a_connection),
        cmocka_unit_test(a_stuck_write_holds_the_others_back_only_for_the_wait),
    };
    return cmocka_run_group_tests_name("http_pipeline", tests, NULL, NULL);
}
