/* Payload encryption at rest (docs/api.md, Payload encryption) over real
 * brokers: with encryptionEnabled the database holds no plaintext of a
 * message (nor of its dead letter) while pop, the dead letters and browse
 * answer the payload byte for byte; a second broker whose key ring puts a
 * new key first opens what the first sealed, and seals with its new key
 * (rotation); a broker without a key refuses to switch encryption on; a
 * transaction cannot push to an encrypted queue; other queues are untouched.
 * The security review's findings (issue 34): a ciphertext copied from the
 * database and pushed into a queue without encryption, as the payload or
 * nested in it, comes back as the string it was pushed as (4); one moved to
 * another message or queue does not open and says so (4); a broker without
 * the key refuses pushes into an encrypted queue, 503, storing nothing, and
 * delivers what it cannot open as an error, counted and logged, never as
 * the ciphertext (5). */
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

static test_broker A, R, N, W; /* A: key k0; R: rotated ring "k2 first, then k0"; N: no key; W: another key as k0 */

static int setup(void **state)
{
    (void)state;
    static const char *const a[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_ENCRYPTION_KEY=" HEX1, NULL};
    static const char *const r[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_ENCRYPTION_KEY=k2:" HEX2 ",k0:" HEX1, NULL};
    static const char *const n[] = {"QUEEN_HTTP_THREADS=2", NULL};
    static const char *const w[] = {"QUEEN_HTTP_THREADS=2", "QUEEN_ENCRYPTION_KEY=" HEX2, NULL};
    return broker_start(&A, a) && broker_start(&R, r) && broker_start(&N, n) && broker_start(&W, w) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int a = broker_stop(&A), r = broker_stop(&R), n = broker_stop(&N), w = broker_stop(&W);
    return a == 0 && r == 0 && n == 0 && w == 0 ? 0 : -1;
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

/* Whether a message of the answer r carries data null and encryptionError
 * reason. */
static bool has_error(const http_reply *r, const char *reason)
{
    json_t *v = json_of(r), *m;
    size_t i;
    bool found = false;
    json_array_foreach(json_object_get(v, "messages"), i, m)
    {
        const char *e = json_string_value(json_object_get(m, "encryptionError"));
        found = found || (e != NULL && strcmp(e, reason) == 0 && json_is_null(json_object_get(m, "data")));
    }
    json_decref(v);
    return found;
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
    assert_non_null(strstr(raw, "qenc:v2:k0:"));
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
    /* Browse opens it as well; a broker without the key shows neither the
     * payload nor the envelope: the message, with an error in its place. */
    char *browse = fmt("/api/v1/messages?queue=%s", q);
    r = broker_http(&A, "GET", browse, NULL, NULL);
    assert_non_null(strstr(r.body, "second-secret"));
    http_reply_free(&r);
    r = broker_http(&N, "GET", browse, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "second-secret"));
    assert_null(strstr(r.body, "qenc:"));
    assert_true(has_error(&r, "encryption_key_missing"));
    http_reply_free(&r);

    /* The rotated broker seals with k2; A (k0 only) cannot open that one. */
    char *push3 = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"third-secret\",\"transactionId\":\"e3\"}]}", q);
    json_decref(http_ok(&R, "POST", "/api/v1/push", push3, 201));
    raw = stored(q);
    assert_non_null(strstr(raw, "qenc:v2:k2:"));
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


/* The one stored payload of queue q's message txn, as its JSON text. */
static char *stored_one(const char *q, const char *txn)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {q, txn};
    char *v = pgtest_scalar(c,
                            "SELECT m.payload::text FROM queen.log_messages m "
                            "JOIN queen.log_partitions lp ON lp.id = m.partition_id "
                            "JOIN queen.queues qq ON qq.id = lp.queue_id WHERE qq.name = $1 AND m.transaction_id = $2",
                            2, p);
    PQfinish(c);
    return v;
}

/* Sets the stored payload of queue q's message txn (what a person with the
 * database, or a restored backup, can do). */
static void plant(const char *q, const char *txn, const char *payload_json)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {q, txn, payload_json};
    long long n = pgtest_int(c,
                             "WITH u AS (UPDATE queen.log_messages m SET payload = $3::jsonb "
                             "FROM queen.log_partitions lp JOIN queen.queues qq ON qq.id = lp.queue_id "
                             "WHERE lp.id = m.partition_id AND qq.name = $1 AND m.transaction_id = $2 RETURNING 1) "
                             "SELECT count(*) FROM u",
                             3, p);
    PQfinish(c);
    assert_int_equal(n, 1);
}

