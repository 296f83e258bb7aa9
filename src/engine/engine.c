/* engine: queen_open/queen_close, in-flight call accounting, and health.
 * Never builds SQL against the kv table (kv.c calls the SQL functions), and
 * never renders JSON that PostgreSQL already rendered. */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "input_limits.h"
#include "logging.h"
#include "notify.h"
#include "quota.h"
#include "rawjson.h"
#include "sweeper.h"

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

queen *queen_open(const queen_config *cfg, queen_error *err)
{
    if (cfg == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "bad_config", "queen_open: cfg is NULL");
        return NULL;
    }
    queen *q = calloc(1, sizeof *q);
    if (q == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        return NULL;
    }
    pthread_mutex_init(&q->idle_mu, NULL);
    pthread_cond_init(&q->idle_cv, NULL);
    q->cfg = *cfg;
    queen_config_resolve(&q->cfg); /* NULL strings now point at the table's text */
    if (!input_limits_ok()) { /* a build defect: every guard would refuse */
        queen_error_set(err, QUEEN_ERR_INTERNAL, "internal_error", "the embedded sql/limits.sql does not hold every budget");
        queen_close(q);
        return NULL;
    }
    q->cfg.pg_url = dup_or_empty(q->cfg.pg_url);
    q->cfg.bind = dup_or_empty(q->cfg.bind);
    q->cfg.dev_dir = dup_or_empty(q->cfg.dev_dir);
    char msg[512];
    if (crypt_keyring_parse(q->cfg.encryption_key, &q->keyring, msg, sizeof msg) != 0) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "bad_config", "%s", msg);
        queen_close(q);
        return NULL;
    }
    char settings[256];
    queen_config_session_settings(&q->cfg, settings, sizeof settings);
    q->pool = queen_pool_open(q->cfg.pg_url, q->cfg.pg_pool, q->cfg.stmt_timeout_ms, q->cfg.pg_acquire_timeout_ms,
                              q->cfg.request_deadline_ms, settings, msg, sizeof msg);
    if (q->pool == NULL) {
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", msg);
        queen_close(q);
        return NULL;
    }
    /* The notifier never fails open: without its LISTEN connection waiters
     * still re-check on their own cadence, and it keeps reconnecting. */
    q->notifier = notifier_start(q->cfg.pg_url, msg, sizeof msg);
    if (q->notifier == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "notifier_start", "%s", msg);
        queen_close(q);
        return NULL;
    }
    q->quota = quota_start(q->pool, q->cfg.kv_quota_refresh_ms, msg, sizeof msg);
    if (q->quota == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "quota_start", "%s", msg);
        queen_close(q);
        return NULL;
    }
    if (q->cfg.sweeper) {
        q->sweeper = sweeper_start(q->pool, &q->cfg, msg, sizeof msg);
        if (q->sweeper == NULL) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "sweeper_start", "%s", msg);
            queen_close(q);
            return NULL;
        }
    }
    return q;
}

/* Order matters: new calls are refused, then waiters are fired (a pop
 * blocked in a long poll is an in-flight call that would otherwise hold
 * close for its whole timeout), then close waits for every in-flight call
 * to leave (queen_stats_json reads the sweeper, so it stops after), and only
 * then are the sweeper, the notifier and the pool freed. */
void queen_close(queen *q)
{
    if (q == NULL)
        return;
    atomic_store(&q->closing, true);
    if (q->notifier)
        notifier_shutdown(q->notifier);
    pthread_mutex_lock(&q->idle_mu);
    while (atomic_load(&q->active) > 0)
        pthread_cond_wait(&q->idle_cv, &q->idle_mu);
    pthread_mutex_unlock(&q->idle_mu);
    sweeper_stop(q->sweeper);
    q->sweeper = NULL;
    quota_stop(q->quota); /* its refresh uses the pool */
    q->quota = NULL;
    notifier_free(q->notifier);
    queen_pool_close(q->pool);
    pthread_cond_destroy(&q->idle_cv);
    pthread_mutex_destroy(&q->idle_mu);
    crypt_keyring_clear(&q->keyring);
    free(q->cfg.pg_url);
    free(q->cfg.bind);
    free(q->cfg.dev_dir);
    free(q);
}

bool engine_enter(queen *q, queen_error *err)
{
    if (q == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "no_handle", "the queen handle is NULL");
        return false;
    }
    atomic_fetch_add(&q->active, 1);
    if (atomic_load(&q->closing)) {
        engine_leave(q);
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "closing", "the engine is closing");
        return false;
    }
    return true;
}

const char *engine_enter_tenant(queen *q, const char *tenant, char out[QUEEN_TENANT_LEN + 1], queen_error *err)
{
    const char *t = engine_tenant(tenant, out, err);
    if (t == NULL || !engine_enter(q, err))
        return NULL;
    return t;
}

