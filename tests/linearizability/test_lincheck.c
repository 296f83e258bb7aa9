/* The checker itself, on hand-made histories: correct concurrent histories
 * are accepted, and each kind of anomaly the KV route could show (a stale
 * read, two winners of one compare-and-set or putIfAbsent, a lost
 * increment, a limit crossed, a read of a deleted key, an effect that came
 * from nowhere) is rejected. Then a large generated history, correct by
 * construction, must be accepted within the search budget, and the same
 * history with one read falsified must be rejected. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lincheck.h"

/* Hand-made ops: times in arbitrary units. */
static lin_op get(int client, long long from, long long to, bool found, long long value, long long version)
{
    return (lin_op){.client = client, .kind = LIN_GET, .invoke_ns = from, .complete_ns = to, .ok = found,
                    .res_value = value, .res_version = version, .expect = LIN_NO_EXPECT};
}

static lin_op put(int client, long long from, long long to, long long value, long long expect, bool applied,
                  long long res_value, long long res_version)
{
    return (lin_op){.client = client, .kind = LIN_PUT, .invoke_ns = from, .complete_ns = to, .value = value,
                    .expect = expect, .ok = applied, .res_value = res_value, .res_version = res_version};
}

static lin_op incr(int client, long long from, long long to, long long delta, bool applied, long long res_value,
                   long long res_version)
{
    return (lin_op){.client = client, .kind = LIN_INCR, .invoke_ns = from, .complete_ns = to, .delta = delta,
                    .expect = LIN_NO_EXPECT, .ok = applied, .res_value = res_value, .res_version = res_version};
}

