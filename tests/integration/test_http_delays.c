/* delayedProcessing and maxWaitTimeSeconds (docs/api.md, Configure) against a
 * real broker with its sweeper: a delayed message is not popped until it is
 * old enough (its age is set in the database, never waited for), and a
 * message nobody consumes within maxWaitTimeSeconds turns up in the dead
 * letters with reason expired, moved there by the maintenance step. */
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

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_SWEEPER=1", "QUEEN_KV_EXPIRE_EVERY_MS=200", NULL};
    return http_broker_start(env);
}

static void age_messages(const char *queue, const char *interval)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {queue, interval};
    pgtest_int(c,
               "WITH u AS (UPDATE queen.log_messages m SET created_at = m.created_at - $2::interval "
               "FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id "
               "WHERE p.id = m.partition_id AND q.name = $1 RETURNING 1) SELECT count(*) FROM u",
               2, p);
    PQfinish(c);
}

static void delayed_then_visible(void **state)
{
    (void)state;
    char *q = pgtest_unique("delay");
    char *conf = fmt("{\"queue\":\"%s\",\"options\":{\"delayedProcessing\":3600}}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/configure", conf, 200));
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", push, 201));
    char *pop = fmt("/api/v1/pop/queue/%s?autoAck=true", q);
    json_decref(http_ok(&http_broker, "GET", pop, NULL, 204));
    age_messages(q, "2 hours");
    json_t *v = http_ok(&http_broker, "GET", pop, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 1);
    json_decref(v);
    free(pop);
    free(push);
    free(conf);
    free(q);
}

static bool expired_listed(const char *path)
{
    http_reply r = broker_http(&http_broker, "GET", path, NULL, NULL);
    json_t *v = r.status == 200 ? json_parse(r.body) : NULL;
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    bool yes = m != NULL && strcmp(jstr(m, "reason"), "expired") == 0;
    json_decref(v);
    http_reply_free(&r);
    return yes;
}

static void unconsumed_expires(void **state)
{
    (void)state;
    char *q = pgtest_unique("maxwait");
    char *conf = fmt("{\"queue\":\"%s\",\"options\":{\"maxWaitTimeSeconds\":60}}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/configure", conf, 200));
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"late\"}]}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", push, 201));
    age_messages(q, "61 seconds");
    char *dlq = fmt("/api/v1/dlq?queue=%s", q);
    WAIT_UNTIL(expired_listed(dlq), 15000, "the maintenance step never expired the message");
    char *pop = fmt("/api/v1/pop/queue/%s?autoAck=true", q);
    json_decref(http_ok(&http_broker, "GET", pop, NULL, 204));
    free(pop);
    free(dlq);
    free(push);
    free(conf);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delayed_then_visible),
        cmocka_unit_test(unconsumed_expires),
    };
    return cmocka_run_group_tests(tests, setup, http_broker_teardown);
}
