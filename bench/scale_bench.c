/* scale_bench: the load driver of bench/run.sh's `scale` section: how the
 * message path's cost grows with partitions, groups, skew and queue size.
 *
 * Every mode talks to one broker over keep-alive HTTP (one libcurl handle
 * per thread), prints one result line "<MODE>RESULT key=value ..."
 * (latencies in microseconds) and stops by its deadline whatever the broker
 * does: a point that does not finish says so (timed_out=1) with what it got.
 *
 *   seed  URL QUEUE PARTITIONS MESSAGES [per_req=500] [threads=2] [timeout_s=0]
 *         POST /api/v1/push of per_req messages per call; message i goes to
 *         partition "p%06d" (i mod PARTITIONS), so MESSAGES >= PARTITIONS
 *         leaves every partition at least one. SEEDRESULT: msgs_per_s and
 *         per-request p50/p99 (the fill rate of a big queue is this); with a
 *         timeout, no call starts after it (timed_out=1).
 *   drain URL QUEUE CONSUMERS EXPECT TIMEOUT_S [batch=1] [groups=0] [prefix=g] [wait_ms=0] [partitions=1]
 *         CONSUMERS threads pop GET /api/v1/pop/queue/QUEUE?batch=B&
 *         autoAck=true&wait=false until EXPECT messages came (per group) or
 *         TIMEOUT_S passed (EXPECT 0: pop until the timeout, a rate).
 *         wait_ms > 0: long polls instead (wait=true&timeout=wait_ms), as a
 *         consumer that waits for pushes pops; partitions > 1: each pop
 *         may claim that many partitions.
 *         groups 0: queue mode. groups G: consumer groups PREFIX0..G-1, each
 *         reading every message; with G <= CONSUMERS each group gets its
 *         share of the threads, with G > CONSUMERS each thread serves every
 *         CONSUMERS-th group in turn (total consumers stay CONSUMERS).
 *         DRAINRESULT: delivered msgs_per_s, p50/p99 of the pops that
 *         delivered, empty pops, seconds to the last delivery.
 *   push  URL QUEUE PARTITIONS THREADS SECONDS
 *         one-message pushes, each to a partition drawn at random among
 *         PARTITIONS. PUSHRESULT: msgs_per_s, request p50/p99.
 *   skew  URL QUEUE PARTITIONS HOT_PCT RATE SECONDS CONSUMERS [pushers=4] [drain_s=60]
 *         RATE one-message pushes per second (open loop, paced) for
 *         SECONDS, HOT_PCT% of them to partition p000000 and the rest
 *         uniform over the other PARTITIONS-1, while CONSUMERS pop batch 1
 *         (queue mode, autoAck) until every acked message came or drain_s
 *         after the pushes stopped. A message's wait is from its push ack to
 *         the pop response that delivered it (0 when it came before the ack).
 *         SKEWRESULT: per class (hot, cold) p50/p99/max wait; messages still
 *         undelivered at the end count with the time they had waited (a
 *         lower bound, undelivered_*).
 *
 * Build: make $(BUILD)/tools/scale_bench (libcurl, jansson, pthreads).
 * Exit 0, 1 when the point failed outright (nothing delivered, or a seed
 * that could not push), 2 on bad arguments. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

#define PAD "0123456789abcdef0123456789abcdef"

typedef struct {
    uint32_t *v;
    size_t n, cap;
} lat;

static void lat_add_us(lat *l, uint64_t us)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (l->v == NULL) {
            perror("realloc");
            exit(1);
        }
    }
    l->v[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void lat_add(lat *l, double seconds) { lat_add_us(l, seconds > 0 ? (uint64_t)(seconds * 1e6) : 0); }

static void lat_merge(lat *into, const lat *from)
{
    for (size_t i = 0; i < from->n; i++)
        lat_add_us(into, from->v[i]);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void lat_sort(lat *l)
{
    if (l->n > 1)
        qsort(l->v, l->n, sizeof *l->v, cmp_u32);
}

/* p-th percentile of a sorted lat (nearest rank), 0 when empty. */
static uint32_t pct(const lat *l, double p)
{
    if (l->n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)l->n);
    if (i >= l->n)
        i = l->n - 1;
    return l->v[i];
}

static const char *g_url;

