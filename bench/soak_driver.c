/* soak_driver: the load and the sampler of `make soak` (bench/soak.sh).
 *
 * Drives a broker over keep-alive HTTP with the mixed workload of a real
 * deployment, closed loop, and every `sample` seconds writes one CSV row of
 * what the workload saw (per op: calls/s, p99, errors) next to what
 * PostgreSQL and the broker carry (sizes, dead tuples, HOT ratio,
 * autovacuum counts, WAL per write, sweeper lag and rows per pass, CPU, RSS).
 *
 *   kv workers (kv_threads), each call one op drawn by weight:
 *     put_short 12%  put, ns soak_short, 200k keys, ttlSeconds short_ttl
 *     put_long  12%  put, ns soak_long, the long_keys (100k) prefilled keys, 1 day TTL
 *     incr      30%  incr delta 1, ns soak_ctr, 10k counters, forever
 *     get       36%  get, ns soak_long
 *     prefix    10%  getPrefix of a 4-character prefix of soak_long, limit 50
 *   (mix=OP: every kv call is that op, to look at one op alone)
 *   pusher (1): POST /api/v1/push of 10 messages to soak_in (8 partitions),
 *     paced so that pushed - consumed stays under 2000 (a bounded backlog)
 *   consumers (msg_consumers): GET /api/v1/pop/queue/soak_in?batch=10, then
 *     one POST /api/v1/transaction per batch: an ack per message, a push of
 *     each to soak_out (never consumed: the log tables' growth) and a kv
 *     putIfAbsent marker per message (ns soak_marker, 60 s TTL)
 *   expiry burst: before the load starts, burst_keys rows are inserted in
 *     ns soak_burst (SQL, 100k per statement), all expiring at the same
 *     instant, burst_at seconds after the prefill began.
 *
 * Usage: soak_driver key=value ...   (see main for the keys)
 * Prints "SOAKRESULT ..." and one "SOAKOP ..." line per op at the end.
 * Exit 0, or 3 when any call errored (the CSV is complete either way).
 * Build: make $(BUILD)/tools/soak_driver (libcurl, jansson, libpq, pthreads). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

enum { OP_PUT_SHORT, OP_PUT_LONG, OP_INCR, OP_GET, OP_PREFIX, OP_PUSH, OP_POP, OP_TX, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"put_short", "put_long", "incr", "get", "prefix", "push", "pop", "tx"};
/* Calls that write (WAL per write divides by their sum); a pop with messages
 * writes its cursor, an empty pop (204) writes nothing and is not counted. */
static const int op_writes[OP_COUNT] = {1, 1, 1, 0, 0, 1, 1, 1};

#define SHORT_KEYS 200000
#define COUNTERS 10000
#define BACKLOG_MAX 2000
#define TENANT "00000000-0000-0000-0000-000000000001"

/* Latency histogram in log buckets: exact below 16 us, then 16 buckets per
 * power of two (a bucket spans at most 1/16 of its value). Percentiles are
 * reported as the bucket's upper edge: never below the true value. */
#define HBUCKETS (16 + 28 * 16)
typedef struct {
    uint64_t n[HBUCKETS];
    uint64_t count, errors, empty;
} hist;

static int hbucket(uint64_t us)
{
    if (us < 16)
        return (int)us;
    int e = 63 - __builtin_clzll(us);
    if (e > 31)
        return HBUCKETS - 1;
    return 16 + (e - 4) * 16 + (int)((us >> (e - 4)) & 15);
}

static uint64_t hupper(int b)
{
    if (b < 16)
        return (uint64_t)b;
    int e = (b - 16) / 16 + 4, sub = (b - 16) % 16;
    return ((uint64_t)(16 + sub + 1) << (e - 4)) - 1;
}

static uint64_t hpct(const hist *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t want = (uint64_t)(p / 100.0 * (double)h->count + 0.999999), seen = 0;
    if (want < 1)
        want = 1;
    for (int b = 0; b < HBUCKETS; b++) {
        seen += h->n[b];
        if (seen >= want)
            return hupper(b);
    }
    return hupper(HBUCKETS - 1);
}

