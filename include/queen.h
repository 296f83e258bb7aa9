/* queen.h: the embedded broker (libqueen).
 *
 * An application links libqueen and gets, in-process, every capability the
 * HTTP broker gives over the wire, through the same SQL functions. */
#ifndef QUEEN_H
#define QUEEN_H

#include <stdbool.h>
#include <stddef.h>

#define QUEEN_VERSION "0.1.0"
#define QUEEN_DEFAULT_TENANT "00000000-0000-0000-0000-000000000001"

typedef enum queen_log_level {
    QUEEN_LOG_ERROR = 0,
    QUEEN_LOG_WARN,
    QUEEN_LOG_INFO,
    QUEEN_LOG_DEBUG,
} queen_log_level;

/* Every setting. Filled by queen_config_defaults() and the QUEEN_* variables
 * (see config.c for the table and the meaning of each). */
typedef struct queen_config {
    char *pg_url;
    char *bind;
    int port;
    queen_log_level log_level;
    char *dev_dir;
    int dev_pg_port;
    int schema_lock_wait_ms;
    int schema_lock_timeout_ms;
    int schema_retries;
    int pg_pool;
    int stmt_timeout_ms;
    int pg_acquire_timeout_ms;
    int http_threads;
    int max_body_bytes;
} queen_config;

/* What went wrong, in a shape every caller can branch on. */
typedef enum queen_error_category {
    QUEEN_OK = 0,
    QUEEN_ERR_BAD_REQUEST,   /* the input is wrong: 22023 and edge refusals */
    QUEEN_ERR_TOO_LARGE,     /* a size budget: 22001 */
    QUEEN_ERR_PRECONDITION,  /* a required kv op lost: 23514, detail parsed */
    QUEEN_ERR_UNAVAILABLE,   /* retry later: pool exhausted, 40001, 40P01, 08, 53, 57, 58 */
    QUEEN_ERR_MISCONFIGURED, /* class 42: the schema is older than the broker */
    QUEEN_ERR_INTERNAL,      /* anything else */
} queen_error_category;

typedef struct queen_error {
    queen_error_category category;
    char sqlstate[6]; /* "" when the error did not come from PostgreSQL */
    char reason[128]; /* opaque code: the SQL message, or an engine id */
    char detail[4400]; /* human text, or the SQL DETAIL (JSON for 23514) */
} queen_error;

typedef struct queen queen;

/* Opens the engine on cfg (copied): a connection pool to cfg->pg_url.
 * Does not apply the schema (see queen_schema_apply in the broker). NULL
 * with err filled on failure. */
queen *queen_open(const queen_config *cfg, queen_error *err);
void queen_close(queen *q);

/* A real database round trip. On success writes the server's version text
 * ("PostgreSQL 15.x") into version. */
int queen_health(queen *q, char *version, size_t len, queen_error *err);

#endif
