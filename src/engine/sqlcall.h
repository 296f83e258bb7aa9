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

/* The executor (sql_executor, sql_executor_set) and sql_coalesce: the
 * HTTP edge installs one, so they are queen_runtime.h's. */
#include "queen_runtime.h"

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
