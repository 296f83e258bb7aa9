/* queenctl driven as an operator would: the built binary against a real
 * broker, its output piped (JSON lines) and once under a pseudo-terminal
 * (the table), with the exit codes a script branches on. */
#include "broker.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"

#include <fcntl.h>
#include <pty.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static test_broker b;
static char ctl_bin[512];

typedef struct run_result {
    int code;
    char *out, *err;
} run_result;

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static char *slurp_fd(int fd)
{
    lseek(fd, 0, SEEK_SET);
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    ssize_t k;
    while ((k = read(fd, s + n, cap - n - 1)) > 0) {
        n += (size_t)k;
        if (n + 1 >= cap)
            s = realloc(s, cap *= 2);
    }
    s[n] = '\0';
    return s;
}

static int temp_fd(void)
{
    char path[] = "/tmp/queenctl-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

/* Runs queenctl with argv (NULL-terminated) and stdin text; env entries
 * ("NAME=value") are set in the child. */
static run_result run_env(const char *in, const char *const *env, const char *const *args)
{
    int fin = temp_fd(), fout = temp_fd(), ferr = temp_fd();
    if (in != NULL)
        assert_true(write(fin, in, strlen(in)) == (ssize_t)strlen(in));
    lseek(fin, 0, SEEK_SET);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fin, 0);
        dup2(fout, 1);
        dup2(ferr, 2);
        setenv("QUEEN_URL", b.base, 1);
        unsetenv("QUEEN_TOKEN");
        for (size_t i = 0; env != NULL && env[i] != NULL; i++)
            putenv(strdup(env[i]));
        const char *argv[32] = {ctl_bin};
        size_t n = 1;
        for (size_t i = 0; args[i] != NULL && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(ctl_bin, (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    run_result r = {.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1, .out = slurp_fd(fout), .err = slurp_fd(ferr)};
    close(fin);
    close(fout);
    close(ferr);
    return r;
}

#define RUN(in, ...) run_env((in), NULL, (const char *const[]){__VA_ARGS__, NULL})

static void expect_code(const run_result *r, int code)
{
    if (r->code != code)
        fail_msg("exit %d, expected %d; stdout: %s; stderr: %s", r->code, code, r->out, r->err);
}

static void test_health(void **state)
{
    (void)state;
    run_result r = RUN(NULL, "health");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"status\":\"healthy\""));
    run_free(&r);
}

static void test_kv_round_trip(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ctl");
    run_result r = RUN(NULL, "kv", "put", ns, "user/1%", "{\"n\":0.1,\"big\":12345678901234567890}", "--forever");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"applied\": true"));
    run_free(&r);
    r = RUN(NULL, "kv", "get", ns, "user/1%");
    expect_code(&r, 0);
    assert_string_equal(r.out, "{\"n\": 0.1, \"big\": 12345678901234567890}\n");
    run_free(&r);
    /* VALUE omitted: read from stdin (a trailing newline is not part of it). */
    r = RUN("\"from stdin\"\n", "kv", "put", ns, "s", "--ttl", "600");
    expect_code(&r, 0);
    run_free(&r);
    r = RUN(NULL, "kv", "get", ns, "s");
    expect_code(&r, 0);
    assert_string_equal(r.out, "\"from stdin\"\n");
    run_free(&r);
    r = RUN(NULL, "kv", "incr", ns, "n", "2.5", "--forever");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"value\": 2.5"));
    run_free(&r);
    /* A lost condition without --required: a result not applied (exit 1); with it, a refusal (exit 3). */
    r = RUN(NULL, "kv", "put", ns, "s", "1", "--forever", "--expect", "0");
    expect_code(&r, 1);
    run_free(&r);
    r = RUN(NULL, "kv", "put", ns, "s", "1", "--forever", "--expect", "0", "--required");
    expect_code(&r, 3);
    assert_non_null(strstr(r.err, "precondition"));
    run_free(&r);
    r = RUN(NULL, "kv", "ls", ns);
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"key\": \"n\""));
    assert_non_null(strstr(r.out, "\"key\": \"s\""));
    assert_non_null(strstr(r.out, "\"key\": \"user/1%\""));
    run_free(&r);
    char *spec = fmt("%s/us", ns);
    r = RUN(NULL, "kv", "ls", spec);
    expect_code(&r, 0);
    assert_null(strstr(r.out, "\"key\": \"n\""));
    assert_non_null(strstr(r.out, "\"key\": \"user/1%\""));
    run_free(&r);
    r = RUN(NULL, "kv", "del", ns, "s");
    expect_code(&r, 0);
    run_free(&r);
    r = RUN(NULL, "kv", "get", ns, "s");
    expect_code(&r, 1);
    assert_string_equal(r.out, "");
    run_free(&r);
    free(spec);
    free(ns);
}

