/* Linearizability of the KV route under concurrency and restarts: client
 * threads send get, put, put with expect (compare-and-set), putIfAbsent,
 * incr with min/max and delete (with and without expect) on a few hot keys
 * to a real broker over HTTP, recording every op's invoke and complete
 * instants and answer. lincheck.c then searches each key's history for a
 * sequential order that explains every answer.
 *
 * Rounds alternate: no fault, the broker killed with SIGKILL mid-round and
 * started again, and PostgreSQL stopped in immediate mode and started again.
 * An op whose answer never came (or that answered 5xx) is "maybe applied";
 * one whose connection was refused never reached the broker and is dropped.
 *
 * Sizing (environment): LIN_SECONDS (default 0: one round of each kind),
 * LIN_CLIENTS (4), LIN_KEYS (3), LIN_OPS (ops per client per round, 100). */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "broker.h"
#include "campaign.h"
#include "http_fixture.h"
#include "lincheck.h"
#include "pgtest.h"
#include "testutil.h"

enum fault { FAULT_NONE, FAULT_BROKER_KILL, FAULT_PG_CRASH, FAULT_KINDS };
static const char *const fault_names[] = {"none", "broker SIGKILL", "PostgreSQL immediate stop"};


typedef struct round_ctx {
    const char *ns;
    int clients, keys, ops_per_client;
    lin_op *ops;              /* clients * ops_per_client slots */
    atomic_int recorded;      /* ops answered or pending, over all clients */
    int count[64];            /* ops recorded per client */
} round_ctx;

typedef struct client_arg {
    round_ctx *r;
    int id;
    unsigned seed;
} client_arg;

static long long json_ll(const json_t *v)
{
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return 0;
}

/* Chooses op's kind and arguments; writes the request body into body. */
static void choose_op(client_arg *c, lin_op *op, const long long *last_version, int seq, char *body, size_t len)
{
    round_ctx *r = c->r;
    op->key = rand_r(&c->seed) % r->keys;
    op->client = c->id;
    op->expect = LIN_NO_EXPECT;
    char key[16];
    snprintf(key, sizeof key, "k%d", op->key);
    int dice = rand_r(&c->seed) % 100;
    /* expect: mostly the last version this client saw of the key (a CAS
     * that may win), sometimes a version that never was (it must lose). */
    long long expect = last_version[op->key] > 0 && rand_r(&c->seed) % 5 ? last_version[op->key] : 1;
    int n = snprintf(body, len, "{\"operations\":[{\"ns\":\"%s\",\"key\":\"%s\",", r->ns, key);
    if (dice < 28) {
        op->kind = LIN_GET;
        snprintf(body + n, len - n, "\"op\":\"get\"}]}");
    } else if (dice < 58) {
        op->kind = LIN_PUT;
        /* unique values (client, sequence) so a read names the write it saw */
        op->value = (long long)(c->id + 1) * 1000000 + seq;
        if (dice >= 43)
            op->expect = expect;
        if (op->expect == LIN_NO_EXPECT)
            snprintf(body + n, len - n, "\"op\":\"put\",\"value\":%lld,\"forever\":true}]}", op->value);
        else
            snprintf(body + n, len - n, "\"op\":\"put\",\"value\":%lld,\"forever\":true,\"expect\":%lld}]}",
                     op->value, op->expect);
    } else if (dice < 66) {
        op->kind = LIN_PUT_IF_ABSENT;
        op->value = (long long)(c->id + 1) * 1000000 + seq;
        snprintf(body + n, len - n, "\"op\":\"putIfAbsent\",\"value\":%lld,\"forever\":true}]}", op->value);
    } else if (dice < 88) {
        op->kind = LIN_INCR;
        op->delta = rand_r(&c->seed) % 9 - 3;
        /* limits that bite: below 0 on a fresh key, above the values the
         * second client onwards puts */
        op->has_min = rand_r(&c->seed) % 2;
        op->min = 0;
        op->has_max = rand_r(&c->seed) % 3 == 0;
        op->max = 1500000;
        n += snprintf(body + n, len - n, "\"op\":\"incr\",\"delta\":%lld,\"forever\":true", op->delta);
        if (op->has_min)
            n += snprintf(body + n, len - n, ",\"min\":%lld", op->min);
        if (op->has_max)
            n += snprintf(body + n, len - n, ",\"max\":%lld", op->max);
        snprintf(body + n, len - n, "}]}");
    } else {
        op->kind = LIN_DELETE;
        if (dice >= 94)
            op->expect = rand_r(&c->seed) % 4 ? expect : 0;
        if (op->expect == LIN_NO_EXPECT)
            snprintf(body + n, len - n, "\"op\":\"delete\"}]}");
        else
            snprintf(body + n, len - n, "\"op\":\"delete\",\"expect\":%lld}]}", op->expect);
    }
}