static lin_verdict check(const lin_op *ops, size_t n)
{
    lin_report rep;
    lin_verdict v = lin_check(ops, n, 0, &rep);
    if (v != LIN_OK)
        print_message("# %s\n", rep.why);
    return v;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void a_sequential_history_is_accepted(void **state)
{
    (void)state;
    lin_op h[] = {
        get(0, 0, 1, false, 0, 0),
        put(0, 2, 3, 5, LIN_NO_EXPECT, true, 5, 10),
        get(1, 4, 5, true, 5, 10),
        put(1, 6, 7, 6, 10, true, 6, 11),           /* CAS on the version read */
        put(0, 8, 9, 7, 10, false, 6, 11),          /* CAS on an old version loses, reports the live row */
        incr(0, 10, 11, 3, true, 9, 12),
        (lin_op){.kind = LIN_DELETE, .invoke_ns = 12, .complete_ns = 13, .expect = LIN_NO_EXPECT, .ok = true,
                 .res_value = 9, .res_version = 12},
        get(1, 14, 15, false, 0, 0),
    };
    assert_int_equal(check(h, N(h)), LIN_OK);
}

static void a_stale_read_is_rejected(void **state)
{
    (void)state;
    /* 2 overwrote 1 before the get began, yet the get returns 1 */
    lin_op h[] = {
        put(0, 0, 1, 1, LIN_NO_EXPECT, true, 1, 10),
        put(0, 2, 3, 2, LIN_NO_EXPECT, true, 2, 11),
        get(1, 4, 5, true, 1, 10),
    };
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

static void a_read_overlapping_a_write_may_see_either_value(void **state)
{
    (void)state;
    lin_op h[] = {
        put(0, 0, 1, 1, LIN_NO_EXPECT, true, 1, 10),
        put(0, 2, 10, 2, LIN_NO_EXPECT, true, 2, 11),
        get(1, 3, 4, true, 2, 11), /* the write took effect early */
        get(2, 5, 6, true, 2, 11),
        get(3, 4, 12, true, 2, 11),
    };
    assert_int_equal(check(h, N(h)), LIN_OK);
    h[3] = get(2, 5, 6, true, 1, 10); /* ... and then un-happened: no */
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

static void two_winners_of_one_compare_and_set_are_rejected(void **state)
{
    (void)state;
    lin_op h[] = {
        put(0, 0, 1, 1, LIN_NO_EXPECT, true, 1, 10),
        put(1, 2, 5, 2, 10, true, 2, 11),
        put(2, 2, 5, 3, 10, true, 3, 12),
    };
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
    h[2] = put(2, 2, 5, 3, 10, false, 2, 11); /* one wins, the other reports the winner */
    assert_int_equal(check(h, N(h)), LIN_OK);
}

static void two_winners_of_put_if_absent_are_rejected(void **state)
{
    (void)state;
    lin_op h[] = {
        {.client = 0, .kind = LIN_PUT_IF_ABSENT, .invoke_ns = 0, .complete_ns = 5, .value = 1, .ok = true,
         .res_value = 1, .res_version = 10},
        {.client = 1, .kind = LIN_PUT_IF_ABSENT, .invoke_ns = 1, .complete_ns = 4, .value = 2, .ok = true,
         .res_value = 2, .res_version = 11},
    };
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
    h[1].ok = false; /* the loser reports the winner's row */
    h[1].res_value = 1;
    h[1].res_version = 10;
    assert_int_equal(check(h, N(h)), LIN_OK);
}

static void a_lost_increment_is_rejected(void **state)
{
    (void)state;
    lin_op h[] = {
        incr(0, 0, 5, 1, true, 1, 10),
        incr(1, 0, 5, 1, true, 1, 11), /* both saw 0 */
    };
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
    h[1] = incr(1, 0, 5, 1, true, 2, 11);
    assert_int_equal(check(h, N(h)), LIN_OK);
}

static void an_increment_past_its_limit_is_rejected(void **state)
{
    (void)state;
    lin_op h[] = {incr(0, 0, 1, 5, true, 5, 10)};
    h[0].has_max = true;
    h[0].max = 3;
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
    h[0].ok = false; /* refused (limit) on nothing: reports no row */
    h[0].res_value = 0;
    h[0].res_version = 0;
    assert_int_equal(check(h, N(h)), LIN_OK);
}

static void a_read_of_a_deleted_key_is_rejected(void **state)
{
    (void)state;
    lin_op h[] = {
        put(0, 0, 1, 1, LIN_NO_EXPECT, true, 1, 10),
        {.client = 0, .kind = LIN_DELETE, .invoke_ns = 2, .complete_ns = 3, .expect = LIN_NO_EXPECT, .ok = true,
         .res_value = 1, .res_version = 10},
        get(1, 4, 5, true, 1, 10),
    };
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

static void an_unanswered_write_may_apply_later_or_never(void **state)
{
    (void)state;
    lin_op h[] = {
        put(0, 0, LIN_PENDING, 7, LIN_NO_EXPECT, false, 0, 0),
        get(1, 10, 11, false, 0, 0),  /* not yet */
        get(1, 12, 13, true, 7, 99),  /* then it applied: its version is learnt here */
        get(2, 14, 15, true, 7, 99),
    };
    assert_int_equal(check(h, N(h)), LIN_OK);
    h[3] = get(2, 14, 15, true, 7, 98); /* one row, two versions: no */
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
    h[3] = get(2, 14, 15, true, 8, 99); /* a value nobody wrote: no */
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

static void an_unanswered_increment_counts_at_most_once(void **state)
{
    (void)state;
    lin_op h[] = {
        incr(0, 0, LIN_PENDING, 1, false, 0, 0),
        incr(1, 5, 6, 1, true, 2, 20), /* 0 + maybe 1 + 1 */
        get(1, 7, 8, true, 2, 20),
    };
    assert_int_equal(check(h, N(h)), LIN_OK);
    h[1] = incr(1, 5, 6, 1, true, 3, 20); /* the maybe counted twice */
    h[2] = get(1, 7, 8, true, 3, 20);
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

static void keys_are_checked_apart(void **state)
{
    (void)state;
    lin_op h[] = {
        put(0, 0, 1, 1, LIN_NO_EXPECT, true, 1, 10),
        put(0, 2, 3, 2, LIN_NO_EXPECT, true, 2, 11),
        get(1, 4, 5, true, 1, 10),
    };
    h[1].key = 1; /* the overwrite was of another key: the read is current */
    assert_int_equal(check(h, N(h)), LIN_OK);
    h[2].key = 1;
    assert_int_equal(check(h, N(h)), LIN_VIOLATION);
}

/* A correct history by construction: ops applied in sequence to a model,
 * each given an interval around its linearization point wide enough to
 * overlap its neighbours, some left without answer. */
typedef struct model {
    bool exists;
    long long value, version;
} model;

static void apply(model *m, lin_op *op, long long *next_version)
{
    bool ok;
    switch (op->kind) {
    case LIN_GET:
        op->ok = m->exists;
        op->res_value = m->value;
        op->res_version = m->version;
        return;
    case LIN_PUT:
        ok = op->expect == LIN_NO_EXPECT || (op->expect == 0 ? !m->exists : m->exists && m->version == op->expect);
        break;
    case LIN_INCR:
        ok = !op->has_max || (m->exists ? m->value : 0) + op->delta <= op->max;
        break;
    default:
        ok = m->exists;
        break;
    }
    op->ok = ok;
    if (!ok) {
        op->res_value = m->value;
        op->res_version = m->version;
        return;
    }
    if (op->kind == LIN_DELETE) {
        op->res_value = m->value;
        op->res_version = m->version;
        *m = (model){0};
        return;
    }
    long long v = op->kind == LIN_INCR ? (m->exists ? m->value : 0) + op->delta : op->value;
    *m = (model){true, v, ++*next_version};
    op->res_value = v;
    op->res_version = m->version;
}

static size_t generate(lin_op *ops, size_t n, int keys, unsigned seed)
{
    model m[8] = {0};
    long long next_version = 100;
    long long last_seen[8] = {0};
    for (size_t i = 0; i < n; i++) {
        lin_op *op = &ops[i];
        *op = (lin_op){.key = rand_r(&seed) % keys, .client = (int)(i % 6), .expect = LIN_NO_EXPECT};
        int dice = rand_r(&seed) % 10;
        op->kind = dice < 3 ? LIN_GET : dice < 6 ? LIN_PUT : dice < 9 ? LIN_INCR : LIN_DELETE;
        op->value = (long long)i * 10 + 1;
        op->delta = rand_r(&seed) % 5 + 1;
        op->has_max = rand_r(&seed) % 2;
        op->max = 1000;
        if (op->kind == LIN_PUT && rand_r(&seed) % 2)
            op->expect = last_seen[op->key];
        long long point = (long long)i * 10;
        op->invoke_ns = point - rand_r(&seed) % 35;
        op->complete_ns = point + rand_r(&seed) % 35;
        apply(&m[op->key], op, &next_version);
        if (op->res_version)
            last_seen[op->key] = op->res_version;
        if (op->kind != LIN_GET && rand_r(&seed) % 40 == 0)
            op->complete_ns = LIN_PENDING; /* it applied; its client never heard */
    }
    return n;
}

static void a_large_correct_history_is_accepted_and_a_falsified_read_rejected(void **state)
{
    (void)state;
    enum { OPS = 1200 };
    lin_op *ops = calloc(OPS, sizeof *ops);
    for (unsigned seed = 1; seed <= 5; seed++) {
        generate(ops, OPS, 3, seed);
        lin_report rep;
        lin_verdict v = lin_check(ops, OPS, 5000000, &rep);
        print_message("# seed %u: %zu ops on %zu keys, %lld steps\n", seed, rep.ops, rep.keys, rep.steps);
        assert_int_equal(v, LIN_OK);
        /* a late read that reports a value nobody ever wrote */
        for (size_t i = OPS - 1; i > 0; i--)
            if (ops[i].kind == LIN_GET && ops[i].ok && ops[i].complete_ns != LIN_PENDING) {
                ops[i].res_value = -5;
                break;
            }
        assert_int_equal(lin_check(ops, OPS, 5000000, &rep), LIN_VIOLATION);
    }
    free(ops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_sequential_history_is_accepted),
        cmocka_unit_test(a_stale_read_is_rejected),
        cmocka_unit_test(a_read_overlapping_a_write_may_see_either_value),
        cmocka_unit_test(two_winners_of_one_compare_and_set_are_rejected),
        cmocka_unit_test(two_winners_of_put_if_absent_are_rejected),
        cmocka_unit_test(a_lost_increment_is_rejected),
        cmocka_unit_test(an_increment_past_its_limit_is_rejected),
        cmocka_unit_test(a_read_of_a_deleted_key_is_rejected),
        cmocka_unit_test(an_unanswered_write_may_apply_later_or_never),
        cmocka_unit_test(an_unanswered_increment_counts_at_most_once),
        cmocka_unit_test(keys_are_checked_apart),
        cmocka_unit_test(a_large_correct_history_is_accepted_and_a_falsified_read_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
