/* campaign: see campaign.h. */
#include "campaign.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pgtest.h"
#include "testutil.h"

campaign_outcome campaign_post(void **curl, const char *base, const char *path, const char *body, long *status,
                               char **reply)
{
    if (*curl == NULL)
        *curl = curl_easy_init();
    CURL *c = *curl;
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct curl_slist *list = curl_slist_append(NULL, "Content-Type: application/json");
    list = curl_slist_append(list, "Expect:");
    http_reply g = {0};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* One connection per call: on a kept-alive connection that died, libcurl
     * silently sends the request again on a new one, so a request the killed
     * broker had already committed could be applied twice, or reported as
     * never sent. */
    curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    /* long enough for a database restart to be waited out by the broker */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(list);
    *status = 0;
    *reply = NULL;
    if (rc == CURLE_COULDNT_CONNECT) {
        free(g.body);
        return CALL_NOT_SENT;
    }
    if (rc != CURLE_OK) {
        free(g.body);
        return CALL_NO_ANSWER;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    *reply = g.body ? g.body : strdup("");
    return CALL_ANSWERED;
}

void campaign_http_done(void **curl)
{
    if (*curl)
        curl_easy_cleanup(*curl);
    *curl = NULL;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool campaign_wait_healthy(void **curl, const char *base, int within_ms)
{
    long long until = campaign_now_ns() + (long long)within_ms * 1000000LL;
    while (campaign_now_ns() < until) {
        long status;
        char *reply;
        if (campaign_post(curl, base, "/health", NULL, &status, &reply) == CALL_ANSWERED && status == 200) {
            free(reply);
            return true;
        }
        free(reply);
        nap_ms(10);
    }
    return false;
}

bool campaign_broker_restart_hard(test_broker *b, const char *pg_url, const char *const *extra_env)
{
    int port = b->port;
    if (b->pid > 0) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, NULL, 0);
        b->pid = 0;
    }
    /* The same port, so clients keep their address (QUEEN_PORT comes after
     * broker_spawn's own setting and wins). */
    const char *env[16];
    char port_env[32];
    snprintf(port_env, sizeof port_env, "QUEEN_PORT=%d", port);
    size_t n = 0;
    for (; extra_env && extra_env[n] && n < 14; n++)
        env[n] = extra_env[n];
    env[n++] = port_env;
    env[n] = NULL;
    broker_spawn(b, pg_url, env);
    b->port = port;
    snprintf(b->base, sizeof b->base, "http://127.0.0.1:%d", port);
    return broker_wait_healthy(b, 30000);
}

static bool pg_script(const char *verb)
{
    const char *dir = getenv("QUEEN_TEST_PG_DIR"), *port = getenv("QUEEN_TEST_PG_PORT");
    if (dir == NULL || port == NULL)
        return false;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash scripts/pg.sh %s '%s' %s%s >&2", verb, dir, port,
             strcmp(verb, "up") == 0 ? " --fast" : "");
    return system(cmd) == 0;
}

bool campaign_pg_crash(void)
{
    return pg_script("crash");
}

bool campaign_pg_up(void)
{
    return pg_script("up");
}

long campaign_env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || *v == '\0')
        return fallback;
    long n = strtol(v, &end, 10);
    return *end == '\0' ? n : fallback;
}

void campaign_figure(const char *name, long long value)
{
    printf("# figure %s %lld\n", name, value);
    fflush(stdout);
    const char *path = getenv("QUEEN_CAMPAIGN_FIGURES");
    if (path == NULL || *path == '\0')
        return;
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s %lld\n", name, value);
        fclose(f);
    }
}

long long campaign_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

char *campaign_durable_database(const char *prefix, char **dbname)
{
    char *url = pgtest_create_database(prefix, dbname);
    PGconn *admin = pgtest_connect();
    char *sql = fmt("ALTER DATABASE \"%s\" SET synchronous_commit = on", *dbname);
    PQclear(pgtest_exec(admin, sql, 0, NULL));
    free(sql);
    PQfinish(admin);
    return url;
}

static const char *const quiet_env[] = {"QUEEN_LOG_LEVEL=error", NULL};
campaign_rig RIG = {.env = quiet_env};
static const char *rig_prefix;

static int rig_up(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RIG.db_url = campaign_durable_database(rig_prefix, &RIG.db_name);
    broker_spawn(&RIG.broker, RIG.db_url, RIG.env);
    return broker_wait_healthy(&RIG.broker, 30000) ? 0 : -1;
}

