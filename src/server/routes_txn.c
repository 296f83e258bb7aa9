/* routes_txn: POST /api/v1/transaction, the bundle of acks, pushes and kv
 * ops that commits in one PostgreSQL transaction. Refuses at the edge what
 * is a shape error before any SQL runs (400), and the kv part over its
 * tenant's quota (403) or rate (429); everything else, including a
 * bundle that fails inside, is the engine's 200 body. Never calls libpq;
 * the body goes to the engine as the client sent it (values byte for byte);
 * the tenant is the request's, never the body's. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "errors.h"
#include "kvadmit.h"
#include "kvguard.h"

static bool txn_refuse(http_response *res, const char *reason, const char *detail)
{
    http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, reason, detail);
    return false;
}

/* The pre-flight checks of the transaction (README.md, HTTP API): operations an array of ack/push
 * (a kv operation is refused: kv is the top-level array), kv within the
 * wire's guards (64 ops, 256 keys, no getPrefix), something to do, and no
 * tenant and no unknown member at the top. */
static bool txn_preflight(server *srv, const http_request *req, const json_t *body, http_response *res)
{
    static const char *const allowed[] = {"operations", "requiredLeases", "kv", NULL};
    char detail[160];
    if (!json_is_object(body))
        return txn_refuse(res, "log_bad_request", "the body must be a JSON object");
    if (json_object_get(body, "tenant") || json_object_get(body, "tenantId") || json_object_get(body, "_tenant"))
        return txn_refuse(res, "log_bad_tenant", "the tenant comes from the request, never the body");
    const char *field = body_unknown_field(body, allowed);
    if (field != NULL) {
        snprintf(detail, sizeof detail, "unknown field \"%.64s\"; a bundle has operations, requiredLeases and kv",
                 field);
        return txn_refuse(res, "log_bad_request", detail);
    }
    const json_t *ops = json_object_get(body, "operations"), *kv = json_object_get(body, "kv"),
                 *leases = json_object_get(body, "requiredLeases");
    if (ops != NULL && !json_is_array(ops))
        return txn_refuse(res, "log_bad_request", "operations must be an array");
    if (leases != NULL && !json_is_array(leases))
        return txn_refuse(res, "log_bad_request", "requiredLeases must be an array");
    if (kv != NULL && !json_is_array(kv))
        return txn_refuse(res, "log_bad_request", "kv must be an array");
    if (ops == NULL && kv == NULL)
        return txn_refuse(res, "log_bad_request", "a bundle needs operations, kv or both");
    size_t i;
    const json_t *op;
    json_array_foreach(ops, i, op)
    {
        const char *type = json_string_value(json_object_get(op, "type"));
        if (type != NULL && strcmp(type, "kv") == 0) {
            snprintf(detail, sizeof detail, "operation %zu has type kv; kv ops go in the top-level kv array", i);
            return txn_refuse(res, "log_kv_in_operations", detail);
        }
        if (!json_is_object(op) || type == NULL || (strcmp(type, "ack") != 0 && strcmp(type, "push") != 0)) {
            snprintf(detail, sizeof detail, "operation %zu must be an object of type ack or push", i);
            return txn_refuse(res, "log_bad_operation", detail);
        }
    }
    rawjson_span raw;
    if (kv != NULL && rawjson_member(rawjson_trim(body_span(req)), "kv", &raw)) {
        kv_limits lim = kv_limits_from(srv->cfg, true);
        queen_error why;
        if (kv_guard_ops(kv, raw, &lim, &why) != 0) {
            http_engine_error(res, FAMILY_LOG, &why);
            return false;
        }
        /* Quota (403) and rate (429) for the kv part, before the bundle
         * takes a connection; the log part is not metered. */
        if (!kv_admit(srv, req, kv_demand_of(raw), FAMILY_LOG, res))
            return false;
    }
    return true;
}

void route_transaction(server *srv, const http_request *req, http_response *res)
{
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    if (txn_preflight(srv, req, body, res)) {
        char *bundle = span_dup(rawjson_trim(body_span(req))), *result = NULL;
        queen_error err;
        http_error_init(&err);
        if (bundle != NULL && queen_transaction(srv->engine, req->tenant, bundle, &result, &err) == 0)
            http_text(res, 200, result);
        else
            http_engine_error(res, FAMILY_LOG, &err);
        free(bundle);
    }
    json_decref(body);
}
