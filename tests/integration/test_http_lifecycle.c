/* The broker's life around the routes: the sweeper removing expired rows
 * within a few seconds, /metrics/prometheus and the access log naming route
 * patterns (never a key), a slow request logged at warn (a long poll that
 * waited not), a long poll whose client hung up leasing nothing,
 * and a graceful SIGTERM under load: suspended long polls answered 204,
 * in-flight requests finished, every write acknowledged with a 200 present
 * in the database afterwards, exit status 0. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "rawsock.h"
#include "testutil.h"

static void start(test_broker *b, const char *const *env)
{
    if (!broker_start(b, env))
        fail_msg("broker did not become healthy (log: %s)", b->log);
}

static long status_of(const test_broker *b, const char *method, const char *path, const char *body)
{
    http_reply r = broker_http(b, method, path, body, NULL);
    long s = r.status;
    http_reply_free(&r);
    return s;
}

/* ---- the sweeper ----------------------------------------------------------- */

static void sweeper_removes_expired_rows(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_KV_EXPIRE_EVERY_MS=200", NULL};
    test_broker b;
    start(&b, env);
    char *ns = pgtest_unique("sweep");
    char *path = fmt("/api/v1/kv/%s/short", ns), *keep = fmt("/api/v1/kv/%s/forever", ns);
    assert_int_equal(status_of(&b, "PUT", path, "{\"value\":1,\"ttlSeconds\":1}"), 200);
    assert_int_equal(status_of(&b, "PUT", keep, "{\"value\":1,\"forever\":true}"), 200);
    long long put_at = now_ms();

    PGconn *c = pgtest_connect();
    const char *p[] = {ns};
    const char *count = "SELECT count(*) FROM queen.kv WHERE namespace = $1 AND key = 'short'";
    char *n = pgtest_scalar(c, count, 1, p);
    assert_string_equal(n, "1");
    free(n);
    long long gone_at = 0;
    while (now_ms() - put_at < 6000) {
        n = pgtest_scalar(c, count, 1, p);
        bool gone = strcmp(n, "0") == 0;
        free(n);
        if (gone) {
            gone_at = now_ms();
            break;
        }
        pause_ms(100);
    }
    if (gone_at == 0)
        fail_msg("the expired row was still there 6 s after a 1 s ttl");
    assert_true(gone_at - put_at >= 900); /* not before it expired */
    n = pgtest_scalar(c, "SELECT count(*) FROM queen.kv WHERE namespace = $1", 1, p);
    assert_string_equal(n, "1"); /* the forever row stays */
    free(n);
    PQfinish(c);

    http_reply r = broker_http(&b, "GET", "/metrics/prometheus", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "queen_sweeper_deleted_total "));
    assert_null(strstr(r.body, "queen_sweeper_deleted_total 0\n"));
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
    free(ns);
    free(path);
    free(keep);
}

/* ---- route patterns, never keys -------------------------------------------- */

