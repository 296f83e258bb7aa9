/* routes_log: the message routes (docs/api.md): push, pop (with its long
 * poll), ack, ack batch, lease extend, configure, queue listing and delete.
 * Each handler parses, calls one engine function and renders the body
 * PostgreSQL rendered. Never calls libpq; never re-renders a payload (items
 * and acks travel as the client's raw JSON, see rawjson.h); SQL judges the
 * items' shapes (22023 -> 400). */
#include "routes.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "body.h"
#include "errors.h"

static void refuse(http_response *res, const char *reason, const char *detail)
{
    http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, reason, detail);
}

/* Renders the engine's answer (rc 0: text as the body with status) or its
 * error. Takes text. */
static void answer(http_response *res, int rc, unsigned status, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, status, text);
    else
        http_engine_error(res, FAMILY_LOG, err);
}

/* The raw text of member `name` of the body, which must be of JSON type
 * `kind` ('[' or '{'); NULL (res filled) when absent or of another type. */
static char *member_text(const http_request *req, const json_t *body, const char *name, char kind,
                         http_response *res)
{
    const json_t *v = json_object_get(body, name);
    rawjson_span raw;
    if (v == NULL || (kind == '[' ? !json_is_array(v) : !json_is_object(v)) ||
        !rawjson_member(rawjson_trim(body_span(req)), name, &raw)) {
        char detail[96];
        snprintf(detail, sizeof detail, "%s must be a JSON %s", name, kind == '[' ? "array" : "object");
        refuse(res, "log_bad_request", detail);
        return NULL;
    }
    char *text = span_dup(raw);
    if (text == NULL)
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    return text;
}

/* A body that must be a JSON object; NULL (res filled) otherwise. */
static json_t *object_body(const http_request *req, http_response *res, bool allow_empty)
{
    json_t *body = body_parse(req, res, allow_empty);
    if (body != NULL && !json_is_object(body) && !(allow_empty && json_is_null(body))) {
        refuse(res, "log_bad_request", "the body must be a JSON object");
        json_decref(body);
        return NULL;
    }
    return body;
}

void route_push(server *srv, const http_request *req, http_response *res)
{
    json_t *body = object_body(req, res, false);
    char *items = body ? member_text(req, body, "items", '[', res) : NULL;
    json_decref(body);
    if (items == NULL)
        return;
    char *results = NULL;
    queen_error err;
    int rc = queen_push_as(srv->engine, req->tenant, req->producer, items, &results, &err);
    answer(res, rc, 201, results, &err);
    free(items);
}

/* ---- pop ------------------------------------------------------------------- */

typedef struct pop_args {
    queen_pop_options o;
    bool wait;
    int timeout_ms;
    char group[512], mode[32], from[64], ns[512], task[512];
} pop_args;

/* An int query argument in [min, max]; absent leaves *out alone. */
static bool int_arg(const http_request *req, const char *name, long min, long max, int *out, http_response *res,
                    const char *reason)
{
    long long v = *out;
    if (!arg_int(req, name, min, max, &v, res, reason))
        return false;
    *out = (int)v;
    return true;
}

#define bool_arg arg_bool
#define str_arg arg_str

/* Query arguments of the pop (docs/api.md, Messages). 0 means "default" to the engine, so
 * an explicit 0 for batch, leaseSeconds or partitions is refused here, as SQL would. /api/v1/pop
 * (no path parameter) pops by the queues' namespace/task labels. subscriptionMode is any text:
 * like the reference broker, every value but new/new-only means all (SQL decides). */
