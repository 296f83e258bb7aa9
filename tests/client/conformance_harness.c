/* conformance_harness: the broker world of clients/conformance for runners
 * written in other languages (PHP, C++, ...), so that each of them makes
 * brokers, quotas and a saturated broker exactly as the C runner does
 * (tests/support/broker.c on the private PostgreSQL of scripts/test.sh).
 *
 * It reads one command per line on stdin and answers one JSON line on
 * stdout:
 *   start [NAME=value ...]  a broker on the test database with these extra
 *                           environment entries, once healthy:
 *                           {"id":N,"url":"http://127.0.0.1:PORT"}
 *   saturate                a broker whose only connection place is held
 *                           here, so every request is 503: {"id":N,"url":...}
 *   stop N                  broker N stopped and exited: {"ok":true}
 *   dead_url                a loopback URL where nothing listens: {"url":...}
 *   sql TEXT                TEXT run on the test database: {"ok":true}
 *   quit                    (or end of input) stops every broker, exits 0
 * A command that cannot be done answers {"error":"..."}. */
#include "broker.h"
#include "testutil.h"

#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_BROKERS 64
#define MAX_ENV 16

static test_broker brokers[MAX_BROKERS];
static bool running[MAX_BROKERS];
static int held_fd[MAX_BROKERS];
static int nbrokers;

static void reply_error(const char *what)
{
    json_t *o = json_pack("{ss}", "error", what);
    char *t = json_dumps(o, JSON_COMPACT);
    printf("%s\n", t);
    free(t);
    json_decref(o);
}

static void reply_broker(int id)
{
    printf("{\"id\":%d,\"url\":\"%s\"}\n", id, brokers[id].base);
}

static int next_slot(void)
{
    if (nbrokers >= MAX_BROKERS)
        return -1;
    held_fd[nbrokers] = -1;
    return nbrokers++;
}

static void cmd_start(char *rest)
{
    const char *env[MAX_ENV + 1];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(rest, " ", &save); tok != NULL && n < MAX_ENV;
         tok = strtok_r(NULL, " ", &save))
        env[n++] = tok;
    env[n] = NULL;
    int id = next_slot();
    if (id < 0)
        return reply_error("too many brokers");
    const char *url = getenv("QUEEN_TEST_PG_URL");
    if (url == NULL)
        return reply_error("QUEEN_TEST_PG_URL is not set: run through scripts/test.sh");
    broker_spawn(&brokers[id], url, env);
    running[id] = true;
    if (!broker_wait_healthy(&brokers[id], 30000)) {
        char *m = fmt("the broker did not become healthy (log: %s)", brokers[id].log);
        reply_error(m);
        free(m);
        return;
    }
    reply_broker(id);
}

/* The broker admits connections in the order they open: the one held here
 * is its first, before any health probe, so it takes the only place; then
 * every request is answered 503 too_many_connections. */
static void cmd_saturate(void)
{
    const char *env[] = {"QUEEN_MAX_CONNECTIONS=1", "QUEEN_HTTP_THREADS=1", "QUEEN_IDLE_TIMEOUT_MS=600000",
                         "QUEEN_REQUEST_READ_TIMEOUT_MS=600000", NULL};
    int id = next_slot();
    if (id < 0)
        return reply_error("too many brokers");
    broker_spawn(&brokers[id], getenv("QUEEN_TEST_PG_URL"), env);
    running[id] = true;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)brokers[id].port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long long until = now_ms() + 30000;
    for (;;) {
        held_fd[id] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(held_fd[id], (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        close(held_fd[id]);
        held_fd[id] = -1;
        if (now_ms() > until)
            return reply_error("the saturated broker never listened");
        pause_ms(20);
    }
    for (;;) {
        http_reply r = broker_http(&brokers[id], "GET", "/health", NULL, NULL);
        long status = r.status;
        http_reply_free(&r);
        if (status == 503)
            break;
        if (status == 200)
            return reply_error("the held connection did not take the broker's only place");
        if (now_ms() > until)
            return reply_error("the saturated broker never answered");
        pause_ms(20);
    }
    reply_broker(id);
}

static void stop_one(int id)
{
    if (held_fd[id] >= 0) {
        close(held_fd[id]);
        held_fd[id] = -1;
    }
    if (running[id]) {
        broker_stop(&brokers[id]);
        running[id] = false;
    }
}

static void cmd_sql(const char *sql)
{
    PGconn *conn = PQconnectdb(getenv("QUEEN_TEST_PG_URL") ? getenv("QUEEN_TEST_PG_URL") : "");
    if (PQstatus(conn) != CONNECTION_OK) {
        reply_error(PQerrorMessage(conn));
        PQfinish(conn);
        return;
    }
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        printf("{\"ok\":true}\n");
    else
        reply_error(PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(conn);
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((len = getline(&line, &cap, stdin)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        char *rest = strchr(line, ' ');
        if (rest != NULL)
            *rest++ = '\0';
        else
            rest = line + len;
        if (strcmp(line, "start") == 0) {
            cmd_start(rest);
        } else if (strcmp(line, "saturate") == 0) {
            cmd_saturate();
        } else if (strcmp(line, "stop") == 0) {
            int id = atoi(rest);
            if (id < 0 || id >= nbrokers)
                reply_error("no such broker");
            else {
                stop_one(id);
                printf("{\"ok\":true}\n");
            }
        } else if (strcmp(line, "dead_url") == 0) {
            printf("{\"url\":\"http://127.0.0.1:%d\"}\n", broker_free_port());
        } else if (strcmp(line, "sql") == 0) {
            cmd_sql(rest);
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            reply_error("unknown command");
        }
    }
    free(line);
    for (int i = 0; i < nbrokers; i++)
        stop_one(i);
    return 0;
}
