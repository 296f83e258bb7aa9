/* Browsers against a broker (src/server/origin.h; docs/auth.md "Browsers:
 * origins, hosts and content types"). The review's reproductions against a
 * broker with QUEEN_AUTH=off on loopback: a page of another origin wrote a
 * kv key with a no-cors fetch (text/plain body, its Origin) and switched
 * maintenance on with a bodyless POST, and any Host was served (DNS
 * rebinding). Now:
 *  - a body that is not application/json is 415 content_type_not_json on
 *    every method but GET/HEAD/OPTIONS, nothing written; charset and case are
 *    fine; a bodyless POST is not judged by its content type;
 *  - an Origin other than the broker's own is 403 origin_not_allowed, and a
 *    cross-site request without one (Sec-Fetch-Site) 403 cross_site_request;
 *  - with QUEEN_AUTH=off a Host naming neither an address, localhost nor a
 *    configured name is 403 host_not_allowed;
 *  - QUEEN_ALLOWED_ORIGINS and QUEEN_ALLOWED_HOSTS widen both, and a bad
 *    entry stops the broker; with QUEEN_AUTH=jwt the Host is not judged, the
 *    Origin is. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"

static const char SECRET[] = "origin-test-secret";
static test_broker B;

static int setup(void **state)
{
    (void)state;
    return broker_start(&B, NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    free(pgtest_scalar(c, "SELECT queen.system_maintenance_set_v1(false)::text", 0, NULL));
    PQfinish(c);
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* One request with exactly the headers given ("Name: value", NULL-ended):
 * libcurl adds none of its own but Host (replaced when one is given),
 * Content-Length and Accept. A body without a Content-Type among headers
 * goes without one. */
