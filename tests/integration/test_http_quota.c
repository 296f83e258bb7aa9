/* KV quota and rate limits over HTTP (docs/api.md, KV,
 * "Quota and rate limits"), against one real broker with tenancy on, its sweeper off (this
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
 *   - the refusals are counted in /metrics and /metrics/prometheus;
 *   - GET /api/v1/resources/kv/quota (the console's card) answers the
 *     caller's tenant's limits and last measurement, and is never metered.
 * Every test has tenants and namespaces of its own and reads counters as
 * deltas, so each runs alone or in any order. */
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

/* Returns once a quota refresh that started after this call has been
 * applied: the broker's refresh thread reads kv_quota_read_v1 over and over,
 * so a second read starting after the first one began means the first one's
 * answer is in the table. (Reads come from the refresh thread only here: every
 * tenant the caller uses is loaded already.) */
static void wait_quota_refresh(void)
{
    static const char *const last_read =
        "SELECT coalesce(max(query_start), '-infinity')::text FROM pg_stat_activity "
        "WHERE application_name = 'queen' AND datname = current_database() AND query LIKE '%kv_quota_read_v1%'";
    char *since = pgtest_scalar(DB, "SELECT clock_timestamp()::text", 0, NULL);
    for (int reads = 0; reads < 2; reads++) {
        long long until = now_ms() + 10 * REFRESH_MS + 5000;
        char *seen;
        for (;;) {
            seen = pgtest_scalar(DB, last_read, 0, NULL);
            const char *p[] = {seen, since};
            if (pgtest_int(DB, "SELECT ($1::timestamptz > $2::timestamptz)::int", 2, p) == 1)
                break;
            free(seen);
            if (now_ms() >= until)
                fail_msg("no quota refresh read began after %s", since);
            pause_ms(10);
        }
        free(since);
        since = seen;
    }
    free(since);
}

/* The broker's quota refusals of one kind so far (engine.kv.quotaRefusals). */
static long long refusals(const char *reason)
{
    http_reply r = broker_http(&B, "GET", "/metrics", NULL, NULL);
    http_expect(&r, 200, NULL, NULL);
    json_t *m = json_loads(r.body, 0, NULL);
    json_t *q = json_object_get(json_object_get(json_object_get(m, "engine"), "kv"), "quotaRefusals");
    json_t *v = json_object_get(q, reason);
    if (!json_is_integer(v))
        fail_msg("/metrics has no quotaRefusals.%s: %s", reason, r.body);
    long long n = json_integer_value(v);
    json_decref(m);
    http_reply_free(&r);
    return n;
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
    expect(h, "GET", path, NULL, 403, "feature_gated");
    expect(h, "PUT", path, "{\"value\":1,\"forever\":true}", 403, "feature_gated");
    expect(h, "DELETE", path, NULL, 403, "feature_gated");
    expect(hd, "GET", path, NULL, 403, "feature_gated");
    char *bundle = fmt("{\"kv\":[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k\"}]}", ns);
    expect(h, "POST", "/api/v1/transaction", bundle, 403, "feature_gated");
    /* Granting it reaches the broker with a refresh: a read is admitted
     * then, and a refused read writes nothing, so asking again is safe. */
    const char *p[] = {d};
    PQclear(pgtest_exec(DB, "UPDATE queen.kv_quota SET enabled = true WHERE tenant_id = $1::uuid", 1, p));
    long long until = now_ms() + 10 * REFRESH_MS + 5000;
    for (;;) {
        http_reply r = as(hd, "GET", path, NULL);
        long status = r.status;
        if (status != 200)
            http_expect(&r, 403, "feature_gated", NULL);
        http_reply_free(&r);
        if (status == 200)
            break;
        if (now_ms() >= until)
            fail_msg("the grant never reached the broker");
        pause_ms(20);
    }
    assert_int_equal(rows_of(t), 0);
    free(bundle);
    free(path);
    free(ns);
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
    wait_quota_refresh();
    expect(h, "PUT", path, "{\"value\":1,\"forever\":true}", 403, "kv_quota_exceeded");
    assert_int_equal(rows_of(t), 3);
    free(path);
    free(ns);
}

/* One refusal of each kind, from tenants of its own, counted once each in
 * /metrics and present in /metrics/prometheus. */
