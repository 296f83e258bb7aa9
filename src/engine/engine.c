/* engine: queen_open/queen_close, the error mapping every capability shares,
 * and health. Never builds SQL against queen.kv (kv.c calls the functions). */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "logging.h"

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

queen *queen_open(const queen_config *cfg, queen_error *err)
{
    queen *q = calloc(1, sizeof *q);
    if (q == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        return NULL;
    }
    q->cfg = *cfg;
    q->cfg.pg_url = dup_or_empty(cfg->pg_url);
    q->cfg.bind = dup_or_empty(cfg->bind);
    q->cfg.dev_dir = dup_or_empty(cfg->dev_dir);
    if (q->cfg.pg_pool == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        q->cfg.pg_pool = cores > 0 && cores * 4 > 8 ? (int)(cores * 4) : 8;
    }
    char msg[512];
    q->pool = queen_pool_open(q->cfg.pg_url, q->cfg.pg_pool, q->cfg.stmt_timeout_ms, q->cfg.pg_acquire_timeout_ms,
                              msg, sizeof msg);
    if (q->pool == NULL) {
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", msg);
        queen_close(q);
        return NULL;
    }
    return q;
}

void queen_close(queen *q)
{
    if (q == NULL)
        return;
    queen_pool_close(q->pool);
    free(q->cfg.pg_url);
    free(q->cfg.bind);
    free(q->cfg.dev_dir);
    free(q);
}

void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
{
    if (err == NULL)
        return;
    err->category = cat;
    err->sqlstate[0] = '\0';
    snprintf(err->reason, sizeof err->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

/* One table: SQLSTATE (exact, or class when two characters) -> category.
 * First match wins, so exact codes precede their class. */
static const struct {
    const char *state;
    queen_error_category category;
} sqlstate_map[] = {
    {"22001", QUEEN_ERR_TOO_LARGE},   {"23514", QUEEN_ERR_PRECONDITION}, {"22", QUEEN_ERR_BAD_REQUEST},
    {"40001", QUEEN_ERR_UNAVAILABLE}, {"40P01", QUEEN_ERR_UNAVAILABLE},  {"08", QUEEN_ERR_UNAVAILABLE},
    {"53", QUEEN_ERR_UNAVAILABLE},    {"57", QUEEN_ERR_UNAVAILABLE},     {"58", QUEEN_ERR_UNAVAILABLE},
    {"42", QUEEN_ERR_MISCONFIGURED},
};

void queen_error_from_result(queen_error *err, const PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    queen_error_category cat = QUEEN_ERR_INTERNAL;
    if (state == NULL) {
        /* No SQLSTATE: libpq itself failed (connection lost). */
        cat = QUEEN_ERR_UNAVAILABLE;
    } else {
        for (size_t i = 0; i < sizeof sqlstate_map / sizeof sqlstate_map[0]; i++) {
            if (strncmp(state, sqlstate_map[i].state, strlen(sqlstate_map[i].state)) == 0) {
                cat = sqlstate_map[i].category;
                break;
            }
        }
    }
    err->category = cat;
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", state ? state : "");
    snprintf(err->reason, sizeof err->reason, "%s", msg ? msg : "db_error");
    snprintf(err->detail, sizeof err->detail, "%s", detail ? detail : (msg ? "" : PQresultErrorMessage(res)));
}

queen_pool_conn *queen_acquire(queen *q, queen_error *err)
{
    char msg[512];
    queen_pool_conn *c = queen_pool_acquire(q->pool, msg, sizeof msg);
    if (c == NULL)
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", msg);
    return c;
}

int queen_health(queen *q, char *version, size_t len, queen_error *err)
{
    queen_pool_conn *c = queen_acquire(q, err);
    if (c == NULL)
        return -1;
    PGresult *res = queen_pool_exec(c, "queen_health", "SELECT 'PostgreSQL ' || current_setting('server_version')",
                                    0, NULL);
    int rc = 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        queen_error_from_result(err, res);
        rc = -1;
    } else {
        snprintf(version, len, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    queen_pool_release(q->pool, c);
    return rc;
}
