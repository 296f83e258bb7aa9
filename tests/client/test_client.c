/* libqueenclient's own rules, beyond the conformance scenarios: the raw
 * JSON reader, what the client puts on the wire (headers, escaping, the
 * Retry-After wait), thread safety on one handle, and the consume loop's
 * stop and refusal. The wire checks read the bytes with a loopback socket
 * that answers as a broker would; the rest drives a real broker. */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"

#include "broker.h"
#include "pgtest.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static test_broker b;

/* timeout_ms 0 keeps the default. */
static queen_client *open_client_timed(const char *url, int attempts, int timeout_ms)
{
    queen_client_options o;
    queen_client_options_defaults(&o);
    const char *urls[] = {url};
    o.urls = urls;
    o.nurls = 1;
    o.max_attempts = attempts;
    if (timeout_ms > 0)
        o.timeout_ms = timeout_ms;
    o.token = NULL;
    queen_client_error err;
    queen_client *c = queen_client_open(&o, &err);
    assert_non_null(c);
    return c;
}

static queen_client *open_client(const char *url, int attempts)
{
    return open_client_timed(url, attempts, 0);
}

/* ---- the reader --------------------------------------------------------------------- */

static void test_jdoc_keeps_raw_numbers(void **state)
{
    (void)state;
    const char *text = " {\"a\": [0.1, 12345678901234567890, -0.0e+00, 1E400], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\"} ";
    jd *d = jd_parse(text, strlen(text), NULL, 0);
    assert_non_null(d);
    const jd *a = jd_get(d, "a");
    char *t0 = jd_text(jd_at(a, 0)), *t1 = jd_text(jd_at(a, 1)), *t3 = jd_text(jd_at(a, 3));
    assert_string_equal(t0, "0.1");
    assert_string_equal(t1, "12345678901234567890");
    assert_string_equal(t3, "1E400");
    assert_string_equal(jd_str(d, "s"), "x\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_ptr_equal(jd_pointer(d, "/a/1"), jd_at(a, 1));
    assert_null(jd_pointer(d, "/a/9"));
    free(t0);
    free(t1);
    free(t3);
    jd_free(d);
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "nul", "[1] 2", "\"a\nb\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char msg[64];
        jd *x = jd_parse(bad[i], strlen(bad[i]), msg, sizeof msg);
        if (x != NULL)
            fail_msg("accepted bad JSON %s", bad[i]);
        assert_true(msg[0] != '\0');
    }
    /* Deep nesting is refused, not a stack overflow. */
    char deep[2001];
    memset(deep, '[', 2000);
    deep[2000] = '\0';
    assert_null(jd_parse(deep, 2000, NULL, 0));
}

static void test_number_equality_is_exact(void **state)
{
    (void)state;
#define EQ(a, b) jd_number_equal(a, strlen(a), b, strlen(b))
    assert_true(EQ("1", "1.0"));
    assert_true(EQ("100", "1e2"));
    assert_true(EQ("0.001", "1E-3"));
    assert_true(EQ("-0", "0.0"));
    assert_true(EQ("12345678901234567890", "1.234567890123456789e19"));
    assert_false(EQ("12345678901234567890", "12345678901234567891")); /* equal as doubles */
    assert_false(EQ("0.1", "0.10000000000000001"));                   /* equal as doubles */
    assert_false(EQ("-1", "1"));
    assert_false(EQ("10", "1"));
#undef EQ
}

static void test_shortest_double_text(void **state)
{
    (void)state;
    double values[] = {0.1, 2.5, 1e300, -3, 0.30000000000000004, 123456789.125};
    const char *texts[] = {"0.1", "2.5", "1e+300", "-3", "0.30000000000000004", "123456789.125"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        jbuf bf = {0};
        jbuf_double(&bf, values[i]);
        char *t = jbuf_take(&bf);
        assert_string_equal(t, texts[i]);
        free(t);
    }
}

/* ---- the wire ------------------------------------------------------------------------ */

#define MAX_ANSWERS 4

