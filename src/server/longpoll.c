/* longpoll: a long poll's wait, without a fiber or a thread while it waits
 * (see http.h's http_poll_* and longpoll.h). A request arms its waiter
 * before each attempt and suspends after an empty one; the waiter's
 * callback (on an engine thread) hands the request to its connection's loop
 * (loop_resumed, loop_wake), which dispatches it again. Lock order: the
 * engine's waiter locks, then srv->poll_lock; the engine is never called
 * holding poll_lock. */
#include "longpoll.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "loop.h"

/* A long-polling request's link with its waiter. Shared by the request (one
 * reference while it lives) and its waiter (one reference from its opening
 * to its close, after which its callback never runs), so whichever lets go
 * last frees it. One waiter per request, opened before the first attempt and
 * closed at the answer (queen_pop_wait_open): it keeps its place among the
 * queue's waiters across attempts. Fields but w are guarded by
 * srv->poll_lock; w is the request's own (its handler and completion run on
 * its loop). */
struct http_poll {
    queen_waiter *w;             /* the open wait, NULL before it and after its close */
    server *srv;
    edge_loop *loop;             /* the connection's loop: it runs the resumed request */
    conn *conn;                  /* NULL once the request completed (set and read on its loop only) */
    bool suspended;              /* in srv->suspended, waiting for the waiter */
    bool fired, woken;           /* the armed waiter fired; with a push or not */
    bool shutdown;               /* resumed by http_stop: answer now */
    bool counted;                /* holds one of its tenant's open-wait places */
    char tenant[QUEEN_TENANT_LEN + 1];
    bool queued;                 /* in its loop's resumed list */
    int refs;
    http_poll *prev, *next;
    http_poll *next_resumed;
};

/* Open long-poll waits of one tenant (srv->tenant_polls, under poll_lock):
 * an entry lives while its count is above zero, so the table holds only
 * tenants waiting now. */
typedef struct tenant_polls {
    struct tenant_polls *next;
    int n;
    char tenant[QUEEN_TENANT_LEN + 1];
} tenant_polls;

/* ---- Long polls --------------------------------------------------------- */

/* Takes a suspended poll off the server's list (poll_lock held). */
static void poll_unlink_locked(server *srv, http_poll *p)
{
    p->suspended = false;
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        srv->suspended = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    atomic_fetch_sub(&srv->nsuspended, 1);
}

static void poll_resume_locked(server *srv, http_poll *p)
{
    poll_unlink_locked(srv, p);
    /* Handed to its loop, which runs the request again (http_run_resumed). */
    if (p->loop != NULL && !p->queued) {
        http_poll **head = loop_resumed(p->loop);
        p->queued = true;
        p->refs++; /* the list's */
        p->next_resumed = *head;
        *head = p;
        loop_wake(p->loop);
    }
}

void http_run_resumed(edge_loop *L)
{
    server *srv = loop_server(L);
    pthread_mutex_lock(&srv->poll_lock);
    http_poll *p = *loop_resumed(L);
    *loop_resumed(L) = NULL;
    pthread_mutex_unlock(&srv->poll_lock);
    while (p != NULL) {
        http_poll *next = p->next_resumed;
        pthread_mutex_lock(&srv->poll_lock);
        p->queued = false;
        p->next_resumed = NULL;
        conn *c = p->conn;
        pthread_mutex_unlock(&srv->poll_lock);
        if (c != NULL)
            conn_resume(c); /* may end the request: p lives on by the list's reference */
        pthread_mutex_lock(&srv->poll_lock);
        bool last = --p->refs == 0;
        pthread_mutex_unlock(&srv->poll_lock);
        if (last)
            free(p);
        p = next;
    }
}

/* The waiter's callback, on an engine thread, outside the engine's locks:
 * record the verdict and resume the request if it is suspended (its handler
 * re-runs the attempt; nothing is popped here). */
static void poll_wake(void *ctx, bool woken)
{
    http_poll *p = ctx;
    server *srv = p->srv;
    pthread_mutex_lock(&srv->poll_lock);
    p->fired = true;
    p->woken = woken;
    if (p->suspended)
        poll_resume_locked(srv, p);
    pthread_mutex_unlock(&srv->poll_lock);
}