typedef struct {
    pthread_mutex_t mu;
    hist window, total;
    char first_error[512];
} opstat;

static opstat g_ops[OP_COUNT];
static const char *g_url;
static double g_deadline;
static int g_short_ttl = 20;
static long g_long_keys = 100000;
static int g_only_op = -1; /* mix=OP: every kv call is OP (-1: the weighted mix) */
static atomic_long g_pushed, g_consumed;
static atomic_int g_stop;

static void record(int op, double seconds, int ok, const char *what)
{
    opstat *s = &g_ops[op];
    uint64_t us = (uint64_t)(seconds * 1e6);
    int b = hbucket(us);
    pthread_mutex_lock(&s->mu);
    s->window.n[b]++;
    s->window.count++;
    s->total.n[b]++;
    s->total.count++;
    if (!ok) {
        s->window.errors++;
        s->total.errors++;
        if (s->first_error[0] == '\0' && what != NULL)
            snprintf(s->first_error, sizeof s->first_error, "%s", what);
    }
    pthread_mutex_unlock(&s->mu);
}

static void record_empty(int op)
{
    pthread_mutex_lock(&g_ops[op].mu);
    g_ops[op].window.empty++;
    g_ops[op].total.empty++;
    pthread_mutex_unlock(&g_ops[op].mu);
}

typedef struct {
    CURL *h;
    struct curl_slist *hdr;
    buf out;
    uint64_t rng;
} client;

static void client_init(client *c, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    c->h = curl_easy_init();
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->out);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 30L);
    c->rng = seed * 0x9E3779B97F4A7C15ULL + 1;
}

static void client_free(client *c)
{
    curl_easy_cleanup(c->h);
    curl_slist_free_all(c->hdr);
    free(c->out.p);
}

static uint64_t rnd(client *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

/* One request; body NULL: GET. Returns the status, 0 on a transport error. */
static long http(client *c, const char *path, const char *body)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", g_url, path);
    c->out.len = 0;
    if (c->out.p)
        c->out.p[0] = '\0';
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    if (body != NULL) {
        curl_easy_setopt(c->h, CURLOPT_POST, 1L);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
    }
    if (curl_easy_perform(c->h) != CURLE_OK)
        return 0;
    long code = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

static const char *describe(client *c, const char *what, long code, char *msg, size_t len)
{
    snprintf(msg, len, "%s: HTTP %ld %.400s", what, code, c->out.p ? c->out.p : "");
    return msg;
}

static void *kv_worker(void *arg)
{
    client c;
    client_init(&c, (uint64_t)(intptr_t)arg + 1);
    char body[1024], msg[512];
    while (now_s() < g_deadline && !atomic_load(&g_stop)) {
        unsigned r = (unsigned)(rnd(&c) % 100);
        int op;
        unsigned long k = (unsigned long)(rnd(&c) >> 8);
        if (g_only_op >= 0) /* the same thresholds below, at the chosen op's band */
            r = (unsigned[]){0, 12, 24, 54, 90}[g_only_op];
        if (r < 12) {
            op = OP_PUT_SHORT;
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"put\",\"ns\":\"soak_short\",\"key\":\"s%lu\","
                     "\"value\":{\"n\":%lu,\"s\":\"session\"},\"ttlSeconds\":%d}]}",
                     k % SHORT_KEYS, k, g_short_ttl);
        } else if (r < 24) {
            op = OP_PUT_LONG;
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"put\",\"ns\":\"soak_long\",\"key\":\"l%lu\","
                     "\"value\":{\"n\":%lu,\"pad\":\"0123456789abcdef0123456789abcdef\"},\"ttlSeconds\":86400}]}",
                     k % (unsigned long)g_long_keys, k);
        } else if (r < 54) {
            op = OP_INCR;
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"incr\",\"ns\":\"soak_ctr\",\"key\":\"c%lu\",\"delta\":1,\"forever\":true}]}",
                     k % COUNTERS);
        } else if (r < 90) {
            op = OP_GET;
            snprintf(body, sizeof body, "{\"operations\":[{\"op\":\"get\",\"ns\":\"soak_long\",\"key\":\"l%lu\"}]}",
                     k % (unsigned long)g_long_keys);
        } else {
            op = OP_PREFIX;
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"getPrefix\",\"ns\":\"soak_long\",\"prefix\":\"l%03lu\",\"limit\":50}]}",
                     k % 1000);
        }
        double t0 = now_s();
        long code = http(&c, "/api/v1/kv", body);
        double dt = now_s() - t0;
        /* 200 with "results" is the answer; 200 {"ok":false,...} would be a
         * required op that lost, which this workload never sends. */
        int ok = code == 200 && c.out.p != NULL && strstr(c.out.p, "\"results\"") != NULL;
        record(op, dt, ok, ok ? NULL : describe(&c, op_name[op], code, msg, sizeof msg));
        if (!ok)
            usleep(10000);
    }
    client_free(&c);
    return NULL;
}