typedef struct peer {
    int fd, port;
    const char *answers[MAX_ANSWERS]; /* whole HTTP responses, one per connection; NULL: never answer */
    int nanswers;
    char *requests[MAX_ANSWERS];      /* what arrived */
    long long at_ms[MAX_ANSWERS];
    pthread_t thread;
} peer;

static void *peer_main(void *arg)
{
    peer *p = arg;
    for (int i = 0; i < p->nanswers; i++) {
        int c = accept(p->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        p->at_ms[i] = now_ms();
        char buf[16384];
        size_t len = 0;
        ssize_t k;
        /* Headers, then Content-Length bytes of body. */
        while (len < sizeof buf - 1 && (k = read(c, buf + len, sizeof buf - 1 - len)) > 0) {
            len += (size_t)k;
            buf[len] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (end == NULL)
                continue;
            const char *cl = strcasestr(buf, "content-length:");
            size_t body = cl != NULL && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
            if (len >= (size_t)(end + 4 - buf) + body)
                break;
        }
        p->requests[i] = strndup(buf, len);
        if (p->answers[i] != NULL) {
            ssize_t w = write(c, p->answers[i], strlen(p->answers[i]));
            (void)w;
        } else {
            while (read(c, buf, sizeof buf) > 0) { /* silent: wait for the client to give up */
            }
        }
        close(c);
    }
    return NULL;
}

static void peer_start(peer *p)
{
    p->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(p->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(p->fd, (struct sockaddr *)&sa, &sl);
    p->port = ntohs(sa.sin_port);
    assert_int_equal(listen(p->fd, 8), 0);
    assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static void peer_finish(peer *p)
{
    pthread_join(p->thread, NULL);
    close(p->fd);
}

static void peer_free(peer *p)
{
    for (int i = 0; i < p->nanswers; i++)
        free(p->requests[i]);
}

#define HEALTHY "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\nConnection: close\r\n\r\n" \
                "{\"status\":\"healthy\",\"version\":\"9.9.9\"}  "

static void test_token_tenant_and_escaping_on_the_wire(void **state)
{
    (void)state;
    const char *found = "{\"op\":\"get\",\"key\":\"a/b%c\",\"found\":false,\"index\":0}";
    char *kv_answer = fmt("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(found), found);
    peer p = {.answers = {HEALTHY, kv_answer}, .nanswers = 2};
    peer_start(&p);
    char *url = fmt("http://127.0.0.1:%d/", p.port); /* a trailing slash is not doubled */
    queen_client_options o;
    queen_client_options_defaults(&o);
    const char *urls[] = {url};
    o.urls = urls;
    o.nurls = 1;
    o.token = "s3cret.token";
    queen_client_error err;
    queen_client *c = queen_client_open(&o, &err);
    char version[16];
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), 0);
    assert_string_equal(version, "9.9.9");
    char *result = NULL;
    assert_int_equal(queen_client_kv_get(c, "0a0a0a0a-0000-4000-8000-000000000001", "n s", "a/b%c", &result, &err), 0);
    assert_string_equal(result, found);
    peer_finish(&p);
    assert_non_null(strstr(p.requests[0], "GET /health HTTP/1.1\r\n"));
    assert_non_null(strstr(p.requests[0], "\r\nAuthorization: Bearer s3cret.token\r\n"));
    assert_null(strstr(p.requests[0], "x-queen-tenant"));
    assert_non_null(strstr(p.requests[1], "GET /api/v1/kv/n%20s/a%2Fb%25c HTTP/1.1\r\n"));
    assert_non_null(strstr(p.requests[1], "\r\nx-queen-tenant: 0a0a0a0a-0000-4000-8000-000000000001\r\n"));
    free(result);
    queen_client_close(c);
    peer_free(&p);
    free(url);
    free(kv_answer);
}

static void test_retry_after_is_waited_for(void **state)
{
    (void)state;
    const char *envelope = "{\"error\":\"busy\",\"code\":\"unavailable\",\"reason\":\"db_unavailable\",\"detail\":\"busy now\"}";
    char *busy = fmt("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", strlen(envelope), envelope);
    peer p = {.answers = {busy, HEALTHY}, .nanswers = 2};
    peer_start(&p);
    char *url = fmt("http://127.0.0.1:%d", p.port);
    queen_client *c = open_client(url, 3);
    queen_client_error err;
    char version[16];
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), 0);
    peer_finish(&p);
    /* The second attempt came no sooner than the answer asked (a lower bound, not a speed). */
    assert_true(p.at_ms[1] - p.at_ms[0] >= 950);
    assert_int_equal(queen_client_retries(c), 1);
    queen_client_close(c);
    peer_free(&p);

    /* db_unavailable says the statement never reached the database: even a
     * call that may not repeat (an incr) goes again, until the attempts end;
     * the envelope as sent. */
    peer q = {.answers = {busy, busy}, .nanswers = 2};
    peer_start(&q);
    char *url2 = fmt("http://127.0.0.1:%d", q.port);
    c = open_client(url2, 2);
    assert_int_equal(queen_client_kv_incr(c, NULL, "n", "k", 1, NULL, NULL, QUEEN_FOREVER, false, NULL, &err), -1);
    peer_finish(&q);
    assert_int_equal(err.status, 503);
    assert_int_equal(err.category, QUEEN_ERR_UNAVAILABLE);
    assert_string_equal(err.code, "unavailable");
    assert_string_equal(err.reason, "db_unavailable");
    assert_string_equal(err.detail, "busy now");
    assert_int_equal(err.retry_after_s, 1);
    assert_int_equal(err.attempts, 2);
    queen_client_close(c);
    peer_free(&q);

    /* db_outcome_unknown: the incr may have committed; one attempt only. */
    const char *unknown_env = "{\"error\":\"cut\",\"code\":\"kv_outcome_unknown\",\"reason\":\"db_outcome_unknown\","
                              "\"detail\":\"cut at its deadline\"}";
    char *unknown = fmt("HTTP/1.1 504 Gateway Timeout\r\nRetry-After: 1\r\nContent-Length: %zu\r\n"
                        "Connection: close\r\n\r\n%s", strlen(unknown_env), unknown_env);
    peer u = {.answers = {unknown}, .nanswers = 1};
    peer_start(&u);
    char *url3 = fmt("http://127.0.0.1:%d", u.port);
    c = open_client(url3, 3);
    assert_int_equal(queen_client_kv_incr(c, NULL, "n", "k", 1, NULL, NULL, QUEEN_FOREVER, false, NULL, &err), -1);
    peer_finish(&u);
    assert_int_equal(err.status, 504);
    assert_int_equal(err.category, QUEEN_ERR_OUTCOME_UNKNOWN);
    assert_string_equal(err.reason, "db_outcome_unknown");
    assert_int_equal(err.attempts, 1);
    queen_client_close(c);
    peer_free(&u);
    free(url);
    free(url2);
    free(url3);
    free(busy);
    free(unknown);
}

