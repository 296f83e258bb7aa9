/* The HTTP edge's sizing and budgets against a real broker: the HTTP threads
 * follow the resolved connection pool; a body that would pass the global
 * body budget is 503 with Retry-After and writes nothing, and the budget is
 * free again once the request holding it ends; a body over the cap is 413;
 * connections beyond QUEEN_MAX_CONNECTIONS are not served while the first
 * ones keep working. Raw sockets where curl would hide the point (a body
 * sent in part and held, a connection kept open). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static void start(test_broker *b, const char *const *env)
{
    if (!broker_start(b, env))
        fail_msg("broker did not become healthy (log: %s)", b->log);
}

/* QUEEN_PG_POOL and QUEEN_HTTP_THREADS left at 0: the broker serves with as
 * many HTTP threads as the pool it opened (README: "0: the same as the
 * connection pool"), both from one resolved config. */
static void http_threads_follow_the_pool(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_LOG_LEVEL=info", "QUEEN_PG_POOL=0", "QUEEN_HTTP_THREADS=0", NULL};
    test_broker b;
    start(&b, env);
    long long pool = http_metric(&b, "engine", "pool", "size");
    char *log = read_file(b.log);
    const char *at = strstr(log, " threads (database pool ");
    if (at == NULL)
        fail_msg("no listening line with the thread count in %s", b.log);
    const char *with = at;
    while (with > log && with[-1] != ' ')
        with--;
    int threads = atoi(with);
    int logged_pool = atoi(at + strlen(" threads (database pool "));
    assert_true(pool >= 8);
    assert_int_equal(threads, pool);
    assert_int_equal(logged_pool, pool);
    free(log);
    assert_int_equal(broker_stop(&b), 0);
}

static void tick(void)
{
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
}

static int tcp_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect to 127.0.0.1:%d failed", port);
    return fd;
}

static void send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0)
            fail_msg("send failed");
        buf += n;
        len -= (size_t)n;
    }
}

/* One response (Content-Length framed) read within timeout_ms: its status,
 * 0 when none came in time, -1 when the server closed the connection. */
static int read_status(int fd, int timeout_ms)
{
    char buf[8192];
    size_t len = 0;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end != NULL) {
            const char *cl = strcasestr(buf, "\r\ncontent-length:");
            size_t body = cl && cl < end ? (size_t)atol(cl + 17) : 0;
            if (len >= (size_t)(end + 4 - buf) + body) {
                int status = 0;
                sscanf(buf, "HTTP/1.%*d %d", &status);
                return status;
            }
        }
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        if (len >= sizeof buf - 1)
            fail_msg("response larger than the test's buffer");
    }
}

static int health_on(int fd, int timeout_ms)
{
    static const char get[] = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    send_all(fd, get, sizeof get - 1);
    return read_status(fd, timeout_ms);
}

/* ---- the body budget --------------------------------------------------- */

#define CAP 65536
#define BUDGET 100000

/* A body of len bytes, a JSON string, that POST /api/v1/kv refuses (400:
 * neither an op list nor an object), so probing writes nothing whatever it
 * answers. */
static char *probe_body(size_t len)
{
    char *p = malloc(len + 1);
    memset(p, 'x', len);
    p[0] = '"';
    p[len - 1] = '"';
    p[len] = '\0';
    return p;
}

static long probe(const test_broker *b, const char *body)
{
    http_reply r = broker_http(b, "POST", "/api/v1/kv", body, NULL);
    long s = r.status;
    http_reply_free(&r);
    return s;
}

/* Polls until the probe answers want (or 10 s pass): the broker takes and
 * returns budget on its own threads, after the socket events that cause it. */
static void probe_until(const test_broker *b, const char *body, long want)
{
    long long deadline = now_ms() + 10000;
    long got;
    while ((got = probe(b, body)) != want) {
        if (now_ms() > deadline)
            fail_msg("the probe answered %ld, never %ld", got, want);
        tick();
    }
}

static long pop_status(const test_broker *b, const char *queue)
{
    char *path = fmt("/api/v1/pop/queue/%s?autoAck=true", queue);
    http_reply r = broker_http(b, "GET", path, NULL, NULL);
    long s = r.status;
    http_reply_free(&r);
    free(path);
    return s;
}

