/* engine: queen_open/queen_close, the error door every capability shares
 * (SQLSTATE -> category, the precondition DETAIL), the one path that runs a
 * SQL function and copies its text, in-flight call accounting, and health.
 * Never builds SQL against the kv table (kv.c calls the SQL functions), and
 * never renders JSON that PostgreSQL already rendered. */
#include "engine.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "logging.h"
#include "notify.h"
#include "quota.h"
#include "sweeper.h"

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

queen *queen_open(const queen_config *cfg, queen_error *err)
{
    if (cfg == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "bad_config", "queen_open: cfg is NULL");
        return NULL;
    }
    queen *q = calloc(1, sizeof *q);
    if (q == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        return NULL;
    }
    pthread_mutex_init(&q->idle_mu, NULL);
    pthread_cond_init(&q->idle_cv, NULL);
    q->cfg = *cfg;
    queen_config_resolve(&q->cfg); /* NULL strings now point at the table's text */
    q->cfg.pg_url = dup_or_empty(q->cfg.pg_url);
    q->cfg.bind = dup_or_empty(q->cfg.bind);
    q->cfg.dev_dir = dup_or_empty(q->cfg.dev_dir);
    char msg[512];
    q->pool = queen_pool_open(q->cfg.pg_url, q->cfg.pg_pool, q->cfg.stmt_timeout_ms, q->cfg.pg_acquire_timeout_ms,
                              msg, sizeof msg);
    if (q->pool == NULL) {
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", msg);
        queen_close(q);
        return NULL;
    }
    /* The notifier never fails open: without its LISTEN connection waiters
     * still re-check on their own cadence, and it keeps reconnecting. */
    q->notifier = notifier_start(q->cfg.pg_url, msg, sizeof msg);
    if (q->notifier == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "notifier_start", "%s", msg);
        queen_close(q);
        return NULL;
    }
    q->quota = quota_start(q, msg, sizeof msg);
    if (q->quota == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "quota_start", "%s", msg);
        queen_close(q);
        return NULL;
    }
    if (q->cfg.sweeper) {
        q->sweeper = sweeper_start(q, msg, sizeof msg);
        if (q->sweeper == NULL) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "sweeper_start", "%s", msg);
            queen_close(q);
            return NULL;
        }
    }
    return q;
}

/* Order matters: new calls are refused, then waiters are fired (a pop
 * blocked in a long poll is an in-flight call that would otherwise hold
 * close for its whole timeout), then close waits for every in-flight call
 * to leave (queen_stats_json reads the sweeper, so it stops after), and only
 * then are the sweeper, the notifier and the pool freed. */
void queen_close(queen *q)
{
    if (q == NULL)
        return;
    atomic_store(&q->closing, true);
    if (q->notifier)
        notifier_shutdown(q->notifier);
    pthread_mutex_lock(&q->idle_mu);
    while (atomic_load(&q->active) > 0)
        pthread_cond_wait(&q->idle_cv, &q->idle_mu);
    pthread_mutex_unlock(&q->idle_mu);
    sweeper_stop(q->sweeper);
    q->sweeper = NULL;
    quota_stop(q->quota); /* its refresh uses the pool */
    q->quota = NULL;
    notifier_free(q->notifier);
    queen_pool_close(q->pool);
    pthread_cond_destroy(&q->idle_cv);
    pthread_mutex_destroy(&q->idle_mu);
    free(q->cfg.pg_url);
    free(q->cfg.bind);
    free(q->cfg.dev_dir);
    free(q);
}

bool engine_enter(queen *q, queen_error *err)
{
    if (q == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "no_handle", "the queen handle is NULL");
        return false;
    }
    atomic_fetch_add(&q->active, 1);
    if (atomic_load(&q->closing)) {
        engine_leave(q);
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "closing", "the engine is closing");
        return false;
    }
    return true;
}

/* The last call out while closing wakes queen_close. The broadcast is made
 * under idle_mu, which queen_close holds between its check and its wait,
 * so the wake-up cannot fall between them. */
void engine_leave(queen *q)
{
    if (atomic_fetch_sub(&q->active, 1) == 1 && atomic_load(&q->closing)) {
        pthread_mutex_lock(&q->idle_mu);
        pthread_cond_broadcast(&q->idle_cv);
        pthread_mutex_unlock(&q->idle_mu);
    }
}