static long long stored_count(const char *q)
{
    PGconn *c = pgtest_connect();
    const char *p[] = {q};
    long long n = pgtest_int(c,
                             "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions lp ON "
                             "lp.id = m.partition_id JOIN queen.queues qq ON qq.id = lp.queue_id WHERE qq.name = $1",
                             1, p);
    PQfinish(c);
    return n;
}

static void encrypted_queue(const char *q)
{
    char *conf = fmt("{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":true}}", q);
    json_decref(http_ok(&A, "POST", "/api/v1/configure", conf, 200));
    free(conf);
}

static void push_one(const test_broker *b, const char *q, const char *txn, const char *payload)
{
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"transactionId\":\"%s\",\"payload\":%s}]}", q, txn, payload);
    json_decref(http_ok(b, "POST", "/api/v1/push", push, 201));
    free(push);
}

/* Pops every message of q (autoAck) through b: the parsed answer. */
static json_t *pop_all(const test_broker *b, const char *q)
{
    char *path = fmt("/api/v1/pop/queue/%s?batch=10&autoAck=true", q);
    http_reply r = broker_http(b, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *v = json_of(&r);
    http_reply_free(&r);
    free(path);
    return v;
}

/* Whether file holds text. */
static bool file_has(const char *file, const char *text)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return false;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* Finding 4, the review's reproduction: a ciphertext copied from the
 * database and pushed into a queue without encryption, as the payload and
 * nested under data, pops as the very string that was pushed. */
static void copied_ciphertext_stays_a_string(void **state)
{
    (void)state;
    char *enc = pgtest_unique("enc-src"), *plain = pgtest_unique("plain-dst");
    encrypted_queue(enc);
    push_one(&A, enc, "r1", "{\"card\":\"4111-stolen\"}");
    char *token = stored_one(enc, "r1"); /* "qenc:v2:k0:...", quotes included */
    assert_non_null(strstr(token, "qenc:"));
    /* The same transactionId and partition: only the queue differs. */
    push_one(&A, plain, "r1", token);
    char *nested = fmt("{\"data\":%s}", token);
    push_one(&A, plain, "r2", nested);
    json_t *v = pop_all(&A, plain);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    json_t *want = json_loads(token, JSON_DECODE_ANY, NULL);
    assert_true(json_equal(json_object_get(json_array_get(msgs, 0), "data"), want));
    assert_true(json_equal(json_object_get(json_object_get(json_array_get(msgs, 1), "data"), "data"), want));
    assert_null(json_object_get(json_array_get(msgs, 0), "encryptionError"));
    char *text = json_dumps(v, JSON_COMPACT);
    assert_null(strstr(text, "stolen"));
    free(text);
    json_decref(want);
    json_decref(v);
    /* Its own message still opens where it belongs. */
    v = pop_all(&A, enc);
    assert_string_equal(jstr(json_object_get(json_array_get(json_object_get(v, "messages"), 0), "data"), "card"),
                        "4111-stolen");
    json_decref(v);
    free(nested);
    free(token);
    free(plain);
    free(enc);
}

/* Finding 4: a ciphertext moved to another message of its queue, or to
 * another encrypted queue under the same transactionId, does not open: the
 * message comes with data null and encryptionError, counted and logged. */
static void moved_ciphertext_fails_to_open(void **state)
{
    (void)state;
    char *e1 = pgtest_unique("enc-a"), *e2 = pgtest_unique("enc-b");
    encrypted_queue(e1);
    encrypted_queue(e2);
    push_one(&A, e1, "m1", "\"first-secret\"");
    push_one(&A, e1, "m2", "\"second\"");
    push_one(&A, e2, "m1", "\"other\"");
    char *token = stored_one(e1, "m1");
    plant(e1, "m2", token);
    plant(e2, "m1", token);

    json_t *v = pop_all(&A, e1);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "data")), "first-secret");
    json_t *m2 = json_array_get(msgs, 1);
    assert_string_equal(jstr(m2, "transactionId"), "m2");
    assert_true(json_is_null(json_object_get(m2, "data")));
    assert_string_equal(jstr(m2, "encryptionError"), "encryption_open_failed");
    json_decref(v);
    long long counted = http_metric(&A, "engine", "pops", "openFailures");
    assert_true(counted >= 1);

    v = pop_all(&A, e2);
    json_t *m = json_array_get(json_object_get(v, "messages"), 0);
    assert_true(json_is_null(json_object_get(m, "data")));
    assert_string_equal(jstr(m, "encryptionError"), "encryption_open_failed");
    char *logged = fmt("queue %s, partition Default, transactionId m1", e2);
    assert_true(file_has(A.log, logged));
    free(logged);
    json_decref(v);
    assert_int_equal(http_metric(&A, "engine", "pops", "openFailures"), counted + 1);
    free(token);
    free(e2);
    free(e1);
}

