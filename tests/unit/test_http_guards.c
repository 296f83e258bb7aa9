/* Unit tests of the input pieces a request meets: raw JSON spans (values
 * travel byte for byte), the engine's KV guards, strict body parsing, and
 * the error rendering from the registry (src/engine/rawjson.c, kvguard.c,
 * src/server/body.c, errors.c). Pure: no daemon, no database. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "errors.h"
#include "kvguard.h"
#include "rawjson.h"

static rawjson_span S(const char *s)
{
    return (rawjson_span){s, strlen(s)};
}

static bool span_eq(rawjson_span s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

static void raw_spans_keep_bytes(void **state)
{
    (void)state;
    const char *body = " { \"operations\" : [ {\"op\":\"put\",\"value\":0.1},"
                       " {\"value\":{\"a\":[1,\"]}\"]}, \"x\":12345678901234567890} ] , \"z\":null } ";
    rawjson_span ops, v;
    assert_true(rawjson_member(S(body), "operations", &ops));
    assert_int_equal(ops.p[0], '[');
    assert_int_equal(ops.p[ops.len - 1], ']');
    rawjson_iter it;
    assert_true(rawjson_open(&it, ops, '['));
    rawjson_span el;
    assert_true(rawjson_next(&it, NULL, &el));
    assert_true(rawjson_member(el, "value", &v));
    assert_true(span_eq(v, "0.1")); /* jansson would say 0.10000000000000001 */
    assert_true(rawjson_next(&it, NULL, &el));
    assert_true(rawjson_member(el, "value", &v));
    assert_true(span_eq(v, "{\"a\":[1,\"]}\"]}")); /* brackets inside strings do not count */
    assert_true(rawjson_member(el, "x", &v));
    assert_true(span_eq(v, "12345678901234567890"));
    assert_false(rawjson_next(&it, NULL, &el));
    assert_true(rawjson_member(S(body), "z", &v));
    assert_true(span_eq(v, "null"));
    assert_false(rawjson_member(S(body), "missing", &v));
    assert_false(rawjson_member(S("[1,2]"), "a", &v));

    /* escaped member names compare decoded */
    assert_true(rawjson_member(S("{\"op\\u0065rations\":[]}"), "operations", &v));
    assert_true(rawjson_member(S("{\"a\\\"b\":1}"), "a\"b", &v));
    assert_false(rawjson_key_is(S("\"op\\u00e9\""), "ope"));

    rawjson_span inner;
    assert_true(rawjson_object_inner(S(" { \"value\" : 1 , \"forever\":true } "), &inner));
    assert_true(span_eq(inner, "\"value\" : 1 , \"forever\":true"));
    assert_true(rawjson_object_inner(S("{ }"), &inner));
    assert_int_equal(inner.len, 0);
    assert_false(rawjson_object_inner(S("[]"), &inner));

    assert_int_equal(rawjson_value_len(S("\"a\\\\\"b")), 5);
    assert_int_equal(rawjson_value_len(S("[1,[2]")), 0); /* cut */
    assert_int_equal(rawjson_value_len(S("\"abc")), 0);
    assert_int_equal(rawjson_value_len(S("-1.5e3,")), 6);
}

static const kv_limits lim = {.max_ops = 4, .max_keys = 10, .max_value_bytes = 8, .max_key_bytes = 5, .page_default = 100, .page_max = 1000};

/* Checks the input is JSON the broker accepts, then runs the engine's
 * guards on its raw text (as queen_kv_apply does). */
static int guard(const char *ops_text, const kv_limits *l, queen_error *why)
{
    json_error_t jerr;
    json_t *ops = json_loads(ops_text, BODY_JSON_FLAGS, &jerr);
    if (ops == NULL)
        fail_msg("test input does not parse: %s", jerr.text);
    json_decref(ops);
    return kv_guard_ops(S(ops_text), l, NULL, why);
}