static void test_exit_codes(void **state)
{
    (void)state;
    run_result r = RUN(NULL, "kv", "put", "ns");
    expect_code(&r, 2);
    run_free(&r);
    r = RUN(NULL, "kv", "put", "ns", "k", "1", "--ttl", "5", "--forever");
    expect_code(&r, 2);
    run_free(&r);
    r = RUN(NULL, "frobnicate");
    expect_code(&r, 2);
    run_free(&r);
    /* No expiry: a usage error naming the flags, said before anything is
     * sent (nobody listens at dead, and the answer is still 2, not 4). */
    char *dead = fmt("QUEEN_URL=http://127.0.0.1:%d", broker_free_port());
    const char *no_expiry[][8] = {{"kv", "put", "ns", "k", "1", NULL}, {"kv", "incr", "ns", "k", "2", NULL}};
    for (size_t i = 0; i < 2; i++) {
        r = run_env(NULL, (const char *const[]){dead, NULL}, no_expiry[i]);
        expect_code(&r, 2);
        assert_non_null(strstr(r.err, "--ttl SECONDS or --forever"));
        run_free(&r);
    }
    /* Nobody listening: unavailable. */
    r = run_env(NULL, (const char *const[]){dead, NULL}, (const char *const[]){"--retries", "0", "health", NULL});
    expect_code(&r, 4);
    assert_non_null(strstr(r.err, "unreachable"));
    run_free(&r);
    /* --url wins over QUEEN_URL, and a list fails over to the live broker. */
    char *list = fmt("http://127.0.0.1:%d,%s", broker_free_port(), b.base);
    r = run_env(NULL, (const char *const[]){dead, NULL}, (const char *const[]){"health", "--url", list, NULL});
    expect_code(&r, 0);
    run_free(&r);
    free(list);
    free(dead);
}

/* Against a broker with QUEEN_AUTH=jwt: --token (and QUEEN_TOKEN) carry a
 * bearer token; without one the broker's 401 is a refusal (exit 3). */
static void test_token_against_an_authenticated_broker(void **state)
{
    (void)state;
    static const char secret[] = "queenctl-test-secret-of-32-bytes!";
    char *secret_env = fmt("QUEEN_JWT_SECRET=%s", secret);
    const char *env[] = {"QUEEN_AUTH=jwt", secret_env, "QUEEN_JWT_DEFAULT_TENANT=1", NULL};
    test_broker secured;
    assert_true(broker_start(&secured, env));
    /* With tokens tenancy is on: the token's tenant needs its kv grant. */
    static const char tenant[] = "6d0c3f5e-7a7b-4c1e-9c55-2f4a3b8e9d01";
    char why[256];
    PGconn *db = pgtest_connect_quiet(why, sizeof why);
    assert_non_null(db);
    PQclear(pgtest_exec(db,
                        "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ($1::uuid, true) "
                        "ON CONFLICT (tenant_id) DO UPDATE SET enabled = true",
                        1, (const char *const[]){tenant}));
    PQfinish(db);
    char *token = mint_jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                           "{\"sub\":\"ctl\",\"role\":\"write\",\"tenant\":\"6d0c3f5e-7a7b-4c1e-9c55-2f4a3b8e9d01\"}",
                           secret, strlen(secret), NULL);
    char *url = fmt("QUEEN_URL=%s", secured.base);
    char *ns = pgtest_unique("ctlauth");
    run_result r = run_env(NULL, (const char *const[]){url, NULL},
                           (const char *const[]){"kv", "put", ns, "k", "7", "--forever", "--token", token, NULL});
    expect_code(&r, 0);
    run_free(&r);
    char *token_env = fmt("QUEEN_TOKEN=%s", token);
    r = run_env(NULL, (const char *const[]){url, token_env, NULL}, (const char *const[]){"kv", "get", ns, "k", NULL});
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "7"));
    run_free(&r);
    r = run_env(NULL, (const char *const[]){url, NULL}, (const char *const[]){"kv", "get", ns, "k", NULL});
    expect_code(&r, 3);
    assert_non_null(strstr(r.err, "auth_missing_token"));
    run_free(&r);
    assert_int_equal(broker_stop(&secured), 0);
    free(ns);
    free(token_env);
    free(url);
    free(token);
    free(secret_env);
}

