/* Unit tests of src/engine/config.c: the settings table and its parsers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static void defaults_are_documented_values(void **state)
{
    (void)state;
    queen_config cfg;
    queen_config_defaults(&cfg);
    assert_int_equal(cfg.port, 6632);
    assert_string_equal(cfg.bind, "127.0.0.1");
    assert_string_equal(cfg.pg_url, "");
    assert_int_equal(cfg.log_level, QUEEN_LOG_INFO);
    assert_int_equal(cfg.stmt_timeout_ms, 30000);
    assert_int_equal(cfg.max_body_bytes, 20 * 1024 * 1024);
    assert_int_equal(cfg.max_connections, 16384);
    assert_int_equal(cfg.request_read_timeout_ms, 30000);
    assert_int_equal(cfg.idle_timeout_ms, 65000);
    assert_int_equal(cfg.max_inflight_body_bytes, 256 * 1024 * 1024);
    queen_config_clear(&cfg);
}

/* Table-driven: each bad value is refused with a message naming the setting. */
static void bad_values_name_the_setting(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value, *mentions;
    } cases[] = {
        {"QUEEN_PORT", "abc", "QUEEN_PORT"},     {"QUEEN_PORT", "0", "QUEEN_PORT"},
        {"QUEEN_PORT", "70000", "QUEEN_PORT"},   {"QUEEN_PORT", "", "QUEEN_PORT"},
        {"QUEEN_PORT", "12x", "QUEEN_PORT"},     {"QUEEN_LOG_LEVEL", "loud", "QUEEN_LOG_LEVEL"},
        {"port", "-1", "QUEEN_PORT"},            {"QUEEN_NOPE", "1", "QUEEN_NOPE"},
        {"QUEEN_PG_POOL", "99999", "QUEEN_PG_POOL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        queen_config cfg;
        queen_config_defaults(&cfg);
        char err[256] = "";
        assert_int_equal(queen_config_set(&cfg, cases[i].name, cases[i].value, err, sizeof err), -1);
        assert_non_null(strstr(err, cases[i].mentions));
        assert_int_equal(cfg.port, 6632); /* nothing half-applied */
        queen_config_clear(&cfg);
    }
}

static void good_values_parse(void **state)
{
    (void)state;
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    assert_int_equal(queen_config_set(&cfg, "QUEEN_PORT", "7000", err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "log-level", "DEBUG", err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_PG_URL", "postgresql://x@127.0.0.1:1/db", err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_PG_URL", "host=127.0.0.1 port=2", err, sizeof err), 0);
    assert_int_equal(cfg.port, 7000);
    assert_int_equal(cfg.log_level, QUEEN_LOG_DEBUG);
    assert_string_equal(cfg.pg_url, "host=127.0.0.1 port=2");
    queen_config_clear(&cfg);
}

static void environment_then_flags(void **state)
{
    (void)state;
    setenv("QUEEN_PORT", "7100", 1);
    setenv("QUEEN_BIND", "0.0.0.0", 1);
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    assert_int_equal(queen_config_from_env(&cfg, err, sizeof err), 0);
    assert_int_equal(cfg.port, 7100);
    char *argv[] = {"--port", "7200", "--log-level=warn"};
    assert_int_equal(queen_config_from_args(&cfg, 3, argv, err, sizeof err), 3);
    assert_int_equal(cfg.port, 7200);
    assert_string_equal(cfg.bind, "0.0.0.0");
    assert_int_equal(cfg.log_level, QUEEN_LOG_WARN);
    unsetenv("QUEEN_PORT");
    unsetenv("QUEEN_BIND");
    queen_config_clear(&cfg);
}

static void bad_flags_are_errors(void **state)
{
    (void)state;
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    char *unknown[] = {"--colour", "red"};
    assert_int_equal(queen_config_from_args(&cfg, 2, unknown, err, sizeof err), -1);
    assert_non_null(strstr(err, "colour"));
    char *missing[] = {"--port"};
    assert_int_equal(queen_config_from_args(&cfg, 1, missing, err, sizeof err), -1);
    char *positional[] = {"extra"};
    assert_int_equal(queen_config_from_args(&cfg, 1, positional, err, sizeof err), -1);
    char *env_name[] = {"--QUEEN_PORT=1"}; /* flags use flag names only */
    assert_int_equal(queen_config_from_args(&cfg, 1, env_name, err, sizeof err), -1);
    queen_config_clear(&cfg);
}

static void tenancy_needs_trusted_proxy(void **state)
{
    (void)state;
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_TENANCY_HEADER", "1", err, sizeof err), 0);
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "QUEEN_TRUSTED_PROXY"));
    assert_int_equal(queen_config_set(&cfg, "QUEEN_TRUSTED_PROXY", "true", err, sizeof err), 0);
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_TRUSTED_PROXY", "maybe", err, sizeof err), -1);
    queen_config_clear(&cfg);
}

