/* Unit tests of the engine's pure parts, no database: the error registry
 * (SQLSTATE -> category, reasons, retry), the precondition DETAIL parse
 * (exact values, omitted values), the raw JSON member scanner, the transaction pre-flight and failure mapping, the
 * failure body, uuids, the NOTIFY payload split and the sweeper's shard
 * rotation. Table-driven where the thing under test is a table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "engine.h"
#include "rawjson.h"
#include "reasons.h"
#include "notify.h"
#include "sweeper.h"
#include "wire.h"

static void sqlstates_map_to_categories(void **state)
{
    (void)state;
    static const struct {
        const char *state, *message;
        queen_error_category cat;
    } cases[] = {
        {"22023", "kv_bad_key", QUEEN_ERR_BAD_REQUEST},
        {"22P02", NULL, QUEEN_ERR_BAD_REQUEST},
        {"22001", NULL, QUEEN_ERR_TOO_LARGE},
        {"54000", NULL, QUEEN_ERR_TOO_LARGE},
        {"23514", "kv_precondition_failed", QUEEN_ERR_PRECONDITION},
        {"40001", NULL, QUEEN_ERR_UNAVAILABLE},
        {"40P01", NULL, QUEEN_ERR_UNAVAILABLE},
        {"08006", NULL, QUEEN_ERR_UNAVAILABLE},
        {"53300", NULL, QUEEN_ERR_UNAVAILABLE},
        {"57014", NULL, QUEEN_ERR_UNAVAILABLE},
        {"57P01", NULL, QUEEN_ERR_UNAVAILABLE},
        {"58030", NULL, QUEEN_ERR_UNAVAILABLE},
        {"42883", NULL, QUEEN_ERR_MISCONFIGURED},
        {"42P01", NULL, QUEEN_ERR_MISCONFIGURED},
        {"XX000", NULL, QUEEN_ERR_INTERNAL},
        {"23505", "log_duplicate", QUEEN_ERR_CONFLICT},
        {"23505", "other_unique", QUEEN_ERR_INTERNAL},
        {"55000", "log_ack_rejected", QUEEN_ERR_CONFLICT},
        {"55000", NULL, QUEEN_ERR_INTERNAL},
        {"", NULL, QUEEN_ERR_UNAVAILABLE},
        {NULL, NULL, QUEEN_ERR_UNAVAILABLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (error_category_of(cases[i].state, cases[i].message) != cases[i].cat)
            fail_msg("%s -> %d, expected %d", cases[i].state ? cases[i].state : "NULL",
                     (int)error_category_of(cases[i].state, cases[i].message), (int)cases[i].cat);
}

/* A message our SQL did not raise is PostgreSQL's prose and may quote the
 * caller's input (a tenant, a key): it travels in detail only, and the
 * reason is the category's generic id. */
