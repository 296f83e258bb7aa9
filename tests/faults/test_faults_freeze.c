/* A database that stops answering: the test cluster's postmaster and every
 * one of its processes are stopped with SIGSTOP (as a frozen VM or a
 * stalled storage layer would leave them: the sockets stay open, so
 * keepalives see nothing) while a PUT, a push and a long pop are in flight
 * on a broker with QUEEN_REQUEST_DEADLINE_MS=DEADLINE_MS, and a put through
 * the embedded library (its blocking pool) with the same deadline. Then:
 *   - each is answered at its deadline, not when the database resumes (a
 *     request's statements share one deadline: a push's maintenance read
 *     and the push itself together): the PUTs (their statement sent) 504
 *     db_outcome_unknown; the push and the pop 504 db_outcome_unknown or,
 *     when their statement never left the broker, 503 db_unavailable;
 *   - after SIGCONT, what was acknowledged before the freeze is all there,
 *     and a new PUT succeeds within RECOVERY_MS.
 * The cluster is the run's own (scripts/test.sh, QUEEN_TEST_PG_DIR); it is
 * resumed on every exit path of the test, so later suites find it running. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "broker.h"
#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"

#define DEADLINE_MS 2000
#define STR_(x) #x
#define STRINGIFY(x) STR_(x)
/* Scheduling slack over a deadline: the loop checks deadlines every turn
 * (at most 10 ms apart); the rest is a busy two-core machine. */
#define SLACK_MS 1500
#define RECOVERY_MS 1000
#define MAX_PIDS 512

static pid_t frozen[MAX_PIDS];
static int nfrozen;

static pid_t postmaster_pid(void)
{
    const char *dir = getenv("QUEEN_TEST_PG_DIR");
    if (dir == NULL)
        fail_msg("QUEEN_TEST_PG_DIR is not set (run through scripts/test.sh)");
    char *path = fmt("%s/data/postmaster.pid", dir);
    char *text = read_file(path);
    free(path);
    if (text == NULL)
        fail_msg("no postmaster.pid under %s", dir);
    pid_t pid = (pid_t)atol(text);
    free(text);
    return pid;
}

static bool already(pid_t pid)
{
    for (int i = 0; i < nfrozen; i++)
        if (frozen[i] == pid)
            return true;
    return false;
}

/* Stops pid and then its children (read from /proc after the stop, so none
 * forks behind the list), recursively. */
static void stop_tree(pid_t pid)
{
    if (already(pid) || nfrozen == MAX_PIDS)
        return;
    if (kill(pid, SIGSTOP) != 0)
        return; /* exited meanwhile */
    frozen[nfrozen++] = pid;
    char *path = fmt("/proc/%d/task/%d/children", (int)pid, (int)pid);
    char *kids = read_file(path);
    free(path);
    for (char *p = kids, *end; p != NULL && *p; p = end) {
        long child = strtol(p, &end, 10);
        if (end == p)
            break;
        stop_tree((pid_t)child);
    }
    free(kids);
}

static void freeze_database(void)
{
    nfrozen = 0;
    stop_tree(postmaster_pid());
    assert_true(nfrozen > 1); /* the postmaster and at least its backends */
}

static void thaw_database(void)
{
    for (int i = 0; i < nfrozen; i++)
        kill(frozen[i], SIGCONT);
    nfrozen = 0;
}

typedef struct inflight {
    const test_broker *b;
    const char *method, *path, *body;
    http_reply reply;
    long long took_ms;
    pthread_t thread;
} inflight;

static void *call_run(void *arg)
{
    inflight *c = arg;
    long long t0 = now_ms();
    c->reply = broker_http(c->b, c->method, c->path, c->body, NULL);
    c->took_ms = now_ms() - t0;
    return NULL;
}

/* A put through the embedded library, timed. */
typedef struct embedded_put {
    queen *q;
    const char *ns;
    int rc;
    queen_error err;
    long long took_ms;
    pthread_t thread;
} embedded_put;