static void kv_guards_table(void **state)
{
    (void)state;
    kv_limits wire = lim;
    wire.in_wire = true;
    static const struct {
        const char *ops;
        bool wire;
        const char *reason; /* NULL: passes */
        queen_error_category category;
    } cases[] = {
        {"[]", false, NULL, 0},
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"abcde\"}]", false, NULL, 0},
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"abcdef\"}]", false, "kv_key_too_large", QUEEN_ERR_TOO_LARGE},
        /* bytes, not characters: two 3-byte characters are 6 bytes */
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"\xE2\x82\xAC\xE2\x82\xAC\"}]", false, "kv_key_too_large",
         QUEEN_ERR_TOO_LARGE},
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"a\\u0000b\"}]", false, "kv_bad_key", QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"get\",\"ns\":\"n\\u0000\",\"key\":\"a\"}]", false, "kv_bad_namespace", QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"getMany\",\"ns\":\"n\",\"keys\":[\"a\",\"b\\u0000\"]}]", false, "kv_bad_key",
         QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"getMany\",\"ns\":\"n\",\"keys\":[\"a\",\"toolong\"]}]", false, "kv_key_too_large",
         QUEEN_ERR_TOO_LARGE},
        {"[{\"op\":\"getPrefix\",\"ns\":\"n\",\"prefix\":\"toolong\"}]", false, "kv_key_too_large",
         QUEEN_ERR_TOO_LARGE},
        /* value bytes are the raw JSON as sent: "1234567" with quotes is 9 */
        {"[{\"op\":\"put\",\"ns\":\"n\",\"key\":\"k\",\"value\":12345678,\"forever\":true}]", false, NULL, 0},
        {"[{\"op\":\"put\",\"ns\":\"n\",\"key\":\"k\",\"value\":\"1234567\",\"forever\":true}]", false,
         "kv_value_too_large", QUEEN_ERR_TOO_LARGE},
        {"[{\"op\":\"put\",\"ns\":\"n\",\"key\":\"k\",\"value\":0.100000000,\"forever\":true}]", false,
         "kv_value_too_large", QUEEN_ERR_TOO_LARGE},
        {"[{},{},{},{},{}]", false, "kv_too_many_ops", QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"getMany\",\"ns\":\"n\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\"]},"
         "{\"op\":\"get\",\"ns\":\"n\",\"key\":\"k\"}]",
         false, "kv_too_many_keys", QUEEN_ERR_BAD_REQUEST},
        /* getPrefix counts its clamped limit (default 100) */
        {"[{\"op\":\"getPrefix\",\"ns\":\"n\",\"prefix\":\"a\"}]", false, "kv_too_many_keys", QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"getPrefix\",\"ns\":\"n\",\"prefix\":\"a\",\"limit\":-5}]", false, NULL, 0},
        {"[{\"op\":\"getPrefix\",\"ns\":\"n\",\"prefix\":\"a\",\"limit\":10}]", false, NULL, 0},
        {"[{\"op\":\"getPrefix\",\"ns\":\"n\",\"prefix\":\"a\",\"limit\":1}]", true,
         "kv_get_prefix_not_allowed_in_transaction", QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"k\",\"tenant\":\"x\"}]", false, "kv_tenant_not_an_input",
         QUEEN_ERR_BAD_REQUEST},
        {"[{\"op\":\"get\",\"ns\":\"n\",\"key\":\"k\",\"_tenant\":null}]", false, "kv_tenant_not_an_input",
         QUEEN_ERR_BAD_REQUEST},
        {"[1]", false, "kv_bad_request", QUEEN_ERR_BAD_REQUEST},
        {"{\"op\":\"get\"}", false, "kv_bad_request", QUEEN_ERR_BAD_REQUEST},
        /* shapes the guards do not judge are SQL's: they pass here */
        {"[{\"op\":\"nope\",\"ns\":7,\"key\":[]}]", false, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        queen_error why = {0};
        int rc = guard(cases[i].ops, cases[i].wire ? &wire : &lim, &why);
        if (cases[i].reason == NULL) {
            if (rc != 0)
                fail_msg("case %zu refused: %s (%s)", i, why.reason, why.detail);
            continue;
        }
        if (rc != -1 || strcmp(why.reason, cases[i].reason) != 0 || why.category != cases[i].category)
            fail_msg("case %zu: got rc %d reason '%s' category %d, want %s", i, rc, why.reason, why.category,
                     cases[i].reason);
    }
}

