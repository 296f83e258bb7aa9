/* pool: libpq connection pool (see pool.h). Knows nothing of the schema. */
#include "pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logging.h"
#include "util.h"

struct queen_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    char *conninfo;
    int statement_timeout_ms; /* as sent: already below the deadline */
    int acquire_timeout_ms;
    int deadline_ms;          /* 0: none */
    char *settings;
    int size;
    queen_pool_conn *conns;
    bool *busy;
    int in_use, waiting;
    unsigned long acquired_total, timeouts_total, reconnects_total;
};

/* statement_timeout travels in the startup packet so it holds from the first
 * statement, and a timed-out statement is cancelled by the server itself.
 * connect_timeout and TCP keepalives come BEFORE dbname so a value in the
 * user's conninfo wins (libpq keeps the last value of a repeated keyword);
 * without them a black-holed server would hang acquire in connect() for the
 * kernel's minutes, past the bounded wait the pool promises. */
void queen_conn_params_fill(queen_conn_params *p, const char *conninfo, int statement_timeout_ms,
                            int acquire_timeout_ms, const char *settings)
{
    snprintf(p->options, sizeof p->options, "-c statement_timeout=%d%s%s", statement_timeout_ms,
             settings && settings[0] ? " " : "", settings ? settings : "");
    int ct = (acquire_timeout_ms + 999) / 1000;
    snprintf(p->connect_timeout, sizeof p->connect_timeout, "%d", ct < 2 ? 2 : ct);
    const char *keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                          "keepalives_count", "dbname", "options", "application_name", NULL};
    const char *vals[] = {p->connect_timeout, "1", "30", "10", "3", conninfo ? conninfo : "", p->options, "queen",
                          NULL};
    memcpy(p->keys, keys, sizeof keys);
    memcpy(p->vals, vals, sizeof vals);
}

static atomic_int cancels_running;

static void *cancel_main(void *arg)
{
    PGcancel *cancel = arg;
    char err[256];
    (void)PQcancel(cancel, err, sizeof err); /* best effort: the caller already answered "unknown" */
    PQfreeCancel(cancel);
    atomic_fetch_sub(&cancels_running, 1);
    return NULL;
}

void queen_conn_cancel_detached(PGconn *pg)
{
    if (pg == NULL || PQstatus(pg) != CONNECTION_OK)
        return;
    if (atomic_fetch_add(&cancels_running, 1) >= QUEEN_CANCEL_THREADS) {
        atomic_fetch_sub(&cancels_running, 1);
        return;
    }
    PGcancel *cancel = PQgetCancel(pg);
    pthread_attr_t attr;
    pthread_t t;
    bool started = false;
    if (cancel != NULL && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &attr, cancel_main, cancel) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        PQfreeCancel(cancel);
        atomic_fetch_sub(&cancels_running, 1);
    }
}

