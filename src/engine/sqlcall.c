/* sqlcall: see sqlcall.h. */
#include "sqlcall.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "logging.h"
#include "util.h"

/* When the next "database unavailable" line may be written, and how many
 * failures were not written since the last one. */
static atomic_llong next_unavailable_log_ms;
static atomic_long unlogged_unavailable;

/* libpq's text names the database's address and port ("connection to
 * server at ..."): it goes to the log, never into an answer. One line a
 * second at most, since a database that is down fails every request. */
void sql_log_unavailable(const char *why)
{
    long long now = engine_now_ms();
    long long due = atomic_load(&next_unavailable_log_ms);
    if (now < due || !atomic_compare_exchange_strong(&next_unavailable_log_ms, &due, now + 1000)) {
        atomic_fetch_add(&unlogged_unavailable, 1);
        return;
    }
    long more = atomic_exchange(&unlogged_unavailable, 0);
    log_warn("database unavailable: %s (%ld more since the last line)", why, more);
}

static _Thread_local const sql_executor *thread_executor;

void sql_executor_set(const sql_executor *ex)
{
    thread_executor = ex;
}

PGresult *sql_exec(queen_pool *pool, const char *name, const char *sql, int nparams, const char *const *params,
                   bool *lost, queen_error *err)
{
    return sql_exec_coalesced(pool, name, sql, nparams, params, NULL, lost, err);
}

PGresult *sql_exec_coalesced(queen_pool *pool, const char *name, const char *sql, int nparams,
                             const char *const *params, const sql_coalesce *how, bool *lost, queen_error *err)
{
    bool lost_here = false;
    if (lost == NULL)
        lost = &lost_here;
    *lost = false;
    const sql_executor *ex = thread_executor;
    PGresult *res = NULL;
    if (ex != NULL && ex->exec(ex->ctx, name, sql, nparams, params, how, &res, lost, err))
        return res;
    char msg[512];
    queen_pool_conn *c = queen_pool_acquire(pool, msg, sizeof msg);
    if (c == NULL) {
        sql_log_unavailable(msg);
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "the database is unavailable; retry");
        return NULL;
    }
    res = queen_pool_exec(c, name, sql, nparams, params);
    *lost = c->broken && c->sent;
    /* No answer from the server (libpq's own failure, or the deadline):
     * whether the statement ran is known only by whether it was sent. */
    if (c->timed_out || (PQresultStatus(res) == PGRES_FATAL_ERROR && PQresultErrorField(res, PG_DIAG_SQLSTATE) == NULL)) {
        snprintf(msg, sizeof msg, "%s", c->timed_out ? "the database did not answer within the deadline" : PQerrorMessage(c->pg));
        engine_one_line(msg);
        sql_log_unavailable(msg);
        if (!c->sent)
            queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "the database is unavailable; retry");
        else if (c->timed_out)
            queen_error_set(err, QUEEN_ERR_OUTCOME_UNKNOWN, "db_outcome_unknown",
                            "the database did not answer within the deadline (QUEEN_REQUEST_DEADLINE_MS); the "
                            "statement was cancelled and its connection dropped: its outcome is unknown");
        else
            queen_error_set(err, QUEEN_ERR_OUTCOME_UNKNOWN, "db_outcome_unknown",
                            "the database connection was lost during the statement; its outcome is unknown");
        PQclear(res);
        res = NULL;
    }
    queen_pool_release(pool, c);
    return res;
}

int sql_call_text(queen_pool *pool, const char *name, const char *sql, int nparams, const char *const *params,
                  char **out, queen_error *err)
{
    return sql_call_text_coalesced(pool, name, sql, nparams, params, NULL, out, err);
}

int sql_call_text_coalesced(queen_pool *pool, const char *name, const char *sql, int nparams,
                            const char *const *params, const sql_coalesce *how, char **out, queen_error *err)
{
    *out = NULL;
    PGresult *res = sql_exec_coalesced(pool, name, sql, nparams, params, how, NULL, err);
    if (res == NULL)
        return -1;
    int rc = 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 1) {
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
            queen_error_set(err, QUEEN_ERR_INTERNAL, "bad_result", "%s returned %d rows", name, PQntuples(res));
        else
            queen_error_from_result(err, res);
        rc = -1;
    } else if (!PQgetisnull(res, 0, 0)) {
        *out = strdup(PQgetvalue(res, 0, 0));
        if (*out == NULL) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
            rc = -1;
        }
    }
    PQclear(res);
    return rc;
}
