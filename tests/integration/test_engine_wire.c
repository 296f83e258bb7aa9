/* The transaction bundle through libqueen (no HTTP): ack + push + kv marker
 * committing together; a required kv op that loses rolls all of it back
 * (the push does not land, the cursor does not move) and answers the 200
 * failure body with failedIndex/kvReason/version/value; the kv-only bundle;
 * a duplicate push failing the bundle; refusals before SQL; a bad item
 * raised by SQL answering bad_request. Unique tenants and queues per run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

/* A consumer's view of one popped message. */
typedef struct popped {
    char txid[64], partition[40], lease[40];
} popped;

static void push_and_pop(queen *q, const char *tenant, const char *queue, const char *txid, popped *m)
{
    json_t *items = json_pack("[{s:s, s:{s:i}, s:s}]", "queue", queue, "payload", "n", 7, "transactionId", txid);
    char *text = json_dumps(items, JSON_COMPACT);
    json_decref(items);
    char *out;
    queen_error e = {0};
    must(queen_push(q, tenant, text, &out, &e), &e);
    free(out);
    free(text);
    must(queen_pop(q, tenant, &(queen_pop_options){.queue = queue, .batch = 1}, &out, &e), &e);
    json_t *r = take_json(out);
    snprintf(m->txid, sizeof m->txid, "%s", jstr(json_array_get(json_object_get(r, "messages"), 0), "transactionId"));
    snprintf(m->partition, sizeof m->partition, "%s", jstr(r, "partitionId"));
    snprintf(m->lease, sizeof m->lease, "%s", jstr(r, "leaseId"));
    json_decref(r);
}

/* ack(m) + push(out_queue) + putIfAbsent done:<txid> required, as text. */
static char *bundle(const popped *m, const char *out_queue, const char *ns)
{
    char key[96], out_tx[96];
    snprintf(key, sizeof key, "done:%s", m->txid);
    snprintf(out_tx, sizeof out_tx, "out:%s", m->txid);
    json_t *b = json_pack("{s:[{s:s, s:s, s:s, s:s}, {s:s, s:[{s:s, s:{s:b}, s:s}]}],"
                          " s:[{s:s, s:s, s:s, s:{s:i}, s:b, s:b}]}",
                          "operations", "type", "ack", "transactionId", m->txid, "partitionId", m->partition, "leaseId",
                          m->lease, "type", "push", "items", "queue", out_queue, "payload", "ok", 1, "transactionId",
                          out_tx, "kv", "op", "putIfAbsent", "ns", ns, "key", key, "value", "at", 1, "forever", 1,
                          "required", 1);
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return text;
}

static void bundle_commits_ack_push_and_marker_together(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *in = pgtest_unique("w-in-"), *outq = pgtest_unique("w-out-"), *ns = pgtest_unique("w-ns-");
    popped m;
    push_and_pop(q, tenant, in, "m1", &m);
    char *b = bundle(&m, outq, ns);
    char *out;
    queen_error e = {0};
    must(queen_transaction(q, tenant, b, &out, &e), &e);
    free(b);
    json_t *r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "success")));
    char canon[QUEEN_TENANT_LEN + 1];
    assert_int_equal(queen_tenant_canonical(jstr(r, "transactionId"), canon), 0);
    json_t *res = json_object_get(r, "results");
    assert_int_equal(json_array_size(res), 3);
    json_t *ack = json_array_get(res, 0), *push = json_array_get(res, 1), *kv = json_array_get(res, 2);
    assert_string_equal(jstr(ack, "type"), "ack");
    assert_int_equal(jint(ack, "index"), 0);
    assert_true(json_is_true(json_object_get(ack, "success")));
    assert_string_equal(jstr(push, "type"), "push");
    assert_int_equal(jint(push, "index"), 1);
    assert_int_equal(jint(push, "opIndex"), 1);
    assert_string_equal(jstr(push, "status"), "queued");
    assert_string_equal(jstr(kv, "type"), "kv");
    assert_int_equal(jint(kv, "index"), 2);
    assert_int_equal(jint(kv, "opIndex"), 0);
    assert_true(json_is_true(json_object_get(kv, "applied")));
    json_decref(r);

    /* All three landed: the output message, the marker, the cursor. */
    must(queen_pop(q, tenant, &(queen_pop_options){.queue = outq}, &out, &e), &e);
    r = take_json(out);
    assert_string_equal(jstr(json_array_get(json_object_get(r, "messages"), 0), "transactionId"), "out:m1");
    json_decref(r);
    must(queen_kv_get(q, tenant, ns, "done:m1", &out, &e), &e);
    r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "found")));
    json_decref(r);
    must(queen_pop(q, tenant, &(queen_pop_options){.queue = in}, &out, &e), &e);
    assert_null(out);
    free(in);
    free(outq);
    free(ns);
    queen_close(q);
}

