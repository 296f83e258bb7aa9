/* pgtest: connection and query helpers for integration tests (see pgtest.h). */
#include "pgtest.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *pgtest_url(void)
{
    const char *url = getenv("QUEEN_TEST_PG_URL");
    if (url == NULL || *url == '\0')
        fail_msg("QUEEN_TEST_PG_URL is not set: run the suite through make test");
    return url;
}

PGconn *pgtest_connect(void)
{
    PGconn *conn = PQconnectdb(pgtest_url());
    if (PQstatus(conn) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "connect: %s", PQerrorMessage(conn));
        PQfinish(conn);
        fail_msg("%s", msg);
    }
    return conn;
}

PGresult *pgtest_try(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    return PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
}

PGresult *pgtest_exec(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    PGresult *res = pgtest_try(conn, sql, nparams, params);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "query failed: %s\n  sql: %.300s", PQresultErrorMessage(res), sql);
        PQclear(res);
        fail_msg("%s", msg);
    }
    return res;
}

char *pgtest_scalar(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    PGresult *res = pgtest_exec(conn, sql, nparams, params);
    char *out = NULL;
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
        out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return out;
}

long long pgtest_int(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    char *s = pgtest_scalar(conn, sql, nparams, params);
    if (s == NULL)
        fail_msg("no integer (no row or NULL) from: %.300s", sql);
    long long n = atoll(s);
    free(s);
    return n;
}

PGconn *pgtest_connect_quiet(char *err, size_t errlen)
{
    const char *url = getenv("QUEEN_TEST_PG_URL");
    PGconn *conn = PQconnectdb(url ? url : "");
    if (PQstatus(conn) == CONNECTION_OK)
        return conn;
    snprintf(err, errlen, "%s", PQerrorMessage(conn));
    PQfinish(conn);
    return NULL;
}

char *pgtest_unique(const char *prefix)
{
    static unsigned long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long mix = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 20) ^ (++counter * 2654435761UL);
    size_t n = strlen(prefix) + 16;
    char *out = malloc(n);
    if (out == NULL)
        fail_msg("out of memory");
    snprintf(out, n, "%s%012lx", prefix, mix & 0xffffffffffffUL);
    return out;
}

char *pgtest_create_database(const char *prefix, char **dbname_out)
{
    char *name = pgtest_unique(prefix);
    PGconn *admin = pgtest_connect();
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
    PQclear(pgtest_exec(admin, sql, 0, NULL));
    PQfinish(admin);

    /* Same server and user as the suite's database, another dbname. */
    PQconninfoOption *opts = PQconninfoParse(pgtest_url(), NULL);
    if (opts == NULL)
        fail_msg("cannot parse QUEEN_TEST_PG_URL");
    char out[1024] = "";
    size_t used = 0;
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        if (o->val == NULL || o->val[0] == '\0' || strcmp(o->keyword, "dbname") == 0)
            continue;
        used += (size_t)snprintf(out + used, sizeof out - used, "%s='%s' ", o->keyword, o->val);
    }
    snprintf(out + used, sizeof out - used, "dbname='%s'", name);
    PQconninfoFree(opts);
    if (dbname_out != NULL)
        *dbname_out = name;
    else
        free(name);
    return strdup(out);
}

void pgtest_drop_database(const char *dbname)
{
    PGconn *admin = pgtest_connect();
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", dbname);
    PQclear(pgtest_exec(admin, sql, 0, NULL));
    PQfinish(admin);
}
