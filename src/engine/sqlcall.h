/* sqlcall: "call a SQL function on a pool": the layer between the pool and
 * every capability. Acquire with the error filled, run one prepared
 * statement, copy its one text result, release. Knows no struct queen, so
 * the notifier, the sweeper and the quota refresh are handed a pool and
 * nothing else. */
#ifndef QUEEN_SQLCALL_H
#define QUEEN_SQLCALL_H

#include "error.h"
#include "pool.h"

#include <stdbool.h>

/* Who runs a statement for the calling thread instead of the pool: the HTTP
 * edge's event loop installs one, so an engine call made from a request's
 * fiber sends its statement on the loop's pipelined connections and yields
 * until the result is in, while the loop serves other requests. exec
 * returns false when it cannot serve this call (not on a fiber): the pool
 * then runs it. Otherwise it fills *res (the caller PQclear()s it) or
 * returns with *res NULL and err filled; *lost says the connection died
 * under the statement, so whether it took effect is unknown. */
/* How calls of one read-only statement may share a round trip: an executor
 * that holds several such calls at once may send them as this one statement
 * instead. Its parameter i is the JSON array of the calls' parameters i, and
 * it returns one row per call, in call order, holding the columns (at most
 * 8) that call's own statement would have returned. When the shared statement
 * fails, each call is run on its own, so every call keeps its own verdict;
 * only statements whose calls may share a transaction qualify (reads). */
typedef struct sql_coalesce {
    const char *name;        /* the shared statement's name (a string literal) */
    const char *sql;         /* the shared statement */
    const char *param_kinds; /* per parameter: 'j' JSON text placed as is, 's' text placed as a JSON string */
    int max_calls;           /* at most this many calls in one */
    /* Calls that arrive while a statement of this kind, sent less than the
     * set's group wait ago, is in flight wait for it (pipeline.h). */
    bool waits_for_group;
    /* With waits_for_group: the wait is for a statement of this kind in
     * flight anywhere in the engine, not only on the caller's event loop,
     * and loops take turns sending one. For statements that serialise on the
     * same rows whichever loop sends them (pushes on their partitions' row
     * locks): two loops' groups in flight at once only wait for each other's
     * commit, and each is half the size (pipeline.h). */
    bool one_per_engine;
} sql_coalesce;

typedef struct sql_executor {
    bool (*exec)(void *ctx, const char *name, const char *sql, int nparams, const char *const *params,
                 const sql_coalesce *coalesce, PGresult **res, bool *lost, queen_error *err);
    void *ctx;
} sql_executor;

/* Installs ex for the calling thread (NULL removes it); ex must outlive it. */
void sql_executor_set(const sql_executor *ex);

/* Logs why the database could not be reached: at most one line a second
 * (with how many were not written), since a database that is down fails
 * every request. libpq's text names the database's address: it goes to
 * the log, never into an answer. */
void sql_log_unavailable(const char *why);

/* Runs one named prepared statement on this thread's executor, or on a
 * pooled connection. NULL with err filled when no connection could be had
 * (UNAVAILABLE); else the result, which the caller PQclear()s and which may
 * be an error result. *lost as above (may be NULL). The statement name must
 * be a string literal (connections keep the pointer). */
PGresult *sql_exec(queen_pool *pool, const char *name, const char *sql, int nparams, const char *const *params,
                   bool *lost, queen_error *err);

/* sql_exec for a statement whose calls may be coalesced as `how` says (see
 * sql_coalesce); the pool, which holds one call at a time, runs it alone. */
PGresult *sql_exec_coalesced(queen_pool *pool, const char *name, const char *sql, int nparams,
                             const char *const *params, const sql_coalesce *how, bool *lost, queen_error *err);

/* sql_call_text with sql_exec_coalesced underneath. */
int sql_call_text_coalesced(queen_pool *pool, const char *name, const char *sql, int nparams,
                            const char *const *params, const sql_coalesce *how, char **out, queen_error *err);

/* Runs one named prepared statement that returns one row of one column and
 * copies that column: *out is malloc'd text (caller frees) or NULL for SQL
 * NULL. Returns 0, or -1 with err filled (pool exhausted, SQL error). The
 * statement name must be a string literal (the pool keeps the pointer). */
int sql_call_text(queen_pool *pool, const char *name, const char *sql, int nparams, const char *const *params,
                  char **out, queen_error *err);

#endif