static void metrics_and_access_log_name_patterns(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_LOG_LEVEL=info", NULL};
    test_broker b;
    start(&b, env);
    char *secret = pgtest_unique("secret-key-");
    char *ns = pgtest_unique("logs");
    char *path = fmt("/api/v1/kv/%s/%s", ns, secret);
    assert_int_equal(status_of(&b, "PUT", path, "{\"value\":1,\"forever\":true}"), 200);
    assert_int_equal(status_of(&b, "GET", path, NULL), 200);
    char *q = fmt("%s?x=1", path);
    assert_int_equal(status_of(&b, "GET", q, NULL), 400);
    assert_int_equal(status_of(&b, "GET", "/nowhere/at/all", NULL), 404);

    http_reply r = broker_http(&b, "GET", "/metrics/prometheus", NULL, NULL);
    assert_int_equal(r.status, 200);
    char *ctype = http_reply_header(&r, "Content-Type");
    assert_non_null(strstr(ctype, "text/plain"));
    free(ctype);
    static const char *const families[] = {
        "# TYPE queen_http_requests_total counter",
        "queen_http_requests_total{method=\"PUT\",route=\"/api/v1/kv/:ns/*key\",status=\"200\"} 1\n",
        "queen_http_requests_total{method=\"GET\",route=\"/api/v1/kv/:ns/*key\",status=\"400\"} 1\n",
        "# TYPE queen_http_request_duration_seconds histogram",
        "queen_http_request_duration_seconds_bucket{method=\"GET\",route=\"/api/v1/kv/:ns/*key\",le=\"+Inf\"} 2\n",
        "queen_http_request_duration_seconds_count{method=\"GET\",route=\"/api/v1/kv/:ns/*key\"} 2\n",
        "# TYPE queen_pool_in_use gauge",
        "# TYPE queen_pool_waiting gauge",
        "queen_kv_ops_total{op=\"get\",outcome=\"found\"} 1\n",
        "queen_kv_batches_total{outcome=\"ok\"} 1\n",
        "# TYPE queen_sweeper_deleted_total counter",
        "# TYPE queen_sweeper_lag_seconds gauge",
        "queen_http_long_polls_waiting 0\n",
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strstr(r.body, families[i]) == NULL)
            fail_msg("/metrics/prometheus lacks: %s\n%s", families[i], r.body);
    assert_null(strstr(r.body, secret));
    http_reply_free(&r);
    r = broker_http(&b, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, secret));
    json_t *m = json_loads(r.body, 0, NULL);
    assert_non_null(json_object_get(json_object_get(m, "engine"), "pool"));
    assert_true(json_is_array(json_object_get(json_object_get(m, "http"), "requests")));
    json_decref(m);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);

    char *log = read_file(b.log);
    assert_non_null(strstr(log, "http PUT /api/v1/kv/:ns/*key 200 "));
    assert_non_null(strstr(log, "http GET /api/v1/kv/:ns/*key 400 "));
    assert_non_null(strstr(log, "http GET (unmatched) 404 "));
    assert_null(strstr(log, secret));
    assert_null(strstr(log, "nowhere"));
    free(log);

    /* QUEEN_ACCESS_LOG=0: no line per request */
    static const char *const quiet_env[] = {"QUEEN_LOG_LEVEL=info", "QUEEN_ACCESS_LOG=0", NULL};
    test_broker quiet;
    start(&quiet, quiet_env);
    assert_int_equal(status_of(&quiet, "GET", path, NULL), 200);
    assert_int_equal(broker_stop(&quiet), 0);
    log = read_file(quiet.log);
    assert_null(strstr(log, "http GET"));
    free(log);
    free(secret);
    free(ns);
    free(path);
    free(q);
}

/* ---- slow requests ----------------------------------------------------------- */

typedef struct held_put {
    const test_broker *b;
    const char *path;
    long status;
} held_put;

static void *held_put_run(void *p)
{
    held_put *h = p;
    h->status = status_of(h->b, "PUT", h->path, "{\"value\":2,\"forever\":true}");
    return NULL;
}

/* A request answered QUEEN_SLOW_REQUEST_MS or more after it arrived leaves a
 * warn line with its route pattern (never its key) though the access log is
 * off; a long poll that waited longer than that for a push leaves none. The
 * slow request is a put waiting on a row lock this test holds until the put
 * is seen waiting and the threshold has passed. */
