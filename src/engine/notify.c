/* notify: the notifier thread, its LISTEN connection, the waiters and the
 * outgoing push notifications (see notify.h). Owns the only connection that
 * is not from the pool. Must never call a waiter's callback while holding its
 * mutex (a callback may register the next waiter, and the HTTP edge resumes a
 * connection from it), never run a statement other than LISTEN and the
 * announcing one, and never block on anything but poll() (the connection is
 * non-blocking). */
#include "notify.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "logging.h"
#include "util.h"

#define NBUCKETS 1024
#define RECONNECT_MIN_MS 200
#define RECONNECT_MAX_MS 5000
#define LOG_EVERY_MS 10000
/* Announcements waiting for the connection, in bytes: past it a push's
 * notification is dropped (its waiters re-check within NOTIFY_RECHECK_MS)
 * rather than let a database that stopped answering grow the broker. */
#define ANNOUNCE_MAX_PENDING (16u << 20)
/* One statement for every announcement gathered since the last one: each
 * element {"t": tenant, "r": what the push or transaction returned}. Within
 * the statement's transaction PostgreSQL delivers identical notifications
 * once, so a burst of pushes to a queue costs one. synchronous_commit is off
 * for this connection (set at connect): a notification is never durable. */
#define SQL_ANNOUNCE "SELECT queen.log_notify_announce_v1($1::jsonb)"
#define ANNOUNCE_STATEMENT "queen_announce"
/* At most one announcing statement per ANNOUNCE_GAP_MS: at a few thousand
 * pushes a second nearly every push was its own statement (~150 us of the
 * database's CPU each, bench/RESULTS.md); held this long, the pushes of the
 * gap share one. The first push after a quiet gap goes at once. Only other
 * brokers' waiters wait for it: this broker's own are woken from the
 * announcement itself (notifier_announce), without the round trip. */
#define ANNOUNCE_GAP_MS 2

struct queen_notifier {
    pthread_mutex_t mu;
    pthread_cond_t done_cv; /* an owned waiter's callback returned */
    pthread_t thread;
    bool started, joined, stopping;
    int wake_fd[2]; /* self-pipe: registration of an earlier deadline, stop */
    char *conninfo;
    queen_waiter *buckets[NBUCKETS];
    queen_waiter **heap; /* min-heap on due time */
    size_t nheap, capheap;
    atomic_bool connected;
    atomic_ulong reconnects, notifies;
    /* Announcements (under mu): "{...},{...}" gathered since the last send. */
    char *pending;
    size_t pending_len, pending_cap;
    /* Keys of this broker's waiters that announcements name (under mu):
     * "<tenant>:<queue>" each followed by a NUL, fired on the next turn. */
    char *local;
    size_t local_len, local_cap;
    atomic_ulong announced, announce_statements, announce_dropped, local_wakes;
};

/* ---- deadline heap (under mu) ------------------------------------------ */

static long long due(const queen_waiter *w)
{
    return w->recheck_at < w->deadline ? w->recheck_at : w->deadline;
}

static void heap_swap(queen_notifier *n, size_t a, size_t b)
{
    queen_waiter *t = n->heap[a];
    n->heap[a] = n->heap[b];
    n->heap[b] = t;
    n->heap[a]->heap_i = a;
    n->heap[b]->heap_i = b;
}

static void heap_up(queen_notifier *n, size_t i)
{
    while (i > 0 && due(n->heap[(i - 1) / 2]) > due(n->heap[i])) {
        heap_swap(n, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(queen_notifier *n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n->nheap && due(n->heap[l]) < due(n->heap[m]))
            m = l;
        if (r < n->nheap && due(n->heap[r]) < due(n->heap[m]))
            m = r;
        if (m == i)
            return;
        heap_swap(n, i, m);
        i = m;
    }
}

static int heap_push(queen_notifier *n, queen_waiter *w)
{
    if (n->nheap == n->capheap) {
        size_t ncap = n->capheap ? n->capheap * 2 : 64;
        queen_waiter **h = realloc(n->heap, ncap * sizeof *h);
        if (h == NULL)
            return -1;
        n->heap = h;
        n->capheap = ncap;
    }
    w->heap_i = n->nheap;
    n->heap[n->nheap++] = w;
    heap_up(n, w->heap_i);
    return 0;
}

static void heap_remove(queen_notifier *n, queen_waiter *w)
{
    size_t i = w->heap_i;
    n->nheap--;
    if (i != n->nheap) {
        n->heap[i] = n->heap[n->nheap];
        n->heap[i]->heap_i = i;
        heap_down(n, i);
        heap_up(n, i);
    }
}

/* ---- buckets (under mu) ------------------------------------------------ */

static unsigned key_bucket(const char *key)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % NBUCKETS;
}