static void *pusher(void *arg)
{
    client c;
    client_init(&c, (uint64_t)(intptr_t)arg + 1000);
    char msg[512];
    long seq = 0, run = (long)time(NULL);
    while (now_s() < g_deadline && !atomic_load(&g_stop)) {
        if (atomic_load(&g_pushed) - atomic_load(&g_consumed) >= BACKLOG_MAX) {
            usleep(2000);
            continue;
        }
        json_t *items = json_array();
        for (int i = 0; i < 10; i++, seq++) {
            char part[16], tx[64];
            snprintf(part, sizeof part, "p%ld", seq % 8);
            snprintf(tx, sizeof tx, "soak-%ld-%ld", run, seq);
            json_array_append_new(items, json_pack("{s:s, s:s, s:{s:I, s:s}, s:s}", "queue", "soak_in", "partition",
                                                   part, "payload", "n", (json_int_t)seq, "pad",
                                                   "0123456789abcdef0123456789abcdef", "transactionId", tx));
        }
        json_t *req = json_pack("{s:o}", "items", items);
        char *body = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        double t0 = now_s();
        long code = http(&c, "/api/v1/push", body);
        double dt = now_s() - t0;
        free(body);
        int ok = code == 201 || code == 200;
        record(OP_PUSH, dt, ok, ok ? NULL : describe(&c, "push", code, msg, sizeof msg));
        if (ok)
            atomic_fetch_add(&g_pushed, 10);
        else
            usleep(10000);
    }
    client_free(&c);
    return NULL;
}

static void *consumer(void *arg)
{
    client c;
    client_init(&c, (uint64_t)(intptr_t)arg + 2000);
    char msg[512];
    while (now_s() < g_deadline && !atomic_load(&g_stop)) {
        double t0 = now_s();
        long code = http(&c, "/api/v1/pop/queue/soak_in?batch=10&leaseSeconds=60", NULL);
        double dt = now_s() - t0;
        if (code == 204) {
            record_empty(OP_POP);
            usleep(5000);
            continue;
        }
        json_t *pop = code == 200 ? json_loads(c.out.p, 0, NULL) : NULL;
        json_t *msgs = pop ? json_object_get(pop, "messages") : NULL;
        if (!json_is_array(msgs)) {
            record(OP_POP, dt, 0, describe(&c, "pop", code, msg, sizeof msg));
            json_decref(pop);
            usleep(10000);
            continue;
        }
        record(OP_POP, dt, 1, NULL);
        /* The whole batch in one transaction, even past the deadline: a
         * batch left half done would hold its lease for 60 s. */
        json_t *ops = json_array(), *kv = json_array();
        size_t n = json_array_size(msgs), i;
        for (i = 0; i < n; i++) {
            if (!wire_step_add(ops, kv, json_array_get(msgs, i), "soak_out", "soak_marker", 60))
                break;
        }
        json_t *tx = json_pack("{s:o, s:o}", "operations", ops, "kv", kv);
        char *body = json_dumps(tx, JSON_COMPACT);
        json_decref(tx);
        if (i < n) {
            record(OP_TX, 0, 0, "pop message without id/transactionId/partitionId/leaseId/partition");
        } else {
            double t1 = now_s();
            long c2 = http(&c, "/api/v1/transaction", body);
            double dt2 = now_s() - t1;
            json_t *res = c2 == 200 ? json_loads(c.out.p, 0, NULL) : NULL;
            int ok = res != NULL && json_is_true(json_object_get(res, "success"));
            record(OP_TX, dt2, ok, ok ? NULL : describe(&c, "transaction", c2, msg, sizeof msg));
            if (ok)
                atomic_fetch_add(&g_consumed, (long)n);
            json_decref(res);
        }
        free(body);
        json_decref(pop);
    }
    client_free(&c);
    return NULL;
}

