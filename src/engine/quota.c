/* quota: queen_kv_admit, the in-process enforcement of KV quota and rate
 * limits (docs/api.md, KV), and the refresh thread that feeds it.
 *
 * Owns: the per-tenant table (limits from queen.kv_quota, the last
 * measurement from queen.kv_usage, the delta this broker admitted since, two
 * token buckets), the refresh thread, and the admission arithmetic.
 * Must never: run SQL for an admission of a loaded tenant (the write path
 * stays SQL-free; the only SQL is kv_quota_read_v1, on the cadence and once
 * per tenant first seen), or write kv_quota / kv_usage.
 *
 * Soft and late by construction. Each broker counts only what it admitted
 * itself since the last measurement, so with N brokers a tenant can
 * overshoot max_rows (or max_bytes) by at most (N - 1) x the headroom at the
 * last refresh: every other broker may admit the whole remaining headroom
 * before anyone's measurement shows it. A limit change reaches a broker
 * within one refresh. Every put, putIfAbsent and incr counts as a new row
 * (the edge cannot know whether the key exists without SQL), so an
 * overwrite is over-counted until the next measurement resets the delta:
 * the error is on the refusing side, never the admitting one.
 *
 * First request of a tenant: loaded synchronously, once. Without it a fresh
 * broker (or one that has just seen a tenant for the first time) would
 * either admit blindly for a whole cadence (the overshoot bound would no
 * longer hold: a restarted broker could admit max_rows again) or gate every
 * tenant under tenancy until the first refresh. The cost is one read per
 * tenant per broker lifetime (and after eviction of an idle tenant). */
#include "quota.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging.h"
#include "sqlcall.h"
#include "util.h"

/* ---- Pure arithmetic ----------------------------------------------------- */

static void refill(quota_bucket *b, long long rate, long long now_ms)
{
    double cap = rate < 1 ? 1 : (double)rate;
    if (!b->primed) {
        b->primed = true;
        b->tokens = cap;
        b->last_ms = now_ms;
        return;
    }
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * (double)rate / 1000.0;
        b->last_ms = now_ms;
    }
    if (b->tokens > cap)
        b->tokens = cap;
}

bool quota_bucket_ready(quota_bucket *b, long long rate, long long now_ms, int n, int *retry_after_s)
{
    if (rate < 0 || n <= 0)
        return true;
    if (rate == 0) { /* max_*_per_sec = 0: none at all (an operator's off switch) */
        if (retry_after_s != NULL)
            *retry_after_s = 1;
        return false;
    }
    refill(b, rate, now_ms);
    double cap = rate < 1 ? 1 : (double)rate;
    double need = (double)n < cap ? (double)n : cap;
    if (b->tokens >= need)
        return true;
    if (retry_after_s != NULL) {
        double exact = (need - b->tokens) / (double)rate;
        double secs = (double)(long long)exact < exact ? (double)(long long)exact + 1 : exact; /* ceil, without libm */
        *retry_after_s = secs < 1 ? 1 : secs > 3600 ? 3600 : (int)secs;
    }
    return false;
}

bool quota_bucket_take(quota_bucket *b, long long rate, long long now_ms, int n, int *retry_after_s)
{
    if (rate < 0 || n <= 0)
        return true;
    if (!quota_bucket_ready(b, rate, now_ms, n, retry_after_s))
        return false;
    b->tokens -= n;
    return true;
}

static bool over(long long limit, long long used, long long added, long long more)
{
    return more > 0 && limit >= 0 && used + added + more > limit;
}

quota_verdict quota_decide(quota_state *s, bool tenancy, int reads, int writes, int creating, long bytes,
                           long long now_ms, int *retry_after_s)
{
    if (tenancy && !(s->has_row && s->enabled))
        return QUOTA_GATED;
    if (over(s->max_rows, s->used_rows, s->added_rows, creating) ||
        over(s->max_bytes, s->used_bytes, s->added_bytes, bytes))
        return QUOTA_FULL;
    int ra = 1, wa = 1;
    bool r_ok = quota_bucket_ready(&s->reads, s->max_rps, now_ms, reads, &ra);
    bool w_ok = quota_bucket_ready(&s->writes, s->max_wps, now_ms, writes, &wa);
    if (!r_ok || !w_ok) {
        if (retry_after_s != NULL)
            *retry_after_s = !r_ok && !w_ok ? (ra > wa ? ra : wa) : !r_ok ? ra : wa;
        return QUOTA_RATE;
    }
    quota_bucket_take(&s->reads, s->max_rps, now_ms, reads, NULL);
    quota_bucket_take(&s->writes, s->max_wps, now_ms, writes, NULL);
    if (creating > 0)
        s->added_rows += creating;
    if (bytes > 0)
        s->added_bytes += bytes;
    return QUOTA_ADMIT;
}

