/* routes_dlq: the dead-letter routes (docs/api.md, Dead letters):
 * list with a keyset cursor, requeue, delete. Parse, call one engine
 * function (src/engine/dlq.c), render the body PostgreSQL rendered. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void refuse(http_response *res, const char *reason, const char *detail)
{
    http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, reason, detail);
}

/* GET /api/v1/dlq?queue=&partition=&consumerGroup=&limit=&after=. The
 * reference clients also send offset=0 on their first page: accepted; a
 * later offset is refused rather than answered with the first page again
 * (pages here follow nextAfter). */
void route_dlq_list(server *srv, const http_request *req, http_response *res)
{
    listing_args a;
    long long offset = 0;
    if (!arg_listing(req, &a, res) || !arg_int(req, "offset", 0, 0, &offset, res, "log_bad_offset"))
        return;
    const queen_dlq_query o = {a.queue, a.partition, a.consumer_group, a.limit, a.after};
    char *result = NULL;
    queen_error err;
    int rc = queen_dlq_list(srv->engine, req->tenant, &o, &result, &err);
    answer(res, rc, result, &err);
}

/* POST /api/v1/dlq/requeue {"queue", "ids"?: [id...], "max"?}: ids absent or
 * null requeues every dead letter of the queue (up to max). */
void route_dlq_requeue(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"queue", "ids", "max", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    char *ids = NULL;
    long long max = 0;
    bool bad = false;
    const char *queue = NULL;
    const json_t *jids = json_object_get(body, "ids"), *jmax = json_object_get(body, "max");
    rawjson_span raw;
    if (!json_is_object(body)) {
        refuse(res, "log_bad_request", "the body must be a JSON object");
    } else if (body_unknown_field(body, members) != NULL) {
        char detail[160];
        snprintf(detail, sizeof detail, "unknown member %.64s (queue, ids, max)", body_unknown_field(body, members));
        refuse(res, "log_bad_request", detail);
    } else if ((queue = body_string(body, "queue", res, FAMILY_LOG, &bad)), bad) {
        /* refused */
    } else if (queue == NULL) {
        refuse(res, "log_bad_queue", "queue is required");
    } else if (jmax != NULL && !json_is_null(jmax) && !body_int(jmax, 1, 10000, &max)) {
        refuse(res, "log_bad_limit", "max must be an integer in 1..10000");
    } else if (jids != NULL && !json_is_null(jids) &&
               (!json_is_array(jids) || !rawjson_member(rawjson_trim(body_span(req)), "ids", &raw))) {
        refuse(res, "log_bad_ids", "ids must be an array of dead-letter ids");
    } else if (jids != NULL && !json_is_null(jids) && (ids = span_dup(raw)) == NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    } else {
        char *result = NULL;
        queen_error err;
        int rc = queen_dlq_requeue(srv->engine, req->tenant, queue, ids, (int)max, &result, &err);
        answer(res, rc, result, &err);
    }
    free(ids);
    json_decref(body);
}

/* DELETE /api/v1/dlq/:id */
void route_dlq_delete_one(server *srv, const http_request *req, http_response *res)
{
    char *end = NULL;
    const char *s = req->params[0];
    long long id = strtoll(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || id < 1) {
        refuse(res, "log_bad_ids", "a dead-letter id is a positive integer");
        return;
    }
    char *result = NULL;
    queen_error err;
    int rc = queen_dlq_delete(srv->engine, req->tenant, id, NULL, &result, &err);
    answer(res, rc, result, &err);
}

/* DELETE /api/v1/dlq?queue=Q: every dead letter of Q. */
void route_dlq_delete_queue(server *srv, const http_request *req, http_response *res)
{
    char queue[1024];
    const char *q = NULL;
    if (!arg_str(req, "queue", queue, sizeof queue, &q, res, "log_bad_queue"))
        return;
    if (q == NULL) {
        refuse(res, "log_bad_queue", "queue is required");
        return;
    }
    char *result = NULL;
    queen_error err;
    int rc = queen_dlq_delete(srv->engine, req->tenant, 0, q, &result, &err);
    answer(res, rc, result, &err);
}