/* ---------------------------------------------------------------- sampler */

typedef struct {
    double kv_heap, kv_idx, kv_exp_idx, kv_live, kv_dead, kv_upd, kv_hot, kv_av, kv_aa;
    double lm_heap, lm_idx, lm_live, lm_dead, lm_av;
    double lc_bytes, lc_dead, lc_upd, lc_hot, lc_av;
    double wal_lsn, wal_records, wal_fpi, wal_bytes;
    double lock_waiters, av_running;
    char sweeper_pids[256];
    int ok;
} pgsample;

static const char *const SAMPLE_SQL =
    "WITH t AS (SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,"
    " autoanalyze_count, relid FROM pg_stat_user_tables WHERE schemaname = 'queen'"
    " AND relname IN ('kv','log_messages','log_consumers'))"
    " SELECT"
    " pg_relation_size('queen.kv'), pg_indexes_size('queen.kv'), pg_relation_size('queen.idx_kv_shard_expires'),"
    " (SELECT n_live_tup FROM t WHERE relname='kv'), (SELECT n_dead_tup FROM t WHERE relname='kv'),"
    " (SELECT n_tup_upd FROM t WHERE relname='kv'), (SELECT n_tup_hot_upd FROM t WHERE relname='kv'),"
    " (SELECT autovacuum_count FROM t WHERE relname='kv'), (SELECT autoanalyze_count FROM t WHERE relname='kv'),"
    " pg_relation_size('queen.log_messages'), pg_indexes_size('queen.log_messages'),"
    " (SELECT n_live_tup FROM t WHERE relname='log_messages'), (SELECT n_dead_tup FROM t WHERE relname='log_messages'),"
    " (SELECT autovacuum_count FROM t WHERE relname='log_messages'),"
    " pg_total_relation_size('queen.log_consumers'),"
    " (SELECT n_dead_tup FROM t WHERE relname='log_consumers'), (SELECT n_tup_upd FROM t WHERE relname='log_consumers'),"
    " (SELECT n_tup_hot_upd FROM t WHERE relname='log_consumers'),"
    " (SELECT autovacuum_count FROM t WHERE relname='log_consumers'),"
    " pg_current_wal_lsn() - '0/0'::pg_lsn, w.wal_records, w.wal_fpi, w.wal_bytes,"
    " (SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'),"
    " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'),"
    " (SELECT coalesce(string_agg(pid::text, ' '), '') FROM pg_stat_activity"
    "   WHERE query LIKE '%kv_expire_step_v1%' AND pid <> pg_backend_pid())"
    " FROM pg_stat_wal w";

static void pg_sample(PGconn *pg, pgsample *s)
{
    memset(s, 0, sizeof *s);
    PGresult *r = PQexec(pg, SAMPLE_SQL);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        fprintf(stderr, "soak_driver: sample query: %s", PQerrorMessage(pg));
        PQclear(r);
        return;
    }
    double *f[] = {&s->kv_heap, &s->kv_idx, &s->kv_exp_idx, &s->kv_live, &s->kv_dead, &s->kv_upd, &s->kv_hot,
                   &s->kv_av, &s->kv_aa, &s->lm_heap, &s->lm_idx, &s->lm_live, &s->lm_dead, &s->lm_av,
                   &s->lc_bytes, &s->lc_dead, &s->lc_upd, &s->lc_hot, &s->lc_av, &s->wal_lsn, &s->wal_records,
                   &s->wal_fpi, &s->wal_bytes, &s->lock_waiters, &s->av_running};
    int nf = (int)(sizeof f / sizeof f[0]);
    for (int i = 0; i < nf; i++)
        *f[i] = PQgetisnull(r, 0, i) ? 0 : strtod(PQgetvalue(r, 0, i), NULL);
    snprintf(s->sweeper_pids, sizeof s->sweeper_pids, "%s", PQgetvalue(r, 0, nf));
    s->ok = 1;
    PQclear(r);
}

