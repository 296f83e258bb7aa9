/* notify: the notifier thread, its LISTEN connection, the waiters and the
 * outgoing push notifications (see notify.h). Owns the only connection that
 * is not from the pool. Must never call a waiter's callback while holding its
 * mutex (a callback may register the next waiter, and the HTTP edge resumes a
 * connection from it), never run a statement other than LISTEN, the
 * announcing one and the waiters' check (log_poppable_v1, read-only), one at
 * a time, and never block on anything but poll() (the connection is
 * non-blocking). Lock order: a caller's own lock (the HTTP edge's poll lock)
 * is never held while calling in here with a wait for a callback possible
 * (notifier_wait_again, notifier_wait_close, notifier_finish). */
#include "notify.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
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
/* The waiters' check: keys in, (key_index, ready) out (sql/log_waiting.sql). */
#define SQL_CHECK "SELECT key_index, ready FROM queen.log_poppable_v1($1::jsonb)"
#define CHECK_STATEMENT "queen_check"

/* A pop waiter's state. */
enum { W_WAITING, W_POPPING, W_ENDED };

/* The pop waiters of one (tenant, queue or labels, group, partition): what a
 * push wakes a count of and what the check statement names once. Freed when
 * its last waiter closed and no check in flight names it. */
typedef struct notify_key {
    struct notify_key *next, *prev; /* chain of kbuckets[bucket] */
    unsigned bucket;                /* of key: a push finds every group's key of its queue */
    char key[NOTIFY_KEY_MAX];       /* "<tenant>:<queue>", or the tenant's any-queue key */
    char tenant[QUEEN_TENANT_LEN + 1];
    char *queue, *ns, *task, *group, *partition; /* NULL: none / any / queue mode */
    queen_waiter *head, *tail;      /* open waiters, in order of opening (FIFO) */
    size_t nopen, nwaiting, npopping;
    /* Wakes that found no waiter waiting while some were popping: those may
     * have read before the push committed, so as many of them as this go
     * round again instead of back to sleep. */
    size_t owed;
    bool chase;    /* a woken waiter took messages: check again once none pops */
    bool want;     /* goes into the next check statement */
    bool in_check; /* the check in flight names it */
} notify_key;