const char *engine_tenant(const char *tenant)
{
    return tenant && *tenant ? tenant : QUEEN_DEFAULT_TENANT;
}

void engine_one_line(char *s)
{
    size_t n = 0;
    for (char *p = s; *p; p++) {
        char c = (*p == '\n' || *p == '\t' || *p == '\r') ? ' ' : *p;
        if (c == ' ' && n > 0 && s[n - 1] == ' ')
            continue; /* "unexpectedly\n\tThis" reads as one space */
        s[n++] = c;
    }
    while (n > 0 && s[n - 1] == ' ')
        n--;
    s[n] = '\0';
}

long long engine_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
{
    if (err == NULL)
        return;
    memset(&err->precondition, 0, sizeof err->precondition);
    err->category = cat;
    err->sqlstate[0] = '\0';
    snprintf(err->reason, sizeof err->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

/* One table: SQLSTATE (exact, or class when two characters) -> category.
 * First match wins, so exact codes precede their class.
 *   22001 string too long, 54000 program limit (a jsonb beyond PostgreSQL's
 *   limits): the input is too large, not malformed.
 *   23514 is only raised by kv_apply_v1 for a required op that lost.
 *   57P01..57P03 (terminated, crash shutdown, cannot connect now) and 57014
 *   (statement_timeout) are in class 57: retry later. */
static const struct {
    const char *state;
    queen_error_category category;
} sqlstate_map[] = {
    {"22001", QUEEN_ERR_TOO_LARGE},   {"54000", QUEEN_ERR_TOO_LARGE},   {"23514", QUEEN_ERR_PRECONDITION},
    {"22", QUEEN_ERR_BAD_REQUEST},    {"40001", QUEEN_ERR_UNAVAILABLE}, {"40P01", QUEEN_ERR_UNAVAILABLE},
    {"08", QUEEN_ERR_UNAVAILABLE},    {"53", QUEEN_ERR_UNAVAILABLE},    {"57", QUEEN_ERR_UNAVAILABLE},
    {"58", QUEEN_ERR_UNAVAILABLE},    {"42", QUEEN_ERR_MISCONFIGURED},
};

queen_error_category queen_sqlstate_category(const char *state)
{
    if (state == NULL || *state == '\0')
        return QUEEN_ERR_UNAVAILABLE; /* no SQLSTATE: libpq lost the connection */
    for (size_t i = 0; i < sizeof sqlstate_map / sizeof sqlstate_map[0]; i++)
        if (strncmp(state, sqlstate_map[i].state, strlen(sqlstate_map[i].state)) == 0)
            return sqlstate_map[i].category;
    return QUEEN_ERR_INTERNAL;
}

/* Skips a JSON string starting at p[0] == '"'; returns the byte after the
 * closing quote, or NULL when it never closes. */
static const char *skip_string(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\') {
            if (*++p == '\0')
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* Skips one JSON value; returns the byte after it, or NULL when unterminated. */
static const char *skip_value(const char *p)
{
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                p = skip_string(p);
                if (p == NULL)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    const char *start = p;
    while (*p && !strchr(",}] \t\r\n", *p))
        p++;
    return p > start ? p : NULL;
}

const char *json_raw_member(const char *text, const char *name, size_t *len)
{
    if (text == NULL)
        return NULL;
    size_t nlen = strlen(name);
    const char *p = skip_ws(text);
    if (*p++ != '{')
        return NULL;
    for (;;) {
        p = skip_ws(p);
        if (*p != '"')
            return NULL;
        const char *kstart = p + 1;
        p = skip_string(p);
        if (p == NULL)
            return NULL;
        /* Raw key bytes: the names looked up here never need escapes. */
        bool match = (size_t)(p - 1 - kstart) == nlen && memcmp(kstart, name, nlen) == 0;
        p = skip_ws(p);
        if (*p++ != ':')
            return NULL;
        p = skip_ws(p);
        const char *vstart = p;
        p = skip_value(p);
        if (p == NULL)
            return NULL;
        if (match) {
            *len = (size_t)(p - vstart);
            return vstart;
        }
        p = skip_ws(p);
        if (*p++ != ',')
            return NULL;
    }
}

/* Decodes the JSON string member `name` of text into out (truncated to
 * cap). Leaves out empty when the member is absent or not a string. */
static void member_string(const char *text, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t len;
    const char *raw = json_raw_member(text, name, &len);
    if (raw == NULL || *raw != '"')
        return;
    json_t *s = json_loadb(raw, len, JSON_DECODE_ANY, NULL);
    if (json_is_string(s))
        snprintf(out, cap, "%s", json_string_value(s));
    json_decref(s);
}

static long long member_int(const char *text, const char *name, long long fallback)
{
    size_t len;
    const char *raw = json_raw_member(text, name, &len);
    if (raw == NULL || len == 0 || len > 30)
        return fallback;
    char buf[32];
    memcpy(buf, raw, len);
    buf[len] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    return *end == '\0' ? v : fallback;
}

/* The DETAIL of a 23514 from kv_apply_v1: {index, op, ns, key, reason,
 * version, value[, valueOmitted]}. The value is copied as PostgreSQL
 * rendered it, so a big number or 0.1 arrives exactly as stored. */
static void parse_precondition(queen_error *err, const char *detail)
{
    memset(&err->precondition, 0, sizeof err->precondition);
    err->precondition.index = (int)member_int(detail, "index", -1);
    member_string(detail, "op", err->precondition.op, sizeof err->precondition.op);
    member_string(detail, "ns", err->precondition.ns, sizeof err->precondition.ns);
    member_string(detail, "key", err->precondition.key, sizeof err->precondition.key);
    member_string(detail, "reason", err->precondition.reason, sizeof err->precondition.reason);
    err->precondition.version = member_int(detail, "version", 0);
    size_t len;
    const char *raw = json_raw_member(detail, "value", &len);
    if (raw == NULL || len >= sizeof err->precondition.value)
        snprintf(err->precondition.value, sizeof err->precondition.value, "null");
    else {
        memcpy(err->precondition.value, raw, len);
        err->precondition.value[len] = '\0';
    }
}

void queen_error_from_fields(queen_error *err, const char *state, const char *msg, const char *detail)
{
    if (err == NULL)
        return;
    err->category = queen_sqlstate_category(state);
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", state ? state : "");
    snprintf(err->reason, sizeof err->reason, "%s", msg && *msg ? msg : "db_error");
    snprintf(err->detail, sizeof err->detail, "%s", detail ? detail : "");
    memset(&err->precondition, 0, sizeof err->precondition);
    if (err->category == QUEEN_ERR_PRECONDITION)
        parse_precondition(err, detail);
}

void queen_error_from_result(queen_error *err, const PGresult *res)
{
    if (err == NULL)
        return;
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    if (state == NULL) {
        /* libpq's own failure (no server error): its message, on one
         * line, is the detail. */
        char text[512];
        snprintf(text, sizeof text, "%s", PQresultErrorMessage(res));
        engine_one_line(text);
        queen_error_from_fields(err, NULL, "db_unavailable", text[0] ? text : "connection lost");
        return;
    }
    queen_error_from_fields(err, state, msg, detail);
}

queen_pool_conn *queen_acquire(queen *q, queen_error *err)
{
    char msg[512];
    queen_pool_conn *c = queen_pool_acquire(q->pool, msg, sizeof msg);
    if (c == NULL)
        queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "db_unavailable", "%s", msg);
    return c;
}

int queen_call_text(queen *q, const char *name, const char *sql, int nparams, const char *const *params, char **out,
                    queen_error *err)
{
    *out = NULL;
    queen_pool_conn *c = queen_acquire(q, err);
    if (c == NULL)
        return -1;
    PGresult *res = queen_pool_exec(c, name, sql, nparams, params);
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
    queen_pool_release(q->pool, c);
    return rc;
}

int queen_health(queen *q, char *version, size_t len, queen_error *err)
{
    if (!engine_enter(q, err))
        return -1;
    char *text = NULL;
    int rc = queen_call_text(q, "queen_health", "SELECT 'PostgreSQL ' || current_setting('server_version')", 0,
                             NULL, &text, err);
    if (rc == 0 && version != NULL && len > 0)
        snprintf(version, len, "%s", text ? text : "");
    free(text);
    engine_leave(q);
    return rc;
}
