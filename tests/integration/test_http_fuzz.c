/* Bad input never crashes and never writes. A table of hand-written bad
 * requests over every route that takes input (malformed JSON, invalid UTF-8,
 * wrong types, duplicate keys, deep nesting, NUL in a key, unknown fields,
 * huge bodies), each refused with its exact status and code, then a check
 * that none of them wrote a row; then a seeded random mutation of valid
 * bodies, where every answer must be below 500 and the broker must stay
 * healthy. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "pgtest.h"

static test_broker B;

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_MAX_BODY_BYTES=65536", "QUEEN_ACCESS_LOG=0", NULL};
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* Templates: NS and Q are replaced by this run's namespace and queue. */
typedef struct bad_case {
    const char *method, *path, *body;
    long status;
    const char *needle; /* must appear in the answer: the error code or reason */
} bad_case;

static const bad_case cases[] = {
    /* malformed JSON: 400 bad_body, everywhere */
    {"POST", "/api/v1/kv", "[{\"op\":\"put\"", 400, "\"bad_body\""},
    {"POST", "/api/v1/kv", "{\"operations\":[] ,}", 400, "\"bad_body\""},
    {"POST", "/api/v1/kv", "[{'op':'get'}]", 400, "\"bad_body\""},
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":01,\"forever\":true}", 400, "\"bad_body\""},
    {"POST", "/api/v1/push", "{\"items\":[{\"queue\":\"Q\",\"payload\":}]}", 400, "\"bad_body\""},
    {"POST", "/api/v1/transaction", "{\"operations\":[]]", 400, "\"bad_body\""},
    {"POST", "/api/v1/ack", "{\"transactionId\":", 400, "\"bad_body\""},
    {"POST", "/api/v1/configure", "{\"queue\":\"Q\" \"options\":{}}", 400, "\"bad_body\""},
    {"POST", "/api/v1/resources/kv/list", "{namespace:\"NS\"}", 400, "\"bad_body\""},
    {"POST", "/api/v1/kv", "", 400, "\"bad_body\""},
    /* invalid UTF-8 in a body, and in a path */
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"\xff\xfe\",\"value\":1,\"forever\":true}]", 400,
     "\"bad_body\""},
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":\"\xc3\x28\",\"forever\":true}", 400, "\"bad_body\""},
    {"POST", "/api/v1/push", "{\"items\":[{\"queue\":\"Q\",\"payload\":\"\xed\xa0\x80\"}]}", 400, "\"bad_body\""},
    {"PUT", "/api/v1/kv/NS/%C3%28", "{\"value\":1,\"forever\":true}", 400, "kv_bad_key"},
    /* duplicate keys (jsonb would keep the last one silently) */
    {"POST", "/api/v1/kv", "{\"operations\":[],\"operations\":[]}", 400, "duplicate"},
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":1,\"value\":2,\"forever\":true}", 400, "duplicate"},
    /* a NUL in a key, by escape and by path */
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"a\\u0000\",\"value\":1,\"forever\":true}]", 400,
     "kv_bad_key"},
    {"POST", "/api/v1/kv", "[{\"op\":\"getMany\",\"ns\":\"NS\",\"keys\":[\"\\u0000\"]}]", 400, "kv_bad_key"},
    {"PUT", "/api/v1/kv/NS/a%00", "{\"value\":1,\"forever\":true}", 400, "kv_bad_key"},
    {"POST", "/api/v1/resources/kv/list", "{\"namespace\":\"NS\",\"prefix\":\"a\\u0000\"}", 400, "kv_bad_request"},
    /* a NUL elsewhere: PostgreSQL's jsonb refuses it (22P05), still a 400 */
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":\"a\\u0000b\",\"forever\":true}", 400, "kv_bad_request"},
    {"POST", "/api/v1/push", "{\"items\":[{\"queue\":\"Q\",\"payload\":\"\\u0000\"}]}", 400, "bad_request"},
    {"POST", "/api/v1/configure", "{\"queue\":\"Q\\u0000x\"}", 400, "bad_request"},
    /* wrong types and shapes: the edge's or SQL's 400 */
    {"POST", "/api/v1/kv", "[1,2,3]", 400, "kv_bad_request"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"forever\":true}]", 400, "kv_bad_request"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1,\"ttlSeconds\":\"60\"}]", 400,
     "kv_bad_ttl"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1,\"forever\":true,\"expect\":-1}]",
     400, "kv_bad_expect"},
    {"POST", "/api/v1/kv",
     "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1,\"forever\":true,\"required\":\"yes\"}]", 400,
     "kv_bad_request"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":7,\"key\":\"k\",\"value\":1,\"forever\":true}]", 400,
     "kv_bad_namespace"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":[\"k\"],\"value\":1,\"forever\":true}]", 400,
     "kv_bad_key"},
    {"POST", "/api/v1/kv", "[{\"op\":\"incr\",\"ns\":\"NS\",\"key\":\"k\",\"delta\":\"1\",\"forever\":true}]", 400,
     "kv_bad_request"},
    {"POST", "/api/v1/kv", "[{\"op\":\"getMany\",\"ns\":\"NS\",\"keys\":\"k\"}]", 400, "kv_bad_request"},
    {"POST", "/api/v1/kv", "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1,\"forever\":true,\"colour\":1}]",
     400, "kv_bad_request"},
    {"POST", "/api/v1/kv",
     "[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1,\"forever\":true},"
     "{\"op\":\"delete\",\"ns\":\"NS\",\"key\":\"k\"}]",
     400, "kv_duplicate_key_in_call"},
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":1,\"ttlSeconds\":60,\"forever\":true}", 400, "kv_expiry_not_specified"},
    {"PUT", "/api/v1/kv/NS/k", "\"just a string\"", 400, "kv_bad_request"},
    {"DELETE", "/api/v1/kv/NS/k", "{\"expect\":\"1\"}", 400, "kv_bad_expect"},
    {"POST", "/api/v1/push", "{\"items\":[{\"queue\":7,\"payload\":1}]}", 400, "bad_request"},
    {"POST", "/api/v1/push", "{\"items\":[{\"queue\":\"Q\",\"payload\":1,\"transactionId\":\"\"}]}", 400,
     "bad_request"},
    {"POST", "/api/v1/push", "{\"items\":\"Q\"}", 400, "bad_request"},
    {"POST", "/api/v1/configure", "{\"queue\":\"Q\",\"options\":{\"leaseTime\":0}}", 400, "bad_request"},
    {"POST", "/api/v1/configure", "{\"queue\":[\"Q\"]}", 400, "bad_request"},
    {"POST", "/api/v1/transaction",
     "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\",\"payload\":1}]}],\"kv\":{}}", 400,
     "bad_request"},
    {"POST", "/api/v1/transaction",
     "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\",\"payload\":1}]}],"
     "\"kv\":[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"a\\u0000\",\"value\":1,\"forever\":true}]}",
     400, "kv_bad_key"},
    /* shapes SQL judges inside a bundle: the bundle's 200 failure body */
    {"POST", "/api/v1/transaction",
     "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\",\"payload\":1}]}],"
     "\"kv\":[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"k\",\"value\":1}]}",
     200, "\"success\":false"},
    {"POST", "/api/v1/transaction", "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\"}]}]}", 200,
     "\"bad_request\""},
    /* unknown fields where they matter */
    {"PUT", "/api/v1/kv/NS/k", "{\"value\":1,\"forever\":true,\"ttl\":3}", 400, "kv_bad_request"},
    {"POST", "/api/v1/resources/kv/list", "{\"namespace\":\"NS\",\"page\":2}", 400, "kv_bad_request"},
    {"POST", "/api/v1/transaction",
     "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\",\"payload\":1}]}],\"requiredLease\":[]}", 400,
     "bad_request"},
};

