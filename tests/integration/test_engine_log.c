/* libqueen messages through the library itself (no HTTP): push/pop/ack,
 * the long-poll pop woken by a push from another thread and timing out when
 * nothing comes, lease extend, configure (labels, merge, replace) / queues /
 * delete,
 * queen_wait_for_push (woken, timeout, other tenant), and the notifier
 * surviving the loss of its LISTEN connection. Queue names and tenants are
 * unique per run.
 *
 * A waiter is also fired by its re-check, NOTIFY_RECHECK_MS after it was
 * registered, push or no push: a wake-up test only shows that NOTIFY works
 * when the wake-up lands before that re-check could have fired, and when the
 * notifier counted the notification. And a push through the same engine
 * wakes that engine's waiters itself, before its NOTIFY arrives: the NOTIFY
 * tests push through a second engine (as another broker would). */
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
#include <unistd.h>

#include "engine_fixture.h"
#include "notify.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

static void wait_listening(queen *q)
{
    WAIT_UNTIL(engine_stat(q, "notifier", "connected"), 5000, "the notifier never connected");
}

static void push_one(queen *q, const char *tenant, const char *queue, const char *txid)
{
    json_t *items = json_pack("[{s:s, s:{s:s}, s:s}]", "queue", queue, "payload", "txid", txid, "transactionId", txid);
    char *text = json_dumps(items, JSON_COMPACT);
    json_decref(items);
    char *out;
    queen_error e = {0};
    must(queen_push(q, tenant, text, &out, &e), &e);
    json_t *r = take_json(out);
    assert_string_equal(jstr(json_array_get(r, 0), "status"), "queued");
    json_decref(r);
    free(text);
}

/* The same message pushed by a transaction bundle (the wire), whose NOTIFY
 * is deferred past its commit like a push's. */
static void push_one_in_transaction(queen *q, const char *tenant, const char *queue, const char *txid)
{
    json_t *bundle = json_pack("{s:[{s:s, s:[{s:s, s:{s:s}, s:s}]}]}", "operations", "type", "push", "items", "queue",
                               queue, "payload", "txid", txid, "transactionId", txid);
    char *text = json_dumps(bundle, JSON_COMPACT);
    json_decref(bundle);
    char *out;
    queen_error e = {0};
    must(queen_transaction(q, tenant, text, &out, &e), &e);
    json_t *r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "success")));
    json_decref(r);
    free(text);
}

