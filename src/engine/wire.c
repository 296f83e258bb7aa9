/* wire: queen_transaction, the bundle of acks + pushes + kv ops committed in
 * ONE PostgreSQL transaction by queen.log_transaction_wire_v1 (or, for a
 * kv-only bundle, by kv_apply_v1(..., true) directly). Bundles made together
 * may share that transaction (wire_group below, sql/log_wire_group.sql): each is then its
 * own subtransaction and answers what it would have answered alone.
 *
 * Owns the pre-flight refusals (400 before a connection is taken), the
 * mapping of the wire's errors to the 200 failure body, and the bundle's
 * transaction id on failure. Must never re-serialize the bundle (jansson
 * only inspects it: numbers in payloads and values go to PostgreSQL as the
 * caller wrote them), never build SQL against a table, never decide a lock
 * order (SQL does). */
#include "wire.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "admit.h"
#include "engine.h"

/* The bundle goes in as the caller's text, so nothing in it is re-encoded
 * on the way; the tenant is an argument of its own, as in every log call. */
#define SQL_WIRE_CALL "SELECT queen.log_transaction_wire_v1($2::uuid, $1::jsonb)::text"
/* Transaction-local settings made in a materialized CTE, which runs before
 * the wire: its pushes' NOTIFY deferred past the commit (engine.h) and the
 * pushes stamped with the producer of a verified token (sql/log_producer.sql; '' is none,
 * so bundles with and without a producer are one statement and share a
 * group). */
#define SQL_WIRE                                                                                                       \
    "WITH settings AS MATERIALIZED (SELECT set_config('queen.producer', COALESCE($3, ''), true), "                    \
    ENGINE_SQL_DEFER_NOTIFY ") " SQL_WIRE_CALL " FROM settings"

/* Bundles made together commit as one group (sql/log_wire_group.sql,
 * log_transaction_wire_group_v1): one statement, one transaction and one WAL
 * flush, each bundle a subtransaction of it that calls the same
 * log_transaction_wire_v1, so a bundle whose precondition fails, whose ack
 * is rejected or whose push is a duplicate rolls back alone and comes back
 * as a row with its error, answered with the same failure body; the others
 * commit. A group that fails anyway (a lock waited past its lock_timeout, a
 * partition vanished) runs every member alone (pipeline.c). At most 32
 * members: each is a subtransaction, and PostgreSQL caches 64 of them per
 * transaction (sql/log_wire_group.sql). Only an event loop's executor groups (sqlcall.h):
 * an embedded call on the pool runs alone. A bundle does not wait for a
 * group in flight while a connection is free (waits_for_group false, unlike
 * pushes and kv writes): groups stay small (2 at 4 consumers, 4 at 16),
 * each member's own rules are most of its cost, and waiting made the
 * 4-consumer wire slower in most measured rounds. Measured: bench/RESULTS.md
 * ("Bundles that share commits"). */
static const sql_coalesce wire_group = {
    .name = "queen_wire_group",
    .sql = "SELECT g.result, g.err_state, g.err_message, g.err_detail "
           "FROM queen.log_transaction_wire_group_v1($1::jsonb, $2::jsonb, $3::jsonb, true) AS g ORDER BY g.n",
    .param_kinds = "jss",
    .max_calls = 32,
    .waits_for_group = false,
};

/* Bundles larger than this go alone: a group carrying one would hold the
 * small bundles beside it for as long as it takes to apply. */
#define WIRE_GROUP_MAX_BYTES (64 * 1024)

/* A kv-only bundle: one kv_apply_v1(..., true) call, its elements given the
 * wire's shape (type "kv", flat index = opIndex since nothing precedes). */
#define SQL_KV_ONLY                                                                                                    \
    "SELECT jsonb_build_object('transactionId', gen_random_uuid(), 'success', true, 'results', "                      \
    "COALESCE((SELECT jsonb_agg(t.e || jsonb_build_object('type', 'kv', 'index', t.o - 1, 'opIndex', t.o - 1) "       \
    "ORDER BY t.o) FROM jsonb_array_elements(queen.kv_apply_v1($1::jsonb -> 'kv', $2::uuid, now(), true)) "           \
    "WITH ORDINALITY AS t(e, o)), '[]'::jsonb))::text"

