/* schema: applies the SQL contract (the files of sql/, compiled into the binary)
 * at every boot, in the order sql/MANIFEST lists the files, one statement at
 * a time.
 *
 * Refuses PostgreSQL older than 14 before any DDL. Brokers booting together
 * serialise on an advisory lock that is polled, never waited on forever. Each
 * statement runs with a short lock_timeout and bounded, jittered retries. */
#ifndef QUEEN_SCHEMA_H
#define QUEEN_SCHEMA_H

#include <stddef.h>

#include <libpq-fe.h>

#include "queen.h"

#define QUEEN_MIN_SERVER_VERSION 140000

/* One file of sql/, as embedded by the build (build/gen/schema_files.c):
 * queen_sql_files[] holds them in apply order, sql/MANIFEST's. */
typedef struct queen_sql_file {
    const char *name; /* "kv.sql" */
    const char *text;
    size_t len;
} queen_sql_file;

extern const queen_sql_file queen_sql_files[];
extern const size_t queen_sql_file_count;

/* One statement of a file: points into the file's text (not NUL-terminated).
 * line is the 1-based line of its first character. */
typedef struct queen_sql_statement {
    const char *text;
    size_t len;
    int line;
} queen_sql_statement;

/* Splits SQL text on top-level semicolons, honouring '...', E'...', "...",
 * $tag$...$tag$, -- and nested block comments. Statements holding only
 * whitespace and comments are dropped. *out is malloc'd (caller frees).
 * Returns 0, or -1 with err set (unterminated quote, comment or body). */
int queen_sql_split(const char *text, size_t len, queen_sql_statement **out, size_t *count, char *err, size_t errlen);

/* 0 when version_num (server_version_num) is supported, else -1 with a
 * message naming the version found. */
int queen_schema_check_version(int version_num, char *err, size_t errlen);

/* Applies every embedded file on conn (an open connection). Returns 0, or -1
 * with err naming the file and line of the failing statement. */
int queen_schema_apply_conn(PGconn *conn, const queen_config *cfg, char *err, size_t errlen);

/* Opens a connection from cfg->pg_url, applies, closes. */
int queen_schema_apply(const queen_config *cfg, char *err, size_t errlen);

#endif