static char *instantiate(const char *tmpl, const char *ns, const char *q)
{
    size_t cap = strlen(tmpl) * 4 + 64, o = 0;
    char *out = malloc(cap);
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, "NS", 2) == 0) {
            o += (size_t)sprintf(out + o, "%s", ns);
            p += 2;
        } else if (*p == 'Q' && (p[1] == '"' || p[1] == '\\')) {
            o += (size_t)sprintf(out + o, "%s", q);
            p++;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

static void table_refused_and_nothing_written(void **state)
{
    (void)state;
    char *ns = pgtest_unique("fuzz"), *q = pgtest_unique("fuzzq");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *path = instantiate(cases[i].path, ns, q), *body = instantiate(cases[i].body, ns, q);
        http_reply r = broker_http(&B, cases[i].method, path, body, NULL);
        if (r.status != cases[i].status || strstr(r.body, cases[i].needle) == NULL)
            fail_msg("case %zu (%s %s %s): got %ld %s, want %ld with %s", i, cases[i].method, cases[i].path,
                     cases[i].body, r.status, r.body, cases[i].status, cases[i].needle);
        http_reply_free(&r);
        free(path);
        free(body);
    }
    /* deep nesting: refused before any parser recurses (QUEEN_MAX_BODY_DEPTH) */
    size_t depth = 30000; /* 60 KB: under the body cap of this broker */
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    http_reply r = broker_http(&B, "POST", "/api/v1/kv", deep, NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "body_too_deep"));
    http_reply_free(&r);
    free(deep);
    /* a huge body: 413 whatever it holds */
    size_t huge_len = 70000;
    char *huge = malloc(huge_len + 1);
    memset(huge, ' ', huge_len);
    huge[0] = '[';
    huge[huge_len - 1] = ']';
    huge[huge_len] = '\0';
    static const char *const routes[][2] = {{"POST", "/api/v1/kv"},
                                            {"POST", "/api/v1/push"},
                                            {"POST", "/api/v1/transaction"},
                                            {"PUT", "/api/v1/kv/a/b"}};
    for (size_t i = 0; i < 4; i++) {
        r = broker_http(&B, routes[i][0], routes[i][1], huge, NULL);
        assert_int_equal(r.status, 413);
        assert_non_null(strstr(r.body, "payload_too_large"));
        http_reply_free(&r);
    }
    free(huge);

    PGconn *c = pgtest_connect();
    const char *p1[] = {ns}, *p2[] = {q};
    char *n = pgtest_scalar(c, "SELECT count(*) FROM queen.kv WHERE namespace = $1", 1, p1);
    assert_string_equal(n, "0");
    free(n);
    n = pgtest_scalar(c, "SELECT count(*) FROM queen.queues WHERE name = $1", 1, p2);
    assert_string_equal(n, "0");
    free(n);
    PQfinish(c);
    free(ns);
    free(q);
}