static int rig_down(void **state)
{
    (void)state;
    campaign_pg_up(); /* whatever happened, the cluster is left running */
    broker_stop(&RIG.broker);
    pgtest_drop_database(RIG.db_name);
    free(RIG.db_url);
    free(RIG.db_name);
    return 0;
}

int campaign_main(const char *prefix, const char *test_name, campaign_test_fn test)
{
    rig_prefix = prefix;
    const struct CMUnitTest tests[] = {{test_name, test, NULL, NULL, NULL}};
    return _cmocka_run_group_tests(prefix, tests, 1, rig_up, rig_down);
}

static void check_puts(PGconn *conn, const char *ns, int writer, const unsigned char *key_state, int keys,
                       long long *acked, long long *lost, long long *unknown)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "p%d-", writer);
    const char *q[] = {ns, prefix};
    PGresult *r = pgtest_exec(conn,
                              "SELECT substr(key, length($2) + 1)::int, value::text FROM queen.kv "
                              "WHERE namespace = $1 AND key LIKE $2 || '%'",
                              2, q);
    unsigned char *seen = calloc(keys > 0 ? (size_t)keys : 1, 1);
    for (int row = 0; row < PQntuples(r); row++) {
        int n = atoi(PQgetvalue(r, row, 0));
        char num[32];
        snprintf(num, sizeof num, "%d", n);
        if (n >= 0 && n < keys && strcmp(PQgetvalue(r, row, 1), num) == 0)
            seen[n] = 1;
    }
    PQclear(r);
    for (int n = 0; n < keys; n++) {
        if (key_state[n] == 1) {
            (*acked)++;
            if (!seen[n]) {
                (*lost)++;
                print_message("# acknowledged key p%d-%d is missing\n", writer, n);
            }
        } else {
            (*unknown)++;
        }
    }
    free(seen);
}

bool campaign_applied(const char *reply)
{
    json_t *v = reply ? json_loads(reply, JSON_DECODE_ANY, NULL) : NULL;
    bool yes = json_is_true(json_object_get(json_array_get(json_object_get(v, "results"), 0), "applied"));
    json_decref(v);
    return yes;
}

bool campaign_writer_has_room(const campaign_writer *w)
{
    return w->keys < w->max_keys;
}

campaign_outcome campaign_write_next(campaign_writer *w, void **curl, const char *base, bool *acked)
{
    char body[256];
    bool is_incr = w->calls % 2 == 0;
    if (is_incr)
        snprintf(body, sizeof body,
                 "{\"operations\":[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"c%d\",\"delta\":1,\"forever\":true}]}",
                 w->ns, w->id);
    else
        snprintf(body, sizeof body,
                 "{\"operations\":[{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"p%d-%d\",\"value\":%d,"
                 "\"forever\":true}]}",
                 w->ns, w->id, w->keys, w->keys);
    long status;
    char *reply;
    campaign_outcome out = campaign_post(curl, base, "/api/v1/kv", body, &status, &reply);
    *acked = false;
    if (out == CALL_NOT_SENT)
        return out;
    *acked = out == CALL_ANSWERED && status == 200 && campaign_applied(reply);
    free(reply);
    w->calls++;
    if (is_incr) {
        if (*acked)
            w->incr_acked++;
        else
            w->incr_unknown++;
    } else {
        w->key_state[w->keys++] = *acked ? 1 : 2;
    }
    if (*acked)
        atomic_fetch_add(&w->acked, 1);
    return out;
}

void campaign_check_writer(PGconn *conn, const campaign_writer *w, long long *acked, long long *unknown,
                           long long *lost, long long *doubled)
{
    char key[32];
    snprintf(key, sizeof key, "c%d", w->id);
    const char *p[] = {w->ns, key};
    PGresult *r = pgtest_exec(conn, "SELECT value::text FROM queen.kv WHERE namespace = $1 AND key = $2", 2, p);
    long long counter = PQntuples(r) ? atoll(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    *acked += w->incr_acked;
    *unknown += w->incr_unknown;
    if (counter < w->incr_acked)
        *lost += w->incr_acked - counter;
    if (counter > w->incr_acked + w->incr_unknown)
        *doubled += counter - w->incr_acked - w->incr_unknown;
    if (counter < w->incr_acked || counter > w->incr_acked + w->incr_unknown)
        print_message("# counter %s: %lld, acknowledged %lld, unknown %lld\n", key, counter, w->incr_acked,
                      w->incr_unknown);
    check_puts(conn, w->ns, w->id, w->key_state, w->keys, acked, lost, unknown);
}