static void foreign_messages_never_become_reasons(void **state)
{
    (void)state;
    queen_error err;
    queen_error_from_fields(&err, "22P02", "invalid input syntax for type uuid: \"ACME-tenant\"", NULL);
    assert_int_equal(err.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(err.reason, "bad_request");
    assert_non_null(strstr(err.detail, "ACME-tenant"));
    queen_error_from_fields(&err, "XX000", "kv_unknown_thing but with spaces", "d");
    assert_string_equal(err.reason, "db_error");
    queen_error_from_fields(&err, "58030", "could not write to file", NULL);
    assert_string_equal(err.reason, "db_unavailable");
    assert_int_equal(err.retry_after_s, 1);
    queen_error_from_fields(&err, "22023", "log_bad_queue", "queue \"Q\" is not a name");
    assert_string_equal(err.reason, "log_bad_queue");
    assert_string_equal(err.detail, "queue \"Q\" is not a name");
}

/* The generated reason table: sorted (the lookup bisects it), every reason
 * our SQL raises classified by its row whatever its SQLSTATE means
 * elsewhere, and an unregistered id (even one of our prefixes) is prose. */
static void registered_reasons_decide_their_category(void **state)
{
    (void)state;
    assert_true(queen_reason_count > 100);
    for (size_t i = 0; i < queen_reason_count; i++) {
        const queen_reason_row *r = &queen_reasons[i];
        if (i > 0 && strcmp(queen_reasons[i - 1].id, r->id) >= 0)
            fail_msg("%s is out of order", r->id);
        assert_ptr_equal(queen_reason_find(r->id), r);
        if (r->sqlstate == NULL)
            continue;
        if (error_category_of(r->sqlstate, r->id) != r->category)
            fail_msg("%s (%s) -> %d, registered %d", r->id, r->sqlstate, (int)error_category_of(r->sqlstate, r->id),
                     (int)r->category);
        queen_error err;
        queen_error_from_fields(&err, r->sqlstate, r->id, "d");
        assert_string_equal(err.reason, r->id);
        assert_string_equal(error_wire_reason(&err),
                            r->wire_reason ? r->wire_reason : queen_error_class_of(r->category)->wire_reason);
    }
    assert_null(queen_reason_find("log_not_registered"));
    queen_error err;
    queen_error_from_fields(&err, "22023", "log_not_registered", "d");
    assert_string_equal(err.reason, "bad_request");
    /* The registry's SQLSTATE is part of the match: 55000 without our id
     * is PostgreSQL's, internal. */
    assert_int_equal(error_category_of("22023", "log_duplicate"), QUEEN_ERR_BAD_REQUEST);
}

/* One registry: whether a transaction failure says "retryable" is exactly
 * whether its category is retryable, for every SQLSTATE class. */
static void retry_advice_is_one_rule(void **state)
{
    (void)state;
    static const char *const states[] = {"22023", "22001", "23514", "40001", "40P01", "08006", "53300",
                                         "57014", "58030", "42883", "XX000", "23505", "55000", ""};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        queen_error err;
        queen_error_from_fields(&err, states[i][0] ? states[i] : NULL, "m", "d");
        char *body = wire_failure_body("11111111-2222-4333-8444-555555555555", &err, 0);
        assert_non_null(body);
        bool says = strstr(body, "\"retryable\":true") != NULL;
        if (says != queen_error_class_of(err.category)->retryable)
            fail_msg("%s: body %s, registry says %d", states[i], body, queen_error_class_of(err.category)->retryable);
        if ((err.retry_after_s > 0) != queen_error_class_of(err.category)->retryable)
            fail_msg("%s: retry_after_s %d", states[i], err.retry_after_s);
        free(body);
    }
    /* Every category has a row: a wire reason and a generic reason (its
     * HTTP presentation is the server's table: test_http_guards.c). */
    for (int c = QUEEN_OK; c <= QUEEN_ERR_OUTCOME_UNKNOWN; c++) {
        const queen_error_class *k = queen_error_class_of((queen_error_category)c);
        assert_non_null(k->wire_reason);
        assert_non_null(k->reason);
    }
    /* The per-tenant limits are limit_exceeded, not a size (54000 otherwise). */
    assert_int_equal(error_category_of("54000", "tenant_queue_limit"), QUEEN_ERR_LIMIT_EXCEEDED);
    assert_int_equal(error_category_of("54000", "tenant_partition_limit"), QUEEN_ERR_LIMIT_EXCEEDED);
    assert_int_equal(error_category_of("54000", "tenant_trace_limit"), QUEEN_ERR_LIMIT_EXCEEDED);
    assert_int_equal(error_category_of("54000", NULL), QUEEN_ERR_TOO_LARGE);
    assert_string_equal(queen_error_class_of(QUEEN_ERR_OUTCOME_UNKNOWN)->reason, "db_outcome_unknown");
    assert_false(queen_error_class_of(QUEEN_ERR_OUTCOME_UNKNOWN)->retryable);
}

