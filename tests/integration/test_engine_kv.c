/* libqueen KV through the library itself (no HTTP), on the private cluster:
 * put/get/delete with exact values, the putIfAbsent race across threads,
 * incr limits, a required op's precondition parsed into queen_error,
 * getMany/getPrefix paging, tenancy isolation, console reads, refusals
 * before SQL, and the kv counters of queen_stats_json. Every test uses its
 * own namespace and tenant (pgtest_unique, a random uuid) so reruns pass. */
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

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

static void put_get_delete_with_exact_values(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char *ns = pgtest_unique("kv-basic-");
    char tenant[37];
    wire_uuid4(tenant);
    queen_error e = {0};
    char *out;

    must(queen_kv_put(q, tenant, ns, "k/1", "{\"a\": 1}", QUEEN_FOREVER, -1, false, &out, &e), &e);
    json_t *r = take_json(out);
    assert_true(jtrue(r, "applied"));
    assert_string_equal(jstr(r, "op"), "put");
    assert_string_equal(jstr(r, "key"), "k/1");
    long long v1 = jint(r, "version");
    assert_true(v1 > 0);
    json_decref(r);

    must(queen_kv_get(q, tenant, ns, "k/1", &out, &e), &e);
    r = take_json(out);
    assert_true(jtrue(r, "found"));
    assert_int_equal(jint(json_object_get(r, "value"), "a"), 1);
    assert_true(json_is_null(json_object_get(r, "expiresAt")));
    assert_int_equal(jint(r, "version"), v1);
    json_decref(r);

    /* Numbers pass through exactly: no double on the way in or out. */
    must(queen_kv_put(q, tenant, ns, "big", "[12345678901234567890123, 0.1]", 60, -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, tenant, ns, "big", &out, &e), &e);
    assert_non_null(strstr(out, "[12345678901234567890123, 0.1]"));
    assert_non_null(strstr(out, "\"expiresAt\": \"20"));
    free(out);

    /* expect: the current version applies, a stale one does not. */
    must(queen_kv_put(q, tenant, ns, "k/1", "2", QUEEN_FOREVER, v1, false, &out, &e), &e);
    r = take_json(out);
    assert_true(jtrue(r, "applied"));
    long long v2 = jint(r, "version");
    assert_true(v2 != v1);
    json_decref(r);
    must(queen_kv_put(q, tenant, ns, "k/1", "3", QUEEN_FOREVER, v1, false, &out, &e), &e);
    r = take_json(out);
    assert_false(jtrue(r, "applied"));
    assert_string_equal(jstr(r, "reason"), "version");
    assert_int_equal(jint(r, "version"), v2);
    assert_int_equal(jint(r, "value"), 2);
    json_decref(r);

    must(queen_kv_delete(q, tenant, ns, "k/1", -1, false, &out, &e), &e);
    r = take_json(out);
    assert_true(jtrue(r, "applied"));
    json_decref(r);
    must(queen_kv_delete(q, tenant, ns, "k/1", -1, false, &out, &e), &e);
    r = take_json(out);
    assert_false(jtrue(r, "applied"));
    assert_string_equal(jstr(r, "reason"), "absent");
    json_decref(r);
    must(queen_kv_get(q, tenant, ns, "k/1", &out, &e), &e);
    r = take_json(out);
    assert_false(jtrue(r, "found"));
    json_decref(r);

    /* A JSON null is a value; found:true with value null. */
    must(queen_kv_put(q, tenant, ns, "nothing", "null", QUEEN_FOREVER, -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, tenant, ns, "nothing", &out, &e), &e);
    r = take_json(out);
    assert_true(jtrue(r, "found"));
    assert_true(json_is_null(json_object_get(r, "value")));
    json_decref(r);

    free(ns);
    queen_close(q);
}

typedef struct race_arg {
    queen *q;
    const char *tenant, *ns;
    int id;
    int applied;
    char reason[160];
} race_arg;

static void *race_one(void *p)
{
    race_arg *a = p;
    char value[32];
    snprintf(value, sizeof value, "{\"winner\": %d}", a->id);
    char *out = NULL;
    queen_error e = {0};
    if (queen_kv_put_if_absent(a->q, a->tenant, a->ns, "lock", value, 30, false, &out, &e) != 0) {
        snprintf(a->reason, sizeof a->reason, "error %s", e.reason);
        return NULL;
    }
    json_t *r = json_loads(out, 0, NULL);
    a->applied = json_is_true(json_object_get(r, "applied"));
    snprintf(a->reason, sizeof a->reason, "%s", a->applied ? "" : jstr(r, "reason"));
    json_decref(r);
    free(out);
    return NULL;
}