void quota_apply_read(quota_state *s, bool has_row, bool enabled, long long max_rows, long long max_bytes,
                      long long max_rps, long long max_wps, long long rows, long long bytes, const char *computed_at)
{
    s->loaded = true;
    s->has_row = has_row;
    s->enabled = enabled;
    s->max_rows = max_rows;
    s->max_bytes = max_bytes;
    /* A changed rate starts its bucket afresh (full at the next take). */
    if (s->max_rps != max_rps)
        s->reads.primed = false;
    if (s->max_wps != max_wps)
        s->writes.primed = false;
    s->max_rps = max_rps;
    s->max_wps = max_wps;
    if (computed_at == NULL)
        computed_at = "";
    if (strcmp(s->computed_at, computed_at) != 0) {
        /* A new measurement counts what was admitted before it (give or
         * take the writes in flight while it ran: soft, see the header). */
        s->used_rows = rows;
        s->used_bytes = bytes;
        s->added_rows = s->added_bytes = 0;
        snprintf(s->computed_at, sizeof s->computed_at, "%s", computed_at);
    }
}

/* ---- The table and the refresh thread ------------------------------------ */

#define QUOTA_BUCKETS 256
#define QUOTA_CHUNK 500 /* tenants per kv_quota_read_v1 call */

typedef struct quota_entry {
    struct quota_entry *next;
    char tenant[QUEEN_TENANT_LEN + 1]; /* canonical: quota_admit is handed nothing else */
    long long last_seen_ms;
    quota_state st;
} quota_entry;

struct queen_quota {
    queen_pool *pool;
    int refresh_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    quota_entry *slots[QUOTA_BUCKETS];
};

static unsigned hash_tenant(const char *t)
{
    unsigned h = 2166136261u;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 16777619u;
    return h % QUOTA_BUCKETS;
}

/* Under mu. */
static quota_entry *find(queen_quota *qq, const char *tenant, bool create)
{
    unsigned h = hash_tenant(tenant);
    for (quota_entry *e = qq->slots[h]; e != NULL; e = e->next)
        if (strcmp(e->tenant, tenant) == 0)
            return e;
    if (!create)
        return NULL;
    quota_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    /* Seen now: an entry created for a first load must not look idle to a
     * refresh that runs before the load returns. */
    e->last_seen_ms = engine_now_ms();
    e->st.max_rows = e->st.max_bytes = e->st.max_rps = e->st.max_wps = -1;
    e->next = qq->slots[h];
    qq->slots[h] = e;
    return e;
}

static long long num_or_unlimited(const json_t *v)
{
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Reads the tenants of array_text ("{uuid,...}") and folds the answer in. */
static int load(queen_quota *qq, const char *array_text, queen_error *err)
{
    char *text = NULL;
    const char *params[] = {array_text};
    if (sql_call_text(qq->pool, "queen_kv_quota_read", "SELECT queen.kv_quota_read_v1($1::uuid[])::text", 1, params,
                        &text, err) != 0)
        return -1;
    json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!json_is_array(arr)) {
        json_decref(arr);
        queen_error_set(err, QUEEN_ERR_INTERNAL, "bad_result", "kv_quota_read_v1 did not return an array");
        return -1;
    }
    size_t i;
    json_t *el;
    pthread_mutex_lock(&qq->mu);
    json_array_foreach(arr, i, el)
    {
        const char *tenant = json_string_value(json_object_get(el, "tenant"));
        quota_entry *e = tenant ? find(qq, tenant, true) : NULL;
        if (e == NULL)
            continue;
        quota_apply_read(&e->st, json_is_true(json_object_get(el, "hasQuota")),
                         json_is_true(json_object_get(el, "enabled")), num_or_unlimited(json_object_get(el, "maxRows")),
                         num_or_unlimited(json_object_get(el, "maxBytes")),
                         num_or_unlimited(json_object_get(el, "maxReadsPerSec")),
                         num_or_unlimited(json_object_get(el, "maxWritesPerSec")),
                         (long long)json_integer_value(json_object_get(el, "rows")),
                         (long long)json_integer_value(json_object_get(el, "bytes")),
                         json_string_value(json_object_get(el, "computedAt")));
    }
    pthread_mutex_unlock(&qq->mu);
    json_decref(arr);
    return 0;
}

/* An entry unseen this long is dropped: its delta goes with it (the next
 * measurement has it anyway), and the table stays the size of the tenants
 * actually in use. */
static long long idle_ms(const queen_quota *qq)
{
    long long ten = 10LL * qq->refresh_ms;
    return ten > 60000 ? ten : 60000;
}

/* One refresh: evicts idle entries, then reads the rest in chunks. The
 * tenant list is copied under the lock; the reads run without it. */
