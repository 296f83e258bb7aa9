/* The web console's files (routes_console.c, docs/console.md) from a
 * real broker: the page at / and /console/, each embedded file with its
 * content type, the security and caching headers, revalidation by ETag
 * (304), the envelope's 404 for any other name under /console/ (no way out
 * of the embedded set), and, with QUEEN_AUTH=jwt, the page served without a
 * token and telling the script that a token is needed, while the API stays
 * closed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "console_assets.h"
#include "http_fixture.h"
#include "testutil.h"

static test_broker OPEN, CLOSED;

#define CSP                                                                                                            \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "                   \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static int setup(void **state)
{
    (void)state;
    static const char *const jwt[] = {"QUEEN_AUTH=jwt", "QUEEN_JWT_SECRET=console-secret", NULL};
    return broker_start(&OPEN, NULL) && broker_start(&CLOSED, jwt) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int a = broker_stop(&OPEN), b = broker_stop(&CLOSED);
    return a == 0 && b == 0 ? 0 : -1;
}

static void expect_header(const http_reply *r, const char *name, const char *want)
{
    char *v = http_reply_header(r, name);
    if (v == NULL || strcmp(v, want) != 0)
        fail_msg("%s: %s, expected %s", name, v ? v : "(absent)", want);
    free(v);
}

/* One file: 200, its type, the headers every console answer carries, and
 * its bytes as embedded (the page with the auth marker filled in). */
static char *fetch_file(const test_broker *b, const char *path, const char *type, const char *const *headers)
{
    http_reply r = broker_http(b, "GET", path, NULL, headers);
    if (r.status != 200)
        fail_msg("GET %s: %ld %s", path, r.status, r.body);
    expect_header(&r, "Content-Type", type);
    expect_header(&r, "Content-Security-Policy", CSP);
    expect_header(&r, "X-Content-Type-Options", "nosniff");
    expect_header(&r, "X-Frame-Options", "DENY");
    expect_header(&r, "Cache-Control", "no-cache");
    char *etag = http_reply_header(&r, "ETag");
    assert_non_null(etag);
    assert_true(strlen(etag) > 2 && etag[0] == '"' && etag[strlen(etag) - 1] == '"');
    free(etag);
    char *body = strdup(r.body);
    http_reply_free(&r);
    return body;
}

static void page_and_files(void **state)
{
    (void)state;
    char *root = fetch_file(&OPEN, "/", "text/html; charset=utf-8", NULL);
    assert_non_null(strstr(root, "<meta name=\"queen-auth\" content=\"off\">"));
    assert_null(strstr(root, "__QUEEN_AUTH__"));
    assert_non_null(strstr(root, "<script type=\"module\" src=\"/console/app.js\">"));
    char *again = fetch_file(&OPEN, "/console/", "text/html; charset=utf-8", NULL);
    assert_string_equal(root, again);
    free(again);
    again = fetch_file(&OPEN, "/console/index.html", "text/html; charset=utf-8", NULL);
    assert_string_equal(root, again);
    free(again);
    free(root);
    /* Every embedded file, byte for byte, with the type its name says. */
    assert_true(console_asset_count >= 5);
    for (size_t i = 0; i < console_asset_count; i++) {
        const console_asset *a = &console_assets[i];
        if (strcmp(a->name, "index.html") == 0)
            continue;
        const char *dot = strrchr(a->name, '.');
        const char *type = strcmp(dot, ".js") == 0    ? "text/javascript; charset=utf-8"
                           : strcmp(dot, ".css") == 0 ? "text/css; charset=utf-8"
                           : strcmp(dot, ".svg") == 0 ? "image/svg+xml"
                                                      : "(a type the test does not know)";
        char *path = fmt("/console/%s", a->name);
        char *body = fetch_file(&OPEN, path, type, NULL);
        assert_int_equal(strlen(body), a->len);
        assert_memory_equal(body, a->data, a->len);
        free(body);
        free(path);
    }
}

static void revalidation(void **state)
{
    (void)state;
    http_reply r = broker_http(&OPEN, "GET", "/console/app.js", NULL, NULL);
    char *etag = http_reply_header(&r, "ETag");
    http_reply_free(&r);
    char *match = fmt("If-None-Match: %s", etag);
    const char *h[] = {match, NULL};
    r = broker_http(&OPEN, "GET", "/console/app.js", NULL, h);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.len, 0);
    expect_header(&r, "ETag", etag);
    expect_header(&r, "Content-Security-Policy", CSP);
    http_reply_free(&r);
    /* Another file's tag, or a stale one, gets the file. */
    r = broker_http(&OPEN, "GET", "/console/style.css", NULL, h);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    const char *stale[] = {"If-None-Match: \"0000\"", NULL};
    r = broker_http(&OPEN, "GET", "/console/app.js", NULL, stale);
    assert_int_equal(r.status, 200);
    assert_true(r.len > 0);
    http_reply_free(&r);
    free(match);
    free(etag);
}

static void unknown_names(void **state)
{
    (void)state;
    static const char *const paths[] = {"/console/nothing.js", "/console/..%2FREADME.md", "/console/../README.md",
                                        "/console/app.js/", "/console/APP.JS", "/console", "/index.html"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        http_reply r = broker_http(&OPEN, "GET", paths[i], NULL, NULL);
        if (r.status != 404)
            fail_msg("GET %s: %ld, expected 404", paths[i], r.status);
        http_expect(&r, 404, "no_such_route", "no_such_route");
        http_reply_free(&r);
    }
    http_refused(&OPEN, "POST", "/", "{}", 405, "method_not_allowed", "method_not_allowed");
    http_refused(&OPEN, "DELETE", "/console/app.js", NULL, 405, "method_not_allowed", "method_not_allowed");
}

static void with_auth(void **state)
{
    (void)state;
    /* The page needs no token, and says one is needed; its tag differs from
     * an open broker's, so a browser never reuses one for the other. */
    char *root = fetch_file(&CLOSED, "/", "text/html; charset=utf-8", NULL);
    assert_non_null(strstr(root, "<meta name=\"queen-auth\" content=\"jwt\">"));
    free(root);
    free(fetch_file(&CLOSED, "/console/app.js", "text/javascript; charset=utf-8", NULL));
    http_reply open = broker_http(&OPEN, "GET", "/", NULL, NULL), closed = broker_http(&CLOSED, "GET", "/", NULL, NULL);
    char *a = http_reply_header(&open, "ETag"), *b = http_reply_header(&closed, "ETag");
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    http_reply_free(&open);
    http_reply_free(&closed);
    /* The API it calls is still closed without a token. */
    http_refused(&CLOSED, "GET", "/api/v1/resources/kv/quota", NULL, 401, "unauthorized", "auth_missing_token");
    http_refused(&CLOSED, "GET", "/console/nothing.js", NULL, 404, "no_such_route", "no_such_route");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(page_and_files),
        cmocka_unit_test(revalidation),
        cmocka_unit_test(unknown_names),
        cmocka_unit_test(with_auth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
