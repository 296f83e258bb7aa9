/* What one request's body may cost the broker, against a real broker:
 * a Content-Length over the cap is refused from the header (413 before any
 * body byte is sent, no "100 Continue", the connection closed); a body of
 * many tiny JSON values within the byte cap is refused before it is parsed
 * (413 body_too_many_values) without the broker's peak memory growing with
 * it; too deep a body is 400; legitimate large bodies (a 1 MB JSON document
 * as a payload, a 256-op kv call) still pass. Raw sockets where curl would
 * hide the point (what arrives before the body is sent). */
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
#include "pgtest.h"
#include "rawsock.h"
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
    int fd = raw_connect(broker.port);
    char *head = fmt("POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: 10737418240\r\n%s\r\n",
                     extra_header);
    long long t0 = now_ms();
    assert_true(raw_send(fd, head, strlen(head)));
    bool closed = false;
    char *answer = raw_read_until_closed(fd, 15000, 65535, &closed);
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
    int fd = raw_connect(broker.port);
    static const char head[] = "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
    assert_true(raw_send(fd, head, sizeof head - 1));
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
    assert_true(raw_send(fd, "[]", 2));
    bool closed = false;
    char *answer = raw_read_until_closed(fd, 15000, 65535, &closed);
    char *all = fmt("%s%s", buf, answer);
    const char *second = strstr(all, "\r\n\r\n") + 4;
    assert_int_equal(first_status(second), 200);
    free(all);
    free(answer);
    close(fd);
}

/* ---- the number of values in a body ------------------------------------- */

/* A figure of the broker's /proc status (VmHWM: peak, VmRSS: now), in KiB. */
static long long broker_status_kib(const test_broker *b, const char *field)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)b->pid);
    char *status = read_file(path);
    const char *at = strstr(status, field);
    if (at == NULL)
        fail_msg("no %s in %s", field, path);
    long long kib = atoll(at + strlen(field));
    free(status);
    return kib;
}

static long long broker_peak_kib(void)
{
    return broker_status_kib(&broker, "VmHWM:");
}

/* prefix + n copies of element joined by commas + suffix. */
static char *repeated(const char *prefix, const char *element, size_t n, const char *suffix)
{
    size_t a = strlen(prefix), e = strlen(element), c = strlen(suffix);
    char *out = malloc(a + n * (e + 1) + c + 1);
    size_t o = 0;
    memcpy(out, prefix, a);
    o += a;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            out[o++] = ',';
        memcpy(out + o, element, e);
        o += e;
    }
    memcpy(out + o, suffix, c + 1);
    return out;
}

/* Just under the default 20 MiB cap of "{}," elements: about 7 million
 * values, which jansson would have grown to well over a gigabyte. */
static void many_tiny_values_refused_without_the_memory(void **state)
{
    (void)state;
    size_t n = (20u * 1024 * 1024 - 64) / 3;
    char *kv = repeated("[", "{}", n, "]");
    char *push = repeated("{\"items\":[", "{}", n - 4, "]}");
    long long before = broker_peak_kib();
    long long t0 = now_ms();
    http_refused(&broker, "POST", "/api/v1/kv", kv, 413, "payload_too_large", "body_too_many_values");
    long long t1 = now_ms();
    http_refused(&broker, "POST", "/api/v1/push", push, 413, "payload_too_large", "body_too_many_values");
    long long t2 = now_ms();
    long long after = broker_peak_kib();
    print_message("%zu-value bodies: kv refused in %lld ms, push in %lld ms; broker peak %lld -> %lld KiB\n", n,
                  t1 - t0, t2 - t1, before, after);
    /* Each body is 20 MiB buffered; jansson would have needed ~1.6 GB.
     * 256 MiB of growth leaves room for sanitizer overhead. */
    if (after - before > 256 * 1024)
        fail_msg("the broker's peak memory grew by %lld KiB for two refused bodies", after - before);
    free(push);
    free(kv);
}