static void push_pop_ack(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-basic-");
    queen_error e = {0};
    char *out;
    must(queen_configure(q, tenant, queue, "{\"leaseTime\": 30, \"retryLimit\": 2}", &out, &e), &e);
    json_t *r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "configured")));
    json_decref(r);

    push_one(q, tenant, queue, "t1");
    push_one(q, tenant, queue, "t2");
    /* A duplicate outside the wire is a per-item status, not an error. */
    must(queen_push(q, tenant, "[{\"queue\":\"x\",\"payload\":1,\"transactionId\":\"d\"},"
                               "{\"queue\":\"x\",\"payload\":2,\"transactionId\":\"d\"}]",
                    &out, &e),
         &e);
    r = take_json(out);
    assert_string_equal(jstr(json_array_get(r, 1), "status"), "duplicate");
    json_decref(r);

    queen_pop_options o = {.queue = queue, .batch = 10};
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    r = take_json(out);
    json_t *msgs = json_object_get(r, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(jstr(json_array_get(msgs, 0), "transactionId"), "t1");
    char ack[512];
    snprintf(ack, sizeof ack, "[{\"transactionId\":\"t2\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}]",
             jstr(r, "partitionId"), jstr(r, "leaseId"));
    json_decref(r);

    /* Nothing more for the group while the lease is held. */
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_null(out);

    must(queen_ack(q, tenant, ack, NULL, &out, &e), &e);
    r = take_json(out);
    assert_true(json_is_true(json_object_get(json_array_get(r, 0), "success")));
    assert_true(json_is_true(json_object_get(json_array_get(r, 0), "leaseReleased")));
    json_decref(r);
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_null(out);

    must(queen_queues(q, tenant, &out, &e), &e);
    r = take_json(out);
    assert_int_equal(json_array_size(json_object_get(r, "queues")), 2);
    json_decref(r);
    must(queen_queue_delete(q, tenant, queue, &out, &e), &e);
    r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "existed")));
    json_decref(r);

    /* Bad input is a category, not a crash. */
    assert_int_equal(queen_pop(q, tenant, &(queen_pop_options){.queue = queue, .batch = -1}, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(e.reason, "log_bad_batch");
    assert_int_equal(queen_push(q, tenant, "[{\"payload\":1}]", &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    free(queue);
    queen_close(q);
}

/* queen_configure_ex: the labels, merge and replace, storedOnly, and the
 * refusals as categories (the HTTP route is this call; the client bodies are
 * tests/compat/test_compat_configure.c). */
static void configure_labels_and_mode(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    queen_error e = {0};
    char *out;
    must(queen_configure_ex(q, tenant, "orders", "{\"priority\": 4, \"ttl\": 60}", "billing", "invoice", NULL, &out,
                            &e),
         &e);
    json_t *r = take_json(out);
    assert_string_equal(jstr(r, "namespace"), "billing");
    assert_string_equal(jstr(r, "task"), "invoice");
    assert_true(json_array_size(json_object_get(r, "storedOnly")) > 0);
    json_decref(r);

    /* queen_configure: no labels given, so they stay; options merge. */
    must(queen_configure(q, tenant, "orders", "{\"retryLimit\": 1}", &out, &e), &e);
    r = take_json(out);
    assert_string_equal(jstr(r, "task"), "invoice");
    assert_int_equal(jint(json_object_get(r, "options"), "priority"), 4);
    json_decref(r);
    must(queen_queues(q, tenant, &out, &e), &e);
    r = take_json(out);
    json_t *el = json_array_get(json_object_get(r, "queues"), 0);
    assert_string_equal(jstr(el, "namespace"), "billing");
    assert_string_equal(jstr(el, "task"), "invoice");
    json_decref(r);

    must(queen_configure_ex(q, tenant, "orders", NULL, NULL, NULL, "replace", &out, &e), &e);
    r = take_json(out);
    assert_int_equal(jint(json_object_get(r, "options"), "priority"), 0);
    assert_int_equal(jint(json_object_get(r, "options"), "ttl"), 3600);
    assert_true(json_is_null(json_object_get(r, "namespace")));
    json_decref(r);

    assert_int_equal(queen_configure(q, tenant, "orders", "{\"prority\": 1}", &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(e.reason, "log_bad_options");
    assert_non_null(strstr(e.detail, "prority"));
    assert_int_equal(queen_configure_ex(q, tenant, "orders", NULL, NULL, NULL, "upsert", &out, &e), -1);
    assert_string_equal(e.reason, "log_bad_request");
    queen_close(q);
}

/* A configure holds the queue's row lock until it commits; a push creating
 * a partition of that queue (its foreign-key check takes FOR KEY SHARE on
 * the row) must not wait for it: configure locks FOR NO KEY UPDATE. */
static void configure_does_not_hold_up_a_push(void **state)
{
    (void)state;
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-lock-");
    PGconn *a = pgtest_connect(), *b = pgtest_connect();
    char *items = fmt("[{\"queue\":\"%s\",\"partition\":\"p1\",\"payload\":1}]", queue);
    const char *p[] = {tenant, queue}, *p1[] = {tenant, items};
    PQclear(pgtest_exec(b, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)", 2, p1));

    PQclear(pgtest_exec(a, "BEGIN", 0, NULL));
    PQclear(pgtest_exec(a, "SELECT queen.log_configure_v1($1::uuid, $2, '{\"priority\":1}')", 2, p));
    PQclear(pgtest_exec(b, "SET lock_timeout = '3s'", 0, NULL));
    char *fresh = fmt("[{\"queue\":\"%s\",\"partition\":\"p2\",\"payload\":2}]", queue);
    const char *p2[] = {tenant, fresh};
    long long t0 = now_ms();
    PGresult *r = pgtest_try(b, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)", 2, p2);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("a push to a new partition waited for the configure: %s", PQresultErrorMessage(r));
    assert_true(now_ms() - t0 < 2000);
    PQclear(r);
    PQclear(pgtest_exec(a, "ROLLBACK", 0, NULL));
    PQfinish(a);
    PQfinish(b);
    free(fresh);
    free(items);
    free(queue);
}

typedef struct pop_arg {
    queen *q;
    const char *tenant, *queue;
    int timeout_ms;
    long long took_ms;
    int rc;
    char *body;
} pop_arg;

static void *waiting_pop(void *p)
{
    pop_arg *a = p;
    queen_pop_options o = {.queue = a->queue, .wait = true, .timeout_ms = a->timeout_ms};
    queen_error e = {0};
    long long t0 = now_ms();
    a->rc = queen_pop(a->q, a->tenant, &o, &a->body, &e);
    a->took_ms = now_ms() - t0;
    return NULL;
}

/* Starts a waiting pop on a thread and returns once its first attempt found
 * nothing: from then on only a wake-up can deliver a push to it (the waiter
 * is registered before that attempt). */
static void start_waiting_pop(pop_arg *a, pthread_t *th)
{
    long long empty = engine_stat(a->q, "pops", "empty");
    pthread_create(th, NULL, waiting_pop, a);
    WAIT_UNTIL(engine_stat(a->q, "pops", "empty") > empty, 5000, "the waiting pop never made its first attempt");
}

/* A pop that registered its waiter after t0 and returned took_ms later was
 * woken by the NOTIFY if the notifier counts a push wake-up for it
 * (push_woken, the change of notifier.pushWakes; -1 where the waiter is not
 * a pop's, which that figure does not count), else only if it returned
 * before its first re-check: a machine under load can take longer than that
 * for a wake-up the NOTIFY did deliver. */
static void expect_notify_wake(const char *what, long long took_ms, long long push_woken, long long notifies_before,
                               long long notifies_after)
{
    if (push_woken < 1 && took_ms >= NOTIFY_RECHECK_MS)
        fail_msg("%s: woken after %lld ms, not before the %d ms re-check: the NOTIFY did not wake it", what,
                 took_ms, NOTIFY_RECHECK_MS);
    if (notifies_after <= notifies_before)
        fail_msg("%s: the notifier received no notification (%lld before, %lld after)", what, notifies_before,
                 notifies_after);
}

static void long_poll_is_woken_by_a_push(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-poll-");
    /* The queue must exist for the pop to wait on it meaningfully. */
    queen_error e = {0};
    char *out;
    must(queen_configure(q, tenant, queue, "{}", &out, &e), &e);
    free(out);

    queen *pusher = engine_open(2); /* another broker: only the NOTIFY tells q */
    wait_listening(q);
    long long worst = 0;
    for (int round = 0; round < 3; round++) {
        pop_arg a = {.q = q, .tenant = tenant, .queue = queue, .timeout_ms = 10000};
        pthread_t th;
        start_waiting_pop(&a, &th);
        long long notifies = engine_stat(q, "notifier", "notifies");
        long long push_wakes = engine_stat(q, "notifier", "pushWakes");
        long long pushed_at = now_ms();
        char txid[16];
        snprintf(txid, sizeof txid, "r%d", round);
        if (round == 2)
            push_one_in_transaction(pusher, tenant, queue, txid);
        else
            push_one(pusher, tenant, queue, txid);
        pthread_join(th, NULL);
        assert_int_equal(a.rc, 0);
        assert_non_null(a.body);
        json_t *r = take_json(a.body);
        assert_string_equal(jstr(json_array_get(json_object_get(r, "messages"), 0), "transactionId"), txid);
        char ack[512];
        snprintf(ack, sizeof ack, "[{\"transactionId\":\"%s\",\"partitionId\":\"%s\"}]", txid,
                 jstr(r, "partitionId"));
        json_decref(r);
        must(queen_ack(q, tenant, ack, NULL, &out, &e), &e);
        free(out);
        long long after_push = now_ms() - pushed_at;
        if (after_push > worst)
            worst = after_push;
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        expect_notify_wake(what, a.took_ms, engine_stat(q, "notifier", "pushWakes") - push_wakes, notifies,
                           engine_stat(q, "notifier", "notifies"));
    }
    print_message("# long-poll wake-up: worst %lld ms from push to popped\n", worst);
    assert_int_equal(engine_stat(q, "notifier", "localWakes"), 0);
    queen_close(pusher);

    /* Nothing comes: the pop returns empty after its timeout, not before. */
    pop_arg a = {.q = q, .tenant = tenant, .queue = queue, .timeout_ms = 600};
    waiting_pop(&a);
    assert_int_equal(a.rc, 0);
    assert_null(a.body);
    assert_true(a.took_ms >= 590 && a.took_ms < 2500);
    free(queue);
    queen_close(q);
}

/* Waits for the next notification on a LISTENing connection. */
static PGnotify *next_notification(PGconn *listener, int within_ms)
{
    long long until = now_ms() + within_ms;
    for (;;) {
        PGnotify *n = PQnotifies(listener);
        if (n != NULL)
            return n;
        long long left = until - now_ms();
        if (left <= 0)
            return NULL;
        struct pollfd pfd = {.fd = PQsocket(listener), .events = POLLIN};
        poll(&pfd, 1, (int)left);
        PQconsumeInput(listener);
    }
}

/* A transaction that set queen.notify = 'after_commit' (what the engine's
 * push and transaction statements do) sends no NOTIFY at its commit: holding
 * PostgreSQL's notify lock through the commit flush serialised every push
 * (sql/log_push.sql). Notifications arrive in commit order, so if the deferred push had
 * notified, its notification would come before the plain push's. */
static void a_deferred_push_sends_no_notify_at_commit(void **state)
{
    (void)state;
    queen_close(engine_open(1)); /* the schema, whichever test runs first */
    char tenant[37];
    wire_uuid4(tenant);
    char *deferred = pgtest_unique("q-deferred-");
    char *plain = pgtest_unique("q-plain-");
    PGconn *listener = PQconnectdb(pgtest_url());
    PGconn *pusher = PQconnectdb(pgtest_url());
    assert_int_equal(PQstatus(listener), CONNECTION_OK);
    assert_int_equal(PQstatus(pusher), CONNECTION_OK);
    PQclear(PQexec(listener, "LISTEN queen_push"));
    char items[256];
    snprintf(items, sizeof items, "[{\"queue\":\"%s\",\"payload\":1}]", deferred);
    const char *p1[] = {tenant, items};
    PGresult *r = PQexecParams(pusher,
                               "WITH s AS MATERIALIZED (SELECT set_config('queen.notify', 'after_commit', true)) "
                               "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text FROM s",
                               2, NULL, p1, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    char *deferred_result = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(items, sizeof items, "[{\"queue\":\"%s\",\"payload\":2}]", plain);
    r = PQexecParams(pusher, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text", 2, NULL, p1, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    char want[128];
    snprintf(want, sizeof want, "%s:%s", tenant, plain);
    PGnotify *n = next_notification(listener, 5000);
    assert_non_null(n);
    assert_string_equal(n->relname, "queen_push");
    assert_string_equal(n->extra, want); /* not the deferred push's */
    PQfreemem(n);

    /* Its deferred half sends exactly the one notification it owes, with
     * the number of messages it queued (one). */
    const char *p2[] = {tenant, deferred_result};
    assert_int_equal(pgtest_int(pusher, "SELECT queen.log_notify_pushed_v1($1::uuid, $2::jsonb)", 2, p2), 1);
    snprintf(want, sizeof want, "%s:%s\x1f" "1", tenant, deferred);
    n = next_notification(listener, 5000);
    assert_non_null(n);
    assert_string_equal(n->extra, want);
    PQfreemem(n);

    /* Both queues exist now: pushes to one existing partition take the
     * push's one-pair path, which keeps both rules. */
    snprintf(items, sizeof items, "[{\"queue\":\"%s\",\"payload\":3}]", deferred);
    r = PQexecParams(pusher,
                     "WITH s AS MATERIALIZED (SELECT set_config('queen.notify', 'after_commit', true)) "
                     "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text FROM s",
                     2, NULL, p1, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    snprintf(items, sizeof items, "[{\"queue\":\"%s\",\"payload\":4}]", plain);
    r = PQexecParams(pusher, "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text", 2, NULL, p1, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    snprintf(want, sizeof want, "%s:%s", tenant, plain);
    n = next_notification(listener, 5000);
    assert_non_null(n);
    assert_string_equal(n->extra, want);
    PQfreemem(n);
    free(deferred_result);
    PQfinish(listener);
    PQfinish(pusher);
    free(deferred);
    free(plain);
}

/* The deferred halves of many pushes leave in few statements: the notifier
 * sends everything handed to it since its last statement as one, on its own
 * connection, and PostgreSQL delivers a notification repeated within one
 * transaction once. 2,000 announcements for one queue, handed over far
 * faster than a round trip: every one is counted, far fewer statements
 * carry them, the queue's notification arrives, and no more of them than
 * statements. Shut down, the notifier refuses more. */
static void announcements_leave_in_batches(void **state)
{
    (void)state;
    queen_close(engine_open(1)); /* the schema, whichever test runs first */
    enum { ANNOUNCEMENTS = 2000 };
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-batch-");
    PGconn *listener = PQconnectdb(pgtest_url());
    assert_int_equal(PQstatus(listener), CONNECTION_OK);
    PQclear(PQexec(listener, "LISTEN queen_push"));
    char err[256];
    queen_notifier *n = notifier_start(pgtest_url(), err, sizeof err);
    assert_non_null(n);
    WAIT_UNTIL(notifier_connected(n), 5000, "the notifier never connected");
    char results[512];
    snprintf(results, sizeof results, "[{\"queueName\":\"%s\",\"status\":\"queued\"}]", queue);
    for (int i = 0; i < ANNOUNCEMENTS; i++)
        assert_true(notifier_announce(n, tenant, results));
    assert_int_equal(notifier_announced(n), ANNOUNCEMENTS);

    char want[128];
    snprintf(want, sizeof want, "%s:%s\x1f", tenant, queue);
    PGnotify *first = next_notification(listener, 5000);
    assert_non_null(first);
    /* "<tenant>:<queue>" chr(31) and the messages its batch queued */
    assert_int_equal(strncmp(first->extra, want, strlen(want)), 0);
    assert_true(atoi(first->extra + strlen(want)) >= 1);
    PQfreemem(first);
    /* The notifier's own connection listens too: it has heard one
     * notification per statement once every batch went out. Then the
     * listener takes what is left; the statement count, read after it (it
     * only grows), bounds what was heard. */
    WAIT_UNTIL(notifier_notifies(n) >= notifier_announce_statements(n), 10000, "a batch never arrived");
    int heard = 1;
    PGnotify *more;
    while ((more = next_notification(listener, 500)) != NULL) {
        heard++;
        PQfreemem(more);
    }
    unsigned long statements = notifier_announce_statements(n);
    if (statements < 1 || statements > ANNOUNCEMENTS / 10)
        fail_msg("%lu statements carried %d announcements", statements, ANNOUNCEMENTS);
    if ((unsigned long)heard > statements)
        fail_msg("%d notifications from %lu statements: repeats were not folded", heard, statements);
    print_message("# %d announcements, %lu statements, %d notifications\n", ANNOUNCEMENTS, statements, heard);

    notifier_shutdown(n);
    assert_false(notifier_announce(n, tenant, results));
    assert_int_equal(notifier_announce_dropped(n), 1);
    notifier_free(n);
    PQfinish(listener);
    free(queue);
}

static void lease_extend(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-lease-");
    push_one(q, tenant, queue, "l1");
    queen_error e = {0};
    char *out;
    must(queen_pop(q, tenant, &(queen_pop_options){.queue = queue, .lease_seconds = 5}, &out, &e), &e);
    json_t *r = take_json(out);
    char lease[64];
    snprintf(lease, sizeof lease, "%s", jstr(r, "leaseId"));
    json_decref(r);
    must(queen_lease_extend(q, tenant, lease, 120, &out, &e), &e);
    r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "success")));
    assert_true(json_is_true(json_object_get(r, "renewed")));
    assert_non_null(jstr(r, "expiresAt"));
    json_decref(r);
    /* Another tenant cannot extend it. */
    char other[37];
    wire_uuid4(other);
    must(queen_lease_extend(q, other, lease, 120, &out, &e), &e);
    r = take_json(out);
    assert_false(json_is_true(json_object_get(r, "success")));
    json_decref(r);
    free(queue);
    queen_close(q);
}

typedef struct wake_rec {
    atomic_int calls;
    atomic_int woken;
    atomic_llong at;
} wake_rec;

static void on_wake(void *ctx, bool woken)
{
    wake_rec *w = ctx;
    atomic_store(&w->woken, woken);
    atomic_store(&w->at, now_ms());
    atomic_fetch_add(&w->calls, 1);
}

static void wait_calls(wake_rec *w, int want, int within_ms)
{
    long long until = now_ms() + within_ms;
    while (atomic_load(&w->calls) < want && now_ms() < until)
        pause_ms(5);
}

/* Returns once the notifier has fired everything due within ms from now and
 * has returned from those callbacks: a marker waiter (of a queue nobody
 * pushes to) due then, then one due at once, which the notifier thread can
 * only fire after it finished the marker's pass. */
static void notifier_passes_after(queen *q, const char *tenant, int ms)
{
    wake_rec marker = {0}, next = {0};
    assert_non_null(queen_wait_for_push(q, tenant, "q-marker-never-pushed", ms, on_wake, &marker));
    wait_calls(&marker, 1, ms + 5000);
    assert_int_equal(atomic_load(&marker.calls), 1);
    assert_non_null(queen_wait_for_push(q, tenant, "q-marker-never-pushed", 1, on_wake, &next));
    wait_calls(&next, 1, 5000);
    assert_int_equal(atomic_load(&next.calls), 1);
}

static void wait_for_push_fires_exactly_once(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37], other[37];
    wire_uuid4(tenant);
    wire_uuid4(other);
    char *queue = pgtest_unique("q-wait-");

    /* Woken by a push. (Waiters registered before the LISTEN connection is
     * up are woken when it comes up, to re-check: wait for it first so the
     * wake-up measured is the push's.) */
    queen *pusher = engine_open(2); /* another broker: only the NOTIFY tells q */
    wait_listening(q);
    wake_rec a = {0};
    long long notifies = engine_stat(q, "notifier", "notifies");
    long long registered = now_ms();
    assert_non_null(queen_wait_for_push(q, tenant, queue, 5000, on_wake, &a));
    long long pushed = now_ms();
    push_one(pusher, tenant, queue, "w1");
    wait_calls(&a, 1, 3000);
    assert_int_equal(atomic_load(&a.calls), 1);
    assert_true(atomic_load(&a.woken));
    assert_true(atomic_load(&a.at) >= pushed);
    expect_notify_wake("one waiter", atomic_load(&a.at) - registered, -1, notifies,
                       engine_stat(q, "notifier", "notifies"));

    /* A push for another tenant's queue of the same name does not wake it:
     * it ends on its timeout, not woken. */
    wake_rec b = {0};
    assert_non_null(queen_wait_for_push(q, tenant, queue, 500, on_wake, &b));
    push_one(q, other, queue, "w2");
    wait_calls(&b, 1, 3000);
    assert_int_equal(atomic_load(&b.calls), 1);
    assert_false(atomic_load(&b.woken));

    /* Many at once, each fired exactly once. */
    enum { N = 50 };
    wake_rec many[N];
    memset(many, 0, sizeof many);
    notifies = engine_stat(q, "notifier", "notifies");
    registered = now_ms();
    for (int i = 0; i < N; i++)
        assert_non_null(queen_wait_for_push(q, tenant, queue, 4000, on_wake, &many[i]));
    push_one(pusher, tenant, queue, "w3");
    for (int i = 0; i < N; i++)
        wait_calls(&many[i], 1, 3000);
    long long last = 0;
    for (int i = 0; i < N; i++)
        if (atomic_load(&many[i].at) > last)
            last = atomic_load(&many[i].at);
    expect_notify_wake("50 waiters", last - registered, -1, notifies,
                       engine_stat(q, "notifier", "notifies"));
    /* Exactly once even past their re-check time, when a waiter left behind
     * would fire again. */
    notifier_passes_after(q, tenant, NOTIFY_RECHECK_MS);
    for (int i = 0; i < N; i++) {
        assert_int_equal(atomic_load(&many[i].calls), 1);
        assert_true(atomic_load(&many[i].woken));
    }
    assert_int_equal(engine_stat(q, "notifier", "localWakes"), 0);
    queen_close(pusher);

    /* queen_close fires what is still waiting, not woken. */
    wake_rec c = {0};
    assert_non_null(queen_wait_for_push(q, tenant, queue, 60000, on_wake, &c));
    char long_queue[300];
    memset(long_queue, 'q', sizeof long_queue - 1);
    long_queue[sizeof long_queue - 1] = '\0';
    assert_null(queen_wait_for_push(q, tenant, long_queue, 1000, on_wake, &c)); /* too long: refused, never fires */
    char *stats = queen_stats_json(q);
    json_t *s = take_json(stats);
    assert_true(json_number_value(json_object_get(s, "waiters")) >= 1);
    json_decref(s);
    long long t0 = now_ms();
    queen_close(q);
    assert_true(now_ms() - t0 < 2000);
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_false(atomic_load(&c.woken));
    free(queue);
}

/* A push through this engine wakes this engine's waiters of its queue, and
 * its tenant's any-queue waiters, on the notifier's next turn: before the
 * NOTIFY could come back (the statement that sends it leaves on that turn
 * at the earliest), so the count of local wake-ups says which woke them.
 * Another queue's and another tenant's waiters sleep on to their timeout. */
static void own_push_wakes_own_waiters_without_the_round_trip(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37], other[37];
    wire_uuid4(tenant);
    wire_uuid4(other);
    char *queue = pgtest_unique("q-local-");
    char *elsewhere = pgtest_unique("q-local-other-");
    wait_listening(q);
    for (int round = 0; round < 2; round++) {
        wake_rec same = {0}, any = {0}, other_queue = {0}, other_tenant = {0};
        long long local = engine_stat(q, "notifier", "localWakes");
        long long registered = now_ms();
        assert_non_null(queen_wait_for_push(q, tenant, queue, 5000, on_wake, &same));
        assert_non_null(queen_wait_for_push(q, tenant, NULL, 5000, on_wake, &any));
        /* Timeouts below the re-check: only a push could wake these. */
        assert_non_null(queen_wait_for_push(q, tenant, elsewhere, 600, on_wake, &other_queue));
        assert_non_null(queen_wait_for_push(q, other, queue, 600, on_wake, &other_tenant));
        if (round == 0)
            push_one(q, tenant, queue, "l0");
        else
            push_one_in_transaction(q, tenant, queue, "l1");
        wait_calls(&same, 1, 3000);
        wait_calls(&any, 1, 3000);
        assert_int_equal(atomic_load(&same.calls), 1);
        assert_int_equal(atomic_load(&any.calls), 1);
        assert_true(atomic_load(&same.woken));
        assert_true(atomic_load(&any.woken));
        assert_true(atomic_load(&same.at) - registered < NOTIFY_RECHECK_MS);
        assert_int_equal(engine_stat(q, "notifier", "localWakes") - local, 2);
        wait_calls(&other_queue, 1, 3000);
        wait_calls(&other_tenant, 1, 3000);
        assert_int_equal(atomic_load(&other_queue.calls), 1);
        assert_int_equal(atomic_load(&other_tenant.calls), 1);
        assert_false(atomic_load(&other_queue.woken));
        assert_false(atomic_load(&other_tenant.woken));
    }
    free(queue);
    free(elsewhere);
    queen_close(q);
}

/* A push of K messages to K partitions wakes K of N waiting pops, and the
 * safety check that runs while those K still pop wakes no more: the K
 * partitions it finds ready are the ones they are going for. The waiters
 * are a notifier's own (the push comes from an engine, as from another
 * broker, by its NOTIFY), and the woken ones are held popping (never
 * closed) across two check statements: the second was sent only after the
 * first was answered. */
static void a_check_does_not_wake_again_what_a_push_woke(void **state)
{
    (void)state;
    enum { N = 8, K = 3 };
    queen *q = engine_open(4); /* the schema, and the pusher */
    char err[256];
    queen_notifier *n = notifier_start(pgtest_url(), err, sizeof err);
    assert_non_null(n);
    WAIT_UNTIL(notifier_connected(n), 5000, "the notifier never connected");
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-nodouble-");
    wake_rec rec[N];
    queen_waiter *w[N];
    for (int i = 0; i < N; i++) {
        memset(&rec[i], 0, sizeof rec[i]);
        w[i] = notifier_wait_open(n, tenant, queue, NULL, NULL, NULL, NULL, 20000, on_wake, &rec[i]);
        assert_non_null(w[i]);
    }
    json_t *items = json_array();
    for (int i = 0; i < K; i++) {
        char part[16];
        snprintf(part, sizeof part, "p%d", i);
        json_array_append_new(items, json_pack("{s:s, s:s, s:i}", "queue", queue, "partition", part, "payload", i));
    }
    char *text = json_dumps(items, JSON_COMPACT), *out = NULL;
    json_decref(items);
    queen_error e = {0};
    must(queen_push(q, tenant, text, &out, &e), &e);
    free(out);
    free(text);
    int fired = 0;
    for (long long until = now_ms() + 5000; fired < K && now_ms() < until; pause_ms(5)) {
        fired = 0;
        for (int i = 0; i < N; i++)
            fired += atomic_load(&rec[i].calls);
    }
    assert_int_equal(fired, K);
    unsigned long checks = notifier_checks(n);
    WAIT_UNTIL(notifier_checks(n) >= checks + 2, 10000, "no check statement was answered");
    fired = 0;
    for (int i = 0; i < N; i++)
        fired += atomic_load(&rec[i].calls);
    if (fired != K)
        fail_msg("a push of %d messages and the check after it woke %d waiters", K, fired);
    for (int i = 0; i < N; i++)
        notifier_wait_close(n, w[i], false);
    notifier_free(n);
    free(queue);
    queen_close(q);
}

/* queen_poll driven as an event loop drives it: a step on an empty queue
 * says SLEEP; a push calls fn once, and the next step pops the message.
 * A poll whose time runs out calls fn once too, and its step then answers
 * nothing without popping. */
static void on_poll_wake(void *ctx)
{
    atomic_fetch_add((atomic_int *)ctx, 1);
}

static void a_poll_steps_without_blocking(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    wait_listening(q);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-poll-");
    atomic_int calls = 0;
    queen_pop_options o = {.queue = queue, .auto_ack = true, .timeout_ms = 20000};
    queen_poll *p = queen_poll_open(q, tenant, &o, on_poll_wake, &calls);
    assert_non_null(p);
    char *body = NULL;
    queen_error e = {0};
    assert_int_equal(queen_poll_step(p, &body, &e), QUEEN_POLL_SLEEP);
    assert_null(body);
    push_one(q, tenant, queue, "polled");
    WAIT_UNTIL(atomic_load(&calls) == 1, 5000, "the push never called fn");
    assert_int_equal(queen_poll_step(p, &body, &e), QUEEN_POLL_MESSAGES);
    assert_non_null(strstr(body, "polled"));
    free(body);
    queen_poll_close(p);
    assert_int_equal(atomic_load(&calls), 1);

    atomic_store(&calls, 0);
    o.timeout_ms = 300;
    p = queen_poll_open(q, tenant, &o, on_poll_wake, &calls);
    assert_non_null(p);
    assert_int_equal(queen_poll_step(p, &body, &e), QUEEN_POLL_SLEEP);
    WAIT_UNTIL(atomic_load(&calls) == 1, 5000, "the timeout never called fn");
    long long pops = engine_stat(q, "pops", "total");
    assert_int_equal(queen_poll_step(p, &body, &e), QUEEN_POLL_NOTHING);
    assert_null(body);
    assert_int_equal(engine_stat(q, "pops", "total"), pops); /* its end is not a wake: no pop */
    queen_poll_close(p);
    free(queue);
    queen_close(q);
}

static void notifier_survives_losing_its_connection(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-relisten-");
    queen_error e = {0};
    char *out;
    must(queen_configure(q, tenant, queue, "{}", &out, &e), &e);
    free(out);
    /* Wait for the notifier's first connection, then kill it. */
    PGconn *admin = pgtest_connect();
    WAIT_UNTIL(pgtest_int(admin,
                          "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queen_listen' "
                          "AND datname = current_database()",
                          0, NULL) > 0,
               5000, "the notifier never connected");
    PQclear(pgtest_exec(admin,
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                        "WHERE application_name = 'queen_listen' AND datname = current_database()",
                        0, NULL));
    /* Reconnected (the stats say so): the first attempt is at once, a
     * failed one backs off up to 5 s, and a loaded machine (a sanitizer
     * build beside it) has been seen to need more than 5 s in all... */
    WAIT_UNTIL(engine_stat(q, "notifier", "connected") && engine_stat(q, "notifier", "reconnects") >= 1, 20000,
               "the notifier did not reconnect");
    /* ...and a long poll is woken by a push again. */
    queen *pusher = engine_open(2); /* another broker: only the NOTIFY tells q */
    pop_arg a = {.q = q, .tenant = tenant, .queue = queue, .timeout_ms = 10000};
    pthread_t th;
    start_waiting_pop(&a, &th);
    long long notifies = engine_stat(q, "notifier", "notifies");
    long long push_wakes = engine_stat(q, "notifier", "pushWakes");
    push_one(pusher, tenant, queue, "after");
    pthread_join(th, NULL);
    assert_non_null(a.body);
    free(a.body);
    expect_notify_wake("after the reconnect", a.took_ms, engine_stat(q, "notifier", "pushWakes") - push_wakes, notifies,
                       engine_stat(q, "notifier", "notifies"));
    assert_int_equal(engine_stat(q, "notifier", "localWakes"), 0);
    queen_close(pusher);
    PQfinish(admin);
    free(queue);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(push_pop_ack),
        cmocka_unit_test(configure_labels_and_mode),
        cmocka_unit_test(configure_does_not_hold_up_a_push),
        cmocka_unit_test(long_poll_is_woken_by_a_push),
        cmocka_unit_test(a_deferred_push_sends_no_notify_at_commit),
        cmocka_unit_test(announcements_leave_in_batches),
        cmocka_unit_test(lease_extend),
        cmocka_unit_test(wait_for_push_fires_exactly_once),
        cmocka_unit_test(own_push_wakes_own_waiters_without_the_round_trip),
        cmocka_unit_test(a_check_does_not_wake_again_what_a_push_woke),
        cmocka_unit_test(a_poll_steps_without_blocking),
        cmocka_unit_test(notifier_survives_losing_its_connection),
    };
    return cmocka_run_group_tests_name("engine_log", tests, NULL, NULL);
}
