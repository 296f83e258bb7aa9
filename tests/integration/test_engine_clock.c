/* The pool's acquire deadline and the quota refresh's cadence against a
 * wall clock that jumps. This program
 * defines clock_gettime itself: the definition in the executable wins over
 * libc's for every caller that links to it (libqueen.a is linked in
 * statically), so a test can move CLOCK_REALTIME by an hour while
 * CLOCK_MONOTONIC and the kernel's own clocks stay true. A deadline taken on
 * the wall clock then expires at once (clock moved back) or an hour late
 * (clock moved forward); one on the monotonic clock does neither. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pgtest.h"
#include "pool.h"
#include "quota.h"
#include "wire.h"

static atomic_long realtime_shift_s;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    int rc = (int)syscall(SYS_clock_gettime, clk, ts);
    if (rc == 0 && clk == CLOCK_REALTIME)
        ts->tv_sec += atomic_load(&realtime_shift_s);
    return rc;
}

static long long true_mono_ms(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define ACQUIRE_MS 300

typedef struct attempt {
    queen_pool *pool;
    queen_pool_conn *got;
    long long took_ms;
    atomic_bool done;
    char err[256];
} attempt;

static void *try_acquire(void *arg)
{
    attempt *a = arg;
    long long t0 = true_mono_ms();
    a->got = queen_pool_acquire(a->pool, a->err, sizeof a->err);
    a->took_ms = true_mono_ms() - t0;
    atomic_store(&a->done, true);
    return NULL;
}

/* Exhausts a pool of one, moves the wall clock by shift_s, and expects a
 * second acquire to give up after about ACQUIRE_MS. Should the wait overrun
 * 2 s, the held connection is released so the waiter (and the test) ends. */
static void acquire_times_out_on_time(long shift_s)
{
    char err[256];
    queen_pool *pool = queen_pool_open(pgtest_url(), 1, 30000, ACQUIRE_MS, 0, NULL, err, sizeof err);
    if (pool == NULL)
        fail_msg("queen_pool_open: %s", err);
    queen_pool_conn *held = queen_pool_acquire(pool, err, sizeof err);
    assert_non_null(held);

    atomic_store(&realtime_shift_s, shift_s);
    attempt a = {.pool = pool};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, try_acquire, &a), 0);
    long long deadline = true_mono_ms() + 2000;
    while (!atomic_load(&a.done) && true_mono_ms() < deadline) {
        struct timespec tick = {0, 5 * 1000000L};
        nanosleep(&tick, NULL);
    }
    bool overran = !atomic_load(&a.done);
    if (overran)
        queen_pool_release(pool, held);
    pthread_join(t, NULL);
    atomic_store(&realtime_shift_s, 0);

    if (a.got != NULL)
        queen_pool_release(pool, a.got);
    if (!overran)
        queen_pool_release(pool, held);
    queen_pool_close(pool);
    if (overran)
        fail_msg("wall clock %+lds: acquire still waiting after 2 s (timeout %d ms)", shift_s, ACQUIRE_MS);
    if (a.got != NULL)
        fail_msg("wall clock %+lds: acquire got a connection from an exhausted pool", shift_s);
    print_message("wall clock %+lds: acquire gave up after %lld ms (%s)\n", shift_s, a.took_ms, a.err);
    if (a.took_ms < ACQUIRE_MS - 50)
        fail_msg("wall clock %+lds: acquire gave up after %lld ms, before its %d ms", shift_s, a.took_ms,
                 ACQUIRE_MS);
}

static void wall_clock_back_does_not_shorten_acquire(void **state)
{
    (void)state;
    acquire_times_out_on_time(-3600);
}

static void wall_clock_forward_does_not_lengthen_acquire(void **state)
{
    (void)state;
    acquire_times_out_on_time(3600);
}

static void steady_clock_acquire_times_out(void **state)
{
    (void)state;
    acquire_times_out_on_time(0);
}

/* With the wall clock an hour ahead, a refresh whose wait were taken on it
 * would sleep an hour: a raised limit must still arrive within a few
 * refresh periods. */
static void wall_clock_forward_does_not_stall_the_quota_refresh(void **state)
{
    (void)state;
    char err[256], tenant[37];
    queen_pool *pool = queen_pool_open(pgtest_url(), 2, 30000, 5000, 0, NULL, err, sizeof err);
    if (pool == NULL)
        fail_msg("queen_pool_open: %s", err);
    PGconn *db = pgtest_connect();
    wire_uuid4(tenant);
    const char *p[] = {tenant};
    PQclear(pgtest_exec(db, "INSERT INTO queen.kv_quota (tenant_id, max_rows) VALUES ($1::uuid, 1)", 1, p));
    atomic_store(&realtime_shift_s, 3600);
    queen_quota *qq = quota_start(pool, 50, err, sizeof err);
    assert_non_null(qq);
    queen_error e;
    int retry;
    assert_int_equal(quota_admit(qq, tenant, false, 0, 1, 1, 1, &retry, &e), QUOTA_ADMIT);
    assert_int_equal(quota_admit(qq, tenant, false, 0, 1, 1, 1, &retry, &e), QUOTA_FULL);
    PQclear(pgtest_exec(db, "UPDATE queen.kv_quota SET max_rows = 1000000 WHERE tenant_id = $1::uuid", 1, p));
    long long deadline = true_mono_ms() + 5000;
    quota_verdict v;
    while ((v = quota_admit(qq, tenant, false, 0, 1, 1, 1, &retry, &e)) != QUOTA_ADMIT && true_mono_ms() < deadline)
        usleep(20000); /* polling the condition, with a deadline */
    atomic_store(&realtime_shift_s, 0);
    assert_int_equal(v, QUOTA_ADMIT);
    quota_stop(qq);
    queen_pool_close(pool);
    PQfinish(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steady_clock_acquire_times_out),
        cmocka_unit_test(wall_clock_back_does_not_shorten_acquire),
        cmocka_unit_test(wall_clock_forward_does_not_lengthen_acquire),
        cmocka_unit_test(wall_clock_forward_does_not_stall_the_quota_refresh),
    };
    return cmocka_run_group_tests_name("engine_clock", tests, NULL, NULL);
}