struct queen_notifier {
    pthread_mutex_t mu;
    pthread_cond_t done_cv; /* a pop waiter's callback returned */
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
    /* Pop waiters (under mu): their keys by "<tenant>:<queue>", how many
     * wait now, and whether a check is wanted (want set on some key). */
    notify_key *kbuckets[NBUCKETS];
    size_t keyed_waiting;
    bool check_wanted;
    atomic_ulong checks, check_ticks, check_wakes, push_wakes;
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

static bool add_locked(queen_notifier *n, queen_waiter *w, int timeout_ms)
{
    long long now = engine_now_ms();
    w->deadline = now + (timeout_ms > 0 ? timeout_ms : 0);
    w->recheck_at = now + NOTIFY_RECHECK_MS;
    w->bucket = key_bucket(w->key);
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

queen_waiter *notifier_add(queen_notifier *n, const char *tenant, const char *queue, int timeout_ms, queen_wake_fn fn,
                           void *ctx)
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
    if (!add_locked(n, w, timeout_ms)) {
        free(w);
        return NULL;
    }
    return w;
}

/* ---- pop waiters ----------------------------------------------------------- */

static bool same_name(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static void key_free(notify_key *wk)
{
    free(wk->queue);
    free(wk->ns);
    free(wk->task);
    free(wk->group);
    free(wk->partition);
    free(wk);
}

/* Frees wk once no waiter and no check in flight names it (under mu). */
static void key_release(queen_notifier *n, notify_key *wk)
{
    if (wk->nopen > 0 || wk->in_check)
        return;
    if (wk->prev)
        wk->prev->next = wk->next;
    else
        n->kbuckets[wk->bucket] = wk->next;
    if (wk->next)
        wk->next->prev = wk->prev;
    key_free(wk);
}

static bool dup_name(char **out, const char *s)
{
    *out = NULL;
    if (s == NULL)
        return true;
    if (strlen(s) > 255)
        return false;
    *out = strdup(s);
    return *out != NULL;
}

/* A key's check is due at once if a woken waiter took messages and none of
 * its waiters pops any more (under mu). Returns whether one is wanted. */
static bool key_settle(queen_notifier *n, notify_key *wk)
{
    if (wk->npopping > 0)
        return false;
    wk->owed = 0;
    if (!wk->chase)
        return false;
    wk->chase = false;
    if (wk->nwaiting == 0)
        return false;
    wk->want = true;
    n->check_wanted = true;
    return true;
}

queen_waiter *notifier_wait_open(queen_notifier *n, const char *tenant, const char *queue, const char *ns,
                                 const char *task, const char *group, const char *partition, int timeout_ms,
                                 queen_wake_fn fn, void *ctx)
{
    if (n == NULL || fn == NULL || tenant == NULL)
        return NULL;
    queen_waiter *w = calloc(1, sizeof *w);
    notify_key *probe = calloc(1, sizeof *probe);
    if (w == NULL || probe == NULL || !make_key(probe->key, tenant, queue) ||
        snprintf(probe->tenant, sizeof probe->tenant, "%.*s", (int)strcspn(probe->key, ":"), probe->key) < 0 ||
        !dup_name(&probe->queue, queue) || !dup_name(&probe->ns, queue ? NULL : ns) ||
        !dup_name(&probe->task, queue ? NULL : task) || !dup_name(&probe->group, group) ||
        !dup_name(&probe->partition, queue ? partition : NULL)) {
        free(w);
        if (probe)
            key_free(probe);
        return NULL;
    }
    memcpy(w->key, probe->key, sizeof w->key);
    w->fn = fn;
    w->ctx = ctx;
    long long now = engine_now_ms();
    w->deadline = now + (timeout_ms > 0 ? timeout_ms : 0);
    w->recheck_at = LLONG_MAX; /* the tick checks its key instead */
    probe->bucket = key_bucket(probe->key);

    pthread_mutex_lock(&n->mu);
    notify_key *wk = n->kbuckets[probe->bucket];
    while (wk != NULL && !(strcmp(wk->key, probe->key) == 0 && same_name(wk->queue, probe->queue) &&
                           same_name(wk->ns, probe->ns) && same_name(wk->task, probe->task) &&
                           same_name(wk->group, probe->group) && same_name(wk->partition, probe->partition)))
        wk = wk->next;
    if (n->stopping || heap_push(n, w) != 0) {
        pthread_mutex_unlock(&n->mu);
        key_free(probe);
        free(w);
        return NULL;
    }
    if (wk == NULL) {
        wk = probe;
        probe = NULL;
        wk->next = n->kbuckets[wk->bucket];
        if (wk->next)
            wk->next->prev = wk;
        n->kbuckets[wk->bucket] = wk;
    }
    w->wk = wk;
    w->linked = true;
    w->state = W_WAITING;
    w->prev = wk->tail;
    if (wk->tail)
        wk->tail->next = w;
    else
        wk->head = w;
    wk->tail = w;
    wk->nopen++;
    wk->nwaiting++;
    n->keyed_waiting++;
    bool earliest = w->heap_i == 0;
    pthread_mutex_unlock(&n->mu);
    if (probe)
        key_free(probe);
    if (earliest)
        poke(n);
    return w;
}

notify_verdict notifier_wait_again(queen_notifier *n, queen_waiter *w)
{
    pthread_mutex_lock(&n->mu);
    while (w->firing) /* its callback may still be running: let it finish */
        pthread_cond_wait(&n->done_cv, &n->mu);
    notify_key *wk = w->wk;
    notify_verdict v = NOTIFY_SLEEP;
    bool poke_it = false;
    if (w->state == W_ENDED || n->stopping) {
        v = NOTIFY_DONE;
    } else if (w->state == W_POPPING) {
        if (wk->owed > 0) {
            wk->owed--;
            v = NOTIFY_RETRY; /* still popping */
        } else {
            wk->npopping--;
            if (engine_now_ms() >= w->deadline) {
                w->state = W_ENDED;
                v = NOTIFY_DONE;
            } else if (heap_push(n, w) != 0) {
                w->state = W_ENDED; /* out of memory: answer now rather than never */
                v = NOTIFY_DONE;
            } else {
                w->state = W_WAITING;
                w->linked = true;
                wk->nwaiting++;
                n->keyed_waiting++;
                poke_it = w->heap_i == 0;
            }
            poke_it = key_settle(n, wk) || poke_it;
        }
    }
    pthread_mutex_unlock(&n->mu);
    if (poke_it)
        poke(n);
    return v;
}

void notifier_wait_close(queen_notifier *n, queen_waiter *w, bool popped)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    while (w->firing)
        pthread_cond_wait(&n->done_cv, &n->mu);
    notify_key *wk = w->wk;
    if (w->state == W_WAITING) {
        heap_remove(n, w);
        wk->nwaiting--;
        n->keyed_waiting--;
    } else if (w->state == W_POPPING) {
        wk->npopping--;
    }
    if (w->prev)
        w->prev->next = w->next;
    else
        wk->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        wk->tail = w->prev;
    wk->nopen--;
    if (popped)
        wk->chase = true; /* what it took may not have been all */
    bool poke_it = key_settle(n, wk);
    key_release(n, wk);
    pthread_mutex_unlock(&n->mu);
    free(w);
    if (poke_it)
        poke(n);
}

/* ---- announcing ----------------------------------------------------------- */

static bool pend(queen_notifier *n, const char *text)
{
    return engine_buf_append(&n->pending, &n->pending_len, &n->pending_cap, text, strlen(text));
}

/* The keys of the queues results names as queued, each followed by a NUL
 * and then by how many messages it queued there in decimal and a NUL, in
 * *keys (malloc'd; *len 0 and NULL when none or memory is short: the
 * tick's check still finds them). The same reading as log_notify_announce_v1: an
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
    json_t *counts = json_object(); /* key -> messages */
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
        /* "n": the messages it stands for (engine.c folds a push's per queue) */
        json_int_t m = json_is_integer(json_object_get(e, "n")) ? json_integer_value(json_object_get(e, "n")) : 1;
        json_object_set_new(counts, key,
                            json_integer(json_integer_value(json_object_get(counts, key)) + (m > 0 ? m : 1)));
    }
    const char *key;
    json_t *c;
    json_object_foreach(counts, key, c) {
        char num[24];
        int nlen = snprintf(num, sizeof num, "%lld", (long long)json_integer_value(c));
        if (!engine_buf_append(keys, len, &cap, key, strlen(key) + 1) ||
            !engine_buf_append(keys, len, &cap, num, (size_t)nlen + 1)) {
            free(*keys);
            *keys = NULL;
            *len = 0;
            break;
        }
    }
    json_decref(counts);
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

