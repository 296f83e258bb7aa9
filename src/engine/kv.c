/* kv: the key/value half of libqueen (queen_kv_* in queen.h).
 *
 * Owns the calls to queen.kv_apply_v1, kv_list_v1, kv_namespaces_v1 and
 * kv_quota_read_v1 (the console's read of one tenant) and
 * the kv counters. Must never build SQL that names the kv table (the rules
 * live in SQL, once; tests/unit/test_engine_no_kv_sql.c enforces it), never
 * build JSON by concatenating strings (ops are built with jansson), and
 * never re-render what PostgreSQL rendered: results go back as its text,
 * because jansson holds numbers as double and a jsonb numeric is exact. */
#include "kv.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "calls.h"
#include "engine.h"
#include "kvguard.h"

/* The batch call: one prepared statement, one round trip, the result array
 * passed through as PostgreSQL rendered it. */
#define SQL_KV_APPLY "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), $3::boolean)::text"

/* One kv_apply_v1 call outside a transaction bundle, on its own: a call of
 * reads only, or of one write op, when nothing shares its statement (the
 * two coalescings below). */
#define SQL_KV_CALL "SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false)::text"

/* A call of reads only (get, getMany, getPrefix) outside a transaction
 * bundle: the same function, and calls made together may share one
 * statement, each still its own kv_apply_v1 call with its own result and
 * checks (sqlcall.h, sql_coalesce). A read takes no lock and writes
 * nothing, so sharing a transaction changes no verdict; each call's
 * statements take their own snapshot (READ COMMITTED, a volatile function),
 * all within every coalesced request's lifetime. What it saves is the per
 * statement cost: a round trip, parse/bind/execute, a transaction. */
static const sql_coalesce kv_reads_coalesce = {
    .name = "queen_kv_reads",
    .sql = "SELECT queen.kv_apply_v1(o.ops, t.tenant::uuid, now(), false)::text "
           "FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS o(ops, n) "
           "JOIN jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS t(tenant, n) USING (n) ORDER BY n",
    .param_kinds = "js",
    .max_calls = 32,
};

/* A call of one write op outside a transaction bundle: the same function,
 * and calls made together may commit as one group (sql/kv_group.sql),
 * each still its own kv_apply_v1 call with its own result. A group is one
 * transaction and one WAL flush for all of them. It takes its members' row
 * locks in the global order (ascending tenant, namespace, key), and when
 * any member fails, nothing of the group commits and each member runs alone
 * (pipeline.c), so every answer is one that call would have had by itself. */
static const sql_coalesce kv_writes_coalesce = {
    .name = "queen_kv_writes",
    .sql = "SELECT g.result FROM queen.kv_apply_group_v1($1::jsonb, $2::jsonb) AS g ORDER BY g.n",
    .param_kinds = "js",
    .max_calls = 32,
    .waits_for_group = true,
};

/* A typed get: SQL_KV_ONE without the value, coalesced like the reads
 * above. */
#define SQL_KV_GET_ONE                                                                                                 \
    "SELECT r::text, r->>'applied', r->>'found' FROM (SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), false) " \
    "-> 0 AS r) AS s"
static const sql_coalesce kv_get_one_coalesce = {
    .name = "queen_kv_get_ones",
    .sql = "SELECT s.r::text, s.r->>'applied', s.r->>'found' FROM (SELECT o.n, "
           "queen.kv_apply_v1(o.ops, t.tenant::uuid, now(), false) -> 0 AS r "
           "FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS o(ops, n) "
           "JOIN jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS t(tenant, n) USING (n)) AS s ORDER BY s.n",
    .param_kinds = "js",
    .max_calls = 32,
};

/* The typed conveniences: the same function, returning only element 0 and
 * its two flags (so counting outcomes needs no JSON parse). The value goes
 * in as its own parameter and PostgreSQL places it into the op: jansson
 * would turn 12345678901234567890 or 0.1 into a double and change it. */
#define SQL_KV_ONE                                                                                                     \
    "SELECT r::text, r->>'applied', r->>'found' FROM (SELECT queen.kv_apply_v1("                                      \
    "CASE WHEN $3::jsonb IS NULL THEN $1::jsonb ELSE jsonb_set($1::jsonb, '{0,value}', $3::jsonb) END, "              \
    "$2::uuid, now(), false) -> 0 AS r) AS s"

/* The console reads (list, namespaces, quota) are rows of the call table
 * (calls.c). */

static void count_batch(queen *q, int rc, const queen_error *err)
{
    int slot = rc == 0 ? BATCH_OK : (err && err->category == QUEEN_ERR_PRECONDITION) ? BATCH_PRECONDITION : BATCH_ERROR;
    atomic_fetch_add(&q->counters.kv_batch[slot], 1);
}

