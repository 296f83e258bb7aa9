/* HTTP/1.1 as the edge speaks it (src/server/conn.c, h1.c), on raw sockets
 * where a client library would hide the point:
 *  - keep-alive: requests one after another on one connection;
 *  - pipelining: requests sent in one write are answered in order;
 *  - Expect: 100-continue: "100 Continue" only once the head is accepted,
 *    never for a body refused from its head;
 *  - chunked request bodies, in pieces, are decoded whole;
 *  - a chunked body is refused (413, closed) as soon as it passes
 *    QUEEN_MAX_BODY_BYTES, while its sender is still sending;
 *  - a client that does not read its answer is cut at
 *    QUEEN_RESPONSE_WRITE_TIMEOUT_MS and the answer's memory returned;
 *    while it holds its answer, another large answer past
 *    QUEEN_MAX_INFLIGHT_ANSWER_BYTES is 503 answer_budget_exhausted. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "rawsock.h"
#include "testutil.h"

static test_broker B;

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_MAX_BODY_BYTES=16384", "QUEEN_RESPONSE_WRITE_TIMEOUT_MS=6000",
                                      "QUEEN_MAX_INFLIGHT_ANSWER_BYTES=4194304", NULL};
    if (!broker_start(&B, env)) {
        fprintf(stderr, "broker did not become healthy (log: %s)\n", B.log);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* Answers read off a keep-alive connection, each whole (by Content-Length). */
typedef struct answers {
    int n;
    int status[8];
    char body[8][512];
    bool closed;
    char *text; /* everything read */
    size_t len;
} answers;

/* Parses whole answers out of a->text; true once want are in. */
static bool parse_answers(answers *a, int want)
{
    a->n = 0;
    const char *p = a->text, *end = a->text + a->len;
    while (a->n < want && p < end) {
        const char *head_end = strstr(p, "\r\n\r\n");
        if (head_end == NULL)
            return false;
        int status = 0;
        if (sscanf(p, "HTTP/1.1 %d", &status) != 1)
            fail_msg("not an answer: %.*s", (int)(end - p), p);
        long clen = 0;
        for (const char *h = p; h < head_end; h = strstr(h, "\r\n") + 2)
            if (strncasecmp(h, "Content-Length:", 15) == 0)
                clen = strtol(h + 15, NULL, 10);
        const char *body = head_end + 4;
        if (body + clen > end)
            return false;
        if (status != 100) {
            a->status[a->n] = status;
            snprintf(a->body[a->n], sizeof a->body[a->n], "%.*s", (int)clen, body);
            a->n++;
        }
        p = body + clen;
    }
    return a->n >= want;
}

static answers read_answers(int fd, int want, int timeout_ms)
{
    answers a = {0};
    size_t cap = 1 << 16;
    a.text = calloc(1, cap);
    long long deadline = now_ms() + timeout_ms;
    while (!parse_answers(&a, want) && now_ms() < deadline) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t r = recv(fd, a.text + a.len, cap - a.len - 1, 0);
        if (r <= 0) {
            a.closed = true;
            parse_answers(&a, want);
            break;
        }
        a.len += (size_t)r;
    }
    return a;
}

static void send_all(int fd, const char *s)
{
    if (!raw_send(fd, s, strlen(s)))
        fail_msg("the broker stopped reading: %s", strerror(errno));
}

/* The connection is still open: a request on it is answered. */
static void still_serves(int fd)
{
    send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    answers a = read_answers(fd, 1, 5000);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.status[0], 200);
    free(a.text);
}

static void keep_alive_and_pipelined_requests_answered_in_order(void **state)
{
    (void)state;
    char *ns = pgtest_unique("h1ns");
    int fd = raw_connect(B.port);
    /* one after another */
    for (int i = 0; i < 3; i++)
        still_serves(fd);
    /* three in one write: a put, a get of it, an unknown path */
    char *three = fmt("PUT /api/v1/kv/%s/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: 26\r\n\r\n{\"value\":7,\"forever\":true}"
                      "GET /api/v1/kv/%s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                      ns, ns);
    send_all(fd, three);
    answers a = read_answers(fd, 3, 10000);
    if (a.n != 3)
        fail_msg("%d of 3 pipelined requests answered:\n%.*s", a.n, (int)a.len, a.text);
    assert_int_equal(a.status[0], 200);
    assert_int_equal(a.status[1], 200);
    assert_non_null(strstr(a.body[1], "7"));
    assert_int_equal(a.status[2], 404);
    assert_false(a.closed);
    free(a.text);
    still_serves(fd);
    close(fd);
    free(three);
    free(ns);
}

static void expect_continue_only_for_an_accepted_head(void **state)
{
    (void)state;
    char *ns = pgtest_unique("h1ec");
    int fd = raw_connect(B.port);
    char *head = fmt("PUT /api/v1/kv/%s/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: 26\r\nExpect: 100-continue\r\n\r\n",
                     ns);
    send_all(fd, head);
    char got[64] = {0};
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    ssize_t r = recv(fd, got, sizeof got - 1, 0);
    assert_true(r > 0);
    if (strncmp(got, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0)
        fail_msg("no 100 Continue before the body: %s", got);
    send_all(fd, "{\"value\":8,\"forever\":true}");
    answers a = read_answers(fd, 1, 5000);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.status[0], 200);
    free(a.text);
    still_serves(fd);
    close(fd);

    /* A body over the cap, declared: 413 at once, no 100, closed. */
    fd = raw_connect(B.port);
    send_all(fd, "PUT /api/v1/kv/ns/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Content-Length: 20000\r\nExpect: 100-continue\r\n\r\n");
    a = read_answers(fd, 1, 5000);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.status[0], 413);
    assert_null(strstr(a.text, " 100 "));
    assert_non_null(strstr(a.body[0], "\"body_too_large\""));
    free(a.text);
    close(fd);
    free(head);
    free(ns);
}

