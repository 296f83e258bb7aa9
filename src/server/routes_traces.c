/* routes_traces: trace events (docs/api.md, Traces): record one
 * against a message, look them up by message or by name. Parse, call one
 * engine function (src/engine/traces.c), render. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>

/* The most names one trace body may give (traceNames). */
#define QUEEN_TRACE_NAMES_MAX 16

#include "args.h"
#include "body.h"
#include "errors.h"

static void answer(http_response *res, int rc, unsigned status, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, status, text);
    else
        http_engine_error(res, FAMILY_LOG, err);
}

/* The names a trace body gives, as a JSON array of strings: traceName (a
 * string), or the reference client's traceNames (a string, an array of
 * strings, or null), or neither: then its eventType (default "info"), so
 * that an unnamed event is still found by name. NULL when malformed. */
static json_t *trace_names(json_t *body)
{
    const json_t *one = json_object_get(body, "traceName"), *many = json_object_get(body, "traceNames"),
                 *event = json_object_get(body, "eventType");
    if (one != NULL && many != NULL && !json_is_null(many))
        return NULL;
    if (many == NULL || json_is_null(many))
        many = one;
    if (many == NULL || json_is_null(many))
        many = event != NULL && !json_is_null(event) ? event : NULL;
    if (many == NULL)
        return json_pack("[s]", "info");
    if (json_is_string(many))
        return json_pack("[O]", many);
    if (!json_is_array(many) || json_array_size(many) == 0 || json_array_size(many) > QUEEN_TRACE_NAMES_MAX)
        return NULL;
    size_t i;
    const json_t *n;
    json_array_foreach(many, i, n)
    {
        if (!json_is_string(n))
            return NULL;
    }
    return json_incref((json_t *)many);
}

/* POST /api/v1/traces {"partitionId", "transactionId", "traceName" |
 * "traceNames", "data"?, "consumerGroup"?, "eventType"?}: one trace event
 * per name (trace_names); data travels as the client's raw JSON. The
 * consumerGroup the reference client sends names whose trace it is; the
 * partition and transactionId already say which message. */
void route_trace_add(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"partitionId", "transactionId", "traceName", "traceNames",
                                          "data",        "consumerGroup", "eventType", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    bool bad = false;
    char *data = NULL;
    rawjson_span raw;
    json_t *names = NULL;
    const char *pid = NULL, *txn = NULL;
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request",
                    "the body is an object of partitionId, transactionId, traceName or traceNames, data, "
                    "consumerGroup and eventType");
    } else if ((pid = body_string(body, "partitionId", res, FAMILY_LOG, &bad)), bad) {
    } else if ((txn = body_string(body, "transactionId", res, FAMILY_LOG, &bad)), bad) {
    } else if ((body_string(body, "consumerGroup", res, FAMILY_LOG, &bad)), bad) {
    } else if ((body_string(body, "eventType", res, FAMILY_LOG, &bad)), bad) {
    } else if ((names = trace_names(body)) == NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_trace_name",
                    "traceName is a string; traceNames a string, null or an array of 1..16 strings, not both");
    } else if (json_object_get(body, "data") != NULL &&
               (!rawjson_member(rawjson_trim(body_span(req)), "data", &raw) || (data = span_dup(raw)) == NULL)) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    } else {
        /* Each name is its own event: one that fails (a bad name, the
         * tenant's trace budget) answers its error, those before it stay. */
        char *result = NULL;
        queen_error err;
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < json_array_size(names); i++) {
            free(result);
            result = NULL;
            rc = queen_trace_add(srv->engine, req->tenant, pid, txn, json_string_value(json_array_get(names, i)), data,
                                 &result, &err);
        }
        answer(res, rc, 201, result, &err);
    }
    json_decref(names);
    free(data);
    json_decref(body);
}

/* GET /api/v1/traces/:partitionId/:transactionId */
void route_traces_by_message(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_traces_by_message(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err);
    answer(res, rc, 200, result, &err);
}

/* GET /api/v1/traces/by-name/:traceName?limit=&after= */
void route_traces_by_name(server *srv, const http_request *req, http_response *res)
{
    int limit = 0;
    long long after = 0;
    if (!arg_page(req, &limit, &after, res))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_traces_by_name(srv->engine, req->tenant, req->params[0], limit, after, &result, &err);
    answer(res, rc, 200, result, &err);
}

/* GET /api/v1/traces/names?limit=&offset=0 (the reference clients'
 * getTraceNames; offset is accepted as 0 only, as on GET /api/v1/dlq) */
void route_trace_names(server *srv, const http_request *req, http_response *res)
{
    long long limit = 0, offset = 0;
    if (!arg_int(req, "limit", 1, 1000, &limit, res, "log_bad_limit") ||
        !arg_int(req, "offset", 0, 0, &offset, res, "log_bad_offset"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_trace_names(srv->engine, req->tenant, (int)limit, &result, &err);
    answer(res, rc, 200, result, &err);
}