static void slow_requests_are_logged(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_LOG_LEVEL=warn", "QUEEN_ACCESS_LOG=0", "QUEEN_SLOW_REQUEST_MS=200",
                                      NULL};
    test_broker b;
    start(&b, env);
    char *ns = pgtest_unique("slow");
    char *secret = pgtest_unique("held-key-");
    char *path = fmt("/api/v1/kv/%s/%s", ns, secret);
    assert_int_equal(status_of(&b, "PUT", path, "{\"value\":1,\"forever\":true}"), 200);

    PGconn *holder = pgtest_connect(), *watcher = pgtest_connect();
    const char *p[] = {ns};
    PQclear(pgtest_exec(holder, "BEGIN", 0, NULL));
    PQclear(pgtest_exec(holder, "SELECT 1 FROM queen.kv WHERE namespace = $1 FOR UPDATE", 1, p));
    long long sent = now_ms();
    held_put h = {.b = &b, .path = path};
    pthread_t th;
    pthread_create(&th, NULL, held_put_run, &h);
    WAIT_UNTIL(pgtest_int(watcher,
                          "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                          "AND datname = current_database() AND application_name = 'queen'",
                          0, NULL) > 0 &&
                   now_ms() - sent > 300,
               10000, "the put never waited on the held row");
    PQclear(pgtest_exec(holder, "ROLLBACK", 0, NULL));
    pthread_join(th, NULL);
    assert_int_equal(h.status, 200);

    /* A long poll on an empty queue: answered after its 400 ms, having waited. */
    char *q = pgtest_unique("q-slow-");
    char *lp = fmt("/api/v1/pop/queue/%s?wait=true&timeout=400", q);
    long long polled = now_ms();
    assert_int_equal(status_of(&b, "GET", lp, NULL), 204);
    assert_true(now_ms() - polled >= 390);
    assert_int_equal(broker_stop(&b), 0);

    char *log = read_file(b.log);
    assert_non_null(strstr(log, "slow request: http PUT /api/v1/kv/:ns/*key 200 "));
    assert_null(strstr(log, "slow request: http GET /api/v1/pop"));
    assert_null(strstr(log, secret));
    free(log);
    PQfinish(holder);
    PQfinish(watcher);
    free(ns);
    free(secret);
    free(path);
    free(q);
    free(lp);
}

/* ---- a long poll whose client hung up ----------------------------------------- */

static void gone_client_leases_nothing(void **state)
{
    (void)state;
    test_broker b;
    start(&b, NULL);
    char *q = pgtest_unique("gone");
    char *url = fmt("%s/api/v1/pop/queue/%s?wait=true&timeout=8000", b.base, q);
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 500L); /* hangs up while the poll is suspended */
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    assert_int_equal(curl_easy_perform(curl), CURLE_OPERATION_TIMEDOUT);
    curl_easy_cleanup(curl);
    /* The edge watches a waiting poll's socket: the hang-up ends the poll
     * at once, counted 499, its place among the waiters given back, before
     * any push could wake it. */
    WAIT_UNTIL(http_requests_counted(&b, "GET", "/api/v1/pop/queue/:queue", 499) == 1, 5000,
               "the orphaned poll was not answered 499 when its client hung up");
    WAIT_UNTIL(http_metric(&b, "http", NULL, "longPollsWaiting") == 0, 5000, "the orphaned poll still waits");
    /* a push then finds no one waiting: no pop is attempted for the gone client */
    long long pops = http_metric(&b, "engine", "pops", "total");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q);
    assert_int_equal(status_of(&b, "POST", "/api/v1/push", push), 201);
    assert_int_equal(http_metric(&b, "engine", "pops", "total"), pops);
    char *pop = fmt("/api/v1/pop/queue/%s", q);
    assert_int_equal(status_of(&b, "GET", pop, NULL), 200);
    assert_int_equal(broker_stop(&b), 0);
    free(q);
    free(url);
    free(push);
    free(pop);
}

/* ---- SIGTERM under load ---------------------------------------------------------- */

enum { WRITERS = 6, MAX_ACKED = 100000 };

typedef struct writer {
    const test_broker *b;
    const char *ns;
    int id;
    atomic_int acked;       /* how many of acked_keys are filled in */
    int *acked_keys;
    atomic_bool *stop;
} writer;

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    char **body = u;
    size_t old = *body ? strlen(*body) : 0;
    char *nb = realloc(*body, old + s * n + 1);
    memcpy(nb + old, p, s * n);
    nb[old + s * n] = '\0';
    *body = nb;
    return s * n;
}

