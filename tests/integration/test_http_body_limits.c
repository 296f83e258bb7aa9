/* What one request's body may cost the broker, against a real broker:
 * a Content-Length over the cap is refused from the header (413 before any
 * body byte is sent, no "100 Continue", the connection closed). Raw sockets
 * where curl would hide the point (what arrives before the body is sent). */
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
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "testutil.h"

static test_broker broker;

static int group_setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_ACCESS_LOG=0", "QUEEN_PG_POOL=2", NULL};
    return broker_start(&broker, env) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return broker_stop(&broker) == 0 ? 0 : -1;
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

/* Reads until the peer closes or timeout_ms passes. Returns what arrived
 * (malloc'd, NUL-terminated) and sets *closed when the peer closed. */
static char *read_until_closed(int fd, int timeout_ms, bool *closed)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    long long deadline = now_ms() + timeout_ms;
    *closed = false;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)n;
        if (len >= cap - 1)
            fail_msg("more answer than the test expects");
    }
    buf[len] = '\0';
    return buf;
}

/* The first status line's code in text, 0 when there is none. */
static int first_status(const char *text)
{
    int status = 0;
    if (sscanf(text, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

/* Sends only the headers of a request declaring 10 GiB and asserts the
 * refusal arrives before any body byte, as the first answer, and the
 * connection is closed after it. */
static void declared_size_refused_from_the_header(const char *extra_header)
{
    int fd = tcp_open(broker.port);
    char *head = fmt("POST /api/v1/push HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     "Content-Length: 10737418240\r\n%s\r\n",
                     extra_header);
    long long t0 = now_ms();
    send_all(fd, head, strlen(head));
    bool closed = false;
    char *answer = read_until_closed(fd, 15000, &closed);
    long long took = now_ms() - t0;
    print_message("declared 10 GiB%s: answered and closed in %lld ms\n", *extra_header ? " (Expect)" : "", took);
    if (first_status(answer) != 413)
        fail_msg("the first answer to a 10 GiB declaration without its body is not 413: '%.200s'", answer);
    assert_non_null(strstr(answer, "\"payload_too_large\""));
    assert_non_null(strstr(answer, "\"body_too_large\""));
    assert_null(strstr(answer, " 100 Continue"));
    if (!closed)
        fail_msg("the connection stayed open after the 413");
    free(answer);
    free(head);
    close(fd);
}

static void huge_content_length_is_413_before_the_body(void **state)
{
    (void)state;
    declared_size_refused_from_the_header("");
}

static void huge_content_length_with_expect_gets_no_100_continue(void **state)
{
    (void)state;
    declared_size_refused_from_the_header("Expect: 100-continue\r\n");
}

/* A body the broker will take still gets its 100 Continue, and an answer
 * once it is sent. */
static void admissible_body_with_expect_is_continued(void **state)
{
    (void)state;
    int fd = tcp_open(broker.port);
    static const char head[] = "POST /api/v1/kv HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                               "Content-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
    send_all(fd, head, sizeof head - 1);
    char buf[256] = "";
    size_t len = 0;
    long long deadline = now_ms() + 10000;
    while (strstr(buf, "\r\n\r\n") == NULL) {
        if (now_ms() > deadline)
            fail_msg("no 100 Continue for an admissible body: '%s'", buf);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            fail_msg("closed before 100 Continue: '%.*s'", (int)len, buf);
        len += (size_t)n;
        buf[len] = '\0';
    }
    assert_int_equal(first_status(buf), 100);
    send_all(fd, "[]", 2);
    bool closed = false;
    char *answer = read_until_closed(fd, 15000, &closed);
    char *all = fmt("%s%s", buf, answer);
    const char *second = strstr(all, "\r\n\r\n") + 4;
    assert_int_equal(first_status(second), 200);
    free(all);
    free(answer);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(huge_content_length_is_413_before_the_body),
        cmocka_unit_test(huge_content_length_with_expect_gets_no_100_continue),
        cmocka_unit_test(admissible_body_with_expect_is_continued),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