void wire_uuid4(char out[37])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof b) {
        /* getrandom cannot fail once the pool is initialised; this is the
         * can't-happen branch, still unique enough for an error id. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20);
        for (size_t i = got; i < sizeof b; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            b[i] = (unsigned char)(x >> 56);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int refuse(queen_error *err, const char *reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(queen_error *err, const char *reason, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    queen_error_set(err, QUEEN_ERR_BAD_REQUEST, reason, "%s", detail);
    return -1;
}

/* absent or JSON null: SQL reads both as "not given" */
static bool absent(json_t *v)
{
    return v == NULL || json_is_null(v);
}

static int check_operations(json_t *ops, wire_plan *plan, queen_error *err)
{
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op)
    {
        const char *type = json_string_value(json_object_get(op, "type"));
        if (type != NULL && strcmp(type, "kv") == 0)
            return refuse(err, "log_kv_in_operations", "operations[%zu] has type kv; kv ops go in the top-level kv array",
                          i);
        if (!json_is_object(op) || type == NULL || (strcmp(type, "ack") != 0 && strcmp(type, "push") != 0))
            return refuse(err, "log_bad_operation", "operations[%zu] must be an object of type ack or push", i);
        plan->flat_before_kv += strcmp(type, "push") == 0 ? (int)json_array_size(json_object_get(op, "items")) : 1;
        plan->has_push |= strcmp(type, "push") == 0;
    }
    return 0;
}

int wire_preflight(const char *bundle_json, const kv_limits *lim, wire_plan *plan, queen_error *err)
{
    static const char *const tenant_fields[] = QUEEN_TENANT_FIELDS;
    memset(plan, 0, sizeof *plan);
    if (bundle_json == NULL)
        return refuse(err, "bad_body", "the bundle is NULL");
    json_error_t jerr;
    /* INT_AS_REAL: a 30-digit integer in a payload is valid JSON that
     * jansson would refuse as an integer; only shapes are inspected here. */
    /* ALLOW_NUL: a \u0000 in a key is the kv guard's kv_bad_key, not a
     * syntax error. */
    json_t *root = json_loads(bundle_json, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &jerr);
    if (root == NULL)
        return refuse(err, "bad_body", "%s at line %d, column %d", jerr.text, jerr.line, jerr.column);
    int rc = -1;
    json_t *ops = json_object_get(root, "operations"), *kv = json_object_get(root, "kv");
    json_t *leases = json_object_get(root, "requiredLeases");
    const char *name;
    json_t *member;
    if (!json_is_object(root)) {
        refuse(err, "log_bad_request", "the bundle must be a JSON object");
        goto out;
    }
    for (size_t t = 0; t < sizeof tenant_fields / sizeof tenant_fields[0]; t++)
        if (json_object_get(root, tenant_fields[t]) != NULL) {
            refuse(err, "tenant_not_an_input", "the tenant comes from the caller, never from the bundle");
            goto out;
        }
    json_object_foreach(root, name, member)
    {
        if (strcmp(name, "operations") != 0 && strcmp(name, "requiredLeases") != 0 && strcmp(name, "kv") != 0) {
            refuse(err, "log_bad_request", "unknown field \"%.64s\"; a bundle has operations, requiredLeases and kv",
                   name);
            goto out;
        }
    }
    /* The reasons and their order are log_transaction_wire_v1's
     * (sql/log_transaction_wire.sql), so a bundle is refused alike here and
     * there. */
    if (!absent(ops) && !json_is_array(ops))
        refuse(err, "log_bad_request", "operations must be an array");
    else if (!absent(kv) && !json_is_array(kv))
        refuse(err, "log_bad_request", "kv must be an array");
    else if (!absent(leases) && !json_is_array(leases))
        refuse(err, "log_bad_lease_id", "requiredLeases must be an array of uuid strings");
    else if (absent(ops) && absent(kv))
        refuse(err, "log_bad_request", "a bundle needs operations, kv or both");
    else if (check_operations(ops, plan, err) == 0) {
        rawjson_span raw = {NULL, 0};
        rc = 0;
        if (!absent(kv)) {
            /* The kv array's text as the caller wrote it: jansson's tree
             * would have turned its numbers into doubles. */
            if (!rawjson_member(rawjson_trim((rawjson_span){bundle_json, strlen(bundle_json)}), "kv", &raw))
                rc = refuse(err, "log_bad_request", "kv must be an array");
            else
                rc = kv_guard_ops(raw, lim, &plan->kv_demand, err);
        }
        plan->kv_ops = (int)json_array_size(kv);
        plan->kv_only = rc == 0 && json_array_size(ops) == 0 && plan->kv_ops > 0 && json_array_size(leases) == 0;
    }
out:
    json_decref(root);
    return rc;
}