static void test_push_pop_queues(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctlq");
    run_result r = RUN("{\"n\":1}\n\n{\"n\":0.1}\n12345678901234567890\n", "push", q, "--id-prefix", "line");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"transaction_id\": \"line-1\""));
    assert_non_null(strstr(r.out, "\"transaction_id\": \"line-4\""));
    run_free(&r);
    /* The same lines again: duplicates, not new messages. */
    r = RUN("{\"n\":1}\n", "push", q, "--id-prefix", "line");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"duplicate\""));
    run_free(&r);
    r = RUN(NULL, "queues");
    expect_code(&r, 0);
    char *name = fmt("\"name\": \"%s\"", q);
    assert_non_null(strstr(r.out, name));
    run_free(&r);
    r = RUN(NULL, "pop", q, "--batch", "10", "--ack");
    expect_code(&r, 0);
    int lines = 0;
    for (char *p = r.out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    assert_int_equal(lines, 3);
    assert_non_null(strstr(r.out, "12345678901234567890"));
    assert_non_null(strstr(r.out, "0.1"));
    run_free(&r);
    r = RUN(NULL, "pop", q, "--wait", "--timeout", "200");
    expect_code(&r, 1);
    run_free(&r);
    free(name);
    free(q);
}

static void test_consume_command(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctlc");
    char *seen = fmt("/tmp/queenctl-consume-%d.txt", getpid());
    unlink(seen);
    run_result r = RUN("{\"n\":1}\n{\"n\":2}\n", "push", q, "--id-prefix", "m");
    expect_code(&r, 0);
    run_free(&r);
    /* The first delivery of each message fails; the redelivery appends the payload and acks. */
    char *script = fmt("test \"$QUEEN_DELIVERY_ATTEMPT\" -gt 1 || exit 7; cat >> %s", seen);
    r = RUN(NULL, "consume", q, "--count", "2", "--lease", "30", "--", "sh", "-c", script);
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"status\":\"failed\",\"exit\":7"));
    assert_non_null(strstr(r.out, "\"transactionId\":\"m-1\",\"status\":\"acked\""));
    assert_non_null(strstr(r.out, "\"transactionId\":\"m-2\",\"status\":\"acked\""));
    run_free(&r);
    char *text = read_file(seen);
    assert_string_equal(text, "{\"n\": 1}\n{\"n\": 2}\n");
    free(text);
    r = RUN(NULL, "pop", q);
    expect_code(&r, 1);
    run_free(&r);
    r = RUN(NULL, "consume", q, "--count", "1");
    expect_code(&r, 2);
    run_free(&r);
    unlink(seen);
    free(script);
    free(seen);
    free(q);
}

/* SIGTERM stops a waiting consume cleanly: exit 0, nothing half-done. */
static void test_consume_stops_on_sigterm(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctlsig");
    int fout = temp_fd();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fout, 1);
        setenv("QUEEN_URL", b.base, 1);
        execl(ctl_bin, ctl_bin, "consume", q, "--", "true", (char *)NULL);
        _exit(127);
    }
    /* Once its long poll waits at the broker, it is in the loop. */
    bool waiting = false;
    for (int i = 0; i < 1000 && !waiting; i++) {
        http_reply r = broker_http(&b, "GET", "/metrics", NULL, NULL);
        json_t *m = json_parse(r.body);
        waiting = jint(json_object_get(m, "http"), "longPollsWaiting") > 0;
        json_decref(m);
        http_reply_free(&r);
        if (!waiting)
            pause_ms(10);
    }
    assert_true(waiting);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(fout);
    free(q);
}