/* PUTs until the broker stops answering, on one keep-alive connection (a
 * fresh one after a refusal); records every key acknowledged with a 200 and
 * applied:true. Transport errors are expected once the broker stops. */
static void *write_loop(void *arg)
{
    writer *w = arg;
    CURL *curl = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink);
    int failures = 0;
    for (int i = 0; i < MAX_ACKED && failures < 20; i++) {
        char url[256];
        snprintf(url, sizeof url, "%s/api/v1/kv/%s/w%d-%d", w->b->base, w->ns, w->id, i);
        char *body = NULL;
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "{\"value\":1,\"forever\":true}");
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
        long status = 0;
        if (curl_easy_perform(curl) == CURLE_OK)
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 && body && strstr(body, "\"applied\": true")) {
            w->acked_keys[atomic_load(&w->acked)] = i;
            atomic_fetch_add(&w->acked, 1);
        }
        else if (atomic_load(w->stop))
            failures++;
        free(body);
        if (status != 200 && failures > 0)
            pause_ms(20);
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(curl);
    return NULL;
}

static bool every_writer_acked(writer *w, int n)
{
    for (int i = 0; i < WRITERS; i++)
        if (atomic_load(&w[i].acked) < n)
            return false;
    return true;
}

static void sigterm_under_load_loses_no_acknowledged_write(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_HTTP_THREADS=4", "QUEEN_LOG_LEVEL=info", "QUEEN_ACCESS_LOG=0", NULL};
    test_broker b;
    start(&b, env);
    char *ns = pgtest_unique("term");
    char *q = pgtest_unique("termq");
    atomic_bool stop = false;
    writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.b = &b, .ns = ns, .id = i, .acked_keys = malloc(sizeof(int) * MAX_ACKED), .stop = &stop};
        pthread_create(&t[i], NULL, write_loop, &w[i]);
    }
    char *lp = fmt("/api/v1/pop/queue/%s?wait=true&timeout=20000", q);
    timed_get poll = {.b = &b, .path = lp};
    pthread_t pt;
    pthread_create(&pt, NULL, timed_get_run, &poll);
    /* Under load: every writer acknowledged, the long poll suspended. */
    WAIT_UNTIL(every_writer_acked(w, 3) && http_metric(&b, "http", NULL, "longPollsWaiting") == 1, 10000,
               "the load never got going");

    atomic_store(&stop, true);
    int rc = broker_stop(&b); /* SIGTERM, then wait for the exit */
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    pthread_join(pt, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(poll.status, 204);
    assert_true(poll.took_ms < 10000);

    PGconn *c = pgtest_connect();
    const char *p[] = {ns};
    PGresult *res = pgtest_exec(c, "SELECT key FROM queen.kv WHERE namespace = $1", 1, p);
    int rows = PQntuples(res), acked = 0;
    for (int i = 0; i < WRITERS; i++) {
        for (int k = 0; k < atomic_load(&w[i].acked); k++) {
            char key[32];
            snprintf(key, sizeof key, "w%d-%d", i, w[i].acked_keys[k]);
            bool found = false;
            for (int r = 0; r < rows && !found; r++)
                found = strcmp(PQgetvalue(res, r, 0), key) == 0;
            if (!found)
                fail_msg("key %s was acknowledged with 200 but is not in the database", key);
            acked++;
        }
        free(w[i].acked_keys);
    }
    PQclear(res);
    PQfinish(c);
    if (acked < WRITERS)
        fail_msg("only %d writes were acknowledged before the stop: the load did not run", acked);
    char *log = read_file(b.log);
    assert_non_null(strstr(log, "received SIGTERM"));
    assert_non_null(strstr(log, "1 long poll(s) answered at stop"));
    assert_non_null(strstr(log, "stopped"));
    free(log);
    print_message("# %d writes acknowledged before SIGTERM, all present\n", acked);
    free(ns);
    free(q);
    free(lp);
}