char *wire_failure_body(const char *txid, const queen_error *err, int flat_before_kv)
{
    const char *reason = error_wire_reason(err);
    json_t *o = json_object();
    json_object_set_new(o, "transactionId", json_string(txid));
    json_object_set_new(o, "success", json_false());
    json_object_set_new(o, "reason", json_string(reason));
    json_t *e = json_string(err->reason);
    json_object_set_new(o, "error", e ? e : json_string("db_error"));
    json_object_set_new(o, "results", json_array());
    if (queen_error_class_of(err->category)->retryable)
        json_object_set_new(o, "retryable", json_true());

    if (err->category == QUEEN_ERR_PRECONDITION) {
        char *head = json_dumps(o, JSON_COMPACT | JSON_EMBED);
        char *members = queen_error_precondition_json(err, flat_before_kv);
        json_decref(o);
        char *body = NULL;
        if (head == NULL || members == NULL || asprintf(&body, "{%s,%s}", head, members) < 0)
            body = NULL;
        free(head);
        free(members);
        return body;
    }
    json_t *detail = NULL;
    if (err->category == QUEEN_ERR_CONFLICT)
        detail = json_loads(err->detail, JSON_DECODE_INT_AS_REAL, NULL); /* ids and indexes only */
    if (detail == NULL)
        detail = json_string(err->detail);
    if (detail != NULL)
        json_object_set_new(o, "detail", detail);
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return body;
}

static void count(queen *q, int slot)
{
    atomic_fetch_add(&q->counters.txn[slot], 1);
}

/* A bundle's push into a queue with encryptionEnabled: refused, since the
 * bundle's payloads reach SQL as sent (400 log_encrypted_queue_in_transaction;
 * such a queue takes pushes through queen_push), and 503
 * encryption_key_missing on a broker without a key, as a push there is:
 * nothing of an encrypted queue is ever stored in plaintext. */
