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

#include <libpq-fe.h>

#include "error.h"
#include "sqlcall.h"

/* The declarations (pipeline_call, pipeline_open, pipeline_submit, ...)
 * are the HTTP edge's too: queen_runtime.h. */
#include "queen_runtime.h"

#endif
