/* wire_bench: the transaction-wire load generator of bench/run.sh.
 *
 * wrk cannot chain a request on the previous response of the same
 * connection, so this does what a consumer does, over keep-alive HTTP:
 *
 *   prefill: POST /api/v1/push of N messages, 500 per call, round robin over
 *            P partitions of queue Q
 *   then C consumer threads, each until the deadline:
 *     GET /api/v1/pop/queue/Q?batch=B            (any partition with work)
 *     per T messages of the batch (T = per_tx, default 1), one
 *     POST /api/v1/transaction with, for each of the T messages,
 *       ack (transactionId, partitionId, leaseId)
 *       + push of one message to Q_out (same partition name)
 *       + kv putIfAbsent marker "done:<message id>" (1 h TTL)
 *     and checks success:true; messages count once committed.
 *
 * Prints one line "WIRERESULT key=value ..." (latencies in microseconds).
 * Build: cc -O2 -o wire_bench bench/wire_bench.c bench/http.c -lcurl -ljansson -lpthread
 * Usage: wire_bench URL [consumers=16] [partitions=16] [prefill=40000]
 *                   [batch=10] [seconds=5] [queue=wire_in] [per_tx=1]
 * consumers 0: prefill only; prefill 0: consume what is there.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

typedef struct {
    uint32_t *v;
    size_t n, cap;
} lat;

typedef struct {
    int id;
    long committed, errors, empty_pops, pops;
    lat commit_lat, pop_lat;
    char first_error[512];
} worker;

static const char *g_url, *g_queue;
static int g_batch, g_per_tx;
static double g_deadline;

static void lat_add(lat *l, double seconds)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (l->v == NULL) {
            perror("realloc");
            exit(1);
        }
    }
    l->v[l->n++] = (uint32_t)(seconds * 1e6);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t pct(lat *l, double p)
{
    if (l->n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)l->n);
    if (i >= l->n)
        i = l->n - 1;
    return l->v[i];
}

/* One request on a keep-alive handle. body == NULL: GET. Returns the status
 * (0 on a transport error); the response body is in out. */
static long http(CURL *h, const char *path, const char *body, buf *out)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", g_url, path);
    out->len = 0;
    if (out->p)
        out->p[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    if (curl_easy_perform(h) != CURLE_OK)
        return 0;
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

static CURL *handle(buf *out, struct curl_slist *hdr)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    return h;
}

static void note_error(worker *w, long code, const char *what, const buf *b)
{
    w->errors++;
    if (w->first_error[0] == '\0')
        snprintf(w->first_error, sizeof w->first_error, "%s: HTTP %ld %.400s", what, code, b->p ? b->p : "");
}