/* Reads results[0] of a 200 answer into op; false when it is not the shape
 * the route documents (the client then fails the round). */
static bool read_answer(lin_op *op, const char *reply)
{
    json_t *v = json_loads(reply, JSON_DECODE_ANY, NULL);
    json_t *el = json_array_get(json_object_get(v, "results"), 0);
    bool good = json_is_object(el);
    if (good) {
        json_t *flag = json_object_get(el, op->kind == LIN_GET ? "found" : "applied");
        good = json_is_boolean(flag);
        op->ok = json_is_true(flag);
        op->res_value = json_ll(json_object_get(el, "value"));
        op->res_version = json_ll(json_object_get(el, "version"));
    }
    json_decref(v);
    return good;
}

static void *client_run(void *arg)
{
    client_arg *c = arg;
    round_ctx *r = c->r;
    void *curl = NULL;
    long long last_version[64] = {0};
    char body[512];
    lin_op *mine = r->ops + (size_t)c->id * r->ops_per_client;
    int done = 0, seq = 0;
    while (done < r->ops_per_client) {
        lin_op op = {0};
        choose_op(c, &op, last_version, ++seq, body, sizeof body);
        long status;
        char *reply;
        op.invoke_ns = campaign_now_ns();
        campaign_outcome out = campaign_post(&curl, RIG.broker.base, "/api/v1/kv", body, &status, &reply);
        op.complete_ns = campaign_now_ns();
        if (out == CALL_NOT_SENT) {
            /* never reached a broker: no effect, not part of the history */
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
            continue;
        }
        if (out == CALL_ANSWERED && status == 200) {
            if (!read_answer(&op, reply)) {
                fprintf(stderr, "client %d: unexpected answer %s to %s\n", c->id, reply, body);
                op.complete_ns = LIN_PENDING;
            } else if (op.res_version > 0) {
                last_version[op.key] = op.res_version;
            }
        } else {
            op.complete_ns = LIN_PENDING;
        }
        free(reply);
        mine[done++] = op;
        r->count[c->id] = done;
        atomic_fetch_add(&r->recorded, 1);
        if (op.complete_ns == LIN_PENDING)
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
    }
    campaign_http_done(&curl);
    return NULL;
}

typedef struct totals {
    long long rounds, histories, ops, pending, steps, kills, crashes;
    long long grouped; /* calls answered by a shared statement, in the rounds without a fault */
} totals;

