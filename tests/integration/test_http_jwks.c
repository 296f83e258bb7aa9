/* The JWKS refresh never stalls an event loop (docs/auth.md,
 * Keys). The review's reproduction: a token naming an unknown kid made the
 * broker fetch the JWKS inside the request, on the event loop, and a
 * concurrent /health took 4.7 s. Here the JWKS is served over https by a
 * python3 server on loopback that answers slowly (it sleeps before each
 * answer once told to): with one event loop, a token naming a kid the set
 * does not hold yet is 401 token_unknown_key at once, /health answers at
 * once while the fetch it asked for is still waiting on the issuer, every
 * other token asking meanwhile adds no fetch, and once the fetch lands the
 * token is accepted. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"

/* What an immediate answer takes at most on a loaded test machine; the
 * issuer sleeps ISSUER_DELAY_S, so a request that waited for it is far
 * above. */
#define PROMPT_MS 1500
#define ISSUER_DELAY_S 4

static char dir[64], cert[128], key[128];

static char *in_dir(const char *name)
{
    return fmt("%s/%s", dir, name);
}

static void write_text(const char *name, const char *text)
{
    char *path = in_dir(name), *tmp = fmt("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0); /* the server never reads half a file */
    free(tmp);
    free(path);
}

static bool exists(const char *name)
{
    char *path = in_dir(name);
    struct stat st;
    bool yes = stat(path, &st) == 0;
    free(path);
    return yes;
}

/* Requests the issuer received: one line each. */
static int issuer_requests(void)
{
    char *path = in_dir("requests");
    FILE *f = fopen(path, "r");
    free(path);
    if (f == NULL)
        return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static char *jwks_of(EVP_PKEY *a, const char *kid_a, EVP_PKEY *b, const char *kid_b)
{
    char *ja = mint_jwk(a, kid_a), *jb = b ? mint_jwk(b, kid_b) : NULL;
    char *doc = jb ? fmt("{\"keys\":[%s,%s]}", ja, jb) : fmt("{\"keys\":[%s]}", ja);
    free(ja);
    free(jb);
    return doc;
}

typedef struct timed {
    long status;
    long long ms;
} timed;

static timed timed_get(const test_broker *b, const char *path, const char *token)
{
    char *authz = token ? fmt("Authorization: Bearer %s", token) : NULL;
    const char *h[] = {authz, NULL};
    long long t0 = now_ms();
    http_reply r = broker_http(b, "GET", path, NULL, authz ? h : NULL);
    timed out = {r.status, now_ms() - t0};
    http_reply_free(&r);
    free(authz);
    return out;
}

static pid_t start_issuer(int port)
{
    char *script = fmt("import http.server, ssl, os, time\n"
                       "d = '%s'\n"
                       "class H(http.server.SimpleHTTPRequestHandler):\n"
                       "    def __init__(self, *a, **k):\n"
                       "        super().__init__(*a, directory=d, **k)\n"
                       "    def do_GET(self):\n"
                       "        with open(os.path.join(d, 'requests'), 'a') as f: f.write('x\\n')\n"
                       "        slow = os.path.join(d, 'slow')\n"
                       "        if os.path.exists(slow):\n"
                       "            open(os.path.join(d, 'asked'), 'w').close()\n"
                       "            time.sleep(float(open(slow).read()))\n"
                       "        super().do_GET()\n"
                       "    def log_message(self, *a): pass\n"
                       "s = http.server.ThreadingHTTPServer(('127.0.0.1', %d), H)\n"
                       "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('%s', '%s')\n"
                       "s.socket = c.wrap_socket(s.socket, server_side=True)\n"
                       "s.serve_forever()\n",
                       dir, port, cert, key);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("python3", "python3", "-c", script, (char *)NULL);
        _exit(127);
    }
    free(script);
    return pid;
}

static bool issuer_up(const char *url)
{
    CURL *c = curl_easy_init();
    http_reply body = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, cert);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    free(body.body);
    return rc == CURLE_OK && status == 200;
}