int http_poll_tenant_cap(const server *srv)
{
    if (srv->cfg->max_long_polls_per_tenant > 0)
        return srv->cfg->max_long_polls_per_tenant;
    conn_figures f;
    conn_figures_get(srv, &f);
    long long cap = f.cap > 0 ? f.cap : srv->cfg->max_connections;
    return cap / 4 > 0 ? (int)(cap / 4) : 1;
}

static tenant_polls **tenant_polls_slot(server *srv, const char *tenant)
{
    unsigned h = 2166136261u;
    for (const char *t = tenant; *t; t++)
        h = (h ^ (unsigned char)*t) * 16777619u;
    tenant_polls **at = &srv->tenant_polls[h % (sizeof srv->tenant_polls / sizeof srv->tenant_polls[0])];
    while (*at != NULL && strcmp((*at)->tenant, tenant) != 0)
        at = &(*at)->next;
    return at;
}

/* One of the tenant's open-wait places, or false when it holds all of them
 * (or memory is short). Under poll_lock. A place is held from the wait's
 * open to its close, whether the request is suspended or attempting, so a
 * tenant's waits can never hold more connections than its cap. */
static bool tenant_poll_take_locked(server *srv, http_poll *p, const char *tenant)
{
    tenant_polls **at = tenant_polls_slot(srv, tenant);
    if (*at == NULL) {
        *at = calloc(1, sizeof **at);
        if (*at == NULL)
            return false;
        snprintf((*at)->tenant, sizeof (*at)->tenant, "%s", tenant);
    }
    if ((*at)->n >= http_poll_tenant_cap(srv)) {
        if ((*at)->n == 0) { /* never kept empty */
            free(*at);
            *at = NULL;
        }
        return false;
    }
    (*at)->n++;
    p->counted = true;
    snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
    return true;
}

static void tenant_poll_give_locked(server *srv, http_poll *p)
{
    if (!p->counted)
        return;
    p->counted = false;
    tenant_polls **at = tenant_polls_slot(srv, p->tenant);
    if (*at != NULL && --(*at)->n <= 0) {
        tenant_polls *gone = *at;
        *at = gone->next;
        free(gone);
    }
}

/* Closes the request's wait, if open, and lets go of the waiter's
 * reference. Never under poll_lock: the close waits for a callback in
 * progress, which takes it. */
static void poll_close(server *srv, http_poll *p, bool popped)
{
    if (p == NULL || p->w == NULL)
        return;
    queen_pop_wait_close(srv->engine, p->w, popped);
    p->w = NULL;
    pthread_mutex_lock(&srv->poll_lock);
    tenant_poll_give_locked(srv, p);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&srv->poll_lock);
    if (last)
        free(p);
}

void http_poll_close(server *srv, const http_request *req, bool popped)
{
    poll_close(srv, *http_request_poll(req), popped);
}

bool http_poll_arm(server *srv, const http_request *req, const queen_pop_options *opts, int timeout_ms,
                   bool *over_limit)
{
    *over_limit = false;
    http_poll **slot = http_request_poll(req);
    if (timeout_ms <= 0 || atomic_load(&srv->stopping))
        return false;
    if (*slot != NULL && (*slot)->w != NULL) {
        /* Open since an earlier attempt: a wake before this attempt is this
         * attempt's; one during it shows as fired. */
        pthread_mutex_lock(&srv->poll_lock);
        (*slot)->fired = (*slot)->woken = false;
        pthread_mutex_unlock(&srv->poll_lock);
        return true;
    }
    http_poll *p = *slot;
    if (p == NULL) {
        p = calloc(1, sizeof *p);
        if (p == NULL)
            return false;
        p->srv = srv;
        p->loop = loop_current();
        p->conn = req->conn;
        p->refs = 1; /* the request's */
        *slot = p;
    }
    pthread_mutex_lock(&srv->poll_lock);
    if (!tenant_poll_take_locked(srv, p, req->tenant)) {
        pthread_mutex_unlock(&srv->poll_lock);
        *over_limit = true;
        return false;
    }
    p->fired = p->woken = false;
    p->refs++; /* the waiter's, taken before it can fire */
    pthread_mutex_unlock(&srv->poll_lock);
    /* Never call the engine holding poll_lock: its callback takes it. */
    p->w = queen_pop_wait_open(srv->engine, req->tenant, opts, timeout_ms, poll_wake, p);
    if (p->w == NULL) {
        pthread_mutex_lock(&srv->poll_lock);
        p->refs--; /* the request still holds one */
        tenant_poll_give_locked(srv, p);
        pthread_mutex_unlock(&srv->poll_lock);
        return false;
    }
    return true;
}