int queen_kv_apply(queen *q, const char *tenant, const char *ops_json, bool in_wire, char **results_json,
                   queen_error *err)
{
    *results_json = NULL;
    queen_error local;
    if (err == NULL)
        err = &local;
    if (ops_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "ops_json is NULL");
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    tenant = engine_enter_tenant(q, tenant, canon, err);
    if (tenant == NULL)
        return -1;
    kv_limits lim = kv_limits_from(&q->cfg, in_wire);
    kv_demand d;
    rawjson_span ops = rawjson_trim((rawjson_span){ops_json, strlen(ops_json)});
    int rc = kv_guard_ops(ops, &lim, &d, err);
    if (rc == 0 && d.ops == 0) {
        /* Nothing to do, and nothing to take a connection for. */
        *results_json = strdup("[]");
        rc = *results_json ? 0 : -1;
        if (rc != 0)
            queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
    } else if (rc == 0 && (rc = engine_kv_admit(q, tenant, d, err)) == 0) {
        const char *params[] = {ops_json, tenant, in_wire ? "true" : "false"};
        if (!in_wire && d.reads == d.ops && d.writes == 0)
            rc = sql_call_text_coalesced(q->pool, "queen_kv_call", SQL_KV_CALL, 2, params, &kv_reads_coalesce,
                                         results_json, err);
        else if (!in_wire && d.ops == 1)
            rc = sql_call_text_coalesced(q->pool, "queen_kv_call", SQL_KV_CALL, 2, params,
                                         &kv_writes_coalesce, results_json, err);
        else
            rc = queen_call_text(q, "queen_kv_apply", SQL_KV_APPLY, 3, params, results_json, err);
        if (rc == 0 && *results_json == NULL) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "kv_result_misaligned", "kv_apply_v1 returned NULL");
            rc = -1;
        }
        count_batch(q, rc, err);
    }
    engine_leave(q);
    return rc;
}

/* ---- typed conveniences --------------------------------------------------- */

const char *const kv_op_names[KV_OP_N] = {"get", "put", "putIfAbsent", "delete", "incr", "getMany", "getPrefix"};
const char *const kv_outcome_names[KV_OUT_N] = {"applied", "notApplied", "found", "missing",
                                                "ok",      "precondition", "error"};

/* A new op {"op", "ns", "key"} or NULL with err set (a name that is not
 * UTF-8, or NULL, cannot become a JSON string). key NULL: no key member. */
static json_t *op_new(int kind, const char *ns, const char *key, bool with_key, queen_error *err)
{
    json_t *n = ns ? json_string(ns) : NULL;
    if (n == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_namespace", "namespace is NULL or not UTF-8");
        return NULL;
    }
    json_t *op = json_object();
    json_object_set_new(op, "op", json_string(kv_op_names[kind]));
    json_object_set_new(op, "ns", n);
    if (with_key) {
        json_t *k = key ? json_string(key) : NULL;
        if (k == NULL) {
            json_decref(op);
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_key", "key is NULL or not UTF-8");
            return NULL;
        }
        json_object_set_new(op, "key", k);
    }
    return op;
}

/* Expiry is explicit: QUEEN_FOREVER or ttl seconds > 0; anything else is
 * refused here, as SQL would. */
static int set_expiry(json_t *op, long ttl_seconds, queen_error *err)
{
    if (ttl_seconds == QUEEN_FOREVER)
        return json_object_set_new(op, "forever", json_true());
    if (ttl_seconds <= 0) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_ttl", "ttl_seconds must be > 0 or QUEEN_FOREVER");
        return -1;
    }
    return json_object_set_new(op, "ttlSeconds", json_integer(ttl_seconds));
}

/* A double as JSON: an integral value in the exact range of a double
 * becomes a JSON integer, so incr by 1 yields 1, not 1.0 (jsonb numeric
 * keeps the scale it is given). NULL for NaN and infinities. */
static json_t *json_number(double v)
{
    if (!isfinite(v))
        return NULL;
    if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(long long)v)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* The same guards and admission as a batch for one typed op; the value,
 * placed by SQL, is measured apart (the op holds null in its place). */
static int typed_admit(queen *q, const char *tenant, const char *ops_text, const char *value_json, queen_error *err)
{
    kv_limits lim = kv_limits_from(&q->cfg, false);
    kv_demand d;
    if (kv_guard_ops((rawjson_span){ops_text, strlen(ops_text)}, &lim, &d, err) != 0)
        return -1;
    if (value_json != NULL) {
        size_t n = strlen(value_json);
        if (n > (size_t)lim.max_value_bytes) {
            queen_error_set(err, QUEEN_ERR_TOO_LARGE, "kv_value_too_large",
                            "value is %zu bytes of JSON text, the limit is %d", n, lim.max_value_bytes);
            return -1;
        }
        d.bytes = (long)n;
    }
    return engine_kv_admit(q, tenant, d, err);
}