static void kv_limits_in_wire(void **state)
{
    (void)state;
    queen_config cfg = {.kv_max_ops_per_call = 256, .kv_max_keys_per_call = 1024, .kv_max_value_bytes = 65536,
                        .kv_max_key_bytes = 512};
    /* A configured guard never passes the SQL budget it stands for. */
    queen_config wide = {.kv_max_ops_per_call = 100000, .kv_max_keys_per_call = 100000,
                         .kv_max_value_bytes = 65536, .kv_max_key_bytes = 100000};
    assert_int_equal(kv_limits_from(&wide, false).max_ops, 256);
    assert_int_equal(kv_limits_from(&wide, false).max_keys, 4096);
    assert_int_equal(kv_limits_from(&wide, false).max_key_bytes, 512);
    kv_limits l = kv_limits_from(&cfg, false);
    assert_int_equal(l.max_ops, 256);
    assert_int_equal(l.max_keys, 1024);
    l = kv_limits_from(&cfg, true);
    assert_int_equal(l.max_ops, 64);
    assert_int_equal(l.max_keys, 256);
    assert_true(l.in_wire);
    cfg.kv_max_ops_per_call = 10;
    assert_int_equal(kv_limits_from(&cfg, true).max_ops, 10);
}

static http_request req_with(const char *body)
{
    return (http_request){.body = body, .body_len = strlen(body), .family = FAMILY_KV};
}

static json_t *parse_body(const char *body, http_response *res, bool allow_empty)
{
    http_request req = req_with(body);
    return body_parse(&req, res, allow_empty);
}

/* Every malformed body is a 400 bad_body naming line and column; none
 * crashes. */
static void bodies_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{", "{\"a\":1,\"a\":2}", "[1,]", "{'a':1}", "\xff\xfe", "{\"a\":\"\xc3\x28\"}", "nul", "{\"a\":1}x",
        "{\"a\":1e99999}", "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_response res = {0};
        json_t *v = parse_body(bad[i], &res, false);
        if (v != NULL)
            fail_msg("case %zu parsed", i);
        assert_int_equal(res.status, 400);
        json_t *err = json_loads(res.body, 0, NULL);
        assert_non_null(err);
        assert_string_equal(json_string_value(json_object_get(err, "code")), "bad_body");
        assert_non_null(strstr(json_string_value(json_object_get(err, "detail")), "line"));
        json_decref(err);
        free(res.body);
    }
    /* what must parse: a legal 2^64, a NUL inside a string (refused later,
     * by name), an empty body where allowed */
    static const char *const good[] = {"{\"v\":123456789012345678901234567890}", "[\"a\\u0000\"]", "null", "3"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        http_response res = {0};
        json_t *v = parse_body(good[i], &res, false);
        if (v == NULL)
            fail_msg("good case %zu refused: %s", i, res.body);
        json_decref(v);
    }
    http_response res = {0};
    json_t *v = parse_body("  \n", &res, true);
    assert_true(json_is_null(v));
    json_decref(v);
}

/* body_check gives body_parse's verdict without a tree: every malformed
 * body the same 400 bad_body, every good one accepted; body_surely_json
 * vouches only for what jansson accepts and says "not sure" for the rest
 * (jansson then judges), and vouches for the common bodies, or body_check
 * would build the tree it is there to avoid. */