static http_reply raw_call(const test_broker *b, const char *method, const char *path, const char *body,
                           const char *const *headers)
{
    http_reply out = {0};
    CURL *c = curl_easy_init();
    char *url = fmt("%s%s", b->base, path);
    struct curl_slist *list = curl_slist_append(NULL, "Expect:");
    bool has_type = false;
    for (size_t i = 0; headers && headers[i]; i++) {
        list = curl_slist_append(list, headers[i]);
        has_type = has_type || strncasecmp(headers[i], "Content-Type:", 13) == 0;
    }
    if (!has_type)
        list = curl_slist_append(list, "Content-Type:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    free(url);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
    if (out.body == NULL)
        out.body = strdup("");
    return out;
}

/* Asserts status and, for a refusal, the envelope's reason; frees r. */
static void expect(http_reply r, long status, const char *reason)
{
    if (r.status != status)
        fail_msg("expected %ld %s, got %ld %s", status, reason ? reason : "", r.status, r.body);
    if (reason != NULL) {
        json_t *j = json_parse(r.body);
        assert_string_equal(jstr(j, "reason"), reason);
        assert_non_null(jstr(j, "error"));
        assert_non_null(jstr(j, "detail"));
        json_decref(j);
    }
    http_reply_free(&r);
}

static bool key_exists(const test_broker *b, const char *ns, const char *key)
{
    char *path = fmt("/api/v1/kv/%s/%s", ns, key);
    http_reply r = broker_http(b, "GET", path, NULL, NULL);
    free(path);
    json_t *j = json_parse(r.body);
    bool found = jtrue(j, "found");
    json_decref(j);
    http_reply_free(&r);
    return found;
}

static bool maintenance_on(const test_broker *b)
{
    http_reply r = broker_http(b, "GET", "/api/v1/system/maintenance", NULL, NULL);
    json_t *j = json_parse(r.body);
    bool on = jtrue(j, "maintenance");
    json_decref(j);
    http_reply_free(&r);
    return on;
}

static void a_page_of_another_origin_writes_nothing(void **state)
{
    (void)state;
    char *ns = pgtest_unique("csrf");
    char *body = fmt("{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"k\",\"value\":1,\"forever\":true}]}", ns);
    /* fetch(url, {method:'POST', mode:'no-cors', body}) from http://evil.example */
    const char *no_cors[] = {"Origin: http://evil.example", "Content-Type: text/plain;charset=UTF-8",
                             "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, no_cors), 403, "origin_not_allowed");
    /* the same with the JSON type the page cannot send without a preflight */
    const char *json_from_evil[] = {"Origin: http://evil.example", "Content-Type: application/json", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, json_from_evil), 403, "origin_not_allowed");
    /* a bodyless POST switched maintenance on in the review: its Origin refuses it */
    const char *bodyless[] = {"Origin: http://evil.example", NULL};
    expect(raw_call(&B, "POST", "/api/v1/system/maintenance", NULL, bodyless), 403, "origin_not_allowed");
    const char *null_origin[] = {"Origin: null", "Content-Type: application/json", NULL};
    expect(raw_call(&B, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", null_origin), 403,
           "origin_not_allowed");
    assert_false(maintenance_on(&B));
    assert_false(key_exists(&B, ns, "k"));
    /* The broker's own origin (what the console's fetches send) is served. */
    char *own = fmt("Origin: http://127.0.0.1:%d", B.port);
    const char *same[] = {own, "Content-Type: application/json", "Sec-Fetch-Site: same-origin", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, same), 200, NULL);
    assert_true(key_exists(&B, ns, "k"));
    /* the same host under another name, scheme or port is another origin */
    char *by_name = fmt("Origin: http://localhost:%d", B.port), *tls = fmt("Origin: https://127.0.0.1:%d", B.port),
         *port = fmt("Origin: http://127.0.0.1:%d", B.port + 1);
    const char *others[] = {by_name, tls, port};
    for (int i = 0; i < 3; i++) {
        const char *h[] = {others[i], "Content-Type: application/json", NULL};
        expect(raw_call(&B, "POST", "/api/v1/kv", body, h), 403, "origin_not_allowed");
    }
    free(by_name);
    free(tls);
    free(port);
    free(own);
    free(body);
    free(ns);
}

static void a_cross_site_get_without_an_origin_is_refused(void **state)
{
    (void)state;
    char *q = pgtest_unique("xsite");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":{\"n\":1}}]}", q);
    http_reply r = broker_http(&B, "POST", "/api/v1/push", push, NULL);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    /* <img src=".../pop/queue/q?autoAck=true">: no Origin, Sec-Fetch-Site says where from */
    char *pop = fmt("/api/v1/pop/queue/%s?autoAck=true", q);
    const char *img[] = {"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors", "Sec-Fetch-Dest: image", NULL};
    expect(raw_call(&B, "GET", pop, NULL, img), 403, "cross_site_request");
    const char *same_site[] = {"Sec-Fetch-Site: same-site", NULL};
    expect(raw_call(&B, "GET", pop, NULL, same_site), 403, "cross_site_request");
    /* the message is still there: typed in the address bar (none), it pops */
    const char *typed[] = {"Sec-Fetch-Site: none", NULL};
    expect(raw_call(&B, "GET", pop, NULL, typed), 200, NULL);
    free(pop);
    free(push);
    free(q);
}

static void a_body_must_be_json(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ctype");
    char *body = fmt("{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"k\",\"value\":1,\"forever\":true}]}", ns);
    const char *refused[] = {"Content-Type: text/plain", "Content-Type: application/x-www-form-urlencoded",
                             "Content-Type: multipart/form-data; boundary=x", "Content-Type: application/jsonx",
                             "Content-Type: text/json", NULL};
    for (int i = 0; refused[i] != NULL; i++) {
        const char *h[] = {refused[i], NULL};
        expect(raw_call(&B, "POST", "/api/v1/kv", body, h), 415, "content_type_not_json");
    }
    expect(raw_call(&B, "POST", "/api/v1/kv", body, NULL), 415, "content_type_not_json"); /* none at all */
    const char *mixed[] = {"Content-Type: application/json", "Content-Type: text/plain", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, mixed), 415, "content_type_not_json");
    const char *mixed2[] = {"Content-Type: text/plain", "Content-Type: application/json", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, mixed2), 415, "content_type_not_json");
    char *path = fmt("/api/v1/kv/%s/put", ns);
    const char *plain[] = {"Content-Type: text/plain", NULL};
    expect(raw_call(&B, "PUT", path, "{\"value\":1,\"forever\":true}", plain), 415, "content_type_not_json");
    assert_false(key_exists(&B, ns, "k"));
    assert_false(key_exists(&B, ns, "put"));
    const char *fine[] = {"Content-Type: application/json; charset=utf-8", "Content-Type: Application/JSON",
                          "Content-Type:  application/json ;charset=UTF-8", NULL};
    for (int i = 0; fine[i] != NULL; i++) {
        const char *h[] = {fine[i], NULL};
        expect(raw_call(&B, "POST", "/api/v1/kv", body, h), 200, NULL);
    }
    /* the same type twice (a library repeating its caller's) is still JSON */
    const char *twice[] = {"Content-Type: application/json", "Content-Type: application/json", NULL};
    expect(raw_call(&B, "POST", "/api/v1/kv", body, twice), 200, NULL);
    assert_true(key_exists(&B, ns, "k"));
    /* no body: nothing to judge (the Origin rule guards bodyless calls) */
    char *clear = fmt("/api/v1/resources/queues/%s/clear", ns);
    http_reply r = raw_call(&B, "POST", clear, NULL, NULL);
    assert_int_not_equal(r.status, 415);
    http_reply_free(&r);
    free(clear);
    free(path);
    free(body);
    free(ns);
}

