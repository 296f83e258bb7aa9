/* routes_browse: browsing the log (docs/api.md, Browsing messages):
 * a partition's messages with their state, a transactionId's messages,
 * delete; and one message by partitionId and transactionId (the reference
 * clients' paths): get, delete, retry. Parse, call one engine function (src/engine/browse.c), render. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "errors.h"

static void answer(http_response *res, int rc, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, 200, text);
    else
        http_engine_error(res, FAMILY_LOG, err);
}

/* GET /api/v1/messages?queue=&partition=&consumerGroup=&limit=&after= */
void route_messages(server *srv, const http_request *req, http_response *res)
{
    listing_args a;
    if (!arg_listing(req, &a, res))
        return;
    const queen_messages_query o = {a.queue, a.partition, a.consumer_group, a.limit, a.after};
    char *result = NULL;
    queen_error err;
    int rc = queen_messages_list(srv->engine, req->tenant, &o, &result, &err);
    answer(res, rc, result, &err);
}

/* GET /api/v1/messages/:transactionId?queue=&consumerGroup= */
void route_message_get(server *srv, const http_request *req, http_response *res)
{
    char queue[1024], group[1024];
    const char *q = NULL, *g = NULL;
    if (!arg_str(req, "queue", queue, sizeof queue, &q, res, "log_bad_queue") ||
        !arg_str(req, "consumerGroup", group, sizeof group, &g, res, "log_bad_group"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_message_get(srv->engine, req->tenant, req->params[0], q, g, &result, &err);
    answer(res, rc, result, &err);
}

/* DELETE /api/v1/messages/:transactionId?queue=Q&partition= */
void route_message_delete(server *srv, const http_request *req, http_response *res)
{
    char queue[1024], part[1024];
    const char *q = NULL, *p = NULL;
    if (!arg_str(req, "queue", queue, sizeof queue, &q, res, "log_bad_queue") ||
        !arg_str(req, "partition", part, sizeof part, &p, res, "log_bad_partition"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_message_delete(srv->engine, req->tenant, q, req->params[0], p, &result, &err);
    answer(res, rc, result, &err);
}

/* GET /api/v1/messages/:partitionId/:transactionId?consumerGroup=: the one
 * message, or 404 when the partition stores none (as the reference
 * answers: a client tells "gone" from a failure). */
void route_message_at(server *srv, const http_request *req, http_response *res)
{
    char group[1024];
    const char *g = NULL;
    if (!arg_str(req, "consumerGroup", group, sizeof group, &g, res, "log_bad_group"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_message_at(srv->engine, req->tenant, req->params[0], req->params[1], g, &result, &err);
    if (rc == 0 && result != NULL && strcmp(result, "null") == 0) {
        free(result);
        http_error(res, 404, "not_found", "log_message_not_found",
                   "this partition stores no message with that transactionId");
        return;
    }
    answer(res, rc, result, &err);
}

/* DELETE /api/v1/messages/:partitionId/:transactionId */
void route_message_delete_at(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_message_delete_at(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err);
    answer(res, rc, result, &err);
}

/* POST /api/v1/messages/:partitionId/:transactionId/retry (the client posts
 * {}; nothing in it is read) */
void route_message_retry(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_message_retry(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err);
    answer(res, rc, result, &err);
}

/* POST /api/v1/messages/:partitionId/:transactionId/dlq (the reference
 * client's moveMessageToDLQ, body {}): the dead letters and the delete in
 * one transaction (sql/log_status.sql). */
void route_message_dlq(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_message_dlq(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err);
    if (rc == 0 && result != NULL && strcmp(result, "null") == 0) {
        free(result);
        http_error(res, 404, "not_found", "log_message_not_found",
                   "this partition stores no message with that transactionId");
        return;
    }
    answer(res, rc, result, &err);
}