/* ---- the drain's quiet period ------------------------------------------------------ */

static bool log_has(const test_broker *b, const char *text)
{
    char *log = read_file(b->log);
    bool has = log != NULL && strstr(log, text) != NULL;
    free(log);
    return has;
}

/* Reads from fd until one whole response with a Content-Length body is in
 * (or timeout_ms pass); returns it, malloc'd. */
static char *read_one_response(int fd, int timeout_ms)
{
    size_t cap = 8192, len = 0;
    char *buf = calloc(1, cap);
    long long until = now_ms() + timeout_ms;
    while (now_ms() < until && len + 1 < cap) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        char *cl = strcasestr(buf, "Content-Length:");
        if (end != NULL && cl != NULL && cl < end && len >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10))
            break;
    }
    return buf;
}

/* A client that sends its next request on an idle keep-alive connection
 * just as a stopping broker finishes its last in-flight request used to see
 * the connection closed under it, its write neither answered nor known to
 * have happened. Once nothing is in flight the broker now serves open
 * connections for QUEEN_DRAIN_QUIET_MS (here long, so the test does not race
 * it): the request is answered with Connection: close and applied, and the
 * broker exits as soon as the last connection is gone, not at the period's
 * end. */
static void stop_answers_a_request_sent_on_an_idle_connection(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_DRAIN_QUIET_MS=20000", "QUEEN_LOG_LEVEL=info", NULL};
    test_broker b;
    start(&b, env);
    char *ns = pgtest_unique("quiet");
    int fd = raw_connect(b.port);
    static const char health[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    assert_true(raw_send(fd, health, sizeof health - 1));
    char *first = read_one_response(fd, 10000);
    assert_non_null(strstr(first, "HTTP/1.1 200"));
    free(first);

    long long t0 = now_ms();
    kill(b.pid, SIGTERM);
    /* Not "serving 1": the count is taken once, at the first quiet moment,
     * and the health probe's connection from broker_start may not have been
     * seen closing yet (another loop), so it can say 2; ours is open either way. */
    WAIT_UNTIL(log_has(&b, "no request in flight; serving "), 10000,
               "the stopping broker never reached its quiet period with the idle connection open");
    char *put = fmt("PUT /api/v1/kv/%s/late HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: 26\r\n\r\n{\"value\":1,\"forever\":true}",
                    ns);
    assert_true(raw_send(fd, put, strlen(put)));
    bool closed = false;
    char *answer = raw_read_until_closed(fd, 10000, 65536, &closed);
    if (strstr(answer, "HTTP/1.1 200") == NULL)
        fail_msg("the request on the idle connection got no answer: '%s'", answer);
    assert_non_null(strcasestr(answer, "Connection: close"));
    assert_true(closed);
    free(answer);
    close(fd);
    assert_int_equal(broker_stop(&b), 0);
    /* It left when the connection closed, long before the 20 s period. */
    assert_true(now_ms() - t0 < 15000);

    PGconn *c = pgtest_connect();
    const char *p[] = {ns};
    char *n = pgtest_scalar(c, "SELECT count(*) FROM queen.kv WHERE namespace = $1 AND key = 'late'", 1, p);
    assert_string_equal(n, "1");
    free(n);
    PQfinish(c);
    free(put);
    free(ns);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sweeper_removes_expired_rows),
        cmocka_unit_test(metrics_and_access_log_name_patterns),
        cmocka_unit_test(slow_requests_are_logged),
        cmocka_unit_test(gone_client_leases_nothing),
        cmocka_unit_test(sigterm_under_load_loses_no_acknowledged_write),
        cmocka_unit_test(stop_answers_a_request_sent_on_an_idle_connection),
    };
    int rc = cmocka_run_group_tests_name("http_lifecycle", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