static void test_tx_file(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ctltx");
    char *path = fmt("/tmp/queenctl-tx-%d.json", getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"kv\":[{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"marker\",\"value\":true,\"forever\":true,"
               "\"required\":true},{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"effect\",\"delta\":1,\"forever\":true}]}\n",
            ns, ns);
    fclose(f);
    run_result r = RUN(NULL, "tx", path);
    expect_code(&r, 0);
    json_t *o = json_parse(r.out);
    assert_true(jtrue(o, "success"));
    json_decref(o);
    run_free(&r);
    r = RUN(NULL, "tx", path);
    expect_code(&r, 1);
    o = json_parse(r.out);
    assert_false(jtrue(o, "success"));
    assert_string_equal(jstr(o, "reason"), "kv_precondition");
    assert_int_equal(jint(o, "failedIndex"), 0);
    json_decref(o);
    run_free(&r);
    r = RUN(NULL, "kv", "get", ns, "effect");
    expect_code(&r, 0);
    assert_string_equal(r.out, "1\n");
    run_free(&r);
    unlink(path);
    free(path);
    free(ns);
}

static void test_help_everywhere(void **state)
{
    (void)state;
    const char *cmds[] = {"health", "kv", "push", "pop", "consume", "queues", "tx", "configure", "ack", "lease", "dlq"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        run_result r = RUN(NULL, cmds[i], "--help");
        expect_code(&r, 0);
        char *head = fmt("usage: queenctl %s", cmds[i]);
        if (strncmp(r.out, head, strlen(head)) != 0)
            fail_msg("%s --help printed: %s", cmds[i], r.out);
        free(head);
        run_free(&r);
    }
    run_result r = RUN(NULL, "--help");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "commands:"));
    run_free(&r);
}

/* The operator's side of a queue: configure it, fail a message by hand into
 * the dead letters (pop's lines piped to ack), list and requeue them, keep
 * the redelivered message's lease, ack it, and find the dead letters empty. */
static void test_configure_ack_lease_dlq(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctlops");
    run_result r = RUN(NULL, "configure", q, "{\"retryLimit\":0}", "--namespace", "ops", "--task", "t");
    expect_code(&r, 0);
    run_free(&r);
    r = RUN("{\"n\":1}\n", "push", q, "--id-prefix", q);
    expect_code(&r, 0);
    run_free(&r);
    r = RUN(NULL, "pop", q);
    expect_code(&r, 0);
    char *popped = r.out;
    free(r.err);
    r = RUN(popped, "ack", "--failed", "--error", "by hand");
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"success\": true"));
    run_free(&r);
    free(popped);
    r = RUN(NULL, "dlq", "ls", q);
    expect_code(&r, 0);
    char *tid = fmt("\"transactionId\": \"%s-1\"", q);
    assert_non_null(strstr(r.out, tid));
    assert_non_null(strstr(r.out, "by hand"));
    run_free(&r);
    r = RUN(NULL, "dlq", "requeue", q);
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"requeued\": 1"));
    run_free(&r);
    r = RUN(NULL, "pop", q);
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, tid));
    /* The lease id, from pop's line, to extend by hand. */
    const char *at = strstr(r.out, "\"leaseId\": \"");
    assert_non_null(at);
    char lease[64] = "";
    sscanf(at + strlen("\"leaseId\": \""), "%63[^\"]", lease);
    popped = r.out;
    free(r.err);
    r = RUN(NULL, "lease", "extend", lease, "--seconds", "60");
    expect_code(&r, 0);
    run_free(&r);
    r = RUN(NULL, "lease", "extend", "00000000-0000-4000-8000-000000000000");
    expect_code(&r, 1); /* no such lease: a "no", not a refusal */
    run_free(&r);
    r = RUN(popped, "ack");
    expect_code(&r, 0);
    run_free(&r);
    free(popped);
    r = RUN(NULL, "dlq", "ls", q);
    expect_code(&r, 1);
    run_free(&r);
    r = RUN(NULL, "dlq", "del", q);
    expect_code(&r, 0);
    assert_non_null(strstr(r.out, "\"deleted\": 0"));
    run_free(&r);
    /* Usage: ack needs its three ids or messages; dlq needs its verb. */
    r = RUN("not json\n", "ack");
    expect_code(&r, 2);
    run_free(&r);
    r = RUN(NULL, "dlq", "frob", q);
    expect_code(&r, 2);
    run_free(&r);
    free(tid);
    free(q);
}

