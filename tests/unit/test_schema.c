/* Unit tests of src/engine/schema.c: the statement splitter, the file
 * ordering and the version gate (no database needed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

static void files_order_by_number(void **state)
{
    (void)state;
    queen_sql_file files[] = {
        {"024_kv.sql", "", 0}, {"001_log_schema.sql", "", 0}, {"100_later.sql", "", 0}, {"006_x.sql", "", 0}};
    size_t order[4];
    char err[256];
    assert_int_equal(queen_sql_order(files, 4, order, err, sizeof err), 0);
    assert_string_equal(files[order[0]].name, "001_log_schema.sql");
    assert_string_equal(files[order[1]].name, "006_x.sql");
    assert_string_equal(files[order[2]].name, "024_kv.sql");
    assert_string_equal(files[order[3]].name, "100_later.sql");
}

static void ambiguous_or_unnumbered_files_are_refused(void **state)
{
    (void)state;
    size_t order[2];
    char err[256];
    queen_sql_file dup[] = {{"024_kv.sql", "", 0}, {"024_other.sql", "", 0}};
    assert_int_equal(queen_sql_order(dup, 2, order, err, sizeof err), -1);
    assert_non_null(strstr(err, "024_kv.sql"));
    queen_sql_file unnumbered[] = {{"kv.sql", "", 0}};
    assert_int_equal(queen_sql_order(unnumbered, 1, order, err, sizeof err), -1);
    assert_non_null(strstr(err, "kv.sql"));
}

static void embedded_files_are_ordered_and_split(void **state)
{
    (void)state;
    size_t *order = calloc(queen_sql_file_count + 1, sizeof *order);
    char err[256];
    assert_int_equal(queen_sql_order(queen_sql_files, queen_sql_file_count, order, err, sizeof err), 0);
    assert_true(queen_sql_file_count >= 1);
    assert_string_equal(queen_sql_files[order[0]].name, "000_schema.sql");
    for (size_t i = 0; i < queen_sql_file_count; i++) {
        queen_sql_statement *st = NULL;
        size_t n = 0;
        assert_int_equal(queen_sql_split(queen_sql_files[i].text, queen_sql_files[i].len, &st, &n, err, sizeof err),
                         0);
        assert_true(n >= 1);
        free(st);
    }
    free(order);
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
        cmocka_unit_test(files_order_by_number),
        cmocka_unit_test(ambiguous_or_unnumbered_files_are_refused),
        cmocka_unit_test(embedded_files_are_ordered_and_split),
        cmocka_unit_test(version_gate),
    };
    return cmocka_run_group_tests_name("schema", tests, NULL, NULL);
}