static void chunked_bodies_are_decoded_and_refused_past_the_cap(void **state)
{
    (void)state;
    char *ns = pgtest_unique("h1ch");
    int fd = raw_connect(B.port);
    char *head = fmt("PUT /api/v1/kv/%s/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n",
                     ns);
    send_all(fd, head);
    /* in pieces, one with an extension, split across writes */
    send_all(fd, "4\r\n{\"va\r\n");
    pause_ms(50);
    send_all(fd, "16;ext=1\r\nlue\":9,\"forever\":true}\r\n0\r\n");
    pause_ms(50);
    send_all(fd, "\r\n");
    answers a = read_answers(fd, 1, 5000);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.status[0], 200);
    free(a.text);
    char *path = fmt("/api/v1/kv/%s/k", ns);
    http_reply got = broker_http(&B, "GET", path, NULL, NULL);
    assert_int_equal(got.status, 200);
    assert_non_null(strstr(got.body, "9"));
    http_reply_free(&got);
    free(path);
    still_serves(fd);
    close(fd);

    /* Past the cap (16 KiB): 413 while the sender is still sending, closed;
     * the terminating chunk is never sent. */
    fd = raw_connect(B.port);
    send_all(fd, "PUT /api/v1/kv/ns/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");
    char chunk[1100];
    int n = snprintf(chunk, sizeof chunk, "400\r\n");
    memset(chunk + n, ' ', 1024);
    memcpy(chunk + n + 1024, "\r\n", 3);
    for (int i = 0; i < 17; i++)
        (void)raw_send(fd, chunk, strlen(chunk));
    a = read_answers(fd, 1, 5000);
    if (a.n != 1 || a.status[0] != 413)
        fail_msg("a chunked body past the cap was not refused at once:\n%.*s", (int)a.len, a.text);
    assert_non_null(strstr(a.body[0], "\"body_too_large\""));
    assert_non_null(strstr(a.text, "Connection: close"));
    free(a.text);
    close(fd);
    free(head);
    free(ns);
}

/* The status of a GET whose answer may be large, read off a raw socket
 * until the declared length has come (a client library collecting 10 MB
 * into one growing buffer is slow under ASan, slow enough for the write
 * deadline to cut it). Returns the status, *len the Content-Length. */
static int big_get(const char *path, long *len)
{
    int fd = raw_connect(B.port);
    char *get = fmt("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    send_all(fd, get);
    free(get);
    bool closed = false;
    char *text = raw_read_until_closed(fd, 60000, 512, &closed);
    int status = 0;
    sscanf(text, "HTTP/1.1 %d", &status);
    const char *cl = strcasestr(text, "Content-Length:");
    *len = cl ? strtol(cl + 15, NULL, 10) : 0;
    free(text);
    close(fd);
    return status;
}

static void a_client_that_does_not_read_is_cut_at_the_write_deadline(void **state)
{
    (void)state;
    /* An answer of about 10 MB (more than the socket buffers hold): a
     * queue's messages, popped together. */
    char *q = pgtest_unique("h1big");
    char *payload = malloc(10000);
    memset(payload, 'x', 9999);
    payload[9999] = '\0';
    /* one push each: this broker's body cap is 16 KiB */
    for (int i = 0; i < 1000; i++) {
        char *body = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"%s\"}]}", q, payload);
        http_reply r = broker_http(&B, "POST", "/api/v1/push", body, NULL);
        assert_int_equal(r.status, 201);
        http_reply_free(&r);
        free(body);
    }
    /* the listing of the queue's messages: about 10 MB, leases nothing */
    char *list = fmt("/api/v1/messages?queue=%s&limit=1000", q);
    long size = 0;
    assert_int_equal(big_get(list, &size), 200);
    if (size < 8 * 1000 * 1000)
        fail_msg("the listing is %ld bytes, not the 10 MB the test needs", size);

    long long cut0 = http_metric(&B, "http", "connections", "writeTimeouts");
    int fd = raw_connect(B.port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    char *get = fmt("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", list);
    send_all(fd, get);
    /* held (the budget admits one answer alone, whatever its size) ... */
    WAIT_UNTIL(http_metric(&B, "http", "connections", "answerBytes") > 4194304, 10000,
               "the unread answer is not held");
    /* ... so another is refused rather than held too */
    http_reply busy = broker_http(&B, "GET", list, NULL, NULL);
    assert_int_equal(busy.status, 503);
    assert_non_null(strstr(busy.body, "\"answer_budget_exhausted\""));
    http_reply_free(&busy);
    /* never read: cut within the deadline and a tick, its memory returned */
    WAIT_UNTIL(http_metric(&B, "http", "connections", "writeTimeouts") == cut0 + 1, 20000,
               "the client that does not read was not cut");
    WAIT_UNTIL(http_metric(&B, "http", "connections", "answerBytes") < 16384, 5000,
               "the cut answer's memory is still held");
    assert_int_equal(big_get(list, &size), 200);
    close(fd);
    free(get);
    free(list);
    free(payload);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keep_alive_and_pipelined_requests_answered_in_order),
        cmocka_unit_test(expect_continue_only_for_an_accepted_head),
        cmocka_unit_test(chunked_bodies_are_decoded_and_refused_past_the_cap),
        cmocka_unit_test(a_client_that_does_not_read_is_cut_at_the_write_deadline),
    };
    return cmocka_run_group_tests_name("http_h1", tests, setup, teardown);
}
