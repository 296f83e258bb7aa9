/* The input budgets have one home, sql/limits.sql (queen.input_limits_v1):
 * libqueen reads them out of the SQL it carries (input_limits.c), the kv
 * guards clamp to them, and the configured guards' ranges end at them. The
 * SQL checks that enforce each budget read it by name; tests/sql/limits.sql
 * proves each is enforced at exactly its published value. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "input_limits.h"
#include "kvguard.h"
#include "queen.h"
#include "queen_runtime.h"
#include "schema.h"

static void the_embedded_sql_publishes_every_budget(void **state)
{
    (void)state;
    assert_true(input_limits_ok());
    const input_limits *l = input_limits_get();
    /* Each is read (none left 0), and the pairs keep their order. */
    assert_true(l->wire_max_kv_ops > 0 && l->wire_max_kv_ops <= l->kv_max_ops);
    assert_true(l->wire_max_kv_keys > 0 && l->wire_max_kv_keys <= l->kv_max_keys);
    assert_true(l->page_default > 0 && l->page_default <= l->page_max);
    assert_true(l->kv_max_key_bytes > 0 && l->kv_max_ns_chars > 0 && l->kv_detail_max_bytes > 0);
}

/* The parser refuses a text missing a budget or holding a bad one, and
 * leaves every budget 0 (the guards then refuse everything). */
static void a_missing_or_bad_budget_is_refused(void **state)
{
    (void)state;
    input_limits l;
    const char *missing = "CREATE OR REPLACE FUNCTION queen.input_limits_v1() AS $$ SELECT '{\"kvMaxOps\": 256}'::jsonb $$";
    assert_int_equal(input_limits_parse(missing, &l), -1);
    assert_int_equal(l.kv_max_ops, 0);
    char bad[1024];
    snprintf(bad, sizeof bad,
             "CREATE OR REPLACE FUNCTION queen.input_limits_v1() AS $$ SELECT '{\"kvMaxOps\": 256, \"kvMaxKeys\": 1, "
             "\"wireMaxKvOps\": 1, \"wireMaxKvKeys\": 1, \"kvMaxKeyBytes\": 1, \"kvMaxNsChars\": 1, \"pageDefault\": "
             "1, \"pageMax\": \"1000\", \"kvDetailMaxBytes\": 1}'::jsonb $$");
    assert_int_equal(input_limits_parse(bad, &l), -1);
    assert_int_equal(input_limits_parse(NULL, &l), -1);
}

/* kv_limits_from clamps the configured guards to the published budgets,
 * the transaction's inside a bundle. */
static void the_guards_clamp_to_the_published_budgets(void **state)
{
    (void)state;
    const input_limits *sql = input_limits_get();
    queen_config cfg;
    queen_config_defaults(&cfg);
    cfg.kv_max_ops_per_call = 1 << 30;
    cfg.kv_max_keys_per_call = 1 << 30;
    cfg.kv_max_key_bytes = 1 << 30;
    kv_limits call = kv_limits_from(&cfg, false), wire = kv_limits_from(&cfg, true);
    assert_int_equal(call.max_ops, sql->kv_max_ops);
    assert_int_equal(call.max_keys, sql->kv_max_keys);
    assert_int_equal(call.max_key_bytes, sql->kv_max_key_bytes);
    assert_int_equal(wire.max_ops, sql->wire_max_kv_ops);
    assert_int_equal(wire.max_keys, sql->wire_max_kv_keys);
    assert_int_equal(call.page_default, sql->page_default);
    assert_int_equal(call.page_max, sql->page_max);
    queen_config_clear(&cfg);
}

/* A configured guard may be set up to the budget, not past it. */
static void settings_end_at_the_budgets(void **state)
{
    (void)state;
    const input_limits *sql = input_limits_get();
    const struct {
        const char *name;
        int budget;
    } guards[] = {{"QUEEN_KV_MAX_OPS_PER_CALL", sql->kv_max_ops},
                  {"QUEEN_KV_MAX_KEYS_PER_CALL", sql->kv_max_keys},
                  {"QUEEN_KV_MAX_KEY_BYTES", sql->kv_max_key_bytes}};
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++) {
        queen_config cfg;
        queen_config_defaults(&cfg);
        char v[32], err[256];
        snprintf(v, sizeof v, "%d", guards[i].budget);
        if (queen_config_set(&cfg, guards[i].name, v, err, sizeof err) != 0)
            fail_msg("%s=%s refused: %s", guards[i].name, v, err);
        snprintf(v, sizeof v, "%d", guards[i].budget + 1);
        if (queen_config_set(&cfg, guards[i].name, v, err, sizeof err) == 0)
            fail_msg("%s=%s accepted past the budget", guards[i].name, v);
        queen_config_clear(&cfg);
    }
}

/* The checks name their budgets: no SQL file but limits.sql states the
 * kv budgets' numbers where a check would (a literal crept back in is a
 * second copy). */
static void no_check_restates_a_budget(void **state)
{
    (void)state;
    static const char *const needles[] = {"THEN 64 ELSE 256",       "THEN 256 ELSE 4096",
                                          "octet_length(p_key) > 512", "length(p_ns) > 64",
                                          "COALESCE(p_limit, 100)",   "1), 1000)",
                                          "BETWEEN 1 AND 1000 THEN",  "v_limit > 1000",
                                          "octet_length(v_detail) > 4096"};
    for (size_t i = 0; i < queen_sql_file_count; i++) {
        if (strcmp(queen_sql_files[i].name, "limits.sql") == 0)
            continue;
        for (size_t n = 0; n < sizeof needles / sizeof needles[0]; n++)
            if (strstr(queen_sql_files[i].text, needles[n]) != NULL)
                fail_msg("%s restates a budget: \"%s\" (read it with queen._input_limit_v1)",
                         queen_sql_files[i].name, needles[n]);
    }
}

/* Every name a check reads is published: an unknown one would read as NULL,
 * which a comparison takes as no limit at all. */
static void every_budget_read_is_published(void **state)
{
    (void)state;
    static const char *const published[] = {"kvMaxOps",      "kvMaxKeys",    "wireMaxKvOps", "wireMaxKvKeys",
                                             "kvMaxKeyBytes", "kvMaxNsChars", "pageDefault",  "pageMax",
                                             "kvDetailMaxBytes"};
    const char *call = "_input_limit_v1('";
    int reads = 0;
    for (size_t i = 0; i < queen_sql_file_count; i++) {
        if (strcmp(queen_sql_files[i].name, "limits.sql") == 0)
            continue; /* the definition, and its header naming the form */
        for (const char *p = strstr(queen_sql_files[i].text, call); p != NULL; p = strstr(p, call)) {
            p += strlen(call);
            size_t len = strcspn(p, "'");
            bool known = false;
            for (size_t n = 0; n < sizeof published / sizeof published[0]; n++)
                known = known || (strlen(published[n]) == len && strncmp(published[n], p, len) == 0);
            if (!known)
                fail_msg("%s reads a budget that limits.sql does not publish: %.*s", queen_sql_files[i].name, (int)len,
                         p);
            reads++;
        }
    }
    assert_true(reads >= 10); /* the page and kv checks all read theirs */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_embedded_sql_publishes_every_budget),
        cmocka_unit_test(a_missing_or_bad_budget_is_refused),
        cmocka_unit_test(the_guards_clamp_to_the_published_budgets),
        cmocka_unit_test(settings_end_at_the_budgets),
        cmocka_unit_test(no_check_restates_a_budget),
        cmocka_unit_test(every_budget_read_is_published),
    };
    return cmocka_run_group_tests_name("limits", tests, NULL, NULL);
}