static void lost_marker_rolls_everything_back(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *in = pgtest_unique("w-in-"), *outq = pgtest_unique("w-out-"), *ns = pgtest_unique("w-ns-");
    char *out;
    queen_error e = {0};
    /* The marker exists already: this message was processed before. */
    must(queen_kv_put(q, tenant, ns, "done:m2", "{\"big\": 12345678901234567890, \"x\": 0.1}", QUEEN_FOREVER, -1,
                      false, &out, &e),
         &e);
    json_t *r = take_json(out);
    long long version = jint(r, "version");
    json_decref(r);

    popped m;
    push_and_pop(q, tenant, in, "m2", &m);
    char *b = bundle(&m, outq, ns);
    must(queen_transaction(q, tenant, b, &out, &e), &e); /* 0: a 200 failure body */
    free(b);
    assert_non_null(strstr(out, "\"value\":{\"x\": 0.1, \"big\": 12345678901234567890}"));
    r = take_json(out);
    assert_false(json_is_true(json_object_get(r, "success")));
    char canon[QUEEN_TENANT_LEN + 1];
    assert_int_equal(queen_tenant_canonical(jstr(r, "transactionId"), canon), 0);
    assert_string_equal(jstr(r, "reason"), "kv_precondition");
    assert_string_equal(jstr(r, "error"), "kv_precondition_failed");
    assert_int_equal(json_array_size(json_object_get(r, "results")), 0);
    assert_int_equal(jint(r, "failedIndex"), 2); /* ack 0, push 1, kv[0] is flat 2 */
    assert_string_equal(jstr(r, "kvReason"), "exists");
    assert_int_equal(jint(r, "version"), version);
    json_decref(r);

    /* The push did not land... */
    must(queen_pop(q, tenant, &(queen_pop_options){.queue = outq}, &out, &e), &e);
    assert_null(out);
    /* ...and the cursor did not move: acking the message now is real work,
     * not a no-op. */
    char ack[512];
    snprintf(ack, sizeof ack, "[{\"transactionId\":\"%s\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}]", m.txid,
             m.partition, m.lease);
    must(queen_ack(q, tenant, ack, NULL, &out, &e), &e);
    r = take_json(out);
    assert_true(json_is_true(json_object_get(json_array_get(r, 0), "success")));
    assert_false(json_is_true(json_object_get(json_array_get(r, 0), "noop")));
    json_decref(r);
    free(in);
    free(outq);
    free(ns);
    queen_close(q);
}

static void kv_only_bundle(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *ns = pgtest_unique("w-kv-");
    char b[512];
    snprintf(b, sizeof b,
             "{\"kv\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"a\",\"value\":1,\"ttlSeconds\":60},"
             "{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"c\",\"delta\":2,\"forever\":true}]}",
             ns, ns);
    char *out;
    queen_error e = {0};
    must(queen_transaction(q, tenant, b, &out, &e), &e);
    json_t *r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "success")));
    char canon[QUEEN_TENANT_LEN + 1];
    assert_int_equal(queen_tenant_canonical(jstr(r, "transactionId"), canon), 0);
    json_t *res = json_object_get(r, "results");
    assert_int_equal(json_array_size(res), 2);
    for (int i = 0; i < 2; i++) {
        json_t *el = json_array_get(res, (size_t)i);
        assert_string_equal(jstr(el, "type"), "kv");
        assert_int_equal(jint(el, "index"), i);
        assert_int_equal(jint(el, "opIndex"), i);
        assert_true(json_is_true(json_object_get(el, "applied")));
    }
    assert_string_equal(jstr(json_array_get(res, 1), "op"), "incr");
    json_decref(r);

    /* A required loss in a kv-only bundle: failedIndex is the op's index,
     * and the first op (a put) is rolled back with it. */
    snprintf(b, sizeof b,
             "{\"kv\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"z\",\"value\":1,\"forever\":true},"
             "{\"op\":\"putIfAbsent\",\"ns\":\"%s\",\"key\":\"a\",\"value\":2,\"forever\":true,\"required\":true}]}",
             ns, ns);
    must(queen_transaction(q, tenant, b, &out, &e), &e);
    r = take_json(out);
    assert_false(json_is_true(json_object_get(r, "success")));
    assert_string_equal(jstr(r, "reason"), "kv_precondition");
    assert_int_equal(jint(r, "failedIndex"), 1);
    assert_int_equal(jint(r, "value"), 1);
    json_decref(r);
    must(queen_kv_get(q, tenant, ns, "z", &out, &e), &e);
    r = take_json(out);
    assert_false(json_is_true(json_object_get(r, "found")));
    json_decref(r);
    free(ns);
    queen_close(q);
}