/* A body the budget could never admit would be refused with a 503 forever;
 * more threads than connections would leave a thread with none. */
static void edge_limits_must_fit_each_other(void **state)
{
    (void)state;
    queen_config cfg;
    queen_config_defaults(&cfg);
    char err[256];
    assert_int_equal(queen_config_set(&cfg, "QUEEN_MAX_INFLIGHT_BODY_BYTES", "2048", err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_MAX_BODY_BYTES", "4096", err, sizeof err), 0);
    queen_config_resolve(&cfg);
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "QUEEN_MAX_INFLIGHT_BODY_BYTES"));
    assert_int_equal(queen_config_set(&cfg, "QUEEN_MAX_BODY_BYTES", "2048", err, sizeof err), 0);
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_HTTP_THREADS", "4", err, sizeof err), 0);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_MAX_CONNECTIONS", "3", err, sizeof err), 0);
    assert_int_equal(queen_config_validate(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "QUEEN_MAX_CONNECTIONS"));
    queen_config_clear(&cfg);
}

/* The repository's docs/settings.md, found from this binary's own location
 * (it is built under <repo>/build/...), so the check runs whatever the
 * working directory; the directory must also hold the table's source, so
 * another project's docs above the tree are never taken for it. NULL: not
 * found. */
static FILE *open_repo_settings_page(char *path, size_t len)
{
    char dir[4096];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return NULL;
    dir[n] = '\0';
    for (char *slash = strrchr(dir, '/'); slash != NULL; slash = strrchr(dir, '/')) {
        *slash = '\0';
        char marker[4200];
        snprintf(marker, sizeof marker, "%s/src/engine/config.c", dir);
        snprintf(path, len, "%s/docs/settings.md", dir);
        if (access(marker, F_OK) == 0)
            return fopen(path, "r");
    }
    return NULL;
}

/* docs/settings.md's table is the table's own printout
 * (scripts/readme-settings.sh rewrites it); a setting added without it fails
 * here, and so does a page that cannot be found: a skipped check would hide
 * a stale table. */
static void settings_page_table_matches(void **state)
{
    (void)state;
    char *printed = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&printed, &len);
    queen_config_print_markdown(mem);
    fclose(mem);
    char path[4200];
    FILE *f = open_repo_settings_page(path, sizeof path);
    if (f == NULL)
        fail_msg("cannot open docs/settings.md of the repository that holds this test binary");
    char *page = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&page, &cap, '\0', f);
    fclose(f);
    assert_true(n > 0);
    if (strstr(page, printed) == NULL)
        fail_msg("%s: the settings table is stale: run scripts/readme-settings.sh", path);
    free(page);
    free(printed);
}

/* QUEEN_PG_POOL 0 and QUEEN_HTTP_THREADS 0 are derived once: four
 * connections per core (at least 8), one event loop per core. */
static void resolve_derives_pool_and_threads(void **state)
{
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int expect_pool = cores * 4 > 8 ? (int)(cores * 4) : 8;
    queen_config cfg;
    queen_config_defaults(&cfg);
    assert_int_equal(cfg.pg_pool, 0);
    assert_int_equal(cfg.http_threads, 0);
    queen_config_resolve(&cfg);
    assert_int_equal(cfg.pg_pool, expect_pool);
    assert_int_equal(cfg.http_threads, cores);
    queen_config_resolve(&cfg); /* idempotent */
    assert_int_equal(cfg.http_threads, cores);
    queen_config_clear(&cfg);

    /* Explicit values stay as set. */
    char err[256];
    queen_config_defaults(&cfg);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_PG_POOL", "3", err, sizeof err), 0);
    queen_config_resolve(&cfg);
    assert_int_equal(cfg.pg_pool, 3);
    assert_int_equal(cfg.http_threads, cores);
    queen_config_clear(&cfg);
    queen_config_defaults(&cfg);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_HTTP_THREADS", "5", err, sizeof err), 0);
    queen_config_resolve(&cfg);
    assert_int_equal(cfg.http_threads, 5);
    queen_config_clear(&cfg);
}

/* An embedder who zeroes the struct by hand gets the table's defaults for
 * every setting whose 0 is not a value; booleans and settings where 0 is a
 * value (schema retries) keep their 0. */
