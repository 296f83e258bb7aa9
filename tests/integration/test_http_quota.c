/* KV quota and rate limits over HTTP (KV_CONTRACT.md §7, HTTP_API.md KV
 * errors), against one real broker with tenancy on, its sweeper off (this
 * file runs the usage measurement itself, when it wants it) and a 200 ms
 * quota refresh:
 *   - max_rows = 5: five new keys, then 403 kv_quota_exceeded on the path
 *     route, the batch and the transaction's kv part, nothing beyond the
 *     bound written (one broker: the bound (brokers - 1) x headroom is 0);
 *     deletes and reads still answer 200;
 *   - max_bytes = 10: a 15-byte value is 403, a 5-byte one passes;
 *   - max_writes_per_sec = 2: 429 rate_limited with Retry-After >= 1;
 *   - no quota row, or enabled = false: 403 feature_gated;
 *   - rows written behind the broker's back count once a measurement
 *     (kv_usage_measure_v1) lands and a refresh reads it;
 *   - the refusals are counted in /metrics and /metrics/prometheus. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

#define REFRESH_MS 200

static test_broker B;
static PGconn *DB;

static int setup(void **state)
{
    (void)state;
    char why[256];
    DB = pgtest_connect_quiet(why, sizeof why);
    if (DB == NULL) {
        fprintf(stderr, "setup: %s\n", why);
        return -1;
    }
    static const char *const env[] = {"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", "QUEEN_SWEEPER=0",
                                      "QUEEN_KV_QUOTA_REFRESH_MS=200", NULL};
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    PQfinish(DB);
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* A fresh tenant with a kv_quota row built from `columns` / `values` (SQL
 * text, e.g. "max_rows" / "5"); columns NULL: no row at all. */
static void fresh_tenant(char tenant[37], char header[64], const char *columns, const char *values)
{
    wire_uuid4(tenant);
    snprintf(header, 64, "x-queen-tenant: %s", tenant);
    if (columns != NULL) {
        char *sql = fmt("INSERT INTO queen.kv_quota (tenant_id, %s) VALUES ($1::uuid, %s)", columns, values);
        const char *p[] = {tenant};
        PQclear(pgtest_exec(DB, sql, 1, p));
        free(sql);
    }
}

static http_reply as(const char *header, const char *method, const char *path, const char *body)
{
    const char *h[] = {header, NULL};
    return broker_http(&B, method, path, body, h);
}

static void expect(const char *header, const char *method, const char *path, const char *body, long status,
                   const char *error)
{
    http_reply r = as(header, method, path, body);
    http_expect(&r, status, error, NULL);
    http_reply_free(&r);
}

static long long rows_of(const char *tenant)
{
    const char *p[] = {tenant};
    return pgtest_int(DB, "SELECT count(*) FROM queen.kv WHERE tenant_id = $1::uuid", 1, p);
}

static void max_rows_refuses_the_sixth_key(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh_tenant(t, h, "max_rows", "5");
    char *ns = pgtest_unique("quota");
    for (int i = 0; i < 5; i++) {
        char *path = fmt("/api/v1/kv/%s/k%d", ns, i);
        expect(h, "PUT", path, "{\"value\":1,\"forever\":true}", 200, NULL);
        free(path);
    }
    char *sixth = fmt("/api/v1/kv/%s/k5", ns);
    expect(h, "PUT", sixth, "{\"value\":1,\"forever\":true}", 403, "kv_quota_exceeded");
    char *batch = fmt("{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"b\",\"value\":2,\"forever\":true}]}", ns);
    expect(h, "POST", "/api/v1/kv", batch, 403, "kv_quota_exceeded");
    char *bundle = fmt("{\"kv\":[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"c\",\"delta\":1,\"forever\":true}]}", ns);
    expect(h, "POST", "/api/v1/transaction", bundle, 403, "kv_quota_exceeded");
    /* One broker: the overshoot bound (brokers - 1) x headroom is zero. */
    assert_int_equal(rows_of(t), 5);
    /* Reads and deletes are never refused for being full. */
    char *first = fmt("/api/v1/kv/%s/k0", ns);
    expect(h, "GET", first, NULL, 200, NULL);
    expect(h, "DELETE", first, NULL, 200, NULL);
    assert_int_equal(rows_of(t), 4);
    free(first);
    free(bundle);
    free(batch);
    free(sixth);
    free(ns);
}

/* Value bytes count too: raw JSON as sent, against max_bytes. */
static void max_bytes_refuses_a_large_value(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh_tenant(t, h, "max_bytes", "10");
    char *ns = pgtest_unique("bytes");
    char *path = fmt("/api/v1/kv/%s/k", ns);
    expect(h, "PUT", path, "{\"value\":\"0123456789abc\",\"forever\":true}", 403, "kv_quota_exceeded");
    expect(h, "PUT", path, "{\"value\":12345,\"forever\":true}", 200, NULL);
    assert_int_equal(rows_of(t), 1);
    free(path);
    free(ns);
}