static void *consume(void *arg)
{
    worker *w = arg;
    buf out = {0};
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *h = handle(&out, hdr);
    char path[512];
    snprintf(path, sizeof path, "/api/v1/pop/queue/%s?batch=%d&leaseSeconds=60", g_queue, g_batch);
    char out_queue[300];
    snprintf(out_queue, sizeof out_queue, "%s_out", g_queue);

    while (now_s() < g_deadline) {
        double t0 = now_s();
        long code = http(h, path, NULL, &out);
        lat_add(&w->pop_lat, now_s() - t0);
        w->pops++;
        if (code == 204) {
            w->empty_pops++;
            usleep(1000);
            continue;
        }
        if (code != 200) {
            note_error(w, code, "pop", &out);
            usleep(10000);
            continue;
        }
        json_error_t jerr;
        json_t *pop = json_loads(out.p, 0, &jerr);
        json_t *msgs = pop ? json_object_get(pop, "messages") : NULL;
        if (!json_is_array(msgs)) {
            note_error(w, code, "pop body", &out);
            json_decref(pop);
            continue;
        }
        /* The whole batch, even past the deadline: a consumer that stops
         * mid-batch leaves its lease to run out (60 s), and the next run on
         * this queue finds that partition held, so its consumers spin on
         * empty pops (what made 16 consumers on 16 partitions see 82% empty
         * pops after a 4-consumer run). The tail is committed work and the
         * elapsed time includes it. */
        /* The whole batch, even past the deadline: a consumer that stops
         * mid-batch leaves its lease to run out (60 s), and the next run on
         * this queue finds that partition held, so its consumers spin on
         * empty pops (what made 16 consumers on 16 partitions see 82% empty
         * pops after a 4-consumer run). The tail is committed work and the
         * elapsed time includes it. */
        size_t n = json_array_size(msgs);
        for (size_t i = 0; i < n; i += (size_t)g_per_tx) {
            json_t *ops = json_array(), *kv = json_array();
            size_t k, end = i + (size_t)g_per_tx < n ? i + (size_t)g_per_tx : n;
            for (k = i; k < end; k++) {
                if (!wire_step_add(ops, kv, json_array_get(msgs, k), out_queue, "wire", 3600))
                    break;
            }
            if (k < end) {
                note_error(w, 200, "pop message without id/transactionId/partitionId/leaseId/partition", &out);
                json_decref(ops);
                json_decref(kv);
                break;
            }
            json_t *tx = json_pack("{s:o, s:o}", "operations", ops, "kv", kv);
            char *body = json_dumps(tx, JSON_COMPACT);
            json_decref(tx);
            double t1 = now_s();
            long c2 = http(h, "/api/v1/transaction", body, &out);
            double dt = now_s() - t1;
            free(body);
            json_error_t jerr2;
            json_t *res = c2 == 200 ? json_loads(out.p, 0, &jerr2) : NULL;
            if (res != NULL && json_is_true(json_object_get(res, "success"))) {
                w->committed += (long)(end - i);
                lat_add(&w->commit_lat, dt);
            } else {
                note_error(w, c2, "transaction", &out);
            }
            json_decref(res);
        }
        json_decref(pop);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    free(out.p);
    return NULL;
}

static int prefill(long n, int partitions, long run_id)
{
    buf out = {0};
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *h = handle(&out, hdr);
    int rc = 0;
    for (long done = 0; done < n && rc == 0;) {
        json_t *items = json_array();
        for (int k = 0; k < 500 && done < n; k++, done++) {
            char part[32], tx[96];
            snprintf(part, sizeof part, "p%02ld", done % partitions);
            snprintf(tx, sizeof tx, "in-%ld-%ld", run_id, done);
            json_array_append_new(items, json_pack("{s:s, s:s, s:{s:i, s:s}, s:s}", "queue", g_queue, "partition",
                                                   part, "payload", "n", (json_int_t)done, "pad",
                                                   "0123456789abcdef0123456789abcdef", "transactionId", tx));
        }
        json_t *req = json_pack("{s:o}", "items", items);
        char *body = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        long code = http(h, "/api/v1/push", body, &out);
        free(body);
        if (code != 201 && code != 200) {
            fprintf(stderr, "wire_bench: prefill push failed: HTTP %ld %.400s\n", code, out.p ? out.p : "");
            rc = 1;
        }
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    free(out.p);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [consumers] [partitions] [prefill] [batch] [seconds] [queue] [per_tx]\n", argv[0]);
        return 2;
    }
    g_url = argv[1];
    int consumers = argc > 2 ? atoi(argv[2]) : 16;
    int partitions = argc > 3 ? atoi(argv[3]) : 16;
    long n = argc > 4 ? atol(argv[4]) : 40000;
    g_batch = argc > 5 ? atoi(argv[5]) : 10;
    double seconds = argc > 6 ? atof(argv[6]) : 5;
    g_queue = argc > 7 ? argv[7] : "wire_in";
    g_per_tx = argc > 8 ? atoi(argv[8]) : 1;
    if (consumers < 0 || partitions < 1 || n < 0 || g_batch < 1 || seconds <= 0 || g_per_tx < 1) {
        fprintf(stderr, "wire_bench: bad arguments\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_ALL);

    double p0 = now_s();
    if (prefill(n, partitions, (long)time(NULL)) != 0)
        return 1;
    double prefill_s = now_s() - p0;
    if (consumers == 0) {
        printf("PREFILL messages=%ld partitions=%d seconds=%.2f\n", n, partitions, prefill_s);
        curl_global_cleanup();
        return 0;
    }

    worker *ws = calloc((size_t)consumers, sizeof *ws);
    pthread_t *th = calloc((size_t)consumers, sizeof *th);
    double t0 = now_s();
    g_deadline = t0 + seconds;
    for (int i = 0; i < consumers; i++) {
        ws[i].id = i;
        pthread_create(&th[i], NULL, consume, &ws[i]);
    }
    for (int i = 0; i < consumers; i++)
        pthread_join(th[i], NULL);
    double elapsed = now_s() - t0;

    long committed = 0, errors = 0, empty = 0, pops = 0;
    lat cl = {0}, pl = {0};
    const char *first_error = "";
    for (int i = 0; i < consumers; i++) {
        committed += ws[i].committed;
        errors += ws[i].errors;
        empty += ws[i].empty_pops;
        pops += ws[i].pops;
        for (size_t k = 0; k < ws[i].commit_lat.n; k++)
            lat_add(&cl, ws[i].commit_lat.v[k] / 1e6);
        for (size_t k = 0; k < ws[i].pop_lat.n; k++)
            lat_add(&pl, ws[i].pop_lat.v[k] / 1e6);
        if (first_error[0] == '\0' && ws[i].first_error[0] != '\0')
            first_error = ws[i].first_error;
    }
    qsort(cl.v, cl.n, sizeof *cl.v, cmp_u32);
    qsort(pl.v, pl.n, sizeof *pl.v, cmp_u32);
    printf("WIRERESULT per_tx=%d messages=%ld duration_us=%.0f msgs_per_s=%.1f commit_p50_us=%u commit_p99_us=%u "
           "pop_p50_us=%u pop_p99_us=%u pops=%ld empty_pops=%ld errors=%ld prefill=%ld prefill_s=%.2f drained=%d\n",
           g_per_tx, committed, elapsed * 1e6, committed / elapsed, pct(&cl, 50), pct(&cl, 99), pct(&pl, 50), pct(&pl, 99),
           pops, empty, errors, n, prefill_s, n > 0 && committed >= n ? 1 : 0);
    if (first_error[0] != '\0')
        fprintf(stderr, "wire_bench: first error: %s\n", first_error);
    curl_global_cleanup();
    free(ws);
    free(th);
    free(cl.v);
    free(pl.v);
    return errors > 0 && committed == 0 ? 1 : 0;
}
