/* pipeline: see pipeline.h. */
#include "pipeline.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fiber.h"
#include "logging.h"
#include "pool.h"
#include "sqlcall.h"
#include "util.h"

/* Back-off between attempts to re-establish a connection: the first at
 * once, then doubling to a second, so a database that is down costs a
 * connect attempt a second per connection, not a storm. */
#define RECONNECT_FIRST_MS 50
#define RECONNECT_MAX_MS 1000
/* libpq grows a connection's input buffer to the largest message it
 * received and never shrinks it: one 4 MB listing left 4 MiB on each of the
 * eight connections for the broker's life (bench/RESULTS.md, "the edge
 * without libmicrohttpd", 2026-12-04 follow-up). A connection that received
 * a result larger than this is replaced once it is idle, which hands that
 * buffer back; a reconnect (~ms) is small beside building such a result. */
#define RECYCLE_AFTER_RESULT_BYTES (1u << 20)

typedef enum conn_state { CONN_DOWN, CONN_CONNECTING, CONN_READY } conn_state;

/* Calls in order: a connection's sent ones (their results come in this
 * order) and the set's waiting ones (arrival order). */
typedef struct call_queue {
    pipeline_call *head, *tail;
} call_queue;

static void queue_push(call_queue *q, pipeline_call *call)
{
    call->next = NULL;
    if (q->tail != NULL)
        q->tail->next = call;
    else
        q->head = call;
    q->tail = call;
}

