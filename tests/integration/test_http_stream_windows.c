/* The older window API (docs/streams-windows.md, the /api/v1/stream routes) against a
 * real broker: define; a long poll suspended until a window is ready (woken
 * by the engine's re-check, no push); three windows of 1 s handed out in
 * order with their messages (their times set in the database); a second
 * consumer of the group not getting the leased window; a nack and an
 * expired lease handing it out again; ack advancing; renew; seek rewinding;
 * a key being claimed passed over, not waited for; the resource reads and
 * the delete; a waiting poll ended by its client's hang-up and answered
 * 204 by a stop; and 400s {error, reason, detail} for bad bodies. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static long long polls_waiting(void)
{
    return http_metric(&http_broker, "http", NULL, "longPollsWaiting");
}

/* A stream poll on a thread of its own: its status and body when in. */
typedef struct timed_poll {
    const test_broker *b; /* NULL: http_broker */
    const char *body;
    long status;
    char *reply;
    long long took_ms;
} timed_poll;

static void *timed_poll_run(void *arg)
{
    timed_poll *p = arg;
    long long t0 = now_ms();
    http_reply r = broker_http(p->b != NULL ? p->b : &http_broker, "POST", "/api/v1/stream/poll", p->body, NULL);
    p->took_ms = now_ms() - t0;
    p->status = r.status;
    p->reply = r.body != NULL ? strdup(r.body) : NULL;
    http_reply_free(&r);
    return NULL;
}

/* The window of a poll that must answer 200 (the caller frees it). */
static json_t *poll_window(const char *body)
{
    json_t *r = http_ok(&http_broker, "POST", "/api/v1/stream/poll", body, 200);
    json_t *w = json_incref(json_object_get(r, "window"));
    json_decref(r);
    assert_true(json_is_object(w));
    return w;
}

/* The payload.n of the window's messages, as "1,2". */
static char *ns_of(const json_t *w)
{
    char buf[128] = "";
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(w, "messages"), i, m) {
        size_t at = strlen(buf);
        snprintf(buf + at, sizeof buf - at, "%s%lld", i ? "," : "",
                 jnum(json_object_get(json_object_get(m, "payload"), "n")));
    }
    return strdup(buf);
}

static void assert_ns(const json_t *w, const char *want)
{
    char *got = ns_of(w);
    assert_string_equal(got, want);
    free(got);
}

static void ack(const json_t *w, bool success, long status)
{
    char *body = fmt("{\"windowId\":\"%s\",\"leaseId\":\"%s\",\"success\":%s}", jstr(w, "id"), jstr(w, "leaseId"),
                     success ? "true" : "false");
    json_decref(http_ok(&http_broker, "POST", "/api/v1/stream/ack", body, status));
    free(body);
}

