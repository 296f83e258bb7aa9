/* The file-order invariant (sql/MANIFEST, sql/log_maintenance.sql): its
 * log_partition_dead_v1 is LANGUAGE sql, so PostgreSQL resolves its tables
 * when log_maintenance.sql is applied, which the manifest puts before
 * kv.sql creates queen.kv. A variant of log_maintenance.sql whose
 * dead-partition check gains a leg naming queen.kv therefore fails the boot
 * of a fresh database, while the shipped file boots; and the same variant is
 * accepted once kv.sql has run, which is exactly why the manifest's order is
 * the check. Each case uses a fresh database, dropped afterwards.
 * Files are read from $QUEEN_SQL_DIR (default: sql, the suite runs from the
 * repository root), in its MANIFEST's order, each sent whole (PQexec). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"

/* The comment line of the shipped log_maintenance.sql that marks where a kv leg would go. */
static const char *const marker =
    "          -- (no leg on the kv table here: it would fail the boot, see the header)";
static const char *const kv_leg =
    "          AND NOT EXISTS (SELECT 1 FROM queen.kv k WHERE k.key = p.id::text)";

static const char *sql_dir(void)
{
    const char *d = getenv("QUEEN_SQL_DIR");
    return d && *d ? d : "sql";
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The file names sql/MANIFEST lists, in its (the apply) order; *n set.
 * Caller frees. */
static char **sql_files(size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/MANIFEST", sql_dir());
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot open %s (set QUEEN_SQL_DIR)", path);
    char **names = NULL, line[512], name[512];
    size_t cnt = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        if (sscanf(line, "%511s", name) != 1)
            continue;
        names = realloc(names, (cnt + 1) * sizeof *names);
        assert_non_null(names);
        names[cnt++] = strdup(name);
    }
    fclose(f);
    *n = cnt;
    return names;
}

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static PGconn *connect_db(const char *db)
{
    const char *kw[] = {"dbname", "dbname", NULL};
    const char *val[] = {pgtest_url(), db, NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", db, PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet, NULL); /* IF NOT EXISTS notices on re-boot */
    return c;
}

static char *fresh_db(PGconn *admin)
{
    char *db = pgtest_unique("queen_fileorder_");
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    PQclear(pgtest_exec(admin, sql, 0, NULL));
    return db;
}

static void drop_db(PGconn *admin, char *db)
{
    char sql[128];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
    PQclear(pgtest_exec(admin, sql, 0, NULL));
    free(db);
}

/* Applies the files in manifest order up to and including `upto` (all when
 * NULL), with file `replace_name` replaced by `replace_text`. Returns the first failing
 * result (caller clears; *failed_file set) or NULL when all applied. */
static PGresult *apply(PGconn *c, const char *upto, const char *replace_name, const char *replace_text,
                       char *failed_file, size_t fflen)
{
    size_t n;
    char **names = sql_files(&n);
    PGresult *bad = NULL;
    bool past = false;
    for (size_t i = 0; i < n && bad == NULL && !past; i++) {
        past = upto != NULL && strcmp(names[i], upto) == 0;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", sql_dir(), names[i]);
        char *text = (replace_name && strcmp(names[i], replace_name) == 0) ? strdup(replace_text) : slurp(path);
        PGresult *r = PQexec(c, text);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
            bad = r;
            snprintf(failed_file, fflen, "%s", names[i]);
        } else {
            PQclear(r);
        }
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return bad;
}

/* The shipped log_maintenance.sql with the kv leg spliced in at the marker line. */
static char *variant_maintenance(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/log_maintenance.sql", sql_dir());
    char *text = slurp(path);
    char *at = strstr(text, marker);
    if (at == NULL)
        fail_msg("the marker line is gone from log_maintenance.sql: update this test with it");
    size_t out_len = strlen(text) - strlen(marker) + strlen(kv_leg) + 1;
    char *out = malloc(out_len);
    assert_non_null(out);
    snprintf(out, out_len, "%.*s%s%s", (int)(at - text), text, kv_leg, at + strlen(marker));
    free(text);
    return out;
}

static void a_kv_leg_in_maintenance_fails_the_boot(void **state)
{
    (void)state;
    PGconn *admin = pgtest_connect();
    char *db = fresh_db(admin);
    PGconn *c = connect_db(db);
    char *variant = variant_maintenance();
    char failed[256] = "";
    PGresult *r = apply(c, "log_maintenance.sql", "log_maintenance.sql", variant, failed, sizeof failed);
    assert_non_null(r);
    assert_string_equal(failed, "log_maintenance.sql");
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42P01"); /* undefined_table */
    assert_non_null(strstr(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), "queen.kv"));
    PQclear(r);
    free(variant);
    PQfinish(c);
    drop_db(admin, db);
    PQfinish(admin);
}

static void the_shipped_maintenance_boots_and_reboots(void **state)
{
    (void)state;
    PGconn *admin = pgtest_connect();
    char *db = fresh_db(admin);
    PGconn *c = connect_db(db);
    char failed[256] = "";
    PGresult *r = apply(c, "log_maintenance.sql", NULL, NULL, failed, sizeof failed);
    if (r != NULL)
        fail_msg("%s: %s", failed, PQresultErrorMessage(r));
    /* The whole boot, twice (every file is re-applied at every boot). */
    for (int boot = 0; boot < 2; boot++) {
        r = apply(c, NULL, NULL, NULL, failed, sizeof failed);
        if (r != NULL)
            fail_msg("boot %d, %s: %s", boot + 1, failed, PQresultErrorMessage(r));
    }
    char *lang = pgtest_scalar(c, "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
                                  " WHERE p.oid = 'queen.log_partition_dead_v1(uuid, timestamptz, integer)'::regprocedure",
                                  0, NULL);
    assert_string_equal(lang, "sql");
    free(lang);

    /* Once kv.sql has run, the very same variant is accepted: only the file
     * order catches it, which is why the manifest puts it first. */
    char *variant = variant_maintenance();
    PGresult *v = PQexec(c, variant);
    assert_int_equal(PQresultStatus(v), PGRES_COMMAND_OK);
    PQclear(v);
    free(variant);
    PQfinish(c);
    drop_db(admin, db);
    PQfinish(admin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_kv_leg_in_maintenance_fails_the_boot),
        cmocka_unit_test(the_shipped_maintenance_boots_and_reboots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
