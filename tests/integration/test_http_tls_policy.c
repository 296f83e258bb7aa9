/* The HTTPS listener's protocol versions and suites (QUEEN_TLS_MIN_VERSION,
 * QUEEN_TLS_CIPHERS, QUEEN_TLS_CIPHERSUITES,
 * docs/auth.md, TLS). With an RSA certificate (so a static-RSA
 * suite could be chosen at all), libcurl over OpenSSL, at security level 0 so
 * that the client side offers what the broker must refuse:
 *  - by default TLS 1.3 and 1.2 with an ECDHE AEAD suite complete;
 *  - a TLS 1.0 and a TLS 1.1 handshake fail;
 *  - TLS 1.2 offering only static-RSA suites (AES128-SHA, AES128-GCM-SHA256)
 *    or only a forward-secret CBC suite (ECDHE-RSA-AES128-SHA) fails;
 *  - QUEEN_TLS_MIN_VERSION=1.3: 1.2 fails; QUEEN_TLS_CIPHERS replaces the
 *    TLS 1.2 suites (one suite: another fails);
 *  - a cipher list OpenSSL finds nothing in, or the GnuTLS string of earlier
 *    versions (QUEEN_TLS_PRIORITIES), stops the broker, naming the setting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "pgtest.h"
#include "testutil.h"

static char dir[64], cert[128], key[128];
static char *env_strings[2];

/* One GET /health over TLS with the client limited to versions
 * [min, max] (CURL_SSLVERSION_* values) and the OpenSSL cipher list given
 * (TLS 1.2 and below); true when the handshake and the request succeeded. */
static bool handshake(int port, long min, long max, const char *ciphers)
{
    CURL *c = curl_easy_init();
    char *url = fmt("https://127.0.0.1:%d/health", port);
    http_reply body = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, cert);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, min | max);
    /* Level 0: the client's own defaults (Debian: level 2, TLS 1.2 at
     * least) must not be what refuses the old protocols. */
    curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, ciphers ? ciphers : "DEFAULT:@SECLEVEL=0");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    free(body.body);
    free(url);
    return rc == CURLE_OK && status == 200;
}

static bool modern_handshake(int port)
{
    return handshake(port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_DEFAULT, NULL);
}

/* A TLS broker with extra settings, answering over TLS 1.2+ (or, with
 * tls13_only, 1.3) within 30 s; false when it never did. */
static bool start_tls_broker(test_broker *b, const char *extra)
{
    const char *env[] = {env_strings[0], env_strings[1], extra, NULL};
    broker_spawn(b, pgtest_url(), env);
    long long deadline = now_ms() + 30000;
    while (!modern_handshake(b->port)) {
        if (now_ms() > deadline || waitpid(b->pid, NULL, WNOHANG) != 0) {
            fprintf(stderr, "the TLS broker never answered (log %s)\n", b->log);
            return false;
        }
        pause_ms(20);
    }
    return true;
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/queen-tlsp-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    char *cmd = fmt("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 -subj /CN=localhost "
                    "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1",
                    key, cert);
    int rc = system(cmd);
    free(cmd);
    if (rc != 0)
        return -1;
    env_strings[0] = fmt("QUEEN_TLS_CERT=%s", cert);
    env_strings[1] = fmt("QUEEN_TLS_KEY=%s", key);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++)
        free(env_strings[i]);
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return 0;
}

static void old_protocols_and_suites_without_forward_secrecy_are_refused(void **state)
{
    (void)state;
    test_broker b;
    assert_true(start_tls_broker(&b, NULL));
    assert_true(handshake(b.port, CURL_SSLVERSION_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_3, NULL));
    assert_true(handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256"));
    /* The review's reproduction: both old versions completed a handshake. */
    assert_false(handshake(b.port, CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_MAX_TLSv1_0, NULL));
    assert_false(handshake(b.port, CURL_SSLVERSION_TLSv1_1, CURL_SSLVERSION_MAX_TLSv1_1, NULL));
    /* Static RSA key exchange: a recorded session opens with the key later. */
    assert_false(handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "AES128-SHA:@SECLEVEL=0"));
    assert_false(
        handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "AES128-GCM-SHA256:@SECLEVEL=0"));
    /* Forward secret, but CBC with a separate MAC. */
    assert_false(
        handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"));
    assert_true(modern_handshake(b.port)); /* and the broker still serves */
    assert_int_equal(broker_stop(&b), 0);
}

static void versions_and_suites_are_settings(void **state)
{
    (void)state;
    test_broker b;
    const char *env[] = {env_strings[0], env_strings[1], "QUEEN_TLS_MIN_VERSION=1.3", NULL};
    broker_spawn(&b, pgtest_url(), env);
    long long deadline = now_ms() + 30000;
    while (!handshake(b.port, CURL_SSLVERSION_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_3, NULL)) {
        if (now_ms() > deadline || waitpid(b.pid, NULL, WNOHANG) != 0)
            fail_msg("the TLS 1.3-only broker never answered (log %s)", b.log);
        pause_ms(20);
    }
    assert_false(handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, NULL));
    assert_int_equal(broker_stop(&b), 0);

    assert_true(start_tls_broker(&b, "QUEEN_TLS_CIPHERS=ECDHE-RSA-CHACHA20-POLY1305"));
    assert_true(
        handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "ECDHE-RSA-CHACHA20-POLY1305"));
    assert_false(
        handshake(b.port, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256"));
    assert_int_equal(broker_stop(&b), 0);
}

/* The broker exits non-zero at start with setting, and its log names it. */
static void stops_naming(const char *setting, const char *name)
{
    test_broker b;
    const char *env[] = {env_strings[0], env_strings[1], setting, NULL};
    broker_spawn(&b, pgtest_url(), env);
    int status = 0;
    long long deadline = now_ms() + 30000;
    pid_t done = 0;
    while ((done = waitpid(b.pid, &status, WNOHANG)) == 0) {
        if (now_ms() > deadline) {
            broker_stop(&b);
            fail_msg("the broker started with %s (log %s)", setting, b.log);
        }
        pause_ms(20);
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char *log = read_file(b.log);
    if (strstr(log, name) == NULL)
        fail_msg("the log of a broker started with %s does not name %s:\n%s", setting, name, log);
    free(log);
    unlink(b.log);
}

static void a_setting_openssl_refuses_stops_the_broker(void **state)
{
    (void)state;
    stops_naming("QUEEN_TLS_CIPHERS=NO-SUCH-THING", "QUEEN_TLS_CIPHERS");
    stops_naming("QUEEN_TLS_CIPHERSUITES=TLS_NO_SUCH_SUITE", "QUEEN_TLS_CIPHERSUITES");
    stops_naming("QUEEN_TLS_MIN_VERSION=1.1", "QUEEN_TLS_MIN_VERSION");
    /* The GnuTLS string of earlier versions is not silently ignored. */
    stops_naming("QUEEN_TLS_PRIORITIES=NORMAL:-VERS-ALL:+VERS-TLS1.3", "QUEEN_TLS_PRIORITIES");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(old_protocols_and_suites_without_forward_secrecy_are_refused),
        cmocka_unit_test(versions_and_suites_are_settings),
        cmocka_unit_test(a_setting_openssl_refuses_stops_the_broker),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
