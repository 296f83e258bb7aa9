/* wire: queen_transaction, the bundle of acks + pushes + kv ops committed in
 * ONE PostgreSQL transaction by queen.log_transaction_wire_v1 (or, for a
 * kv-only bundle, by kv_apply_v1(..., true) directly).
 *
 * Owns the pre-flight refusals (400 before a connection is taken), the
 * mapping of the wire's errors to the 200 failure body, and the bundle's
 * transaction id on failure. Must never re-serialize the bundle (jansson
 * only inspects it: numbers in payloads and values go to PostgreSQL as the
 * caller wrote them), never build SQL against a table, never decide a lock
 * order (SQL does). */
#include "wire.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "engine.h"

/* The bundle goes in as the caller's text with the tenant added by
 * PostgreSQL, so nothing in it is re-encoded on the way. */
#define SQL_WIRE "SELECT queen.log_transaction_wire_v1($1::jsonb || jsonb_build_object('tenant', $2::text))::text"

/* A kv-only bundle: one kv_apply_v1(..., true) call, its elements given the
 * wire's shape (type "kv", flat index = opIndex since nothing precedes). */
#define SQL_KV_ONLY                                                                                                    \
    "SELECT jsonb_build_object('transactionId', gen_random_uuid(), 'success', true, 'results', "                      \
    "COALESCE((SELECT jsonb_agg(t.e || jsonb_build_object('type', 'kv', 'index', t.o - 1, 'opIndex', t.o - 1) "       \
    "ORDER BY t.o) FROM jsonb_array_elements(queen.kv_apply_v1($1::jsonb -> 'kv', $2::uuid, now(), true)) "           \
    "WITH ORDINALITY AS t(e, o)), '[]'::jsonb))::text"