static bool pop_parse(const http_request *req, http_response *res, pop_args *a)
{
    a->o.queue = req->nparams > 0 ? req->params[0] : NULL;
    a->o.partition = req->nparams > 1 ? req->params[1] : NULL;
    a->timeout_ms = QUEEN_POP_DEFAULT_TIMEOUT_MS;
    return int_arg(req, "batch", 1, INT_MAX, &a->o.batch, res, "log_bad_batch") &&
           int_arg(req, "leaseSeconds", 1, INT_MAX, &a->o.lease_seconds, res, "log_bad_lease_seconds") &&
           int_arg(req, "partitions", 1, INT_MAX, &a->o.partitions, res, "log_bad_partitions") &&
           int_arg(req, "timeout", 0, INT_MAX, &a->timeout_ms, res, "log_bad_request") &&
           bool_arg(req, "wait", &a->wait, res) && bool_arg(req, "autoAck", &a->o.auto_ack, res) &&
           str_arg(req, "consumerGroup", a->group, sizeof a->group, &a->o.consumer_group, res, "log_bad_group") &&
           str_arg(req, "subscriptionMode", a->mode, sizeof a->mode, &a->o.subscription_mode, res,
                   "log_bad_subscription_mode") &&
           str_arg(req, "subscriptionFrom", a->from, sizeof a->from, &a->o.subscription_from, res,
                   "log_bad_subscription_from") &&
           (a->o.queue != NULL ||
            (str_arg(req, "namespace", a->ns, sizeof a->ns, &a->o.namespace_label, res, "log_bad_labels") &&
             str_arg(req, "task", a->task, sizeof a->task, &a->o.task_label, res, "log_bad_labels")));
}

/* The long poll is the engine's waiting pop (queen_poll), stepped here and
 * suspended between steps by http.c: it never waits in the engine (that
 * would pin this worker thread). Its wait opens at the first dispatch, with
 * the time the request has left, and keeps its place among the queue's
 * waiters until the answer. */
void route_pop(server *srv, const http_request *req, http_response *res)
{
    pop_args a = {0};
    if (!pop_parse(req, res, &a))
        return;
    if (req->waits > 0 && req->no_wait) { /* resumed by a stop */
        res->status = 204;
        return;
    }
    if (srv->cfg->max_poll_timeout_ms > 0 && a.timeout_ms > srv->cfg->max_poll_timeout_ms)
        a.timeout_ms = srv->cfg->max_poll_timeout_ms; /* QUEEN_MAX_POLL_TIMEOUT_MS */
    long long left = a.timeout_ms - (http_now_ms() - req->started_ms);
    char *body = NULL;
    queen_error err;
    if (a.wait && !req->no_wait && left > 0) {
        a.o.timeout_ms = left > INT_MAX ? INT_MAX : (int)left;
        switch (http_poll_step(srv, req, &a.o, &body, &err, res)) {
        case HTTP_POLL_SUSPENDED:
            return;
        case HTTP_POLL_MESSAGES:
            http_text(res, 200, body);
            return;
        case HTTP_POLL_NOTHING:
            res->status = 204;
            return;
        case HTTP_POLL_ERROR:
            http_engine_error(res, FAMILY_LOG, &err);
            return;
        case HTTP_POLL_OVER_LIMIT: {
            /* The tenant holds its share of connections in waits already:
             * answered at once, before any database work, so other
             * tenants' requests keep finding connections. */
            char detail[160];
            snprintf(detail, sizeof detail,
                     "this tenant has %d long polls waiting (QUEEN_MAX_LONG_POLLS_PER_TENANT); retry shortly",
                     http_poll_tenant_cap(srv));
            http_refuse(res, FAMILY_LOG, QUEEN_ERR_RATE_LIMITED, "tenant_long_poll_limit", detail);
            return;
        }
        case HTTP_POLL_CANNOT:
            break; /* one attempt, as without wait */
        }
    }
    if (queen_pop(srv->engine, req->tenant, &a.o, &body, &err) != 0)
        http_engine_error(res, FAMILY_LOG, &err);
    else if (body != NULL)
        http_text(res, 200, body);
    else
        res->status = 204;
}

/* ---- ack, lease, configure, queues --------------------------------------- */