typedef struct {
    CURL *h;
    struct curl_slist *hdr;
    buf out;
} conn;

static void conn_open(conn *c)
{
    memset(c, 0, sizeof *c);
    c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    c->h = curl_easy_init();
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->out);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    /* A call slower than this is an error of the point, not a hang of it
     * (the broker's own statement timeout is 30 s). */
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 60L);
}

static void conn_close(conn *c)
{
    curl_easy_cleanup(c->h);
    curl_slist_free_all(c->hdr);
    free(c->out.p);
}

/* One request; body NULL: GET. The status, 0 on a transport error. */
static long http(conn *c, const char *path, const char *body)
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

/* The first error of a run, for stderr. */
static pthread_mutex_t g_err_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_first_error[512];

static void note_error(const char *what, long code, const conn *c)
{
    pthread_mutex_lock(&g_err_mu);
    if (g_first_error[0] == '\0')
        snprintf(g_first_error, sizeof g_first_error, "%s: HTTP %ld %.400s", what, code, c->out.p ? c->out.p : "");
    pthread_mutex_unlock(&g_err_mu);
}

static void print_first_error(const char *prog)
{
    if (g_first_error[0] != '\0')
        fprintf(stderr, "%s: first error: %s\n", prog, g_first_error);
}

/* How many items of a push response are queued (or duplicate): a 201 does
 * not say every item went in. */
static long push_ok_items(const conn *c)
{
    json_error_t jerr;
    json_t *a = c->out.p ? json_loads(c->out.p, 0, &jerr) : NULL;
    long ok = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++) {
        const char *st = json_string_value(json_object_get(json_array_get(a, i), "status"));
        if (st != NULL && (strcmp(st, "queued") == 0 || strcmp(st, "duplicate") == 0))
            ok++;
    }
    json_decref(a);
    return ok;
}

/* ------------------------------------------------------------------ seed */

static const char *s_queue;
static long s_parts, s_total, s_per;
static double s_deadline; /* 0: none */
static atomic_long s_next;

typedef struct {
    long pushed, errors;
    lat req;
} seeder;

static void *seed_main(void *arg)
{
    seeder *w = arg;
    conn c;
    conn_open(&c);
    size_t cap = (size_t)s_per * 160 + 64;
    char *body = malloc(cap);
    if (body == NULL) {
        perror("malloc");
        exit(1);
    }
    for (;;) {
        if (s_deadline > 0 && now_s() >= s_deadline)
            break;
        long from = atomic_fetch_add(&s_next, s_per);
        if (from >= s_total)
            break;
        long to = from + s_per < s_total ? from + s_per : s_total;
        size_t off = (size_t)snprintf(body, cap, "{\"items\":[");
        for (long i = from; i < to; i++)
            off += (size_t)snprintf(body + off, cap - off,
                                    "%s{\"queue\":\"%s\",\"partition\":\"p%06ld\",\"payload\":{\"n\":%ld,\"pad\":\"" PAD
                                    "\"}}",
                                    i > from ? "," : "", s_queue, i % s_parts, i);
        snprintf(body + off, cap - off, "]}");
        double t0 = now_s();
        long code = http(&c, "/api/v1/push", body);
        lat_add(&w->req, now_s() - t0);
        long ok = code == 201 ? push_ok_items(&c) : 0;
        w->pushed += ok;
        if (ok < to - from) {
            w->errors++;
            note_error("push", code, &c);
        }
    }
    free(body);
    conn_close(&c);
    return NULL;
}

static int mode_seed(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    s_queue = argv[3];
    s_parts = atol(argv[4]);
    s_total = atol(argv[5]);
    s_per = argc > 6 ? atol(argv[6]) : 500;
    int threads = argc > 7 ? atoi(argv[7]) : 2;
    double timeout = argc > 8 ? atof(argv[8]) : 0;
    if (s_parts < 1 || s_parts > 999999 || s_total < 0 || s_per < 1 || s_per > 10000 || threads < 1 || timeout < 0)
        return 2;
    seeder *ws = calloc((size_t)threads, sizeof *ws);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double t0 = now_s();
    s_deadline = timeout > 0 ? t0 + timeout : 0;
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, seed_main, &ws[i]);
    long pushed = 0, errors = 0;
    lat req = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        pushed += ws[i].pushed;
        errors += ws[i].errors;
        lat_merge(&req, &ws[i].req);
        free(ws[i].req.v);
    }
    double secs = now_s() - t0;
    lat_sort(&req);
    printf("SEEDRESULT messages=%ld partitions=%ld per_req=%ld threads=%d seconds=%.3f msgs_per_s=%.1f "
           "req_p50_us=%u req_p99_us=%u errors=%ld timed_out=%d\n",
           pushed, s_parts, s_per, threads, secs, secs > 0 ? pushed / secs : 0, pct(&req, 50), pct(&req, 99),
           errors, atomic_load(&s_next) < s_total);
    print_first_error("scale_bench seed");
    free(req.v);
    free(ws);
    free(th);
    return errors > 0 ? 1 : 0;
}

