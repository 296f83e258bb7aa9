/* What the HTTP edge refuses to guess at or to tell: a tenant header that
 * is repeated, empty or holds a NUL; a request whose body two parties could
 * frame differently (RFC 9112), or HTTP/1.1 without Host; libpq's text (the
 * database's address) in a 503; PostgreSQL's exact version on /health; a
 * listener on a non-loopback address without a warning; a method label per
 * spelling for unmatched requests. Raw sockets where curl would fix the
 * request up before sending it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
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
#include "wire.h"

static test_broker B; /* tenancy on, behind the trusted proxy the header needs */

static int setup(void **state)
{
    (void)state;
    /* A 2 s read deadline: what the library leaves hanging is cut by it
     * (library_refusals_are_prompt). */
    static const char *const env[] = {"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", "QUEEN_LOG_LEVEL=info",
                                      "QUEEN_REQUEST_READ_TIMEOUT_MS=2000", NULL};
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

static void start(test_broker *b, const char *const *env)
{
    if (!broker_start(b, env))
        fail_msg("broker did not become healthy (log: %s)", b->log);
}

/* ---- raw exchanges ------------------------------------------------------- */

typedef struct raw_reply {
    char text[16384];
    size_t len;
    int status;     /* 0: no status line came */
    bool closed;    /* the server closed the connection */
    long long took_ms;
} raw_reply;

/* Sends len bytes of request on a fresh connection and reads until the
 * server closes it or within_ms pass: a hang shows as !closed. */
static raw_reply raw_exchange(const test_broker *b, const char *request, size_t len, int within_ms)
{
    raw_reply r = {0};
    int fd = raw_connect(b->port);
    long long t0 = now_ms();
    raw_send(fd, request, len); /* the server may close before reading it all */
    char *text = raw_read_until_closed(fd, within_ms, sizeof r.text - 1, &r.closed);
    r.took_ms = now_ms() - t0;
    r.len = strlen(text);
    memcpy(r.text, text, r.len + 1);
    free(text);
    sscanf(r.text, "HTTP/1.%*d %d", &r.status);
    close(fd);
    return r;
}

static const char *raw_body(const raw_reply *r)
{
    const char *end = strstr(r->text, "\r\n\r\n");
    return end ? end + 4 : "";
}

/* The reply is status with the JSON envelope (code, reason), promptly, and
 * the connection is closed after it. */
static void expect_refused_and_closed(const raw_reply *r, const char *what, int status, const char *code,
                                      const char *reason)
{
    if (r->status != status || !r->closed)
        fail_msg("%s: wanted %d and a close, got %d%s after %lld ms:\n%s", what, status, r->status,
                 r->closed ? " (closed)" : " (still open)", r->took_ms, r->text);
    json_t *v = json_loads(raw_body(r), 0, NULL);
    if (v == NULL)
        fail_msg("%s: the body is not JSON:\n%s", what, r->text);
    assert_string_equal(jstr(v, "code"), code);
    assert_string_equal(jstr(v, "reason"), reason);
    assert_true(jstr(v, "error")[0] != '\0');
    json_decref(v);
}

/* ---- 4. the tenant header ------------------------------------------------ */

static void tenant_header_must_be_one_canonical_value(void **state)
{
    (void)state;
    char ta[37], tb[37], ha[64], hb[64];
    wire_uuid4(ta);
    wire_uuid4(tb);
    snprintf(ha, sizeof ha, "x-queen-tenant: %s", ta);
    snprintf(hb, sizeof hb, "x-queen-tenant: %s", tb);
    const char *paths[] = {"/api/v1/kv/ns/k", "/api/v1/resources/queues"};
    const char *codes[] = {"kv_bad_request", "bad_request"};
    for (size_t i = 0; i < 2; i++) {
        /* a proxy that appends its header after the client's */
        const char *twice[] = {ha, hb, NULL};
        json_t *v = http_call_json(&B, twice, "GET", paths[i], NULL, 400);
        assert_string_equal(jstr(v, "code"), codes[i]);
        assert_string_equal(jstr(v, "reason"), "bad_tenant");
        json_decref(v);
        const char *same_twice[] = {ha, ha, NULL};
        json_decref(http_call_json(&B, same_twice, "GET", paths[i], NULL, 400));
        /* present but empty: not the default tenant */
        const char *empty[] = {"x-queen-tenant;", NULL};
        v = http_call_json(&B, empty, "GET", paths[i], NULL, 400);
        assert_string_equal(jstr(v, "reason"), "bad_tenant");
        json_decref(v);
    }
    /* A NUL after a valid uuid (curl cannot send one): the parser refuses a
     * NUL anywhere in a header (400), so a C string cut at it is never read
     * as the valid prefix. */
    char req[256];
    int n = snprintf(req, sizeof req, "GET /api/v1/resources/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nx-queen-tenant: %s", ta);
    memcpy(req + n, "\0junk\r\nConnection: close\r\n\r\n", 29);
    raw_reply r = raw_exchange(&B, req, (size_t)n + 29, 5000);
    if (r.status != 400 || strstr(raw_body(&r), "\"reason\"") == NULL)
        fail_msg("a tenant with an embedded NUL was not refused:\n%s", r.text);
    /* one header with a valid uuid is still that tenant; none, the default */
    const char *one[] = {ha, NULL};
    json_decref(http_call_json(&B, one, "GET", "/api/v1/resources/queues", NULL, 200));
    json_decref(http_call_json(&B, NULL, "GET", "/api/v1/resources/queues", NULL, 200));
}

/* ---- 5. framing ------------------------------------------------------------ */

static void ambiguous_framing_is_400_and_closed(void **state)
{
    (void)state;
    static const struct {
        const char *what, *request;
    } cases[] = {
        {"two Content-Length",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n[]"},
        {"equal Content-Length twice",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n[]"},
        {"Content-Length and chunked",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
         "2\r\n[]\r\n0\r\n\r\n"},
        {"gzip, chunked",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n"},
        {"identity", "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n\r\n[]"},
        {"chunked twice",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
         "2\r\n[]\r\n0\r\n\r\n"},
        {"HTTP/1.1 without Host", "GET /health HTTP/1.1\r\n\r\n"},
        {"HTTP/1.1 with two Host", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        raw_reply r = raw_exchange(&B, cases[i].request, strlen(cases[i].request), 5000);
        expect_refused_and_closed(&r, cases[i].what, 400, "bad_request", "bad_framing");
        print_message("# %s: 400 and closed in %lld ms\n", cases[i].what, r.took_ms);
    }
    /* well framed requests are still served, and HTTP/1.0 needs no Host */
    static const char *const fine[] = {
        "GET /health HTTP/1.0\r\n\r\n",
        "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n[]\r\n0\r\n\r\n",
        "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\n[]",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        raw_reply r = raw_exchange(&B, fine[i], strlen(fine[i]), 5000);
        if (r.status != 200)
            fail_msg("a well framed request was not served:\n%s\n->\n%s", fine[i], r.text);
    }
}

/* What the edge cannot parse, it refuses itself: the envelope with the
 * status RFC 9112 names, promptly, and the connection closed (what follows
 * cannot be told apart from the next request). Before the edge was ours,
 * these were the HTTP library's HTML pages (and the smuggling cases were
 * accepted). */
static void edge_refusals_are_the_envelope_and_close(void **state)
{
    (void)state;
    size_t big = 12 * 1024;
    char *ext = malloc(big + 256);
    int n = snprintf(ext, big + 256, "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n2;");
    memset(ext + n, 'a', big);
    n += (int)big;
    n += snprintf(ext + n, 64, "\r\n[]\r\n0\r\n\r\n");
    char *uri = malloc(big + 64);
    int m = snprintf(uri, 8, "GET /");
    memset(uri + m, 'a', big);
    m += (int)big;
    m += snprintf(uri + m, 64, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    char *heads = malloc(40 * 1024);
    int h = snprintf(heads, 64, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (int i = 0; i < 40; i++) {
        h += snprintf(heads + h, 64, "X-Pad-%02d: ", i);
        memset(heads + h, 'p', 900);
        h += 900;
        h += snprintf(heads + h, 8, "\r\n");
    }
    h += snprintf(heads + h, 8, "\r\n");
    static const char nul_line[] = "GET /hea\0lth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    static const char nul_value[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\0c\r\n\r\n";
    struct {
        const char *what, *request;
        size_t len;
        int status;
        const char *code, *reason;
    } cases[] = {
        {"a 12 KB chunk extension", ext, (size_t)n, 400, "bad_request", "bad_chunk"},
        {"a 12 KB URI", uri, (size_t)m, 414, "uri_too_long", "uri_too_long"},
        {"a 36 KB head", heads, (size_t)h, 431, "headers_too_large", "headers_too_large"},
        {"HTTP/2.0 on the HTTP/1 port", "GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 0, 505,
         "http_version_not_supported", "http_version_not_supported"},
        {"a Content-Length that is not a number",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n[]", 0, 400, "bad_request",
         "bad_framing"},
        /* Smuggling: a lenient parser takes "Content-Length " as an unknown
         * header and runs the body as a second request. */
        {"a space before the colon",
         "POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length : 40\r\n\r\nGET /api/v1/kv/ns/k HTTP/1.1\r\n\r\n", 0,
         400, "bad_request", "bad_header"},
        {"a tab before the colon", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A\t: b\r\n\r\n", 0, 400,
         "bad_request", "bad_header"},
        {"a bare CR", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\rc\r\n\r\n", 0, 400, "bad_request",
         "bad_header"},
        {"a folded header line", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\r\n c\r\n\r\n", 0, 400,
         "bad_request", "bad_header"},
        {"a NUL in the request line", nul_line, sizeof nul_line - 1, 400, "bad_request", "bad_header"},
        {"a NUL in a header value", nul_value, sizeof nul_value - 1, 400, "bad_request", "bad_header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].request);
        raw_reply r = raw_exchange(&B, cases[i].request, len, 5000);
        expect_refused_and_closed(&r, cases[i].what, cases[i].status, cases[i].code, cases[i].reason);
        print_message("# %s: %d and closed in %lld ms\n", cases[i].what, r.status, r.took_ms);
    }
    free(ext);
    free(uri);
    free(heads);
}

/* ---- 6. disclosure -------------------------------------------------------- */

static bool discloses_the_database(const char *text)
{
    return strstr(text, "port") != NULL || strstr(text, "127.0.0.1") != NULL ||
           strstr(text, "connection to server") != NULL || strstr(text, "socket") != NULL ||
           strstr(text, "localhost") != NULL;
}

static void unavailable_database_is_not_described_to_clients(void **state)
{
    (void)state;
    char *dbname = NULL;
    char *url = pgtest_create_database("h12gone_", &dbname);
    test_broker b;
    broker_spawn(&b, url, NULL);
    if (!broker_wait_healthy(&b, 30000))
        fail_msg("broker on %s did not become healthy (log: %s)", dbname, b.log);
    /* Every pooled connection is terminated and no reconnect can succeed. */
    pgtest_drop_database(dbname);
    http_reply r = {0};
    WAIT_UNTIL((http_reply_free(&r), r = broker_http(&b, "GET", "/api/v1/resources/queues", NULL, NULL),
                r.status == 503),
               10000, "the queue listing never answered 503 with its database gone: %ld %s", r.status, r.body);
    http_expect(&r, 503, "unavailable", "db_unavailable");
    if (discloses_the_database(r.body))
        fail_msg("the 503 describes the database: %s", r.body);
    http_reply_free(&r);
    r = broker_http(&b, "GET", "/api/v1/kv/ns/k", NULL, NULL);
    http_expect(&r, 503, "kv_unavailable", "db_unavailable");
    if (discloses_the_database(r.body))
        fail_msg("the kv 503 describes the database: %s", r.body);
    http_reply_free(&r);
    r = broker_http(&b, "GET", "/health", NULL, NULL);
    assert_int_equal(r.status, 503);
    if (discloses_the_database(r.body))
        fail_msg("the /health 503 describes the database: %s", r.body);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
    /* the operator still has libpq's words, in the log */
    char *log = read_file(b.log);
    if (strstr(log, "database unavailable: ") == NULL)
        fail_msg("no 'database unavailable' line in %s", b.log);
    free(log);
    free(url);
    free(dbname);
}

static void health_does_not_tell_the_database_version(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *version = pgtest_scalar(c, "SELECT current_setting('server_version')", 0, NULL);
    PQfinish(c);
    char *number = strdup(version);
    number[strcspn(number, " ")] = '\0'; /* "15.18" of "15.18 (Debian ...)" */
    http_reply r = broker_http(&B, "GET", "/health", NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *v = json_of(&r);
    assert_string_equal(jstr(v, "status"), "healthy");
    assert_string_equal(jstr(v, "database"), "connected");
    json_decref(v);
    if (strstr(r.body, number) != NULL || strstr(r.body, "PostgreSQL") != NULL)
        fail_msg("/health tells the database version (%s): %s", number, r.body);
    http_reply_free(&r);
    /* it is in the log, from the start */
    char *log = read_file(B.log);
    if (strstr(log, "database: PostgreSQL ") == NULL)
        fail_msg("the database version was not logged at start (%s)", B.log);
    free(log);
    free(number);
    free(version);
}

static void non_loopback_bind_warns(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_BIND=0.0.0.0", NULL};
    test_broker b;
    start(&b, env);
    assert_int_equal(broker_stop(&b), 0);
    char *log = read_file(b.log);
    if (strstr(log, "anyone who reaches port") == NULL)
        fail_msg("no warning for QUEEN_BIND=0.0.0.0 in %s", b.log);
    free(log);
    /* and none on loopback (the group's broker) */
    log = read_file(B.log);
    assert_null(strstr(log, "anyone who reaches port"));
    free(log);
}

/* ---- 7. the method label of unmatched requests -------------------------- */

static void unmatched_requests_carry_a_bounded_method_label(void **state)
{
    (void)state;
    long long get0 = http_requests_counted(&B, "GET", "(unmatched)", 404);
    long long del0 = http_requests_counted(&B, "DELETE", "(unmatched)", 405);
    long long other0 = http_requests_counted(&B, "OTHER", "(unmatched)", 404);
    http_reply r = broker_http(&B, "GET", "/nowhere", NULL, NULL);
    assert_int_equal(r.status, 404);
    http_reply_free(&r);
    r = broker_http(&B, "DELETE", "/health", NULL, NULL); /* a known path, another method */
    assert_int_equal(r.status, 405);
    http_reply_free(&r);
    r = broker_http(&B, "BREWCOFFEE", "/nowhere", NULL, NULL);
    assert_int_equal(r.status, 404);
    http_reply_free(&r);
    WAIT_UNTIL(http_requests_counted(&B, "GET", "(unmatched)", 404) == get0 + 1, 5000, "GET /nowhere not counted");
    WAIT_UNTIL(http_requests_counted(&B, "DELETE", "(unmatched)", 405) == del0 + 1, 5000,
               "DELETE /health not counted");
    WAIT_UNTIL(http_requests_counted(&B, "OTHER", "(unmatched)", 404) == other0 + 1, 5000,
               "BREWCOFFEE /nowhere not counted as OTHER");
    assert_int_equal(http_requests_counted(&B, "", "(unmatched)", 404), 0);
    r = broker_http(&B, "GET", "/metrics/prometheus", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "BREWCOFFEE"));
    assert_null(strstr(r.body, "method=\"\""));
    assert_non_null(strstr(r.body, "queen_http_requests_total{method=\"OTHER\",route=\"(unmatched)\",status=\"404\"}"));
    http_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tenant_header_must_be_one_canonical_value),
        cmocka_unit_test(ambiguous_framing_is_400_and_closed),
        cmocka_unit_test(edge_refusals_are_the_envelope_and_close),
        cmocka_unit_test(unavailable_database_is_not_described_to_clients),
        cmocka_unit_test(health_does_not_tell_the_database_version),
        cmocka_unit_test(non_loopback_bind_warns),
        cmocka_unit_test(unmatched_requests_carry_a_bounded_method_label),
    };
    return cmocka_run_group_tests_name("http_hardening", tests, setup, teardown);
}