static void unlink_waiter(queen_notifier *n, queen_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        n->buckets[w->bucket] = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
    heap_remove(n, w);
    w->linked = false;
}

/* ---- registration ------------------------------------------------------- */

static void poke(queen_notifier *n)
{
    char b = 1;
    ssize_t r = write(n->wake_fd[1], &b, 1);
    (void)r; /* a full pipe already holds a wake-up */
}

/* The queue part of a waiter that any push of its tenant wakes (a pop by
 * labels). A control character: no queue name can be it. */
#define ANY_QUEUE "\x01"

static bool make_key(char *key, const char *tenant, const char *queue)
{
    int len = snprintf(key, NOTIFY_KEY_MAX, "%s:%s", tenant, queue ? queue : ANY_QUEUE);
    if (len < 0 || len >= NOTIFY_KEY_MAX)
        return false;
    /* NOTIFY payloads carry the tenant as PostgreSQL renders a uuid. */
    for (char *p = key; *p && *p != ':'; p++)
        *p = (char)tolower((unsigned char)*p);
    return true;
}

/* The any-queue key of the tenant that is the first tenant_len bytes of key. */
static bool make_any_key(char *any, const char *key, size_t tenant_len)
{
    if (tenant_len + 1 + sizeof ANY_QUEUE > NOTIFY_KEY_MAX)
        return false;
    memcpy(any, key, tenant_len + 1);
    memcpy(any + tenant_len + 1, ANY_QUEUE, sizeof ANY_QUEUE);
    return true;
}

static bool add_locked(queen_notifier *n, queen_waiter *w, int timeout_ms, bool recheck)
{
    long long now = engine_now_ms();
    w->deadline = now + (timeout_ms > 0 ? timeout_ms : 0);
    w->recheck_at = recheck ? now + NOTIFY_RECHECK_MS : LLONG_MAX;
    w->bucket = key_bucket(w->key);
    w->done = false;
    w->woken = false;
    pthread_mutex_lock(&n->mu);
    if (n->stopping || heap_push(n, w) != 0) {
        pthread_mutex_unlock(&n->mu);
        return false;
    }
    w->prev = NULL;
    w->next = n->buckets[w->bucket];
    if (w->next)
        w->next->prev = w;
    n->buckets[w->bucket] = w;
    w->linked = true;
    bool earliest = w->heap_i == 0;
    pthread_mutex_unlock(&n->mu);
    if (earliest)
        poke(n); /* the thread may be sleeping toward a later deadline */
    return true;
}

queen_waiter *notifier_add(queen_notifier *n, const char *tenant, const char *queue, int timeout_ms, bool recheck,
                           queen_wake_fn fn, void *ctx)
{
    if (n == NULL || fn == NULL)
        return NULL;
    queen_waiter *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    if (!make_key(w->key, tenant, queue)) {
        free(w);
        return NULL;
    }
    w->fn = fn;
    w->ctx = ctx;
    w->owned = false;
    if (!add_locked(n, w, timeout_ms, recheck)) {
        free(w);
        return NULL;
    }
    return w;
}

bool notifier_add_owned(queen_notifier *n, queen_waiter *w, const char *tenant, const char *queue, int timeout_ms,
                        queen_wake_fn fn, void *ctx)
{
    if (n == NULL || fn == NULL)
        return false;
    memset(w, 0, sizeof *w);
    if (!make_key(w->key, tenant, queue))
        return false;
    w->fn = fn;
    w->ctx = ctx;
    w->owned = true;
    return add_locked(n, w, timeout_ms, true);
}

void notifier_finish(queen_notifier *n, queen_waiter *w)
{
    pthread_mutex_lock(&n->mu);
    if (w->linked) {
        unlink_waiter(n, w);
        w->done = true;
    }
    while (!w->done)
        pthread_cond_wait(&n->done_cv, &n->mu);
    pthread_mutex_unlock(&n->mu);
}