static void test_timeouts_are_typed_and_retried_only_when_safe(void **state)
{
    (void)state;
    peer p = {.answers = {NULL, NULL, NULL}, .nanswers = 3};
    peer_start(&p);
    char *url = fmt("http://127.0.0.1:%d", p.port);
    queen_client_error err;
    queen_client *c = open_client_timed(url, 2, 300);
    char version[16];
    /* A read is repeated after a timeout... */
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), -1);
    assert_string_equal(err.code, "timeout");
    assert_int_equal(err.status, 0);
    assert_int_equal(err.attempts, 2);
    /* ...a push without transactionIds is not: it may have been queued. */
    assert_int_equal(queen_client_push(c, NULL, "[{\"queue\":\"q\",\"payload\":1}]", NULL, &err), -1);
    assert_string_equal(err.code, "timeout");
    assert_int_equal(err.attempts, 1);
    peer_finish(&p);
    assert_non_null(strstr(p.requests[2], "POST /api/v1/push HTTP/1.1"));
    queen_client_close(c);
    peer_free(&p);
    free(url);
}

/* A view from queen_client_with_timeout bounds its own calls; the base
 * keeps its timeout and its pool outlives the closed view. */
static void test_a_view_has_its_own_timeout(void **state)
{
    (void)state;
    peer p = {.answers = {NULL, NULL}, .nanswers = 2};
    peer_start(&p);
    char *url = fmt("http://127.0.0.1:%d", p.port);
    queen_client_error err;
    queen_client *c = open_client_timed(url, 1, 1500);
    assert_null(queen_client_with_timeout(c, 0));
    queen_client *v = queen_client_with_timeout(c, 200);
    assert_non_null(v);
    char version[16];
    long long t0 = now_ms();
    assert_int_equal(queen_client_health(v, version, sizeof version, &err), -1);
    long long took = now_ms() - t0;
    assert_string_equal(err.code, "timeout");
    assert_true(took >= 150 && took < 1000);
    queen_client_close(v);
    t0 = now_ms();
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), -1);
    took = now_ms() - t0;
    assert_string_equal(err.code, "timeout");
    assert_true(took >= 1400);
    peer_finish(&p);
    queen_client_close(c);
    peer_free(&p);
    free(url);
}

