/* Unit tests of the KV quota arithmetic (src/engine/quota.c), no database:
 * the token bucket (refill, burst cap, debt, Retry-After), quota_decide's
 * verdicts and their order, the delta kept across refreshes and reset by a
 * new measurement, and the op counting of a call (kvguard.c). Table-driven. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kvguard.h"
#include "quota.h"

/* One step against one bucket: at `at` ms, take n at rate; expect ok, and
 * on a refusal that Retry-After. */
static void bucket_table(void **state)
{
    (void)state;
    static const struct {
        int group; /* steps of one group share a fresh bucket */
        long long rate, at;
        int n;
        bool ok;
        int retry;
    } steps[] = {
        /* 2/s: a full bucket of 2, then empty; 500 ms gives one token back. */
        {1, 2, 0, 1, true, 0},     {1, 2, 1, 1, true, 0},      {1, 2, 2, 1, false, 1},
        {1, 2, 500, 1, true, 0},   {1, 2, 501, 1, false, 1},   {1, 2, 10000, 2, true, 0},
        /* a long idle does not bank more than one second */
        {1, 2, 10001, 1, false, 1},
        /* rate 0: nothing, ever; Retry-After says the floor, 1 */
        {2, 0, 0, 1, false, 1},    {2, 0, 5000, 1, false, 1},
        /* unlimited */
        {3, -1, 0, 1000000, true, 0},
        /* a call bigger than the bucket is admitted on a full bucket and
         * leaves debt: 10 at 4/s -> -6, so 1 more needs 7 tokens = 2 s */
        {4, 4, 0, 10, true, 0},    {4, 4, 1, 1, false, 2},     {4, 4, 2000, 1, true, 0},
        /* 1/s: Retry-After is whole seconds, at least 1 */
        {5, 1, 0, 1, true, 0},     {5, 1, 999, 1, false, 1},   {5, 1, 1000, 1, true, 0},
    };
    quota_bucket b = {0};
    int group = -1;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        if (steps[i].group != group) {
            memset(&b, 0, sizeof b);
            group = steps[i].group;
        }
        int retry = 0;
        bool ok = quota_bucket_take(&b, steps[i].rate, steps[i].at, steps[i].n, &retry);
        if (ok != steps[i].ok)
            fail_msg("step %zu: took=%d, expected %d", i, ok, steps[i].ok);
        if (!ok && retry != steps[i].retry)
            fail_msg("step %zu: retry %d, expected %d", i, retry, steps[i].retry);
    }
}

static quota_state limited(long long rows, long long bytes, long long rps, long long wps, long long used_rows,
                           long long used_bytes)
{
    quota_state s;
    memset(&s, 0, sizeof s);
    s.max_rows = s.max_bytes = s.max_rps = s.max_wps = -1;
    quota_apply_read(&s, true, true, rows, bytes, rps, wps, used_rows, used_bytes, "t1");
    return s;
}

static void decide_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool has_row, enabled, tenancy;
        long long max_rows, max_bytes, rps, wps, used_rows, used_bytes, added_rows;
        int reads, writes, creating;
        long bytes;
        quota_verdict want;
    } cases[] = {
        {"tenancy, no row: gated", false, false, true, -1, -1, -1, -1, 0, 0, 0, 1, 0, 0, 0, QUOTA_GATED},
        {"tenancy, disabled: gated", true, false, true, -1, -1, -1, -1, 0, 0, 0, 0, 1, 0, 0, QUOTA_GATED},
        {"tenancy, granted: admitted", true, true, true, -1, -1, -1, -1, 0, 0, 0, 1, 1, 1, 10, QUOTA_ADMIT},
        {"no tenancy, no row: unlimited", false, false, false, -1, -1, -1, -1, 0, 0, 0, 5, 5, 5, 500, QUOTA_ADMIT},
        {"no tenancy, disabled row: allowed", true, false, false, -1, -1, -1, -1, 0, 0, 0, 1, 0, 0, 0, QUOTA_ADMIT},
        {"5th row fits", true, true, true, 5, -1, -1, -1, 3, 0, 1, 0, 1, 1, 2, QUOTA_ADMIT},
        {"6th row is full", true, true, true, 5, -1, -1, -1, 3, 0, 2, 0, 1, 1, 2, QUOTA_FULL},
        {"measured full", true, true, true, 5, -1, -1, -1, 5, 0, 0, 0, 1, 1, 2, QUOTA_FULL},
        {"a delete is never full", true, true, true, 5, 10, -1, -1, 50, 500, 0, 0, 1, 0, 0, QUOTA_ADMIT},
        {"a read is never full", true, true, true, 5, 10, -1, -1, 50, 500, 0, 3, 0, 0, 0, QUOTA_ADMIT},
        {"bytes: fits exactly", true, true, true, -1, 100, -1, -1, 0, 90, 0, 0, 1, 1, 10, QUOTA_ADMIT},
        {"bytes: one over", true, true, true, -1, 100, -1, -1, 0, 90, 0, 0, 1, 1, 11, QUOTA_FULL},
        {"full before rate", true, true, true, 0, -1, -1, 0, 0, 0, 0, 0, 1, 1, 1, QUOTA_FULL},
        {"read rate 0: no reads", true, true, true, -1, -1, 0, -1, 0, 0, 0, 1, 0, 0, 0, QUOTA_RATE},
        {"read rate 0: writes still go", true, true, true, -1, -1, 0, -1, 0, 0, 0, 0, 1, 0, 0, QUOTA_ADMIT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        quota_state s = limited(cases[i].max_rows, cases[i].max_bytes, cases[i].rps, cases[i].wps,
                                cases[i].used_rows, cases[i].used_bytes);
        s.has_row = cases[i].has_row;
        s.enabled = cases[i].enabled;
        s.added_rows = cases[i].added_rows;
        int retry = 0;
        quota_verdict v = quota_decide(&s, cases[i].tenancy, cases[i].reads, cases[i].writes, cases[i].creating,
                                       cases[i].bytes, 1000, &retry);
        if (v != cases[i].want)
            fail_msg("%s: verdict %d, expected %d", cases[i].name, v, cases[i].want);
        if (v == QUOTA_ADMIT && s.added_rows != cases[i].added_rows + cases[i].creating)
            fail_msg("%s: added_rows %lld", cases[i].name, s.added_rows);
    }
}