static void put_if_absent_race_has_one_winner(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char tenant[37];
    wire_uuid4(tenant);
    for (int round = 0; round < 3; round++) {
        char *ns = pgtest_unique("kv-race-");
        enum { N = 8 };
        pthread_t th[N];
        race_arg args[N];
        for (int i = 0; i < N; i++) {
            args[i] = (race_arg){.q = q, .tenant = tenant, .ns = ns, .id = i};
            pthread_create(&th[i], NULL, race_one, &args[i]);
        }
        int winners = 0, winner = -1;
        for (int i = 0; i < N; i++) {
            pthread_join(th[i], NULL);
            if (args[i].applied) {
                winners++;
                winner = i;
            } else if (strcmp(args[i].reason, "exists") != 0) {
                fail_msg("loser %d: reason '%s', expected exists", i, args[i].reason);
            }
        }
        assert_int_equal(winners, 1);
        char *out;
        queen_error e = {0};
        must(queen_kv_get(q, tenant, ns, "lock", &out, &e), &e);
        json_t *r = take_json(out);
        assert_int_equal(jint(json_object_get(r, "value"), "winner"), winner);
        json_decref(r);
        free(ns);
    }
    queen_close(q);
}

static void incr_respects_limits_and_types(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char *ns = pgtest_unique("kv-incr-");
    queen_error e = {0};
    char *out;
    double max = 3, min = 0;
    for (int i = 1; i <= 5; i++) {
        must(queen_kv_incr(q, NULL, ns, "hits", 1, NULL, &max, 60, false, &out, &e), &e);
        if (i <= 3) {
            char want[32];
            snprintf(want, sizeof want, "\"value\": %d,", i); /* an integer, not 1.0 */
            if (strstr(out, want) == NULL)
                fail_msg("incr %d: %s", i, out);
        }
        json_t *r = take_json(out);
        assert_int_equal(jtrue(r, "applied"), i <= 3);
        if (i > 3) {
            assert_string_equal(jstr(r, "reason"), "limit");
            assert_int_equal(jint(r, "value"), 3); /* never saturates, reports the current value */
        }
        json_decref(r);
    }
    must(queen_kv_incr(q, NULL, ns, "hits", -5, &min, NULL, 60, false, &out, &e), &e);
    json_t *r = take_json(out);
    assert_false(jtrue(r, "applied"));
    assert_string_equal(jstr(r, "reason"), "limit");
    json_decref(r);
    must(queen_kv_incr(q, NULL, ns, "hits", 0.5, NULL, NULL, 60, false, &out, &e), &e);
    r = take_json(out);
    assert_true(jtrue(r, "applied"));
    assert_true(json_number_value(json_object_get(r, "value")) == 3.5);
    json_decref(r);

    must(queen_kv_put(q, NULL, ns, "word", "\"abc\"", 60, -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_incr(q, NULL, ns, "word", 1, NULL, NULL, 60, false, &out, &e), &e);
    r = take_json(out);
    assert_false(jtrue(r, "applied"));
    assert_string_equal(jstr(r, "reason"), "type");
    json_decref(r);
    free(ns);
    queen_close(q);
}

static void required_loss_fills_the_precondition(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char *ns = pgtest_unique("kv-req-");
    char tenant[37];
    wire_uuid4(tenant);
    queen_error e = {0};
    char *out;
    must(queen_kv_put(q, tenant, ns, "done:7", "{\"n\": 98765432109876543210, \"f\": 0.1}", QUEEN_FOREVER, -1, false,
                      &out, &e),
         &e);
    json_t *r = take_json(out);
    long long version = jint(r, "version");
    json_decref(r);

    out = (char *)1;
    assert_int_equal(queen_kv_put_if_absent(q, tenant, ns, "done:7", "true", QUEEN_FOREVER, true, &out, &e), -1);
    assert_null(out);
    assert_int_equal(e.category, QUEEN_ERR_PRECONDITION);
    assert_string_equal(e.sqlstate, "23514");
    assert_string_equal(e.reason, "kv_precondition_failed");
    assert_int_equal(e.precondition.index, 0);
    assert_string_equal(e.precondition.op, "put");
    assert_string_equal(e.precondition.ns, ns);
    assert_string_equal(e.precondition.key, "done:7");
    assert_string_equal(e.precondition.reason, "exists");
    assert_true(e.precondition.version == version);
    assert_non_null(strstr(e.precondition.value, "98765432109876543210"));
    assert_non_null(strstr(e.precondition.value, "\"f\": 0.1,"));

    /* In a batch, the index is the op's, and the batch writes nothing. */
    char ops[512];
    snprintf(ops, sizeof ops,
             "[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"other\",\"value\":1,\"forever\":true},"
             "{\"op\":\"delete\",\"ns\":\"%s\",\"key\":\"absent-key\",\"expect\":5,\"required\":true}]",
             ns, ns);
    assert_int_equal(queen_kv_apply(q, tenant, ops, false, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_PRECONDITION);
    assert_int_equal(e.precondition.index, 1);
    assert_string_equal(e.precondition.op, "delete");
    assert_string_equal(e.precondition.reason, "absent");
    assert_int_equal(e.precondition.version, 0);
    assert_string_equal(e.precondition.value, "null");
    must(queen_kv_get(q, tenant, ns, "other", &out, &e), &e);
    r = take_json(out);
    assert_false(jtrue(r, "found"));
    json_decref(r);

    /* A live value too large for SQL's 4096-byte DETAIL is reported as
     * omitted, with its size, never as a null value. */
    size_t big = 6000;
    char *value = malloc(big + 3);
    value[0] = '"';
    memset(value + 1, 'v', big);
    memcpy(value + 1 + big, "\"", 2);
    must(queen_kv_put(q, tenant, ns, "big", value, QUEEN_FOREVER, -1, false, &out, &e), &e);
    free(out);
    assert_int_equal(queen_kv_put_if_absent(q, tenant, ns, "big", "1", QUEEN_FOREVER, true, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_PRECONDITION);
    assert_true(e.precondition.value_omitted);
    assert_int_equal(e.precondition.value_bytes, big + 2);
    assert_string_equal(e.precondition.value, "");
    char *members = queen_error_precondition_json(&e, 0);
    assert_non_null(strstr(members, "\"valueOmitted\":true"));
    assert_null(strstr(members, "\"value\":"));
    free(members);
    free(value);
    free(ns);
    queen_close(q);
}

static void get_many_and_prefix_pages(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char *ns = pgtest_unique("kv-many-");
    char tenant[37];
    wire_uuid4(tenant);
    queen_error e = {0};
    char *out;
    const char *keys[] = {"a/1", "a/2", "a/3", "b/1"};
    for (int i = 0; i < 4; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        must(queen_kv_put(q, tenant, ns, keys[i], v, 60, -1, false, &out, &e), &e);
        free(out);
    }
    const char *want[] = {"a/2", "zz", "a/1"};
    must(queen_kv_get_many(q, tenant, ns, want, 3, &out, &e), &e);
    json_t *r = take_json(out);
    json_t *rows = json_object_get(r, "rows");
    assert_int_equal(json_array_size(rows), 2);
    assert_string_equal(jstr(json_array_get(rows, 0), "key"), "a/1"); /* key order */
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "missing"), 0)), "zz");
    json_decref(r);

    must(queen_kv_get_prefix(q, tenant, ns, "a/", NULL, 2, false, &out, &e), &e);
    r = take_json(out);
    assert_int_equal(json_array_size(json_object_get(r, "rows")), 2);
    assert_true(jtrue(r, "truncated"));
    char after[16];
    snprintf(after, sizeof after, "%s", jstr(r, "nextAfter"));
    assert_string_equal(after, "a/2");
    json_decref(r);
    must(queen_kv_get_prefix(q, tenant, ns, "a/", after, 2, true, &out, &e), &e);
    r = take_json(out);
    rows = json_object_get(r, "rows");
    assert_int_equal(json_array_size(rows), 1);
    assert_string_equal(jstr(json_array_get(rows, 0), "key"), "a/3");
    assert_null(json_object_get(json_array_get(rows, 0), "value")); /* keysOnly */
    assert_false(jtrue(r, "truncated"));
    json_decref(r);

    /* Console reads. */
    must(queen_kv_list(q, tenant, ns, NULL, NULL, 0, false, true, &out, &e), &e);
    r = take_json(out);
    assert_int_equal(json_array_size(json_object_get(r, "rows")), 4);
    json_decref(r);
    must(queen_kv_namespaces(q, tenant, &out, &e), &e);
    r = take_json(out);
    json_t *nss = json_object_get(r, "namespaces");
    assert_int_equal(json_array_size(nss), 1);
    assert_string_equal(jstr(json_array_get(nss, 0), "namespace"), ns);
    assert_int_equal(jint(json_array_get(nss, 0), "keys"), 4);
    json_decref(r);
    free(ns);
    queen_close(q);
}