static void refusals_are_counted(void **state)
{
    (void)state;
    long long full0 = refusals("kv_quota_exceeded"), gated0 = refusals("feature_gated"),
              rate0 = refusals("rate_limited");
    char full[37], hfull[64], none[37], hnone[64], slow[37], hslow[64];
    fresh_tenant(full, hfull, "max_rows", "1");
    fresh_tenant(none, hnone, NULL, NULL);
    fresh_tenant(slow, hslow, "max_writes_per_sec", "1");
    char *ns = pgtest_unique("counted");
    char *k1 = fmt("/api/v1/kv/%s/k1", ns), *k2 = fmt("/api/v1/kv/%s/k2", ns);
    expect(hfull, "PUT", k1, "{\"value\":1,\"forever\":true}", 200, NULL);
    expect(hfull, "PUT", k2, "{\"value\":1,\"forever\":true}", 403, "kv_quota_exceeded");
    expect(hnone, "GET", k1, NULL, 403, "feature_gated");
    /* A bucket of 1: the first write empties it; the next, sent at once,
     * finds it empty unless a whole second passed in between. */
    int limited = 0;
    for (int i = 0; i < 5 && limited == 0; i++) {
        http_reply r = as(hslow, "PUT", k1, "{\"value\":1,\"forever\":true}");
        if (r.status == 429)
            limited = 1;
        else
            http_expect(&r, 200, NULL, NULL);
        http_reply_free(&r);
    }
    assert_int_equal(limited, 1);
    assert_int_equal(refusals("kv_quota_exceeded") - full0, 1);
    assert_int_equal(refusals("feature_gated") - gated0, 1);
    assert_int_equal(refusals("rate_limited") - rate0, 1);

    http_reply r = broker_http(&B, "GET", "/metrics/prometheus", NULL, NULL);
    http_expect(&r, 200, NULL, NULL);
    char *line = fmt("queen_kv_quota_refusals_total{reason=\"kv_quota_exceeded\"} %lld\n", full0 + 1);
    assert_non_null(strstr(r.body, line));
    free(line);
    line = fmt("queen_kv_quota_refusals_total{reason=\"feature_gated\"} %lld\n", gated0 + 1);
    assert_non_null(strstr(r.body, line));
    free(line);
    line = fmt("queen_kv_quota_refusals_total{reason=\"rate_limited\"} %lld\n", rate0 + 1);
    assert_non_null(strstr(r.body, line));
    free(line);
    http_reply_free(&r);
    free(k1);
    free(k2);
    free(ns);
}

/* The console's read of quota and usage: the caller's tenant only, its
 * limits as configured (null: unlimited), the last measurement, and no
 * quota row said as such. A tenant allowed no reads at all still gets it. */
static void quota_route_reads_the_tenants_quota(void **state)
{
    (void)state;
    char t[37], hdr[64], other[37], other_hdr[64], bare[37], bare_hdr[64];
    fresh_tenant(t, hdr, "enabled, max_rows, max_bytes, max_reads_per_sec, max_writes_per_sec", "true, 50, 4096, 0, 9");
    fresh_tenant(other, other_hdr, "enabled, max_rows", "true, 7");
    fresh_tenant(bare, bare_hdr, NULL, NULL);
    const char *h[] = {hdr, NULL};
    json_t *v = http_call_json(&B, h, "GET", "/api/v1/resources/kv/quota", NULL, 200);
    assert_string_equal(jstr(v, "tenant"), t);
    assert_true(jtrue(v, "hasQuota"));
    assert_true(jtrue(v, "enabled"));
    assert_int_equal(jint(v, "maxRows"), 50);
    assert_int_equal(jint(v, "maxBytes"), 4096);
    assert_int_equal(jint(v, "maxReadsPerSec"), 0);
    assert_int_equal(jint(v, "maxWritesPerSec"), 9);
    assert_int_equal(jint(v, "rows"), 0);
    assert_true(json_is_null(json_object_get(v, "computedAt")));
    json_decref(v);

    /* Rows written, then measured: the route shows the measurement. */
    expect(hdr, "PUT", "/api/v1/kv/qr/a", "{\"value\":1,\"forever\":true}", 200, NULL);
    expect(hdr, "PUT", "/api/v1/kv/qr/b", "{\"value\":2,\"forever\":true}", 200, NULL);
    PQclear(pgtest_exec(DB, "SELECT queen.kv_usage_measure_v1(now(), 1000000000000, 64)", 0, NULL));
    v = http_call_json(&B, h, "GET", "/api/v1/resources/kv/quota", NULL, 200);
    assert_int_equal(jint(v, "rows"), 2);
    assert_true(jint(v, "bytes") > 0);
    assert_non_null(jstr(v, "computedAt"));
    json_decref(v);

    /* Another tenant sees its own; one without a row is told so. */
    const char *ho[] = {other_hdr, NULL};
    v = http_call_json(&B, ho, "GET", "/api/v1/resources/kv/quota", NULL, 200);
    assert_string_equal(jstr(v, "tenant"), other);
    assert_int_equal(jint(v, "maxRows"), 7);
    assert_true(json_is_null(json_object_get(v, "maxBytes")));
    json_decref(v);
    const char *hb[] = {bare_hdr, NULL};
    v = http_call_json(&B, hb, "GET", "/api/v1/resources/kv/quota", NULL, 200);
    assert_string_equal(jstr(v, "tenant"), bare);
    assert_false(jtrue(v, "hasQuota"));
    assert_false(jtrue(v, "enabled"));
    assert_true(json_is_null(json_object_get(v, "maxRows")));
    assert_int_equal(jint(v, "rows"), 0);
    json_decref(v);

    /* Not a tenant's own key/value read: a bad tenant header is still 400. */
    const char *bad[] = {"x-queen-tenant: not-a-uuid", NULL};
    http_reply r = broker_http(&B, "GET", "/api/v1/resources/kv/quota", NULL, bad);
    http_expect(&r, 400, "kv_bad_request", "bad_tenant");
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
        cmocka_unit_test(quota_route_reads_the_tenants_quota),
    };
    return cmocka_run_group_tests_name("http_quota", tests, setup, teardown);
}