static void only_known_hosts_are_served_without_auth(void **state)
{
    (void)state;
    char *evil = fmt("Host: evil.example:%d", B.port), *evil_bare = strdup("Host: rebind.attacker.test");
    const char *paths[] = {"/api/v1/resources/queues", "/", "/health", "/api/v1/system/maintenance"};
    for (int i = 0; i < 4; i++) {
        const char *h[] = {evil, NULL}, *h2[] = {evil_bare, NULL};
        expect(raw_call(&B, "GET", paths[i], NULL, h), 403, "host_not_allowed");
        expect(raw_call(&B, "GET", paths[i], NULL, h2), 403, "host_not_allowed");
    }
    char *localhost = fmt("Host: localhost:%d", B.port), *upper = fmt("Host: LocalHost:%d", B.port),
         *six = fmt("Host: [::1]:%d", B.port), *addr = fmt("Host: 10.1.2.3:%d", B.port);
    const char *fine[] = {localhost, upper, six, addr, "Host: 127.0.0.1"};
    for (int i = 0; i < 5; i++) {
        const char *h[] = {fine[i], NULL};
        expect(raw_call(&B, "GET", "/api/v1/resources/queues", NULL, h), 200, NULL);
    }
    const char *junk[] = {"Host: a b", "Host: [zz]:1", "Host: evil.example:99999", NULL};
    for (int i = 0; junk[i] != NULL; i++) {
        const char *h[] = {junk[i], NULL};
        http_reply r = raw_call(&B, "GET", "/api/v1/resources/queues", NULL, h);
        assert_true(r.status == 403 || r.status == 400);
        http_reply_free(&r);
    }
    free(evil);
    free(evil_bare);
    free(localhost);
    free(upper);
    free(six);
    free(addr);
}