bool wire_is_uuid(const char *s)
{
    if (s == NULL || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
        } else if (!isxdigit((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

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

static int refuse(queen_error *err, const char *reason, const char *detail)
{
    queen_error_set(err, QUEEN_ERR_BAD_REQUEST, reason, "%s", detail);
    return -1;
}

static bool has_tenant(json_t *obj)
{
    return json_object_get(obj, "tenant") || json_object_get(obj, "tenantId") || json_object_get(obj, "_tenant");
}

/* absent or JSON null */
static bool absent(json_t *v)
{
    return v == NULL || json_is_null(v);
}

static int check_kv(json_t *kv, wire_plan *plan, queen_error *err)
{
    if (!json_is_array(kv))
        return refuse(err, "kv_bad_request", "kv must be an array of kv ops");
    size_t n = json_array_size(kv), keys = 0;
    if (n > WIRE_MAX_KV_OPS) {
        char d[96];
        snprintf(d, sizeof d, "%zu kv ops in a transaction, the limit is %d", n, WIRE_MAX_KV_OPS);
        return refuse(err, "kv_too_many_ops", d);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *op = json_array_get(kv, i);
        char d[96];
        if (!json_is_object(op)) {
            snprintf(d, sizeof d, "kv[%zu] must be an object", i);
            return refuse(err, "kv_bad_request", d);
        }
        if (has_tenant(op)) {
            snprintf(d, sizeof d, "kv[%zu]: the tenant is not an input", i);
            return refuse(err, "kv_tenant_not_an_input", d);
        }
        const char *name = json_string_value(json_object_get(op, "op"));
        if (name && strcmp(name, "getPrefix") == 0) {
            snprintf(d, sizeof d, "kv[%zu]: getPrefix is not allowed in a transaction", i);
            return refuse(err, "kv_get_prefix_not_allowed_in_transaction", d);
        }
        json_t *ks = json_object_get(op, "keys");
        keys += (name && strcmp(name, "getMany") == 0 && json_is_array(ks)) ? json_array_size(ks) : 1;
    }
    if (keys > WIRE_MAX_KV_KEYS) {
        char d[96];
        snprintf(d, sizeof d, "%zu kv keys in a transaction, the limit is %d", keys, WIRE_MAX_KV_KEYS);
        return refuse(err, "kv_too_many_keys", d);
    }
    plan->kv_ops = (int)n;
    return 0;
}

int wire_preflight(const char *bundle_json, wire_plan *plan, queen_error *err)
{
    memset(plan, 0, sizeof *plan);
    if (bundle_json == NULL)
        return refuse(err, "bad_body", "the bundle is NULL");
    json_error_t jerr;
    /* INT_AS_REAL: a 30-digit integer in a payload is valid JSON that
     * jansson would refuse as an integer; we only inspect shapes here. */
    json_t *root = json_loads(bundle_json, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
    if (root == NULL) {
        char d[256];
        snprintf(d, sizeof d, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return refuse(err, "bad_body", d);
    }
    int rc = -1;
    json_t *ops = json_object_get(root, "operations"), *kv = json_object_get(root, "kv");
    json_t *leases = json_object_get(root, "requiredLeases");
    if (!json_is_object(root)) {
        refuse(err, "bad_body", "the bundle must be a JSON object");
    } else if (has_tenant(root)) {
        refuse(err, "tenant_not_an_input", "the tenant comes from the caller, never from the bundle");
    } else if (absent(ops) && absent(kv)) {
        refuse(err, "log_bad_request", "operations or kv is required");
    } else if (!absent(ops) && !json_is_array(ops)) {
        refuse(err, "log_bad_request", "operations must be an array");
    } else {
        rc = 0;
        for (size_t i = 0; rc == 0 && i < json_array_size(ops); i++) {
            json_t *op = json_array_get(ops, i);
            const char *type = json_string_value(json_object_get(op, "type"));
            if (type && strcmp(type, "kv") == 0) {
                char d[128];
                snprintf(d, sizeof d, "operations[%zu]: kv ops go in the top-level kv array", i);
                rc = refuse(err, "log_kv_in_operations", d);
            } else if (type && strcmp(type, "push") == 0) {
                plan->flat_before_kv += (int)json_array_size(json_object_get(op, "items"));
            } else if (type && strcmp(type, "ack") == 0) {
                plan->flat_before_kv += 1;
            }
        }
        if (rc == 0 && !absent(kv))
            rc = check_kv(kv, plan, err);
        if (rc == 0)
            plan->kv_only = json_array_size(ops) == 0 && plan->kv_ops > 0 &&
                            (absent(leases) || (json_is_array(leases) && json_array_size(leases) == 0));
    }
    json_decref(root);
    return rc;
}

/* (SQLSTATE, message) -> reason, first match wins; message NULL matches
 * any. Class entries are two characters. */
static const struct {
    const char *state, *message, *reason;
} failure_map[] = {
    {"22001", NULL, "payload_too_large"},
    {"54000", NULL, "payload_too_large"},
    {"22", NULL, "bad_request"},
    {"23505", "log_duplicate", "duplicate"},
    {"55000", "log_ack_rejected", "ack_rejected"},
    {"23514", "kv_precondition_failed", "kv_precondition"},
    {"XX000", "log_result_misaligned", "misaligned"},
    {"XX000", "kv_result_misaligned", "misaligned"},
};

const char *wire_failure_reason(const char *sqlstate, const char *message, bool *retryable)
{
    const char *s = sqlstate ? sqlstate : "";
    *retryable = strcmp(s, "40001") == 0 || strcmp(s, "40P01") == 0 || strncmp(s, "08", 2) == 0 ||
                 strncmp(s, "57", 2) == 0 || strncmp(s, "53", 2) == 0 || *s == '\0';
    for (size_t i = 0; i < sizeof failure_map / sizeof failure_map[0]; i++) {
        size_t n = strlen(failure_map[i].state);
        if (strncmp(s, failure_map[i].state, n) == 0 && (n == 2 ? strlen(s) == 5 : s[n] == '\0') &&
            (failure_map[i].message == NULL || (message && strcmp(message, failure_map[i].message) == 0)))
            return failure_map[i].reason;
    }
    return "db_error";
}

char *wire_failure_body(const char *txid, const queen_error *err, int flat_before_kv)
{
    bool retryable;
    const char *reason = wire_failure_reason(err->sqlstate, err->reason, &retryable);
    json_t *o = json_object();
    json_object_set_new(o, "transactionId", json_string(txid));
    json_object_set_new(o, "success", json_false());
    json_object_set_new(o, "reason", json_string(reason));
    json_t *e = json_string(err->reason);
    json_object_set_new(o, "error", e ? e : json_string("db_error"));
    json_object_set_new(o, "results", json_array());
    if (retryable)
        json_object_set_new(o, "retryable", json_true());

    if (strcmp(reason, "kv_precondition") == 0) {
        json_object_set_new(o, "failedIndex", json_integer(flat_before_kv + err->precondition.index));
        json_object_set_new(o, "kvReason", json_string(err->precondition.reason));
        json_object_set_new(o, "version", json_integer(err->precondition.version));
        size_t olen;
        const char *omitted = json_raw_member(err->detail, "valueOmitted", &olen);
        if (omitted != NULL && olen == 4 && memcmp(omitted, "true", 4) == 0)
            json_object_set_new(o, "valueOmitted", json_true()); /* the value was over the DETAIL cap */
        /* The value is spliced in as PostgreSQL rendered it (queen_error
         * keeps it byte for byte): through jansson 0.1 would come back as
         * 0.10000000000000001 and a 20-digit integer not at all. It is
         * valid JSON by construction, and the rest is jansson's output. */
        char *head = json_dumps(o, JSON_COMPACT | JSON_EMBED);
        json_decref(o);
        if (head == NULL)
            return NULL;
        const char *value = err->precondition.value[0] ? err->precondition.value : "null";
        size_t len = strlen(head) + strlen(value) + 16;
        char *body = malloc(len);
        if (body != NULL)
            snprintf(body, len, "{%s,\"value\":%s}", head, value);
        free(head);
        return body;
    }
    json_t *detail = NULL;
    if (strcmp(reason, "duplicate") == 0 || strcmp(reason, "ack_rejected") == 0)
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

int queen_transaction(queen *q, const char *tenant, const char *bundle_json, char **result_json, queen_error *err)
{
    *result_json = NULL;
    queen_error local;
    if (err == NULL)
        err = &local;
    tenant = engine_tenant(tenant);
    wire_plan plan;
    if (!wire_is_uuid(tenant) || wire_preflight(bundle_json, &plan, err) != 0) {
        if (!wire_is_uuid(tenant))
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_tenant", "the tenant must be a uuid");
        if (q != NULL)
            count(q, TXN_REFUSED);
        return -1;
    }
    if (!engine_enter(q, err))
        return -1;
    char lower[37];
    for (int i = 0; i < 37; i++)
        lower[i] = (char)tolower((unsigned char)tenant[i]);

    int rc = -1;
    queen_pool_conn *c = queen_acquire(q, err);
    if (c == NULL) {
        count(q, TXN_UNAVAILABLE);
        engine_leave(q);
        return -1;
    }
    const char *params[] = {bundle_json, lower};
    PGresult *res = plan.kv_only ? queen_pool_exec(c, "queen_wire_kv_only", SQL_KV_ONLY, 2, params)
                                 : queen_pool_exec(c, "queen_wire", SQL_WIRE, 2, params);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        *result_json = strdup(PQgetvalue(res, 0, 0));
        if (*result_json != NULL) {
            rc = 0;
            count(q, TXN_SUCCESS);
        } else {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        }
    } else if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "the wire returned no body");
    } else {
        queen_error_from_result(err, res);
        if (c->broken) {
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
    queen_pool_release(q->pool, c);
    engine_leave(q);
    return rc;
}
