/* The KV routes (docs/api.md, KV) against a real broker on the private cluster:
 * the batch, the path routes (slash in a key, %2F, decoding once, ETag, the
 * query-string and field-in-path refusals, DELETE bodies, required losses as
 * 200 verdicts), the console reads, the edge guards (refused before a
 * connection is taken: the pool's acquiredTotal does not move), and every
 * KV status: 200, 400, 404, 405, 413, 503 (+ Retry-After), 500
 * (kv_misconfigured, kv_error). 403 and 429 belong to quota and rate
 * limiting, which test_http_quota.c covers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static test_broker B;
static char *NS; /* unique per run */

/* The broker: small edge guards so each is reachable with small bodies, no
 * sweeper so the pool's acquiredTotal moves only with our requests. */
static const char *const broker_env[] = {
    "QUEEN_SWEEPER=0",
    "QUEEN_KV_MAX_OPS_PER_CALL=8",
    "QUEEN_KV_MAX_KEYS_PER_CALL=16",
    "QUEEN_KV_MAX_VALUE_BYTES=1000",
    "QUEEN_KV_MAX_KEY_BYTES=64",
    "QUEEN_MAX_BODY_BYTES=16384",
    NULL,
};

static int setup(void **state)
{
    (void)state;
    NS = pgtest_unique("httpkv");
    return broker_start(&B, broker_env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int rc = broker_stop(&B); /* 0: stopped gracefully (and, under ASan, without leaks) */
    free(NS);
    return rc == 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------- */

static http_reply call(const test_broker *b, const char *method, const char *path, const char *body)
{
    return broker_http(b, method, path, body, NULL);
}

/* Runs a refusal and checks it took no database connection. */
static void refused_at_edge(const char *method, const char *path, const char *body, long status, const char *error,
                            const char *reason)
{
    long long before = http_metric(&B, "engine", "pool", "acquiredTotal");
    http_refused(&B, method, path, body, status, error, reason);
    assert_int_equal(http_metric(&B, "engine", "pool", "acquiredTotal"), before);
}

/* ---- the path routes ------------------------------------------------------ */

static void path_put_get_delete(void **state)
{
    (void)state;
    /* %2F is a slash inside the key; the value comes back byte for byte */
    char *p = fmt("/api/v1/kv/%s/a/b%%2Fc", NS);
    http_reply r = call(&B, "PUT", p, "{\"value\":{\"x\":0.1,\"big\":12345678901234567890},\"forever\":true}");
    http_expect(&r, 200, NULL, NULL);
    assert_non_null(strstr(r.body, "12345678901234567890"));
    json_t *put = json_of(&r);
    assert_true(json_is_true(json_object_get(put, "applied")));
    assert_string_equal(jstr(put, "key"), "a/b/c");
    long long version = jint(put, "version");
    http_reply_free(&r);
    json_decref(put);

    /* the same key through real slashes: one key, one ETag */
    char *same = fmt("/api/v1/kv/%s/a/b/c", NS);
    r = call(&B, "GET", same, NULL);
    http_expect(&r, 200, NULL, NULL);
    assert_non_null(strstr(r.body, "\"x\": 0.1"));
    assert_non_null(strstr(r.body, "12345678901234567890"));
    char *etag = http_reply_header(&r, "ETag");
    char want[48];
    snprintf(want, sizeof want, "\"%lld\"", version);
    assert_non_null(etag);
    assert_string_equal(etag, want);
    free(etag);
    json_t *got = json_of(&r);
    assert_true(json_is_true(json_object_get(got, "found")));
    assert_string_equal(jstr(got, "op"), "get");
    json_decref(got);
    http_reply_free(&r);

    /* decoded exactly once: %252F is the three characters %2F */
    char *twice = fmt("/api/v1/kv/%s/a%%252Fb", NS);
    r = call(&B, "GET", twice, NULL);
    http_expect(&r, 200, NULL, NULL);
    json_t *miss = json_of(&r);
    assert_true(json_is_false(json_object_get(miss, "found")));
    assert_string_equal(jstr(miss, "key"), "a%2Fb");
    char *no_etag = http_reply_header(&r, "ETag");
    assert_null(no_etag);
    json_decref(miss);
    http_reply_free(&r);

    /* delete: empty body, then null body (nothing left: applied false) */
    json_t *d = http_ok(&B, "DELETE", p, NULL, 200);
    assert_true(json_is_true(json_object_get(d, "applied")));
    json_decref(d);
    d = http_ok(&B, "DELETE", p, "null", 200);
    assert_true(json_is_false(json_object_get(d, "applied")));
    assert_string_equal(jstr(d, "reason"), "absent");
    json_decref(d);
    /* expect 0 on an absent key succeeds */
    d = http_ok(&B, "DELETE", p, "{\"expect\":0}", 200);
    assert_true(json_is_true(json_object_get(d, "applied")));
    json_decref(d);
    free(p);
    free(same);
    free(twice);
}

static void path_refusals(void **state)
{
    (void)state;
    char *p = fmt("/api/v1/kv/%s/k1", NS);
    /* a query string, even an empty one: keys must not land in access logs */
    char *q = fmt("%s?x=1", p), *bare = fmt("%s?", p);
    refused_at_edge("GET", q, NULL, 400, "kv_bad_request", "kv_no_query_string");
    refused_at_edge("GET", bare, NULL, 400, "kv_bad_request", "kv_no_query_string");
    refused_at_edge("PUT", q, "{\"value\":1,\"forever\":true}", 400, "kv_bad_request", "kv_no_query_string");
    refused_at_edge("DELETE", q, NULL, 400, "kv_bad_request", "kv_no_query_string");
    /* a body naming what the path carries */
    static const char *const in_path[] = {"{\"value\":1,\"forever\":true,\"key\":\"x\"}",
                                          "{\"value\":1,\"forever\":true,\"ns\":\"x\"}",
                                          "{\"value\":1,\"forever\":true,\"namespace\":\"x\"}",
                                          "{\"op\":\"put\",\"value\":1,\"forever\":true}"};
    for (size_t i = 0; i < sizeof in_path / sizeof in_path[0]; i++)
        refused_at_edge("PUT", p, in_path[i], 400, "kv_bad_request", "kv_field_in_path");
    refused_at_edge("DELETE", p, "{\"key\":\"k1\"}", 400, "kv_bad_request", "kv_field_in_path");
    refused_at_edge("GET", p, "{\"ns\":\"x\"}", 400, "kv_bad_request", "kv_field_in_path");
    /* PUT takes only value, ttlSeconds, forever, expect, required */
    refused_at_edge("PUT", p, "{\"value\":1,\"forever\":true,\"ttl\":5}", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("PUT", p, "{\"value\":1,\"forever\":true,\"tenant\":\"x\"}", 400, "kv_bad_request",
                    "kv_tenant_not_an_input");
    refused_at_edge("PUT", p, "[1]", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("PUT", p, "null", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("PUT", p, NULL, 400, "bad_body", "invalid_json");
    refused_at_edge("PUT", p, "{\"value\":", 400, "bad_body", "invalid_json");
    /* DELETE takes an empty body, null, or {expect?, required?} */
    refused_at_edge("DELETE", p, "{\"value\":1}", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("DELETE", p, "[]", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("GET", p, "{\"expect\":1}", 400, "kv_bad_request", "kv_bad_request");
    /* the expiry is SQL's rule: the edge passes the body, SQL refuses */
    http_refused(&B, "PUT", p, "{\"value\":1}", 400, "kv_bad_request", "kv_expiry_not_specified");
    http_refused(&B, "PUT", p, "{\"value\":1,\"ttlSeconds\":1.5}", 400, "kv_bad_request", "kv_bad_ttl");
    /* keys: NUL, bad escapes, not UTF-8, too long */
    char *nul = fmt("/api/v1/kv/%s/a%%00b", NS), *esc = fmt("/api/v1/kv/%s/a%%zz", NS),
         *latin = fmt("/api/v1/kv/%s/caf%%E9", NS);
    refused_at_edge("GET", nul, NULL, 400, "kv_bad_request", "kv_bad_key");
    refused_at_edge("PUT", esc, "{\"value\":1,\"forever\":true}", 400, "kv_bad_request", "kv_bad_key");
    refused_at_edge("GET", latin, NULL, 400, "kv_bad_request", "kv_bad_key");
    char key65[66];
    memset(key65, 'k', 65);
    key65[65] = '\0';
    char *longkey = fmt("/api/v1/kv/%s/%s", NS, key65);
    refused_at_edge("GET", longkey, NULL, 413, "payload_too_large", "kv_key_too_large");
    /* the namespace is SQL's: lower case only */
    http_refused(&B, "GET", "/api/v1/kv/UPPER/k", NULL, 400, "kv_bad_request", "kv_bad_namespace");
    free(p);
    free(q);
    free(bare);
    free(nul);
    free(esc);
    free(latin);
    free(longkey);
}

/* A required op that loses answers 200 with the verdict, and writes nothing. */
static void required_losses_are_verdicts(void **state)
{
    (void)state;
    char *p = fmt("/api/v1/kv/%s/req", NS);
    json_t *v = http_ok(&B, "PUT", p, "{\"value\":[1,2.50],\"forever\":true}", 200);
    long long version = jint(v, "version");
    json_decref(v);

    http_reply r = call(&B, "PUT", p, "{\"value\":3,\"forever\":true,\"expect\":0,\"required\":true}");
    http_expect(&r, 200, NULL, NULL);
    assert_non_null(strstr(r.body, "\"value\":[1, 2.50]")); /* the live value, as PostgreSQL rendered it */
    v = json_of(&r);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_string_equal(jstr(v, "reason"), "kv_precondition");
    assert_int_equal(jint(v, "failedIndex"), 0);
    assert_string_equal(jstr(v, "kvReason"), "exists");
    assert_int_equal(jint(v, "version"), version);
    json_decref(v);
    http_reply_free(&r);

    v = http_ok(&B, "DELETE", p, "{\"expect\":999999999,\"required\":true}", 200);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_string_equal(jstr(v, "kvReason"), "version");
    json_decref(v);

    /* not required: a verdict inside an ordinary result, nothing rolled back */
    v = http_ok(&B, "PUT", p, "{\"value\":3,\"forever\":true,\"expect\":999999999}", 200);
    assert_true(json_is_false(json_object_get(v, "applied")));
    assert_string_equal(jstr(v, "reason"), "version");
    json_decref(v);

    /* batch: op 1 loses, so op 0's write is rolled back */
    char *body = fmt("{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"rb\",\"value\":1,\"forever\":true},"
                     "{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"req\",\"value\":2,\"forever\":true,\"expect\":0,"
                     "\"required\":true}]}",
                     NS, NS);
    v = http_ok(&B, "POST", "/api/v1/kv", body, 200);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(jint(v, "failedIndex"), 1);
    json_decref(v);
    char *rb = fmt("/api/v1/kv/%s/rb", NS);
    v = http_ok(&B, "GET", rb, NULL, 200);
    assert_true(json_is_false(json_object_get(v, "found")));
    json_decref(v);
    free(p);
    free(body);
    free(rb);
}

/* ---- the batch ------------------------------------------------------------ */

static void batch_shapes(void **state)
{
    (void)state;
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%1$s\",\"key\":\"b1\",\"value\":0.1,\"ttlSeconds\":600},"
                    "{\"op\":\"putIfAbsent\",\"ns\":\"%1$s\",\"key\":\"b2\",\"value\":null,\"forever\":true},"
                    "{\"op\":\"incr\",\"ns\":\"%1$s\",\"key\":\"ctr\",\"delta\":2,\"forever\":true},"
                    "{\"op\":\"get\",\"ns\":\"%1$s\",\"key\":\"b1\"},"
                    "{\"op\":\"getMany\",\"ns\":\"%1$s\",\"keys\":[\"b2\",\"nope\"]},"
                    "{\"op\":\"getPrefix\",\"ns\":\"%1$s\",\"prefix\":\"b\",\"limit\":5},"
                    "{\"op\":\"delete\",\"ns\":\"%1$s\",\"key\":\"nope\"}]",
                    NS);
    char *wrapped = fmt("{\"operations\":%s}", ops);
    const char *bodies[] = {wrapped, ops};
    for (int round = 0; round < 2; round++) {
        http_reply r = call(&B, "POST", "/api/v1/kv", bodies[round]);
        http_expect(&r, 200, NULL, NULL);
        json_t *v = json_of(&r);
        json_t *results = json_object_get(v, "results");
        assert_int_equal(json_array_size(results), 7);
        static const char *const op_names[] = {"put", "put", "incr", "get", "getMany", "getPrefix", "delete"};
        for (size_t i = 0; i < 7; i++) {
            json_t *el = json_array_get(results, i);
            assert_int_equal(jint(el, "index"), i);
            assert_string_equal(jstr(el, "op"), op_names[i]);
        }
        assert_true(json_is_true(json_object_get(json_array_get(results, 3), "found")));
        assert_int_equal(jint(json_array_get(results, 2), "value"), 2 * (round + 1));
        assert_non_null(strstr(r.body, "\"value\": 0.1"));
        json_decref(v);
        http_reply_free(&r);
    }
    /* empty: no database round trip at all */
    long long before = http_metric(&B, "engine", "pool", "acquiredTotal");
    json_t *v = http_ok(&B, "POST", "/api/v1/kv", "[]", 200);
    assert_int_equal(json_array_size(json_object_get(v, "results")), 0);
    json_decref(v);
    v = http_ok(&B, "POST", "/api/v1/kv", "{\"operations\":[]}", 200);
    assert_int_equal(json_array_size(json_object_get(v, "results")), 0);
    json_decref(v);
    assert_int_equal(http_metric(&B, "engine", "pool", "acquiredTotal"), before);

    refused_at_edge("POST", "/api/v1/kv", "{\"ops\":[]}", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/kv", "{\"operations\":[],\"x\":1}", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/kv", "{\"operations\":{}}", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/kv", "\"get\"", 400, "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/kv", "[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\"},{\"op\":\"get\",\"ns\":\"a\","
                                          "\"key\":\"k\"}] trailing",
                    400, "bad_body", "invalid_json");
    http_refused(&B, "POST", "/api/v1/kv", "[{\"op\":\"fly\",\"ns\":\"a\",\"key\":\"k\"}]", 400, "kv_bad_request",
            "kv_unknown_op");
    free(ops);
    free(wrapped);
}

/* Each edge guard refuses before a connection is taken. */
static void batch_edge_guards(void **state)
{
    (void)state;
    char one[128];
    snprintf(one, sizeof one, "{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k\"}", NS);
    char nine[1300] = "[";
    for (int i = 0; i < 9; i++) {
        strcat(nine, one);
        strcat(nine, i < 8 ? "," : "]");
    }
    refused_at_edge("POST", "/api/v1/kv", nine, 400, "kv_bad_request", "kv_too_many_ops");
    char *keys17 = fmt("[{\"op\":\"getMany\",\"ns\":\"%s\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\","
                       "\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}]",
                       NS);
    refused_at_edge("POST", "/api/v1/kv", keys17, 400, "kv_bad_request", "kv_too_many_keys");
    /* value bytes are the raw JSON as sent: 998 characters + 2 quotes = 1000 passes, 1001 is refused */
    char big[1100];
    memset(big, 'v', sizeof big);
    big[999] = '\0';
    char *v1001 = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"big\",\"value\":\"%s\",\"forever\":true}]", NS, big);
    refused_at_edge("POST", "/api/v1/kv", v1001, 413, "payload_too_large", "kv_value_too_large");
    char *path = fmt("/api/v1/kv/%s/big", NS), *put1001 = fmt("{\"value\":\"%s\",\"forever\":true}", big);
    refused_at_edge("PUT", path, put1001, 413, "payload_too_large", "kv_value_too_large");
    big[998] = '\0';
    char *v1000 = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"big\",\"value\":\"%s\",\"forever\":true}]", NS, big);
    json_t *v = http_ok(&B, "POST", "/api/v1/kv", v1000, 200);
    json_decref(v);
    char *nul = fmt("[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"a\\u0000b\"}]", NS);
    refused_at_edge("POST", "/api/v1/kv", nul, 400, "kv_bad_request", "kv_bad_key");
    char *tenant = fmt("[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"a\",\"tenantId\":\"x\"}]", NS);
    refused_at_edge("POST", "/api/v1/kv", tenant, 400, "kv_bad_request", "kv_tenant_not_an_input");
    /* the body cap: 413 before any parsing */
    char *huge = malloc(20001);
    memset(huge, ' ', 20000);
    huge[0] = '[';
    huge[19999] = ']';
    huge[20000] = '\0';
    refused_at_edge("POST", "/api/v1/kv", huge, 413, "payload_too_large", "body_too_large");
    free(huge);
    free(keys17);
    free(v1001);
    free(v1000);
    free(path);
    free(put1001);
    free(nul);
    free(tenant);
}

/* ---- console reads --------------------------------------------------------- */

static void console_reads(void **state)
{
    (void)state;
    char *ns = pgtest_unique("console");
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%1$s\",\"key\":\"a\",\"value\":1,\"forever\":true},"
                    "{\"op\":\"put\",\"ns\":\"%1$s\",\"key\":\"b\",\"value\":2,\"forever\":true},"
                    "{\"op\":\"put\",\"ns\":\"%1$s\",\"key\":\"c\",\"value\":3,\"forever\":true}]",
                    ns);
    json_decref(http_ok(&B, "POST", "/api/v1/kv", ops, 200));
    json_t *v = http_ok(&B, "GET", "/api/v1/resources/kv/namespaces", NULL, 200);
    json_t *list = json_object_get(v, "namespaces");
    bool seen = false;
    size_t i;
    json_t *el;
    json_array_foreach(list, i, el)
    {
        if (strcmp(jstr(el, "namespace"), ns) == 0) {
            seen = true;
            assert_int_equal(jint(el, "keys"), 3);
        }
    }
    assert_true(seen);
    json_decref(v);

    char *page1 = fmt("{\"namespace\":\"%s\",\"limit\":2}", ns);
    v = http_ok(&B, "POST", "/api/v1/resources/kv/list", page1, 200);
    assert_int_equal(json_array_size(json_object_get(v, "rows")), 2);
    assert_true(json_is_true(json_object_get(v, "truncated")));
    assert_string_equal(jstr(v, "nextAfter"), "b");
    json_decref(v);
    /* A page past SQL's clamp is SQL's to clamp, not the edge's to refuse. */
    char *big = fmt("{\"namespace\":\"%s\",\"limit\":2147483647}", ns);
    v = http_ok(&B, "POST", "/api/v1/resources/kv/list", big, 200);
    assert_int_equal(json_array_size(json_object_get(v, "rows")), 3);
    assert_true(json_is_false(json_object_get(v, "truncated")));
    json_decref(v);
    free(big);
    char *page2 = fmt("{\"namespace\":\"%s\",\"after\":\"b\",\"keysOnly\":true,\"prefix\":\"\"}", ns);
    v = http_ok(&B, "POST", "/api/v1/resources/kv/list", page2, 200);
    assert_int_equal(json_array_size(json_object_get(v, "rows")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "rows"), 0), "key"), "c");
    json_decref(v);

    refused_at_edge("POST", "/api/v1/resources/kv/list", "{}", 400, "kv_bad_request", "kv_bad_namespace");
    refused_at_edge("POST", "/api/v1/resources/kv/list", "{\"namespace\":\"a\",\"limt\":1}", 400, "kv_bad_request",
                    "kv_bad_request");
    refused_at_edge("POST", "/api/v1/resources/kv/list", "{\"namespace\":\"a\",\"limit\":\"9\"}", 400,
                    "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/resources/kv/list", "{\"namespace\":\"a\",\"keysOnly\":1}", 400,
                    "kv_bad_request", "kv_bad_request");
    refused_at_edge("POST", "/api/v1/resources/kv/list", "{\"namespace\":7}", 400, "kv_bad_request",
                    "kv_bad_request");
    http_refused(&B, "POST", "/api/v1/resources/kv/list", "{\"namespace\":\"Bad Name\"}", 400, "kv_bad_request",
            "kv_bad_namespace");
    free(ns);
    free(ops);
    free(page1);
    free(page2);
}

static void unknown_routes(void **state)
{
    (void)state;
    http_reply r = call(&B, "GET", "/api/v1/nope", NULL);
    http_expect(&r, 404, NULL, NULL);
    json_t *v = json_of(&r);
    assert_string_equal(jstr(v, "error"), "Not Found");
    assert_string_equal(jstr(v, "code"), "no_such_route");
    assert_string_equal(jstr(v, "reason"), "no_such_route"); /* the envelope, like every refusal */
    assert_non_null(jstr(v, "detail"));
    json_decref(v);
    http_reply_free(&r);
    char *p = fmt("/api/v1/kv/%s/k", NS);
    http_refused(&B, "POST", p, "{}", 405, "method_not_allowed", NULL);
    free(p);
}

/* ---- 503: the pool exhausted ----------------------------------------------- */

typedef struct blocked_put {
    const test_broker *b;
    const char *path;
    long status;
} blocked_put;

static void *put_thread(void *arg)
{
    blocked_put *bp = arg;
    http_reply r = call(bp->b, "PUT", bp->path, "{\"value\":2,\"forever\":true}");
    bp->status = r.status;
    http_reply_free(&r);
    return NULL;
}

/* One connection, held by a PUT waiting on a row lock the test holds: the
 * next request waits QUEEN_PG_ACQUIRE_TIMEOUT_MS and answers 503
 * kv_unavailable with Retry-After: 1; the held PUT completes afterwards. */
static void pool_exhausted_is_503(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_PG_POOL=1", "QUEEN_HTTP_THREADS=4", "QUEEN_PG_ACQUIRE_TIMEOUT_MS=300",
                                      "QUEEN_SWEEPER=0", NULL};
    test_broker small;
    assert_true(broker_start(&small, env));
    char *ns = pgtest_unique("busy");
    PGconn *c = pgtest_connect();
    PQclear(pgtest_exec(c, "BEGIN", 0, NULL));
    char *ops = fmt("[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"held\",\"value\":1,\"forever\":true}]", ns);
    const char *params[] = {ops, "00000000-0000-0000-0000-000000000001"};
    PQclear(pgtest_exec(c, "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)", 2, params));

    char *path = fmt("/api/v1/kv/%s/held", ns);
    blocked_put bp = {.b = &small, .path = path};
    pthread_t t;
    pthread_create(&t, NULL, put_thread, &bp);
    /* The PUT holds the only connection once its backend waits on our lock. */
    PGconn *watch = pgtest_connect();
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(c));
    const char *holder[] = {pid};
    WAIT_UNTIL(pgtest_int(watch, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", 1,
                          holder) > 0,
               5000, "the PUT never reached the locked row");
    PQfinish(watch);
    char *other = fmt("/api/v1/kv/%s/other", ns);
    http_reply r = call(&small, "GET", other, NULL);
    http_expect(&r, 503, "kv_unavailable", NULL);
    char *retry = http_reply_header(&r, "Retry-After");
    assert_non_null(retry);
    assert_string_equal(retry, "1");
    free(retry);
    http_reply_free(&r);

    PQclear(pgtest_exec(c, "ROLLBACK", 0, NULL));
    pthread_join(t, NULL);
    assert_int_equal(bp.status, 200);
    PQfinish(c);
    assert_int_equal(broker_stop(&small), 0);
    free(ns);
    free(ops);
    free(path);
    free(other);
}

/* ---- 500: a schema older than the broker, and anything else ------------------ */

/* A database of its own, booted by a broker, then broken on purpose: a
 * missing function is class 42 (kv_misconfigured), any other error is
 * kv_error. */
static void server_faults_are_500(void **state)
{
    (void)state;
    char *dbname = NULL;
    char *url = pgtest_create_database("httpkv500", &dbname);
    static const char *const env[] = {"QUEEN_SWEEPER=0", NULL};
    test_broker b;
    broker_spawn(&b, url, env);
    assert_true(broker_wait_healthy(&b, 60000));
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQclear(pgtest_exec(c, "DROP FUNCTION queen.kv_apply_v1(jsonb, uuid, timestamptz, boolean) CASCADE", 0, NULL));
    PQclear(pgtest_exec(c,
                        "CREATE OR REPLACE FUNCTION queen.kv_namespaces_v1(p_tenant uuid) RETURNS jsonb "
                        "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$",
                        0, NULL));
    PQclear(pgtest_exec(c, "DROP FUNCTION queen.log_queues_v1(uuid)", 0, NULL));
    PQfinish(c);

    http_reply r = call(&b, "POST", "/api/v1/kv", "[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\"}]");
    http_expect(&r, 500, "kv_misconfigured", NULL);
    http_reply_free(&r);
    r = call(&b, "GET", "/api/v1/kv/a/k", NULL);
    http_expect(&r, 500, "kv_misconfigured", NULL);
    http_reply_free(&r);
    /* PostgreSQL's own text is detail, never the reason (it may quote input). */
    r = call(&b, "GET", "/api/v1/resources/kv/namespaces", NULL);
    http_expect(&r, 500, "kv_error", "db_error");
    assert_non_null(strstr(r.body, "boom"));
    http_reply_free(&r);
    r = call(&b, "GET", "/api/v1/resources/queues", NULL);
    http_expect(&r, 500, "misconfigured", NULL);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
    pgtest_drop_database(dbname);
    free(dbname);
    free(url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(path_put_get_delete),
        cmocka_unit_test(path_refusals),
        cmocka_unit_test(required_losses_are_verdicts),
        cmocka_unit_test(batch_shapes),
        cmocka_unit_test(batch_edge_guards),
        cmocka_unit_test(console_reads),
        cmocka_unit_test(unknown_routes),
        cmocka_unit_test(pool_exhausted_is_503),
        cmocka_unit_test(server_faults_are_500),
    };
    return cmocka_run_group_tests_name("http_kv", tests, setup, teardown);
}