/* ---- announcing ----------------------------------------------------------- */

static bool pend(queen_notifier *n, const char *text)
{
    return engine_buf_append(&n->pending, &n->pending_len, &n->pending_cap, text, strlen(text));
}

/* The keys of the queues results names as queued, each followed by a NUL,
 * in *keys (malloc'd; *len 0 and NULL when none or memory is short: the
 * NOTIFY still wakes them). The same reading as log_notify_announce_v1: an
 * array of results, or an object whose results hold them; an element counts
 * when its status is "queued", its type absent or "push", and it names its
 * queue. Parsed before the mutex is taken: pushers and waiters share it. */
static void local_keys(const char *tenant, const char *results, char **keys, size_t *len)
{
    size_t cap = 0;
    *keys = NULL;
    *len = 0;
    json_t *doc = json_loads(results, JSON_DECODE_ANY, NULL);
    json_t *list = json_is_object(doc) ? json_object_get(doc, "results") : doc;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *status = json_string_value(json_object_get(e, "status"));
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *queue = json_string_value(json_object_get(e, "queueName"));
        char key[NOTIFY_KEY_MAX];
        if (status == NULL || strcmp(status, "queued") != 0 || (type != NULL && strcmp(type, "push") != 0) ||
            queue == NULL || !make_key(key, tenant, queue))
            continue;
        if (!engine_buf_append(keys, len, &cap, key, strlen(key) + 1)) {
            free(*keys);
            *keys = NULL;
            *len = 0;
            break;
        }
    }
    json_decref(doc);
}

bool notifier_announce(queen_notifier *n, const char *tenant, const char *results)
{
    if (n == NULL || tenant == NULL || results == NULL)
        return false;
    char *keys;
    size_t keys_len;
    local_keys(tenant, results, &keys, &keys_len);
    pthread_mutex_lock(&n->mu);
    /* Either list empty: the thread may be asleep toward a deadline. */
    bool wake = n->pending_len == 0 || n->local_len == 0;
    size_t was = n->pending_len;
    bool ok = !n->stopping && was + strlen(results) < ANNOUNCE_MAX_PENDING && pend(n, was == 0 ? "{\"t\":\"" : ",{\"t\":\"") &&
              pend(n, tenant) && pend(n, "\",\"r\":") && pend(n, results) && pend(n, "}");
    if (!ok && n->pending != NULL) {
        n->pending_len = was; /* a half-written element never leaves */
        n->pending[was] = '\0';
    }
    if (ok && keys_len > 0)
        engine_buf_append(&n->local, &n->local_len, &n->local_cap, keys, keys_len);
    pthread_mutex_unlock(&n->mu);
    free(keys);
    if (ok) {
        atomic_fetch_add(&n->announced, 1);
        if (wake)
            poke(n); /* the thread sends it; later ones ride along until then */
    } else {
        atomic_fetch_add(&n->announce_dropped, 1);
    }
    return ok;
}

/* ---- firing ------------------------------------------------------------- */

/* Callbacks run here, outside mu. An owned waiter is marked done under mu
 * afterwards (its owner may be waiting in notifier_finish); any other is
 * freed: its handle was only a token. */
static void fire_list(queen_notifier *n, queen_waiter *list)
{
    while (list) {
        queen_waiter *w = list;
        list = w->next;
        w->next = NULL;
        w->fn(w->ctx, w->woken);
        if (w->owned) {
            pthread_mutex_lock(&n->mu);
            w->done = true;
            pthread_cond_broadcast(&n->done_cv);
            pthread_mutex_unlock(&n->mu);
        } else {
            free(w);
        }
    }
}

/* Moves w from the sets onto the fire list (under mu). */
static void take(queen_notifier *n, queen_waiter *w, bool woken, queen_waiter **list)
{
    unlink_waiter(n, w);
    w->woken = woken;
    w->next = *list;
    *list = w;
}

static void take_key(queen_notifier *n, const char *key, queen_waiter **list)
{
    queen_waiter *w = n->buckets[key_bucket(key)];
    while (w) {
        queen_waiter *next = w->next;
        if (strcmp(w->key, key) == 0)
            take(n, w, true, list);
        w = next;
    }
}

