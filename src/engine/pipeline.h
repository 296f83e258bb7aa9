/* pipeline: database connections driven by an event loop instead of
 * blocking a thread.
 *
 * A set of non-blocking libpq connections in pipeline mode, owned by one
 * event-loop thread: a statement is sent at once on the connection with the
 * fewest statements in flight, and up to `depth` statements travel on one
 * connection without waiting for each other's round trip. Every statement
 * is followed by its own sync point, so each is its own transaction and an
 * error in one never touches its neighbours. When every connection is full
 * a call waits in arrival order, bounded by the acquire timeout (then it
 * fails "unavailable", as the blocking pool does). A connection that breaks
 * fails the calls it carried ("lost": their outcome is unknown) and is
 * re-established in the background, with back-off. One that received a
 * result past 1 MiB is closed and opened again once idle: libpq keeps its
 * input buffer at the largest message received, for the connection's life.
 *
 * Every call has a deadline: the caller's own, else its fiber's (all the
 * statements of one fiber, a request's handler run, share the deadline set
 * at the first: QUEEN_REQUEST_DEADLINE_MS after it was submitted). A call
 * not yet sent then fails "unavailable" (db_unavailable: nothing reached
 * the database). For a sent one, a tenth of the deadline before it, the
 * server is asked to cancel the statement (a cancel request on a thread of
 * its own, since PQcancel blocks while the server does not answer): a
 * server that runs answers at once, the statement rolled back (57014) and
 * the connection kept. One whose answer is still not in at the deadline
 * cuts its connection: dropped and replaced, and every call it carried
 * fails "lost" (db_outcome_unknown). Keepalives cannot see a server that
 * is stopped (SIGSTOP, a frozen VM) and statement_timeout is enforced by
 * that same server, so without the deadline such a call waits as long as
 * the server does. The connections' statement_timeout is kept below the
 * deadline (queen_deadline_statement_timeout), so a server that answers at
 * all cancels a statement sent at once itself, with a known outcome, first.
 *
 * Knows libpq, not SQL: statements come with their text and are prepared
 * once per connection by name, like the pool's. Not thread-safe: every call
 * but the figures is made on the loop's thread. */
#ifndef QUEEN_PIPELINE_H
#define QUEEN_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "error.h"
#include "sqlcall.h"

/* What the loop's epoll carries in data.ptr for every descriptor: the
 * handler of that descriptor's readiness. */
typedef struct loop_watch {
    void (*on_ready)(struct loop_watch *self, uint32_t events);
} loop_watch;

typedef struct pipeline_set pipeline_set;

/* A kind of statement that goes one at a time engine-wide (sql_coalesce's
 * one_per_engine): how many are in flight, when the lane last changed hands,
 * and which set's turn it is (its slot + 1; 0: whoever comes first). */
typedef struct pipeline_lane {
    _Atomic(const sql_coalesce *) kind;
    atomic_int busy;
    atomic_llong since_ms;
    atomic_int turn;
} pipeline_lane;

#define PIPELINE_LANES 4
#define PIPELINE_MAX_SETS 64

typedef struct pipeline_call {
    /* Set by the caller; name is a string literal (connections keep it). */
    const char *name;
    const char *sql;
    int nparams;
    const char *const *params;
    /* Non-NULL: held until pipeline_tick and sent as one statement with the
     * other calls held with the same one (sqlcall.h, sql_coalesce). */
    const sql_coalesce *coalesce;
    /* When the call must be answered (engine_now_ms clock); 0: the set's
     * deadline after submission. A request's own budget goes here. */
    long long deadline_ms;
    void (*done)(struct pipeline_call *call); /* on the loop thread, once */
    void *ctx;
    /* Filled before done: res (caller PQclear()s), or NULL with err. */
    PGresult *res;
    bool lost;
    queen_error err;
    /* The set's. */
    struct pipeline_call *next;
    long long queued_ms;
    long long sent_ms;
    const sql_coalesce *group_kind; /* sent as (or for) a statement of this kind that others wait for */
    pipeline_lane *lane;            /* the engine-wide turn this call holds, released when it finishes */
    pipeline_set *lane_set;
    bool prepare_pending;
} pipeline_call;

typedef struct pipeline_figures {
    atomic_int connections;  /* established now */
    atomic_int in_flight;    /* statements sent, result not yet in */
    atomic_int waiting;      /* calls waiting for room on a connection */
    atomic_ulong sent_total;
    atomic_ulong timeouts_total;
    atomic_ulong reconnects_total;
    atomic_ulong coalesced_statements_total; /* shared statements that answered their calls */
    atomic_ulong coalesced_calls_total;      /* calls answered by one */
    atomic_ulong coalesced_retries_total;    /* calls run alone after their shared statement failed */
    atomic_ulong deadline_cuts_total;        /* connections cut: a sent statement passed its deadline */
    atomic_ulong recycled_total;             /* idle connections replaced after a result past 1 MiB */
    /* Not figures: what the sets of one engine share, because they share
     * this struct. The engine-wide lanes, and the sets a finished lane
     * statement hands the turn to (guarded by sets_lock). */
    pipeline_lane lanes[PIPELINE_LANES];
    atomic_flag sets_lock;
    pipeline_set *sets[PIPELINE_MAX_SETS];
} pipeline_figures;

/* Connects nconns connections (conninfo and statement timeout as the pool's,
 * the timeout lowered by queen_deadline_statement_timeout) and registers them with
 * epfd. Fails when the first cannot be made; the others are retried in the
 * background. deadline_ms: every call's default deadline (above). figures
 * may be shared by several sets (one per loop); it must outlive the set. */
pipeline_set *pipeline_open(const char *conninfo, const char *settings, int nconns, int depth,
                            int statement_timeout_ms, int acquire_timeout_ms, int group_wait_ms, int deadline_ms,
                            int epfd, pipeline_figures *figures, char *err, size_t errlen);


/* Sends the call now or queues it (a coalescable call: holds it for the
 * next pipeline_tick); done() runs later, never inside.
 *
 * A held call whose coalescing waits_for_group stays held while a statement
 * of its kind sent less than group_wait_ms ago is in flight, even when a
 * connection is free: it then goes with everything of its kind that waited
 * meanwhile, as one statement. On two cores a group's fixed cost (its
 * transaction, commit and flush, PL/pgSQL's per-transaction set-up) is most
 * of a one-op write's, so fewer, larger groups do more writes per second;
 * the wait bounds what a slow group (a row lock) costs the writes behind.
 *
 * A kind that is one_per_engine waits for a statement of its kind in flight
 * on ANY set sharing the figures, and the sets take turns: when one
 * finishes, the turn goes to the next set (round robin) whose calls wait
 * for it, which is woken through its own eventfd. Measured 2026-12-04
 * (bench/RESULTS.md): one-message pushes at c=32 over two loops formed
 * groups of 8 per loop whose partition locks made them wait for each
 * other's commit; one lane forms groups of ~16 that never contend. */
void pipeline_submit(pipeline_set *s, pipeline_call *call);

/* Sends the held coalescable calls (the loop calls it once a turn, after
 * the turn's requests have made their calls), then handles the timeouts and
 * reconnects due at now_ms; the next time it wants to run (ms, monotonic),
 * or -1 when nothing is pending. */
long long pipeline_tick(pipeline_set *s, long long now_ms);

/* Fails every waiting and in-flight call (in flight: lost), then closes. */
void pipeline_close(pipeline_set *s);

#endif