static void refresh(queen_quota *qq)
{
    long long now = engine_now_ms();
    size_t n = 0, cap = 64;
    char (*list)[QUEEN_TENANT_LEN + 1] = malloc(cap * sizeof *list);
    if (list == NULL)
        return;
    pthread_mutex_lock(&qq->mu);
    for (int h = 0; h < QUOTA_BUCKETS; h++) {
        quota_entry **pp = &qq->slots[h];
        while (*pp != NULL) {
            quota_entry *e = *pp;
            if (now - e->last_seen_ms > idle_ms(qq)) {
                *pp = e->next;
                free(e);
                continue;
            }
            if (n == cap) {
                void *grown = realloc(list, 2 * cap * sizeof *list);
                if (grown == NULL)
                    break;
                list = grown;
                cap *= 2;
            }
            memcpy(list[n++], e->tenant, sizeof list[0]);
            pp = &e->next;
        }
    }
    pthread_mutex_unlock(&qq->mu);
    for (size_t at = 0; at < n; at += QUOTA_CHUNK) {
        size_t k = n - at < QUOTA_CHUNK ? n - at : QUOTA_CHUNK;
        /* "{" + k uuids of QUEEN_TENANT_LEN bytes, k - 1 commas, "}" and NUL:
         * every entry is canonical, so none is longer and none fails the
         * chunk's ::uuid[] cast for the others. */
        char *text = malloc(k * (QUEEN_TENANT_LEN + 1) + 2), *p = text;
        if (text == NULL)
            break;
        *p++ = '{';
        for (size_t i = 0; i < k; i++) {
            if (i > 0)
                *p++ = ',';
            memcpy(p, list[at + i], QUEEN_TENANT_LEN);
            p += QUEEN_TENANT_LEN;
        }
        *p++ = '}';
        *p = '\0';
        queen_error err;
        if (load(qq, text, &err) != 0)
            queen_log(QUEEN_LOG_WARN, "kv quota refresh failed: %s (%s); keeping the last figures", err.reason,
                      err.detail);
        free(text);
    }
    free(list);
}

static void *run(void *arg)
{
    queen_quota *qq = arg;
    pthread_mutex_lock(&qq->mu);
    while (!qq->stop) {
        /* The condvar runs on the monotonic clock (quota_start): a wall-clock
         * step neither stalls the refresh nor makes it spin. */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long ns = until.tv_nsec + (long long)qq->refresh_ms * 1000000LL;
        until.tv_sec += ns / 1000000000LL;
        until.tv_nsec = ns % 1000000000LL;
        pthread_cond_timedwait(&qq->cv, &qq->mu, &until);
        if (qq->stop)
            break;
        pthread_mutex_unlock(&qq->mu);
        refresh(qq);
        pthread_mutex_lock(&qq->mu);
    }
    pthread_mutex_unlock(&qq->mu);
    return NULL;
}

queen_quota *quota_start(queen_pool *pool, int refresh_ms, char *msg, size_t len)
{
    queen_quota *qq = calloc(1, sizeof *qq);
    if (qq == NULL) {
        snprintf(msg, len, "out of memory");
        return NULL;
    }
    qq->pool = pool;
    qq->refresh_ms = refresh_ms > 0 ? refresh_ms : 1;
    pthread_mutex_init(&qq->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&qq->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&qq->thread, NULL, run, qq) != 0) {
        snprintf(msg, len, "cannot start the kv quota refresh thread");
        pthread_cond_destroy(&qq->cv);
        pthread_mutex_destroy(&qq->mu);
        free(qq);
        return NULL;
    }
    return qq;
}

void quota_stop(queen_quota *qq)
{
    if (qq == NULL)
        return;
    pthread_mutex_lock(&qq->mu);
    qq->stop = true;
    pthread_cond_signal(&qq->cv);
    pthread_mutex_unlock(&qq->mu);
    pthread_join(qq->thread, NULL);
    for (int h = 0; h < QUOTA_BUCKETS; h++) {
        quota_entry *e = qq->slots[h];
        while (e != NULL) {
            quota_entry *next = e->next;
            free(e);
            e = next;
        }
    }
    pthread_cond_destroy(&qq->cv);
    pthread_mutex_destroy(&qq->mu);
    free(qq);
}

/* ---- Admission ----------------------------------------------------------- */

quota_verdict quota_admit(queen_quota *qq, const char *tenant, bool tenancy, int reads, int writes, int creating,
                          long bytes, int *retry_after_s, queen_error *err)
{
    pthread_mutex_lock(&qq->mu);
    quota_entry *e = find(qq, tenant, true);
    bool loaded = e != NULL && e->st.loaded;
    pthread_mutex_unlock(&qq->mu);
    if (e == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        return QUOTA_ERROR;
    }
    if (!loaded) {
        /* The once-per-tenant load (see the header). Entries are freed only
         * by the refresh thread, after an idle period, so e is looked up
         * again below rather than trusted across the unlocked read. */
        char text[QUEEN_TENANT_LEN + 3];
        snprintf(text, sizeof text, "{%s}", tenant);
        if (load(qq, text, err) != 0)
            return QUOTA_ERROR;
    }
    pthread_mutex_lock(&qq->mu);
    e = find(qq, tenant, true);
    quota_verdict v = QUOTA_ADMIT;
    if (e != NULL) {
        e->last_seen_ms = engine_now_ms();
        v = quota_decide(&e->st, tenancy, reads, writes, creating, bytes, e->last_seen_ms, retry_after_s);
    }
    pthread_mutex_unlock(&qq->mu);
    return v;
}