typedef struct keepalive_peer {
    int fd, port, accepts, requests, want;
    pthread_t thread;
} keepalive_peer;

/* Answers `want` requests, keeping each connection open, counting accepts. */
static void *keepalive_main(void *arg)
{
    keepalive_peer *p = arg;
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\r\n"
                                 "{\"status\":\"healthy\",\"version\":\"9.9.9\"}";
    while (p->requests < p->want) {
        int c = accept(p->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        p->accepts++;
        char buf[4096];
        size_t len = 0;
        ssize_t k;
        while (p->requests < p->want && (k = read(c, buf + len, sizeof buf - 1 - len)) > 0) {
            len += (size_t)k;
            buf[len] = '\0';
            char *end;
            while ((end = strstr(buf, "\r\n\r\n")) != NULL) { /* GETs: no body */
                p->requests++;
                ssize_t w = write(c, answer, sizeof answer - 1);
                (void)w;
                len -= (size_t)(end + 4 - buf);
                memmove(buf, end + 4, len + 1);
            }
        }
        close(c);
    }
    return NULL;
}

static void test_connections_are_kept_alive(void **state)
{
    (void)state;
    keepalive_peer p = {.want = 5};
    p.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(p.fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(p.fd, (struct sockaddr *)&sa, &sl);
    assert_int_equal(listen(p.fd, 8), 0);
    assert_int_equal(pthread_create(&p.thread, NULL, keepalive_main, &p), 0);
    char *url = fmt("http://127.0.0.1:%d", ntohs(sa.sin_port));
    queen_client *c = open_client(url, 1);
    for (int i = 0; i < 5; i++) {
        char version[16];
        queen_client_error err;
        assert_int_equal(queen_client_health(c, version, sizeof version, &err), 0);
    }
    pthread_join(p.thread, NULL);
    close(p.fd);
    /* Five calls, one connection. */
    assert_int_equal(p.requests, 5);
    assert_int_equal(p.accepts, 1);
    queen_client_close(c);
    free(url);
}

/* ---- a real broker ------------------------------------------------------------------- */

typedef struct incr_job {
    queen_client *c;
    const char *ns;
    int n, failures;
} incr_job;

static void *incr_main(void *arg)
{
    incr_job *j = arg;
    for (int i = 0; i < j->n; i++) {
        queen_client_error err;
        if (queen_client_kv_incr(j->c, NULL, j->ns, "count", 1, NULL, NULL, QUEEN_FOREVER, false, NULL, &err) != 0)
            j->failures++;
    }
    return NULL;
}

static void test_one_handle_many_threads(void **state)
{
    (void)state;
    char *ns = pgtest_unique("cthreads");
    queen_client *c = open_client(b.base, 3);
    enum { THREADS = 8, EACH = 25 };
    pthread_t t[THREADS];
    incr_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (incr_job){.c = c, .ns = ns, .n = EACH};
        assert_int_equal(pthread_create(&t[i], NULL, incr_main, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].failures, 0);
    }
    char *result = NULL;
    queen_client_error err;
    assert_int_equal(queen_client_kv_get(c, NULL, ns, "count", &result, &err), 0);
    json_t *o = json_parse(result);
    assert_int_equal(jint(o, "value"), THREADS * EACH);
    json_decref(o);
    free(result);
    queen_client_close(c);
    free(ns);
}

static int never_called(void *ctx, const queen_client_message *m, queen_client_tx *tx)
{
    (void)m;
    (void)tx;
    (*(int *)ctx)++;
    return QUEEN_CLIENT_HANDLED;
}

typedef struct stopper {
    volatile int *flag;
    queen_client *c;
    const char *queue;
} stopper;

/* Stops the loop once it is waiting in a long poll (the broker counts the waiter). */
static void *stop_soon(void *arg)
{
    stopper *s = arg;
    for (int i = 0; i < 400; i++) {
        http_reply r = broker_http(&b, "GET", "/metrics", NULL, NULL);
        json_t *m = json_parse(r.body);
        bool waiting = jint(json_object_get(m, "http"), "longPollsWaiting") > 0;
        json_decref(m);
        http_reply_free(&r);
        if (waiting)
            break;
        pause_ms(10);
    }
    __atomic_store_n(s->flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_consume_stops_cleanly_and_reports_refusals(void **state)
{
    (void)state;
    char *q = pgtest_unique("cstop");
    queen_client *c = open_client(b.base, 3);
    volatile int stop = 0;
    int calls = 0;
    queen_client_consume_options o = {.queue = q, .concurrency = 2, .poll_ms = 500, .handler = never_called,
                                      .ctx = &calls, .stop = &stop};
    stopper s = {.flag = &stop, .c = c, .queue = q};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_soon, &s), 0);
    queen_client_error err;
    assert_int_equal(queen_client_consume(c, &o, &err), 0);
    pthread_join(t, NULL);
    assert_int_equal(calls, 0);

    /* A pop the broker refuses ends the loop with its error instead of spinning. */
    stop = 0;
    o.queue = "";
    assert_int_equal(queen_client_consume(c, &o, &err), -1);
    assert_int_equal(err.status / 100, 4);
    /* And no stop flag is a usage mistake, said at once. */
    o.stop = NULL;
    assert_int_equal(queen_client_consume(c, &o, &err), -1);
    assert_string_equal(err.code, "bad_request");
    queen_client_close(c);
    free(q);
}

/* A popped message read through the accessors, no JSON library: the ids an
 * ack needs, the payload's text byte for byte, and the ack they make works. */
static void test_popped_messages_read_without_a_json_library(void **state)
{
    (void)state;
    char *q = pgtest_unique("cread");
    queen_client *c = open_client(b.base, 3);
    queen_client_error err;
    char *items = NULL;
    assert_true(asprintf(&items,
                         "[{\"queue\":\"%s\",\"payload\":{\"n\":12345678901234567890},\"transactionId\":\"%s-1\"},"
                         "{\"queue\":\"%s\",\"payload\":0.1,\"transactionId\":\"%s-2\"}]",
                         q, q, q, q) > 0);
    char *res = NULL;
    assert_int_equal(queen_client_push(c, NULL, items, &res, &err), 0);
    free(res);
    queen_pop_options po = {.queue = q, .batch = 2};
    char *body = NULL;
    assert_int_equal(queen_client_pop(c, NULL, &po, &body, &err), 0);
    assert_non_null(body);
    queen_client_popped *p = queen_client_popped_parse(body, &err);
    free(body); /* the set keeps what it read */
    assert_non_null(p);
    assert_int_equal(queen_client_popped_count(p), 2);
    assert_null(queen_client_popped_at(p, 2));
    const queen_client_message *m = queen_client_popped_at(p, 0);
    char *tx1 = NULL;
    assert_true(asprintf(&tx1, "%s-1", q) > 0);
    assert_string_equal(m->queue, q);
    assert_string_equal(m->transaction_id, tx1);
    assert_non_null(strstr(m->payload_json, "12345678901234567890}")); /* the broker's rendering, exact */
    assert_string_equal(queen_client_popped_at(p, 1)->payload_json, "0.1");
    assert_int_equal(m->delivery_attempt, 1);
    assert_non_null(m->partition_id);
    assert_non_null(m->lease_id);
    assert_non_null(strstr(m->message_json, "\"data\""));
    char *acks = NULL;
    assert_true(asprintf(&acks, "[{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}]",
                         m->transaction_id, m->partition_id, m->lease_id) > 0);
    assert_int_equal(queen_client_ack(c, NULL, acks, NULL, &res, &err), 0);
    assert_non_null(strstr(res, "\"success\": true"));
    free(res);
    queen_client_popped_free(p);

    /* Nothing popped (204: NULL) is an empty set; text that is not a pop body is an error. */
    p = queen_client_popped_parse(NULL, &err);
    assert_int_equal(queen_client_popped_count(p), 0);
    queen_client_popped_free(p);
    assert_null(queen_client_popped_parse("{\"messages\":3}", &err));
    assert_string_equal(err.code, "bad_response");
    assert_null(queen_client_popped_parse("{\"messages\":[", &err));
    queen_client_close(c);
    free(acks);
    free(tx1);
    free(items);
    free(q);
}

/* Every category has its name, like strerror for an errno; past the end: "unknown". */
static void test_category_names(void **state)
{
    (void)state;
    assert_string_equal(queen_client_category_name(QUEEN_ERR_UNAVAILABLE), "unavailable");
    assert_string_equal(queen_client_category_name(QUEEN_ERR_PRECONDITION), "precondition");
    for (int cat = QUEEN_OK; cat <= QUEEN_ERR_LIMIT_EXCEEDED; cat++)
        assert_string_not_equal(queen_client_category_name((queen_error_category)cat), "unknown");
    assert_string_equal(queen_client_category_name((queen_error_category)(QUEEN_ERR_LIMIT_EXCEEDED + 1)), "unknown");
    assert_string_equal(queen_client_category_name((queen_error_category)-1), "unknown");
    /* The client's own errors name a category too. */
    queen_client *c = open_client("http://127.0.0.1:1", 1);
    queen_client_error err;
    assert_int_equal(queen_client_health(c, NULL, 0, &err), -1);
    assert_string_equal(queen_client_category_name(err.category), "unavailable");
    queen_client_close(c);
}

static void test_builder_shapes_one_bundle(void **state)
{
    (void)state;
    queen_client_tx *tx = queen_client_tx_new();
    queen_client_tx_ack(tx, "m\"1", "p", "l", "failed", NULL);
    queen_client_tx_push(tx, "q", NULL, "0.1", "t1");
    queen_client_tx_push(tx, "q", "eu", "12345678901234567890", NULL);
    queen_client_tx_kv(tx, "{\"op\":\"get\",\"ns\":\"a\",\"key\":\"b\"}");
    queen_client_tx_require_lease(tx, "l");
    char *json = queen_client_tx_json(tx);
    assert_string_equal(json,
                        "{\"operations\":[{\"type\":\"ack\",\"transactionId\":\"m\\\"1\",\"partitionId\":\"p\","
                        "\"leaseId\":\"l\",\"status\":\"failed\"},{\"type\":\"push\",\"items\":[{\"queue\":\"q\","
                        "\"payload\":0.1,\"transactionId\":\"t1\"},{\"queue\":\"q\",\"partition\":\"eu\","
                        "\"payload\":12345678901234567890}]}],\"kv\":[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"b\"}],"
                        "\"requiredLeases\":[\"l\"]}");
    free(json);
    /* The open push is closed in each rendering only: a push after it still joins it. */
    queen_client_tx *t2 = queen_client_tx_new();
    queen_client_tx_push(t2, "q", NULL, "1", NULL);
    json = queen_client_tx_json(t2);
    free(json);
    queen_client_tx_push(t2, "q", NULL, "2", NULL);
    json = queen_client_tx_json(t2);
    assert_string_equal(json, "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"q\",\"payload\":1},"
                              "{\"queue\":\"q\",\"payload\":2}]}]}");
    free(json);
    queen_client_tx_free(t2);
    queen_client_tx_free(tx);

    /* The typed kv ops: the wire ops the one-op calls send; a bad expiry adds nothing. */
    queen_client_tx *t3 = queen_client_tx_new();
    queen_client_error err;
    double max = 9;
    assert_int_equal(queen_client_tx_kv_put(t3, "n", "a", "1", 60, 3, true, &err), 0);
    assert_int_equal(queen_client_tx_kv_put_if_absent(t3, "n", "b", "true", QUEEN_FOREVER, false, &err), 0);
    assert_int_equal(queen_client_tx_kv_delete(t3, "n", "c", -1, false, &err), 0);
    assert_int_equal(queen_client_tx_kv_incr(t3, "n", "d", 2, NULL, &max, QUEEN_FOREVER, false, &err), 0);
    assert_int_equal(queen_client_tx_kv_put(t3, "n", "e", "1", 0, -1, false, &err), -1);
    assert_string_equal(err.code, "bad_argument");
    assert_int_equal(queen_client_tx_kv_incr(t3, "n", "e", 1, NULL, NULL, -3, false, &err), -1);
    json = queen_client_tx_json(t3);
    assert_string_equal(json, "{\"kv\":[{\"op\":\"put\",\"ns\":\"n\",\"key\":\"a\",\"value\":1,\"ttlSeconds\":60,"
                              "\"expect\":3,\"required\":true},{\"op\":\"putIfAbsent\",\"ns\":\"n\",\"key\":\"b\","
                              "\"value\":true,\"forever\":true},{\"op\":\"delete\",\"ns\":\"n\",\"key\":\"c\"},"
                              "{\"op\":\"incr\",\"ns\":\"n\",\"key\":\"d\",\"delta\":2,\"max\":9,\"forever\":true}]}");
    free(json);
    queen_client_tx_free(t3);
}

static int setup(void **state)
{
    (void)state;
    return broker_start(&b, NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    broker_stop(&b);
    return 0;
}

/* clients/API.md, "Expiry": a write without one valid expiry never leaves
 * the client (no broker listens at the URL: a sent call would fail
 * unreachable, not bad_argument). */
static void test_expiry_is_refused_before_sending(void **state)
{
    (void)state;
    char *url = fmt("http://127.0.0.1:%d", broker_free_port());
    queen_client *c = open_client(url, 3);
    const long bad[] = {0, -1, -5, LONG_MIN + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        queen_client_error err;
        char *out = NULL;
        assert_int_equal(queen_client_kv_put(c, NULL, "ns", "k", "1", bad[i], -1, false, &out, &err), -1);
        assert_int_equal(err.status, 0);
        assert_string_equal(err.code, "bad_argument");
        assert_int_equal(err.category, QUEEN_ERR_BAD_REQUEST);
        assert_string_equal(queen_client_error_kind(&err), "bad_request");
        assert_non_null(strstr(err.detail, "expiry: give ttl (seconds > 0) or forever"));
        assert_int_equal(queen_client_kv_put_if_absent(c, NULL, "ns", "k", "1", bad[i], false, &out, &err), -1);
        assert_string_equal(err.code, "bad_argument");
        assert_int_equal(queen_client_kv_incr(c, NULL, "ns", "k", 1, NULL, NULL, bad[i], false, &out, &err), -1);
        assert_string_equal(err.code, "bad_argument");
        assert_null(out);
    }
    assert_int_equal(queen_client_retries(c), 0);
    /* A valid one is sent, and so meets the dead URL. */
    queen_client_error err;
    assert_int_equal(queen_client_kv_put(c, NULL, "ns", "k", "1", QUEEN_FOREVER, -1, false, NULL, &err), -1);
    assert_string_equal(err.code, "unreachable");
    assert_string_equal(queen_client_error_kind(&err), "transport");
    queen_client_close(c);
    free(url);
}

struct seen_retry {
    int calls, attempt, wait_ms;
    char code[64];
};

static void note_retry(void *ctx, int attempt, const queen_client_error *err, int wait_ms)
{
    struct seen_retry *s = ctx;
    s->calls++;
    s->attempt = attempt;
    s->wait_ms = wait_ms;
    snprintf(s->code, sizeof s->code, "%s", err->code);
}

/* With no URL in the options the client reads QUEEN_URL, in failover order;
 * and the retry hook sees each retry. */
static void test_queen_url_is_read(void **state)
{
    (void)state;
    char *env = fmt("http://127.0.0.1:%d, %s", broker_free_port(), b.base);
    setenv("QUEEN_URL", env, 1);
    queen_client_options o;
    queen_client_options_defaults(&o);
    queen_client_error err;
    queen_client *c = queen_client_open(&o, &err);
    assert_non_null(c);
    char version[32];
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), 0);
    assert_int_equal(queen_client_retries(c), 1); /* the dead URL first */
    queen_client_close(c);
    /* The retry hook: called once, before the retry, with the refusal. */
    struct seen_retry seen = {0};
    o.on_retry = note_retry;
    o.on_retry_ctx = &seen;
    c = queen_client_open(&o, &err);
    assert_non_null(c);
    assert_int_equal(queen_client_health(c, version, sizeof version, &err), 0);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.attempt, 1);
    assert_string_equal(seen.code, "unreachable");
    assert_true(seen.wait_ms >= 0);
    queen_client_close(c);
    o.on_retry = NULL;
    unsetenv("QUEEN_URL");
    assert_null(queen_client_open(&o, &err));
    assert_non_null(strstr(err.detail, "QUEEN_URL"));
    free(env);
}

