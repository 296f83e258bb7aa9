/* Waiting long polls against a real broker and PostgreSQL (notify.h, sql/log_waiting.sql):
 * a push of k messages wakes k waiters of a queue (no more than k woken,
 * counted by the engine), the first k to wait, and every message reaches one; each consumer
 * group gets its own k; a batch that leaves messages behind wakes the next
 * waiter at once, not at the next re-check; a waiter that popped nothing
 * keeps its place; and idle waiters cost one check
 * statement per tick and no pop; a timeout past QUEEN_MAX_POLL_TIMEOUT_MS is
 * served as that. */
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

#include "broker.h"
#include "http_fixture.h"
#include "notify.h"
#include "pgtest.h"
#include "testutil.h"

/* One long poll on a thread of its own, keeping the answer. */
typedef struct poll_call {
    char *path;
    long status;
    char *body;
    long long answered_ms; /* now_ms() when the answer was in */
    pthread_t t;
} poll_call;

static void *poll_run(void *arg)
{
    poll_call *c = arg;
    http_reply r = broker_http(&http_broker, "GET", c->path, NULL, NULL);
    c->status = r.status;
    c->body = r.body;
    r.body = NULL;
    http_reply_free(&r);
    __atomic_store_n(&c->answered_ms, now_ms(), __ATOMIC_RELEASE);
    return NULL;
}

static long long waiting(void)
{
    return http_metric(&http_broker, "http", NULL, "longPollsWaiting");
}

static long long stat_of(const char *group, const char *name)
{
    return http_metric(&http_broker, "engine", group, name);
}

/* Starts the polls one after the other, each once the one before is
 * suspended: they wait in this order. */
static void start_in_order(poll_call *c, int n)
{
    long long base = waiting();
    for (int i = 0; i < n; i++) {
        pthread_create(&c[i].t, NULL, poll_run, &c[i]);
        WAIT_UNTIL(waiting() == base + i + 1, 5000, "poll %d never suspended (%lld waiting)", i, waiting());
    }
}

static bool answered(const poll_call *c)
{
    return __atomic_load_n(&c->answered_ms, __ATOMIC_ACQUIRE) != 0;
}

static int count_answered(poll_call *c, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += answered(&c[i]);
    return k;
}

/* A push of one message to each of partitions p<first>..p<first+k-1>. */
static void push_spread(const char *queue, int first, int k)
{
    json_t *items = json_array();
    for (int i = first; i < first + k; i++) {
        char part[16];
        snprintf(part, sizeof part, "p%d", i);
        json_array_append_new(items, json_pack("{s:s, s:s, s:i}", "queue", queue, "partition", part, "payload", i));
    }
    json_t *body = json_pack("{s:o}", "items", items);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", text, 201));
    free(text);
    json_decref(body);
}

/* The payload of a 200 body's single message. */
static long long payload_of(const poll_call *c)
{
    json_t *b = json_parse(c->body);
    json_t *msgs = json_object_get(b, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    long long v = jnum(json_object_get(json_array_get(msgs, 0), "data"));
    json_decref(b);
    return v;
}

/* N waiters of one queue; a push of K messages to K partitions wakes K of
 * them (no more), the first K to wait, each with its own message; a second
 * push of N - K serves the rest. */
static void push_of_k_wakes_k_in_order(void **state)
{
    (void)state;
    enum { N = 24, K = 6 };
    char *q = pgtest_unique("lpk");
    poll_call c[N] = {0};
    for (int i = 0; i < N; i++)
        c[i].path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=7000&batch=1&autoAck=true", q);
    start_in_order(c, N);
    long long pops = stat_of("pops", "total"), wakes = stat_of("notifier", "pushWakes");
    long long checked = stat_of("notifier", "checkWakes");

    push_spread(q, 0, K);
    WAIT_UNTIL(count_answered(c, N) == K, 5000, "%d of %d woken polls answered", count_answered(c, N), K);
    /* Whatever the chase after them does is done once a tick has passed. */
    long long ticks = stat_of("notifier", "checkTicks");
    WAIT_UNTIL(stat_of("notifier", "checkTicks") > ticks + 1, 5000, "the notifier stopped ticking");
    /* K answered and no more; the push woke no more waiters than it
     * carried messages (a push that woke every waiter would show N here),
     * and so did a check. The pops are at least K, not exactly K: woken
     * pops at once can find a partition another of them holds, pop nothing
     * and go again (the chase), which load makes likely. */
    assert_true(stat_of("pops", "total") - pops >= K);
    long long woke = stat_of("notifier", "pushWakes") - wakes;
    long long by_check = stat_of("notifier", "checkWakes") - checked;
    if (woke > K || by_check > K)
        fail_msg("a push of %d messages woke %lld waiters, the check %lld", K, woke, by_check);
    assert_int_equal(count_answered(c, N), K);
    /* Waiters are woken in the order they waited: the answered ones are
     * among the first woke + by_check, which is the first K unless the
     * waiters' check (every NOTIFY_RECHECK_MS) saw the messages while the
     * push's own wake-up was on its way and woke K of its own; the first K
     * then raced the next K for the K messages. */
    long long first = woke + by_check;
    bool seen[N] = {false}, served_first[N] = {false};
    for (int i = 0; i < N; i++) {
        if (answered(&c[i]) && i >= first)
            fail_msg("poll %d was served though only the first %lld waiters were woken", i, first);
        if (!answered(&c[i]) && i < K && first == K)
            fail_msg("poll %d waited before poll %d..%d yet was not woken", i, K, N - 1);
        if (!answered(&c[i]))
            continue;
        assert_int_equal(c[i].status, 200);
        long long v = payload_of(&c[i]);
        assert_true(v >= 0 && v < K && !seen[v]);
        seen[v] = true;
        served_first[i] = true;
    }

    push_spread(q, K, N - K);
    for (int i = 0; i < N; i++)
        pthread_join(c[i].t, NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].status, 200);
        if (served_first[i]) /* checked above */
            continue;
        long long v = payload_of(&c[i]);
        assert_true(v >= K && v < N && !seen[v]);
        seen[v] = true;
    }
    for (int i = 0; i < N; i++) {
        free(c[i].path);
        free(c[i].body);
    }
    free(q);
}

