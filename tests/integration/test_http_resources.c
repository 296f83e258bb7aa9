/* The resource routes (docs/api.md, Resources) against a real
 * broker: overview, namespaces and tasks, GET on a queue (no longer a 405),
 * its partitions, clear (409 while leased, then every message gone) and
 * /api/v1/status. */
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
#include "wire.h"

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", NULL};
    return http_broker_start(env);
}

static json_t *as(const char *const *h, const char *method, char *path, const char *body, long status)
{
    json_t *v = http_call_json(&http_broker, h, method, path, body, status);
    free(path);
    return v;
}

static void resources(void **state)
{
    (void)state;
    char tenant[37];
    wire_uuid4(tenant);
    char *hdr = fmt("x-queen-tenant: %s", tenant);
    const char *h[] = {hdr, NULL};
    json_decref(as(h, "POST", strdup("/api/v1/configure"),
                   "{\"queue\":\"r1\",\"namespace\":\"billing\",\"task\":\"invoice\",\"options\":{\"leaseTime\":30}}",
                   200));
    json_decref(as(h, "POST", strdup("/api/v1/push"),
                   "{\"items\":[{\"queue\":\"r1\",\"partition\":\"a\",\"payload\":1},"
                   "{\"queue\":\"r1\",\"partition\":\"b\",\"payload\":2}]}",
                   201));

    json_t *v = as(h, "GET", strdup("/api/v1/resources/overview"), NULL, 200);
    assert_int_equal(jint(v, "queues"), 1);
    assert_int_equal(jint(json_object_get(v, "messages"), "total"), 2);
    assert_int_equal(jint(v, "pushedLastMinute"), 2);
    json_decref(v);
    v = as(h, "GET", strdup("/api/v1/resources/namespaces"), NULL, 200);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "namespaces"), 0), "name"), "billing");
    json_decref(v);
    v = as(h, "GET", strdup("/api/v1/resources/tasks"), NULL, 200);
    assert_string_equal(jstr(json_array_get(json_object_get(v, "tasks"), 0), "name"), "invoice");
    json_decref(v);
    v = as(h, "GET", strdup("/api/v1/resources/queues/r1"), NULL, 200);
    assert_int_equal(jint(v, "partitions"), 2);
    assert_int_equal(jint(json_object_get(v, "options"), "leaseTime"), 30);
    json_decref(v);
    http_reply r = broker_http(&http_broker, "GET", "/api/v1/resources/queues/none", NULL, h);
    http_expect(&r, 400, "bad_request", "log_no_such_queue");
    http_reply_free(&r);
    v = as(h, "GET", strdup("/api/v1/resources/queues/r1/partitions"), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "partitions")), 2);
    assert_int_equal(jint(json_array_get(json_object_get(v, "partitions"), 1), "messages"), 1);
    json_decref(v);

    json_decref(as(h, "GET", strdup("/api/v1/pop/queue/r1/partition/a"), NULL, 200)); /* a lease on a */
    r = broker_http(&http_broker, "POST", "/api/v1/resources/queues/r1/clear", NULL, h);
    http_expect(&r, 409, "conflict", "log_message_leased");
    http_reply_free(&r);
    PGconn *c = pgtest_connect();
    const char *p[] = {tenant};
    pgtest_int(c,
               "WITH u AS (UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 second' "
               "FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id "
               "WHERE lp.id = c.partition_id AND q.tenant_id = $1::uuid RETURNING 1) SELECT count(*) FROM u",
               1, p);
    PQfinish(c);
    v = as(h, "POST", strdup("/api/v1/resources/queues/r1/clear"), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 2);
    json_decref(v);
    json_decref(as(h, "GET", strdup("/api/v1/pop/queue/r1?partitions=2"), NULL, 204));

    v = http_ok(&http_broker, "GET", "/api/v1/status", NULL, 200);
    assert_string_equal(jstr(v, "status"), "healthy");
    assert_true(json_is_object(json_object_get(v, "maintenance")));
    /* The major version, never the exact release. */
    PGconn *db = pgtest_connect();
    char *major = pgtest_scalar(db, "SELECT 'PostgreSQL ' || (current_setting('server_version_num')::int / 10000)", 0,
                                NULL);
    PQfinish(db);
    assert_string_equal(jstr(v, "databaseVersion"), major);
    free(major);
    json_decref(v);
    free(hdr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resources),
    };
    return cmocka_run_group_tests(tests, setup, http_broker_teardown);
}