http_poll_verdict http_poll_suspend(server *srv, const http_request *req, http_response *res)
{
    http_poll *p = *http_request_poll(req);
    if (p == NULL)
        return HTTP_POLL_DONE;
    pthread_mutex_lock(&srv->poll_lock);
    if (atomic_load(&srv->stopping)) {
        pthread_mutex_unlock(&srv->poll_lock);
        return HTTP_POLL_DONE;
    }
    if (p->fired) { /* during the attempt: no suspension, no lost wake-up */
        bool woken = p->woken;
        pthread_mutex_unlock(&srv->poll_lock);
        return woken ? HTTP_POLL_RETRY : HTTP_POLL_DONE;
    }
    pthread_mutex_unlock(&srv->poll_lock);
    /* Back in its place among the queue's waiters (outside poll_lock: this
     * may wait for the callback). */
    switch (p->w ? queen_pop_wait_again(srv->engine, p->w) : QUEEN_WAIT_DONE) {
    case QUEEN_WAIT_RETRY:
        return HTTP_POLL_RETRY;
    case QUEEN_WAIT_DONE:
        return HTTP_POLL_DONE;
    case QUEEN_WAIT_SLEEP:
        break;
    }
    pthread_mutex_lock(&srv->poll_lock);
    if (atomic_load(&srv->stopping)) {
        pthread_mutex_unlock(&srv->poll_lock);
        return HTTP_POLL_DONE;
    }
    if (p->fired) { /* since it went back: the sleep is over already */
        bool woken = p->woken;
        pthread_mutex_unlock(&srv->poll_lock);
        return woken ? HTTP_POLL_RETRY : HTTP_POLL_DONE;
    }
    /* Suspended under the lock the callback takes, so a resume can only
     * follow this suspend. */
    p->suspended = true;
    p->prev = NULL;
    p->next = srv->suspended;
    if (p->next != NULL)
        p->next->prev = p;
    srv->suspended = p;
    atomic_fetch_add(&srv->nsuspended, 1);
    pthread_mutex_unlock(&srv->poll_lock);
    http_request_waited(req);
    res->suspended = true;
    return HTTP_POLL_SUSPENDED;
}

bool longpoll_answer_now(server *srv, http_poll *p)
{
    pthread_mutex_lock(&srv->poll_lock);
    bool now = p->shutdown || (p->fired && !p->woken);
    pthread_mutex_unlock(&srv->poll_lock);
    return now;
}

void longpoll_end(server *srv, http_poll *p)
{
    poll_close(srv, p, false);
    pthread_mutex_lock(&srv->poll_lock);
    p->conn = NULL;
    if (p->suspended) /* its client left while it waited */
        poll_unlink_locked(srv, p);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&srv->poll_lock);
    if (last)
        free(p);
}

int longpoll_resume_all(server *srv)
{
    pthread_mutex_lock(&srv->poll_lock);
    int resumed = 0;
    while (srv->suspended != NULL) {
        srv->suspended->shutdown = true;
        poll_resume_locked(srv, srv->suspended);
        resumed++;
    }
    pthread_mutex_unlock(&srv->poll_lock);
    return resumed;
}

void longpoll_free_tenants(server *srv)
{
    for (size_t i = 0; i < sizeof srv->tenant_polls / sizeof srv->tenant_polls[0]; i++)
        while (srv->tenant_polls[i] != NULL) {
            tenant_polls *gone = srv->tenant_polls[i];
            srv->tenant_polls[i] = gone->next;
            free(gone);
        }
}