static void hand_zeroed_resolves_to_table_defaults(void **state)
{
    (void)state;
    queen_config want;
    queen_config_defaults(&want);
    queen_config_resolve(&want);
    queen_config got;
    memset(&got, 0, sizeof got);
    queen_config_resolve(&got);
    assert_string_equal(got.pg_url, want.pg_url);
    assert_string_equal(got.bind, want.bind);
    assert_string_equal(got.dev_dir, want.dev_dir);
    assert_int_equal(got.port, want.port);
    assert_int_equal(got.dev_pg_port, want.dev_pg_port);
    assert_int_equal(got.schema_lock_wait_ms, want.schema_lock_wait_ms);
    assert_int_equal(got.schema_lock_timeout_ms, want.schema_lock_timeout_ms);
    assert_int_equal(got.schema_retries, 0);
    assert_int_equal(got.pg_pool, want.pg_pool);
    assert_int_equal(got.stmt_timeout_ms, want.stmt_timeout_ms);
    assert_int_equal(got.pg_acquire_timeout_ms, want.pg_acquire_timeout_ms);
    assert_int_equal(got.http_threads, want.http_threads);
    assert_int_equal(got.max_body_bytes, want.max_body_bytes);
    assert_int_equal(got.max_connections, want.max_connections);
    assert_int_equal(got.max_inflight_body_bytes, want.max_inflight_body_bytes);
    assert_int_equal(got.kv_expire_every_ms, want.kv_expire_every_ms);
    assert_int_equal(got.kv_expire_batch, want.kv_expire_batch);
    assert_int_equal(got.kv_expire_max_rows, want.kv_expire_max_rows);
    assert_int_equal(got.partition_idle_seconds, want.partition_idle_seconds);
    assert_int_equal(got.retention_interval_ms, want.retention_interval_ms);
    assert_int_equal(got.kv_max_ops_per_call, want.kv_max_ops_per_call);
    assert_int_equal(got.kv_max_keys_per_call, want.kv_max_keys_per_call);
    assert_int_equal(got.kv_max_value_bytes, want.kv_max_value_bytes);
    assert_int_equal(got.kv_max_key_bytes, want.kv_max_key_bytes);
    assert_int_equal(got.kv_quota_refresh_ms, want.kv_quota_refresh_ms);
    assert_false(got.sweeper);
    assert_false(got.access_log);
    /* The table's own values, not a second copy of them. */
    assert_int_equal(got.stmt_timeout_ms, 30000);
    assert_int_equal(got.port, 6632);
    queen_config_clear(&got);
    queen_config_clear(&want);
}

/* The opaque handle of queen.h: a new one holds the defaults, a set is
 * read back by either name and its type, a wrong type or an unknown name
 * is -1 with *out untouched, and a log level reads as its int. */
static void opaque_config_reads_back_what_was_set(void **state)
{
    (void)state;
    queen_config *cfg = queen_config_new();
    assert_non_null(cfg);
    char err[256];
    int n = -7;
    bool b = false;
    const char *str = NULL;
    assert_int_equal(queen_config_get_int(cfg, "QUEEN_PORT", &n), 0);
    assert_int_equal(n, 6632);
    assert_int_equal(queen_config_set(cfg, "pg-pool", "3", err, sizeof err), 0);
    assert_int_equal(queen_config_get_int(cfg, "QUEEN_PG_POOL", &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(queen_config_get_bool(cfg, "sweeper", &b), 0);
    assert_true(b);
    assert_int_equal(queen_config_set(cfg, "QUEEN_SWEEPER", "off", err, sizeof err), 0);
    assert_int_equal(queen_config_get_bool(cfg, "QUEEN_SWEEPER", &b), 0);
    assert_false(b);
    assert_int_equal(queen_config_set(cfg, "QUEEN_PG_URL", "postgresql:///x", err, sizeof err), 0);
    assert_int_equal(queen_config_get_string(cfg, "pg-url", &str), 0);
    assert_string_equal(str, "postgresql:///x");
    assert_int_equal(queen_config_set(cfg, "QUEEN_LOG_LEVEL", "debug", err, sizeof err), 0);
    assert_int_equal(queen_config_get_int(cfg, "QUEEN_LOG_LEVEL", &n), 0);
    assert_int_equal(n, QUEEN_LOG_DEBUG);
    n = -7;
    assert_int_equal(queen_config_get_int(cfg, "QUEEN_PG_URL", &n), -1);
    assert_int_equal(queen_config_get_int(cfg, "QUEEN_NO_SUCH", &n), -1);
    assert_int_equal(queen_config_get_bool(cfg, "QUEEN_PORT", &b), -1);
    assert_int_equal(queen_config_get_string(cfg, "QUEEN_PORT", &str), -1);
    assert_int_equal(n, -7);
    queen_config_free(cfg);
    queen_config_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_documented_values), cmocka_unit_test(bad_values_name_the_setting),
        cmocka_unit_test(good_values_parse),             cmocka_unit_test(environment_then_flags),
        cmocka_unit_test(bad_flags_are_errors),            cmocka_unit_test(settings_page_table_matches),
        cmocka_unit_test(tenancy_needs_trusted_proxy),     cmocka_unit_test(resolve_derives_pool_and_threads),
        cmocka_unit_test(hand_zeroed_resolves_to_table_defaults), cmocka_unit_test(edge_limits_must_fit_each_other),
        cmocka_unit_test(opaque_config_reads_back_what_was_set),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
