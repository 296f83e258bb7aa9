/* Payload encryption at rest (README.md, Payload encryption) over real
 * brokers: with encryptionEnabled the database holds no plaintext of a
 * message (nor of its dead letter) while pop, the dead letters and browse
 * answer the payload byte for byte; a second broker whose key ring puts a
 * new key first opens what the first sealed, and seals with its new key
 * (rotation); a broker without a key refuses to switch encryption on; a
 * transaction cannot push to an encrypted queue; other queues are untouched. */
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

#define HEX1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define HEX2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static test_broker A, R, N; /* A: key k0; R: rotated ring "k2 first, then k0"; N: no key */

static int setup(void **state)
{
    (void)state;
    static const char *const a[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_ENCRYPTION_KEY=" HEX1, NULL};
    static const char *const r[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_ENCRYPTION_KEY=k2:" HEX2 ",k0:" HEX1, NULL};
    static const char *const n[] = {"QUEEN_HTTP_THREADS=2", NULL};
    return broker_start(&A, a) && broker_start(&R, r) && broker_start(&N, n) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int a = broker_stop(&A), r = broker_stop(&R), n = broker_stop(&N);
    return a == 0 && r == 0 && n == 0 ? 0 : -1;
}

/* The stored payloads of queue q as text, joined (messages and dead letters). */
static char *stored(const char *q)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    char *v = pgtest_scalar(c,
                            "SELECT coalesce(string_agg(m.payload::text, ' '), '') || ' ' || "
                            "coalesce((SELECT string_agg(d.payload::text, ' ') FROM queen.log_dead_letters d "
                            "WHERE d.queue_name = $1), '') FROM queen.log_messages m "
                            "JOIN queen.log_partitions lp ON lp.id = m.partition_id "
                            "JOIN queen.queues qq ON qq.id = lp.queue_id WHERE qq.name = $1",
                            1, p);
    PQfinish(c);
    return v;
}

static void sealed_at_rest(void **state)
{
    (void)state;
    char *q = pgtest_unique("enc");
    char *conf = fmt("{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":true,\"retryLimit\":0}}", q);
    http_refused(&N, "POST", "/api/v1/configure", conf, 400, "bad_request", "log_encryption_key_missing");
    json_decref(http_ok(&A, "POST", "/api/v1/configure", conf, 200));

    char *push = fmt("{\"items\":[{\"queue\":\"%1$s\",\"payload\":{\"card\":\"4111-secret\",\"n\":0.10},"
                     "\"transactionId\":\"e1\"},{\"queue\":\"%1$s\",\"payload\":\"second-secret\","
                     "\"transactionId\":\"e2\"}]}",
                     q);
    json_decref(http_ok(&A, "POST", "/api/v1/push", push, 201));
    char *raw = stored(q);
    assert_null(strstr(raw, "secret"));
    assert_non_null(strstr(raw, "qenc:v1:k0:"));
    free(raw);

    /* The rotated broker opens k0's payloads, byte for byte. */
    char *pop = fmt("/api/v1/pop/queue/%s?batch=1", q);
    http_reply r = broker_http(&R, "GET", pop, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"card\":\"4111-secret\",\"n\":0.10}"));
    json_t *v = json_of(&r);
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    char *fail = fmt("{\"transactionId\":\"e1\",\"partitionId\":\"%s\",\"leaseId\":\"%s\",\"status\":\"failed\"}",
                     jstr(m, "partitionId"), jstr(v, "leaseId"));
    json_decref(v);
    http_reply_free(&r);
    json_decref(http_ok(&R, "POST", "/api/v1/ack", fail, 200));
    /* Its dead letter is sealed too, and listed opened. */
    char *dlq = fmt("/api/v1/dlq?queue=%s", q);
    r = broker_http(&A, "GET", dlq, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "4111-secret"));
    http_reply_free(&r);
    raw = stored(q);
    assert_null(strstr(raw, "secret"));
    free(raw);
    /* Browse opens it as well; a broker without the key shows the envelope. */
    char *browse = fmt("/api/v1/messages?queue=%s", q);
    r = broker_http(&A, "GET", browse, NULL, NULL);
    assert_non_null(strstr(r.body, "second-secret"));
    http_reply_free(&r);
    r = broker_http(&N, "GET", browse, NULL, NULL);
    assert_null(strstr(r.body, "second-secret"));
    assert_non_null(strstr(r.body, "qenc:v1:k0:"));
    http_reply_free(&r);

    /* The rotated broker seals with k2; A (k0 only) cannot open that one. */
    char *push3 = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"third-secret\",\"transactionId\":\"e3\"}]}", q);
    json_decref(http_ok(&R, "POST", "/api/v1/push", push3, 201));
    raw = stored(q);
    assert_non_null(strstr(raw, "qenc:v1:k2:"));
    assert_null(strstr(raw, "secret"));
    free(raw);
    char *get3 = fmt("/api/v1/messages/e3?queue=%s", q);
    r = broker_http(&R, "GET", get3, NULL, NULL);
    assert_non_null(strstr(r.body, "third-secret"));
    http_reply_free(&r);

    char *txn = fmt("{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":1}]}]}", q);
    http_refused(&A, "POST", "/api/v1/transaction", txn, 400, "bad_request", "log_encrypted_queue_in_transaction");

    /* A queue without encryption stores its payload as sent. */
    char *plainq = pgtest_unique("plain");
    char *push4 = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"visible\"}]}", plainq);
    json_decref(http_ok(&A, "POST", "/api/v1/push", push4, 201));
    raw = stored(plainq);
    assert_non_null(strstr(raw, "visible"));
    free(raw);

    free(push4);
    free(plainq);
    free(txn);
    free(get3);
    free(push3);
    free(browse);
    free(dlq);
    free(fail);
    free(pop);
    free(push);
    free(conf);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sealed_at_rest),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