/* ----------------------------------------------------------------- drain */

typedef struct {
    char name[64]; /* "" in queue mode */
    atomic_long delivered;
} group;

static const char *d_queue, *d_prefix;
static int d_batch, d_groups, d_consumers, d_wait_ms, d_partitions;
static char d_query[96]; /* the pop's query after batch: autoAck, wait, partitions */
static long d_expect;
static double d_deadline, d_t0;
static group *d_g;
static int d_ngroups; /* entries of d_g: 1 in queue mode */
static atomic_long d_total;

typedef struct {
    int id;
    long pops, empty, errors, delivered;
    double last_delivery;
    lat pop;
} drainer;

static int group_done(group *g) { return d_expect > 0 && atomic_load(&g->delivered) >= d_expect; }

static void *drain_main(void *arg)
{
    drainer *w = arg;
    conn c;
    conn_open(&c);
    /* The groups this thread serves (see the header). */
    int mine[4096], nmine = 0;
    if (d_ngroups <= d_consumers) {
        mine[nmine++] = w->id % d_ngroups;
    } else {
        for (int g = w->id; g < d_ngroups && nmine < 4096; g += d_consumers)
            mine[nmine++] = g;
    }
    char path[512];
    for (int k = 0;; k++) {
        if (now_s() >= d_deadline)
            break;
        int pick = -1;
        for (int j = 0; j < nmine; j++) {
            int g = mine[(k + j) % nmine];
            if (!group_done(&d_g[g])) {
                pick = g;
                k += j;
                break;
            }
        }
        if (pick < 0)
            break;
        group *g = &d_g[pick];
        if (g->name[0] != '\0')
            snprintf(path, sizeof path, "/api/v1/pop/queue/%s?batch=%d%s&consumerGroup=%s", d_queue, d_batch, d_query,
                     g->name);
        else
            snprintf(path, sizeof path, "/api/v1/pop/queue/%s?batch=%d%s", d_queue, d_batch, d_query);
        double t0 = now_s();
        long code = http(&c, path, NULL);
        double t1 = now_s();
        w->pops++;
        if (code == 204) {
            w->empty++;
            /* Every partition momentarily claimed by another consumer (or,
             * before the expectation is met, nothing visible yet): back off
             * a little rather than spin on the broker. A thread with other
             * groups to serve moves on instead. */
            if (nmine == 1 && d_wait_ms == 0)
                usleep(1000);
            continue;
        }
        json_error_t jerr;
        json_t *pop = code == 200 ? json_loads(c.out.p, 0, &jerr) : NULL;
        json_t *msgs = pop ? json_object_get(pop, "messages") : NULL;
        if (!json_is_array(msgs)) {
            w->errors++;
            note_error("pop", code, &c);
            json_decref(pop);
            usleep(10000);
            continue;
        }
        long n = (long)json_array_size(msgs);
        json_decref(pop);
        lat_add(&w->pop, t1 - t0);
        atomic_fetch_add(&g->delivered, n);
        atomic_fetch_add(&d_total, n);
        w->delivered += n;
        w->last_delivery = t1;
    }
    conn_close(&c);
    return NULL;
}