/* Callbacks run here, outside mu. A pop waiter is marked no longer firing
 * under mu afterwards (its owner may be waiting for that); a plain one is
 * freed: its handle was only a token. */
static void fire_list(queen_notifier *n, queen_waiter *list)
{
    while (list) {
        queen_waiter *w = list;
        list = w->fire_next;
        w->fire_next = NULL;
        w->fn(w->ctx, w->woken);
        if (w->wk != NULL) {
            pthread_mutex_lock(&n->mu);
            w->firing = false;
            pthread_cond_broadcast(&n->done_cv);
            pthread_mutex_unlock(&n->mu);
        } else {
            free(w);
        }
    }
}

/* Moves w from the sets onto the fire list (under mu). A pop waiter leaves
 * only the heap: it keeps its place in its key's list, popping (woken) or
 * ended (its time is up). */
static void take(queen_notifier *n, queen_waiter *w, bool woken, queen_waiter **list)
{
    if (w->wk != NULL) {
        heap_remove(n, w);
        w->linked = false;
        w->wk->nwaiting--;
        n->keyed_waiting--;
        w->state = woken ? W_POPPING : W_ENDED;
        if (woken)
            w->wk->npopping++;
        w->firing = true;
    } else {
        unlink_waiter(n, w);
    }
    w->woken = woken;
    w->fire_next = *list;
    *list = w;
}