static void too_deep_a_body_is_400(void **state)
{
    (void)state;
    char *open = malloc(1001), *close_ = malloc(1001);
    memset(open, '[', 1000);
    memset(close_, ']', 1000);
    open[1000] = close_[1000] = '\0';
    char *body = fmt("%s%s", open, close_);
    http_refused(&broker, "POST", "/api/v1/kv", body, 400, "kv_bad_request", "body_too_deep");
    /* Brackets inside strings are text, not depth. */
    char *q = pgtest_unique("deep");
    char *in_string = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"%s\"}]}", q, open);
    json_t *v = http_ok(&broker, "POST", "/api/v1/push", in_string, 201);
    json_decref(v);
    free(in_string);
    free(q);
    free(body);
    free(open);
    free(close_);
}

/* A payload that is one JSON document of about 1 MB (some 90,000 values). */
static void a_1mb_document_payload_passes(void **state)
{
    (void)state;
    char *doc = repeated("{\"rows\":[", "{\"id\":12345,\"name\":\"alice\",\"tags\":[\"x\",\"y\"],\"ok\":true}", 20000,
                         "]}");
    assert_true(strlen(doc) > 1000000);
    char *q = pgtest_unique("doc");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":%s}]}", q, doc);
    json_t *v = http_ok(&broker, "POST", "/api/v1/push", push, 201);
    json_decref(v);
    char *path = fmt("/api/v1/pop/queue/%s?autoAck=true", q);
    v = http_ok(&broker, "GET", path, NULL, 200);
    json_decref(v);
    free(path);
    free(push);
    free(q);
    free(doc);
}

static void a_256_op_kv_call_passes(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ops");
    char *body = strdup("{\"operations\":[");
    for (int i = 0; i < 256; i++) {
        char *next = fmt("%s%s{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"k%d\",\"value\":{\"a\":[1,2,3],"
                         "\"b\":\"text\"},\"forever\":true}",
                         body, i > 0 ? "," : "", ns, i);
        free(body);
        body = next;
    }
    char *whole = fmt("%s]}", body);
    free(body);
    body = whole;
    json_t *v = http_ok(&broker, "POST", "/api/v1/kv", body, 200);
    json_t *results = json_is_array(v) ? v : json_object_get(v, "results");
    assert_int_equal(json_array_size(results), 256);
    json_decref(v);
    free(body);
    free(ns);
}

/* A legitimate push of 400,000 small values parses into a tree of many
 * small blocks; once the request ends the broker gives that memory back
 * (glibc kept it: two such pushes left it 33 MB larger for good). */
static void a_large_body_s_memory_is_given_back(void **state)
{
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    /* ASan's allocator quarantines freed memory by design, so the figure
     * means nothing there: the check runs in the plain build's pass. */
    print_message("# not measured under AddressSanitizer\n");
    return;
#endif
    /* A broker of its own: what earlier tests left free in its arenas
     * would absorb the growth and hide it. */
    test_broker b;
    if (!broker_start(&b, NULL))
        fail_msg("broker did not become healthy (log: %s)", b.log);
    char *q = pgtest_unique("big");
    char *payload = repeated("[", "1", 400000, "]");
    char *full = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":%s}]}", q, payload);
    long long before = broker_status_kib(&b, "VmRSS:");
    for (int i = 0; i < 2; i++)
        json_decref(http_ok(&b, "POST", "/api/v1/push", full, 201));
    long long after = broker_status_kib(&b, "VmRSS:");
    print_message("# two pushes of 400000 values: VmRSS %lld -> %lld KiB\n", before, after);
    assert_int_equal(broker_stop(&b), 0);
    if (after > before + 12 * 1024)
        fail_msg("the broker kept %lld KiB after two large pushes", after - before);
    free(full);
    free(payload);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(huge_content_length_is_413_before_the_body),
        cmocka_unit_test(huge_content_length_with_expect_gets_no_100_continue),
        cmocka_unit_test(admissible_body_with_expect_is_continued),
        cmocka_unit_test(many_tiny_values_refused_without_the_memory),
        cmocka_unit_test(too_deep_a_body_is_400),
        cmocka_unit_test(a_1mb_document_payload_passes),
        cmocka_unit_test(a_256_op_kv_call_passes),
        cmocka_unit_test(a_large_body_s_memory_is_given_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
