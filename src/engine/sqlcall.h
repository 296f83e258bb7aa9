/* sqlcall: "call a SQL function on a pool": the layer between the pool and
 * every capability. Acquire with the error filled, run one prepared
 * statement, copy its one text result, release. Knows no struct queen, so
 * the notifier, the sweeper and the quota refresh are handed a pool and
 * nothing else. */
#ifndef QUEEN_SQLCALL_H
#define QUEEN_SQLCALL_H

#include "error.h"
#include "pool.h"

/* A pooled connection, or NULL with err filled (UNAVAILABLE). */
queen_pool_conn *sql_acquire(queen_pool *pool, queen_error *err);

/* Runs one named prepared statement that returns one row of one column and
 * copies that column: *out is malloc'd text (caller frees) or NULL for SQL
 * NULL. Returns 0, or -1 with err filled (pool exhausted, SQL error). The
 * statement name must be a string literal (the pool keeps the pointer). */
int sql_call_text(queen_pool *pool, const char *name, const char *sql, int nparams, const char *const *params,
                  char **out, queen_error *err);

#endif