/* Wakes the first count waiting waiters of wk, in order of opening (under
 * mu); returns how many. Those popping before it may have missed what woke
 * it: up to the shortfall of them is owed a further attempt. */
static size_t wake_key(queen_notifier *n, notify_key *wk, size_t count, queen_waiter **list)
{
    size_t popping = wk->npopping, woke = 0;
    for (queen_waiter *w = wk->head; w != NULL && woke < count && wk->nwaiting > 0; w = w->next) {
        if (w->state == W_WAITING) {
            take(n, w, true, list);
            woke++;
        }
    }
    if (woke < count && popping > 0) {
        size_t owe = count - woke < popping ? count - woke : popping;
        wk->owed = wk->owed + owe > popping ? popping : wk->owed + owe;
    }
    return woke;
}

/* The pop waiters' keys named key (under mu): count each. */
static size_t wake_keyed(queen_notifier *n, const char *key, size_t count, queen_waiter **list)
{
    size_t woke = 0;
    for (notify_key *wk = n->kbuckets[key_bucket(key)]; wk != NULL; wk = wk->next)
        if (strcmp(wk->key, key) == 0)
            woke += wake_key(n, wk, count, list);
    return woke;
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

/* Every waiter: at shutdown (woken false) all of them; woken, only the
 * plain ones (the caller checks the pop waiters' keys instead). */
static void take_all(queen_notifier *n, bool woken, queen_waiter **list)
{
    if (!woken) {
        while (n->nheap > 0)
            take(n, n->heap[0], false, list);
        return;
    }
    for (size_t b = 0; b < NBUCKETS; b++) /* the plain waiters are the buckets' */
        while (n->buckets[b] != NULL)
            take(n, n->buckets[b], true, list);
}

/* Marks every key with a waiting waiter for the next check (under mu). */
static bool want_all_keys(queen_notifier *n)
{
    bool any = false;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (notify_key *wk = n->kbuckets[b]; wk != NULL; wk = wk->next)
            if (wk->nwaiting > 0) {
                wk->want = true;
                any = true;
            }
    n->check_wanted = n->check_wanted || any;
    return any;
}

/* No connection to check with: every waiting pop waiter pops (under mu). */
static void wake_all_keyed(queen_notifier *n, queen_waiter **list)
{
    for (size_t b = 0; b < NBUCKETS; b++)
        for (notify_key *wk = n->kbuckets[b]; wk != NULL; wk = wk->next)
            if (wk->nwaiting > 0)
                wake_key(n, wk, SIZE_MAX, list);
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

static PGconn *listen_connect(const char *conninfo, bool *prepared, bool *check_prepared, char *err, size_t errlen)
{
    *prepared = *check_prepared = false;
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
        res = PQprepare(pg, CHECK_STATEMENT, SQL_CHECK, 1, NULL);
        *check_prepared = PQresultStatus(res) == PGRES_COMMAND_OK;
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
    bool check_prepared; /* CHECK_STATEMENT does */
    notify_key **checking; /* the keys of the check in flight (NULL: none), by key_index */
    size_t nchecking;
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
    if (a->sending != NULL || a->checking != NULL)
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

/* Ends the check in flight (under mu): its keys are free to go. again:
 * check them again (the answer was lost). */
static void check_end(queen_notifier *n, announcer *a, bool again)
{
    for (size_t i = 0; i < a->nchecking; i++) {
        notify_key *wk = a->checking[i];
        wk->in_check = false;
        if (again && wk->nwaiting > 0) {
            wk->want = true;
            n->check_wanted = true;
        }
        key_release(n, wk);
    }
    free(a->checking);
    a->checking = NULL;
    a->nchecking = 0;
}

/* Sends the keys wanted as one check when the connection is free. false
 * when the connection failed (the caller drops it). */
static bool check_send(queen_notifier *n, announcer *a, PGconn *pg)
{
    if (a->sending != NULL || a->checking != NULL)
        return true;
    pthread_mutex_lock(&n->mu);
    if (!n->check_wanted) {
        pthread_mutex_unlock(&n->mu);
        return true;
    }
    n->check_wanted = false;
    size_t cap = 0, k = 0;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (notify_key *wk = n->kbuckets[b]; wk != NULL; wk = wk->next)
            cap += wk->want;
    notify_key **list = cap ? malloc(cap * sizeof *list) : NULL;
    json_t *keys = json_array();
    for (size_t b = 0; list != NULL && keys != NULL && b < NBUCKETS; b++) {
        for (notify_key *wk = n->kbuckets[b]; wk != NULL; wk = wk->next) {
            if (!wk->want)
                continue;
            wk->want = false;
            if (wk->nwaiting == 0)
                continue;
            json_t *o = json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?}", "t", wk->tenant, "q", wk->queue, "ns",
                                  wk->ns, "task", wk->task, "g", wk->group, "p", wk->partition);
            if (o == NULL || json_array_append_new(keys, o) != 0)
                continue; /* out of memory: the next tick asks again */
            wk->in_check = true;
            list[k++] = wk;
        }
    }
    a->checking = list;
    a->nchecking = k;
    pthread_mutex_unlock(&n->mu);
    char *text = k > 0 ? json_dumps(keys, JSON_COMPACT) : NULL;
    json_decref(keys);
    if (text == NULL) {
        pthread_mutex_lock(&n->mu);
        check_end(n, a, false);
        pthread_mutex_unlock(&n->mu);
        return true;
    }
    const char *params[] = {text};
    bool sent = a->check_prepared ? PQsendQueryPrepared(pg, CHECK_STATEMENT, 1, params, NULL, NULL, 0)
                                  : PQsendQueryParams(pg, SQL_CHECK, 1, NULL, params, NULL, NULL, 0);
    free(text);
    if (!sent)
        return false;
    atomic_fetch_add(&n->checks, 1);
    int f = PQflush(pg);
    a->want_write = f == 1;
    return f >= 0;
}

/* What a check found ready for wk (under mu). ready counts every claimable
 * partition of the key, those its popping waiters are going for included
 * (a push's woken waiters pop while the tick's check runs): only the excess
 * over them is woken, or one push of K messages would wake 2K. Those
 * popping may have read before what the check saw appeared: as many of
 * them as it saw are owed one more attempt instead of sleep. */
static size_t check_wake_key(queen_notifier *n, notify_key *wk, size_t ready, queen_waiter **list)
{
    size_t busy = wk->npopping;
    if (busy > 0) {
        size_t owe = ready < busy ? ready : busy;
        if (wk->owed < owe)
            wk->owed = owe;
    }
    return ready > busy ? wake_key(n, wk, ready - busy, list) : 0;
}

/* The check's answer: wakes as many waiters of each key returned as it has
 * claimable partitions nobody pops for yet. A failed check (a schema
 * without sql/log_waiting.sql, a timeout) wakes every waiter of its keys: they pop, as
 * they did before the check existed. */
static void check_answer(queen_notifier *n, announcer *a, PGresult *r)
{
    queen_waiter *fire = NULL;
    size_t woke = 0;
    pthread_mutex_lock(&n->mu);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        for (int i = 0; i < PQntuples(r); i++) {
            long idx = strtol(PQgetvalue(r, i, 0), NULL, 10), ready = strtol(PQgetvalue(r, i, 1), NULL, 10);
            if (idx >= 0 && (size_t)idx < a->nchecking && ready > 0)
                woke += check_wake_key(n, a->checking[idx], (size_t)ready, &fire);
        }
    } else {
        for (size_t i = 0; i < a->nchecking; i++)
            woke += wake_key(n, a->checking[i], SIZE_MAX, &fire);
    }
    pthread_mutex_unlock(&n->mu);
    atomic_fetch_add(&n->check_wakes, woke);
    fire_list(n, fire);
}