/* Each consumer group consumes every message: a push of K wakes K waiters of
 * each group. */
static void each_group_gets_its_count(void **state)
{
    (void)state;
    enum { PER = 8, K = 3 };
    char *q = pgtest_unique("lpg");
    poll_call c[2 * PER] = {0};
    for (int i = 0; i < 2 * PER; i++)
        c[i].path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=7000&batch=1&autoAck=true&consumerGroup=g%d", q,
                        i % 2);
    start_in_order(c, 2 * PER);
    long long pops = stat_of("pops", "total");
    push_spread(q, 0, K);
    WAIT_UNTIL(count_answered(c, 2 * PER) == 2 * K, 5000, "%d of %d polls answered", count_answered(c, 2 * PER),
               2 * K);
    long long ticks = stat_of("notifier", "checkTicks");
    WAIT_UNTIL(stat_of("notifier", "checkTicks") > ticks + 1, 5000, "the notifier stopped ticking");
    assert_true(stat_of("pops", "total") - pops >= 2 * K); /* more when woken pops met each other */
    int per_group[2] = {0, 0};
    for (int i = 0; i < 2 * PER; i++)
        if (answered(&c[i])) {
            assert_int_equal(c[i].status, 200);
            per_group[i % 2]++;
        }
    assert_int_equal(per_group[0], K);
    assert_int_equal(per_group[1], K);
    /* the rest get theirs from the next push */
    push_spread(q, K, PER - K);
    for (int i = 0; i < 2 * PER; i++)
        pthread_join(c[i].t, NULL);
    for (int i = 0; i < 2 * PER; i++)
        assert_int_equal(c[i].status, 200);
    for (int i = 0; i < 2 * PER; i++) {
        free(c[i].path);
        free(c[i].body);
    }
    free(q);
}

/* One partition, five messages, three waiters popping two at a time: the
 * first woken pop leaves three behind; the next waiters are woken as soon as
 * it answered (a check of the queue at once), well before the next tick. */
static void what_a_batch_leaves_wakes_the_next_at_once(void **state)
{
    (void)state;
    enum { N = 3, M = 5 };
    char *q = pgtest_unique("lpb");
    poll_call c[N] = {0};
    for (int i = 0; i < N; i++)
        c[i].path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=7000&batch=2&autoAck=true", q);
    start_in_order(c, N);
    json_t *items = json_array();
    for (int i = 0; i < M; i++)
        json_array_append_new(items, json_pack("{s:s, s:i}", "queue", q, "payload", i));
    json_t *body = json_pack("{s:o}", "items", items);
    char *text = json_dumps(body, JSON_COMPACT);
    long long t0 = now_ms();
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", text, 201));
    for (int i = 0; i < N; i++)
        pthread_join(c[i].t, NULL);
    int got = 0;
    long long last = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].status, 200);
        json_t *b = json_parse(c[i].body);
        got += (int)json_array_size(json_object_get(b, "messages"));
        json_decref(b);
        if (c[i].answered_ms > last)
            last = c[i].answered_ms;
    }
    assert_int_equal(got, M);
    if (last - t0 >= NOTIFY_RECHECK_MS)
        fail_msg("the last of %d messages arrived %lld ms after the push: it waited for the re-check", M,
                 last - t0);
    print_message("# %d messages over %d waiters of batch 2: all delivered %lld ms after the push\n", M, N,
                  last - t0);
    free(text);
    json_decref(body);
    for (int i = 0; i < N; i++) {
        free(c[i].path);
        free(c[i].body);
    }
    free(q);
}

/* 40 waiters over 8 queues (two groups) with nothing to pop: no pop at all,
 * and one check statement per tick for all of them. */
