/* Schema boot against a real PostgreSQL: applies on an empty database,
 * re-applies without changing the catalog, upgrades a database that holds a
 * replaced function form without leaving it, serialises concurrent brokers,
 * and names the file and line of a failing statement. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "pgtest.h"

/* Every catalog row the schema owns, with OIDs, so a drop-and-recreate shows
 * up as a difference even when the definition is the same. */
static const char *const catalog_snapshot =
    "SELECT string_agg(x, E'\\n' ORDER BY x) FROM ("
    " SELECT 'class '||c.oid||' '||c.relname||' '||c.relkind::text||' '||coalesce(c.reloptions::text,'')"
    "        ||' '||coalesce(c.relacl::text,'') FROM pg_class c WHERE relnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'attr '||a.attrelid||' '||a.attname||' '||a.atttypid||' '||a.attnum||' '||a.attcollation"
    "        ||' '||a.attnotnull||' '||a.attgenerated::text FROM pg_attribute a JOIN pg_class c ON c.oid=a.attrelid"
    "        WHERE c.relnamespace='queen'::regnamespace AND NOT a.attisdropped"
    " UNION ALL SELECT 'default '||d.oid||' '||pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d"
    "        JOIN pg_class c ON c.oid=d.adrelid WHERE c.relnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'proc '||p.oid||' '||p.proname||' '||md5(p.prosrc)||' '||p.provolatile::text||' '||p.proisstrict"
    "        ||' '||coalesce(p.proacl::text,'') FROM pg_proc p WHERE pronamespace='queen'::regnamespace"
    " UNION ALL SELECT 'con '||oid||' '||conname||' '||pg_get_constraintdef(oid) FROM pg_constraint"
    "        WHERE connamespace='queen'::regnamespace"
    " UNION ALL SELECT 'idx '||i.indexrelid||' '||pg_get_indexdef(i.indexrelid) FROM pg_index i"
    "        JOIN pg_class c ON c.oid=i.indrelid WHERE c.relnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'seq '||s.seqrelid||' '||s.seqcache||' '||s.seqincrement FROM pg_sequence s"
    "        JOIN pg_class c ON c.oid=s.seqrelid WHERE c.relnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'trig '||t.oid||' '||t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid=t.tgrelid"
    "        WHERE c.relnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'type '||oid||' '||typname FROM pg_type WHERE typnamespace='queen'::regnamespace"
    " UNION ALL SELECT 'ns '||oid||' '||coalesce(nspacl::text,'') FROM pg_namespace WHERE nspname='queen'"
    ") s(x)";

/* Runs `queen schema apply` on url with the NAME=VALUE settings of env
 * (NULL-terminated, or NULL for none); returns its exit code, output in *out. */