/* Runs queenctl on a pseudo-terminal and returns what the terminal showed. */
static char *run_on_tty(const char *const *args, int *code)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("QUEEN_URL", b.base, 1);
        const char *argv[16] = {ctl_bin};
        size_t n = 1;
        for (size_t i = 0; args[i] != NULL && n < 15; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(ctl_bin, (char *const *)argv);
        _exit(127);
    }
    size_t cap = 8192, len = 0;
    char *out = malloc(cap);
    ssize_t k;
    /* Read until the child closes the terminal (EIO on Linux). */
    while ((k = read(master, out + len, cap - len - 1)) > 0) {
        len += (size_t)k;
        if (len + 1 >= cap)
            out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    int status;
    waitpid(pid, &status, 0);
    close(master);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

static void test_table_on_a_terminal(void **state)
{
    (void)state;
    char *ns = pgtest_unique("ctltty");
    run_result r = RUN(NULL, "kv", "put", ns, "alpha", "\"first\"", "--forever");
    expect_code(&r, 0);
    run_free(&r);
    r = RUN(NULL, "kv", "put", ns, "b", "12345678901234567890", "--forever");
    expect_code(&r, 0);
    run_free(&r);
    int code;
    char *screen = run_on_tty((const char *const[]){"kv", "ls", ns, NULL}, &code);
    assert_int_equal(code, 0);
    /* A header row and aligned columns, not JSON: each value starts under VALUE. */
    if (strncmp(screen, "KEY    VERSION", 14) != 0)
        fail_msg("the terminal showed: %s", screen);
    const char *value_col = strstr(screen, "VALUE");
    const char *alpha = strstr(screen, "\r\nalpha  "), *bee = strstr(screen, "\r\nb      ");
    assert_non_null(value_col);
    assert_non_null(alpha);
    assert_non_null(bee);
    const char *first = strstr(alpha, "\"first\""), *big = strstr(bee, "12345678901234567890");
    assert_non_null(first);
    assert_non_null(big);
    assert_int_equal(value_col - screen, first - (alpha + 2));
    assert_int_equal(value_col - screen, big - (bee + 2));
    assert_non_null(strstr(bee, "never"));
    assert_null(strstr(screen, "{\"key\""));
    free(screen);
    screen = run_on_tty((const char *const[]){"health", NULL}, &code);
    assert_int_equal(code, 0);
    assert_non_null(strstr(screen, "STATUS   VERSION"));
    free(screen);
    /* --json keeps JSON lines on a terminal too. */
    screen = run_on_tty((const char *const[]){"--json", "kv", "ls", ns, NULL}, &code);
    assert_int_equal(code, 0);
    assert_non_null(strstr(screen, "{\"key\": \"alpha\""));
    free(screen);
    free(ns);
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("QUEEN_BIN");
    if (bin == NULL)
        return -1;
    /* queenctl is built beside the broker. */
    snprintf(ctl_bin, sizeof ctl_bin, "%s", bin);
    char *slash = strrchr(ctl_bin, '/');
    if (slash == NULL)
        return -1;
    snprintf(slash + 1, sizeof ctl_bin - (size_t)(slash + 1 - ctl_bin), "queenctl");
    if (access(ctl_bin, X_OK) != 0)
        return -1;
    return broker_start(&b, NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    broker_stop(&b);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),          cmocka_unit_test(test_kv_round_trip),
        cmocka_unit_test(test_exit_codes),      cmocka_unit_test(test_push_pop_queues),
        cmocka_unit_test(test_consume_command), cmocka_unit_test(test_consume_stops_on_sigterm),
        cmocka_unit_test(test_tx_file),         cmocka_unit_test(test_token_against_an_authenticated_broker),
        cmocka_unit_test(test_help_everywhere), cmocka_unit_test(test_table_on_a_terminal),
        cmocka_unit_test(test_configure_ack_lease_dlq),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
