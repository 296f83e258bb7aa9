/* pool: a fixed set of libpq connections shared by threads.
 *
 * Acquire waits a bounded time for a free connection and then fails with
 * "unavailable" instead of hanging. A connection found broken (libpq lost
 * it, or it was left inside a transaction) or dead while idle (the server
 * closed it: one zero-timeout poll() at acquire) is replaced before it is
 * handed out again; connect has a timeout and TCP keepalives. Each
 * connection carries statement_timeout, so a stuck statement is cancelled by
 * the server. A server that does not answer at all (stopped, frozen: no
 * keepalive sees it) is met by the deadline: a statement unanswered nine
 * tenths of deadline_ms after it was sent is cancelled
 * (queen_conn_cancel_detached: a live server answers 57014 at once);
 * unanswered at deadline_ms, its connection is marked broken (replaced at
 * the next acquire) and the call answered with timed_out set; statement_timeout is kept below the deadline
 * (pipeline_statement_timeout's rule) so a live server cancels first.
 * Prepared statements are made lazily, once per connection, by
 * name; names must be string literals (the pointer is kept). */
#ifndef QUEEN_POOL_H
#define QUEEN_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

typedef struct queen_pool queen_pool;

typedef struct queen_pool_conn {
    PGconn *pg;
    /* Names of the statements prepared on this connection (small, linear). */
    const char **prepared;
    size_t nprepared, capprepared;
    bool broken; /* set by the user of the connection: reset before reuse */
    /* Set by queen_pool_exec: the statement was handed to the server (its
     * outcome is unknown if no answer came); no answer came by the deadline. */
    bool sent, timed_out;
    int index;
    queen_pool *pool;
} queen_pool_conn;

typedef struct queen_pool_stats {
    int size;
    int in_use;
    int waiting;
    unsigned long acquired_total;
    unsigned long timeouts_total;
    unsigned long reconnects_total;
} queen_pool_stats;

/* The connection keywords every broker connection uses (conninfo with a
 * connect timeout, keepalives and statement_timeout in the startup packet),
 * for PQconnectdbParams / PQconnectStartParams with expand_dbname 1. */
typedef struct queen_conn_params {
    char options[384], connect_timeout[16];
    const char *keys[9], *vals[9];
} queen_conn_params;
/* settings: more "-c name=value" options for the startup packet (the
 * caller's session settings, e.g. queen_config_session_settings), or NULL. */
void queen_conn_params_fill(queen_conn_params *p, const char *conninfo, int statement_timeout_ms,
                            int acquire_timeout_ms, const char *settings);
/* Asks the server to cancel what pg runs, on a detached thread of its own
 * (PQcancel blocks until the server answers: a stopped server answers when
 * it resumes, an unreachable one when connect gives up), so the caller can
 * drop pg at once. At most QUEEN_CANCEL_THREADS run at a time; past that
 * the cancel is skipped (the dropped connection still ends the statement
 * when its backend next reads the socket). Call before PQfinish(pg). */
#define QUEEN_CANCEL_THREADS 8
void queen_conn_cancel_detached(PGconn *pg);

/* A notice processor that drops notices (the broker's statements raise
 * none worth a log line; libpq would print them on stderr). */
void queen_conn_ignore_notice(void *arg, const char *message);

/* Opens `size` connections to conninfo. Fails (NULL, err set) when the first
 * connection cannot be made; later ones are retried on acquire.
 * deadline_ms: how long a sent statement may go unanswered (0: no deadline,
 * statement_timeout as given). */
queen_pool *queen_pool_open(const char *conninfo, int size, int statement_timeout_ms, int acquire_timeout_ms,
                            int deadline_ms, const char *settings, char *err, size_t errlen);

/* The statement_timeout of a connection whose statements have deadline_ms:
 * at most four fifths of it, so the server's own cancel (a known rollback)
 * comes before the broker's cut (an unknown outcome). */
int queen_deadline_statement_timeout(int statement_timeout_ms, int deadline_ms);
void queen_pool_close(queen_pool *pool);

/* A free connection, or NULL after acquire_timeout_ms (err says why:
 * "pool exhausted" or the connect error). */
queen_pool_conn *queen_pool_acquire(queen_pool *pool, char *err, size_t errlen);
void queen_pool_release(queen_pool *pool, queen_pool_conn *conn);

/* Runs a named prepared statement, preparing it on first use on this
 * connection, each step within the pool's deadline. Marks the connection
 * broken when libpq lost it or the deadline passed (timed_out; the result
 * is then an empty error result). The caller PQclear()s the result (never
 * NULL). */
PGresult *queen_pool_exec(queen_pool_conn *conn, const char *name, const char *sql, int nparams,
                          const char *const *params);

void queen_pool_get_stats(queen_pool *pool, queen_pool_stats *out);

#endif
