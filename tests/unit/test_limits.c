/* The engine's fixed input budgets (src/engine/input_limits.h) are the
 * numbers SQL enforces: each is looked up in the SQL that libqueen carries
 * (the embedded sql/ files, so the test needs no path) at the statement that
 * enforces it, built from the C constant. A budget changed on one side only
 * fails here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "input_limits.h"
#include "queen.h"
#include "schema.h"

static const char *sql_text(const char *name)
{
    for (size_t i = 0; i < queen_sql_file_count; i++)
        if (strcmp(queen_sql_files[i].name, name) == 0)
            return queen_sql_files[i].text;
    fail_msg("%s is not embedded", name);
    return NULL;
}

static void expect_in(const char *file, const char *needle)
{
    if (strstr(sql_text(file), needle) == NULL)
        fail_msg("%s does not hold \"%s\": input_limits.h and SQL disagree", file, needle);
}

static void budgets_match_the_sql(void **state)
{
    (void)state;
    char s[256];
    snprintf(s, sizeof s, "CASE WHEN p_in_wire THEN %d ELSE %d END", QUEEN_WIRE_MAX_KV_OPS, QUEEN_KV_MAX_OPS);
    expect_in("kv.sql", s);
    snprintf(s, sizeof s, "CASE WHEN p_in_wire THEN %d ELSE %d END", QUEEN_WIRE_MAX_KV_KEYS, QUEEN_KV_MAX_KEYS);
    expect_in("kv.sql", s);
    snprintf(s, sizeof s, "IF octet_length(p_key) > %d THEN", QUEEN_KV_MAX_KEY_BYTES);
    expect_in("kv.sql", s);
    snprintf(s, sizeof s, "length(p_ns) > %d", QUEEN_KV_MAX_NS_CHARS);
    expect_in("kv.sql", s);
    snprintf(s, sizeof s, "LEAST(GREATEST(COALESCE(p_limit, %d), 1), %d)", QUEEN_KV_PAGE_DEFAULT, QUEEN_KV_PAGE_MAX);
    expect_in("kv.sql", s);
    snprintf(s, sizeof s, "IF octet_length(v_detail) > %d THEN", QUEEN_KV_DETAIL_MAX_BYTES);
    expect_in("kv.sql", s);
    expect_in("kv.sql", "ARRAY['tenant', 'tenantId', '_tenant']");
    static const char *const fields[] = QUEEN_TENANT_FIELDS;
    assert_int_equal(sizeof fields / sizeof fields[0], 3);
    assert_string_equal(fields[0], "tenant");
    assert_string_equal(fields[1], "tenantId");
    assert_string_equal(fields[2], "_tenant");
}

/* The checker itself, on a needle that is not there: a lookup that always
 * succeeded would make the test above pass whatever the numbers. */
static void a_changed_budget_is_caught(void **state)
{
    (void)state;
    char s[128];
    snprintf(s, sizeof s, "CASE WHEN p_in_wire THEN %d ELSE %d END", QUEEN_WIRE_MAX_KV_OPS + 1, QUEEN_KV_MAX_OPS);
    assert_null(strstr(sql_text("kv.sql"), s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(budgets_match_the_sql),
        cmocka_unit_test(a_changed_budget_is_caught),
    };
    return cmocka_run_group_tests_name("limits", tests, NULL, NULL);
}