/* Collects the statement's result once it is in (after PQconsumeInput). */
static void announce_collect(queen_notifier *n, announcer *a, PGconn *pg)
{
    while ((a->sending != NULL || a->checking != NULL) && !PQisBusy(pg)) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL) {
            if (a->sending != NULL) {
                free(a->sending);
                a->sending = NULL;
            } else {
                pthread_mutex_lock(&n->mu);
                check_end(n, a, false);
                pthread_mutex_unlock(&n->mu);
            }
            return;
        }
        if (a->checking != NULL)
            check_answer(n, a, r);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            long long now = engine_now_ms();
            if (now - a->last_error_log >= LOG_EVERY_MS) {
                char err[512];
                snprintf(err, sizeof err, "%s", PQresultErrorMessage(r));
                engine_one_line(err);
                log_warn("notifier: %s failed (waiters re-check within %d ms): %s",
                         a->checking ? "the waiters' check" : "push notifications", NOTIFY_RECHECK_MS, err);
                a->last_error_log = now;
            }
        }
        PQclear(r);
    }
}

size_t notify_cut_count(char *payload)
{
    char *sep = payload ? strrchr(payload, NOTIFY_COUNT_SEP) : NULL;
    if (sep == NULL)
        return SIZE_MAX;
    *sep = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(sep + 1, &end, 10);
    if (end == sep + 1 || *end != '\0' || errno != 0 || v == 0 || v > SIZE_MAX)
        return SIZE_MAX;
    return (size_t)v;
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
    pthread_mutex_lock(&n->mu);
    check_end(n, a, true);
    pthread_mutex_unlock(&n->mu);
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
        announce_collect(n, a, pg);
    }
}

