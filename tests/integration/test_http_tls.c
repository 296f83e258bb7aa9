/* HTTPS at the broker (QUEEN_TLS_CERT / QUEEN_TLS_KEY, docs/auth.md,
 * TLS): with a self-signed certificate made here by the openssl
 * CLI, libcurl completes the handshake against that certificate as its CA,
 * and a keep-alive connection carries a second request (an authenticated
 * one: QUEEN_AUTH=jwt over TLS) without a new handshake; a client that does
 * not trust the certificate, or speaks plain HTTP to the port, gets nothing.
 * Also: a JWKS fetched from an https URL (a python3 TLS file server on
 * loopback, the same certificate as its CA) verifies an ES256 token. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"

static const char SECRET[] = "tls-test-secret-c0ffee";
static char dir[64], cert[128], key[128];
static test_broker B;
static char *env_strings[3];

typedef struct https_result {
    CURLcode rc;
    long status;
    long new_connections;
    http_reply body;
} https_result;

/* One GET on handle c (kept between calls: keep-alive), trusting ca (NULL:
 * the system's store, which does not hold our certificate). */
static https_result https_get(CURL *c, const char *url, const char *ca, const char *token)
{
    https_result out = {0};
    struct curl_slist *h = NULL;
    char *authz = token ? fmt("Authorization: Bearer %s", token) : NULL;
    if (authz)
        h = curl_slist_append(h, authz);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.body);
    out.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &out.new_connections);
    curl_slist_free_all(h);
    free(authz);
    return out;
}

