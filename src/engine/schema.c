/* schema: statement splitter and the boot procedure
 * (see schema.h). Applies the contract; never edits it. */
#include "schema.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logging.h"

/* Any 64-bit constant works; it only has to be the same in every broker. */
#define SCHEMA_ADVISORY_KEY "5863427610457722881"

/* Skips a block comment opening at text[*i] (comments nest in PostgreSQL).
 * Returns -1 when it never closes. */
static int skip_block_comment(const char *text, size_t len, size_t *i, int *line)
{
    int depth = 1;
    *i += 2;
    while (*i < len && depth > 0) {
        if (text[*i] == '\n')
            (*line)++;
        if (*i + 1 < len && text[*i] == '/' && text[*i + 1] == '*') {
            depth++;
            *i += 2;
        } else if (*i + 1 < len && text[*i] == '*' && text[*i + 1] == '/') {
            depth--;
            *i += 2;
        } else {
            (*i)++;
        }
    }
    return depth == 0 ? 0 : -1;
}

/* Length of a dollar-quote tag starting at s[0] == '$' ("$$" -> 2, "$fn$" ->
 * 4), or 0 when this '$' does not open a tag (e.g. a $1 parameter). */
static size_t dollar_tag_len(const char *s, size_t len)
{
    size_t i = 1;
    if (i < len && s[i] == '$')
        return 2;
    if (i >= len || !(isalpha((unsigned char)s[i]) || s[i] == '_'))
        return 0;
    while (i < len && (isalnum((unsigned char)s[i]) || s[i] == '_'))
        i++;
    return (i < len && s[i] == '$') ? i + 1 : 0;
}

static int push_statement(queen_sql_statement **out, size_t *count, size_t *cap, const char *text, size_t len,
                          int line)
{
    if (len == 0) /* a lone ';' */
        return 0;
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        queen_sql_statement *n = realloc(*out, ncap * sizeof *n);
        if (n == NULL)
            return -1;
        *out = n;
        *cap = ncap;
    }
    (*out)[(*count)++] = (queen_sql_statement){text, len, line};
    return 0;
}