static void bodies_checked_without_a_tree(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{", "{\"a\":1,\"a\":2}", "[1,]", "{'a':1}", "\xff\xfe", "{\"a\":\"\xc3\x28\"}", "nul", "{\"a\":1}x",
        "{\"a\":1e99999}", "", "{\"a\":{\"b\":1,\"b\":2}}", "{\"a\":1,\"\\u0061\":2}", "[\"\xed\xa0\x80\"]",
        "[\"\xe0\x80\xaf\"]", "[\"\xc0\xaf\"]", "[\"\xf4\x90\x80\x80\"]", "[\"a\tb\"]", "[01]", "[1.]", "[-]", "[\"\\x\"]", "[\"\\ud800\"]",
        "{\"a\\u0000\":1}", "truex", "[1 2]", "{\"a\" 1}", "{\"a\":1,}", "[\"\\u12g4\"]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (body_surely_json(bad[i], strlen(bad[i])))
            fail_msg("bad case %zu vouched for", i);
        http_request req = req_with(bad[i]);
        http_response res = {0};
        if (body_check(&req, &res, false))
            fail_msg("bad case %zu accepted", i);
        assert_int_equal(res.status, 400);
        json_t *err = json_loads(res.body, 0, NULL);
        assert_non_null(err);
        assert_string_equal(json_string_value(json_object_get(err, "code")), "bad_body");
        json_decref(err);
        free(res.body);
    }
    static const char *const sure[] = {
        "{\"operations\":[{\"op\":\"get\",\"ns\":\"bench\",\"key\":\"k42\"}]}",
        " [ {\"op\":\"put\",\"value\":{\"a\":-1.25,\"b\":[true,false,null],\"c\":\"\\\"\\n\\u00e9\"}} ] \n",
        "{\"v\":123456789012345678901234567890}", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "null", "3", "{}",
        "[]", "{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":2}}",
    };
    for (size_t i = 0; i < sizeof sure / sizeof sure[0]; i++) {
        if (!body_surely_json(sure[i], strlen(sure[i])))
            fail_msg("common case %zu not vouched for", i);
        json_t *v = json_loadb(sure[i], strlen(sure[i]), BODY_JSON_FLAGS, NULL);
        assert_non_null(v);
        json_decref(v);
    }
    /* valid, but jansson's to judge: still accepted through it */
    static const char *const unsure[] = {"[1e5]", "[\"\\ud83d\\ude00\"]", "[\"a\\u0000\"]", "{\"\\u0061\":1}"};
    for (size_t i = 0; i < sizeof unsure / sizeof unsure[0]; i++) {
        assert_false(body_surely_json(unsure[i], strlen(unsure[i])));
        http_request req = req_with(unsure[i]);
        http_response res = {0};
        if (!body_check(&req, &res, false))
            fail_msg("valid case %zu refused: %s", i, res.body);
    }
    http_request blank = req_with(" \n");
    http_response res = {0};
    assert_true(body_check(&blank, &res, true));
    assert_false(body_check(&blank, &res, false));
    assert_int_equal(res.status, 400);
    free(res.body);
}