static void idle_waiters_cost_one_check_per_tick(void **state)
{
    (void)state;
    enum { N = 40 };
    char *q = pgtest_unique("lpi");
    poll_call c[N] = {0};
    for (int i = 0; i < N; i++)
        c[i].path = fmt("/api/v1/pop/queue/%s-%d?wait=true&timeout=60000&consumerGroup=g%d", q, i % 8, i % 2);
    start_in_order(c, N);
    long long pops = stat_of("pops", "total"), checks = stat_of("notifier", "checks");
    long long ticks = stat_of("notifier", "checkTicks");
    WAIT_UNTIL(stat_of("notifier", "checkTicks") >= ticks + 3, 10000, "fewer than 3 ticks in 10 s");
    long long dticks = stat_of("notifier", "checkTicks") - ticks;
    long long dchecks = stat_of("notifier", "checks") - checks;
    assert_int_equal(stat_of("pops", "total") - pops, 0);
    /* a tick counted before its statement went out may straddle either end */
    if (dchecks > dticks + 1 || dchecks < dticks - 1)
        fail_msg("%lld check statements in %lld ticks with %d idle waiters", dchecks, dticks, N);
    print_message("# %d idle waiters: %lld check statements in %lld ticks, 0 pops\n", N, dchecks, dticks);
    /* and they all still answer: a push to each queue wakes its waiters */
    for (int i = 0; i < 8; i++) {
        char *queue = fmt("%s-%d", q, i);
        push_spread(queue, 0, 5);
        free(queue);
    }
    for (int i = 0; i < N; i++)
        pthread_join(c[i].t, NULL);
    for (int i = 0; i < N; i++)
        assert_int_equal(c[i].status, 200);
    for (int i = 0; i < N; i++) {
        free(c[i].path);
        free(c[i].body);
    }
    free(q);
}

/* Two messages on one partition wake the first two of four waiters; when
 * both pop at once, one finds the partition taken and pops nothing: it goes
 * back to waiting in its place, ahead of the two behind it, and the check
 * that follows the other's success wakes it for the second message. Either
 * way the first two get the messages, the last two nothing. */
static void an_empty_pop_keeps_its_place(void **state)
{
    (void)state;
    enum { N = 4 };
    char *q = pgtest_unique("lpe");
    poll_call c[N] = {0};
    for (int i = 0; i < N; i++)
        c[i].path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=3000&batch=1&autoAck=true", q);
    start_in_order(c, N);
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":0},{\"queue\":\"%s\",\"payload\":1}]}", q, q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", push, 201));
    WAIT_UNTIL(count_answered(c, N) == 2, 5000, "%d of 2 messages delivered", count_answered(c, N));
    if (!answered(&c[0]) || !answered(&c[1]))
        fail_msg("the messages went to a later waiter: poll 0 %s, poll 1 %s", answered(&c[0]) ? "served" : "waiting",
                 answered(&c[1]) ? "served" : "waiting");
    assert_int_equal(payload_of(&c[0]) + payload_of(&c[1]), 1);
    for (int i = 0; i < N; i++)
        pthread_join(c[i].t, NULL); /* the last two at their timeout */
    assert_int_equal(c[2].status, 204);
    assert_int_equal(c[3].status, 204);
    for (int i = 0; i < N; i++) {
        free(c[i].path);
        free(c[i].body);
    }
    free(push);
    free(q);
}

/* timeout=60000 on a broker capped at CAP_MS: 204 at the cap. */
#define CAP_MS 8000
static void the_timeout_is_capped(void **state)
{
    (void)state;
    char *q = pgtest_unique("lpc");
    char *path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=60000", q);
    timed_get g = {.b = &http_broker, .path = path};
    timed_get_run(&g);
    assert_int_equal(g.status, 204);
    if (g.took_ms < CAP_MS - 200 || g.took_ms > CAP_MS + 4000)
        fail_msg("a 60 s long poll on a broker capped at %d ms answered after %lld ms", CAP_MS, g.took_ms);
    free(path);
    free(q);
}

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_MAX_POLL_TIMEOUT_MS=8000", NULL};
    if (http_broker_start(env) != 0)
        return -1;
    /* The tests count the notifier's wakes: until its connection is up,
     * every waiter pops at each tick instead (notify.c, wake_all_keyed). */
    for (long long until = now_ms() + 10000; now_ms() < until; pause_ms(5)) {
        http_reply r = broker_http(&http_broker, "GET", "/metrics", NULL, NULL);
        json_t *m = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
        bool up = json_is_true(json_object_get(json_object_get(json_object_get(m, "engine"), "notifier"), "connected"));
        json_decref(m);
        http_reply_free(&r);
        if (up)
            return 0;
    }
    return -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(push_of_k_wakes_k_in_order),
        cmocka_unit_test(each_group_gets_its_count),
        cmocka_unit_test(what_a_batch_leaves_wakes_the_next_at_once),
        cmocka_unit_test(idle_waiters_cost_one_check_per_tick),
        cmocka_unit_test(an_empty_pop_keeps_its_place),
        cmocka_unit_test(the_timeout_is_capped),
    };
    return cmocka_run_group_tests_name("log_waiting", tests, setup, http_broker_teardown);
}