int queen_sql_split(const char *text, size_t len, queen_sql_statement **out, size_t *count, char *err, size_t errlen)
{
    *out = NULL;
    *count = 0;
    size_t cap = 0, start = 0, i = 0;
    int line = 1, start_line = 1;
    bool at_start = true; /* still in the whitespace before a statement */

    while (i < len) {
        char c = text[i];
        if (at_start) {
            if (isspace((unsigned char)c)) {
                if (c == '\n')
                    line++;
                i++;
                continue;
            }
            /* A comment before a statement is not part of it: its line is
             * the first line of real SQL. */
            if (c == '-' && i + 1 < len && text[i + 1] == '-') {
                while (i < len && text[i] != '\n')
                    i++;
                continue;
            }
            if (c == '/' && i + 1 < len && text[i + 1] == '*') {
                int open_line = line;
                if (skip_block_comment(text, len, &i, &line) != 0) {
                    snprintf(err, errlen, "line %d: unterminated block comment", open_line);
                    goto fail;
                }
                continue;
            }
            at_start = false;
            start = i;
            start_line = line;
        }
        if (c == '\n') {
            line++;
            i++;
        } else if (c == '-' && i + 1 < len && text[i + 1] == '-') {
            while (i < len && text[i] != '\n')
                i++;
        } else if (c == '/' && i + 1 < len && text[i + 1] == '*') {
            int open_line = line;
            if (skip_block_comment(text, len, &i, &line) != 0) {
                snprintf(err, errlen, "line %d: unterminated block comment", open_line);
                goto fail;
            }
        } else if (c == '\'' || c == '"') {
            /* E'...' strings allow backslash escapes; plain ones only ''. */
            bool backslash = c == '\'' && i > 0 && (text[i - 1] == 'E' || text[i - 1] == 'e') &&
                             (i < 2 || !(isalnum((unsigned char)text[i - 2]) || text[i - 2] == '_'));
            int open_line = line;
            i++;
            for (;;) {
                if (i >= len) {
                    snprintf(err, errlen, "line %d: unterminated %s", open_line,
                             c == '"' ? "quoted identifier" : "string literal");
                    goto fail;
                }
                if (text[i] == '\n')
                    line++;
                if (backslash && text[i] == '\\') {
                    i += 2;
                    continue;
                }
                if (text[i] == c) {
                    if (i + 1 < len && text[i + 1] == c) {
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                i++;
            }
        } else if (c == '$' && (i == 0 || !(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_'))) {
            size_t tag = dollar_tag_len(text + i, len - i);
            if (tag == 0) {
                i++;
                continue;
            }
            int open_line = line;
            const char *open = text + i;
            i += tag;
            for (;;) {
                if (i + tag > len) {
                    snprintf(err, errlen, "line %d: unterminated dollar-quoted body %.*s", open_line, (int)tag,
                             open);
                    goto fail;
                }
                if (text[i] == '$' && memcmp(text + i, open, tag) == 0) {
                    i += tag;
                    break;
                }
                if (text[i] == '\n')
                    line++;
                i++;
            }
        } else if (c == ';') {
            if (push_statement(out, count, &cap, text + start, i - start, start_line) != 0)
                goto oom;
            i++;
            at_start = true;
        } else {
            i++;
        }
    }
    if (!at_start && push_statement(out, count, &cap, text + start, len - start, start_line) != 0)
        goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(*out);
    *out = NULL;
    *count = 0;
    return -1;
}

int queen_schema_check_version(int version_num, char *err, size_t errlen)
{
    if (version_num >= QUEEN_MIN_SERVER_VERSION)
        return 0;
    snprintf(err, errlen, "PostgreSQL %d.%d found (server_version_num %d); Queen needs 14 or newer",
             version_num / 10000, version_num >= 100000 ? version_num % 10000 : (version_num / 100) % 100,
             version_num);
    return -1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static unsigned jitter_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned)(ts.tv_nsec ^ (getpid() << 16));
}

/* Runs sql that returns one value; copies it into buf. */
static int query_value(PGconn *conn, const char *sql, char *buf, size_t buflen, char *err, size_t errlen)
{
    PGresult *res = PQexec(conn, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        snprintf(err, errlen, "%s: %s", sql, PQresultErrorMessage(res));
        PQclear(res);
        return -1;
    }
    snprintf(buf, buflen, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}

static int exec_ok(PGconn *conn, const char *sql, char *err, size_t errlen)
{
    PGresult *res = PQexec(conn, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!ok)
        snprintf(err, errlen, "%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
    return ok ? 0 : -1;
}

static int take_boot_lock(PGconn *conn, const queen_config *cfg, unsigned *seed, char *err, size_t errlen)
{
    long deadline = now_ms() + cfg->schema_lock_wait_ms;
    char got[8];
    for (;;) {
        if (query_value(conn, "SELECT pg_try_advisory_lock(" SCHEMA_ADVISORY_KEY ")", got, sizeof got, err,
                        errlen) != 0)
            return -1;
        if (strcmp(got, "t") == 0)
            return 0;
        if (now_ms() >= deadline) {
            snprintf(err, errlen, "another broker held the schema boot lock for %d ms (QUEEN_SCHEMA_LOCK_WAIT_MS)",
                     cfg->schema_lock_wait_ms);
            return -1;
        }
        sleep_ms(50 + rand_r(seed) % 100);
    }
}

/* SQLSTATEs where a retry of the same statement can succeed. */
static bool retryable(const char *sqlstate)
{
    return sqlstate != NULL && (strcmp(sqlstate, "55P03") == 0 || strcmp(sqlstate, "40P01") == 0 ||
                                strcmp(sqlstate, "40001") == 0);
}

static int line_of_position(const queen_sql_statement *st, const char *pos)
{
    int line = st->line;
    long p = pos ? strtol(pos, NULL, 10) : 0; /* 1-based character offset */
    for (long i = 0; i + 1 < p && (size_t)i < st->len; i++)
        if (st->text[i] == '\n')
            line++;
    return line;
}

static int apply_statement(PGconn *conn, const queen_config *cfg, const char *file, const queen_sql_statement *st,
                           unsigned *seed, char *err, size_t errlen)
{
    char *sql = strndup(st->text, st->len);
    if (sql == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    for (int attempt = 0;; attempt++) {
        PGresult *res = PQexec(conn, sql);
        ExecStatusType status = PQresultStatus(res);
        if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
            PQclear(res);
            rc = 0;
            break;
        }
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (retryable(state) && attempt < cfg->schema_retries) {
            long backoff = (50L << attempt) + rand_r(seed) % 100;
            log_warn("schema: sql/%s:%d: %s (SQLSTATE %s), retry %d in %ld ms", file, st->line,
                     PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY), state, attempt + 1, backoff);
            PQclear(res);
            sleep_ms(backoff);
            continue;
        }
        const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        snprintf(err, errlen, "sql/%s:%d: %s (SQLSTATE %s)", file,
                 line_of_position(st, PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION)),
                 msg ? msg : PQerrorMessage(conn), state ? state : "none");
        PQclear(res);
        break;
    }
    free(sql);
    return rc;
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

int queen_schema_apply_conn(PGconn *conn, const queen_config *cfg, char *err, size_t errlen)
{
    char buf[64];
    if (query_value(conn, "SELECT current_setting('server_version_num')::int", buf, sizeof buf, err, errlen) != 0)
        return -1;
    if (queen_schema_check_version(atoi(buf), err, errlen) != 0)
        return -1;

    PQnoticeProcessor old = PQsetNoticeProcessor(conn, ignore_notice, NULL);
    unsigned seed = jitter_seed();
    char settings[128];
    snprintf(settings, sizeof settings, "SET lock_timeout = %d", cfg->schema_lock_timeout_ms);
    int rc = -1;
    if (exec_ok(conn, settings, err, errlen) != 0 || take_boot_lock(conn, cfg, &seed, err, errlen) != 0)
        goto out;

    long started = now_ms();
    size_t total = 0;
    for (size_t f = 0; f < queen_sql_file_count; f++) {
        /* In the build's order, sql/MANIFEST's (scripts/embed.sh). */
        const queen_sql_file *file = &queen_sql_files[f];
        queen_sql_statement *stmts = NULL;
        size_t n = 0;
        char split_err[256];
        if (queen_sql_split(file->text, file->len, &stmts, &n, split_err, sizeof split_err) != 0) {
            snprintf(err, errlen, "sql/%s: %s", file->name, split_err);
            goto unlock;
        }
        for (size_t s = 0; s < n; s++) {
            if (apply_statement(conn, cfg, file->name, &stmts[s], &seed, err, errlen) != 0) {
                free(stmts);
                goto unlock;
            }
        }
        total += n;
        free(stmts);
    }
    log_info("schema: applied %zu files, %zu statements in %ld ms", queen_sql_file_count, total,
             now_ms() - started);
    rc = 0;
unlock : {
    char ignored[256];
    exec_ok(conn, "SELECT pg_advisory_unlock(" SCHEMA_ADVISORY_KEY ")", ignored, sizeof ignored);
    exec_ok(conn, "RESET lock_timeout", ignored, sizeof ignored);
}
out:
    PQsetNoticeProcessor(conn, old, NULL);
    return rc;
}

int queen_schema_apply(const queen_config *cfg, char *err, size_t errlen)
{
    PGconn *conn = PQconnectdb(cfg->pg_url ? cfg->pg_url : "");
    if (PQstatus(conn) != CONNECTION_OK) {
        snprintf(err, errlen, "connect: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return -1;
    }
    int rc = queen_schema_apply_conn(conn, cfg, err, errlen);
    PQfinish(conn);
    return rc;
}