/* Rates per verdict: both buckets are checked before either is taken, and
 * the larger wait is reported. */
static void rate_verdicts(void **state)
{
    (void)state;
    quota_state s = limited(-1, -1, 1, 2, 0, 0);
    int retry = 0;
    assert_int_equal(quota_decide(&s, true, 1, 2, 0, 0, 0, &retry), QUOTA_ADMIT);
    assert_int_equal(quota_decide(&s, true, 0, 1, 0, 0, 10, &retry), QUOTA_RATE);
    assert_int_equal(retry, 1);
    /* the read bucket is empty too; a read-only refusal took no write token */
    assert_int_equal(quota_decide(&s, true, 1, 0, 0, 0, 10, &retry), QUOTA_RATE);
    assert_int_equal(quota_decide(&s, true, 1, 1, 0, 0, 1000, &retry), QUOTA_ADMIT);
    /* a refused call (full) takes no token */
    quota_state f = limited(0, -1, -1, 1, 0, 0);
    assert_int_equal(quota_decide(&f, true, 0, 1, 1, 1, 0, &retry), QUOTA_FULL);
    assert_int_equal(quota_decide(&f, true, 0, 1, 0, 0, 0, &retry), QUOTA_ADMIT);
}

/* The delta survives a refresh that brings the same measurement and is
 * reset by a new one; a changed rate restarts its bucket. */
static void refresh_keeps_or_resets_the_delta(void **state)
{
    (void)state;
    quota_state s = limited(10, -1, -1, -1, 2, 0);
    int retry;
    for (int i = 0; i < 3; i++)
        assert_int_equal(quota_decide(&s, true, 0, 1, 1, 4, 0, &retry), QUOTA_ADMIT);
    assert_int_equal(s.added_rows, 3);
    assert_int_equal(s.added_bytes, 12);
    quota_apply_read(&s, true, true, 10, -1, -1, -1, 2, 0, "t1");
    assert_int_equal(s.added_rows, 3);
    quota_apply_read(&s, true, true, 10, -1, -1, -1, 9, 0, "t2");
    assert_int_equal(s.used_rows, 9);
    assert_int_equal(s.added_rows, 0);
    assert_int_equal(quota_decide(&s, true, 0, 1, 1, 0, 0, &retry), QUOTA_ADMIT);
    assert_int_equal(quota_decide(&s, true, 0, 1, 1, 0, 0, &retry), QUOTA_FULL);
    /* the operator raises the limit: the next refresh admits again */
    quota_apply_read(&s, true, true, 20, -1, -1, -1, 9, 0, "t2");
    assert_int_equal(quota_decide(&s, true, 0, 1, 1, 0, 0, &retry), QUOTA_ADMIT);
    /* a new rate: its bucket starts full */
    quota_apply_read(&s, true, true, 20, -1, -1, 1, 9, 0, "t2");
    assert_int_equal(quota_decide(&s, true, 0, 1, 0, 0, 0, &retry), QUOTA_ADMIT);
    assert_int_equal(quota_decide(&s, true, 0, 1, 0, 0, 0, &retry), QUOTA_RATE);
}

static void demand_of_ops(void **state)
{
    (void)state;
    static const struct {
        const char *ops;
        int reads, writes, creating;
        long bytes;
    } cases[] = {
        {"[]", 0, 0, 0, 0},
        {"[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\"}]", 1, 0, 0, 0},
        {"[{\"op\":\"getMany\"},{\"op\":\"getPrefix\"}]", 2, 0, 0, 0},
        {"[{\"op\":\"put\",\"value\":\"abc\"}]", 0, 1, 1, 5},
        {"[{\"op\":\"putIfAbsent\",\"value\":{\"a\": 1}}, {\"op\":\"delete\"}]", 0, 2, 1, 8},
        {"[{\"op\":\"incr\",\"delta\":1}]", 0, 1, 1, 8},
        {"[{\"op\":\"p\\u0075t\",\"value\":1}]", 0, 1, 1, 1},
        {"[{\"op\":\"nope\"},{\"key\":\"x\"}]", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kv_limits lim = {.max_ops = 256, .max_keys = 4096, .max_value_bytes = 65536, .max_key_bytes = 512, .page_default = 100, .page_max = 1000};
        kv_demand d;
        queen_error err;
        if (kv_guard_ops((rawjson_span){cases[i].ops, strlen(cases[i].ops)}, &lim, &d, &err) != 0)
            fail_msg("%s refused: %s", cases[i].ops, err.reason);
        if (d.reads != cases[i].reads || d.writes != cases[i].writes || d.creating != cases[i].creating ||
            d.bytes != cases[i].bytes)
            fail_msg("%s: reads %d writes %d creating %d bytes %ld", cases[i].ops, d.reads, d.writes, d.creating,
                     d.bytes);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bucket_table),
        cmocka_unit_test(decide_table),
        cmocka_unit_test(rate_verdicts),
        cmocka_unit_test(refresh_keeps_or_resets_the_delta),
        cmocka_unit_test(demand_of_ops),
    };
    return cmocka_run_group_tests_name("engine_quota", tests, NULL, NULL);
}