static int mode_drain(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    d_queue = argv[3];
    d_consumers = atoi(argv[4]);
    d_expect = atol(argv[5]);
    double timeout = atof(argv[6]);
    d_batch = argc > 7 ? atoi(argv[7]) : 1;
    d_groups = argc > 8 ? atoi(argv[8]) : 0;
    d_prefix = argc > 9 ? argv[9] : "g";
    d_wait_ms = argc > 10 ? atoi(argv[10]) : 0;
    d_partitions = argc > 11 ? atoi(argv[11]) : 1;
    if (d_consumers < 1 || d_expect < 0 || timeout <= 0 || d_batch < 1 || d_groups < 0 ||
        d_groups > 4096 * d_consumers || strlen(d_prefix) > 40 || d_wait_ms < 0 || d_wait_ms > 60000 ||
        d_partitions < 1 || d_partitions > 10000)
        return 2;
    if (d_wait_ms > 0)
        snprintf(d_query, sizeof d_query, "&autoAck=true&wait=true&timeout=%d&partitions=%d", d_wait_ms,
                 d_partitions);
    else
        snprintf(d_query, sizeof d_query, "&autoAck=true&wait=false&partitions=%d", d_partitions);
    d_ngroups = d_groups > 0 ? d_groups : 1;
    d_g = calloc((size_t)d_ngroups, sizeof *d_g);
    for (int i = 0; d_groups > 0 && i < d_groups; i++)
        snprintf(d_g[i].name, sizeof d_g[i].name, "%s%d", d_prefix, i);
    drainer *ws = calloc((size_t)d_consumers, sizeof *ws);
    pthread_t *th = calloc((size_t)d_consumers, sizeof *th);
    d_t0 = now_s();
    d_deadline = d_t0 + timeout;
    for (int i = 0; i < d_consumers; i++) {
        ws[i].id = i;
        pthread_create(&th[i], NULL, drain_main, &ws[i]);
    }
    long pops = 0, empty = 0, errors = 0;
    double last = d_t0;
    lat pl = {0};
    for (int i = 0; i < d_consumers; i++) {
        pthread_join(th[i], NULL);
        pops += ws[i].pops;
        empty += ws[i].empty;
        errors += ws[i].errors;
        if (ws[i].last_delivery > last)
            last = ws[i].last_delivery;
        lat_merge(&pl, &ws[i].pop);
        free(ws[i].pop.v);
    }
    double end = now_s();
    long delivered = atomic_load(&d_total), expected = d_expect * d_ngroups;
    int drained = d_expect > 0 && delivered >= expected;
    /* Drained: the clock stops at the last delivery (the bootstrap's
     * "seconds to consume all"); otherwise at the stop (a rate). */
    double secs = drained ? last - d_t0 : end - d_t0;
    lat_sort(&pl);
    printf("DRAINRESULT mode=%s groups=%d consumers=%d batch=%d wait_ms=%d claim_partitions=%d expected=%ld delivered=%ld seconds=%.3f "
           "msgs_per_s=%.1f pop_p50_us=%u pop_p99_us=%u pops=%ld empty_pops=%ld errors=%ld drained=%d timed_out=%d\n",
           d_groups ? "groups" : "queue", d_groups, d_consumers, d_batch, d_wait_ms, d_partitions, expected, delivered, secs,
           secs > 0 ? delivered / secs : 0, pct(&pl, 50), pct(&pl, 99), pops, empty, errors, drained,
           d_expect > 0 && !drained);
    print_first_error("scale_bench drain");
    free(pl.v);
    free(ws);
    free(th);
    free(d_g);
    return delivered == 0 && d_expect > 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ push */

static const char *p_queue;
static long p_parts;
static double p_deadline;

typedef struct {
    unsigned seed;
    long ok, errors;
    lat req;
} pusher;

static void *push_main(void *arg)
{
    pusher *w = arg;
    conn c;
    conn_open(&c);
    char body[512];
    for (long i = 0; now_s() < p_deadline; i++) {
        long part = (long)(rand_r(&w->seed) % (unsigned)p_parts);
        snprintf(body, sizeof body,
                 "{\"items\":[{\"queue\":\"%s\",\"partition\":\"p%06ld\",\"payload\":{\"n\":%ld,\"pad\":\"" PAD "\"}}]}",
                 p_queue, part, i);
        double t0 = now_s();
        long code = http(&c, "/api/v1/push", body);
        lat_add(&w->req, now_s() - t0);
        if (code == 201 && push_ok_items(&c) == 1) {
            w->ok++;
        } else {
            w->errors++;
            note_error("push", code, &c);
        }
    }
    conn_close(&c);
    return NULL;
}

static int mode_push(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    p_queue = argv[3];
    p_parts = atol(argv[4]);
    int threads = atoi(argv[5]);
    double seconds = atof(argv[6]);
    if (p_parts < 1 || p_parts > 999999 || threads < 1 || seconds <= 0)
        return 2;
    pusher *ws = calloc((size_t)threads, sizeof *ws);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double t0 = now_s();
    p_deadline = t0 + seconds;
    for (int i = 0; i < threads; i++) {
        ws[i].seed = (unsigned)time(NULL) * 2654435761u + (unsigned)i;
        pthread_create(&th[i], NULL, push_main, &ws[i]);
    }
    long ok = 0, errors = 0;
    lat req = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        ok += ws[i].ok;
        errors += ws[i].errors;
        lat_merge(&req, &ws[i].req);
        free(ws[i].req.v);
    }
    double secs = now_s() - t0;
    lat_sort(&req);
    printf("PUSHRESULT messages=%ld partitions=%ld threads=%d seconds=%.3f msgs_per_s=%.1f req_p50_us=%u "
           "req_p99_us=%u errors=%ld\n",
           ok, p_parts, threads, secs, secs > 0 ? ok / secs : 0, pct(&req, 50), pct(&req, 99), errors);
    print_first_error("scale_bench push");
    free(req.v);
    free(ws);
    free(th);
    return ok == 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ skew */

static const char *k_queue;
static long k_parts, k_total;
static int k_hot_pct;
static double k_rate, k_t0, k_deadline;
static atomic_long k_next, k_acked_n, k_delivered_n;
static atomic_int k_pushers_left;
static _Atomic int64_t *k_ack_us;   /* per seq: ack time in us since k_t0, +1; 0 = not acked */
static _Atomic unsigned char *k_got; /* per seq: delivered */
static unsigned char *k_hot;         /* per seq: pushed to the hot partition (set before the push) */

typedef struct {
    unsigned seed;
    long ok, errors, late; /* late: sent more than 100 ms after its slot */
    lat req;
} kpusher;

typedef struct {
    long pops, empty, errors, before_ack, unknown;
    lat wait[2]; /* [0] cold, [1] hot */
    lat pop;
} kconsumer;

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static void *skew_push_main(void *arg)
{
    kpusher *w = arg;
    conn c;
    conn_open(&c);
    char body[512];
    for (;;) {
        long seq = atomic_fetch_add(&k_next, 1);
        if (seq >= k_total)
            break;
        double due = k_t0 + (double)seq / k_rate;
        sleep_until(due);
        if (now_s() - due > 0.1)
            w->late++;
        int hot = (int)(rand_r(&w->seed) % 100) < k_hot_pct || k_parts == 1;
        long part = hot ? 0 : 1 + (long)(rand_r(&w->seed) % (unsigned)(k_parts - 1));
        k_hot[seq] = (unsigned char)hot;
        snprintf(body, sizeof body,
                 "{\"items\":[{\"queue\":\"%s\",\"partition\":\"p%06ld\",\"payload\":{\"seq\":%ld,\"pad\":\"" PAD
                 "\"}}]}",
                 k_queue, part, seq);
        double t0 = now_s();
        long code = http(&c, "/api/v1/push", body);
        double t1 = now_s();
        lat_add(&w->req, t1 - t0);
        if (code == 201 && push_ok_items(&c) == 1) {
            atomic_store(&k_ack_us[seq], (int64_t)((t1 - k_t0) * 1e6) + 1);
            atomic_fetch_add(&k_acked_n, 1);
            w->ok++;
        } else {
            w->errors++;
            note_error("push", code, &c);
        }
    }
    atomic_fetch_sub(&k_pushers_left, 1);
    conn_close(&c);
    return NULL;
}

static void *skew_pop_main(void *arg)
{
    kconsumer *w = arg;
    conn c;
    conn_open(&c);
    char path[512];
    snprintf(path, sizeof path, "/api/v1/pop/queue/%s?batch=1&autoAck=true&wait=false", k_queue);
    while (now_s() < k_deadline) {
        if (atomic_load(&k_pushers_left) == 0 && atomic_load(&k_delivered_n) >= atomic_load(&k_acked_n))
            break;
        double t0 = now_s();
        long code = http(&c, path, NULL);
        double t1 = now_s();
        w->pops++;
        if (code == 204) {
            w->empty++;
            usleep(1000);
            continue;
        }
        json_error_t jerr;
        json_t *pop = code == 200 ? json_loads(c.out.p, 0, &jerr) : NULL;
        json_t *msgs = pop ? json_object_get(pop, "messages") : NULL;
        if (!json_is_array(msgs)) {
            w->errors++;
            note_error("pop", code, &c);
            json_decref(pop);
            usleep(10000);
            continue;
        }
        lat_add(&w->pop, t1 - t0);
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            json_t *seqj = json_object_get(json_object_get(json_array_get(msgs, i), "data"), "seq");
            long seq = json_is_integer(seqj) ? (long)json_integer_value(seqj) : -1;
            if (seq < 0 || seq >= k_total || atomic_exchange(&k_got[seq], 1) != 0) {
                w->unknown++; /* not this run's, or twice */
                continue;
            }
            atomic_fetch_add(&k_delivered_n, 1);
            int64_t ack = atomic_load(&k_ack_us[seq]);
            uint64_t now_us = (uint64_t)((t1 - k_t0) * 1e6);
            if (ack == 0) {
                w->before_ack++;
                lat_add_us(&w->wait[k_hot[seq] ? 1 : 0], 0);
            } else {
                uint64_t a = (uint64_t)(ack - 1);
                lat_add_us(&w->wait[k_hot[seq] ? 1 : 0], now_us > a ? now_us - a : 0);
            }
        }
        json_decref(pop);
    }
    conn_close(&c);
    return NULL;
}