/* Finding 5: a broker without the key refuses a push into an encrypted
 * queue, 503 naming the key (a transaction's push: the failed bundle), and
 * stores nothing. */
static void push_without_key_refused(void **state)
{
    (void)state;
    char *q = pgtest_unique("enc-nokey");
    encrypted_queue(q);
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"would-be-plaintext\"}]}", q);
    http_reply r = broker_http(&N, "POST", "/api/v1/push", push, NULL);
    http_expect(&r, 503, "unavailable", "encryption_key_missing");
    assert_non_null(strstr(r.body, "QUEEN_ENCRYPTION_KEY"));
    char *ra = http_reply_header(&r, "Retry-After");
    assert_non_null(ra);
    free(ra);
    http_reply_free(&r);
    char *txn = fmt("{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":1}]}]}", q);
    /* The bundle's push is refused in its SQL, so the wire answers as for
     * any failed bundle: 200, success false, retryable, nothing committed. */
    json_t *failed = http_ok(&N, "POST", "/api/v1/transaction", txn, 200);
    assert_false(json_is_true(json_object_get(failed, "success")));
    assert_string_equal(json_string_value(json_object_get(failed, "error")), "encryption_key_missing");
    assert_true(json_is_true(json_object_get(failed, "retryable")));
    json_decref(failed);
    assert_int_equal(stored_count(q), 0);
    /* Other queues push as ever on that broker. */
    char *other = pgtest_unique("plain-nokey");
    char *push2 = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":\"fine\"}]}", other);
    json_decref(http_ok(&N, "POST", "/api/v1/push", push2, 201));
    free(push2);
    free(other);
    free(txn);
    free(push);
    free(q);
}

/* Finding 5: after the key is removed (or changed, or retired from the
 * ring) a pop delivers the message with an error, never the ciphertext as
 * its data, and counts it. */
static void pop_without_key_is_an_error(void **state)
{
    (void)state;
    char *q = pgtest_unique("enc-gone");
    encrypted_queue(q);
    push_one(&A, q, "g1", "\"gone-secret\"");
    push_one(&R, q, "g2", "\"rotated-secret\""); /* sealed with k2, which A does not hold */
    char *browse = fmt("/api/v1/messages?queue=%s", q);
    /* Another key under the same id: does not open. */
    http_reply r = broker_http(&W, "GET", browse, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "qenc:"));
    assert_true(has_error(&r, "encryption_open_failed"));
    http_reply_free(&r);
    /* A ring without the envelope's key. */
    r = broker_http(&A, "GET", browse, NULL, NULL);
    assert_non_null(strstr(r.body, "gone-secret"));
    assert_true(has_error(&r, "encryption_key_unknown"));
    http_reply_free(&r);
    /* No key at all: the pop delivers (and consumes) both, each an error. */
    long long before = http_metric(&N, "engine", "pops", "openFailures");
    json_t *v = pop_all(&N, q);
    json_t *msgs = json_object_get(v, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_array_get(msgs, i);
        assert_true(json_is_null(json_object_get(m, "data")));
        assert_string_equal(jstr(m, "encryptionError"), "encryption_key_missing");
    }
    char *text = json_dumps(v, JSON_COMPACT);
    assert_null(strstr(text, "qenc:"));
    free(text);
    json_decref(v);
    assert_int_equal(http_metric(&N, "engine", "pops", "openFailures"), before + 2);
    assert_true(file_has(N.log, "transactionId g1"));
    free(browse);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sealed_at_rest),
        cmocka_unit_test(copied_ciphertext_stays_a_string),
        cmocka_unit_test(moved_ciphertext_fails_to_open),
        cmocka_unit_test(push_without_key_refused),
        cmocka_unit_test(pop_without_key_is_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