static void the_settings_widen_both_rules(void **state)
{
    (void)state;
    test_broker b;
    const char *env[] = {"QUEEN_ALLOWED_ORIGINS=https://console.example.com, http://tools.example:8080",
                         "QUEEN_ALLOWED_HOSTS=queen.internal,Queen.Proxy:7000", NULL};
    assert_true(broker_start(&b, env));
    char *port_host = fmt("Host: queen.internal:%d", b.port);
    const char *hosts_ok[] = {port_host, "Host: queen.internal", "Host: queen.proxy:7000", NULL};
    for (int i = 0; hosts_ok[i] != NULL; i++) {
        const char *h[] = {hosts_ok[i], NULL};
        expect(raw_call(&b, "GET", "/api/v1/resources/queues", NULL, h), 200, NULL);
    }
    const char *hosts_bad[] = {"Host: queen.proxy:7001", "Host: other.internal", NULL};
    for (int i = 0; hosts_bad[i] != NULL; i++) {
        const char *h[] = {hosts_bad[i], NULL};
        expect(raw_call(&b, "GET", "/api/v1/resources/queues", NULL, h), 403, "host_not_allowed");
    }
    free(port_host);
    const char *origin_ok[] = {"Origin: https://console.example.com", "Origin: https://CONSOLE.example.com:443",
                               "Origin: http://tools.example:8080", NULL};
    for (int i = 0; origin_ok[i] != NULL; i++) {
        const char *h[] = {origin_ok[i], "Content-Type: application/json", NULL};
        expect(raw_call(&b, "POST", "/api/v1/system/maintenance", "{\"enabled\":false}", h), 200, NULL);
    }
    const char *origin_bad[] = {"Origin: http://console.example.com", "Origin: http://tools.example", NULL};
    for (int i = 0; origin_bad[i] != NULL; i++) {
        const char *h[] = {origin_bad[i], "Content-Type: application/json", NULL};
        expect(raw_call(&b, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", h), 403,
               "origin_not_allowed");
    }
    assert_int_equal(broker_stop(&b), 0);
    const char *star[] = {"QUEEN_ALLOWED_ORIGINS=*", "QUEEN_ALLOWED_HOSTS=*", NULL};
    assert_true(broker_start(&b, star));
    const char *any[] = {"Origin: http://evil.example", "Host: evil.example", "Content-Type: application/json", NULL};
    expect(raw_call(&b, "POST", "/api/v1/system/maintenance", "{\"enabled\":false}", any), 200, NULL);
    const char *img[] = {"Sec-Fetch-Site: cross-site", NULL};
    expect(raw_call(&b, "GET", "/api/v1/resources/queues", NULL, img), 200, NULL);
    assert_int_equal(broker_stop(&b), 0);
}

static void a_bad_entry_stops_the_broker(void **state)
{
    (void)state;
    const char *cases[][2] = {{"QUEEN_ALLOWED_ORIGINS=ftp://files.example", "QUEEN_ALLOWED_ORIGINS"},
                              {"QUEEN_ALLOWED_ORIGINS=https://a.example/path", "QUEEN_ALLOWED_ORIGINS"},
                              {"QUEEN_ALLOWED_HOSTS=bad host", "QUEEN_ALLOWED_HOSTS"}};
    for (int i = 0; i < 3; i++) {
        test_broker b;
        const char *env[] = {cases[i][0], NULL};
        broker_spawn(&b, pgtest_url(), env);
        int status = 0;
        long long deadline = now_ms() + 30000;
        while (waitpid(b.pid, &status, WNOHANG) == 0) {
            if (now_ms() > deadline) {
                broker_stop(&b);
                fail_msg("%s: the broker started (log %s)", cases[i][0], b.log);
            }
            pause_ms(20);
        }
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        char *log = read_file(b.log);
        if (strstr(log, cases[i][1]) == NULL)
            fail_msg("%s: the log does not name the setting: %s", cases[i][0], log);
        free(log);
        unlink(b.log);
    }
}

static void with_auth_the_host_is_free_and_the_origin_is_not(void **state)
{
    (void)state;
    test_broker b;
    char *secret = fmt("QUEEN_JWT_SECRET=%s", SECRET);
    const char *env[] = {"QUEEN_AUTH=jwt", secret, NULL};
    assert_true(broker_start(&b, env));
    char *payload = fmt("{\"role\":\"admin\",\"tenant\":\"00000000-0000-0000-0000-000000000001\",\"exp\":%lld}",
                        (long long)time(NULL) + 600);
    char *token = mint_jwt("{\"alg\":\"HS256\"}", payload, SECRET, strlen(SECRET), NULL);
    char *authz = fmt("Authorization: Bearer %s", token);
    /* a proxy's name, say: the token is the guard */
    const char *named[] = {authz, "Host: queen.example.com", NULL};
    expect(raw_call(&b, "GET", "/api/v1/resources/queues", NULL, named), 200, NULL);
    const char *no_token[] = {"Host: queen.example.com", NULL};
    expect(raw_call(&b, "GET", "/api/v1/resources/queues", NULL, no_token), 401, "auth_missing_token");
    const char *evil[] = {authz, "Origin: http://evil.example", "Content-Type: application/json", NULL};
    expect(raw_call(&b, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", evil), 403, "origin_not_allowed");
    const char *plain[] = {authz, "Content-Type: text/plain", NULL};
    expect(raw_call(&b, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", plain), 415,
           "content_type_not_json");
    assert_int_equal(broker_stop(&b), 0);
    free(authz);
    free(token);
    free(payload);
    free(secret);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_page_of_another_origin_writes_nothing),
        cmocka_unit_test(a_cross_site_get_without_an_origin_is_refused),
        cmocka_unit_test(a_body_must_be_json),
        cmocka_unit_test(only_known_hosts_are_served_without_auth),
        cmocka_unit_test(the_settings_widen_both_rules),
        cmocka_unit_test(a_bad_entry_stops_the_broker),
        cmocka_unit_test(with_auth_the_host_is_free_and_the_origin_is_not),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