void queen_conn_ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static PGconn *connect_one(const queen_pool *pool, char *err, size_t errlen)
{
    queen_conn_params p;
    queen_conn_params_fill(&p, pool->conninfo, pool->statement_timeout_ms, pool->acquire_timeout_ms, pool->settings);
    PGconn *pg = PQconnectdbParams(p.keys, p.vals, 1);
    if (PQstatus(pg) != CONNECTION_OK) {
        snprintf(err, errlen, "connect: %s", PQerrorMessage(pg));
        /* libpq messages span lines; keep log lines and details single. */
        engine_one_line(err);
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, queen_conn_ignore_notice, NULL);
    /* Non-blocking: a send to a server that stopped reading (its socket
     * buffer full) returns instead of blocking past the deadline. */
    if (PQsetnonblocking(pg, 1) != 0) {
        snprintf(err, errlen, "connect: cannot make the connection non-blocking");
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

static void forget_prepared(queen_pool_conn *c)
{
    c->nprepared = 0;
}

int queen_deadline_statement_timeout(int statement_timeout_ms, int deadline_ms)
{
    int below = deadline_ms - deadline_ms / 5;
    return below > 0 && below < statement_timeout_ms ? below : statement_timeout_ms;
}

queen_pool *queen_pool_open(const char *conninfo, int size, int statement_timeout_ms, int acquire_timeout_ms,
                            int deadline_ms, const char *settings, char *err, size_t errlen)
{
    queen_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&pool->mu, NULL);
    /* Acquire deadlines run on the monotonic clock: a wall-clock step (NTP,
     * an operator) must not turn waits into instant 503s or hour-long hangs. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->freed, &attr);
    pthread_condattr_destroy(&attr);
    pool->conninfo = strdup(conninfo ? conninfo : "");
    pool->settings = strdup(settings ? settings : "");
    pool->size = size;
    pool->statement_timeout_ms = deadline_ms > 0 ? queen_deadline_statement_timeout(statement_timeout_ms, deadline_ms)
                                                 : statement_timeout_ms;
    pool->acquire_timeout_ms = acquire_timeout_ms;
    pool->deadline_ms = deadline_ms > 0 ? deadline_ms : 0;
    pool->conns = calloc((size_t)size, sizeof *pool->conns);
    pool->busy = calloc((size_t)size, sizeof *pool->busy);
    if (pool->conninfo == NULL || pool->settings == NULL || pool->conns == NULL || pool->busy == NULL) {
        snprintf(err, errlen, "out of memory");
        queen_pool_close(pool);
        return NULL;
    }
    for (int i = 0; i < size; i++) {
        pool->conns[i].index = i;
        pool->conns[i].pool = pool;
        pool->conns[i].pg = connect_one(pool, err, errlen);
        if (pool->conns[i].pg == NULL) {
            if (i == 0) {
                queen_pool_close(pool);
                return NULL;
            }
            log_warn("pool: connection %d: %s (retried on use)", i, err);
        }
    }
    return pool;
}

void queen_pool_close(queen_pool *pool)
{
    if (pool == NULL)
        return;
    for (int i = 0; pool->conns && i < pool->size; i++) {
        if (pool->conns[i].pg)
            PQfinish(pool->conns[i].pg);
        free(pool->conns[i].prepared);
    }
    free(pool->conns);
    free(pool->busy);
    free(pool->conninfo);
    free(pool->settings);
    pthread_cond_destroy(&pool->freed);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* An idle pooled connection has nothing to read: the server speaks only when
 * asked (pool connections never LISTEN). Readable means the server said
 * goodbye (pg_terminate_backend, a restart, a crash of another backend: a
 * FATAL message then EOF). libpq would only notice at the next statement,
 * which would then fail, so such a connection is replaced now. One poll()
 * with a zero timeout, no round trip. (Reading the message is not enough:
 * libpq hands an unsolicited FATAL to the notice processor and keeps
 * CONNECTION_OK until it reads the EOF behind it.) */
static bool idle_conn_dead(PGconn *pg)
{
    int fd = PQsocket(pg);
    if (fd < 0)
        return true;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) != 0; /* readable, hung up, or poll itself failed */
}

static int ensure_connected(queen_pool *pool, queen_pool_conn *c, char *err, size_t errlen)
{
    if (c->pg != NULL && !c->broken && PQstatus(c->pg) == CONNECTION_OK && !idle_conn_dead(c->pg))
        return 0;
    if (c->pg != NULL)
        PQfinish(c->pg);
    forget_prepared(c);
    c->broken = false;
    c->pg = connect_one(pool, err, errlen);
    pthread_mutex_lock(&pool->mu);
    pool->reconnects_total++;
    pthread_mutex_unlock(&pool->mu);
    return c->pg ? 0 : -1;
}

queen_pool_conn *queen_pool_acquire(queen_pool *pool, char *err, size_t errlen)
{
    struct timespec deadline; /* on the clock the condvar was made with */
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += pool->acquire_timeout_ms / 1000;
    deadline.tv_nsec += (long)(pool->acquire_timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }

    pthread_mutex_lock(&pool->mu);
    int slot = -1;
    for (;;) {
        for (int i = 0; i < pool->size; i++) {
            if (!pool->busy[i]) {
                slot = i;
                break;
            }
        }
        if (slot >= 0)
            break;
        pool->waiting++;
        int rc = pthread_cond_timedwait(&pool->freed, &pool->mu, &deadline);
        pool->waiting--;
        if (rc == ETIMEDOUT) {
            pool->timeouts_total++;
            pthread_mutex_unlock(&pool->mu);
            snprintf(err, errlen, "pool exhausted: no connection free within %d ms", pool->acquire_timeout_ms);
            return NULL;
        }
    }
    pool->busy[slot] = true;
    pool->in_use++;
    pool->acquired_total++;
    pthread_mutex_unlock(&pool->mu);

    queen_pool_conn *c = &pool->conns[slot];
    if (ensure_connected(pool, c, err, errlen) != 0) {
        queen_pool_release(pool, c);
        return NULL;
    }
    return c;
}

void queen_pool_release(queen_pool *pool, queen_pool_conn *conn)
{
    /* A connection left inside a transaction (an error path that did not
     * finish it) must not leak that transaction into the next user. */
    if (conn->pg != NULL && !conn->broken && PQtransactionStatus(conn->pg) != PQTRANS_IDLE)
        conn->broken = true;
    pthread_mutex_lock(&pool->mu);
    pool->busy[conn->index] = false;
    pool->in_use--;
    pthread_cond_signal(&pool->freed);
    pthread_mutex_unlock(&pool->mu);
}

static bool is_prepared(const queen_pool_conn *c, const char *name)
{
    for (size_t i = 0; i < c->nprepared; i++)
        if (c->prepared[i] == name || strcmp(c->prepared[i], name) == 0)
            return true;
    return false;
}

static void note_broken(queen_pool_conn *c)
{
    if (PQstatus(c->pg) != CONNECTION_OK)
        c->broken = true;
}

/* Waits until the socket is ready for `events` or the deadline (ms on
 * engine_now_ms' clock, 0: none) passes: 1 ready, 0 deadline, -1 error. */
static int wait_socket(PGconn *pg, short events, long long deadline)
{
    int fd = PQsocket(pg);
    if (fd < 0)
        return -1;
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            long long left = deadline - engine_now_ms();
            if (left <= 0)
                return 0;
            ms = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int r = poll(&pfd, 1, ms);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* The answer to what was just sent (PQsend*): its last result, as PQexec
 * would give it, or NULL when the deadline passed first (timed_out set, the
 * statement cancelled) or the socket failed. */
static PGresult *await_result(queen_pool_conn *c, long long deadline)
{
    PGconn *pg = c->pg;
    /* A tenth of the deadline before it, the server is asked to cancel: a
     * server that runs answers at once (57014: rolled back, a known
     * outcome), and the connection stays. */
    long long cancel_at = deadline > 0 ? deadline - c->pool->deadline_ms / 10 : 0;
    bool cancelled = false;
    int flushed;
    while ((flushed = PQflush(pg)) == 1) {
        int w = wait_socket(pg, POLLOUT | POLLIN, cancelled ? deadline : cancel_at);
        if (w == 0 && !cancelled) {
            cancelled = true;
            queen_conn_cancel_detached(pg);
            continue;
        }
        if (w == 0)
            goto late;
        if (w < 0 || PQconsumeInput(pg) != 1)
            break;
    }
    PGresult *last = NULL;
    for (;;) {
        while (PQisBusy(pg)) {
            int w = wait_socket(pg, POLLIN, cancelled ? deadline : cancel_at);
            if (w == 0 && !cancelled) {
                cancelled = true;
                queen_conn_cancel_detached(pg);
                continue;
            }
            if (w == 0) {
                PQclear(last);
                goto late;
            }
            if (w < 0) {
                /* No socket to wait on: PQgetResult would block. */
                PQclear(last);
                return NULL;
            }
            if (PQconsumeInput(pg) != 1)
                break; /* the connection is bad: PQgetResult reports it without waiting */
        }
        PGresult *r = PQgetResult(pg);
        if (r == NULL)
            return last;
        PQclear(last);
        last = r;
        if (PQstatus(pg) == CONNECTION_BAD)
            return last;
    }
late:
    c->timed_out = true;
    c->broken = true;
    if (!cancelled)
        queen_conn_cancel_detached(pg);
    return NULL;
}

/* A result for a call that got none: the caller always gets one. */
static PGresult *no_answer(queen_pool_conn *c)
{
    PGresult *r = PQmakeEmptyPGresult(c->pg, PGRES_FATAL_ERROR);
    note_broken(c);
    return r;
}

PGresult *queen_pool_exec(queen_pool_conn *c, const char *name, const char *sql, int nparams,
                          const char *const *params)
{
    c->sent = c->timed_out = false;
    const queen_pool *pool = c->pool;
    long long deadline = pool->deadline_ms > 0 ? engine_now_ms() + pool->deadline_ms : 0;
    if (!is_prepared(c, name)) {
        /* A prepare changes nothing: a call that fails here was never sent. */
        PGresult *prep = PQsendPrepare(c->pg, name, sql, nparams, NULL) == 1 ? await_result(c, deadline) : NULL;
        if (prep == NULL) {
            c->broken = true;
            return no_answer(c);
        }
        if (PQresultStatus(prep) != PGRES_COMMAND_OK) {
            note_broken(c);
            return prep;
        }
        PQclear(prep);
        if (c->nprepared == c->capprepared) {
            size_t ncap = c->capprepared ? c->capprepared * 2 : 16;
            const char **n = realloc(c->prepared, ncap * sizeof *n);
            if (n != NULL) {
                c->prepared = n;
                c->capprepared = ncap;
            }
        }
        /* Names are string literals owned by the callers' code. */
        if (c->nprepared < c->capprepared)
            c->prepared[c->nprepared++] = name;
    }
    if (PQsendQueryPrepared(c->pg, name, nparams, params, NULL, NULL, 0) != 1) {
        c->broken = true;
        return no_answer(c);
    }
    c->sent = true;
    PGresult *res = await_result(c, deadline);
    if (res == NULL) {
        c->broken = true;
        return no_answer(c);
    }
    note_broken(c);
    return res;
}

void queen_pool_get_stats(queen_pool *pool, queen_pool_stats *out)
{
    pthread_mutex_lock(&pool->mu);
    out->size = pool->size;
    out->in_use = pool->in_use;
    out->waiting = pool->waiting;
    out->acquired_total = pool->acquired_total;
    out->timeouts_total = pool->timeouts_total;
    out->reconnects_total = pool->reconnects_total;
    pthread_mutex_unlock(&pool->mu);
}