static void precondition_detail_is_parsed_exactly(void **state)
{
    (void)state;
    queen_error err;
    /* As PostgreSQL renders jsonb: keys by length then bytes. */
    queen_error_from_fields(&err, "23514", "kv_precondition_failed",
                            "{\"ns\": \"orders\", \"op\": \"put\", \"key\": \"done:\\\"7\\\"\", \"index\": 3, "
                            "\"value\": {\"n\": 12345678901234567890123, \"x\": 0.1, \"s\": \"}]\"}, "
                            "\"reason\": \"exists\", \"version\": 9007199254740993}");
    assert_int_equal(err.category, QUEEN_ERR_PRECONDITION);
    assert_string_equal(err.sqlstate, "23514");
    assert_string_equal(err.reason, "kv_precondition_failed");
    assert_int_equal(err.precondition.index, 3);
    assert_string_equal(err.precondition.op, "put");
    assert_string_equal(err.precondition.ns, "orders");
    assert_string_equal(err.precondition.key, "done:\"7\"");
    assert_string_equal(err.precondition.reason, "exists");
    assert_true(err.precondition.version == 9007199254740993LL);
    assert_string_equal(err.precondition.value, "{\"n\": 12345678901234567890123, \"x\": 0.1, \"s\": \"}]\"}");

    queen_error_from_fields(&err, "23514", "kv_precondition_failed",
                            "{\"ns\": \"a\", \"op\": \"delete\", \"key\": \"k\", \"index\": 0, \"value\": null, "
                            "\"reason\": \"absent\", \"version\": 0}");
    assert_string_equal(err.precondition.value, "null");
    assert_int_equal(err.precondition.version, 0);

    /* A DETAIL that is not JSON still gives a usable error. */
    queen_error_from_fields(&err, "23514", "kv_precondition_failed", "garbage");
    assert_int_equal(err.category, QUEEN_ERR_PRECONDITION);
    assert_int_equal(err.precondition.index, -1);
    assert_string_equal(err.precondition.value, "null");
    assert_string_equal(err.detail, "garbage");

    /* Other errors leave precondition zeroed. */
    queen_error_from_fields(&err, "22023", "kv_bad_namespace", "namespace 'X' must match");
    assert_int_equal(err.category, QUEEN_ERR_BAD_REQUEST);
    assert_string_equal(err.reason, "kv_bad_namespace");
    assert_string_equal(err.precondition.op, "");
}

static rawjson_shape measure(const char *text, size_t max_values, size_t max_depth)
{
    return rawjson_measure((rawjson_span){text, strlen(text)}, max_values, max_depth);
}

/* The body shape counts every scalar, string, member name and container
 * once; brackets, commas and escaped quotes inside strings are text. */
static void raw_shape_counts_values_and_depth(void **state)
{
    (void)state;
    /* {}, "a", [], 1, true, -2.5e3, {}, "b", the string, "c", null */
    rawjson_shape s = measure(" {\"a\" : [1, true, -2.5e3, {\"b\": \"]\\\"[{,\"}], \"c\":null} ", 100, 100);
    assert_int_equal(s.values, 11);
    assert_int_equal(s.depth, 3);
    s = measure("[[[[]]]]", 100, 100);
    assert_int_equal(s.values, 4);
    assert_int_equal(s.depth, 4);
    s = measure("\"[[[\\\\\"", 100, 100); /* a string ending in an escaped backslash */
    assert_int_equal(s.values, 1);
    assert_int_equal(s.depth, 0);
    s = measure("", 100, 100);
    assert_int_equal(s.values, 0);
    /* The pass stops just past a limit: cheap whatever follows. */
    s = measure("[{},{},{},{},{},{},{},{}]", 3, 100);
    assert_int_equal(s.values, 4);
    s = measure("[[[[[[[[[[", 100, 2);
    assert_int_equal(s.depth, 3);
    /* Malformed text is counted as far as it goes, never past the span. */
    s = measure("]]]\"unterminated [[[", 100, 100);
    assert_int_equal(s.values, 1);
    assert_int_equal(s.depth, 0);
    s = (rawjson_measure((rawjson_span){"[1,2]xxxx", 5}, 100, 100));
    assert_int_equal(s.values, 3);
}