static int mode_skew(int argc, char **argv)
{
    if (argc < 9)
        return 2;
    k_queue = argv[3];
    k_parts = atol(argv[4]);
    k_hot_pct = atoi(argv[5]);
    k_rate = atof(argv[6]);
    double seconds = atof(argv[7]);
    int consumers = atoi(argv[8]);
    int pushers = argc > 9 ? atoi(argv[9]) : 4;
    double drain_s = argc > 10 ? atof(argv[10]) : 60;
    if (k_parts < 1 || k_parts > 999999 || k_hot_pct < 0 || k_hot_pct > 100 || k_rate <= 0 || seconds <= 0 ||
        consumers < 1 || pushers < 1 || drain_s <= 0)
        return 2;
    k_total = (long)(k_rate * seconds);
    if (k_total < 1)
        k_total = 1;
    k_ack_us = calloc((size_t)k_total, sizeof *k_ack_us);
    k_got = calloc((size_t)k_total, sizeof *k_got);
    k_hot = calloc((size_t)k_total, sizeof *k_hot);
    kpusher *pw = calloc((size_t)pushers, sizeof *pw);
    kconsumer *cw = calloc((size_t)consumers, sizeof *cw);
    pthread_t *pt = calloc((size_t)pushers, sizeof *pt), *ct = calloc((size_t)consumers, sizeof *ct);
    if (!k_ack_us || !k_got || !k_hot || !pw || !cw || !pt || !ct) {
        perror("calloc");
        return 1;
    }
    atomic_store(&k_pushers_left, pushers);
    k_t0 = now_s();
    k_deadline = k_t0 + seconds + drain_s;
    for (int i = 0; i < pushers; i++) {
        pw[i].seed = (unsigned)time(NULL) * 2654435761u + (unsigned)i;
        pthread_create(&pt[i], NULL, skew_push_main, &pw[i]);
    }
    for (int i = 0; i < consumers; i++)
        pthread_create(&ct[i], NULL, skew_pop_main, &cw[i]);
    long ok = 0, perr = 0, late = 0;
    lat req = {0};
    for (int i = 0; i < pushers; i++) {
        pthread_join(pt[i], NULL);
        ok += pw[i].ok;
        perr += pw[i].errors;
        late += pw[i].late;
        lat_merge(&req, &pw[i].req);
        free(pw[i].req.v);
    }
    double push_secs = now_s() - k_t0;
    long pops = 0, empty = 0, cerr = 0, before = 0, unknown = 0;
    lat wait[2] = {{0}, {0}}, all = {0}, pl = {0};
    for (int i = 0; i < consumers; i++) {
        pthread_join(ct[i], NULL);
        pops += cw[i].pops;
        empty += cw[i].empty;
        cerr += cw[i].errors;
        before += cw[i].before_ack;
        unknown += cw[i].unknown;
        for (int k = 0; k < 2; k++) {
            lat_merge(&wait[k], &cw[i].wait[k]);
            lat_merge(&all, &cw[i].wait[k]);
            free(cw[i].wait[k].v);
        }
        lat_merge(&pl, &cw[i].pop);
        free(cw[i].pop.v);
    }
    double end = now_s(), secs = end - k_t0;
    /* What never came: its wait so far is a lower bound, counted in. */
    long undelivered[2] = {0, 0};
    uint64_t und_max[2] = {0, 0};
    uint64_t end_us = (uint64_t)(secs * 1e6);
    for (long s = 0; s < k_total; s++) {
        int64_t ack = atomic_load(&k_ack_us[s]);
        if (ack == 0 || atomic_load(&k_got[s]))
            continue;
        int h = k_hot[s] ? 1 : 0;
        uint64_t w = end_us > (uint64_t)(ack - 1) ? end_us - (uint64_t)(ack - 1) : 0;
        undelivered[h]++;
        if (w > und_max[h])
            und_max[h] = w;
        lat_add_us(&wait[h], w);
        lat_add_us(&all, w);
    }
    for (int k = 0; k < 2; k++)
        lat_sort(&wait[k]);
    lat_sort(&all);
    lat_sort(&req);
    lat_sort(&pl);
    long delivered = atomic_load(&k_delivered_n);
    printf("SKEWRESULT partitions=%ld hot_pct=%d rate=%.1f pushers=%d seconds=%.3f pushed=%ld push_rate=%.1f push_p99_us=%u "
           "late_pushes=%ld delivered=%ld hot_n=%zu hot_p50_us=%u hot_p99_us=%u hot_max_us=%u cold_n=%zu "
           "cold_p50_us=%u cold_p99_us=%u cold_max_us=%u all_p50_us=%u all_p99_us=%u all_max_us=%u "
           "undelivered_hot=%ld undelivered_cold=%ld before_ack=%ld pops=%ld empty_pops=%ld pop_p50_us=%u "
           "pop_p99_us=%u errors=%ld unknown=%ld drained=%d\n",
           k_parts, k_hot_pct, k_rate, pushers, secs, ok, push_secs > 0 ? ok / push_secs : 0, pct(&req, 99), late,
           delivered, wait[1].n, pct(&wait[1], 50), pct(&wait[1], 99), wait[1].n ? wait[1].v[wait[1].n - 1] : 0,
           wait[0].n, pct(&wait[0], 50), pct(&wait[0], 99), wait[0].n ? wait[0].v[wait[0].n - 1] : 0, pct(&all, 50),
           pct(&all, 99), all.n ? all.v[all.n - 1] : 0, undelivered[1], undelivered[0], before, pops, empty,
           pct(&pl, 50), pct(&pl, 99), perr + cerr, unknown, undelivered[0] + undelivered[1] == 0);
    print_first_error("scale_bench skew");
    for (int k = 0; k < 2; k++)
        free(wait[k].v);
    free(all.v);
    free(req.v);
    free(pl.v);
    free((void *)k_ack_us);
    free((void *)k_got);
    free(k_hot);
    free(pw);
    free(cw);
    free(pt);
    free(ct);
    return delivered == 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s URL seed|drain|push|skew ... (see the header of bench/scale_bench.c)\n", argv[0]);
        return 2;
    }
    g_url = argv[1];
    curl_global_init(CURL_GLOBAL_ALL);
    int rc = 2;
    if (strcmp(argv[2], "seed") == 0)
        rc = mode_seed(argc, argv);
    else if (strcmp(argv[2], "drain") == 0)
        rc = mode_drain(argc, argv);
    else if (strcmp(argv[2], "push") == 0)
        rc = mode_push(argc, argv);
    else if (strcmp(argv[2], "skew") == 0)
        rc = mode_skew(argc, argv);
    if (rc == 2)
        fprintf(stderr, "%s: bad arguments (see the header of bench/scale_bench.c)\n", argv[0]);
    curl_global_cleanup();
    return rc;
}
