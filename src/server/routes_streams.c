/* routes_streams: the stream routes (docs/api.md, Streams), the
 * server side of the reference's streaming SDK: register a query, read its
 * state, commit a cycle. Parse, call one engine function
 * (src/engine/streams.c), render. The body goes to the engine as the client
 * sent it (values byte for byte: state values and sink payloads are the
 * client's); the tenant is the request's, never the body's. */
#include "routes.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- Stream windows: the older window API (docs/streams-windows.md) ---- */

/* POST /api/v1/stream/define: 200 {success, streamId, name, created}. */
void route_stream_window_define(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_stream_window_define);
}

/* POST /api/v1/stream/ack: 200 {success, windowId, acked}; 409
 * streams_window_lease_lost. */
void route_stream_window_ack(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_stream_window_ack);
}

/* POST /api/v1/stream/renew-lease: 200 {success, leaseId, leaseExpiresAt}. */
void route_stream_window_renew(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_stream_window_renew);
}

/* POST /api/v1/stream/seek: 200 {success, streamName, consumerGroup,
 * timestamp, keys}. */
void route_stream_window_seek(server *srv, const http_request *req, http_response *res)
{
    streams(srv, req, res, queen_stream_window_seek);
}

/* Whether a poll's answer is {"window": null}. */
static bool no_window(const char *result)
{
    rawjson_span w;
    if (!rawjson_member((rawjson_span){result, strlen(result)}, "window", &w))
        return true;
    w = rawjson_trim(w);
    return w.len == 4 && memcmp(w.p, "null", 4) == 0;
}

/* POST /api/v1/stream/poll: 200 {window} or 204 when no window became ready
 * and free within the body's timeout (ms, default 30000, at most
 * QUEEN_MAX_POLL_TIMEOUT_MS). Each attempt is one SQL call; between them the
 * request is suspended (http_wait_push) until a push to any queue of the
 * tenant, a second's re-check (a lease expiring frees a window without a
 * push) or the deadline: no thread waits. */
void route_stream_window_poll(server *srv, const http_request *req, http_response *res)
{
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    long long timeout = QUEEN_POP_DEFAULT_TIMEOUT_MS;
    json_t *t = json_is_object(body) ? json_object_get(body, "timeout") : NULL;
    bool bad = t != NULL && !json_is_null(t) && !body_int(t, 0, INT_MAX, &timeout);
    json_decref(body);
    if (bad) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "streams_window_bad_timeout",
                    "timeout must be a whole number of milliseconds, 0 or more");
        return;
    }
    if (req->waits > 0 && req->no_wait) { /* resumed by a stop: answered before any database work */
        res->status = 204;
        return;
    }
    if (srv->cfg->max_poll_timeout_ms > 0 && timeout > srv->cfg->max_poll_timeout_ms)
        timeout = srv->cfg->max_poll_timeout_ms;
    char *text = span_dup(rawjson_trim(body_span(req))), *result = NULL;
    queen_error err;
    if (text == NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
        return;
    }
    int rc = queen_stream_window_poll(srv->engine, req->tenant, text, &result, &err);
    free(text);
    if (rc != 0) {
        http_engine_error(res, FAMILY_LOG, &err);
        return;
    }
    if (!no_window(result)) {
        http_text(res, 200, result);
        return;
    }
    free(result);
    long long left = timeout - (http_now_ms() - req->started_ms);
    res->status = 204;
    if (req->no_wait || left <= 0)
        return;
    switch (http_wait_push(srv, req, NULL, left > INT_MAX ? INT_MAX : (int)left, res)) {
    case HTTP_POLL_SUSPENDED:
        res->status = 0;
        return;
    case HTTP_POLL_OVER_LIMIT: {
        char detail[160];
        snprintf(detail, sizeof detail,
                 "this tenant has %d long polls waiting (QUEEN_MAX_LONG_POLLS_PER_TENANT); retry shortly",
                 http_poll_tenant_cap(srv));
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_RATE_LIMITED, "tenant_long_poll_limit", detail);
        return;
    }
    default:
        return; /* cannot wait: nothing now */
    }
}

/* ---- The stream resources (GET, DELETE /api/v1/resources/streams...) ---- */

/* The answer of a read by name: 404 when the tenant has no such stream (the
 * engine's null), as the reference answers. */
static void by_name(http_response *res, int rc, char *result, const queen_error *err)
{
    if (rc != 0)
        http_engine_error(res, FAMILY_LOG, err);
    else if (strcmp(result, "null") == 0) {
        free(result);
        http_error(res, 404, "not_found", "streams_window_not_found", "the tenant has no stream of that name");
    } else
        http_text(res, 200, result);
}

/* GET /api/v1/resources/streams: 200 {streams: [...]}. */
void route_stream_window_list(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    if (queen_stream_window_list(srv->engine, req->tenant, &result, &err) == 0)
        http_text(res, 200, result);
    else
        http_engine_error(res, FAMILY_LOG, &err);
}

/* GET /api/v1/resources/streams/stats: 200 {totalStreams, activeLeases}. */
void route_stream_window_stats(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    if (queen_stream_window_stats(srv->engine, req->tenant, &result, &err) == 0)
        http_text(res, 200, result);
    else
        http_engine_error(res, FAMILY_LOG, &err);
}

/* GET /api/v1/resources/streams/:name */
void route_stream_window_get(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_stream_window_get(srv->engine, req->tenant, req->params[0], &result, &err);
    by_name(res, rc, result, &err);
}

/* GET /api/v1/resources/streams/:name/consumers */
void route_stream_window_consumers(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_stream_window_consumers(srv->engine, req->tenant, req->params[0], &result, &err);
    by_name(res, rc, result, &err);
}

/* DELETE /api/v1/resources/streams/:name: 200 {success, name}. */
void route_stream_window_delete(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_stream_window_delete(srv->engine, req->tenant, req->params[0], &result, &err);
    by_name(res, rc, result, &err);
}