/* Sends one op, returns its single result element. value_json (may be NULL)
 * is placed into the op by PostgreSQL (see SQL_KV_ONE). Counts the outcome. */
static int kv_one(queen *q, const char *tenant, int kind, json_t *op, const char *value_json, char **result_json,
                  queen_error *err)
{
    *result_json = NULL;
    queen_error local;
    if (err == NULL)
        err = &local;
    json_t *ops = json_array();
    json_array_append_new(ops, op);
    char *ops_text = json_dumps(ops, JSON_COMPACT);
    json_decref(ops);
    if (ops_text == NULL) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    tenant = engine_enter_tenant(q, tenant, canon, err);
    if (tenant == NULL) {
        if (q != NULL && err->category == QUEEN_ERR_BAD_REQUEST) /* a bad tenant, not a closing handle */
            atomic_fetch_add(&q->counters.kv_typed[kind][KV_OUT_ERROR], 1);
        free(ops_text);
        return -1;
    }
    if (typed_admit(q, tenant, ops_text, value_json, err) != 0) {
        atomic_fetch_add(&q->counters.kv_typed[kind][KV_OUT_ERROR], 1);
        engine_leave(q);
        free(ops_text);
        return -1;
    }
    int rc = -1, outcome = KV_OUT_ERROR;
    const char *params[] = {ops_text, tenant, value_json};
    PGresult *res = kind == KV_OP_GET ? sql_exec_coalesced(q->pool, "queen_kv_get_one", SQL_KV_GET_ONE, 2, params,
                                                           &kv_get_one_coalesce, NULL, err)
                                      : sql_exec(q->pool, "queen_kv_one", SQL_KV_ONE, 3, params, NULL, err);
    if (res != NULL) {
        if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
            *result_json = strdup(PQgetvalue(res, 0, 0));
            if (*result_json == NULL) {
                queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
            } else {
                rc = 0;
                if (!PQgetisnull(res, 0, 1))
                    outcome = strcmp(PQgetvalue(res, 0, 1), "true") == 0 ? KV_OUT_APPLIED : KV_OUT_NOT_APPLIED;
                else if (!PQgetisnull(res, 0, 2))
                    outcome = strcmp(PQgetvalue(res, 0, 2), "true") == 0 ? KV_OUT_FOUND : KV_OUT_MISSING;
                else
                    outcome = KV_OUT_OK;
            }
        } else if (PQresultStatus(res) == PGRES_TUPLES_OK) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "kv_result_misaligned", "kv_apply_v1 returned no element");
        } else {
            queen_error_from_result(err, res);
            if (err->category == QUEEN_ERR_PRECONDITION)
                outcome = KV_OUT_PRECONDITION;
        }
        PQclear(res);
    }
    atomic_fetch_add(&q->counters.kv_typed[kind][outcome], 1);
    engine_leave(q);
    free(ops_text);
    return rc;
}

int queen_kv_get(queen *q, const char *tenant, const char *ns, const char *key, char **result_json, queen_error *err)
{
    *result_json = NULL;
    json_t *op = op_new(KV_OP_GET, ns, key, true, err);
    return op ? kv_one(q, tenant, KV_OP_GET, op, NULL, result_json, err) : -1;
}

static int put_common(queen *q, const char *tenant, int kind, const char *ns, const char *key, const char *value_json,
                      long ttl_seconds, long long expect, bool required, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (value_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request",
                        "value_json is required (pass \"null\" for a JSON null)");
        return -1;
    }
    json_t *op = op_new(kind, ns, key, true, err);
    if (op == NULL)
        return -1;
    if (set_expiry(op, ttl_seconds, err) != 0) {
        json_decref(op);
        return -1;
    }
    json_object_set_new(op, "value", json_null()); /* replaced by the exact value in SQL */
    if (expect >= 0)
        json_object_set_new(op, "expect", json_integer((json_int_t)expect));
    if (required)
        json_object_set_new(op, "required", json_true());
    return kv_one(q, tenant, kind, op, value_json, result_json, err);
}

int queen_kv_put(queen *q, const char *tenant, const char *ns, const char *key, const char *value_json,
                 long ttl_seconds, long long expect, bool required, char **result_json, queen_error *err)
{
    return put_common(q, tenant, KV_OP_PUT, ns, key, value_json, ttl_seconds, expect, required, result_json, err);
}

