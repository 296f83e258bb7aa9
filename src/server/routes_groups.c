/* routes_groups: the consumer-group routes (docs/api.md, Consumer
 * groups): the view with lag, the lagging view, one group, seek, delete,
 * the subscription start, and the reference's stats refresh (a no-op here)
 * (also under the reference's path for one queue).
 * Parse, call one engine function (src/engine/groups.c), render. */
#include "routes.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "body.h"
#include "errors.h"

static void answer(http_response *res, int rc, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, 200, text);
    else
        http_engine_error(res, FAMILY_LOG, err);
}

static void groups(server *srv, const http_request *req, http_response *res, const char *group, int min_lag)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_groups(srv->engine, req->tenant, group, min_lag, &result, &err);
    answer(res, rc, result, &err);
}

/* GET /api/v1/consumer-groups */
void route_groups(server *srv, const http_request *req, http_response *res)
{
    groups(srv, req, res, NULL, -1);
}

/* GET /api/v1/consumer-groups/lagging?minLagSeconds=N (default 0: any lag). */
void route_groups_lagging(server *srv, const http_request *req, http_response *res)
{
    long long min = 0;
    if (arg_int(req, "minLagSeconds", 0, INT_MAX, &min, res, "log_bad_seconds"))
        groups(srv, req, res, NULL, (int)min);
}

/* GET /api/v1/consumer-groups/:group */
void route_group(server *srv, const http_request *req, http_response *res)
{
    groups(srv, req, res, req->params[0], -1);
}

/* DELETE /api/v1/consumer-groups/:group?queue=Q (absent: every queue) */
void route_group_delete(server *srv, const http_request *req, http_response *res)
{
    char buf[1024];
    const char *queue = NULL;
    if (!arg_str(req, "queue", buf, sizeof buf, &queue, res, "log_bad_queue"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_group_delete(srv->engine, req->tenant, req->params[0], queue, &result, &err);
    answer(res, rc, result, &err);
}

/* DELETE /api/v1/consumer-groups/:group/queues/:queue?deleteMetadata=: the
 * reference's path for the same delete on one queue. deleteMetadata is
 * accepted and has nothing to act on: a group's cursors are all it has here. */
void route_group_queue_delete(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_group_delete(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err);
    answer(res, rc, result, &err);
}

/* The seek target of a body: {"to": "beginning" | "end" | "<ISO-8601>"}, or
 * the reference client's {"toEnd": true} / {"timestamp": "<ISO-8601>"}, one
 * of them. NULL (res answered) when the body names none, or more than one. */
static const char *seek_target(json_t *body, http_response *res)
{
    static const char *const members[] = {"to", "toEnd", "timestamp", NULL};
    static const char *const detail = "the body is {\"to\": \"beginning\" | \"end\" | \"<ISO-8601>\"}, "
                                      "{\"toEnd\": true} or {\"timestamp\": \"<ISO-8601>\"}";
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL || json_object_size(body) != 1) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request", detail);
        return NULL;
    }
    const json_t *to_end = json_object_get(body, "toEnd");
    if (to_end != NULL) {
        if (json_is_true(to_end))
            return "end";
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request", detail);
        return NULL;
    }
    bool bad = false;
    const char *to = body_string(body, json_object_get(body, "to") != NULL ? "to" : "timestamp", res, FAMILY_LOG, &bad);
    if (to == NULL && !bad) /* JSON null */
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request", detail);
    return to;
}

/* POST /api/v1/consumer-groups/:group/queues/:queue/seek (seek_target) */
void route_group_seek(server *srv, const http_request *req, http_response *res)
{
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    const char *to = seek_target(body, res);
    if (to != NULL) {
        char *result = NULL;
        queen_error err;
        int rc = queen_group_seek(srv->engine, req->tenant, req->params[0], req->params[1], to, &result, &err);
        answer(res, rc, result, &err);
    }
    json_decref(body);
}

/* POST /api/v1/consumer-groups/:group/subscription {"subscriptionTimestamp":
 * "<ISO-8601>" | "now"} (the reference client's body) */
void route_group_subscription(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"subscriptionTimestamp", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    bool bad = false;
    const char *from = NULL;
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_request",
                    "the body is {\"subscriptionTimestamp\": \"<ISO-8601>\"}");
    } else if ((from = body_string(body, "subscriptionTimestamp", res, FAMILY_LOG, &bad)), !bad) {
        char *result = NULL;
        queen_error err;
        int rc = queen_group_subscription(srv->engine, req->tenant, req->params[0], from, &result, &err);
        answer(res, rc, result, &err);
    }
    json_decref(body);
}

/* POST /api/v1/stats/refresh (the reference clients' refreshConsumerStats,
 * which posts {}): the lag and counts here are computed from the log at
 * every read, so there is nothing to refresh; the answer says so, as a
 * broker whose counters are always current does. */
void route_stats_refresh(server *srv, const http_request *req, http_response *res)
{
    (void)srv;
    (void)req;
    http_json(res, 200, json_pack("{s:b, s:s}", "refreshed", false, "reason", "always_current"));
}