static pipeline_call *queue_pop(call_queue *q)
{
    pipeline_call *call = q->head;
    if (call != NULL) {
        q->head = call->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    return call;
}

typedef struct pipe_conn {
    loop_watch watch; /* first: epoll's data.ptr */
    pipeline_set *set;
    PGconn *pg;
    conn_state state;
    int fd;              /* registered with epoll, or -1 */
    uint32_t events;     /* what it is registered for */
    long long retry_at;  /* CONN_DOWN: next attempt; CONN_CONNECTING: give up at */
    int backoff_ms;
    call_queue sent;     /* in order of their results */
    int in_flight;
    const pipeline_call *cancelled; /* sent, late: a cancel request went for it (NULL: none) */
    const char **prepared;
    size_t nprepared, capprepared;
    bool grown;          /* received a result past RECYCLE_AFTER_RESULT_BYTES: replace when idle */
} pipe_conn;

struct pipeline_set {
    queen_conn_params params;
    int depth;
    int acquire_timeout_ms;
    int epfd;
    int nconns;
    pipe_conn *conns;
    call_queue waiting_calls;
    call_queue held; /* coalescable calls made this turn, in arrival order */
    int waiting, in_flight, nheld;
    int group_wait_ms;
    int deadline_ms; /* a call's default deadline after submission */
    long long group_wake_ms; /* when a held call that waits for a group may go; 0: none waits */
    pipeline_figures *fig;
    int connect_timeout_ms;
    /* The engine-wide lanes (pipeline.h): this set's slot in fig->sets (-1:
     * none, it then waits for its own statements only), the eventfd another
     * set writes to hand it the turn, and a bit per lane its calls wait for. */
    int slot;
    int wakefd;
    loop_watch wake_watch;
    atomic_int lane_waiting;
};

static void conn_ready(loop_watch *w, uint32_t events);

/* ---- epoll registration ---------------------------------------------------- */

static void watch_set(pipe_conn *c, int fd, uint32_t events)
{
    if (c->fd >= 0 && c->fd != fd) {
        epoll_ctl(c->set->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->fd = -1;
    }
    struct epoll_event ev = {.events = events, .data.ptr = &c->watch};
    if (fd < 0)
        return;
    if (c->fd == fd) {
        if (c->events != events)
            epoll_ctl(c->set->epfd, EPOLL_CTL_MOD, fd, &ev);
    } else {
        epoll_ctl(c->set->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    c->fd = fd;
    c->events = events;
}

static void watch_drop(pipe_conn *c)
{
    if (c->fd >= 0)
        epoll_ctl(c->set->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->fd = -1;
    c->events = 0;
}

/* ---- calls ------------------------------------------------------------------ */

static void lane_release(pipeline_set *s, pipeline_lane *l);
static void lane_take(pipeline_set *s, pipeline_lane *l, pipeline_call *call, long long now);

static void finish(pipeline_call *call)
{
    call->next = NULL;
    if (call->lane != NULL) {
        lane_release(call->lane_set, call->lane);
        call->lane = NULL;
    }
    call->done(call);
}

/* lost: the statement was sent, so it may have committed (the caller may
 * repeat it only when it is idempotent); else it never left the broker. */
static void fail(pipeline_call *call, bool lost, const char *detail)
{
    if (call->res != NULL) {
        PQclear(call->res);
        call->res = NULL;
    }
    call->lost = lost;
    if (lost)
        queen_error_set(&call->err, QUEEN_ERR_OUTCOME_UNKNOWN, "db_outcome_unknown", "%s", detail);
    else
        queen_error_set(&call->err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", detail);
    finish(call);
}

static bool is_prepared(const pipe_conn *c, const char *name)
{
    for (size_t i = 0; i < c->nprepared; i++)
        if (c->prepared[i] == name || strcmp(c->prepared[i], name) == 0)
            return true;
    return false;
}

static void forget_prepared(pipe_conn *c, const char *name)
{
    for (size_t i = 0; i < c->nprepared; i++)
        if (c->prepared[i] == name || strcmp(c->prepared[i], name) == 0) {
            c->prepared[i] = c->prepared[--c->nprepared];
            return;
        }
}

static void remember_prepared(pipe_conn *c, const char *name)
{
    if (c->nprepared == c->capprepared) {
        size_t ncap = c->capprepared ? c->capprepared * 2 : 16;
        const char **n = realloc(c->prepared, ncap * sizeof *n);
        if (n == NULL)
            return; /* prepared again next time: harmless but for an error we then read as the prepare's */
        c->prepared = n;
        c->capprepared = ncap;
    }
    c->prepared[c->nprepared++] = name;
}

/* ---- connection life ------------------------------------------------------ */

static void conn_down_failing(pipe_conn *c, const char *why, long long now, const char *detail);

static void conn_down(pipe_conn *c, const char *why, long long now)
{
    conn_down_failing(c, why, now, "the database connection was lost during the statement; its outcome is unknown");
}

/* Drops the connection; the calls it carried fail "lost" with detail. */
static void conn_down_failing(pipe_conn *c, const char *why, long long now, const char *detail)
{
    pipeline_set *s = c->set;
    bool was_ready = c->state == CONN_READY;
    watch_drop(c);
    if (c->pg != NULL)
        PQfinish(c->pg);
    c->pg = NULL;
    c->nprepared = 0;
    c->cancelled = NULL;
    c->grown = false;
    c->state = CONN_DOWN;
    c->retry_at = now + c->backoff_ms;
    c->backoff_ms = c->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : c->backoff_ms * 2;
    if (was_ready)
        atomic_fetch_sub(&s->fig->connections, 1);
    if (why != NULL)
        sql_log_unavailable(why);
    /* What it carried may or may not have committed: "lost". */
    pipeline_call *call = c->sent.head;
    c->sent.head = c->sent.tail = NULL;
    s->in_flight -= c->in_flight;
    atomic_fetch_sub(&s->fig->in_flight, c->in_flight);
    c->in_flight = 0;
    while (call != NULL) {
        pipeline_call *next = call->next;
        fail(call, true, detail);
        call = next;
    }
}

/* A sent statement passed its deadline: the server did not answer, not
 * even the cancel requested a tenth of the deadline earlier (pipeline_tick).
 * The connection is dropped, so this connection's calls are answered now
 * and a fresh connection serves the next ones; the cancel (sent now if it
 * was not) ends the statement if the server runs again before it does. */
static void conn_cut(pipe_conn *c, long long now)
{
    pipeline_set *s = c->set;
    atomic_fetch_add(&s->fig->deadline_cuts_total, 1);
    if (c->cancelled == NULL)
        queen_conn_cancel_detached(c->pg);
    char detail[256];
    snprintf(detail, sizeof detail,
             "the database did not answer within the deadline (QUEEN_REQUEST_DEADLINE_MS, %d ms); the statement "
             "was cancelled and its connection dropped: its outcome is unknown",
             s->deadline_ms);
    conn_down_failing(c, "a statement passed its deadline: connection cut", now, detail);
}

static void pump(pipeline_set *s);

static void connect_poll(pipe_conn *c, long long now)
{
    PostgresPollingStatusType st = PQconnectPoll(c->pg);
    int fd = PQsocket(c->pg);
    switch (st) {
    case PGRES_POLLING_READING:
        watch_set(c, fd, EPOLLIN);
        return;
    case PGRES_POLLING_WRITING:
        watch_set(c, fd, EPOLLOUT);
        return;
    case PGRES_POLLING_OK:
        break;
    default: {
        char why[300];
        snprintf(why, sizeof why, "connect: %s", PQerrorMessage(c->pg));
        engine_one_line(why);
        conn_down(c, why, now);
        return;
    }
    }
    if (PQsetnonblocking(c->pg, 1) != 0 || PQenterPipelineMode(c->pg) != 1) {
        conn_down(c, "connect: cannot enter pipeline mode", now);
        return;
    }
    PQsetNoticeProcessor(c->pg, queen_conn_ignore_notice, NULL);
    c->state = CONN_READY;
    c->backoff_ms = RECONNECT_FIRST_MS;
    atomic_fetch_add(&c->set->fig->connections, 1);
    watch_set(c, fd, EPOLLIN);
    pump(c->set);
}

static void connect_start(pipe_conn *c, long long now)
{
    pipeline_set *s = c->set;
    c->pg = PQconnectStartParams(s->params.keys, s->params.vals, 1);
    if (c->pg == NULL || PQstatus(c->pg) == CONNECTION_BAD) {
        char why[300];
        snprintf(why, sizeof why, "connect: %s", c->pg ? PQerrorMessage(c->pg) : "out of memory");
        engine_one_line(why);
        conn_down(c, why, now);
        return;
    }
    c->state = CONN_CONNECTING;
    c->retry_at = now + s->connect_timeout_ms;
    connect_poll(c, now);
}

/* ---- sending and receiving ------------------------------------------------ */

static void want_write(pipe_conn *c, bool on)
{
    watch_set(c, c->fd, on ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

static bool flush(pipe_conn *c)
{
    int r = PQflush(c->pg);
    if (r < 0)
        return false;
    want_write(c, r == 1);
    return true;
}

static void send_call(pipe_conn *c, pipeline_call *call)
{
    pipeline_set *s = c->set;
    call->prepare_pending = false;
    bool ok = true;
    if (!is_prepared(c, call->name)) {
        ok = PQsendPrepare(c->pg, call->name, call->sql, call->nparams, NULL) == 1;
        if (ok) {
            call->prepare_pending = true;
            remember_prepared(c, call->name);
        }
    }
    ok = ok && PQsendQueryPrepared(c->pg, call->name, call->nparams, call->params, NULL, NULL, 0) == 1 &&
         PQpipelineSync(c->pg) == 1;
    call->sent_ms = engine_now_ms();
    queue_push(&c->sent, call);
    c->in_flight++;
    s->in_flight++;
    atomic_fetch_add(&s->fig->in_flight, 1);
    atomic_fetch_add(&s->fig->sent_total, 1);
    if (!ok || !flush(c)) {
        char why[300];
        snprintf(why, sizeof why, "send: %s", PQerrorMessage(c->pg));
        engine_one_line(why);
        conn_down(c, why, engine_now_ms());
    }
}

/* The ready connection with the fewest statements in flight, when it has
 * room: statements spread over connections before they stack on one, so
 * concurrent commits overlap (group commit) rather than queue. */
static pipe_conn *roomiest(pipeline_set *s)
{
    pipe_conn *best = NULL;
    for (int i = 0; i < s->nconns; i++) {
        pipe_conn *c = &s->conns[i];
        if (c->state == CONN_READY && c->in_flight < s->depth && (best == NULL || c->in_flight < best->in_flight))
            best = c;
    }
    return best;
}

static void send_held(pipeline_set *s);

/* When a call that has not been sent stops waiting: after the acquire
 * timeout, or at its deadline when that comes first. */
static long long give_up_at(const pipeline_set *s, const pipeline_call *call)
{
    long long t = call->queued_ms + s->acquire_timeout_ms;
    return call->deadline_ms < t ? call->deadline_ms : t;
}

static const char unavailable_detail[] = "the database is unavailable; retry";

/* Sends the call, unless its deadline passed while it waited (a caller's
 * own deadline can be earlier than those ahead of it): then it fails unsent
 * rather than go out already late and cost its connection the cut. */
static void send_or_fail(pipe_conn *c, pipeline_call *call)
{
    if (engine_now_ms() >= call->deadline_ms) {
        atomic_fetch_add(&c->set->fig->timeouts_total, 1);
        fail(call, false, unavailable_detail);
        return;
    }
    send_call(c, call);
}

static void pump(pipeline_set *s)
{
    while (s->waiting_calls.head != NULL) {
        pipe_conn *c = roomiest(s);
        if (c == NULL)
            return;
        pipeline_call *call = queue_pop(&s->waiting_calls);
        s->waiting--;
        atomic_fetch_sub(&s->fig->waiting, 1);
        send_or_fail(c, call);
    }
    send_held(s);
}

/* Sends now, or waits behind anyone already waiting: arrival order. */
static void submit_now(pipeline_set *s, pipeline_call *call)
{
    pipe_conn *c = s->waiting_calls.head == NULL ? roomiest(s) : NULL;
    if (c != NULL) {
        send_or_fail(c, call);
        return;
    }
    queue_push(&s->waiting_calls, call);
    s->waiting++;
    atomic_fetch_add(&s->fig->waiting, 1);
}

/* Held calls count as waiting: they wait for a turn's end or for room. */
static void hold(pipeline_set *s, pipeline_call *call)
{
    queue_push(&s->held, call);
    s->nheld++;
    atomic_fetch_add(&s->fig->waiting, 1);
}

static pipeline_call *unhold(pipeline_set *s)
{
    pipeline_call *call = queue_pop(&s->held);
    if (call != NULL) {
        s->nheld--;
        atomic_fetch_sub(&s->fig->waiting, 1);
    }
    return call;
}

void pipeline_submit(pipeline_set *s, pipeline_call *call)
{
    call->res = NULL;
    call->lost = false;
    call->next = NULL;
    call->group_kind = NULL;
    call->lane = NULL;
    call->lane_set = NULL;
    memset(&call->err, 0, sizeof call->err);
    call->queued_ms = engine_now_ms();
    if (call->deadline_ms <= 0) {
        /* A request's statements share one deadline, set at its first:
         * a push's maintenance read and the push itself, or auth's lookup
         * and the handler's call, are answered within it together. A long
         * poll that waits runs its handler again on a fresh fiber, with a
         * fresh deadline. */
        fiber *f = fiber_current();
        call->deadline_ms = f != NULL && fiber_deadline_ms(f) > 0 ? fiber_deadline_ms(f) : call->queued_ms + s->deadline_ms;
        if (f != NULL)
            fiber_set_deadline_ms(f, call->deadline_ms);
    }
    if (call->coalesce != NULL) {
        hold(s, call);
        return;
    }
    submit_now(s, call);
}

/* ---- coalescing: held calls of one statement sent as one --------------------- */

/* The shared statement standing for n held calls. */
typedef struct coalesced {
    pipeline_call call; /* first: the pipeline hands this pointer back */
    pipeline_set *set;
    int n;
    pipeline_call **members;
    char **texts;        /* per parameter: the JSON array of the members' values */
} coalesced;

/* text as a JSON string. */
static bool append_json_string(char **buf, size_t *used, size_t *cap, const char *text)
{
    bool ok = engine_buf_append(buf, used, cap, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)text; ok && *p != '\0'; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            ok = engine_buf_append(buf, used, cap, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            ok = engine_buf_append(buf, used, cap, esc, 6);
        } else {
            ok = engine_buf_append(buf, used, cap, (const char *)p, 1);
        }
    }
    return ok && engine_buf_append(buf, used, cap, "\"", 1);
}

/* Parameter i of every member, as one JSON array; NULL when out of memory. */
static char *gather_param(pipeline_call **members, int n, int i, char kind)
{
    char *buf = NULL;
    size_t used = 0, cap = 0;
    bool ok = engine_buf_append(&buf, &used, &cap, "[", 1);
    for (int m = 0; ok && m < n; m++) {
        const char *v = members[m]->params[i];
        ok = (m == 0 || engine_buf_append(&buf, &used, &cap, ",", 1)) &&
             (v == NULL       ? engine_buf_append(&buf, &used, &cap, "null", 4)
              : kind == 'j' ? engine_buf_append(&buf, &used, &cap, v, strlen(v))
                            : append_json_string(&buf, &used, &cap, v));
    }
    if (!ok || !engine_buf_append(&buf, &used, &cap, "]", 1)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Row `row` of the shared result as a member's own one-row result. */
static PGresult *member_result(const PGresult *shared, int row)
{
    int nf = PQnfields(shared);
    PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    PGresAttDesc cols[8];
    if (r == NULL || nf > (int)(sizeof cols / sizeof cols[0])) {
        PQclear(r);
        return NULL;
    }
    for (int f = 0; f < nf; f++)
        cols[f] = (PGresAttDesc){.name = PQfname(shared, f), .typid = PQftype(shared, f), .typlen = -1, .atttypmod = -1};
    bool ok = PQsetResultAttrs(r, nf, cols) == 1;
    for (int f = 0; ok && f < nf; f++) {
        bool null = PQgetisnull(shared, row, f);
        ok = PQsetvalue(r, 0, f, null ? NULL : PQgetvalue(shared, row, f), null ? -1 : PQgetlength(shared, row, f)) == 1;
    }
    if (!ok) {
        PQclear(r);
        return NULL;
    }
    return r;
}

static void coalesced_free(coalesced *b)
{
    for (int i = 0; b->texts != NULL && i < b->call.nparams; i++)
        free(b->texts[i]);
    free(b->texts);
    free((void *)b->call.params);
    free(b->members);
    free(b);
}

static void coalesced_done(pipeline_call *call)
{
    coalesced *b = (coalesced *)call;
    pipeline_set *s = b->set;
    PGresult *r = call->res;
    if (r == NULL) {
        /* Unavailable, or lost with its connection: the members' outcome too. */
        for (int m = 0; m < b->n; m++) {
            pipeline_call *member = b->members[m];
            member->lost = call->lost;
            member->err = call->err;
            finish(member);
        }
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == b->n && PQnfields(r) >= 1) {
        atomic_fetch_add(&s->fig->coalesced_statements_total, 1);
        atomic_fetch_add(&s->fig->coalesced_calls_total, (unsigned long)b->n);
        for (int m = 0; m < b->n; m++) {
            pipeline_call *member = b->members[m];
            member->res = member_result(r, m);
            if (member->res == NULL)
                queen_error_set(&member->err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
            finish(member);
        }
    } else {
        /* One member's own error (a name SQL refuses) fails the shared
         * statement: each runs alone, next turn, and gets its own verdict. */
        atomic_fetch_add(&s->fig->coalesced_retries_total, (unsigned long)b->n);
        for (int m = 0; m < b->n; m++) {
            pipeline_call *member = b->members[m];
            member->coalesce = NULL;
            hold(s, member);
        }
    }
    PQclear(r);
    coalesced_free(b);
}

/* The held calls that share `first`'s coalescing, first included, taken out
 * of the held list (up to its max_calls); the rest keep their order. */
static int take_group(pipeline_set *s, pipeline_call *first, pipeline_call **members, int max)
{
    int n = 0;
    members[n++] = first;
    call_queue rest = {NULL, NULL};
    pipeline_call *call;
    while ((call = queue_pop(&s->held)) != NULL) {
        if (n < max && call->coalesce == first->coalesce && call->nparams == first->nparams) {
            members[n++] = call;
            s->nheld--;
            atomic_fetch_sub(&s->fig->waiting, 1);
        } else {
            queue_push(&rest, call);
        }
    }
    s->held = rest;
    return n;
}

static bool send_coalesced(pipeline_set *s, pipeline_call **members, int n, pipeline_lane *lane, long long now)
{
    const sql_coalesce *how = members[0]->coalesce;
    int np = members[0]->nparams;
    coalesced *b = calloc(1, sizeof *b);
    const char **params = calloc((size_t)np, sizeof *params);
    if (b == NULL || params == NULL || (b->texts = calloc((size_t)np, sizeof *b->texts)) == NULL) {
        free(params);
        free(b);
        return false;
    }
    b->set = s;
    b->n = n;
    b->members = members;
    b->call = (pipeline_call){
        .name = how->name, .sql = how->sql, .nparams = np, .params = params, .done = coalesced_done};
    for (int i = 0; i < np; i++) {
        char kind = how->param_kinds != NULL && (int)strlen(how->param_kinds) > i ? how->param_kinds[i] : 's';
        if ((b->texts[i] = gather_param(members, n, i, kind)) == NULL) {
            b->members = NULL; /* the caller still owns them */
            coalesced_free(b);
            return false;
        }
        params[i] = b->texts[i];
    }
    b->call.queued_ms = members[0]->queued_ms;
    /* The latest of its members': a member whose request spent most of its
     * deadline before (a maintenance read) must not cut the statement, and
     * the connection, under the others. It is answered late by at most the
     * difference, under one deadline. */
    b->call.deadline_ms = members[0]->deadline_ms;
    for (int m = 1; m < n; m++)
        if (members[m]->deadline_ms > b->call.deadline_ms)
            b->call.deadline_ms = members[m]->deadline_ms;
    b->call.group_kind = how->waits_for_group ? how : NULL;
    if (lane != NULL)
        lane_take(s, lane, &b->call, now);
    submit_now(s, &b->call);
    return true;
}

/* ---- engine-wide lanes: one statement of a kind in flight across the sets -- */

static void sets_lock(pipeline_figures *f)
{
    while (atomic_flag_test_and_set_explicit(&f->sets_lock, memory_order_acquire))
        ;
}

static void sets_unlock(pipeline_figures *f)
{
    atomic_flag_clear_explicit(&f->sets_lock, memory_order_release);
}

/* The lane of `how`'s kind (claimed on first use), or NULL when the kind
 * does not go one per engine, the set has no slot or every lane is taken. */
static pipeline_lane *lane_of(const pipeline_set *s, const sql_coalesce *how)
{
    if (how == NULL || !how->one_per_engine || s->slot < 0)
        return NULL;
    for (int i = 0; i < PIPELINE_LANES; i++) {
        pipeline_lane *l = &s->fig->lanes[i];
        const sql_coalesce *k = atomic_load(&l->kind);
        if (k == how)
            return l;
        if (k == NULL) {
            const sql_coalesce *none = NULL;
            if (atomic_compare_exchange_strong(&l->kind, &none, how) || none == how)
                return l;
        }
    }
    return NULL;
}

static int lane_bit(const pipeline_set *s, const pipeline_lane *l)
{
    return 1 << (int)(l - s->fig->lanes);
}

/* Whether the set may send a statement of the lane's kind now: nothing of
 * the kind in flight and no other set's turn, or what holds the lane is
 * older than the group wait (a stuck statement holds nobody longer).
 * *until: when a refusal expires. */
static bool lane_free(const pipeline_set *s, pipeline_lane *l, long long now, long long *until)
{
    long long since = atomic_load(&l->since_ms);
    int turn = atomic_load(&l->turn);
    if (now - since >= s->group_wait_ms)
        return true;
    if (atomic_load(&l->busy) == 0 && (turn == 0 || turn == s->slot + 1))
        return true;
    *until = since + s->group_wait_ms;
    return false;
}

/* Takes the lane for a statement about to be sent. */
static void lane_take(pipeline_set *s, pipeline_lane *l, pipeline_call *call, long long now)
{
    atomic_fetch_add(&l->busy, 1);
    atomic_store(&l->since_ms, now);
    atomic_store(&l->turn, 0);
    call->lane = l;
    call->lane_set = s;
}

/* Hands the turn to the next set after s (round robin) whose calls wait for
 * the lane, and wakes it; with none waiting the lane is anyone's. */
static void lane_pass(pipeline_set *s, pipeline_lane *l)
{
    pipeline_figures *f = s->fig;
    int bit = lane_bit(s, l);
    int to = -1;
    sets_lock(f);
    for (int i = 1; i <= PIPELINE_MAX_SETS && to < 0; i++) {
        pipeline_set *t = f->sets[(s->slot + i) % PIPELINE_MAX_SETS];
        if (t != NULL && t != s && (atomic_fetch_and(&t->lane_waiting, ~bit) & bit) != 0) {
            to = t->slot;
            atomic_store(&l->since_ms, engine_now_ms());
            atomic_store(&l->turn, to + 1);
            uint64_t one = 1;
            ssize_t w = write(t->wakefd, &one, sizeof one);
            (void)w; /* a full counter already wakes it */
        }
    }
    if (to < 0)
        atomic_store(&l->turn, 0);
    sets_unlock(f);
}

static void lane_release(pipeline_set *s, pipeline_lane *l)
{
    if (atomic_fetch_sub(&l->busy, 1) == 1)
        lane_pass(s, l);
}

/* Whether a held call of `how`'s kind waits for a statement of that kind in
 * flight (pipeline_submit); *until: when that wait ends. */
static bool waits_for_group(pipeline_set *s, const sql_coalesce *how, long long now, long long *until)
{
    if (how == NULL || !how->waits_for_group || s->group_wait_ms <= 0)
        return false;
    pipeline_lane *l = lane_of(s, how);
    if (l != NULL) {
        if (lane_free(s, l, now, until))
            return false;
        atomic_fetch_or(&s->lane_waiting, lane_bit(s, l));
        return true;
    }
    for (int i = 0; i < s->nconns; i++)
        for (const pipeline_call *sent = s->conns[i].sent.head; sent != NULL; sent = sent->next)
            if (sent->group_kind == how && now - sent->sent_ms < s->group_wait_ms) {
                *until = sent->sent_ms + s->group_wait_ms;
                return true;
            }
    return false;
}

/* The first held call free to go, taken out of the held list; notes in
 * group_wake_ms when the ones left waiting for a group may go. */
static pipeline_call *unhold_sendable(pipeline_set *s, long long now)
{
    pipeline_call *prev = NULL;
    for (pipeline_call *call = s->held.head; call != NULL; prev = call, call = call->next) {
        long long until;
        if (waits_for_group(s, call->coalesce, now, &until)) {
            if (s->group_wake_ms == 0 || until < s->group_wake_ms)
                s->group_wake_ms = until;
            continue;
        }
        if (prev != NULL)
            prev->next = call->next;
        else
            s->held.head = call->next;
        if (s->held.tail == call)
            s->held.tail = prev;
        call->next = NULL;
        s->nheld--;
        atomic_fetch_sub(&s->fig->waiting, 1);
        return call;
    }
    return NULL;
}

/* Sends the held calls while a connection has room: a call alone when no
 * other held one shares its statement, else one shared statement for up to
 * max_calls of them. Without room they stay held, so the reads that queue
 * behind busy connections leave together when one frees; so do the calls
 * that wait for a group of their kind in flight. */
static void send_held(pipeline_set *s)
{
    long long now = engine_now_ms();
    pipeline_call *call;
    s->group_wake_ms = 0;
    atomic_store(&s->lane_waiting, 0); /* set again below by every call still waiting for a lane */
    while (s->held.head != NULL && roomiest(s) != NULL && (call = unhold_sendable(s, now)) != NULL) {
        const sql_coalesce *kind = call->coalesce;
        int max = call->coalesce != NULL ? call->coalesce->max_calls : 1;
        pipeline_call **members = max > 1 ? calloc((size_t)max, sizeof *members) : NULL;
        int n = members != NULL ? take_group(s, call, members, max) : 1;
        pipeline_lane *lane = lane_of(s, kind);
        if (n > 1 && send_coalesced(s, members, n, lane, now))
            continue; /* members now belong to the shared statement */
        /* Alone (or no memory to share): each as its own statement. */
        for (int m = 0; m < n; m++) {
            pipeline_call *one = members != NULL ? members[m] : call;
            one->coalesce = NULL;
            one->group_kind = kind != NULL && kind->waits_for_group ? kind : NULL;
            if (lane != NULL && m == 0)
                lane_take(s, lane, one, now);
            submit_now(s, one);
        }
        free(members);
    }
}

/* One result of the head call. A call sends [prepare,] statement, sync; its
 * answer is the statement's result, or the prepare's error (the statement
 * is then "aborted"); the sync ends it. */
/* The bytes of a result's values: what its message held, near enough. */
static size_t result_bytes(const PGresult *r)
{
    size_t n = 0;
    int rows = PQntuples(r), cols = PQnfields(r);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            n += (size_t)PQgetlength(r, i, j);
    return n;
}

static void take_result(pipe_conn *c, PGresult *r)
{
    pipeline_call *call = c->sent.head;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        queue_pop(&c->sent);
        if (c->cancelled == call)
            c->cancelled = NULL;
        c->in_flight--;
        c->set->in_flight--;
        atomic_fetch_sub(&c->set->fig->in_flight, 1);
        if (call->res == NULL)
            queen_error_set(&call->err, QUEEN_ERR_INTERNAL, "bad_result", "%s returned no result", call->name);
        finish(call);
        return;
    }
    if (call->prepare_pending) {
        call->prepare_pending = false;
        if (st != PGRES_COMMAND_OK) {
            forget_prepared(c, call->name);
            call->res = r; /* the statement after it is aborted: this is the answer */
            return;
        }
        PQclear(r);
        return;
    }
    if (!c->grown && result_bytes(r) > RECYCLE_AFTER_RESULT_BYTES)
        c->grown = true;
    if (call->res == NULL)
        call->res = r;
    else
        PQclear(r);
}

/* An idle connection whose input buffer grew past the bound is closed and
 * opened again at once: nothing is in flight on it, so nothing is lost. */
static void conn_recycle(pipe_conn *c, long long now)
{
    pipeline_set *s = c->set;
    atomic_fetch_add(&s->fig->recycled_total, 1);
    watch_drop(c);
    PQfinish(c->pg);
    c->pg = NULL;
    c->nprepared = 0;
    c->cancelled = NULL;
    c->grown = false;
    c->state = CONN_DOWN;
    atomic_fetch_sub(&s->fig->connections, 1);
    connect_start(c, now);
}

static void drain(pipe_conn *c, long long now)
{
    if (PQconsumeInput(c->pg) != 1) {
        char why[300];
        snprintf(why, sizeof why, "receive: %s", PQerrorMessage(c->pg));
        engine_one_line(why);
        conn_down(c, why, now);
        return;
    }
    int nulls = 0;
    while (c->sent.head != NULL && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (r == NULL) {
            /* One NULL ends each statement's results; two in a row mean
             * nothing more has arrived. */
            if (++nulls >= 2)
                break;
            continue;
        }
        nulls = 0;
        take_result(c, r);
    }
    if (c->sent.head == NULL && PQstatus(c->pg) != CONNECTION_OK) {
        conn_down(c, "the database closed the connection", now);
        return;
    }
    if (c->sent.head == NULL && c->grown)
        conn_recycle(c, now);
    /* Idle and readable with nothing to read: the server said goodbye
     * (a terminate, a restart). libpq reports it as CONNECTION_BAD only
     * once it reads the EOF, which consume did above. */
}

static void conn_ready(loop_watch *w, uint32_t events)
{
    pipe_conn *c = (pipe_conn *)w;
    long long now = engine_now_ms();
    if (c->state == CONN_CONNECTING) {
        connect_poll(c, now);
        return;
    }
    if (c->state != CONN_READY)
        return;
    if ((events & EPOLLOUT) && !flush(c)) {
        conn_down(c, "send: the database connection failed", now);
        return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        drain(c, now);
    if (c->state != CONN_DOWN) /* ready, or being replaced (conn_recycle): the others take what waits */
        pump(c->set);
}

/* ---- the set ---------------------------------------------------------------- */

/* Another set handed this one a lane's turn (lane_pass). */
static void wake_ready(loop_watch *w, uint32_t events)
{
    (void)events;
    pipeline_set *s = (pipeline_set *)((char *)w - offsetof(pipeline_set, wake_watch));
    uint64_t n;
    while (read(s->wakefd, &n, sizeof n) == (ssize_t)sizeof n)
        ;
    pump(s);
    /* A turn this set did not use (its calls went meanwhile) goes on. */
    for (int i = 0; i < PIPELINE_LANES; i++) {
        pipeline_lane *l = &s->fig->lanes[i];
        if (atomic_load(&l->turn) == s->slot + 1 && atomic_load(&l->busy) == 0)
            lane_pass(s, l);
    }
}

/* A slot in the shared figures and a wake-up eventfd on the loop's epoll;
 * without them (more sets than slots, no descriptor) the set waits for its
 * own statements only. */
static void lanes_join(pipeline_set *s)
{
    s->slot = -1;
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0)
        return;
    s->wake_watch.on_ready = wake_ready;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->wake_watch};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wakefd, &ev) != 0) {
        close(s->wakefd);
        s->wakefd = -1;
        return;
    }
    sets_lock(s->fig);
    for (int i = 0; i < PIPELINE_MAX_SETS && s->slot < 0; i++)
        if (s->fig->sets[i] == NULL) {
            s->fig->sets[i] = s;
            s->slot = i;
        }
    sets_unlock(s->fig);
}

static void lanes_leave(pipeline_set *s)
{
    if (s->slot >= 0) {
        sets_lock(s->fig);
        s->fig->sets[s->slot] = NULL;
        sets_unlock(s->fig);
        s->slot = -1;
    }
    if (s->wakefd >= 0) {
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->wakefd, NULL);
        close(s->wakefd);
        s->wakefd = -1;
    }
}

pipeline_set *pipeline_open(const char *conninfo, const char *settings, int nconns, int depth,
                            int statement_timeout_ms, int acquire_timeout_ms, int group_wait_ms, int deadline_ms,
                            int epfd, pipeline_figures *figures, char *err, size_t errlen)
{
    pipeline_set *s = calloc(1, sizeof *s);
    if (s == NULL || nconns < 1) {
        free(s);
        snprintf(err, errlen, nconns < 1 ? "no connections" : "out of memory");
        return NULL;
    }
    queen_conn_params_fill(&s->params, conninfo, queen_deadline_statement_timeout(statement_timeout_ms, deadline_ms),
                           acquire_timeout_ms, settings);
    s->deadline_ms = deadline_ms > 0 ? deadline_ms : statement_timeout_ms + acquire_timeout_ms;
    s->depth = depth > 0 ? depth : 1;
    s->acquire_timeout_ms = acquire_timeout_ms;
    s->group_wait_ms = group_wait_ms;
    s->connect_timeout_ms = acquire_timeout_ms > 2000 ? acquire_timeout_ms : 2000;
    s->epfd = epfd;
    s->fig = figures;
    s->nconns = nconns;
    s->conns = calloc((size_t)nconns, sizeof *s->conns);
    if (s->conns == NULL) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    long long now = engine_now_ms();
    for (int i = 0; i < nconns; i++) {
        pipe_conn *c = &s->conns[i];
        c->watch.on_ready = conn_ready;
        c->set = s;
        c->fd = -1;
        c->backoff_ms = RECONNECT_FIRST_MS;
    }
    /* The first connection is made before serving, so a broker that cannot
     * reach its database says so at start instead of answering 503s. */
    PGconn *first = PQconnectdbParams(s->params.keys, s->params.vals, 1);
    if (PQstatus(first) != CONNECTION_OK) {
        snprintf(err, errlen, "connect: %s", PQerrorMessage(first));
        engine_one_line(err);
        PQfinish(first);
        free(s->conns);
        free(s);
        return NULL;
    }
    PQfinish(first);
    lanes_join(s);
    for (int i = 0; i < nconns; i++)
        connect_start(&s->conns[i], now);
    return s;
}

/* Fails (unsent) the calls of q whose give_up_at has come, keeping the
 * others in order; the earliest give_up_at left, or -1 when q is empty. */
static long long expire_waiting(pipeline_set *s, call_queue *q, int *count, long long now)
{
    call_queue keep = {NULL, NULL}, gone = {NULL, NULL};
    long long due = -1;
    pipeline_call *call;
    while ((call = queue_pop(q)) != NULL) {
        long long t = give_up_at(s, call);
        if (now >= t) {
            queue_push(&gone, call);
            (*count)--;
            atomic_fetch_sub(&s->fig->waiting, 1);
            atomic_fetch_add(&s->fig->timeouts_total, 1);
        } else {
            queue_push(&keep, call);
            if (due < 0 || t < due)
                due = t;
        }
    }
    *q = keep;
    /* After q is whole again: a done() may submit more. */
    while ((call = queue_pop(&gone)) != NULL)
        fail(call, false, unavailable_detail);
    return due;
}

long long pipeline_tick(pipeline_set *s, long long now)
{
    send_held(s);
    long long next = -1;
#define SOONER(t) (next < 0 || (t) < next ? (t) : next)
    for (int i = 0; i < s->nconns; i++) {
        pipe_conn *c = &s->conns[i];
        if (c->state == CONN_DOWN && now >= c->retry_at) {
            atomic_fetch_add(&s->fig->reconnects_total, 1);
            connect_start(c, now);
        } else if (c->state == CONN_CONNECTING && now >= c->retry_at) {
            conn_down(c, "connect: timed out", now);
        }
        if (c->state != CONN_READY)
            next = SOONER(c->retry_at);
    }
    /* Sent statements near their deadline: a tenth of it before, the
     * server is asked to cancel the statement. A server that runs answers
     * at once: the statement rolled back (57014, a 503 any call may retry)
     * or its result, the connection kept. One that does not (stopped,
     * frozen, cut off) has its connection cut at the deadline itself. The
     * servers' statement_timeout comes first when the statement was sent
     * at once; this covers a statement that waited for its connection, and
     * a server that does not take the broker's statement_timeout (a
     * pooler dropping startup options). */
    long long cancel_lead = s->deadline_ms / 10;
    for (int i = 0; i < s->nconns; i++) {
        pipe_conn *c = &s->conns[i];
        if (c->state != CONN_READY || c->sent.head == NULL)
            continue;
        const pipeline_call *late = c->sent.head;
        for (const pipeline_call *sent = late->next; sent != NULL; sent = sent->next)
            if (sent->deadline_ms < late->deadline_ms)
                late = sent;
        if (now >= late->deadline_ms) {
            conn_cut(c, now);
        } else if (c->cancelled != late && now >= late->deadline_ms - cancel_lead) {
            c->cancelled = late;
            queen_conn_cancel_detached(c->pg);
            next = SOONER(late->deadline_ms);
        } else {
            next = SOONER(c->cancelled == late ? late->deadline_ms : late->deadline_ms - cancel_lead);
        }
    }
    /* Calls that waited past the acquire timeout or their deadline (a
     * request's deadline may come before those of calls ahead of it, so
     * the whole queue is looked at): 503, as the pool's. Held calls too:
     * they found no room as long. */
    long long due = expire_waiting(s, &s->waiting_calls, &s->waiting, now);
    if (due >= 0)
        next = SOONER(due);
    due = expire_waiting(s, &s->held, &s->nheld, now);
    if (due >= 0)
        next = SOONER(due);
    if (s->held.head != NULL && s->group_wake_ms > 0)
        next = SOONER(s->group_wake_ms);
#undef SOONER
    return next;
}

void pipeline_close(pipeline_set *s)
{
    if (s == NULL)
        return;
    pipeline_call *call;
    while ((call = queue_pop(&s->waiting_calls)) != NULL) {
        s->waiting--;
        atomic_fetch_sub(&s->fig->waiting, 1);
        fail(call, false, "the broker is stopping; retry");
    }
    for (int i = 0; i < s->nconns; i++) {
        pipe_conn *c = &s->conns[i];
        if (c->state != CONN_DOWN)
            conn_down(c, NULL, 0);
        free(c->prepared);
    }
    /* Held calls, and the members of a shared statement that failed above. */
    while ((call = unhold(s)) != NULL)
        fail(call, false, "the broker is stopping; retry");
    lanes_leave(s);
    free(s->conns);
    free(s);
}
