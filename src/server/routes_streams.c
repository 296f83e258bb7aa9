/* routes_streams: the stream routes (docs/api.md, Streams), the
 * server side of the reference's streaming SDK: register a query, read its
 * state, commit a cycle. Parse, call one engine function
 * (src/engine/streams.c), render. The body goes to the engine as the client
 * sent it (values byte for byte: state values and sink payloads are the
 * client's); the tenant is the request's, never the body's. */
#include "routes.h"

#include <stdlib.h>

#include "body.h"
#include "errors.h"

typedef int (*streams_call)(queen *q, const char *tenant, const char *body_json, char **result_json,
                            queen_error *err);

static void streams(server *srv, const http_request *req, http_response *res, streams_call call)
{
    /* Parsed here only for the bad_body envelope every route shares. */
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    json_decref(body);
    char *text = span_dup(rawjson_trim(body_span(req))), *result = NULL;
    queen_error err;
    if (text == NULL)
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    else if (call(srv->engine, req->tenant, text, &result, &err) == 0)
        http_text(res, 200, result);
    else
        http_engine_error(res, FAMILY_LOG, &err);
    free(text);
}

/* POST /streams/v1/queries: 200 {success, query_id, name, config_hash,
 * fresh, reset}; 409 streams_config_mismatch when the name is registered
 * with another config_hash and reset is not true (error: the sentence the
 * reference's SDK shows). */
void route_streams_register(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_streams_register);
}

/* POST /streams/v1/state/get: 200 {success, rows: [{key, value, updated_at}]}. */
void route_streams_state_get(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_streams_state_get);
}

/* POST /streams/v1/cycle: 200 {success, query_id, partition_id, queueName,
 * state_ops_applied, push_results, ack_result}, all of it committed; 409
 * streams_lease_lost (nothing committed) when the batch's lease is gone. */
void route_streams_cycle(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_streams_cycle);
}