static void windows(void **state)
{
    (void)state;
    char *q = pgtest_unique("swq"), *name = pgtest_unique("sw");
    char *def = fmt("{\"name\":\"%s\",\"namespace\":\"test\",\"source_queue_names\":[\"%s\"],\"partitioned\":false,"
                    "\"window_type\":\"tumbling\",\"window_duration_ms\":1000,\"window_grace_period_ms\":0,"
                    "\"window_lease_timeout_ms\":1000}",
                    name, q);
    json_t *r = http_ok(&http_broker, "POST", "/api/v1/stream/define", def, 200);
    assert_true(jtrue(r, "success"));
    assert_true(jtrue(r, "created"));
    json_decref(r);
    char *g1 = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timeout\":0}", name);
    char *g1wait = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timeout\":10000}", name);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/stream/poll", g1, 204));

    /* A long poll waits: the messages come, but only their times (set in
     * the database, without a push) make a window ready. */
    timed_poll waiter = {.body = g1wait};
    pthread_t t;
    long long waiting = polls_waiting();
    pthread_create(&t, NULL, timed_poll_run, &waiter);
    WAIT_UNTIL(polls_waiting() > waiting, 5000, "the stream poll was never suspended");
    char *items = fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":{\"n\":1},\"transactionId\":\"m1\"},"
                      "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":{\"n\":2},\"transactionId\":\"m2\"},"
                      "{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":{\"n\":3},\"transactionId\":\"m3\"},"
                      "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":{\"n\":4},\"transactionId\":\"m4\"},"
                      "{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":{\"n\":5},\"transactionId\":\"m5\"},"
                      "{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":{\"n\":6},\"transactionId\":\"m6\"}]}",
                      q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", items, 201));
    /* Three windows of 1 s, 100 s ago: m1 m2 | m3 m4 | m5 m6. */
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    assert_int_equal(pgtest_int(c,
                                "WITH u AS (UPDATE queen.log_messages m SET created_at = "
                                "to_timestamp(floor(extract(epoch FROM now())) - 100) + make_interval(secs => "
                                "CASE m.transaction_id WHEN 'm1' THEN 0.1 WHEN 'm2' THEN 0.2 WHEN 'm3' THEN 1.1 "
                                "WHEN 'm4' THEN 1.2 WHEN 'm5' THEN 2.1 ELSE 2.9 END) "
                                "FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id "
                                "WHERE lp.id = m.partition_id AND q.name = $1 RETURNING 1) SELECT count(*) FROM u",
                                1, p),
                     6);
    PQfinish(c);
    pthread_join(t, NULL);
    assert_int_equal(waiter.status, 200);
    json_t *whole = json_parse(waiter.reply);
    json_t *w1 = json_incref(json_object_get(whole, "window"));
    json_decref(whole);
    free(waiter.reply);
    assert_string_equal(jstr(w1, "key"), "__GLOBAL__");
    assert_ns(w1, "1,2");

    /* A second consumer of the group gets nothing while it is leased. */
    json_decref(http_ok(&http_broker, "POST", "/api/v1/stream/poll", g1, 204));

    /* A nack: the same window again. */
    ack(w1, false, 200);
    json_t *w1b = poll_window(g1);
    assert_string_equal(jstr(w1b, "id"), jstr(w1, "id"));
    assert_string_not_equal(jstr(w1b, "leaseId"), jstr(w1, "leaseId"));
    assert_ns(w1b, "1,2");

    /* The lease of 1 s runs out: a waiting poll gets the window again. */
    json_t *w1c = poll_window(g1wait);
    assert_string_equal(jstr(w1c, "id"), jstr(w1, "id"));
    /* The expired lease acks nothing. */
    ack(w1b, true, 409);

    /* Renew, then ack: the next windows, in order. */
    char *renew = fmt("{\"leaseId\":\"%s\",\"extend_ms\":60000}", jstr(w1c, "leaseId"));
    r = http_ok(&http_broker, "POST", "/api/v1/stream/renew-lease", renew, 200);
    assert_non_null(jstr(r, "leaseExpiresAt"));
    json_decref(r);
    ack(w1c, true, 200);
    json_t *w2 = poll_window(g1);
    assert_ns(w2, "3,4");
    ack(w2, true, 200);
    json_t *w3 = poll_window(g1);
    assert_ns(w3, "5,6");
    ack(w3, true, 200);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/stream/poll", g1, 204));

    /* Seek back into window 2: windows 2 and 3 again. */
    char *seek = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timestamp\":\"%s\"}", name, jstr(w2, "start"));
    r = http_ok(&http_broker, "POST", "/api/v1/stream/seek", seek, 200);
    assert_string_equal(jstr(r, "timestamp"), jstr(w2, "start"));
    json_decref(r);
    json_t *w2b = poll_window(g1);
    assert_string_equal(jstr(w2b, "id"), jstr(w2, "id"));
    assert_ns(w2b, "3,4");

    json_decref(w1);
    json_decref(w1b);
    json_decref(w1c);
    json_decref(w2);
    json_decref(w2b);
    json_decref(w3);
    free(seek);
    free(renew);
    free(items);
    free(g1wait);
    free(g1);
    free(def);
    free(name);
    free(q);
}

static void resources(void **state)
{
    (void)state;
    char *q = pgtest_unique("swr"), *name = pgtest_unique("swr");
    http_refused_fmt("GET", fmt("/api/v1/resources/streams/%s", name), NULL, 404, "not_found", "streams_window_not_found");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/stream/define"),
                            fmt("{\"name\":\"%s\",\"source_queue_names\":[\"%s\"],\"partitioned\":true,"
                                "\"window_duration_ms\":1000,\"window_grace_period_ms\":0}",
                                name, q),
                            200));
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%s\",\"partition\":\"p\",\"payload\":{\"n\":1}}]}", q), 201));
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    assert_int_equal(pgtest_int(c,
                                "WITH u AS (UPDATE queen.log_messages m SET created_at = now() - interval '10 s' "
                                "FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id "
                                "WHERE lp.id = m.partition_id AND q.name = $1 RETURNING 1) SELECT count(*) FROM u",
                                1, p),
                     1);
    PQfinish(c);
    char *poll = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timeout\":0}", name);
    json_t *w = poll_window(poll);
    assert_string_equal(jstr(w, "key"), "p");

    json_t *r = http_ok_fmt("GET", fmt("/api/v1/resources/streams/%s", name), NULL, 200);
    assert_string_equal(jstr(r, "name"), name);
    assert_true(jtrue(r, "partitioned"));
    assert_int_equal(jint(r, "windowDurationMs"), 1000);
    json_decref(r);
    r = http_ok_fmt("GET", fmt("/api/v1/resources/streams/%s/consumers", name), NULL, 200);
    json_t *c0 = json_array_get(json_object_get(r, "consumers"), 0);
    assert_string_equal(jstr(c0, "consumerGroup"), "g");
    assert_string_equal(jstr(c0, "streamKey"), "p");
    assert_non_null(jstr(c0, "leaseExpiresAt"));
    json_decref(r);
    r = http_ok_fmt("GET", strdup("/api/v1/resources/streams"), NULL, 200);
    bool listed = false;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "streams"), i, s) {
        if (strcmp(jstr(s, "name"), name) == 0) {
            listed = true;
            assert_int_equal(jint(s, "activeLeases"), 1);
            assert_int_equal(jint(s, "consumerGroups"), 1);
        }
    }
    assert_true(listed);
    json_decref(r);
    r = http_ok_fmt("GET", strdup("/api/v1/resources/streams/stats"), NULL, 200);
    assert_true(jint(r, "totalStreams") >= 1);
    assert_true(jint(r, "activeLeases") >= 1);
    json_decref(r);

    r = http_ok_fmt("DELETE", fmt("/api/v1/resources/streams/%s", name), NULL, 200);
    assert_true(jtrue(r, "success"));
    json_decref(r);
    http_refused_fmt("DELETE", fmt("/api/v1/resources/streams/%s", name), NULL, 404, "not_found",
                     "streams_window_not_found");
    http_refused_fmt("GET", fmt("/api/v1/resources/streams/%s/consumers", name), NULL, 404, "not_found",
                     "streams_window_not_found");
    /* Its lease went with it. */
    char *ackb = fmt("{\"leaseId\":\"%s\"}", jstr(w, "leaseId"));
    http_refused(&http_broker, "POST", "/api/v1/stream/ack", ackb, 409, "conflict", "streams_window_lease_lost");
    free(ackb);
    json_decref(w);
    free(poll);
    free(name);
    free(q);
}