static void body_members(void **state)
{
    (void)state;
    json_t *o = json_loads("{\"a\":\"x\",\"b\":1,\"c\":\"y\\u0000z\",\"n\":null,\"i\":3.0,\"f\":3.5}",
                           BODY_JSON_FLAGS, NULL);
    static const char *const ab[] = {"a", "b", NULL};
    const char *unknown = body_unknown_field(o, ab);
    assert_non_null(unknown);
    static const char *const all[] = {"a", "b", "c", "n", "i", "f", NULL};
    assert_null(body_unknown_field(o, all));
    http_response res = {0};
    bool bad = false;
    assert_string_equal(body_string(o, "a", &res, FAMILY_LOG, &bad), "x");
    assert_null(body_string(o, "n", &res, FAMILY_LOG, &bad));
    assert_null(body_string(o, "missing", &res, FAMILY_LOG, &bad));
    assert_false(bad);
    assert_null(body_string(o, "b", &res, FAMILY_LOG, &bad));
    assert_true(bad);
    assert_int_equal(res.status, 400);
    free(res.body);
    res = (http_response){0};
    bad = false;
    assert_null(body_string(o, "c", &res, FAMILY_KV, &bad)); /* NUL: refused, never truncated */
    assert_true(bad);
    assert_non_null(strstr(res.body, "kv_bad_request"));
    free(res.body);
    long long n = 0;
    assert_true(body_int(json_object_get(o, "i"), 1, 10, &n));
    assert_int_equal(n, 3);
    assert_false(body_int(json_object_get(o, "f"), 1, 10, &n));
    assert_false(body_int(json_object_get(o, "a"), 1, 10, &n));
    assert_false(body_int(json_object_get(o, "i"), 4, 10, &n));
    json_decref(o);
}

/* The one table: (family, category) -> status and code, Retry-After on 503. */
static void error_table(void **state)
{
    (void)state;
    static const struct {
        http_family fam;
        queen_error_category cat;
        unsigned status;
        const char *code;
        int retry;
    } cases[] = {
        {FAMILY_KV, QUEEN_ERR_BAD_REQUEST, 400, "kv_bad_request", 0},
        {FAMILY_KV, QUEEN_ERR_TOO_LARGE, 413, "payload_too_large", 0},
        {FAMILY_KV, QUEEN_ERR_UNAVAILABLE, 503, "kv_unavailable", 1},
        {FAMILY_KV, QUEEN_ERR_MISCONFIGURED, 500, "kv_misconfigured", 0},
        {FAMILY_KV, QUEEN_ERR_INTERNAL, 500, "kv_error", 0},
        {FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, 400, "bad_request", 0},
        {FAMILY_LOG, QUEEN_ERR_TOO_LARGE, 413, "payload_too_large", 0},
        {FAMILY_LOG, QUEEN_ERR_UNAVAILABLE, 503, "unavailable", 1},
        {FAMILY_LOG, QUEEN_ERR_MISCONFIGURED, 500, "misconfigured", 0},
        {FAMILY_OPS, QUEEN_ERR_INTERNAL, 500, "internal_error", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        queen_error err = {.category = cases[i].cat, .retry_after_s = queen_error_class_of(cases[i].cat)->retry_after_s};
        snprintf(err.reason, sizeof err.reason, "some_reason");
        snprintf(err.detail, sizeof err.detail, "some detail");
        http_response res = {0};
        http_engine_error(&res, cases[i].fam, &err);
        assert_int_equal(res.status, cases[i].status);
        assert_int_equal(res.retry_after, cases[i].retry);
        json_t *b = json_loads(res.body, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(b, "code")), cases[i].code);
        assert_string_equal(json_string_value(json_object_get(b, "error")), "some detail");
        assert_string_equal(json_string_value(json_object_get(b, "reason")), "some_reason");
        assert_string_equal(json_string_value(json_object_get(b, "detail")), "some detail");
        json_decref(b);
        free(res.body);
    }
}

/* The HTTP presentation of every engine category (the server's generated
 * table): a status and both codes for each, the statuses clients branch
 * on, and an unknown category presented as internal. */