static void an_unknown_kid_never_holds_the_event_loop(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/queen-jwks-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    char *cmd = fmt("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s "
                    "-out %s -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
                    key, cert);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    EVP_PKEY *old_key = mint_keygen("EC"), *new_key = mint_keygen("EC");
    char *doc = jwks_of(old_key, "old", NULL, NULL);
    write_text("jwks.json", doc);
    free(doc);
    int port = broker_free_port();
    pid_t issuer = start_issuer(port);
    char *url = fmt("https://127.0.0.1:%d/jwks.json", port);
    WAIT_UNTIL(issuer_up(url), 20000, "the JWKS server never answered");
    int before = issuer_requests();

    char *jwks_env = fmt("QUEEN_JWT_JWKS=%s", url), *ca_env = fmt("QUEEN_JWT_JWKS_CA=%s", cert);
    const char *env[] = {"QUEEN_AUTH=jwt", jwks_env, ca_env, "QUEEN_HTTP_THREADS=1", "QUEEN_JWT_JWKS_MIN_REFETCH_S=1",
                         NULL};
    test_broker b;
    assert_true(broker_start(&b, env));
    assert_int_equal(issuer_requests(), before + 1); /* the fetch at start */
    char *payload = fmt("{\"role\":\"read\",\"tenant\":\"00000000-0000-0000-0000-000000000001\",\"exp\":%lld}",
                        (long long)time(NULL) + 600);
    char *old_token = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"old\"}", payload, NULL, 0, old_key);
    char *new_token = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"new\"}", payload, NULL, 0, new_key);
    assert_int_equal(timed_get(&b, "/api/v1/resources/queues", old_token).status, 200);

    /* The issuer rotates and turns slow. */
    doc = jwks_of(old_key, "old", new_key, "new");
    write_text("jwks.json", doc);
    free(doc);
    char *delay = fmt("%d", ISSUER_DELAY_S);
    write_text("slow", delay);
    free(delay);
    /* The new kid is refused at once, again and again, until a fetch was
     * asked for (past QUEEN_JWT_JWKS_MIN_REFETCH_S since the start). */
    long long deadline = now_ms() + 20000;
    int refusals = 0;
    while (!exists("asked")) {
        timed t = timed_get(&b, "/api/v1/resources/queues", new_token);
        if (t.ms > PROMPT_MS)
            fail_msg("an unknown kid was answered %ld in %lld ms: the request waited for the JWKS fetch", t.status,
                     t.ms);
        assert_int_equal(t.status, 401);
        refusals++;
        if (now_ms() > deadline)
            fail_msg("no JWKS fetch was asked for");
        pause_ms(20);
    }
    /* The issuer is sleeping on the fetch now: the only event loop serves. */
    timed health = timed_get(&b, "/health", NULL);
    assert_int_equal(health.status, 200);
    if (health.ms > PROMPT_MS)
        fail_msg("/health took %lld ms while the JWKS was fetched", health.ms);
    timed again = timed_get(&b, "/api/v1/resources/queues", new_token);
    assert_int_equal(again.status, 401);
    assert_true(again.ms <= PROMPT_MS);
    print_message("# %d refusal(s) before the fetch; /health %lld ms and a 401 %lld ms during it\n", refusals,
                  health.ms, again.ms);
    /* The fetch lands: the new kid is accepted, and all those tokens asked
     * for one fetch only. */
    WAIT_UNTIL(timed_get(&b, "/api/v1/resources/queues", new_token).status == 200, 20000,
               "the rotated key was never loaded (log %s)", b.log);
    assert_int_equal(issuer_requests(), before + 2);
    assert_int_equal(timed_get(&b, "/api/v1/resources/queues", old_token).status, 200);
    /* A stop does not wait out a fetch in progress either. */
    char *unknown = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"nobody\"}", payload, NULL, 0, new_key);
    write_text("slow", "30");
    char *asked = in_dir("asked");
    unlink(asked);
    free(asked);
    WAIT_UNTIL(timed_get(&b, "/api/v1/resources/queues", unknown).status == 401 && exists("asked"), 20000,
               "no fetch was asked for by the unknown kid");
    long long t0 = now_ms();
    assert_int_equal(broker_stop(&b), 0);
    if (now_ms() - t0 > 10000)
        fail_msg("the stop waited %lld ms for the JWKS fetch", now_ms() - t0);

    kill(issuer, SIGTERM);
    waitpid(issuer, NULL, 0);
    char *rm = fmt("rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
    free(rm);
    EVP_PKEY_free(old_key);
    EVP_PKEY_free(new_key);
    free(unknown);
    free(old_token);
    free(new_token);
    free(payload);
    free(jwks_env);
    free(ca_env);
    free(url);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_unknown_kid_never_holds_the_event_loop),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