static void run_round(int round_no, enum fault fault, totals *t)
{
    round_ctx r = {.clients = (int)campaign_env_long("LIN_CLIENTS", 4),
                   .keys = (int)campaign_env_long("LIN_KEYS", 3),
                   .ops_per_client = (int)campaign_env_long("LIN_OPS", 100)};
    if (r.clients < 1 || r.clients > 64 || r.keys < 1 || r.keys > 64 || r.ops_per_client < 1)
        fail_msg("LIN_CLIENTS 1..64, LIN_KEYS 1..64, LIN_OPS >= 1");
    char *ns = pgtest_unique("lin");
    r.ns = ns;
    size_t total = (size_t)r.clients * r.ops_per_client;
    r.ops = calloc(total, sizeof *r.ops);
    pthread_t th[64];
    client_arg args[64];
    for (int i = 0; i < r.clients; i++) {
        args[i] = (client_arg){.r = &r, .id = i, .seed = (unsigned)(round_no * 7919 + i * 104729 + 1)};
        pthread_create(&th[i], NULL, client_run, &args[i]);
    }
    if (fault != FAULT_NONE) {
        /* the fault lands while every client is busy: a third of the way in */
        WAIT_UNTIL(atomic_load(&r.recorded) >= (int)total / 3, 60000, "round %d: clients made no progress",
                   round_no);
        if (fault == FAULT_BROKER_KILL) {
            assert_true(campaign_broker_restart_hard(&RIG.broker, RIG.db_url, RIG.env));
            t->kills++;
        } else {
            assert_true(campaign_pg_crash());
            t->crashes++;
            assert_true(campaign_pg_up());
        }
    }
    for (int i = 0; i < r.clients; i++)
        pthread_join(th[i], NULL);
    if (fault == FAULT_NONE)
        t->grouped += http_metric(&RIG.broker, "http", "database", "coalescedCallsTotal");

    lin_report rep;
    lin_verdict v = lin_check(r.ops, total, 0, &rep);
    print_message("# round %d (%s): %zu ops on %zu keys, %zu without answer, %lld search steps: %s\n", round_no,
                  fault_names[fault], rep.ops, rep.keys, rep.pending, rep.steps,
                  v == LIN_OK ? "linearizable" : rep.why);
    if (v != LIN_OK) {
        /* the key's whole history, for whoever reads the log */
        char d[256];
        for (size_t i = 0; i < total; i++)
            if (r.ops[i].key == rep.bad_key) {
                lin_describe(&r.ops[i], d, sizeof d);
                print_message("#   %s\n", d);
            }
    }
    t->rounds++;
    t->histories += (long long)rep.keys;
    t->ops += (long long)rep.ops;
    t->pending += (long long)rep.pending;
    t->steps += rep.steps;
    free(r.ops);
    free(ns);
    assert_int_equal(v, LIN_OK);
}

static void kv_histories_are_linearizable_across_restarts(void **state)
{
    (void)state;
    long seconds = campaign_env_long("LIN_SECONDS", 0);
    long long until = now_ms() + seconds * 1000;
    totals t = {0};
    int round_no = 0;
    do {
        for (int f = 0; f < FAULT_KINDS; f++)
            run_round(round_no++, (enum fault)f, &t);
    } while (now_ms() < until);
    campaign_figure("lin.rounds", t.rounds);
    campaign_figure("lin.histories", t.histories);
    campaign_figure("lin.ops", t.ops);
    campaign_figure("lin.ops_without_answer", t.pending);
    campaign_figure("lin.search_steps", t.steps);
    campaign_figure("lin.broker_kills", t.kills);
    campaign_figure("lin.pg_crashes", t.crashes);
    campaign_figure("lin.grouped_calls", t.grouped);
    /* Without shared statements the histories would not have judged them. */
    assert_true(t.grouped > 0);
}

/* Two database connections on one event loop for LIN_CLIENTS (4) clients:
 * calls queue behind busy connections, so one-op writes commit in groups
 * (sql/kv_group.sql) and gets share statements, and the histories
 * judge those answers too. */
static const char *const lin_env[] = {"QUEEN_LOG_LEVEL=error", "QUEEN_PG_POOL=2", "QUEEN_HTTP_THREADS=1", NULL};

int main(void)
{
    RIG.env = lin_env;
    return campaign_main("lin", "kv_histories_are_linearizable_across_restarts",
                         kv_histories_are_linearizable_across_restarts);
}
