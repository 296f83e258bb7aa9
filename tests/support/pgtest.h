/* pgtest: what every integration test needs to talk to the private cluster.
 *
 * The harness (make test) starts a private PostgreSQL, applies the schema and
 * exports QUEEN_TEST_PG_URL; tests read it here and never hard-code a port.
 * Every helper fails the running cmocka test (fail_msg) instead of returning
 * an error, so a test body stays a list of steps. */
#ifndef QUEEN_PGTEST_H
#define QUEEN_PGTEST_H

#include <libpq-fe.h>
#include <stddef.h>

/* The conninfo of the test database; fails the test when unset. */
const char *pgtest_url(void);

/* A new connection; fails the test on error. Caller PQfinish()es it. */
PGconn *pgtest_connect(void);

/* Runs sql with text parameters (params may be NULL when nparams is 0).
 * Returns the result on PGRES_COMMAND_OK / PGRES_TUPLES_OK, fails the test
 * otherwise. Caller PQclear()s it. */
PGresult *pgtest_exec(PGconn *conn, const char *sql, int nparams, const char *const *params);

/* Like pgtest_exec but returns whatever came back, errors included. */
PGresult *pgtest_try(PGconn *conn, const char *sql, int nparams, const char *const *params);

/* First column of the first row as a malloc'd string (NULL for SQL NULL). */
char *pgtest_scalar(PGconn *conn, const char *sql, int nparams, const char *const *params);

/* First column of the first row as an integer (a count, an offset); fails
 * the test when there is no row or it is SQL NULL. */
long long pgtest_int(PGconn *conn, const char *sql, int nparams, const char *const *params);

/* For worker threads, which must not call cmocka (its failure path is not
 * thread-safe): a new connection to the test database, or NULL with libpq's
 * reason in err. */
PGconn *pgtest_connect_quiet(char *err, size_t errlen);

/* Creates an empty database named like prefix_<unique> and returns a
 * conninfo for it (malloc'd); pgtest_drop_database() removes it. */
char *pgtest_create_database(const char *prefix, char **dbname_out);
void pgtest_drop_database(const char *dbname);

/* A short random token (hex, 12 chars) so concurrent or repeated runs never
 * collide on names. Caller free()s it. */
char *pgtest_unique(const char *prefix);

#endif