/* One kind per status, as in every client (clients/API.md, "Errors"). */
static void test_error_kinds(void **state)
{
    (void)state;
    static const struct { int status; const char *kind; } cases[] = {
        {400, "bad_request"}, {413, "bad_request"}, {401, "auth"}, {403, "auth"}, {404, "not_found"},
        {409, "conflict"}, {429, "rate_limited"}, {503, "unavailable"}, {500, "server"}, {502, "server"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        queen_client_error e = {.status = cases[i].status, .category = QUEEN_ERR_BAD_REQUEST};
        assert_string_equal(queen_client_error_kind(&e), cases[i].kind);
    }
    queen_client_error p = {.status = 200, .category = QUEEN_ERR_PRECONDITION};
    assert_string_equal(queen_client_error_kind(&p), "precondition");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expiry_is_refused_before_sending),
        cmocka_unit_test(test_error_kinds),
        cmocka_unit_test(test_queen_url_is_read),
        cmocka_unit_test(test_jdoc_keeps_raw_numbers),
        cmocka_unit_test(test_number_equality_is_exact),
        cmocka_unit_test(test_shortest_double_text),
        cmocka_unit_test(test_builder_shapes_one_bundle),
        cmocka_unit_test(test_token_tenant_and_escaping_on_the_wire),
        cmocka_unit_test(test_retry_after_is_waited_for),
        cmocka_unit_test(test_connections_are_kept_alive),
        cmocka_unit_test(test_timeouts_are_typed_and_retried_only_when_safe),
        cmocka_unit_test(test_a_view_has_its_own_timeout),
        cmocka_unit_test(test_one_handle_many_threads),
        cmocka_unit_test(test_consume_stops_cleanly_and_reports_refusals),
        cmocka_unit_test(test_popped_messages_read_without_a_json_library),
        cmocka_unit_test(test_category_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