/* utime + stime of one process, in clock ticks (0 when it is gone). */
static double proc_ticks(long pid)
{
    char path[64], line[2048];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* the command may hold spaces */
    if (p == NULL)
        return 0;
    unsigned long ut = 0, st = 0;
    /* after ")": state(3) ... utime is field 14, stime 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st);
}

/* PostgreSQL's CPU: the postmaster, its reaped children, every live child. */
static double pg_ticks(long pm)
{
    double t = 0;
    char path[96], line[2048];
    snprintf(path, sizeof path, "/proc/%ld/stat", pm);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        size_t n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[n] = '\0';
        char *p = strrchr(line, ')');
        unsigned long ut, st;
        long cut, cst;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", &ut, &st, &cut,
                        &cst) == 4)
            t += (double)(ut + st) + (double)(cut + cst);
    }
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pm, pm);
    f = fopen(path, "r");
    if (f != NULL) {
        long kid;
        while (fscanf(f, "%ld", &kid) == 1)
            t += proc_ticks(kid);
        fclose(f);
    }
    return t;
}

static long status_kb(long pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = atol(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

static double load1(void)
{
    double l = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = 0;
        fclose(f);
    }
    return l;
}

typedef struct {
    double lag_ms, deleted, cycles, last_cycle_ms;
    int ok;
} sweepstat;

/* The "sweeper" object of GET /metrics, wherever it sits. */
static json_t *find_member(json_t *o, const char *name, int depth)
{
    if (!json_is_object(o) || depth > 3)
        return NULL;
    json_t *v = json_object_get(o, name);
    if (v != NULL)
        return v;
    const char *k;
    json_t *c;
    json_object_foreach(o, k, c)
    {
        json_t *f = find_member(c, name, depth + 1);
        if (f != NULL)
            return f;
    }
    return NULL;
}

static void sweep_sample(client *c, sweepstat *s)
{
    memset(s, 0, sizeof *s);
    if (http(c, "/metrics", NULL) != 200)
        return;
    json_t *m = json_loads(c->out.p, 0, NULL);
    json_t *sw = find_member(m, "sweeper", 0);
    if (json_is_object(sw)) {
        s->lag_ms = (double)json_integer_value(json_object_get(sw, "lagMs"));
        s->deleted = (double)json_integer_value(json_object_get(sw, "deletedTotal"));
        s->cycles = (double)json_integer_value(json_object_get(sw, "cycles"));
        s->last_cycle_ms = (double)json_integer_value(json_object_get(sw, "lastCycleMs"));
        s->ok = 1;
    }
    json_decref(m);
}

static double pids_ticks(const char *pids)
{
    double t = 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", pids);
    for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        t += proc_ticks(atol(tok));
    return t;
}

static int exec_ok(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "soak_driver: %s\n  %s", sql, PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

/* The prefill, in SQL: the rows a deployment would already hold. Direct
 * inserts with versions from queen.kv_version_seq, as kv_apply_v1 draws them. */
static int prefill(PGconn *pg, long burst_keys, double burst_epoch)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)"
             " SELECT '" TENANT "', 'soak_long', 'l' || g,"
             " jsonb_build_object('n', g, 'pad', '0123456789abcdef0123456789abcdef'),"
             " nextval('queen.kv_version_seq'), now() + interval '1 day'"
             " FROM generate_series(0, %ld) g ON CONFLICT DO NOTHING",
             g_long_keys - 1);
    if (!exec_ok(pg, sql))
        return -1;
    snprintf(sql, sizeof sql,
             "INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)"
             " SELECT '" TENANT "', 'soak_ctr', 'c' || g, '0'::jsonb, nextval('queen.kv_version_seq'), NULL"
             " FROM generate_series(0, %d) g ON CONFLICT DO NOTHING",
             COUNTERS - 1);
    if (!exec_ok(pg, sql))
        return -1;
    for (long from = 0; from < burst_keys; from += 100000) {
        long to = from + 100000 < burst_keys ? from + 100000 : burst_keys;
        snprintf(sql, sizeof sql,
                 "INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)"
                 " SELECT '" TENANT "', 'soak_burst', 'b' || g, '{\"burst\":true}'::jsonb,"
                 " nextval('queen.kv_version_seq'), to_timestamp(%.3f)"
                 " FROM generate_series(%ld, %ld) g ON CONFLICT DO NOTHING",
                 burst_epoch, from, to - 1);
        if (!exec_ok(pg, sql))
            return -1;
    }
    return exec_ok(pg, "ANALYZE queen.kv") ? 0 : -1;
}