static void take_all(queen_notifier *n, bool woken, queen_waiter **list)
{
    while (n->nheap > 0)
        take(n, n->heap[0], woken, list);
}

static void take_due(queen_notifier *n, long long now, queen_waiter **list)
{
    while (n->nheap > 0 && due(n->heap[0]) <= now) {
        queen_waiter *w = n->heap[0];
        take(n, w, w->deadline > now, list); /* before its deadline: a re-check */
    }
}

/* ---- the connection ----------------------------------------------------- */

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static PGconn *listen_connect(const char *conninfo, bool *prepared, char *err, size_t errlen)
{
    *prepared = false;
    const char *keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                          "keepalives_count", "dbname", "application_name", NULL};
    const char *vals[] = {"5", "1", "30", "10", "3", conninfo, "queen_listen", NULL};
    PGconn *pg = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(pg) != CONNECTION_OK) {
        snprintf(err, errlen, "%s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, ignore_notice, NULL);
    /* The announcing statement's settings (see SQL_ANNOUNCE), then LISTEN. */
    PGresult *res = PQexec(pg, "SET synchronous_commit = off; SET statement_timeout = 10000; LISTEN " NOTIFY_CHANNEL);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, errlen, "LISTEN: %s", PQresultErrorMessage(res));
    PQclear(res);
    if (ok) {
        /* Prepared once: sent unprepared it was planned on every statement.
         * A schema not applied yet (an embedding program that opens the
         * engine first) leaves it unprepared, sent as it is, not an error. */
        res = PQprepare(pg, ANNOUNCE_STATEMENT, SQL_ANNOUNCE, 1, NULL);
        *prepared = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
    }
    if (ok && PQsetnonblocking(pg, 1) != 0) {
        snprintf(err, errlen, "non-blocking mode: %s", PQerrorMessage(pg));
        ok = false;
    }
    if (!ok) {
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

/* ---- the announcing statement (notifier thread only) -------------------- */

typedef struct announcer {
    char *sending; /* "[...]" in flight, NULL when none */
    size_t sending_len;
    bool want_write; /* the statement is not all sent yet: poll for POLLOUT */
    bool prepared;   /* ANNOUNCE_STATEMENT exists on this connection */
    long long last_sent; /* monotonic ms of the last statement (ANNOUNCE_GAP_MS) */
    long long last_error_log;
} announcer;

/* Puts an unanswered batch back in front of what is pending (the connection
 * was lost): it goes again with the next. A notification twice only wakes a
 * waiter that re-checks. */
static void announce_requeue(queen_notifier *n, announcer *a)
{
    if (a->sending == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    char *inner = a->sending + 1; /* without the brackets */
    size_t inner_len = a->sending_len - 2;
    if (n->pending_len + inner_len < ANNOUNCE_MAX_PENDING) {
        if (n->pending_len > 0 && !pend(n, ","))
            inner_len = 0;
        if (inner_len > 0)
            engine_buf_append(&n->pending, &n->pending_len, &n->pending_cap, inner, inner_len);
    }
    pthread_mutex_unlock(&n->mu);
    free(a->sending);
    a->sending = NULL;
    a->want_write = false;
}

/* Sends everything pending as one statement when none is in flight and the
 * gap since the last one has passed (or now: at shutdown). false when the
 * connection failed (the caller drops it). */
static bool announce_send(queen_notifier *n, announcer *a, PGconn *pg, bool now)
{
    if (a->sending != NULL)
        return true;
    long long t = engine_now_ms();
    if (!now && t - a->last_sent < ANNOUNCE_GAP_MS)
        return true; /* the loop wakes for it when the gap is over */
    pthread_mutex_lock(&n->mu);
    if (n->pending_len == 0) {
        pthread_mutex_unlock(&n->mu);
        return true;
    }
    size_t len = n->pending_len + 2;
    char *batch = malloc(len + 1);
    if (batch != NULL) {
        batch[0] = '[';
        memcpy(batch + 1, n->pending, n->pending_len);
        batch[len - 1] = ']';
        batch[len] = '\0';
        n->pending_len = 0;
        n->pending[0] = '\0';
    }
    pthread_mutex_unlock(&n->mu);
    if (batch == NULL)
        return true; /* out of memory: it stays pending for the next turn */
    a->sending = batch;
    a->sending_len = len;
    a->last_sent = t;
    const char *params[] = {batch};
    if (!(a->prepared ? PQsendQueryPrepared(pg, ANNOUNCE_STATEMENT, 1, params, NULL, NULL, 0)
                      : PQsendQueryParams(pg, SQL_ANNOUNCE, 1, NULL, params, NULL, NULL, 0)))
        return false;
    atomic_fetch_add(&n->announce_statements, 1);
    int f = PQflush(pg);
    a->want_write = f == 1;
    return f >= 0;
}

/* Collects the statement's result once it is in (after PQconsumeInput). */
static void announce_collect(announcer *a, PGconn *pg)
{
    while (a->sending != NULL && !PQisBusy(pg)) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL) {
            free(a->sending);
            a->sending = NULL;
            return;
        }
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            long long now = engine_now_ms();
            if (now - a->last_error_log >= LOG_EVERY_MS) {
                char err[512];
                snprintf(err, sizeof err, "%s", PQresultErrorMessage(r));
                engine_one_line(err);
                log_warn("notifier: push notifications not sent (waiters re-check within %d ms): %s",
                         NOTIFY_RECHECK_MS, err);
                a->last_error_log = now;
            }
        }
        PQclear(r);
    }
}