static void http_error_classes_cover_every_category(void **state)
{
    (void)state;
    for (int c = QUEEN_OK; c <= QUEEN_ERR_OUTCOME_UNKNOWN; c++) {
        const http_error_class *h = http_error_class_of((queen_error_category)c);
        if (h == http_error_class_of(QUEEN_ERR_INTERNAL) && c != QUEEN_ERR_INTERNAL)
            fail_msg("category %d has no HTTP row", c);
        assert_true(h->status >= 200 && h->status < 600);
        assert_non_null(h->code);
        assert_non_null(h->kv_code);
    }
    assert_int_equal(http_error_class_of(QUEEN_ERR_UNAVAILABLE)->status, 503);
    assert_int_equal(http_error_class_of(QUEEN_ERR_RATE_LIMITED)->status, 429);
    assert_int_equal(http_error_class_of(QUEEN_ERR_QUOTA_EXCEEDED)->status, 403);
    assert_int_equal(http_error_class_of(QUEEN_ERR_UNAUTHORIZED)->status, 401);
    assert_int_equal(http_error_class_of(QUEEN_ERR_FORBIDDEN)->status, 403);
    /* The per-tenant limits are 403: a standing budget, not a rate. */
    assert_int_equal(http_error_class_of(QUEEN_ERR_LIMIT_EXCEEDED)->status, 403);
    /* A call that may have committed is not a 503: clients retry those. */
    assert_int_equal(http_error_class_of(QUEEN_ERR_OUTCOME_UNKNOWN)->status, 504);
    assert_int_equal(http_error_class_of((queen_error_category)999)->status, 500);
}

/* A lost required op on a KV route is a 200 verdict carrying the live value
 * byte for byte; a cut value becomes null, never a broken body. */
static void precondition_verdict(void **state)
{
    (void)state;
    static queen_error err = {.category = QUEEN_ERR_PRECONDITION};
    err.precondition.index = 2;
    err.precondition.version = 77;
    snprintf(err.precondition.reason, sizeof err.precondition.reason, "version");
    snprintf(err.precondition.value, sizeof err.precondition.value, "{\"n\": 0.1, \"big\": 18446744073709551616}");
    http_response res = {0};
    http_engine_error(&res, FAMILY_KV, &err);
    assert_int_equal(res.status, 200);
    assert_string_equal(res.body, "{\"ok\":false,\"reason\":\"kv_precondition\",\"failedIndex\":2,\"kvReason\":"
                                  "\"version\",\"version\":77,\"value\":{\"n\": 0.1, \"big\": 18446744073709551616}}");
    free(res.body);
    snprintf(err.precondition.value, sizeof err.precondition.value, "{\"n\": [1, 2");
    res = (http_response){0};
    http_engine_error(&res, FAMILY_KV, &err);
    assert_non_null(strstr(res.body, "\"value\":null}"));
    free(res.body);
    /* too large to carry: said so with its size, never as a null value */
    err.precondition.value[0] = '\0';
    err.precondition.value_omitted = true;
    err.precondition.value_bytes = 70000;
    res = (http_response){0};
    http_engine_error(&res, FAMILY_KV, &err);
    assert_non_null(strstr(res.body, "\"valueOmitted\":true,\"valueBytes\":70000}"));
    assert_null(strstr(res.body, "\"value\":"));
    free(res.body);
    /* outside the KV family it is an error, not a verdict */
    res = (http_response){0};
    http_engine_error(&res, FAMILY_LOG, &err);
    assert_int_equal(res.status, 409);
    free(res.body);
}

static void error_detail_not_utf8(void **state)
{
    (void)state;
    http_response res = {0};
    http_error(&res, 400, "bad_request", "r", "\xff\xfe");
    assert_int_equal(res.status, 400);
    json_t *b = json_loads(res.body, 0, NULL);
    assert_non_null(b);
    json_decref(b);
    free(res.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(raw_spans_keep_bytes), cmocka_unit_test(kv_guards_table),
        cmocka_unit_test(kv_limits_in_wire),    cmocka_unit_test(bodies_refused),
        cmocka_unit_test(body_members),         cmocka_unit_test(error_table),
        cmocka_unit_test(precondition_verdict), cmocka_unit_test(error_detail_not_utf8),
        cmocka_unit_test(bodies_checked_without_a_tree), cmocka_unit_test(http_error_classes_cover_every_category),
    };
    return cmocka_run_group_tests_name("http_guards", tests, NULL, NULL);
}
