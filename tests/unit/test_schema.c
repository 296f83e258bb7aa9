/* Unit tests of src/engine/schema.c: the statement splitter, the embedded
 * files against sql/MANIFEST and the version gate (no database needed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

static size_t split(const char *sql, queen_sql_statement **out)
{
    size_t n = 0;
    char err[256];
    assert_int_equal(queen_sql_split(sql, strlen(sql), out, &n, err, sizeof err), 0);
    return n;
}

static void assert_stmt(const queen_sql_statement *st, const char *text, int line)
{
    assert_int_equal(st->len, strlen(text));
    assert_memory_equal(st->text, text, st->len);
    assert_int_equal(st->line, line);
}

static void splits_on_top_level_semicolons(void **state)
{
    (void)state;
    queen_sql_statement *st;
    size_t n = split("SELECT 1;\n\nSELECT 2;  ;\n-- trailing comment\n", &st);
    assert_int_equal(n, 2);
    assert_stmt(&st[0], "SELECT 1", 1);
    assert_stmt(&st[1], "SELECT 2", 3);
    free(st);
}

static void semicolons_inside_quotes_bodies_and_comments(void **state)
{
    (void)state;
    queen_sql_statement *st;
    const char *sql = "-- lead; comment\n"
                      "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $fn$\n"
                      "BEGIN RAISE NOTICE 'a;b'; RETURN 1; END $fn$;\n"
                      "/* block; /* nested; */ still; */ SELECT 'it''s;', \"we;ird\", E'\\';', $$x;$$;\n"
                      "SELECT $1::int;";
    size_t n = split(sql, &st);
    assert_int_equal(n, 3);
    assert_int_equal(st[0].line, 2);
    assert_non_null(memmem(st[0].text, st[0].len, "END $fn$", 8));
    assert_int_equal(st[1].line, 4);
    assert_non_null(memmem(st[1].text, st[1].len, "$$x;$$", 6));
    assert_stmt(&st[2], "SELECT $1::int", 5);
    free(st);
}

static void unterminated_things_are_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {"SELECT 'open;", "SELECT $$ body;", "/* never closed", "SELECT \"x;",
                                      "SELECT $a$ body $b$;"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        queen_sql_statement *st = NULL;
        size_t n = 0;
        char err[256] = "";
        assert_int_equal(queen_sql_split(bad[i], strlen(bad[i]), &st, &n, err, sizeof err), -1);
        assert_null(st);
        assert_non_null(strstr(err, "line 1"));
    }
}

/* The names sql/MANIFEST lists, in order (comments and blank lines
 * dropped); *n set. The suite runs from the repository root. */
static char **manifest_names(size_t *n)
{
    FILE *f = fopen("sql/MANIFEST", "r");
    if (f == NULL)
        fail_msg("cannot open sql/MANIFEST (run from the repository root)");
    char **names = NULL, line[512];
    *n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char name[512];
        if (sscanf(line, "%511s", name) != 1)
            continue;
        names = realloc(names, (*n + 1) * sizeof *names);
        assert_non_null(names);
        names[(*n)++] = strdup(name);
    }
    fclose(f);
    return names;
}

/* The binary applies what the build embedded, in the embedded order: that
 * must be sql/MANIFEST's, schema.sql first (it creates the schema the
 * others fill), and every file must split. */
static void embedded_files_are_the_manifest_in_order(void **state)
{
    (void)state;
    size_t n;
    char **names = manifest_names(&n);
    assert_true(n >= 1);
    assert_int_equal(queen_sql_file_count, n);
    assert_string_equal(queen_sql_files[0].name, "schema.sql");
    char err[256];
    for (size_t i = 0; i < queen_sql_file_count; i++) {
        assert_string_equal(queen_sql_files[i].name, names[i]);
        queen_sql_statement *st = NULL;
        size_t k = 0;
        assert_int_equal(queen_sql_split(queen_sql_files[i].text, queen_sql_files[i].len, &st, &k, err, sizeof err),
                         0);
        assert_true(k >= 1);
        free(st);
        free(names[i]);
    }
    free(names);
}

static void version_gate(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(queen_schema_check_version(150020, err, sizeof err), 0);
    assert_int_equal(queen_schema_check_version(140000, err, sizeof err), 0);
    assert_int_equal(queen_schema_check_version(130015, err, sizeof err), -1);
    assert_non_null(strstr(err, "13.15"));
    assert_int_equal(queen_schema_check_version(90624, err, sizeof err), -1);
    assert_non_null(strstr(err, "9.6"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splits_on_top_level_semicolons),
        cmocka_unit_test(semicolons_inside_quotes_bodies_and_comments),
        cmocka_unit_test(unterminated_things_are_errors),
        cmocka_unit_test(embedded_files_are_the_manifest_in_order),
        cmocka_unit_test(version_gate),
    };
    return cmocka_run_group_tests_name("schema", tests, NULL, NULL);
}