static void over_budget_is_503_and_the_budget_returns(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_MAX_BODY_BYTES=65536", "QUEEN_MAX_INFLIGHT_BODY_BYTES=100000", "QUEEN_PG_POOL=2",
                         "QUEEN_ACCESS_LOG=0", NULL};
    test_broker b;
    start(&b, env);
    char *q = pgtest_unique("budget");
    char *payload = malloc(45001);
    memset(payload, 'x', 45000);
    payload[45000] = '\0';
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"%s\"}]}", q, payload);
    assert_true(strlen(push) + 60000 + 2 > BUDGET && strlen(push) < CAP);
    char *small = probe_body(45000);

    /* Admitted while the budget is free (400: the probe is not a kv call). */
    assert_int_equal(probe(&b, small), 400);

    /* A request declares 60000 bytes and sends a few: it holds them. */
    int hog = tcp_open(b.port);
    static const char head[] = "POST /api/v1/push HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                               "Content-Length: 60000\r\n\r\n{\"items\":[";
    send_all(hog, head, sizeof head - 1);
    probe_until(&b, small, 503);

    /* A real push that would pass the budget: 503, Retry-After, envelope. */
    http_reply r = broker_http(&b, "POST", "/api/v1/push", push, NULL);
    http_expect(&r, 503, "unavailable", "body_budget_exhausted");
    char *ra = http_reply_header(&r, "Retry-After");
    assert_non_null(ra);
    assert_string_equal(ra, "1");
    free(ra);
    http_reply_free(&r);
    assert_int_equal(pop_status(&b, q), 204); /* nothing written */

    /* The holder leaves without finishing its body: its bytes come back. */
    close(hog);
    probe_until(&b, small, 400);
    json_t *v = http_ok(&b, "POST", "/api/v1/push", push, 201);
    json_decref(v);
    assert_int_equal(pop_status(&b, q), 200);

    /* Each answered request gave its bytes back: five probes in a row would
     * pass the budget (5 x 45001 > 100000) if any had kept them. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(probe(&b, small), 400);

    free(small);
    free(push);
    free(payload);
    free(q);
    assert_int_equal(broker_stop(&b), 0);
}

/* Over the cap: 413 (declared or streamed), nothing held afterwards. */
static void over_the_cap_is_413(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_MAX_BODY_BYTES=65536", "QUEEN_MAX_INFLIGHT_BODY_BYTES=100000", "QUEEN_PG_POOL=2",
                         "QUEEN_ACCESS_LOG=0", NULL};
    test_broker b;
    start(&b, env);
    char *q = pgtest_unique("cap");
    char *pad = malloc(CAP + 1);
    memset(pad, 'x', CAP);
    pad[CAP] = '\0';
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"%s\"}]}", q, pad);
    http_refused(&b, "POST", "/api/v1/push", push, 413, "payload_too_large", "body_too_large");
    assert_int_equal(pop_status(&b, q), 204);
    /* Exactly at the cap is admitted (and refused only for what it says). */
    char *at_cap = probe_body(CAP);
    assert_int_equal(probe(&b, at_cap), 400);
    assert_int_equal(probe(&b, at_cap), 400);
    free(at_cap);
    free(push);
    free(pad);
    free(q);
    assert_int_equal(broker_stop(&b), 0);
}

/* ---- the connection limit ---------------------------------------------- */

/* One HTTP thread, so the limit is not split among threads. */
static void connections_beyond_the_limit_wait(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_MAX_CONNECTIONS=3", "QUEEN_HTTP_THREADS=1", "QUEEN_PG_POOL=2",
                         "QUEEN_ACCESS_LOG=0", NULL};
    test_broker b;
    start(&b, env);
    int fd[3];
    for (int i = 0; i < 3; i++) {
        fd[i] = tcp_open(b.port);
        assert_int_equal(health_on(fd[i], 10000), 200);
    }
    /* The fourth is not served while three are open (MHD stops accepting:
     * it waits in the listen backlog, or is closed). */
    int extra = tcp_open(b.port);
    int got = health_on(extra, 1000);
    print_message("fourth connection: %d\n", got);
    if (got > 0)
        fail_msg("a connection beyond QUEEN_MAX_CONNECTIONS=3 was answered %d", got);
    /* The first ones keep working, on their kept-alive connections. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(health_on(fd[i], 10000), 200);
    /* One leaves: the waiting one is served (a closed one would say -1). */
    close(fd[0]);
    if (got == 0)
        assert_int_equal(read_status(extra, 10000), 200);
    close(extra);
    close(fd[1]);
    close(fd[2]);
    assert_int_equal(broker_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(http_threads_follow_the_pool),
        cmocka_unit_test(over_budget_is_503_and_the_budget_returns),
        cmocka_unit_test(over_the_cap_is_413),
        cmocka_unit_test(connections_beyond_the_limit_wait),
    };
    return cmocka_run_group_tests_name("http_edge", tests, NULL, NULL);
}