static void raw_member_scanner(void **state)
{
    (void)state;
    const char *text = " { \"a\" : [1, {\"b\": \"]\"}], \"value\" : -1.5e3 , \"z\": \"q\\\"\" }";
    rawjson_span t = {text, strlen(text)}, v;
    assert_true(rawjson_member(t, "value", &v));
    assert_int_equal(v.len, 6);
    assert_memory_equal(v.p, "-1.5e3", 6);
    assert_true(rawjson_member(t, "a", &v));
    assert_int_equal(v.len, strlen("[1, {\"b\": \"]\"}]"));
    assert_true(rawjson_member(t, "z", &v));
    assert_memory_equal(v.p, "\"q\\\"\"", v.len);
    assert_false(rawjson_member(t, "b", &v)); /* nested members are not top level */
    assert_false(rawjson_member((rawjson_span){"[1,2]", 5}, "a", &v));
    assert_false(rawjson_member((rawjson_span){"{\"a\": \"unterminated", 18}, "a", &v));
    assert_false(rawjson_member((rawjson_span){"", 0}, "a", &v));

    /* Decoded sizes of string tokens, as SQL's octet_length sees them. */
    size_t bytes;
    bool nul;
    assert_true(rawjson_string_info((rawjson_span){"\"ab\"", 4}, &bytes, &nul));
    assert_int_equal(bytes, 2);
    assert_false(nul);
    const char *esc = "\"\\u00e9\\n\\ud83d\\ude00x\\u0000\"";
    assert_true(rawjson_string_info((rawjson_span){esc, strlen(esc)}, &bytes, &nul));
    assert_int_equal(bytes, 2 + 1 + 4 + 1 + 1);
    assert_true(nul);
    assert_false(rawjson_string_info((rawjson_span){"12", 2}, &bytes, &nul));
    assert_int_equal(rawjson_array_count((rawjson_span){"[1,[2,3],{}]", 12}), 3);
    assert_int_equal(rawjson_array_count((rawjson_span){"[]", 2}), 0);
    assert_int_equal(rawjson_array_count((rawjson_span){"{}", 2}), -1);
}