static void *embedded_run(void *arg)
{
    embedded_put *e = arg;
    long long t0 = now_ms();
    char *out = NULL;
    e->rc = queen_kv_put(e->q, NULL, e->ns, "embedded", "7", QUEEN_FOREVER, -1, false, &out, &e->err);
    free(out);
    e->took_ms = now_ms() - t0;
    return NULL;
}

static bool says(const http_reply *r, long status, const char *reason)
{
    json_t *o = r->body ? json_parse(r->body) : NULL;
    bool yes = r->status == status && o != NULL && strcmp(jstr(o, "reason"), reason) == 0;
    json_decref(o);
    return yes;
}

static int answered(const inflight *calls, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += calls[i].took_ms > 0;
    return k;
}

static void calls_in_flight_are_answered_at_their_deadline(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_REQUEST_DEADLINE_MS=" STRINGIFY(DEADLINE_MS), NULL};
    test_broker b;
    if (!broker_start(&b, env))
        fail_msg("broker did not start");
    char *ns = pgtest_unique("freeze-ns-"), *queue = pgtest_unique("freeze-q-");

    /* Acknowledged before the freeze: must all be there after it. */
    char *put_path = fmt("/api/v1/kv/%s/acked", ns);
    http_reply r = broker_http(&b, "PUT", put_path, "{\"value\":41,\"forever\":true}", NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char *push_body = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"p\",\"payload\":{\"n\":1},"
                          "\"transactionId\":\"acked-1\"}]}",
                          queue);
    r = broker_http(&b, "POST", "/api/v1/push", push_body, NULL);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);

    char *frozen_put = fmt("/api/v1/kv/%s/during", ns);
    char *frozen_push = fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"p\",\"payload\":{\"n\":2},"
                            "\"transactionId\":\"during-1\"}]}",
                            queue);
    /* A long pop of an empty queue of its own: it would wait 30 s for a message. */
    char *other = pgtest_unique("freeze-empty-");
    char *pop_path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=30000", other);
    inflight calls[] = {
        {.b = &b, .method = "PUT", .path = frozen_put, .body = "{\"value\":42,\"forever\":true}"},
        {.b = &b, .method = "POST", .path = "/api/v1/push", .body = frozen_push},
        {.b = &b, .method = "GET", .path = pop_path},
    };
    int n = (int)(sizeof calls / sizeof calls[0]);

    queen_config cfg;
    engine_config(&cfg, pgtest_url(), 2);
    cfg.request_deadline_ms = DEADLINE_MS;
    embedded_put emb = {.q = engine_open_config(&cfg), .ns = ns};
    char *warm = NULL;
    queen_error werr;
    must(queen_kv_put(emb.q, NULL, ns, "warm", "1", QUEEN_FOREVER, -1, false, &warm, &werr), &werr);
    free(warm);
    warm = NULL;

    freeze_database();
    long long frozen_at = now_ms();
    for (int i = 0; i < n; i++)
        pthread_create(&calls[i].thread, NULL, call_run, &calls[i]);
    pthread_create(&emb.thread, NULL, embedded_run, &emb);
    /* Waited for, never slept: every call answers while the database is
     * still stopped (a hang would only end with the thaw below). */
    long long bound = DEADLINE_MS + SLACK_MS;
    long long until = now_ms() + bound + 5000;
    while ((answered(calls, n) < n || emb.took_ms == 0) && now_ms() < until)
        pause_ms(10);
    long long still_frozen_ms = now_ms() - frozen_at;
    int got = answered(calls, n) + (emb.took_ms > 0);
    thaw_database();
    long long thawed_at = now_ms();
    for (int i = 0; i < n; i++)
        pthread_join(calls[i].thread, NULL);
    pthread_join(emb.thread, NULL);
    print_message("# embedded put: rc %d after %lld ms: %s %s\n", emb.rc, emb.took_ms, emb.err.reason,
                  emb.err.detail);
    for (int i = 0; i < n; i++)
        print_message("# %s %s: %ld after %lld ms: %s\n", calls[i].method, calls[i].path, calls[i].reply.status,
                      calls[i].took_ms, calls[i].reply.body ? calls[i].reply.body : "");
    if (got < n + 1)
        fail_msg("%d of %d calls were still unanswered %lld ms into the freeze", n + 1 - got, n + 1, still_frozen_ms);

    /* The embedded put's statement went out at once: cut at its deadline. */
    assert_int_equal(emb.rc, -1);
    assert_int_equal(emb.err.category, QUEEN_ERR_OUTCOME_UNKNOWN);
    assert_string_equal(emb.err.reason, "db_outcome_unknown");
    assert_true(emb.took_ms <= bound);
    /* So did the PUT's. */
    if (!says(&calls[0].reply, 504, "db_outcome_unknown"))
        fail_msg("PUT in flight: %ld %s", calls[0].reply.status, calls[0].reply.body);
    assert_true(calls[0].took_ms <= DEADLINE_MS + SLACK_MS);
    for (int i = 1; i < n; i++) {
        if (!says(&calls[i].reply, 504, "db_outcome_unknown") && !says(&calls[i].reply, 503, "db_unavailable"))
            fail_msg("%s in flight: %ld %s", calls[i].method, calls[i].reply.status, calls[i].reply.body);
        assert_true(calls[i].took_ms <= bound);
    }
    for (int i = 0; i < n; i++)
        http_reply_free(&calls[i].reply);

    /* Recovery: the first new write that succeeds, timed from the thaw. */
    char *after_path = fmt("/api/v1/kv/%s/after", ns);
    long long recovered_ms = -1;
    for (;;) {
        long long t0 = now_ms();
        r = broker_http(&b, "PUT", after_path, "{\"value\":43,\"forever\":true}", NULL);
        long status = r.status;
        print_message("# after the thaw: PUT %ld in %lld ms: %.160s\n", status, now_ms() - t0, r.body ? r.body : "");
        http_reply_free(&r);
        if (status == 200) {
            recovered_ms = now_ms() - thawed_at;
            break;
        }
        if (now_ms() - thawed_at > 10000)
            fail_msg("no PUT succeeded within 10 s of the thaw (last %ld)", status);
        pause_ms(5);
    }
    print_message("# first PUT after the thaw succeeded %lld ms after SIGCONT\n", recovered_ms);
    assert_true(recovered_ms <= RECOVERY_MS);

    /* The cuts are counted. */
    r = broker_http(&b, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *m = json_parse(r.body);
    long long cuts = jint(json_object_get(json_object_get(m, "http"), "database"), "deadlineCutsTotal");
    json_decref(m);
    http_reply_free(&r);
    if (cuts < 1)
        fail_msg("no deadline cut counted in /metrics");

    /* Nothing acknowledged was lost. */
    r = broker_http(&b, "GET", put_path, NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *got_put = json_parse(r.body);
    assert_int_equal(jint(got_put, "value"), 41);
    json_decref(got_put);
    http_reply_free(&r);
    char *pop_acked = fmt("/api/v1/pop/queue/%s?batch=10&autoAck=true", queue);
    r = broker_http(&b, "GET", pop_acked, NULL, NULL);
    assert_int_equal(r.status, 200);
    if (strstr(r.body, "\"acked-1\"") == NULL)
        fail_msg("the message acknowledged before the freeze is gone: %s", r.body);
    http_reply_free(&r);

    /* The embedded library recovers as well: its cut connection is replaced. */
    WAIT_UNTIL((free(warm), warm = NULL, queen_kv_put(emb.q, NULL, ns, "warm", "2", QUEEN_FOREVER, -1, false, &warm, &werr) == 0),
               RECOVERY_MS, "the embedded put never succeeded after the thaw: %s %s", werr.reason, werr.detail);
    free(warm);
    queen_close(emb.q);
    assert_int_equal(broker_stop(&b), 0);
    free(pop_acked);
    free(after_path);
    free(frozen_put);
    free(frozen_push);
    free(pop_path);
    free(other);
    free(push_body);
    free(put_path);
    free(ns);
    free(queue);
}

static long long db_figure(const test_broker *b, const char *name)
{
    http_reply r = broker_http(b, "GET", "/metrics", NULL, NULL);
    json_t *m = json_parse(r.body);
    long long v = jint(json_object_get(json_object_get(m, "http"), "database"), name);
    json_decref(m);
    http_reply_free(&r);
    return v;
}

/* A live server and a statement that runs past its request's deadline
 * (here: one that waited for the only connection, then waits on a row
 * lock): the server is asked to cancel it before the deadline, rolls it
 * back (a known outcome: 503 db_unavailable, any call may retry) and the
 * connection is kept, not cut. */
static void a_live_server_cancels_what_passes_the_deadline(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_REQUEST_DEADLINE_MS=" STRINGIFY(DEADLINE_MS), "QUEEN_PG_POOL=1",
                         "QUEEN_HTTP_THREADS=1", "QUEEN_SWEEPER=0", NULL};
    test_broker b;
    if (!broker_start(&b, env))
        fail_msg("broker did not start");
    char *ns = pgtest_unique("cancel-ns-");
    char *path = fmt("/api/v1/kv/%s/held", ns);
    http_reply r = broker_http(&b, "PUT", path, "{\"value\":1,\"forever\":true}", NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    long long cuts = db_figure(&b, "deadlineCutsTotal"), reconnects = db_figure(&b, "reconnectsTotal");

    /* The row stays locked by another session until the end. */
    PGconn *admin = pgtest_connect();
    PQclear(pgtest_exec(admin, "BEGIN", 0, NULL));
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"held\",\"value\":9,\"forever\":true}]", ns);
    const char *params[] = {ops, QUEEN_DEFAULT_TENANT};
    PQclear(pgtest_exec(admin, "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)", 2, params));

    /* The first holds the only connection (the server's statement_timeout
     * ends it); the second waits for it, then for the lock. */
    inflight calls[] = {
        {.b = &b, .method = "PUT", .path = path, .body = "{\"value\":2,\"forever\":true}"},
        {.b = &b, .method = "PUT", .path = path, .body = "{\"value\":3,\"forever\":true}"},
    };
    pthread_create(&calls[0].thread, NULL, call_run, &calls[0]);
    WAIT_UNTIL(db_figure(&b, "inFlight") == 1, 5000, "the first PUT never went out");
    pthread_create(&calls[1].thread, NULL, call_run, &calls[1]);
    for (int i = 0; i < 2; i++)
        pthread_join(calls[i].thread, NULL);
    PQclear(pgtest_exec(admin, "ROLLBACK", 0, NULL));
    PQfinish(admin);
    for (int i = 0; i < 2; i++)
        print_message("# PUT %d: %ld after %lld ms: %s\n", i, calls[i].reply.status, calls[i].took_ms,
                      calls[i].reply.body ? calls[i].reply.body : "");
    for (int i = 0; i < 2; i++) {
        if (!says(&calls[i].reply, 503, "db_unavailable"))
            fail_msg("PUT %d past its deadline on a live server: %ld %s", i, calls[i].reply.status, calls[i].reply.body);
        assert_true(calls[i].took_ms <= DEADLINE_MS + SLACK_MS);
        http_reply_free(&calls[i].reply);
    }
    /* Neither cut its connection. */
    assert_int_equal(db_figure(&b, "deadlineCutsTotal"), cuts);
    assert_int_equal(db_figure(&b, "reconnectsTotal"), reconnects);
    r = broker_http(&b, "PUT", path, "{\"value\":4,\"forever\":true}", NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
    free(ops);
    free(path);
    free(ns);
}

/* A failing assertion longjmps out of the test: the cluster is resumed
 * here too, so the suites after this one find it running. */
static int resume_cluster(void **state)
{
    (void)state;
    thaw_database();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(calls_in_flight_are_answered_at_their_deadline, resume_cluster),
        cmocka_unit_test(a_live_server_cancels_what_passes_the_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
