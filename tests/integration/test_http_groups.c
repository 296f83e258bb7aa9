/* The consumer-group routes (docs/api.md, Consumer groups) against
 * a real broker: the view (offsets, lag, the lease holder), the lagging view,
 * one group, seek (refused 409 while the group holds a live lease, then to
 * the beginning, the end and an instant) and delete; bad arguments are 400s. */
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

static json_t *ok(const char *method, char *path, const char *body, long status)
{
    json_t *v = http_ok(&http_broker, method, path, body, status);
    free(path);
    return v;
}

static void refused(const char *method, char *path, const char *body, long status, const char *code,
                    const char *reason)
{
    http_refused(&http_broker, method, path, body, status, code, reason);
    free(path);
}

/* The partition object of group g, queue q, partition p in a view. */
static json_t *cursor_of(json_t *view, const char *g, const char *q, const char *p)
{
    size_t i, j, k;
    json_t *gv, *qv, *pv;
    json_array_foreach(json_object_get(view, "consumerGroups"), i, gv)
    {
        if (strcmp(jstr(gv, "name"), g) != 0)
            continue;
        json_array_foreach(json_object_get(gv, "queues"), j, qv)
        {
            if (strcmp(jstr(qv, "queue"), q) != 0)
                continue;
            json_array_foreach(json_object_get(qv, "partitions"), k, pv)
            {
                if (strcmp(jstr(pv, "partition"), p) == 0)
                    return pv;
            }
        }
    }
    return NULL;
}

static void view_seek_delete(void **state)
{
    (void)state;
    char *q = pgtest_unique("grp");
    char *g = pgtest_unique("g");
    char *items = fmt("{\"items\":[{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":1},"
                      "{\"queue\":\"%1$s\",\"partition\":\"a\",\"payload\":2},"
                      "{\"queue\":\"%1$s\",\"partition\":\"b\",\"payload\":3}]}",
                      q);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/push", items, 201));
    free(items);
    /* g holds a lease on a (one message of two) and consumed b. */
    json_t *popped = ok("GET", fmt("/api/v1/pop/queue/%s/partition/a?consumerGroup=%s&batch=1", q, g), NULL, 200);
    char *lease = strdup(jstr(popped, "leaseId"));
    char *pid = strdup(jstr(popped, "partitionId"));
    char *txn = strdup(jstr(json_array_get(json_object_get(popped, "messages"), 0), "transactionId"));
    json_decref(popped);
    json_decref(ok("GET", fmt("/api/v1/pop/queue/%s/partition/b?consumerGroup=%s&autoAck=true", q, g), NULL, 200));

    json_t *v = http_ok(&http_broker, "GET", "/api/v1/consumer-groups", NULL, 200);
    json_t *a = cursor_of(v, g, q, "a"), *b = cursor_of(v, g, q, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(jint(a, "committedOffset"), 0);
    assert_int_equal(jint(a, "lagMessages"), 2);
    assert_string_equal(jstr(a, "leaseId"), lease);
    assert_non_null(jstr(a, "leaseExpiresAt"));
    assert_int_equal(jint(b, "lagMessages"), 0);
    assert_true(json_is_null(json_object_get(b, "leaseId")));
    json_decref(v);

    /* The lagging view holds a (behind) and not b (caught up). */
    v = http_ok(&http_broker, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", NULL, 200);
    assert_non_null(cursor_of(v, g, q, "a"));
    assert_null(cursor_of(v, g, q, "b"));
    json_decref(v);
    v = http_ok(&http_broker, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=86400", NULL, 200);
    assert_null(cursor_of(v, g, q, "a"));
    json_decref(v);
    http_refused(&http_broker, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=-1", NULL, 400, "bad_request",
                 "log_bad_seconds");

    /* Seek while the lease on a is live: 409, nothing moves. */
    refused("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"to\":\"end\"}", 409, "conflict",
            "log_group_leased");
    refused("DELETE", fmt("/api/v1/consumer-groups/%s", g), NULL, 409, "conflict", "log_group_leased");
    v = ok("GET", fmt("/api/v1/consumer-groups/%s", g), NULL, 200);
    assert_int_equal(jint(cursor_of(v, g, q, "b"), "committedOffset"), 1);
    json_decref(v);

    /* Ack the lease; now seek applies. */
    char *ack = fmt("{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\",\"consumerGroup\":\"%s\"}",
                    txn, pid, lease, g);
    json_decref(http_ok(&http_broker, "POST", "/api/v1/ack", ack, 200));
    free(ack);
    refused("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"to\":\"tomorrow\"}", 400,
            "bad_request", "log_bad_seek");
    refused("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"at\":\"end\"}", 400, "bad_request",
            "log_bad_request");
    v = ok("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"to\":\"beginning\"}", 200);
    assert_int_equal(json_array_size(json_object_get(v, "partitions")), 2);
    json_decref(v);
    v = ok("GET", fmt("/api/v1/pop/queue/%s?consumerGroup=%s&partitions=2&batch=10&autoAck=true", q, g), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 3);
    json_decref(v);
    json_decref(ok("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"to\":\"2000-01-01T00:00:00Z\"}",
                   200));
    v = ok("GET", fmt("/api/v1/pop/queue/%s/partition/a?consumerGroup=%s&batch=10&autoAck=true", q, g), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "messages")), 2);
    json_decref(v);
    json_decref(ok("POST", fmt("/api/v1/consumer-groups/%s/queues/%s/seek", g, q), "{\"to\":\"end\"}", 200));
    json_decref(ok("GET", fmt("/api/v1/pop/queue/%s?consumerGroup=%s&partitions=2", q, g), NULL, 204));

    v = ok("DELETE", fmt("/api/v1/consumer-groups/%s?queue=%s", g, q), NULL, 200);
    assert_int_equal(jint(v, "deleted"), 2);
    json_decref(v);
    v = ok("GET", fmt("/api/v1/consumer-groups/%s", g), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(v, "consumerGroups")), 0);
    json_decref(v);
    free(lease);
    free(pid);
    free(txn);
    free(q);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(view_seek_delete),
    };
    return cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown);
}