static bool healthy_over_tls(const test_broker *b)
{
    CURL *c = curl_easy_init();
    char *url = fmt("https://127.0.0.1:%d/health", b->port);
    https_result r = https_get(c, url, cert, NULL);
    bool ok = r.rc == CURLE_OK && r.status == 200;
    free(r.body.body);
    free(url);
    curl_easy_cleanup(c);
    return ok;
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/queen-tls-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    char *cmd = fmt("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s "
                    "-out %s -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost "
                    ">/dev/null 2>&1",
                    key, cert);
    int rc = system(cmd);
    free(cmd);
    if (rc != 0)
        return -1;
    env_strings[0] = fmt("QUEEN_TLS_CERT=%s", cert);
    env_strings[1] = fmt("QUEEN_TLS_KEY=%s", key);
    env_strings[2] = fmt("QUEEN_JWT_SECRET=%s", SECRET);
    const char *env[] = {env_strings[0], env_strings[1], "QUEEN_AUTH=jwt", env_strings[2], NULL};
    broker_spawn(&B, pgtest_url(), env);
    long long deadline = now_ms() + 30000;
    while (!healthy_over_tls(&B)) {
        if (now_ms() > deadline || waitpid(B.pid, NULL, WNOHANG) != 0) {
            fprintf(stderr, "setup: the TLS broker never answered (log %s)\n", B.log);
            return -1;
        }
        pause_ms(20);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    broker_stop(&B);
    for (int i = 0; i < 3; i++)
        free(env_strings[i]);
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return 0;
}

static void a_request_over_tls_and_a_second_on_the_same_connection(void **state)
{
    (void)state;
    char *payload = fmt("{\"role\":\"read\",\"tenant\":\"00000000-0000-0000-0000-000000000001\",\"exp\":%lld}",
                        (long long)time(NULL) + 600);
    char *token = mint_jwt("{\"alg\":\"HS256\"}", payload, SECRET, strlen(SECRET), NULL);
    CURL *c = curl_easy_init();
    char *health = fmt("https://127.0.0.1:%d/health", B.port);
    char *queues = fmt("https://127.0.0.1:%d/api/v1/resources/queues", B.port);
    https_result first = https_get(c, health, cert, NULL);
    assert_int_equal(first.rc, CURLE_OK);
    assert_int_equal(first.status, 200);
    assert_int_equal(first.new_connections, 1);
    https_result second = https_get(c, queues, cert, token);
    assert_int_equal(second.rc, CURLE_OK);
    assert_int_equal(second.status, 200);
    assert_int_equal(second.new_connections, 0); /* keep-alive: no new handshake */
    https_result refused = https_get(c, queues, cert, NULL);
    assert_int_equal(refused.status, 401);
    free(first.body.body);
    free(second.body.body);
    free(refused.body.body);
    curl_easy_cleanup(c);
    free(health);
    free(queues);
    free(token);
    free(payload);
}

static void an_untrusting_or_plain_http_client_gets_nothing(void **state)
{
    (void)state;
    CURL *c = curl_easy_init();
    char *https = fmt("https://127.0.0.1:%d/health", B.port);
    char *empty_ca = fmt("%s/none.pem", dir);
    FILE *f = fopen(empty_ca, "w");
    fclose(f);
    https_result untrusted = https_get(c, https, empty_ca, NULL);
    assert_int_not_equal(untrusted.rc, CURLE_OK);
    free(untrusted.body.body);
    curl_easy_cleanup(c);
    unlink(empty_ca);
    c = curl_easy_init();
    char *plain = fmt("http://127.0.0.1:%d/health", B.port);
    https_result r = https_get(c, plain, NULL, NULL);
    assert_false(r.rc == CURLE_OK && r.status == 200);
    free(r.body.body);
    curl_easy_cleanup(c);
    /* and the broker still serves */
    assert_true(healthy_over_tls(&B));
    free(https);
    free(plain);
    free(empty_ca);
}

static void a_jwks_from_an_https_url_verifies_a_token(void **state)
{
    (void)state;
    EVP_PKEY *ec = mint_keygen("EC");
    char *jwk = mint_jwk(ec, "url-1"), *doc = fmt("{\"keys\":[%s]}", jwk), *path = fmt("%s/jwks.json", dir);
    FILE *f = fopen(path, "w");
    fputs(doc, f);
    fclose(f);
    int port = broker_free_port();
    char *script = fmt("import http.server, ssl, functools\n"
                       "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory='%s')\n"
                       "s = http.server.HTTPServer(('127.0.0.1', %d), h)\n"
                       "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('%s', '%s')\n"
                       "s.socket = c.wrap_socket(s.socket, server_side=True)\n"
                       "s.serve_forever()\n",
                       dir, port, cert, key);
    pid_t server = fork();
    if (server == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("python3", "python3", "-c", script, (char *)NULL);
        _exit(127);
    }
    CURL *c = curl_easy_init();
    char *url = fmt("https://127.0.0.1:%d/jwks.json", port);
    https_result probe = {0};
    long long deadline = now_ms() + 20000;
    for (;;) {
        probe = https_get(c, url, cert, NULL);
        bool up = probe.rc == CURLE_OK && probe.status == 200;
        free(probe.body.body);
        if (up)
            break;
        if (now_ms() > deadline)
            fail_msg("the JWKS server never answered");
        pause_ms(20);
    }
    curl_easy_cleanup(c);
    char *jwks_env = fmt("QUEEN_JWT_JWKS=%s", url), *ca_env = fmt("QUEEN_JWT_JWKS_CA=%s", cert);
    const char *env[] = {"QUEEN_AUTH=jwt", jwks_env, ca_env, NULL};
    test_broker b2;
    assert_true(broker_start(&b2, env));
    char *payload = fmt("{\"role\":\"read\",\"tenant\":\"00000000-0000-0000-0000-000000000001\",\"exp\":%lld}",
                        (long long)time(NULL) + 600);
    char *good = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"url-1\"}", payload, NULL, 0, ec);
    EVP_PKEY *other = mint_keygen("EC");
    char *bad = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"url-1\"}", payload, NULL, 0, other);
    char *h1 = fmt("Authorization: Bearer %s", good), *h2 = fmt("Authorization: Bearer %s", bad);
    const char *hg[] = {h1, NULL}, *hb[] = {h2, NULL};
    http_reply r = broker_http(&b2, "GET", "/api/v1/resources/queues", NULL, hg);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    r = broker_http(&b2, "GET", "/api/v1/resources/queues", NULL, hb);
    assert_int_equal(r.status, 401);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b2), 0);
    kill(server, SIGTERM);
    waitpid(server, NULL, 0);
    unlink(path);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(other);
    free(h1);
    free(h2);
    free(good);
    free(bad);
    free(payload);
    free(jwks_env);
    free(ca_env);
    free(url);
    free(script);
    free(path);
    free(doc);
    free(jwk);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_request_over_tls_and_a_second_on_the_same_connection),
        cmocka_unit_test(an_untrusting_or_plain_http_client_gets_nothing),
        cmocka_unit_test(a_jwks_from_an_https_url_verifies_a_token),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