/* A key another poll is claiming (its cursor row locked) is passed over,
 * not waited for: the poll serves the next key at once. */
static void claim_skips_locked(void **state)
{
    (void)state;
    char *q = pgtest_unique("swl"), *name = pgtest_unique("swl");
    json_decref(http_ok_fmt("POST", strdup("/api/v1/stream/define"),
                            fmt("{\"name\":\"%s\",\"source_queue_names\":[\"%s\"],\"partitioned\":true,"
                                "\"window_duration_ms\":1000,\"window_grace_period_ms\":0}",
                                name, q),
                            200));
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":{\"n\":1}},"
                                "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":{\"n\":2}}]}",
                                q),
                            201));
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    assert_int_equal(pgtest_int(c,
                                "WITH u AS (UPDATE queen.log_messages m SET created_at = now() - interval '10 s' "
                                "FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id "
                                "WHERE lp.id = m.partition_id AND q.name = $1 RETURNING 1) SELECT count(*) FROM u",
                                1, p),
                     2);
    /* The group's cursors, made by a seek to before the messages. */
    json_decref(http_ok_fmt("POST", strdup("/api/v1/stream/seek"),
                            fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timestamp\":\"2000-01-01T00:00:00Z\"}",
                                name),
                            200));
    const char *n[] = {name};
    PQclear(PQexec(c, "BEGIN"));
    assert_int_equal(pgtest_int(c,
                                "WITH l AS (SELECT 1 FROM queen.stream_window_cursors c JOIN queen.stream_windows s "
                                "ON s.id = c.stream_id WHERE s.name = $1 AND c.key = 'a' FOR UPDATE OF c) "
                                "SELECT count(*) FROM l",
                                1, n),
                     1);
    char *poll = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timeout\":0}", name);
    json_t *wb = poll_window(poll);
    assert_string_equal(jstr(wb, "key"), "b");
    json_decref(http_ok(&http_broker, "POST", "/api/v1/stream/poll", poll, 204));
    PQclear(PQexec(c, "ROLLBACK"));
    json_t *wa = poll_window(poll);
    assert_string_equal(jstr(wa, "key"), "a");
    PQfinish(c);
    json_decref(wa);
    json_decref(wb);
    free(poll);
    free(name);
    free(q);
}