static void duplicate_and_bad_items_fail_the_bundle(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("w-dup-");
    char b[512];
    snprintf(b, sizeof b,
             "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"x\"}]}]}",
             queue);
    char *out;
    queen_error e = {0};
    must(queen_transaction(q, tenant, b, &out, &e), &e);
    json_t *r = take_json(out);
    assert_true(json_is_true(json_object_get(r, "success")));
    json_decref(r);
    must(queen_transaction(q, tenant, b, &out, &e), &e);
    r = take_json(out);
    assert_false(json_is_true(json_object_get(r, "success")));
    assert_string_equal(jstr(r, "reason"), "duplicate");
    assert_string_equal(jstr(r, "error"), "log_duplicate");
    assert_string_equal(jstr(json_object_get(r, "detail"), "transactionId"), "x");
    json_decref(r);

    /* Shape errors SQL raises answer 200 bad_request, nothing written. */
    must(queen_transaction(q, tenant, "{\"operations\":[{\"type\":\"push\",\"items\":[{\"payload\":1}]}]}", &out, &e),
         &e);
    r = take_json(out);
    assert_string_equal(jstr(r, "reason"), "bad_request");
    assert_string_equal(jstr(r, "error"), "log_bad_queue");
    json_decref(r);

    /* An ack of a foreign or unknown partition rejects the bundle. */
    must(queen_transaction(q, tenant,
                           "{\"operations\":[{\"type\":\"ack\",\"transactionId\":\"x\","
                           "\"partitionId\":\"00000000-0000-4000-8000-000000000000\"}]}",
                           &out, &e),
         &e);
    r = take_json(out);
    assert_string_equal(jstr(r, "reason"), "ack_rejected");
    json_decref(r);
    free(queue);
    queen_close(q);
}

static void refusals_before_sql(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    static const struct {
        const char *body, *reason;
    } cases[] = {
        {"{\"tenant\":\"00000000-0000-0000-0000-000000000001\",\"kv\":[{\"op\":\"get\"}]}", "tenant_not_an_input"},
        {"{\"operations\":[{\"type\":\"kv\"}]}", "log_kv_in_operations"},
        {"{\"kv\":[{\"op\":\"getPrefix\",\"ns\":\"a\",\"prefix\":\"p\"}]}", "kv_get_prefix_not_allowed_in_transaction"},
        {"not json", "bad_body"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = (char *)1;
        queen_error e = {0};
        assert_int_equal(queen_transaction(q, NULL, cases[i].body, &out, &e), -1);
        assert_null(out);
        assert_int_equal(e.category, QUEEN_ERR_BAD_REQUEST);
        assert_string_equal(e.reason, cases[i].reason);
    }
    char *out;
    queen_error e = {0};
    assert_int_equal(queen_transaction(q, "nope", "{\"kv\":[]}", &out, &e), -1);
    assert_string_equal(e.reason, "bad_tenant");
    assert_int_equal(engine_stat(q, "transactions", "refused"), 5);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bundle_commits_ack_push_and_marker_together),
        cmocka_unit_test(lost_marker_rolls_everything_back),
        cmocka_unit_test(kv_only_bundle),
        cmocka_unit_test(duplicate_and_bad_items_fail_the_bundle),
        cmocka_unit_test(refusals_before_sql),
    };
    return cmocka_run_group_tests_name("engine_wire", tests, NULL, NULL);
}