int queen_kv_put_if_absent(queen *q, const char *tenant, const char *ns, const char *key, const char *value_json,
                           long ttl_seconds, bool required, char **result_json, queen_error *err)
{
    return put_common(q, tenant, KV_OP_PUT_IF_ABSENT, ns, key, value_json, ttl_seconds, -1, required, result_json,
                      err);
}

int queen_kv_delete(queen *q, const char *tenant, const char *ns, const char *key, long long expect, bool required,
                    char **result_json, queen_error *err)
{
    *result_json = NULL;
    json_t *op = op_new(KV_OP_DELETE, ns, key, true, err);
    if (op == NULL)
        return -1;
    if (expect >= 0)
        json_object_set_new(op, "expect", json_integer((json_int_t)expect));
    if (required)
        json_object_set_new(op, "required", json_true());
    return kv_one(q, tenant, KV_OP_DELETE, op, NULL, result_json, err);
}

int queen_kv_incr(queen *q, const char *tenant, const char *ns, const char *key, double delta, const double *min,
                  const double *max, long ttl_seconds, bool required, char **result_json, queen_error *err)
{
    *result_json = NULL;
    json_t *d = json_number(delta), *lo = min ? json_number(*min) : NULL, *hi = max ? json_number(*max) : NULL;
    if (d == NULL || (min && lo == NULL) || (max && hi == NULL)) {
        json_decref(d);
        json_decref(lo);
        json_decref(hi);
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "delta, min and max must be finite numbers");
        return -1;
    }
    json_t *op = op_new(KV_OP_INCR, ns, key, true, err);
    if (op == NULL || set_expiry(op, ttl_seconds, err) != 0) {
        json_decref(op);
        json_decref(d);
        json_decref(lo);
        json_decref(hi);
        return -1;
    }
    json_object_set_new(op, "delta", d);
    if (lo)
        json_object_set_new(op, "min", lo);
    if (hi)
        json_object_set_new(op, "max", hi);
    if (required)
        json_object_set_new(op, "required", json_true());
    return kv_one(q, tenant, KV_OP_INCR, op, NULL, result_json, err);
}

int queen_kv_get_many(queen *q, const char *tenant, const char *ns, const char *const *keys, size_t nkeys,
                      char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (keys == NULL && nkeys > 0) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "keys is NULL");
        return -1;
    }
    json_t *op = op_new(KV_OP_GET_MANY, ns, NULL, false, err);
    if (op == NULL)
        return -1;
    json_t *arr = json_array();
    for (size_t i = 0; i < nkeys; i++) {
        json_t *k = keys[i] ? json_string(keys[i]) : NULL;
        if (k == NULL) {
            json_decref(arr);
            json_decref(op);
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_key", "keys[%zu] is NULL or not UTF-8", i);
            return -1;
        }
        json_array_append_new(arr, k);
    }
    json_object_set_new(op, "keys", arr);
    return kv_one(q, tenant, KV_OP_GET_MANY, op, NULL, result_json, err);
}

int queen_kv_get_prefix(queen *q, const char *tenant, const char *ns, const char *prefix, const char *after, int limit,
                        bool keys_only, char **result_json, queen_error *err)
{
    *result_json = NULL;
    json_t *op = op_new(KV_OP_GET_PREFIX, ns, NULL, false, err);
    if (op == NULL)
        return -1;
    json_t *p = prefix ? json_string(prefix) : NULL;
    json_t *a = after ? json_string(after) : NULL;
    if (p == NULL || (after && a == NULL)) {
        json_decref(p);
        json_decref(a);
        json_decref(op);
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_prefix_required", "prefix (and after) must be UTF-8 text");
        return -1;
    }
    json_object_set_new(op, "prefix", p);
    if (a)
        json_object_set_new(op, "after", a);
    if (limit > 0)
        json_object_set_new(op, "limit", json_integer(limit));
    if (keys_only)
        json_object_set_new(op, "keysOnly", json_true());
    return kv_one(q, tenant, KV_OP_GET_PREFIX, op, NULL, result_json, err);
}

/* ---- console reads ---------------------------------------------------------- */

int queen_kv_list(queen *q, const char *tenant, const char *ns, const char *prefix, const char *after, int limit,
                  bool keys_only, bool include_expired, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_KV_LIST, tenant,
                       ENGINE_ARGS(ENGINE_S(ns), ENGINE_S(prefix), ENGINE_S(after), ENGINE_N(limit),
                                   ENGINE_N(keys_only), ENGINE_N(include_expired)),
                       result_json, err);
}

int queen_kv_namespaces(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_KV_NAMESPACES, tenant, ENGINE_NO_ARGS, result_json, err);
}

int queen_kv_quota(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_KV_QUOTA, tenant, ENGINE_NO_ARGS, result_json, err);
}