/* xorshift: a fixed seed, so a failure names a reproducible input. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void mutations_never_5xx(void **state)
{
    (void)state;
    char *ns = pgtest_unique("mut"), *q = pgtest_unique("mutq");
    static const char *const templates[][3] = {
        {"POST", "/api/v1/kv",
         "{\"operations\":[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"a/b\",\"value\":{\"x\":[1,2.5,\"s\"]},"
         "\"ttlSeconds\":60,\"expect\":0},{\"op\":\"getMany\",\"ns\":\"NS\",\"keys\":[\"a/b\",\"c\"]},"
         "{\"op\":\"incr\",\"ns\":\"NS\",\"key\":\"n\",\"delta\":1,\"max\":10,\"forever\":true}]}"},
        {"PUT", "/api/v1/kv/NS/k", "{\"value\":{\"deep\":{\"er\":[true,null]}},\"forever\":true,\"required\":false}"},
        {"POST", "/api/v1/push", "{\"items\":[{\"queue\":\"Q\",\"partition\":\"p\",\"payload\":{\"a\":1},"
                                 "\"transactionId\":\"t\"}]}"},
        {"POST", "/api/v1/transaction",
         "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"Q\",\"payload\":1}]}],"
         "\"kv\":[{\"op\":\"put\",\"ns\":\"NS\",\"key\":\"m\",\"value\":1,\"forever\":true}]}"},
        {"POST", "/api/v1/ack/batch",
         "{\"acknowledgments\":[{\"transactionId\":\"t\",\"partitionId\":\"00000000-0000-0000-0000-000000000000\"}]}"},
        {"POST", "/api/v1/resources/kv/list", "{\"namespace\":\"NS\",\"prefix\":\"a\",\"limit\":5}"},
    };
    static const char alphabet[] = "{}[]\",:\\0123456789-.eEtruefalsn \x01\x80\xff";
    int answered = 0;
    for (int round = 0; round < 600; round++) {
        size_t t = (size_t)(next() % (sizeof templates / sizeof templates[0]));
        char *path = instantiate(templates[t][1], ns, q), *body = instantiate(templates[t][2], ns, q);
        size_t len = strlen(body);
        int edits = 1 + (int)(next() % 3);
        for (int e = 0; e < edits && len > 1; e++) {
            size_t at = (size_t)(next() % len);
            switch (next() % 3) {
            case 0: /* replace */
                body[at] = alphabet[next() % (sizeof alphabet - 1)];
                break;
            case 1: /* truncate */
                body[at] = '\0';
                len = at;
                break;
            default: /* delete one byte */
                memmove(body + at, body + at + 1, len - at);
                len--;
            }
        }
        http_reply r = broker_http(&B, templates[t][0], path, body, NULL);
        if (r.status >= 500 || r.status < 200)
            fail_msg("round %d: %s %s with %s answered %ld %s", round, templates[t][0], path, body, r.status, r.body);
        answered++;
        http_reply_free(&r);
        free(path);
        free(body);
    }
    http_reply r = broker_http(&B, "GET", "/health", NULL, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    print_message("# %d mutated requests, none answered 5xx\n", answered);
    free(ns);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_refused_and_nothing_written),
        cmocka_unit_test(mutations_never_5xx),
    };
    return cmocka_run_group_tests_name("http_fuzz", tests, setup, teardown);
}
