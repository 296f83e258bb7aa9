/* routes_traces: trace events (README.md, HTTP API > Traces): record one
 * against a message, look them up by message or by name. Parse, call one
 * engine function (src/engine/traces.c), render. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>

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

/* POST /api/v1/traces {"partitionId", "transactionId", "traceName", "data"?};
 * data travels as the client's raw JSON. */
void route_trace_add(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"partitionId", "transactionId", "traceName", "data", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    bool bad = false;
    char *data = NULL;
    rawjson_span raw;
    const char *pid = NULL, *txn = NULL, *name = NULL;
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request",
                    "the body is an object of partitionId, transactionId, traceName and data");
    } else if ((pid = body_string(body, "partitionId", res, FAMILY_LOG, &bad)), bad) {
    } else if ((txn = body_string(body, "transactionId", res, FAMILY_LOG, &bad)), bad) {
    } else if ((name = body_string(body, "traceName", res, FAMILY_LOG, &bad)), bad) {
    } else if (json_object_get(body, "data") != NULL &&
               (!rawjson_member(rawjson_trim(body_span(req)), "data", &raw) || (data = span_dup(raw)) == NULL)) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    } else {
        char *result = NULL;
        queen_error err;
        int rc = queen_trace_add(srv->engine, req->tenant, pid, txn, name, data, &result, &err);
        answer(res, rc, 201, result, &err);
    }
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
