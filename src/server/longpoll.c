/* longpoll: a long poll's wait, without a fiber or a thread while it waits
 * (see http.h's http_poll_step and longpoll.h). The wait itself is the
 * engine's (queen_poll: its attempts, wakes, deadline); this file only
 * suspends the request when a step says SLEEP and hands it back to its
 * connection's loop (loop_resumed, loop_wake) when the engine's callback
 * says step again, plus the per-tenant cap of open waits. Lock order: the
 * engine's poll locks, then srv->poll_lock; the engine is never called
 * holding poll_lock. */
#include "longpoll.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "loop.h"

/* A long-polling request's link with its engine poll. Shared by the
 * request (one reference while it lives) and the poll's callback (one
 * reference from its opening to its close, after which the callback never
 * runs), so whichever lets go last frees it. One poll per request, opened
 * at its first dispatch and closed at the answer: it keeps its place among
 * the queue's waiters across attempts. Fields but lp are guarded by
 * srv->poll_lock; lp is the request's own (its handler and completion run
 * on its loop). */
struct http_poll {
    queen_poll *lp;              /* the open wait, NULL before it and after its close */
    server *srv;
    edge_loop *loop;             /* the connection's loop: it runs the resumed request */
    conn *conn;                  /* NULL once the request completed (set and read on its loop only) */
    bool suspended;              /* in srv->suspended, waiting for the callback */
    bool called;                 /* the callback ran since the last step began: step again */
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

/* The poll's callback, on an engine thread, outside the engine's locks:
 * step again, so resume the request if it is suspended (its handler steps;
 * nothing is popped here). It may come before the step that said SLEEP
 * returned: then called tells http_poll_step not to suspend. */
static void poll_wake(void *ctx)
{
    http_poll *p = ctx;
    server *srv = p->srv;
    pthread_mutex_lock(&srv->poll_lock);
    p->called = true;
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

/* Closes the request's wait, if open, and lets go of the callback's
 * reference. Never under poll_lock: the close waits for a callback in
 * progress, which takes it. */
static void poll_close(server *srv, http_poll *p)
{
    if (p == NULL)
        return;
    if (p->lp == NULL) { /* a push wait's (or closed already): only its tenant place */
        pthread_mutex_lock(&srv->poll_lock);
        tenant_poll_give_locked(srv, p);
        pthread_mutex_unlock(&srv->poll_lock);
        return;
    }
    queen_poll_close(p->lp);
    p->lp = NULL;
    pthread_mutex_lock(&srv->poll_lock);
    tenant_poll_give_locked(srv, p);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&srv->poll_lock);
    if (last)
        free(p);
}

/* A wait's state, held by the request (its slot) and not yet counted
 * against its tenant; NULL when memory is short. */
static http_poll *poll_new(server *srv, const http_request *req)
{
    http_poll *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->srv = srv;
    p->loop = loop_current();
    p->conn = req->conn;
    p->refs = 1; /* the request's */
    *http_request_poll(req) = p;
    return p;
}

/* The request's poll, opened at its first dispatch (taking one of its
 * tenant's places); NULL with *over_limit when the tenant holds all of
 * them, NULL alone when it cannot wait. */
static http_poll *poll_open(server *srv, const http_request *req, const queen_pop_options *opts, bool *over_limit)
{
    http_poll **slot = http_request_poll(req);
    if (*slot != NULL && (*slot)->lp != NULL)
        return *slot;
    if (*slot != NULL || atomic_load(&srv->stopping))
        return NULL; /* its wait was closed already: it does not open twice */
    http_poll *p = poll_new(srv, req);
    if (p == NULL)
        return NULL;
    pthread_mutex_lock(&srv->poll_lock);
    if (!tenant_poll_take_locked(srv, p, req->tenant)) {
        pthread_mutex_unlock(&srv->poll_lock);
        *over_limit = true;
        return NULL;
    }
    p->refs++; /* the callback's, taken before it can run */
    pthread_mutex_unlock(&srv->poll_lock);
    /* Never call the engine holding poll_lock: its callback takes it. */
    p->lp = queen_poll_open(srv->engine, req->tenant, opts, poll_wake, p);
    if (p->lp == NULL) {
        pthread_mutex_lock(&srv->poll_lock);
        p->refs--; /* the request still holds one */
        tenant_poll_give_locked(srv, p);
        pthread_mutex_unlock(&srv->poll_lock);
        return NULL;
    }
    return p;
}

http_poll_verdict http_poll_step(server *srv, const http_request *req, const queen_pop_options *opts,
                                 char **body, queen_error *err, http_response *res)
{
    *body = NULL;
    bool over_limit = false;
    http_poll *p = poll_open(srv, req, opts, &over_limit);
    if (p == NULL)
        return over_limit ? HTTP_POLL_OVER_LIMIT : HTTP_POLL_CANNOT;
    for (;;) {
        pthread_mutex_lock(&srv->poll_lock);
        p->called = false;
        pthread_mutex_unlock(&srv->poll_lock);
        switch (queen_poll_step(p->lp, body, err)) {
        case QUEEN_POLL_MESSAGES:
            /* Closed now, not at the request's end: its queue's next
             * waiters are checked at once. */
            poll_close(srv, p);
            return HTTP_POLL_MESSAGES;
        case QUEEN_POLL_NOTHING:
            return HTTP_POLL_NOTHING;
        case QUEEN_POLL_ERROR:
            return HTTP_POLL_ERROR;
        case QUEEN_POLL_SLEEP:
            break;
        }
        pthread_mutex_lock(&srv->poll_lock);
        if (atomic_load(&srv->stopping)) {
            pthread_mutex_unlock(&srv->poll_lock);
            return HTTP_POLL_NOTHING;
        }
        if (p->called) { /* the callback came before this: step again */
            pthread_mutex_unlock(&srv->poll_lock);
            continue;
        }
        /* Suspended under the lock the callback takes, so a resume can
         * only follow this suspend. */
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
}

/* ---- Push waits (http_wait_push) ----------------------------------------
 * The same request link, without an engine poll: each arm registers one
 * queen_wait_for_push, whose callback holds a reference until it ran (it
 * cannot be cancelled; it runs within a second of its arm, the engine's
 * re-check), so a request that ended meanwhile is freed by the callback. */

static void push_wake(void *ctx, bool woken)
{
    (void)woken; /* a timeout and a push both mean: attempt again; the handler judges its deadline */
    http_poll *p = ctx;
    server *srv = p->srv;
    pthread_mutex_lock(&srv->poll_lock);
    p->called = true;
    if (p->suspended)
        poll_resume_locked(srv, p);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&srv->poll_lock);
    if (last)
        free(p);
}

http_poll_verdict http_wait_push(server *srv, const http_request *req, const char *queue, int timeout_ms,
                                 http_response *res)
{
    http_poll **slot = http_request_poll(req);
    http_poll *p = *slot;
    if ((p != NULL && p->lp != NULL) || atomic_load(&srv->stopping) || timeout_ms <= 0)
        return HTTP_POLL_CANNOT;
    if (p == NULL) {
        p = poll_new(srv, req);
        if (p == NULL)
            return HTTP_POLL_CANNOT;
        pthread_mutex_lock(&srv->poll_lock);
        bool took = tenant_poll_take_locked(srv, p, req->tenant);
        pthread_mutex_unlock(&srv->poll_lock);
        if (!took)
            return HTTP_POLL_OVER_LIMIT;
    } else if (!p->counted) {
        return HTTP_POLL_CANNOT; /* over the limit at its first arm: never waits */
    }
    pthread_mutex_lock(&srv->poll_lock);
    p->called = false;
    p->refs++; /* the callback's, taken before it can run */
    pthread_mutex_unlock(&srv->poll_lock);
    /* Never call the engine holding poll_lock: the callback takes it. */
    if (queen_wait_for_push(srv->engine, req->tenant, queue, timeout_ms, push_wake, p) == NULL) {
        pthread_mutex_lock(&srv->poll_lock);
        p->refs--; /* the request still holds one */
        pthread_mutex_unlock(&srv->poll_lock);
        return HTTP_POLL_CANNOT;
    }
    pthread_mutex_lock(&srv->poll_lock);
    p->suspended = true;
    p->prev = NULL;
    p->next = srv->suspended;
    if (p->next != NULL)
        p->next->prev = p;
    srv->suspended = p;
    atomic_fetch_add(&srv->nsuspended, 1);
    /* A wake (or a stop) that came before the suspension: handed back to
     * the loop at once, which runs the handler after this one returned. */
    if (p->called || atomic_load(&srv->stopping))
        poll_resume_locked(srv, p);
    pthread_mutex_unlock(&srv->poll_lock);
    http_request_waited(req);
    res->suspended = true;
    return HTTP_POLL_SUSPENDED;
}

bool longpoll_answer_now(server *srv, http_poll *p)
{
    pthread_mutex_lock(&srv->poll_lock);
    bool now = p->shutdown;
    pthread_mutex_unlock(&srv->poll_lock);
    return now;
}

void longpoll_end(server *srv, http_poll *p)
{
    poll_close(srv, p);
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