/* Wakes the waiters of one "<tenant>:<queue>" that count messages were
 * queued to (SIZE_MAX: unknown, all), and its tenant's any-queue waiters
 * (under mu). Returns the pop waiters woken. */
static size_t wake_queue(queen_notifier *n, const char *key, size_t count, queen_waiter **list)
{
    take_key(n, key, list);
    size_t woke = wake_keyed(n, key, count, list);
    char any[NOTIFY_KEY_MAX];
    const char *colon = strchr(key, ':'); /* a tenant has no ':' */
    if (colon != NULL && make_any_key(any, key, (size_t)(colon - key))) {
        take_key(n, any, list);
        woke += wake_keyed(n, any, count, list);
    }
    return woke;
}

static size_t list_length(const queen_waiter *w, const queen_waiter *until)
{
    size_t k = 0;
    for (; w != until; w = w->fire_next)
        k++;
    return k;
}

static void *notifier_main(void *arg)
{
    queen_notifier *n = arg;
    PGconn *pg = NULL;
    long long next_connect = 0, last_log = -LOG_EVERY_MS;
    long long next_tick = engine_now_ms() + NOTIFY_RECHECK_MS;
    int backoff = RECONNECT_MIN_MS;
    bool ever_connected = false;
    char **keys = NULL; /* payloads of this turn's NOTIFYs, count cut off */
    size_t *counts = NULL;
    size_t nkeys = 0, capkeys = 0;
    announcer ann = {.last_error_log = -LOG_EVERY_MS};

    for (;;) {
        bool wake_all = false;
        long long now = engine_now_ms();
        if (pg == NULL && now >= next_connect) {
            char err[512];
            pg = listen_connect(n->conninfo, &ann.prepared, &ann.check_prepared, err, sizeof err);
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
        if (n->keyed_waiting > 0 && next_tick < next_due)
            next_due = next_tick; /* the pop waiters' check */
        if (n->local_len > 0 || (pg != NULL && n->check_wanted && ann.sending == NULL && ann.checking == NULL))
            next_due = now; /* announced since the last turn, or a check to send: now */
        else if (pg != NULL && n->pending_len > 0 && ann.sending == NULL && ann.checking == NULL &&
                 ann.last_sent + ANNOUNCE_GAP_MS < next_due)
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
                int self = PQbackendPID(pg);
                PGnotify *nt;
                while ((nt = PQnotifies(pg)) != NULL) {
                    atomic_fetch_add(&n->notifies, 1);
                    char tenant[37];
                    const char *queue;
                    /* Our own announcing statement's: its waiters here were
                     * woken from the announcement already. */
                    if (nt->be_pid != self && notify_split_payload(nt->extra, tenant, &queue)) {
                        if (nkeys == capkeys) {
                            size_t ncap = capkeys ? capkeys * 2 : 16;
                            char **k = realloc(keys, ncap * sizeof *k);
                            if (k != NULL)
                                keys = k;
                            size_t *c = k ? realloc(counts, ncap * sizeof *c) : NULL;
                            if (c != NULL) {
                                counts = c;
                                capkeys = ncap;
                            }
                        }
                        if (nkeys < capkeys && (keys[nkeys] = strdup(nt->extra)) != NULL) {
                            counts[nkeys] = notify_cut_count(keys[nkeys]);
                            nkeys++;
                        } else {
                            wake_all = true; /* out of memory: wake everyone rather than lose one */
                        }
                    }
                    PQfreemem(nt);
                }
                announce_collect(n, &ann, pg);
            }
        }
        if (pg != NULL && !announce_send(n, &ann, pg, false)) {
            connection_lost(n, &pg, &ann, " while announcing");
            next_connect = engine_now_ms();
            wake_all = true;
        }

        queen_waiter *fire = NULL;
        size_t push_woken = 0;
        pthread_mutex_lock(&n->mu);
        if (wake_all) {
            take_all(n, true, &fire);
            want_all_keys(n); /* their keys are checked, not every waiter popped */
        }
        now = engine_now_ms();
        if (now >= next_tick) {
            next_tick = now + NOTIFY_RECHECK_MS;
            if (pg == NULL)
                wake_all_keyed(n, &fire); /* nothing to check with: all pop, as before */
            else if (want_all_keys(n))
                atomic_fetch_add(&n->check_ticks, 1);
        }
        /* This broker's waiters of what it announced: their pushes have
         * committed, and this turn comes before the NOTIFY's can. */
        unsigned long local_woken = 0;
        for (size_t off = 0; off < n->local_len;) {
            const char *key = n->local + off;
            off += strlen(key) + 1;
            size_t count = (size_t)strtoull(n->local + off, NULL, 10);
            off += strlen(n->local + off) + 1;
            queen_waiter *was = fire;
            push_woken += wake_queue(n, key, count > 0 ? count : SIZE_MAX, &fire);
            local_woken += list_length(fire, was);
        }
        n->local_len = 0;
        for (size_t i = 0; i < nkeys; i++)
            push_woken += wake_queue(n, keys[i], counts[i], &fire);
        take_due(n, now, &fire);
        pthread_mutex_unlock(&n->mu);
        if (local_woken > 0)
            atomic_fetch_add(&n->local_wakes, local_woken);
        if (push_woken > 0)
            atomic_fetch_add(&n->push_wakes, push_woken);
        for (size_t i = 0; i < nkeys; i++)
            free(keys[i]);
        fire_list(n, fire);
        if (pg != NULL && !check_send(n, &ann, pg)) {
            connection_lost(n, &pg, &ann, " while checking waiters");
            next_connect = engine_now_ms();
        }
    }

    /* Shutting down: everyone still waiting hears "not woken". */
    queen_waiter *fire = NULL;
    pthread_mutex_lock(&n->mu);
    take_all(n, false, &fire);
    pthread_mutex_unlock(&n->mu);
    fire_list(n, fire);
    free(keys);
    free(counts);
    if (pg != NULL) {
        announce_drain(n, &ann, pg);
        PQfinish(pg);
    }
    free(ann.sending);
    pthread_mutex_lock(&n->mu);
    check_end(n, &ann, false);
    pthread_mutex_unlock(&n->mu);
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
    /* Pop waiters nobody closed (an embedder that closed the engine with
     * waits open): theirs is the memory, not ours to touch again. */
    for (size_t b = 0; b < NBUCKETS; b++) {
        while (n->kbuckets[b] != NULL) {
            notify_key *wk = n->kbuckets[b];
            n->kbuckets[b] = wk->next;
            for (queen_waiter *w = wk->head, *next; w != NULL; w = next) {
                next = w->next;
                free(w);
            }
            key_free(wk);
        }
    }
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

unsigned long notifier_checks(queen_notifier *n)
{
    return atomic_load(&n->checks);
}

unsigned long notifier_check_ticks(queen_notifier *n)
{
    return atomic_load(&n->check_ticks);
}

unsigned long notifier_check_wakes(queen_notifier *n)
{
    return atomic_load(&n->check_wakes);
}

unsigned long notifier_push_wakes(queen_notifier *n)
{
    return atomic_load(&n->push_wakes);
}
