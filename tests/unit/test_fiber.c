/* fiber: switches keep each fiber's locals, callee-saved registers and
 * floating-point state; interleaved fibers resume in the order asked; a
 * finished fiber's stack is reused; nothing is current off a fiber. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fiber.h"

typedef struct worker {
    int id;
    int steps;
    char trail[64];
    double acc;
} worker;

static char order[256];

static void append(char c)
{
    size_t n = strlen(order);
    order[n] = c;
    order[n + 1] = '\0';
}

/* Recursion deep enough to use real stack on the fiber, and floating point
 * whose result depends on every step surviving the switches. */
static double depth(int n, double x)
{
    volatile char pad[256];
    pad[n % 256] = (char)n;
    return n == 0 ? x + pad[0] * 0.0 : depth(n - 1, x * 1.0000001 + 0.5) + pad[n % 256] * 0.0;
}

/* The ABI's 16-byte stack alignment holds on a fiber (SSE spills and
 * aligned locals rely on it): the compiler places this buffer relative to
 * the stack pointer, assuming it. */
static __attribute__((noinline)) uintptr_t aligned_local_address(void)
{
    _Alignas(16) volatile char buf[16];
    buf[0] = 1;
    return (uintptr_t)buf;
}

static void work(void *arg)
{
    worker *w = arg;
    assert_ptr_not_equal(fiber_current(), NULL);
    assert_int_equal(aligned_local_address() % 16, 0);
    for (int i = 0; i < w->steps; i++) {
        w->acc = depth(50, w->acc + w->id);
        snprintf(w->trail + strlen(w->trail), sizeof w->trail - strlen(w->trail), "%d", i);
        append((char)('a' + w->id));
        fiber_yield();
    }
}

static void interleaved_fibers_keep_their_state(void **state)
{
    (void)state;
    order[0] = '\0';
    worker ws[3] = {{.id = 0, .steps = 3}, {.id = 1, .steps = 2}, {.id = 2, .steps = 3}};
    fiber *fs[3];
    for (int i = 0; i < 3; i++) {
        fs[i] = fiber_new(work, &ws[i]);
        assert_non_null(fs[i]);
    }
    assert_null(fiber_current());
    bool done[3] = {false, false, false};
    int left = 3;
    while (left > 0) {
        for (int i = 0; i < 3; i++) {
            if (done[i])
                continue;
            if (fiber_resume(fs[i])) {
                done[i] = true;
                left--;
                fiber_free(fs[i]);
            }
            assert_null(fiber_current());
        }
    }
    assert_string_equal(order, "abcabcac");
    assert_string_equal(ws[0].trail, "012");
    assert_string_equal(ws[1].trail, "01");
    /* The same computation without fibers gives the same bits. */
    for (int i = 0; i < 3; i++) {
        double acc = 0;
        for (int s = 0; s < ws[i].steps; s++)
            acc = depth(50, acc + i);
        assert_true(memcmp(&acc, &ws[i].acc, sizeof acc) == 0);
    }
}

static int ran;

static void count(void *arg)
{
    (void)arg;
    ran++;
}

static void finished_stacks_are_reused(void **state)
{
    (void)state;
    ran = 0;
    for (int i = 0; i < 1000; i++) {
        fiber *f = fiber_new(count, NULL);
        assert_non_null(f);
        assert_true(fiber_resume(f));
        fiber_free(f);
    }
    assert_int_equal(ran, 1000);
    fiber_release_cache();
}

static void yield_off_a_fiber_is_a_no_op(void **state)
{
    (void)state;
    fiber_yield();
    assert_null(fiber_current());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(interleaved_fibers_keep_their_state),
        cmocka_unit_test(finished_stacks_are_reused),
        cmocka_unit_test(yield_off_a_fiber_is_a_no_op),
    };
    int rc = cmocka_run_group_tests_name("fiber", tests, NULL, NULL);
    fiber_release_cache();
    return rc;
}
