/* Traces (docs/api.md, Traces) against a real broker: events
 * recorded against a popped message (data byte for byte), read back by
 * message and by name with a cursor, the refusals, and the retention step
 * of the broker's sweeper deleting an event past QUEEN_TRACE_RETENTION_SECONDS
 * (its age set in the database, never waited for). */
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
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_SWEEPER=1", "QUEEN_KV_EXPIRE_EVERY_MS=200",
                                      "QUEEN_TRACE_RETENTION_SECONDS=3600", NULL};
    return http_broker_start(env);
}

static long long traces_named(const char *name)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {name};
    long long n = pgtest_int(c, "SELECT count(*) FROM queen.log_traces WHERE trace_name = $1", 1, p);
    PQfinish(c);
    return n;
}

static void record_and_read(void **state)
{
    (void)state;
    char *q = pgtest_unique("traced");
    char *name = pgtest_unique("charged");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"o-1\"}]}", q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", push, 201));
    char *pop = fmt("/api/v1/pop/queue/%s?autoAck=true", q);
    json_t *p = http_ok(&http_broker, "GET", pop, NULL, 200);
    const char *pid = jstr(p, "partitionId");

    char *t1 = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"o-1\",\"traceName\":\"%s\",\"data\":{\"amount\":0.10}}",
                   pid, name);
    json_t *v = http_ok(&http_broker, "POST", "/api/v1/traces", t1, 201);
    assert_true(jtrue(v, "recorded"));
    json_decref(v);
    char *t2 = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"o-1\",\"traceName\":\"done\"}", pid);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/traces", t2, 201));

    char *by_msg = fmt("/api/v1/traces/%s/o-1", pid);
    http_reply r = broker_http(&http_broker, "GET", by_msg, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"amount\": 0.10")); /* data byte for byte (jsonb spacing) */
    v = json_of(&r);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 2);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "traces"), 1), "traceName"), "done");
    json_decref(v);
    http_reply_free(&r);

    char *by_name = fmt("/api/v1/traces/by-name/%s?limit=1", name);
    v = http_ok(&http_broker, "GET", by_name, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 1);
    assert_false(json_is_null(json_object_get(v, "nextAfter")));
    json_decref(v);

    http_refused(&http_broker, "POST", "/api/v1/traces",
                 "{\"partitionId\":\"nope\",\"transactionId\":\"o-1\",\"traceName\":\"x\"}", 400, "bad_request",
                 "log_bad_partition_id");
    http_refused(
        &http_broker, "POST", "/api/v1/traces",
        "{\"partitionId\":\"00000000-0000-0000-0000-000000000000\",\"transactionId\":\"o-1\",\"traceName\":\"x\"}", 400,
        "bad_request", "log_bad_partition_id");
    char *bad = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"o-1\",\"traceName\":\"x\",\"extra\":1}", pid);
    http_refused(&http_broker, "POST", "/api/v1/traces", bad, 400, "bad_request", "log_bad_request");

    /* Retention: an event aged past QUEEN_TRACE_RETENTION_SECONDS goes. */
    assert_int_equal(traces_named(name), 1);
    PGconn *c = pgtest_connect();
    const char *params[] = {name};
    pgtest_int(c,
               "WITH u AS (UPDATE queen.log_traces SET created_at = now() - interval '2 hours' "
               "WHERE trace_name = $1 RETURNING 1) SELECT count(*) FROM u",
               1, params);
    PQfinish(c);
    WAIT_UNTIL(traces_named(name) == 0, 15000, "the sweeper never deleted the old trace");
    v = http_ok(&http_broker, "GET", by_msg, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "traces")), 1); /* "done" is recent: kept */
    json_decref(v);

    json_decref(p);
    free(bad);
    free(by_name);
    free(by_msg);
    free(t2);
    free(t1);
    free(pop);
    free(push);
    free(name);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(record_and_read),
    };
    return cmocka_run_group_tests(tests, setup, http_broker_teardown);
}