static void wire_preflight_table(void **state)
{
    (void)state;
    const kv_limits lim = {.max_ops = 64, .max_keys = 256, .max_value_bytes = 65536, .max_key_bytes = 512, .page_default = 100, .page_max = 1000,
                           .in_wire = true};
    char many[8192], keys[8192];
    int off = snprintf(many, sizeof many, "{\"kv\":[");
    for (int i = 0; i < 65; i++)
        off += snprintf(many + off, sizeof many - (size_t)off, "%s{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k%d\"}",
                        i ? "," : "", i);
    snprintf(many + off, sizeof many - (size_t)off, "]}");
    off = snprintf(keys, sizeof keys, "{\"kv\":[{\"op\":\"getMany\",\"ns\":\"a\",\"keys\":[");
    for (int i = 0; i < 257; i++)
        off += snprintf(keys + off, sizeof keys - (size_t)off, "%s\"k%d\"", i ? "," : "", i);
    snprintf(keys + off, sizeof keys - (size_t)off, "]}]}");

    static const struct {
        const char *body, *reason;
    } refused[] = {
        {"", "bad_body"},
        {"{\"kv\": [", "bad_body"},
        {"[1]", "log_bad_request"},
        {"{\"kv\":[],\"extra\":1}", "log_bad_request"},
        {"{\"kv\":[],\"requiredLeases\":{}}", "log_bad_lease_id"},
        {"{\"kv\":{},\"requiredLeases\":{}}", "log_bad_request"}, /* SQL's order: kv before leases */
        {"{\"operations\":[{\"type\":\"pop\"}]}", "log_bad_operation"},
        {"{\"operations\":[1]}", "log_bad_operation"},
        {"{\"a\":1,\"a\":2,\"kv\":[]}", "bad_body"}, /* duplicate keys */
        {"{\"tenant\":\"00000000-0000-0000-0000-000000000002\",\"kv\":[{}]}", "tenant_not_an_input"},
        {"{\"tenantId\":\"x\",\"operations\":[]}", "tenant_not_an_input"},
        {"{}", "log_bad_request"},
        {"{\"operations\":null}", "log_bad_request"},
        {"{\"operations\":{}}", "log_bad_request"},
        {"{\"operations\":[{\"type\":\"kv\",\"op\":\"get\"}]}", "log_kv_in_operations"},
        {"{\"kv\":{}}", "log_bad_request"},
        {"{\"kv\":[1]}", "kv_bad_request"},
        {"{\"kv\":[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\",\"tenant\":\"x\"}]}", "kv_tenant_not_an_input"},
        {"{\"kv\":[{\"op\":\"getPrefix\",\"ns\":\"a\",\"prefix\":\"k\"}]}",
         "kv_get_prefix_not_allowed_in_transaction"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        wire_plan plan;
        queen_error err;
        if (wire_preflight(refused[i].body, &lim, &plan, &err) != -1)
            fail_msg("case %zu accepted: %s", i, refused[i].body);
        assert_int_equal(err.category, QUEEN_ERR_BAD_REQUEST);
        if (strcmp(err.reason, refused[i].reason) != 0)
            fail_msg("case %zu: reason %s, expected %s", i, err.reason, refused[i].reason);
    }
    wire_plan plan;
    queen_error err;
    assert_int_equal(wire_preflight(many, &lim, &plan, &err), -1);
    assert_string_equal(err.reason, "kv_too_many_ops");
    assert_int_equal(wire_preflight(keys, &lim, &plan, &err), -1);
    assert_string_equal(err.reason, "kv_too_many_keys");

    /* Accepted, with the plan the engine needs. */
    assert_int_equal(wire_preflight("{\"kv\":[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\"}]}", &lim, &plan, &err), 0);
    assert_true(plan.kv_only);
    assert_int_equal(plan.flat_before_kv, 0);
    assert_int_equal(wire_preflight("{\"operations\":[],\"requiredLeases\":[],\"kv\":[{\"op\":\"get\"}]}", &lim, &plan,
                                    &err),
                     0);
    assert_true(plan.kv_only);
    assert_int_equal(wire_preflight("{\"requiredLeases\":[\"x\"],\"kv\":[{\"op\":\"get\"}]}", &lim, &plan, &err), 0);
    assert_false(plan.kv_only);
    assert_int_equal(wire_preflight("{\"operations\":[{\"type\":\"ack\"},{\"type\":\"push\",\"items\":[{},{}]}],"
                                    "\"kv\":[{\"op\":\"put\",\"value\":123456789012345678901234567890}]}", &lim, &plan, &err),
                     0);
    assert_false(plan.kv_only);
    assert_int_equal(plan.flat_before_kv, 3);
    assert_int_equal(plan.kv_ops, 1);
    assert_int_equal(wire_preflight("{\"operations\":[]}", &lim, &plan, &err), 0);
    assert_false(plan.kv_only);
    /* null is absent, as SQL reads it: one rule for every caller. */
    assert_int_equal(wire_preflight("{\"operations\":[],\"kv\":null}", &lim, &plan, &err), 0);
    assert_int_equal(wire_preflight("{\"kv\":[{\"op\":\"put\",\"value\":[1,2]},{\"op\":\"get\"}]}", &lim, &plan, &err), 0);
    assert_int_equal(plan.kv_demand.writes, 1);
    assert_int_equal(plan.kv_demand.reads, 1);
    assert_int_equal(plan.kv_demand.creating, 1);
    assert_int_equal(plan.kv_demand.bytes, 5);
}

static void wire_failure_reasons_follow_the_table(void **state)
{
    (void)state;
    static const struct {
        const char *state, *message, *reason;
        bool retry;
    } cases[] = {
        {"22023", "log_bad_queue", "bad_request", false},
        {"22023", "kv_bad_namespace", "bad_request", false},
        {"22P02", "invalid input syntax", "bad_request", false},
        {"22001", "kv_value_too_large", "payload_too_large", false},
        {"54000", "total size of jsonb array elements exceeds", "payload_too_large", false},
        {"23505", "log_duplicate", "duplicate", false},
        {"23505", "some_other_unique", "db_error", false},
        {"55000", "log_ack_rejected", "ack_rejected", false},
        {"23514", "kv_precondition_failed", "kv_precondition", false},
        {"XX000", "log_result_misaligned", "misaligned", false},
        {"XX000", "kv_result_misaligned", "misaligned", false},
        {"XX000", "something else", "db_error", false},
        {"40001", "could not serialize", "db_error", true},
        {"40P01", "deadlock detected", "db_error", true},
        {"57014", "canceling statement due to statement timeout", "db_error", true},
        {"08006", "connection failure", "db_error", true},
        {"58030", "could not write", "db_error", true},
        {"42883", "function does not exist", "db_error", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        queen_error err;
        queen_error_from_fields(&err, cases[i].state, cases[i].message, NULL);
        const char *r = error_wire_reason(&err);
        bool retry = queen_error_class_of(err.category)->retryable;
        if (strcmp(r, cases[i].reason) != 0 || retry != cases[i].retry)
            fail_msg("%s %s -> %s/%d, expected %s/%d", cases[i].state, cases[i].message, r, retry, cases[i].reason,
                     cases[i].retry);
    }
}

static void failure_body_carries_the_precondition_exactly(void **state)
{
    (void)state;
    queen_error err;
    queen_error_from_fields(&err, "23514", "kv_precondition_failed",
                            "{\"ns\": \"m\", \"op\": \"put\", \"key\": \"done:1\", \"index\": 1, \"value\": "
                            "{\"big\": 12345678901234567890123, \"x\": 0.1}, \"reason\": \"exists\", \"version\": 42}");
    char *body = wire_failure_body("11111111-2222-4333-8444-555555555555", &err, 3);
    assert_non_null(body);
    assert_non_null(strstr(body, "\"value\":{\"big\": 12345678901234567890123, \"x\": 0.1}"));
    json_t *o = json_loads(body, JSON_DECODE_INT_AS_REAL, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "transactionId")), "11111111-2222-4333-8444-555555555555");
    assert_true(json_is_false(json_object_get(o, "success")));
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "kv_precondition");
    assert_string_equal(json_string_value(json_object_get(o, "error")), "kv_precondition_failed");
    assert_int_equal(json_array_size(json_object_get(o, "results")), 0);
    assert_true(json_is_array(json_object_get(o, "results")));
    assert_int_equal((int)json_number_value(json_object_get(o, "failedIndex")), 4);
    assert_string_equal(json_string_value(json_object_get(o, "kvReason")), "exists");
    assert_int_equal((int)json_number_value(json_object_get(o, "version")), 42);
    json_decref(o);
    free(body);

    /* Over the DETAIL cap, SQL drops the value and says so with its size;
     * so does the body, and never as a null value. */
    queen_error_from_fields(&err, "23514", "kv_precondition_failed",
                            "{\"ns\": \"m\", \"op\": \"put\", \"key\": \"k\", \"index\": 0, \"value\": null, "
                            "\"reason\": \"version\", \"version\": 5, \"valueOmitted\": true, \"valueBytes\": 5000}");
    body = wire_failure_body("11111111-2222-4333-8444-555555555555", &err, 0);
    o = json_loads(body, 0, NULL);
    assert_true(json_is_true(json_object_get(o, "valueOmitted")));
    assert_int_equal(json_integer_value(json_object_get(o, "valueBytes")), 5000);
    assert_null(json_object_get(o, "value"));
    assert_int_equal(json_integer_value(json_object_get(o, "failedIndex")), 0);
    json_decref(o);
    free(body);

    queen_error_from_fields(&err, "23505", "log_duplicate",
                            "{\"index\": 0, \"queue\": \"q\", \"opIndex\": 0, \"itemIndex\": 0, "
                            "\"messageId\": \"m\", \"partition\": \"Default\", \"transactionId\": \"t\"}");
    body = wire_failure_body("11111111-2222-4333-8444-555555555555", &err, 0);
    o = json_loads(body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "duplicate");
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "detail"), "transactionId")), "t");
    assert_null(json_object_get(o, "retryable"));
    json_decref(o);
    free(body);

    queen_error_from_fields(&err, "40P01", "deadlock detected", "Process 1 waits for ...");
    body = wire_failure_body("11111111-2222-4333-8444-555555555555", &err, 0);
    o = json_loads(body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "db_error");
    assert_string_equal(json_string_value(json_object_get(o, "error")), "db_unavailable");
    assert_true(json_is_true(json_object_get(o, "retryable")));
    assert_string_equal(json_string_value(json_object_get(o, "detail")), "deadlock detected: Process 1 waits for ...");
    json_decref(o);
    free(body);
}