static void tenants_never_see_each_other(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    char *ns = pgtest_unique("kv-ten-");
    char a[37], b[37];
    wire_uuid4(a);
    wire_uuid4(b);
    queen_error e = {0};
    char *out;
    must(queen_kv_put(q, a, ns, "same", "\"from a\"", 60, -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, b, ns, "same", &out, &e), &e);
    json_t *r = take_json(out);
    assert_false(jtrue(r, "found"));
    json_decref(r);
    must(queen_kv_put_if_absent(q, b, ns, "same", "\"from b\"", 60, true, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, a, ns, "same", &out, &e), &e);
    r = take_json(out);
    assert_string_equal(json_string_value(json_object_get(r, "value")), "from a");
    json_decref(r);
    must(queen_kv_delete(q, a, ns, "same", -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, b, ns, "same", &out, &e), &e);
    r = take_json(out);
    assert_string_equal(json_string_value(json_object_get(r, "value")), "from b");
    json_decref(r);
    must(queen_kv_namespaces(q, a, &out, &e), &e);
    assert_string_equal(out, "{\"namespaces\": []}");
    free(out);

    /* A tenant inside an op is refused by SQL: the tenant is an argument. */
    char ops[256];
    snprintf(ops, sizeof ops, "[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"same\",\"tenant\":\"%s\"}]", ns, b);
    assert_int_equal(queen_kv_apply(q, a, ops, false, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(e.reason, "kv_tenant_not_an_input");
    free(ns);
    queen_close(q);
}

static void bad_input_is_refused_with_a_category(void **state)
{
    (void)state;
    queen *q = engine_open(4);
    queen_error e = {0};
    char *out;
    assert_int_equal(queen_kv_put(q, NULL, "ns", "k", NULL, 60, -1, false, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_int_equal(queen_kv_put(q, NULL, "ns", "k", "1", -5, -1, false, &out, &e), -1);
    assert_string_equal(e.reason, "kv_bad_ttl");
    /* 0 is no expiry, not forever (QUEEN_FOREVER is LONG_MIN): a zero left unset stores nothing. */
    assert_int_equal(queen_kv_put(q, NULL, "ns", "k", "1", 0, -1, false, &out, &e), -1);
    assert_string_equal(e.reason, "kv_bad_ttl");
    assert_int_equal(queen_kv_incr(q, NULL, "ns", "k", 1, NULL, NULL, 0, false, &out, &e), -1);
    assert_string_equal(e.reason, "kv_bad_ttl");
    assert_int_equal(queen_kv_get(q, NULL, "Bad NS", "k", &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(e.reason, "kv_bad_namespace");
    assert_string_equal(e.sqlstate, "22023");
    char key[600];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    assert_int_equal(queen_kv_get(q, NULL, "ns", key, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_TOO_LARGE);
    assert_string_equal(e.reason, "kv_key_too_large");
    assert_int_equal(queen_kv_put(q, NULL, "ns", "k", "{not json", 60, -1, false, &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
    assert_int_equal(queen_kv_get(q, NULL, "ns", "\xff\xfe", &out, &e), -1);
    assert_string_equal(e.reason, "kv_bad_key");
    assert_int_equal(queen_kv_apply(q, NULL, "[{\"op\":\"nope\",\"ns\":\"a\",\"key\":\"k\"}]", false, &out, &e), -1);
    assert_string_equal(e.reason, "kv_unknown_op");
    assert_int_equal(queen_kv_get(q, "not-a-uuid", "ns", "k", &out, &e), -1);
    assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);

    /* The counters saw it: puts applied earlier in this process do not
     * exist here (new handle), but this handle's errors do. */
    char *stats = queen_stats_json(q);
    json_t *s = take_json(stats);
    json_t *ops = json_object_get(json_object_get(s, "kv"), "ops");
    assert_true(jint(json_object_get(ops, "get"), "error") >= 3);
    assert_true(jint(json_object_get(json_object_get(s, "kv"), "batch"), "error") >= 1);
    assert_int_equal(jint(json_object_get(s, "pool"), "size"), 4);
    json_decref(s);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_get_delete_with_exact_values),
        cmocka_unit_test(put_if_absent_race_has_one_winner),
        cmocka_unit_test(incr_respects_limits_and_types),
        cmocka_unit_test(required_loss_fills_the_precondition),
        cmocka_unit_test(get_many_and_prefix_pages),
        cmocka_unit_test(tenants_never_see_each_other),
        cmocka_unit_test(bad_input_is_refused_with_a_category),
    };
    return cmocka_run_group_tests_name("engine_kv", tests, NULL, NULL);
}