bool notify_split_payload(const char *payload, char tenant[37], const char **queue)
{
    if (payload == NULL || strlen(payload) < 38 || payload[36] != ':')
        return false;
    memcpy(tenant, payload, 36);
    tenant[36] = '\0';
    *queue = payload + 37;
    return true;
}

/* Logs why, drops the connection and puts its unanswered announcements
 * back; the caller reconnects at once and wakes every waiter (pushes may
 * have gone unheard meanwhile). */
static void connection_lost(queen_notifier *n, PGconn **pg, announcer *a, const char *when)
{
    char err[512];
    snprintf(err, sizeof err, "%s", PQerrorMessage(*pg));
    engine_one_line(err);
    log_warn("notifier: LISTEN connection lost%s (%s); reconnecting", when, err);
    PQfinish(*pg);
    *pg = NULL;
    announce_requeue(n, a);
    atomic_store(&n->connected, false);
}

/* At shutdown: what pushes announced last still goes out, the batch in
 * flight answered first, within ANNOUNCE_DRAIN_MS in all (a database that
 * stopped answering must not hold the stop; waiters elsewhere then find the
 * messages at their re-check). */
#define ANNOUNCE_DRAIN_MS 2000
static void announce_drain(queen_notifier *n, announcer *a, PGconn *pg)
{
    long long until = engine_now_ms() + ANNOUNCE_DRAIN_MS;
    for (;;) {
        if (a->sending == NULL && !announce_send(n, a, pg, true))
            return;
        if (a->sending == NULL)
            return; /* nothing was pending */
        long long left = until - engine_now_ms();
        if (left <= 0)
            return;
        struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN | (a->want_write ? POLLOUT : 0)};
        if (poll(&pfd, 1, (int)left) <= 0)
            return;
        if (a->want_write) {
            int f = PQflush(pg);
            a->want_write = f == 1;
            if (f < 0)
                return;
        }
        if ((pfd.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(pg))
            return;
        PGnotify *nt;
        while ((nt = PQnotifies(pg)) != NULL)
            PQfreemem(nt); /* the waiters are fired already */
        announce_collect(a, pg);
    }
}