void route_ack(server *srv, const http_request *req, http_response *res)
{
    json_t *body = object_body(req, res, false);
    if (body == NULL)
        return;
    json_decref(body);
    /* log_ack_v1 takes an array; the single ack is its one element. */
    char *acks = span_wrap("[", rawjson_trim(body_span(req)), "]"), *results = NULL;
    if (acks == NULL) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
        return;
    }
    queen_error err;
    int rc = queen_ack(srv->engine, req->tenant, acks, NULL, &results, &err);
    answer(res, rc, 200, results, &err);
    free(acks);
}

void route_ack_batch(server *srv, const http_request *req, http_response *res)
{
    json_t *body = object_body(req, res, false);
    if (body == NULL)
        return;
    bool bad = false;
    const char *group = body_string(body, "consumerGroup", res, FAMILY_LOG, &bad);
    char *acks = bad ? NULL : member_text(req, body, "acknowledgments", '[', res);
    if (acks != NULL) {
        char *results = NULL;
        queen_error err;
        int rc = queen_ack(srv->engine, req->tenant, acks, group, &results, &err);
        answer(res, rc, 200, results, &err);
    }
    free(acks);
    json_decref(body);
}

void route_lease_extend(server *srv, const http_request *req, http_response *res)
{
    json_t *body = object_body(req, res, true);
    if (body == NULL)
        return;
    const json_t *seconds = json_object_get(body, "seconds");
    long long secs = 0; /* the engine's "default" (60) */
    if (seconds != NULL && !json_is_null(seconds) && !body_int(seconds, 1, INT_MAX, &secs)) {
        refuse(res, "log_bad_seconds", "seconds must be an integer >= 1");
    } else {
        char *result = NULL;
        queen_error err;
        int rc = queen_lease_extend(srv->engine, req->tenant, req->params[0], (int)secs, &result, &err);
        answer(res, rc, 200, result, &err);
    }
    json_decref(body);
}

/* POST /api/v1/configure: {"queue", "namespace"?, "task"?, "options"?, "mode"?},
 * as the reference broker's clients send it (namespace and task may be
 * null). Any other member is refused: a top-level option would otherwise be
 * dropped without a word (options go inside "options"). SQL judges the
 * option names and values, the labels and the mode. */
void route_configure(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"queue", "namespace", "task", "options", "mode", NULL};
    json_t *body = object_body(req, res, false);
    if (body == NULL)
        return;
    const char *unknown = body_unknown_field(body, members);
    bool bad = unknown != NULL;
    if (bad) {
        char detail[160];
        snprintf(detail, sizeof detail, "unknown member %.64s (options go inside \"options\")", unknown);
        refuse(res, "log_bad_request", detail);
    }
    const char *queue = bad ? NULL : body_string(body, "queue", res, FAMILY_LOG, &bad);
    const char *ns = bad ? NULL : body_string(body, "namespace", res, FAMILY_LOG, &bad);
    const char *task = bad ? NULL : body_string(body, "task", res, FAMILY_LOG, &bad);
    const char *mode = bad ? NULL : body_string(body, "mode", res, FAMILY_LOG, &bad);
    if (!bad && queue == NULL) {
        refuse(res, "log_bad_queue", "queue is required");
    } else if (!bad) {
        /* absent or null: NULL, which SQL takes as {} */
        const json_t *opts = json_object_get(body, "options");
        bool absent = opts == NULL || json_is_null(opts);
        char *options = absent ? NULL : member_text(req, body, "options", '{', res);
        if (absent || options != NULL) {
            char *result = NULL;
            queen_error err;
            int rc = queen_configure_ex(srv->engine, req->tenant, queue, options, ns, task, mode, &result, &err);
            answer(res, rc, 200, result, &err);
        }
        free(options);
    }
    json_decref(body);
}

void route_queues(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_queues(srv->engine, req->tenant, &result, &err);
    answer(res, rc, 200, result, &err);
}

void route_queue_delete(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_queue_delete(srv->engine, req->tenant, req->params[0], &result, &err);
    answer(res, rc, 200, result, &err);
}