static void write_rate_answers_429_with_retry_after(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh_tenant(t, h, "max_writes_per_sec", "2");
    char *ns = pgtest_unique("rate");
    char *path = fmt("/api/v1/kv/%s/k", ns);
    free(ns);
    int refused = 0;
    /* A bucket of 2 refills 2 per second: 6 writes in well under a second
     * cannot all pass (the loop is timed so a slow host cannot fake it). */
    long long t0 = now_ms();
    for (int i = 0; i < 6 && refused == 0; i++) {
        http_reply r = as(h, "PUT", path, "{\"value\":1,\"forever\":true}");
        if (r.status == 429) {
            http_expect(&r, 429, "rate_limited", NULL);
            char *ra = http_reply_header(&r, "Retry-After");
            assert_non_null(ra);
            assert_true(atoi(ra) >= 1);
            free(ra);
            refused++;
        } else {
            http_expect(&r, 200, NULL, NULL);
        }
        http_reply_free(&r);
    }
    if (now_ms() - t0 < 900)
        assert_int_equal(refused, 1);
    /* Reads have their own (unlimited) bucket. */
    expect(h, "GET", path, NULL, 200, NULL);
    free(path);
}

static void no_grant_is_feature_gated(void **state)
{
    (void)state;
    char t[37], h[64], d[37], hd[64];
    fresh_tenant(t, h, NULL, NULL);
    fresh_tenant(d, hd, "enabled", "false");
    char *ns = pgtest_unique("gate");
    char *path = fmt("/api/v1/kv/%s/k", ns);
    free(ns);
    expect(h, "GET", path, NULL, 403, "feature_gated");
    expect(h, "PUT", path, "{\"value\":1,\"forever\":true}", 403, "feature_gated");
    expect(h, "DELETE", path, NULL, 403, "feature_gated");
    expect(hd, "GET", path, NULL, 403, "feature_gated");
    expect(h, "POST", "/api/v1/transaction",
           "{\"kv\":[{\"op\":\"get\",\"ns\":\"gate\",\"key\":\"k\"}]}", 403, "feature_gated");
    /* Granting it reaches the broker within a refresh. */
    const char *p[] = {d};
    PQclear(pgtest_exec(DB, "UPDATE queen.kv_quota SET enabled = true WHERE tenant_id = $1::uuid", 1, p));
    usleep(3 * REFRESH_MS * 1000);
    expect(hd, "GET", path, NULL, 200, NULL);
    assert_int_equal(rows_of(t), 0);
    free(path);
}

static void measurement_catches_up(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh_tenant(t, h, "max_rows", "3");
    char *ns = pgtest_unique("measure");
    char *path = fmt("/api/v1/kv/%s/new", ns);
    expect(h, "GET", path, NULL, 200, NULL); /* the broker loads the tenant: 0 rows measured */
    /* Three rows the broker never admitted (another broker, say). */
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "direct%d", i);
        const char *p[] = {t, ns, key};
        PQclear(pgtest_exec(DB,
                            "INSERT INTO queen.kv (tenant_id, namespace, key, value, version) "
                            "VALUES ($1::uuid, $2, $3, '1', nextval('queen.kv_version_seq'))",
                            3, p));
    }
    PQclear(pgtest_exec(DB, "SELECT queen.kv_usage_measure_v1(now(), 1000000000000, 64)", 0, NULL));
    usleep(3 * REFRESH_MS * 1000);
    expect(h, "PUT", path, "{\"value\":1,\"forever\":true}", 403, "kv_quota_exceeded");
    assert_int_equal(rows_of(t), 3);
    free(path);
    free(ns);
}

static void refusals_are_counted(void **state)
{
    (void)state;
    http_reply r = broker_http(&B, "GET", "/metrics", NULL, NULL);
    http_expect(&r, 200, NULL, NULL);
    json_t *m = json_loads(r.body, 0, NULL);
    json_t *q = json_object_get(json_object_get(json_object_get(m, "engine"), "kv"), "quotaRefusals");
    assert_true(json_integer_value(json_object_get(q, "kv_quota_exceeded")) >= 5);
    assert_true(json_integer_value(json_object_get(q, "feature_gated")) >= 5);
    assert_true(json_integer_value(json_object_get(q, "rate_limited")) >= 1);
    json_decref(m);
    http_reply_free(&r);
    r = broker_http(&B, "GET", "/metrics/prometheus", NULL, NULL);
    http_expect(&r, 200, NULL, NULL);
    assert_non_null(strstr(r.body, "queen_kv_quota_refusals_total{reason=\"kv_quota_exceeded\"}"));
    assert_non_null(strstr(r.body, "queen_kv_quota_refusals_total{reason=\"rate_limited\"}"));
    http_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(max_rows_refuses_the_sixth_key),
        cmocka_unit_test(max_bytes_refuses_a_large_value),
        cmocka_unit_test(write_rate_answers_429_with_retry_after),
        cmocka_unit_test(no_grant_is_feature_gated),
        cmocka_unit_test(measurement_catches_up),
        cmocka_unit_test(refusals_are_counted),
    };
    return cmocka_run_group_tests_name("http_quota", tests, setup, teardown);
}