static void uuids_are_v4_and_distinct(void **state)
{
    (void)state;
    char a[37], b[37];
    wire_uuid4(a);
    wire_uuid4(b);
    char canon[QUEEN_TENANT_LEN + 1];
    assert_int_equal(queen_tenant_canonical(a, canon), 0);
    assert_string_equal(canon, a); /* already lower-case */
    assert_int_equal(queen_tenant_canonical(b, canon), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(a[14], '4');
    assert_non_null(strchr("89ab", a[19]));
}

static void notify_payload_split(void **state)
{
    (void)state;
    char tenant[37];
    const char *queue;
    assert_true(notify_split_payload("00000000-0000-0000-0000-000000000001:orders:eu", tenant, &queue));
    assert_string_equal(tenant, "00000000-0000-0000-0000-000000000001");
    assert_string_equal(queue, "orders:eu"); /* split at the first ':' after the tenant */
    assert_false(notify_split_payload("short:q", tenant, &queue));
    assert_false(notify_split_payload("00000000-0000-0000-0000-000000000001:", tenant, &queue));
    assert_false(notify_split_payload("00000000-0000-0000-0000-000000000001-q", tenant, &queue));
    assert_false(notify_split_payload(NULL, tenant, &queue));
}

static void sweeper_rotates_over_all_shards(void **state)
{
    (void)state;
    int first_group_start[SWEEP_SHARDS / SWEEP_GROUP];
    for (unsigned long cycle = 0; cycle < SWEEP_SHARDS / SWEEP_GROUP; cycle++) {
        short order[SWEEP_SHARDS];
        sweeper_shard_order(cycle, order);
        int seen[SWEEP_SHARDS] = {0};
        for (int i = 0; i < SWEEP_SHARDS; i++) {
            assert_true(order[i] >= 0 && order[i] < SWEEP_SHARDS);
            seen[order[i]]++;
        }
        for (int i = 0; i < SWEEP_SHARDS; i++)
            assert_int_equal(seen[i], 1); /* every shard, once */
        first_group_start[cycle] = order[0];
    }
    /* Each cycle starts at a different group, so a per-cycle row cap never
     * starves the same shards twice in a row. */
    for (int i = 0; i < SWEEP_SHARDS / SWEEP_GROUP; i++)
        for (int j = i + 1; j < SWEEP_SHARDS / SWEEP_GROUP; j++)
            assert_int_not_equal(first_group_start[i], first_group_start[j]);
}

/* The call table (calls.c): every row names a statement and carries as
 * many argument kinds as its SQL text has parameters after the tenant
 * (each $1..$N used), a tenant row's $1 is the uuid, and arguments that do
 * not match a row are refused before anything is entered or sent. */
static void call_table_rows_match_their_sql(void **state)
{
    (void)state;
    for (int id = 0; id < ENGINE_CALL_COUNT; id++) {
        const engine_call_row *r = &engine_calls[id];
        if (r->name == NULL || r->sql == NULL || r->args == NULL)
            fail_msg("call %d has no row", id);
        if (strspn(r->args, "sjzpnib") != strlen(r->args))
            fail_msg("%s: unknown argument kind in '%s'", r->name, r->args);
        bool tenanted = (r->flags & ENGINE_CALL_TENANT) != 0;
        int want = (int)strlen(r->args) + (tenanted ? 1 : 0), highest = 0;
        for (const char *p = strchr(r->sql, '$'); p != NULL; p = strchr(p + 1, '$')) {
            int n = atoi(p + 1);
            if (n > highest)
                highest = n;
        }
        for (int n = 1; n <= want; n++) {
            char ref[16];
            snprintf(ref, sizeof ref, "$%d", n);
            if (strstr(r->sql, ref) == NULL)
                fail_msg("%s: %s unused", r->name, ref);
        }
        if (highest != want)
            fail_msg("%s: SQL uses $%d, the row gives %d parameters", r->name, highest, want);
        if (tenanted && strstr(r->sql, "($1::uuid") == NULL && strstr(r->sql, "[$1::uuid]") == NULL)
            fail_msg("%s: a tenant row's $1 is not the tenant uuid", r->name);
        for (int other = 0; other < id; other++)
            if (strcmp(engine_calls[other].name, r->name) == 0)
                fail_msg("%s: two rows share a statement name", r->name);
    }
    char *out = (char *)"untouched";
    queen_error err;
    /* One argument short, then a number where text belongs. */
    assert_int_equal(engine_call(NULL, CALL_LABELS, NULL, ENGINE_NO_ARGS, &out, &err), -1);
    assert_null(out);
    assert_int_equal(err.category, QUEEN_ERR_INTERNAL);
    assert_string_equal(err.reason, "call_mismatch");
    assert_int_equal(engine_call(NULL, CALL_LABELS, NULL, ENGINE_ARGS(ENGINE_N(3)), &out, &err), -1);
    assert_string_equal(err.reason, "call_mismatch");
    assert_int_equal(engine_call(NULL, CALL_TRACE_NAMES, NULL, ENGINE_ARGS(ENGINE_S("3")), &out, &err), -1);
    assert_string_equal(err.reason, "call_mismatch");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sqlstates_map_to_categories),
        cmocka_unit_test(foreign_messages_never_become_reasons),
        cmocka_unit_test(registered_reasons_decide_their_category),
        cmocka_unit_test(retry_advice_is_one_rule),
        cmocka_unit_test(precondition_detail_is_parsed_exactly),
        cmocka_unit_test(raw_shape_counts_values_and_depth),
        cmocka_unit_test(raw_member_scanner),
        cmocka_unit_test(wire_preflight_table),
        cmocka_unit_test(wire_failure_reasons_follow_the_table),
        cmocka_unit_test(failure_body_carries_the_precondition_exactly),
        cmocka_unit_test(uuids_are_v4_and_distinct),
        cmocka_unit_test(notify_payload_split),
        cmocka_unit_test(sweeper_rotates_over_all_shards),
        cmocka_unit_test(call_table_rows_match_their_sql),
    };
    return cmocka_run_group_tests_name("engine_pure", tests, NULL, NULL);
}