static long burst_left(PGconn *pg)
{
    PGresult *r = PQexec(pg, "SELECT count(*) FROM queen.kv WHERE tenant_id = '" TENANT "' AND namespace = 'soak_burst'");
    long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
}

static const char *arg(int argc, char **argv, const char *key, const char *dflt)
{
    size_t kl = strlen(key);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], key, kl) == 0 && argv[i][kl] == '=')
            return argv[i] + kl + 1;
    return dflt;
}

int main(int argc, char **argv)
{
    g_url = arg(argc, argv, "url", NULL);
    const char *pgurl = arg(argc, argv, "pg", NULL), *out = arg(argc, argv, "out", NULL);
    long broker_pid = atol(arg(argc, argv, "broker_pid", "0")), pm_pid = atol(arg(argc, argv, "pm_pid", "0"));
    double seconds = atof(arg(argc, argv, "seconds", "60")), sample = atof(arg(argc, argv, "sample", "5"));
    int kv_threads = atoi(arg(argc, argv, "kv_threads", "4")), consumers = atoi(arg(argc, argv, "msg_consumers", "2"));
    long burst_keys = atol(arg(argc, argv, "burst_keys", "0"));
    double burst_at = atof(arg(argc, argv, "burst_at", "0"));
    g_short_ttl = atoi(arg(argc, argv, "short_ttl", "20"));
    g_long_keys = atol(arg(argc, argv, "long_keys", "100000"));
    const char *mix = arg(argc, argv, "mix", "all");
    for (int i = 0; i <= OP_PREFIX; i++)
        if (strcmp(mix, op_name[i]) == 0)
            g_only_op = i;
    if (strcmp(mix, "all") != 0 && g_only_op < 0) {
        fprintf(stderr, "soak_driver: mix is all or one of put_short, put_long, incr, get, prefix\n");
        return 2;
    }
    if (g_url == NULL || pgurl == NULL || out == NULL || seconds <= 0 || sample <= 0 || kv_threads < 0 ||
        consumers < 0 || g_short_ttl < 1 || burst_keys < 0 || g_long_keys < 1) {
        fprintf(stderr, "usage: soak_driver url=BROKER pg=PGURL out=CSV [broker_pid= pm_pid= seconds=60 sample=5 "
                        "kv_threads=4 msg_consumers=2 burst_keys=0 burst_at=S short_ttl=20 long_keys=100000 mix=all]\n");
        return 2;
    }
    for (int i = 0; i < OP_COUNT; i++)
        pthread_mutex_init(&g_ops[i].mu, NULL);
    curl_global_init(CURL_GLOBAL_ALL);
    PGconn *pg = PQconnectdb(pgurl);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "soak_driver: %s", PQerrorMessage(pg));
        return 1;
    }
    PQsetNoticeProcessor(pg, NULL, NULL);
    exec_ok(pg, "SET application_name = 'soak_sampler'");

    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    double prefill_epoch = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
    double burst_epoch = prefill_epoch + burst_at;
    double p0 = now_s();
    if (prefill(pg, burst_keys, burst_epoch) != 0)
        return 1;
    double prefill_s = now_s() - p0;
    fprintf(stderr, "soak_driver: prefill %ld long keys, %d counters, %ld burst keys in %.1f s\n", g_long_keys, COUNTERS,
            burst_keys, prefill_s);

    FILE *csv = fopen(out, "w");
    if (csv == NULL) {
        fprintf(stderr, "soak_driver: %s: %s\n", out, strerror(errno));
        return 1;
    }
    fprintf(csv, "t_s,load1");
    for (int i = 0; i < OP_COUNT; i++)
        fprintf(csv, ",%s_ops_s,%s_p99_ms,%s_err", op_name[i], op_name[i], op_name[i]);
    fprintf(csv, ",pop_empty_s,writes_s,kv_heap_mb,kv_idx_mb,kv_expires_idx_mb,kv_live,kv_dead,kv_upd_s,kv_hot_ratio,"
                 "kv_autovacuums,kv_autoanalyzes,logmsg_heap_mb,logmsg_idx_mb,logmsg_live,logmsg_dead,logmsg_autovacuums,"
                 "logcons_mb,logcons_dead,logcons_hot_ratio,logcons_autovacuums,wal_bytes_per_write,"
                 "wal_records_per_write,wal_fpi_s,wal_mb_s,lock_waiters,autovacuum_workers,sweeper_lag_ms,"
                 "sweeper_deleted_s,sweeper_passes,sweeper_rows_per_pass,sweeper_last_pass_ms,sweeper_cpu_pct,"
                 "pg_cpu_pct,broker_cpu_pct,broker_rss_mb,burst_left\n");
    fflush(csv);

    int nthreads = kv_threads + consumers + 1;
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    double t0 = now_s();
    g_deadline = t0 + seconds;
    int k = 0;
    for (int i = 0; i < kv_threads; i++, k++)
        pthread_create(&th[k], NULL, kv_worker, (void *)(intptr_t)i);
    pthread_create(&th[k++], NULL, pusher, (void *)(intptr_t)0);
    for (int i = 0; i < consumers; i++, k++)
        pthread_create(&th[k], NULL, consumer, (void *)(intptr_t)i);

    client mc;
    client_init(&mc, 99);
    double tick = (double)sysconf(_SC_CLK_TCK);
    pgsample prev, cur;
    sweepstat sprev, scur;
    pg_sample(pg, &prev);
    sweep_sample(&mc, &sprev);
    double last = now_s(), bt_prev = proc_ticks(broker_pid), pt_prev = pg_ticks(pm_pid),
           st_prev = pids_ticks(prev.sweeper_pids);
    long burst_remaining = burst_keys, rows = 0;
    double burst_t = burst_epoch - prefill_epoch - prefill_s, cleared_t = -1;
    while (now_s() < g_deadline) {
        double next = last + sample;
        while (now_s() < next && now_s() < g_deadline)
            usleep(50000);
        double t = now_s(), dt = t - last;
        if (dt < 0.5 * sample && t >= g_deadline)
            break; /* a sliver at the end says nothing */
        hist win[OP_COUNT];
        for (int i = 0; i < OP_COUNT; i++) {
            pthread_mutex_lock(&g_ops[i].mu);
            win[i] = g_ops[i].window;
            memset(&g_ops[i].window, 0, sizeof g_ops[i].window);
            pthread_mutex_unlock(&g_ops[i].mu);
        }
        pg_sample(pg, &cur);
        sweep_sample(&mc, &scur);
        double bt = proc_ticks(broker_pid), pt = pg_ticks(pm_pid);
        /* the sweeper backend's CPU: the same pids at both ends of the window */
        double st = pids_ticks(cur.sweeper_pids);
        double st_d = strcmp(cur.sweeper_pids, prev.sweeper_pids) == 0 ? st - st_prev : 0;
        double tnow = t - t0;
        if (burst_keys > 0 && burst_remaining != 0 && tnow >= burst_t) {
            burst_remaining = burst_left(pg);
            if (burst_remaining == 0 && cleared_t < 0)
                cleared_t = tnow;
        }
        double writes = 0;
        fprintf(csv, "%.1f,%.2f", tnow, load1());
        for (int i = 0; i < OP_COUNT; i++) {
            double ok = (double)(win[i].count - win[i].errors);
            if (op_writes[i])
                writes += ok;
            fprintf(csv, ",%.1f,%.2f,%llu", ok / dt, (double)hpct(&win[i], 99) / 1000.0,
                    (unsigned long long)win[i].errors);
        }
        double dupd = cur.kv_upd - prev.kv_upd, dlcu = cur.lc_upd - prev.lc_upd;
        double dswept = scur.deleted - sprev.deleted, dpass = scur.cycles - sprev.cycles;
        fprintf(csv, ",%.1f,%.1f", (double)win[OP_POP].empty / dt, writes / dt);
        fprintf(csv, ",%.2f,%.2f,%.2f,%.0f,%.0f,%.1f,", cur.kv_heap / 1048576, cur.kv_idx / 1048576,
                cur.kv_exp_idx / 1048576, cur.kv_live, cur.kv_dead, dupd / dt);
        if (dupd > 0)
            fprintf(csv, "%.3f", (cur.kv_hot - prev.kv_hot) / dupd);
        fprintf(csv, ",%.0f,%.0f", cur.kv_av, cur.kv_aa);
        fprintf(csv, ",%.2f,%.2f,%.0f,%.0f,%.0f", cur.lm_heap / 1048576, cur.lm_idx / 1048576, cur.lm_live,
                cur.lm_dead, cur.lm_av);
        fprintf(csv, ",%.2f,%.0f,", cur.lc_bytes / 1048576, cur.lc_dead);
        if (dlcu > 0)
            fprintf(csv, "%.3f", (cur.lc_hot - prev.lc_hot) / dlcu);
        fprintf(csv, ",%.0f", cur.lc_av);
        if (writes > 0)
            fprintf(csv, ",%.0f,%.2f", (cur.wal_lsn - prev.wal_lsn) / writes,
                    (cur.wal_records - prev.wal_records) / writes);
        else
            fprintf(csv, ",,");
        fprintf(csv, ",%.1f,%.3f,%.0f,%.0f", (cur.wal_fpi - prev.wal_fpi) / dt,
                (cur.wal_lsn - prev.wal_lsn) / dt / 1048576, cur.lock_waiters, cur.av_running);
        fprintf(csv, ",%.0f,%.1f,%.0f,", scur.lag_ms, dswept / dt, dpass);
        if (dpass > 0)
            fprintf(csv, "%.1f", dswept / dpass);
        fprintf(csv, ",%.0f,%.1f,%.1f,%.1f,%.1f,%ld\n", scur.last_cycle_ms, 100.0 * st_d / tick / dt,
                100.0 * (pt - pt_prev) / tick / dt, 100.0 * (bt - bt_prev) / tick / dt,
                (double)status_kb(broker_pid, "VmRSS") / 1024.0, burst_remaining);
        fflush(csv);
        rows++;
        prev = cur;
        sprev = scur;
        bt_prev = bt;
        pt_prev = pt;
        st_prev = st;
        last = t;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    double elapsed = now_s() - t0;
    fclose(csv);

    uint64_t errors = 0;
    for (int i = 0; i < OP_COUNT; i++) {
        hist *h = &g_ops[i].total;
        errors += h->errors;
        printf("SOAKOP op=%s calls=%llu errors=%llu per_s=%.1f p50_ms=%.2f p99_ms=%.2f p999_ms=%.2f empty=%llu\n",
               op_name[i], (unsigned long long)h->count, (unsigned long long)h->errors,
               (double)(h->count - h->errors) / elapsed, (double)hpct(h, 50) / 1000.0, (double)hpct(h, 99) / 1000.0,
               (double)hpct(h, 99.9) / 1000.0, (unsigned long long)h->empty);
        if (g_ops[i].first_error[0] != '\0')
            fprintf(stderr, "soak_driver: first %s error: %s\n", op_name[i], g_ops[i].first_error);
    }
    printf("SOAKRESULT seconds=%.1f rows=%ld errors=%llu prefill_s=%.1f burst_keys=%ld burst_t=%.1f "
           "burst_cleared_t=%.1f burst_left=%ld pushed=%ld consumed=%ld\n",
           elapsed, rows, (unsigned long long)errors, prefill_s, burst_keys, burst_t, cleared_t, burst_remaining,
           atomic_load(&g_pushed), atomic_load(&g_consumed));
    client_free(&mc);
    PQfinish(pg);
    free(th);
    curl_global_cleanup();
    return errors > 0 ? 3 : 0;
}