/* The last call out while closing wakes queen_close. The broadcast is made
 * under idle_mu, which queen_close holds between its check and its wait,
 * so the wake-up cannot fall between them. */
void engine_leave(queen *q)
{
    if (atomic_fetch_sub(&q->active, 1) == 1 && atomic_load(&q->closing)) {
        pthread_mutex_lock(&q->idle_mu);
        pthread_cond_broadcast(&q->idle_cv);
        pthread_mutex_unlock(&q->idle_mu);
    }
}

/* Its own transaction, after the push's: synchronous_commit off for it
 * alone, because the NOTIFY lock is held until the commit is flushed and a
 * notification is never durable anyway; the push itself stays durable. */
/* The queues of results (a push's array, or a transaction's object whose
 * results hold its pushes as type "push") that received a message, with how
 * many, as the array log_notify_announce_v1 reads per push: [{"queueName":
 * q, "status": "queued", "n": messages}, ...] (a queue may repeat past the
 * first 16 distinct ones; readers add its n up). malloc'd; NULL when none
 * did (all duplicates, no push) or memory is short. The notifier then
 * carries names and counts, not whole results (a push of 100 messages
 * answers ~25 KB), and wakes as many waiters as messages (notify.h). */
static bool append_queued(char **out, size_t *used, size_t *cap, rawjson_span name, long n)
{
    static const char head[] = "{\"queueName\":", tail[] = ",\"status\":\"queued\",\"n\":";
    char num[24];
    int nlen = snprintf(num, sizeof num, "%ld}", n);
    return engine_buf_append(out, used, cap, *used == 0 ? "[" : ",", 1) &&
           engine_buf_append(out, used, cap, head, sizeof head - 1) &&
           engine_buf_append(out, used, cap, name.p, name.len) &&
           engine_buf_append(out, used, cap, tail, sizeof tail - 1) && engine_buf_append(out, used, cap, num, (size_t)nlen);
}

static char *queued_queues(const char *results)
{
    rawjson_span all = {results, strlen(results)}, list = all, item;
    rawjson_iter it;
    if (!rawjson_open(&it, all, '[') && (!rawjson_member(all, "results", &list) || !rawjson_open(&it, list, '[')))
        return NULL;
    enum { SEEN_MAX = 16 }; /* distinct queues counted for folding; more go one element each */
    rawjson_span seen[SEEN_MAX];
    long counts[SEEN_MAX];
    size_t nseen = 0, used = 0, cap = 0;
    char *out = NULL;
    bool ok = true;
    while (ok && rawjson_next(&it, NULL, &item)) {
        rawjson_span status, type, name;
        if (!rawjson_member(item, "status", &status) || !rawjson_key_is(status, "queued") ||
            (rawjson_member(item, "type", &type) && !rawjson_key_is(type, "push")) ||
            !rawjson_member(item, "queueName", &name))
            continue;
        size_t i = 0;
        while (i < nseen && !(seen[i].len == name.len && memcmp(seen[i].p, name.p, name.len) == 0))
            i++;
        if (i < nseen) {
            counts[i]++;
        } else if (nseen < SEEN_MAX) {
            seen[nseen] = name;
            counts[nseen++] = 1;
        } else {
            ok = append_queued(&out, &used, &cap, name, 1);
        }
    }
    for (size_t i = 0; ok && i < nseen; i++)
        ok = append_queued(&out, &used, &cap, seen[i], counts[i]);
    if (ok && used > 0)
        ok = engine_buf_append(&out, &used, &cap, "]", 1);
    if (!ok || used == 0) {
        free(out);
        return NULL;
    }
    return out;
}

void engine_notify_pushed(queen *q, const char *tenant, const char *results)
{
    if (results == NULL)
        return;
    char *queues = queued_queues(results);
    if (queues == NULL)
        return; /* nothing queued (all duplicates, or no push): nothing to wake */
    if (!notifier_announce(q->notifier, tenant, queues))
        log_warn("push notification not sent (waiters re-check within %d ms): %s", NOTIFY_RECHECK_MS,
                 "the notifier is stopping or too far behind");
    free(queues);
}

const char *engine_int_or_null(char *buf, size_t len, long long v)
{
    if (v == 0)
        return NULL;
    snprintf(buf, len, "%lld", v);
    return buf;
}

int queen_health(queen *q, char *version, size_t len, queen_error *err)
{
    if (!engine_enter(q, err))
        return -1;
    char *text = NULL;
    int rc = sql_call_text(q->pool, "queen_health", "SELECT 'PostgreSQL ' || current_setting('server_version')", 0,
                             NULL, &text, err);
    if (rc == 0 && version != NULL && len > 0)
        snprintf(version, len, "%s", text ? text : "");
    free(text);
    engine_leave(q);
    return rc;
}