static int schema_apply(const char *url, char **out, const char *const *env)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], STDERR_FILENO);
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        setenv("QUEEN_PG_URL", url, 1);
        for (size_t i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        execl(getenv("QUEEN_BIN"), "queen", "schema", "apply", (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(pipefd[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *snapshot(const char *url)
{
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    char *s = pgtest_scalar(c, catalog_snapshot, 0, NULL);
    PQfinish(c);
    assert_non_null(s);
    return s;
}

static void applies_on_empty_database_and_reapplies_identically(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("boot_", &db);
    char *out;
    int rc = schema_apply(url, &out, NULL);
    if (rc != 0)
        fail_msg("first apply failed: %s", out);
    free(out);
    char *first = snapshot(url);
    assert_non_null(strstr(first, "ns "));
    rc = schema_apply(url, &out, NULL);
    if (rc != 0)
        fail_msg("second apply failed: %s", out);
    free(out);
    char *second = snapshot(url);
    if (strcmp(first, second) != 0)
        fail_msg("the second apply changed the catalog:\n--- first\n%.2000s\n--- second\n%.2000s", first, second);
    free(first);
    free(second);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* An upgrade from the schema before the wire took its tenant as an
 * argument: that database holds log_transaction_wire_v1(jsonb), the form
 * the previous schema created (its body here is a stand-in: only the
 * signature matters). Applying today's schema must leave the one form
 * (uuid, jsonb) and no function name of the schema with two forms, so no
 * caller can still reach a stale overload. */
static void upgrade_leaves_no_stale_overload(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("bootup_", &db);
    char *out;
    if (schema_apply(url, &out, NULL) != 0)
        fail_msg("first apply failed: %s", out);
    free(out);
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQclear(pgtest_exec(c,
                        "CREATE FUNCTION queen.log_transaction_wire_v1(p JSONB) RETURNS JSONB LANGUAGE sql"
                        " AS 'SELECT p'",
                        0, NULL));
    if (schema_apply(url, &out, NULL) != 0)
        fail_msg("the upgrade's apply failed: %s", out);
    free(out);
    char *forms = pgtest_scalar(c,
                                "SELECT string_agg(oid::regprocedure::text, ' ') FROM pg_proc"
                                " WHERE pronamespace = 'queen'::regnamespace AND proname = 'log_transaction_wire_v1'",
                                0, NULL);
    assert_string_equal(forms, "queen.log_transaction_wire_v1(uuid,jsonb)");
    free(forms);
    char *twice = pgtest_scalar(c,
                                "SELECT COALESCE(string_agg(proname, ' '), '') FROM (SELECT proname FROM pg_proc"
                                " WHERE pronamespace = 'queen'::regnamespace GROUP BY proname HAVING count(*) > 1) s",
                                0, NULL);
    assert_string_equal(twice, "");
    free(twice);
    PQfinish(c);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

static void four_brokers_boot_at_once(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("boot4_", &db);
    test_broker brokers[4];
    for (int i = 0; i < 4; i++)
        broker_spawn(&brokers[i], url, NULL);
    for (int i = 0; i < 4; i++) {
        if (!broker_wait_healthy(&brokers[i], 60000))
            fail_msg("broker %d never became healthy (log: %s)", i, brokers[i].log);
    }
    for (int i = 0; i < 4; i++) {
        http_reply r = broker_http(&brokers[i], "GET", "/health", NULL, NULL);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"database\":\"connected\""));
        http_reply_free(&r);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(broker_stop(&brokers[i]), 0);
        unlink(brokers[i].log);
    }
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* A database where an object the schema expects has another shape: the boot
 * must stop at the first statement that cannot work, naming file and line. */
static void failing_statement_names_file_and_line(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("bootbad_", &db);
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQclear(pgtest_exec(c, "CREATE SCHEMA queen", 0, NULL));
    PQclear(pgtest_exec(c, "CREATE TABLE queen.kv (unrelated int)", 0, NULL));
    PQfinish(c);
    char *out;
    int rc = schema_apply(url, &out, NULL);
    assert_int_not_equal(rc, 0);
    if (strstr(out, "sql/") == NULL || strstr(out, ".sql:") == NULL)
        fail_msg("the error does not name the file and line: %s", out);
    free(out);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

static void health_says_unhealthy_without_database(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("bootgone_", &db);
    test_broker b;
    broker_spawn(&b, url, NULL);
    if (!broker_wait_healthy(&b, 60000))
        fail_msg("broker never became healthy (log: %s)", b.log);
    pgtest_drop_database(db); /* WITH (FORCE) ends the broker's connections */
    http_reply r = broker_http(&b, "GET", "/health", NULL, NULL);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "\"status\":\"unhealthy\""));
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
    unlink(b.log);
    free(db);
    free(url);
}

/* Every broker re-applies the schema at boot into a database that is
 * serving traffic. Re-applying a current schema must take no table lock a
 * writer conflicts with: ADD COLUMN, CREATE INDEX and SET (...) lock their
 * table before looking whether there is anything to do, so a boot used to
 * wait behind any open write (and every request queued behind the boot).
 * Here a transaction holds ROW EXCLUSIVE (what every INSERT/UPDATE holds) on
 * every table of the schema while a second apply runs with a short lock
 * timeout and no retries: it must succeed. */
static void reapply_waits_for_no_writer(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("bootlive_", &db);
    char *out;
    int rc = schema_apply(url, &out, NULL);
    if (rc != 0)
        fail_msg("first apply failed: %s", out);
    free(out);
    PGconn *writer = PQconnectdb(url);
    assert_int_equal(PQstatus(writer), CONNECTION_OK);
    PQclear(pgtest_exec(writer, "BEGIN", 0, NULL));
    PQclear(pgtest_exec(writer,
                        "DO $$DECLARE r record; BEGIN"
                        " FOR r IN SELECT c.oid::regclass AS t FROM pg_class c"
                        "  WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind = 'r' LOOP"
                        "  EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', r.t); END LOOP; END$$",
                        0, NULL));
    char *held = pgtest_scalar(writer,
                               "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                               " WHERE l.pid = pg_backend_pid() AND l.mode = 'RowExclusiveLock'"
                               " AND c.relnamespace = 'queen'::regnamespace AND c.relkind = 'r'",
                               0, NULL);
    assert_true(atoi(held) >= 8); /* the log's tables, kv's, traces, system state */
    free(held);
    static const char *const env[] = {"QUEEN_SCHEMA_LOCK_TIMEOUT_MS=200", "QUEEN_SCHEMA_RETRIES=0", NULL};
    rc = schema_apply(url, &out, env);
    if (rc != 0)
        fail_msg("re-applying the schema waited for an open write: %s", out);
    free(out);
    PQclear(pgtest_exec(writer, "ROLLBACK", 0, NULL));
    PQfinish(writer);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(applies_on_empty_database_and_reapplies_identically),
        cmocka_unit_test(reapply_waits_for_no_writer),
        cmocka_unit_test(upgrade_leaves_no_stale_overload),
        cmocka_unit_test(four_brokers_boot_at_once),
        cmocka_unit_test(failing_statement_names_file_and_line),
        cmocka_unit_test(health_says_unhealthy_without_database),
    };
    return cmocka_run_group_tests_name("schema_boot", tests, NULL, NULL);
}