static void *notifier_main(void *arg)
{
    queen_notifier *n = arg;
    PGconn *pg = NULL;
    long long next_connect = 0, last_log = -LOG_EVERY_MS;
    int backoff = RECONNECT_MIN_MS;
    bool ever_connected = false;
    char **keys = NULL;
    size_t nkeys = 0, capkeys = 0;
    announcer ann = {.last_error_log = -LOG_EVERY_MS};

    for (;;) {
        bool wake_all = false;
        long long now = engine_now_ms();
        if (pg == NULL && now >= next_connect) {
            char err[512];
            pg = listen_connect(n->conninfo, &ann.prepared, err, sizeof err);
            if (pg != NULL) {
                if (ever_connected)
                    atomic_fetch_add(&n->reconnects, 1);
                ever_connected = true;
                atomic_store(&n->connected, true);
                backoff = RECONNECT_MIN_MS;
                /* Pushes committed while nobody listened were not heard. */
                wake_all = true;
            } else {
                if (now - last_log >= LOG_EVERY_MS) {
                    engine_one_line(err);
                    log_warn("notifier: cannot LISTEN (%s); long polls re-check every %d ms meanwhile", err,
                             NOTIFY_RECHECK_MS);
                    last_log = now;
                }
                next_connect = now + backoff;
                backoff = backoff * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : backoff * 2;
            }
        }

        pthread_mutex_lock(&n->mu);
        bool stopping = n->stopping;
        long long next_due = n->nheap > 0 ? due(n->heap[0]) : LLONG_MAX;
        if (n->local_len > 0)
            next_due = now; /* announced since the last turn: fire them now */
        else if (pg != NULL && n->pending_len > 0 && ann.sending == NULL && ann.last_sent + ANNOUNCE_GAP_MS < next_due)
            next_due = ann.last_sent + ANNOUNCE_GAP_MS; /* held for the gap */
        pthread_mutex_unlock(&n->mu);
        if (stopping)
            break;

        int timeout = -1;
        long long wake_at = next_due;
        if (pg == NULL && next_connect < wake_at)
            wake_at = next_connect;
        if (wake_all)
            wake_at = now;
        if (wake_at != LLONG_MAX)
            timeout = wake_at <= now ? 0 : (wake_at - now > INT_MAX ? INT_MAX : (int)(wake_at - now));

        struct pollfd pfd[2] = {{.fd = n->wake_fd[0], .events = POLLIN},
                                {.fd = pg ? PQsocket(pg) : -1, .events = POLLIN | (ann.want_write ? POLLOUT : 0)}};
        int pr = poll(pfd, 2, timeout);
        if (pr < 0 && errno != EINTR) {
            log_error("notifier: poll: %s", strerror(errno));
            usleep(10000);
        }
        if (pr > 0 && (pfd[0].revents & POLLIN)) {
            char buf[256];
            while (read(n->wake_fd[0], buf, sizeof buf) > 0) {
            }
        }
        nkeys = 0;
        if (pg != NULL && pr > 0 && (pfd[1].revents & POLLOUT) && ann.want_write) {
            int f = PQflush(pg);
            ann.want_write = f == 1;
            if (f < 0)
                pfd[1].revents |= POLLERR; /* handled as a lost connection below */
        }
        if (pg != NULL && pr > 0 && (pfd[1].revents & (POLLIN | POLLERR | POLLHUP))) {
            if (!PQconsumeInput(pg) || PQstatus(pg) != CONNECTION_OK || (pfd[1].revents & POLLERR)) {
                connection_lost(n, &pg, &ann, "");
                next_connect = engine_now_ms();
                wake_all = true;
            } else {
                PGnotify *nt;
                while ((nt = PQnotifies(pg)) != NULL) {
                    atomic_fetch_add(&n->notifies, 1);
                    char tenant[37];
                    const char *queue;
                    if (notify_split_payload(nt->extra, tenant, &queue)) {
                        if (nkeys == capkeys) {
                            size_t ncap = capkeys ? capkeys * 2 : 16;
                            char **k = realloc(keys, ncap * sizeof *k);
                            if (k != NULL) {
                                keys = k;
                                capkeys = ncap;
                            }
                        }
                        if (nkeys < capkeys && (keys[nkeys] = strdup(nt->extra)) != NULL)
                            nkeys++;
                        else
                            wake_all = true; /* out of memory: wake everyone rather than lose one */
                    }
                    PQfreemem(nt);
                }
                announce_collect(&ann, pg);
            }
        }
        if (pg != NULL && !announce_send(n, &ann, pg, false)) {
            connection_lost(n, &pg, &ann, " while announcing");
            next_connect = engine_now_ms();
            wake_all = true;
        }

        queen_waiter *fire = NULL;
        pthread_mutex_lock(&n->mu);
        if (wake_all)
            take_all(n, true, &fire);
        /* This broker's waiters of what it announced: their pushes have
         * committed, and this turn comes before the NOTIFY's can. */
        unsigned long local_woken = 0;
        for (size_t off = 0; off < n->local_len; off += strlen(n->local + off) + 1) {
            const char *key = n->local + off;
            queen_waiter *was = fire;
            take_key(n, key, &fire);
            /* The tenant's any-queue waiters too (a tenant has no ':'). */
            char any[NOTIFY_KEY_MAX];
            const char *colon = strchr(key, ':');
            if (colon != NULL && make_any_key(any, key, (size_t)(colon - key)))
                take_key(n, any, &fire);
            for (queen_waiter *w = fire; w != was; w = w->next)
                local_woken++;
        }
        n->local_len = 0;
        for (size_t i = 0; i < nkeys; i++) {
            take_key(n, keys[i], &fire);
            /* keys[i] is "<tenant>:<queue>": its tenant's any-queue waiters too. */
            char any[NOTIFY_KEY_MAX];
            if (make_any_key(any, keys[i], 36))
                take_key(n, any, &fire);
        }
        take_due(n, engine_now_ms(), &fire);
        pthread_mutex_unlock(&n->mu);
        if (local_woken > 0)
            atomic_fetch_add(&n->local_wakes, local_woken);
        for (size_t i = 0; i < nkeys; i++)
            free(keys[i]);
        fire_list(n, fire);
    }

    /* Shutting down: everyone still waiting hears "not woken". */
    queen_waiter *fire = NULL;
    pthread_mutex_lock(&n->mu);
    take_all(n, false, &fire);
    pthread_mutex_unlock(&n->mu);
    fire_list(n, fire);
    free(keys);
    if (pg != NULL) {
        announce_drain(n, &ann, pg);
        PQfinish(pg);
    }
    free(ann.sending);
    atomic_store(&n->connected, false);
    return NULL;
}