static int refuse_encrypted_pushes(queen *q, const char *tenant, const char *bundle_json, queen_error *err)
{
    json_t *doc = json_loads(bundle_json, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
    json_t *queues = json_array();
    size_t i, j;
    json_t *op, *item;
    json_array_foreach(json_object_get(doc, "operations"), i, op)
    {
        const char *type = json_string_value(json_object_get(op, "type"));
        if (type == NULL || strcmp(type, "push") != 0)
            continue;
        json_array_foreach(json_object_get(op, "items"), j, item)
        {
            json_t *name = json_object_get(item, "queue");
            if (json_is_string(name))
                json_array_append_new(queues, json_pack("{s:O}", "queue", name));
        }
    }
    json_decref(doc);
    char *text = json_dumps(queues, JSON_COMPACT);
    json_decref(queues);
    int rc = text ? engine_refuse_encrypted_items(q, tenant, text, err) : -1;
    if (text == NULL)
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
    free(text);
    return rc;
}

int queen_transaction(queen *q, const char *tenant, const char *bundle_json, char **result_json, queen_error *err)
{
    return queen_transaction_as(q, tenant, NULL, bundle_json, result_json, err);
}

int queen_transaction_as(queen *q, const char *tenant, const char *producer, const char *bundle_json,
                         char **result_json, queen_error *err)
{
    *result_json = NULL;
    queen_error local;
    if (err == NULL)
        err = &local;
    char canon[QUEEN_TENANT_LEN + 1];
    tenant = engine_enter_tenant(q, tenant, canon, err);
    if (tenant == NULL) {
        if (q != NULL && err->category == QUEEN_ERR_BAD_REQUEST)
            count(q, TXN_REFUSED);
        return -1;
    }
    wire_plan plan;
    kv_limits lim = kv_limits_from(&q->cfg, true);
    if (wire_preflight(bundle_json, &lim, &plan, err) != 0) {
        count(q, TXN_REFUSED);
        engine_leave(q);
        return -1;
    }
    if (plan.has_push && engine_refuse_push_in_maintenance(q, err) != 0) {
        count(q, TXN_UNAVAILABLE);
        engine_leave(q);
        return -1;
    }
    if (plan.has_push && refuse_encrypted_pushes(q, tenant, bundle_json, err) != 0) {
        count(q, err->category == QUEEN_ERR_BAD_REQUEST ? TXN_REFUSED : TXN_UNAVAILABLE);
        engine_leave(q);
        return -1;
    }
    /* Quota and rate for the kv part, before the bundle takes a connection;
     * the log part is not metered. */
    if (engine_kv_admit(q, tenant, plan.kv_demand, err) != 0) {
        count(q, TXN_REFUSED);
        engine_leave(q);
        return -1;
    }
    int rc = -1;
    const char *params[] = {bundle_json, tenant, producer != NULL && producer[0] != '\0' ? producer : NULL};
    bool lost = false;
    /* A kv-only bundle keeps its own statement and goes alone: it takes no
     * log lock and its one kv_apply_v1 costs less than the wire's start-up. */
    PGresult *res = plan.kv_only ? sql_exec(q->pool, "queen_wire_kv_only", SQL_KV_ONLY, 2, params, &lost, err)
                                 : sql_exec_coalesced(q->pool, "queen_wire", SQL_WIRE, 3, params,
                                                      strlen(bundle_json) <= WIRE_GROUP_MAX_BYTES ? &wire_group : NULL,
                                                      &lost, err);
    if (res == NULL) {
        count(q, TXN_UNAVAILABLE);
        engine_leave(q);
        return -1;
    }
    /* A member of a group: its row's error columns hold what its own call
     * would have raised; read as that error, answered the same way. */
    bool refused = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) >= 4 &&
                   !PQgetisnull(res, 0, 1);
    if (refused) {
        queen_error_from_fields(err, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
                                PQgetisnull(res, 0, 3) ? NULL : PQgetvalue(res, 0, 3));
        lost = false;
    }
    if (!refused && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        *result_json = strdup(PQgetvalue(res, 0, 0));
        if (*result_json != NULL) {
            rc = 0;
            count(q, TXN_SUCCESS);
            if (plan.has_push)
                engine_notify_pushed(q, tenant, *result_json);
        } else {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        }
    } else if (!refused && PQresultStatus(res) == PGRES_TUPLES_OK) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "the wire returned no body");
    } else {
        if (!refused)
            queen_error_from_result(err, res);
        if (lost) {
            /* The connection died under the call: whether the transaction
             * committed is unknown, so no failure body may claim it rolled
             * back. The caller retries; a required marker makes that safe. */
            count(q, TXN_UNAVAILABLE);
        } else {
            char txid[37];
            wire_uuid4(txid);
            *result_json = wire_failure_body(txid, err, plan.flat_before_kv);
            if (*result_json != NULL) {
                rc = 0;
                count(q, TXN_FAILED);
            } else {
                queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
            }
        }
    }
    PQclear(res);
    engine_leave(q);
    return rc;
}