/* On a broker of its own: a client that hangs up while its poll waits ends
 * the wait at once (499, no waiter left), and a stop answers a waiting poll
 * 204 at once; the broker then exits cleanly (under the sanitizers: nothing
 * of the waits leaked). */
static void hang_up_and_stop(void **state)
{
    (void)state;
    test_broker b;
    if (!broker_start(&b, NULL))
        fail_msg("broker did not become healthy (log: %s)", b.log);
    char *q = pgtest_unique("sws"), *name = pgtest_unique("sws");
    char *def = fmt("{\"name\":\"%s\",\"source_queue_names\":[\"%s\"]}", name, q);
    http_reply r = broker_http(&b, "POST", "/api/v1/stream/define", def, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char *body = fmt("{\"streamName\":\"%s\",\"consumerGroup\":\"g\",\"timeout\":20000}", name);

    char *url = fmt("%s/api/v1/stream/poll", b.base);
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 500L); /* hangs up while the poll waits */
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    assert_int_equal(curl_easy_perform(curl), CURLE_OPERATION_TIMEDOUT);
    curl_easy_cleanup(curl);
    curl_slist_free_all(h);
    WAIT_UNTIL(http_requests_counted(&b, "POST", "/api/v1/stream/poll", 499) == 1, 5000,
               "the orphaned stream poll was not answered 499 when its client hung up");
    WAIT_UNTIL(http_metric(&b, "http", NULL, "longPollsWaiting") == 0, 5000, "the orphaned stream poll still waits");

    timed_poll waiter = {.b = &b, .body = body};
    pthread_t t;
    pthread_create(&t, NULL, timed_poll_run, &waiter);
    WAIT_UNTIL(http_metric(&b, "http", NULL, "longPollsWaiting") == 1, 5000, "the stream poll was never suspended");
    int rc = broker_stop(&b);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(waiter.status, 204);
    assert_true(waiter.took_ms < 10000);
    free(waiter.reply);
    free(url);
    free(body);
    free(def);
    free(name);
    free(q);
}

static void bad_bodies(void **state)
{
    (void)state;
    http_refused(&http_broker, "POST", "/api/v1/stream/define", "{\"name\":", 400, "bad_body", "invalid_json");
    http_refused(&http_broker, "POST", "/api/v1/stream/define", "{\"name\":\"x\",\"source_queue_names\":[]}", 400,
                 "bad_request", "streams_window_bad_sources");
    http_refused(&http_broker, "POST", "/api/v1/stream/define",
                 "{\"name\":\"x\",\"source_queue_names\":[\"q\"],\"window_type\":\"sliding\"}", 400, "bad_request",
                 "streams_window_bad_config");
    http_refused(&http_broker, "POST", "/api/v1/stream/poll", "{\"streamName\":\"x\",\"consumerGroup\":\"g\",\"timeout\":-1}",
                 400, "bad_request", "streams_window_bad_timeout");
    http_refused(&http_broker, "POST", "/api/v1/stream/poll", "{\"streamName\":\"no-such-stream\",\"consumerGroup\":\"g\"}",
                 400, "bad_request", "streams_window_not_found");
    http_refused(&http_broker, "POST", "/api/v1/stream/ack", "{\"leaseId\":\"nope\"}", 400, "bad_request",
                 "streams_window_bad_lease");
    http_refused(&http_broker, "POST", "/api/v1/stream/renew-lease",
                 "{\"leaseId\":\"00000000-0000-0000-0000-000000000000\"}", 409, "conflict", "streams_window_lease_lost");
    http_refused(&http_broker, "POST", "/api/v1/stream/seek", "{\"streamName\":\"x\",\"consumerGroup\":\"g\"}", 400,
                 "bad_request", "streams_window_not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(windows),
        cmocka_unit_test(resources),
        cmocka_unit_test(claim_skips_locked),
        cmocka_unit_test(hang_up_and_stop),
        cmocka_unit_test(bad_bodies),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