queen_notifier *notifier_start(const char *conninfo, char *err, size_t errlen)
{
    queen_notifier *n = calloc(1, sizeof *n);
    if (n == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    n->wake_fd[0] = n->wake_fd[1] = -1;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->done_cv, NULL);
    n->conninfo = strdup(conninfo ? conninfo : "");
    if (n->conninfo == NULL || pipe2(n->wake_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(err, errlen, "notifier: %s", n->conninfo ? strerror(errno) : "out of memory");
        notifier_free(n);
        return NULL;
    }
    int rc = pthread_create(&n->thread, NULL, notifier_main, n);
    if (rc != 0) {
        snprintf(err, errlen, "notifier: pthread_create: %s", strerror(rc));
        notifier_free(n);
        return NULL;
    }
    n->started = true;
    return n;
}

void notifier_shutdown(queen_notifier *n)
{
    if (n == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    n->stopping = true;
    bool join = n->started && !n->joined;
    n->joined = true;
    pthread_mutex_unlock(&n->mu);
    if (join) {
        poke(n);
        pthread_join(n->thread, NULL);
    }
}

void notifier_free(queen_notifier *n)
{
    if (n == NULL)
        return;
    notifier_shutdown(n);
    if (n->wake_fd[0] >= 0)
        close(n->wake_fd[0]);
    if (n->wake_fd[1] >= 0)
        close(n->wake_fd[1]);
    free(n->heap);
    free(n->pending);
    free(n->local);
    free(n->conninfo);
    pthread_cond_destroy(&n->done_cv);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

size_t notifier_waiting(queen_notifier *n)
{
    pthread_mutex_lock(&n->mu);
    size_t k = n->nheap;
    pthread_mutex_unlock(&n->mu);
    return k;
}

bool notifier_connected(queen_notifier *n)
{
    return atomic_load(&n->connected);
}

unsigned long notifier_reconnects(queen_notifier *n)
{
    return atomic_load(&n->reconnects);
}

unsigned long notifier_notifies(queen_notifier *n)
{
    return atomic_load(&n->notifies);
}

unsigned long notifier_announced(queen_notifier *n)
{
    return atomic_load(&n->announced);
}

unsigned long notifier_announce_statements(queen_notifier *n)
{
    return atomic_load(&n->announce_statements);
}

unsigned long notifier_announce_dropped(queen_notifier *n)
{
    return atomic_load(&n->announce_dropped);
}

unsigned long notifier_local_wakes(queen_notifier *n)
{
    return atomic_load(&n->local_wakes);
}
