/* A poison message against a real broker over real HTTP: its consumer is
 * "killed" on every delivery (it pops with a 1 s lease and never acks), and
 * each expired lease counts as a failed attempt against the queue's
 * retryLimit (sql/log_pop.sql, _log_pop_expired_v1). After retryLimit+1
 * deliveries the message is in the dead letters, readable through the DLQ
 * route, and the message behind it is delivered. If expiry stopped counting,
 * the poison message would come back a retryLimit+2nd time and this fails.
 * No sleeps: each redelivery is waited for by a long-polling pop, which the
 * broker wakes once the lease has expired (log_waiting.sql's re-check). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

#define RETRY_LIMIT 2

/* One delivery: a long-polling pop of one message with a 1 s lease, for the
 * group (NULL: queue mode). The message, or fails the test on a 204. */
static json_t *deliver(const char *q, const char *group)
{
    char *path = group ? fmt("/api/v1/pop/queue/%s?batch=1&leaseSeconds=1&wait=true&timeout=15000"
                             "&consumerGroup=%s", q, group)
                       : fmt("/api/v1/pop/queue/%s?batch=1&leaseSeconds=1&wait=true&timeout=15000", q);
    json_t *v = http_ok_fmt("GET", path, NULL, 200);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    json_t *m = json_incref(json_array_get(msgs, 0));
    json_decref(v);
    return m;
}

/* The consumer dies on every delivery of "poison": retryLimit+1 deliveries,
 * each a new attempt; the next pop finds "next" and the dead letter names
 * the lease expiries. */
static void killed_consumer(const char *q, const char *group)
{
    for (int attempt = 1; attempt <= RETRY_LIMIT + 1; attempt++) {
        json_t *m = deliver(q, group);
        assert_string_equal(jstr(m, "transactionId"), "poison");
        assert_int_equal(jint(m, "deliveryAttempt"), attempt);
        json_decref(m); /* no ack: the consumer is gone */
    }
    json_t *m = deliver(q, group);
    assert_string_equal(jstr(m, "transactionId"), "next");
    assert_int_equal(jint(m, "deliveryAttempt"), 1);
    json_decref(m);

    json_t *v = group ? http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s&consumerGroup=%s", q, group), NULL, 200)
                      : http_ok_fmt("GET", fmt("/api/v1/dlq?queue=%s", q), NULL, 200);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    json_t *d = json_array_get(msgs, 0);
    assert_string_equal(jstr(d, "transactionId"), "poison");
    assert_string_equal(jstr(d, "reason"), "failed");
    char want[64];
    snprintf(want, sizeof want, "lease expired %d times without an ack", RETRY_LIMIT + 1);
    assert_string_equal(jstr(d, "errorMessage"), want);
    assert_int_equal(jint(d, "retryCount"), RETRY_LIMIT + 1);
    json_decref(v);
}

static void push_poison_then_next(const char *q)
{
    json_decref(http_ok_fmt("POST", strdup("/api/v1/configure"),
                            fmt("{\"queue\":\"%s\",\"options\":{\"retryLimit\":%d}}", q, RETRY_LIMIT), 200));
    json_decref(http_ok_fmt("POST", strdup("/api/v1/push"),
                            fmt("{\"items\":[{\"queue\":\"%s\",\"transactionId\":\"poison\",\"payload\":{\"crash\":true}},"
                                "{\"queue\":\"%s\",\"transactionId\":\"next\",\"payload\":{\"crash\":false}}]}",
                                q, q),
                            201));
}

static void poison_reaches_dead_letters(void **state)
{
    (void)state;
    char *q = pgtest_unique("expiry");
    push_poison_then_next(q);
    killed_consumer(q, NULL);
    free(q);
}

/* A consumer group counts on its own cursor: the group dies retryLimit+1
 * times while queue mode's cursor, which never leased, has nothing counted
 * (its first pop gets the poison message as attempt 1). */
static void groups_count_separately(void **state)
{
    (void)state;
    char *q = pgtest_unique("expiryg");
    push_poison_then_next(q);
    killed_consumer(q, "workers");
    json_t *v = http_ok_fmt("GET", fmt("/api/v1/pop/queue/%s?batch=1&consumerGroup=auditors&autoAck=true", q),
                            NULL, 200);
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    assert_string_equal(jstr(m, "transactionId"), "poison");
    assert_int_equal(jint(m, "deliveryAttempt"), 1);
    json_decref(v);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(poison_reaches_dead_letters),
        cmocka_unit_test(groups_count_separately),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
