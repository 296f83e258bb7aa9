/* routes_resources: the resource routes an admin client and the console
 * read (docs/api.md, Resources): overview, namespaces, tasks, a
 * queue's detail and partitions, the tenant's partitions by depth, clearing
 * a queue, and the broker's status.
 * Parse, call one engine function (src/engine/resources.c), render. */
#include "routes.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "errors.h"

static void answer(http_response *res, http_family fam, int rc, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, 200, text);
    else
        http_engine_error(res, fam, err);
}

void route_overview(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_overview(srv->engine, req->tenant, &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

void route_namespaces(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_labels(srv->engine, req->tenant, "namespace", &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

void route_tasks(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_labels(srv->engine, req->tenant, "task", &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

void route_queue_detail(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_queue_detail(srv->engine, req->tenant, req->params[0], &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

void route_queue_partitions(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_queue_partitions(srv->engine, req->tenant, req->params[0], &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

/* GET /api/v1/resources/partitions?queue=&minDepth=&limit= (the reference
 * clients' getPartitions) */
void route_partitions(server *srv, const http_request *req, http_response *res)
{
    char buf[1024];
    const char *queue = NULL;
    long long depth = 0, limit = 0;
    if (!arg_str(req, "queue", buf, sizeof buf, &queue, res, "log_bad_queue") ||
        !arg_int(req, "minDepth", 0, LLONG_MAX, &depth, res, "log_bad_depth") ||
        !arg_int(req, "limit", 1, 1000, &limit, res, "log_bad_limit"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_partitions(srv->engine, req->tenant, queue, depth, (int)limit, &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

/* POST /api/v1/resources/queues/:queue/clear, and DELETE
 * /api/v1/queues/:queue/clear (the reference client's path). A clear here
 * is the whole queue's: a partition argument (the reference client's
 * clearQueue(name, partition)) is refused rather than widened to every
 * partition. */
void route_queue_clear(server *srv, const http_request *req, http_response *res)
{
    char buf[8];
    bool bad = false;
    if (http_query_arg(req, "partition", buf, sizeof buf, &bad) != NULL || bad) {
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_BAD_REQUEST, "log_bad_partition",
                    "a clear deletes the whole queue's messages; delete one partition's with "
                    "DELETE /api/v1/messages/:transactionId?queue=&partition=");
        return;
    }
    char *result = NULL;
    queen_error err;
    int rc = queen_queue_clear(srv->engine, req->tenant, req->params[0], &result, &err);
    answer(res, FAMILY_LOG, rc, result, &err);
}

/* GET /api/v1/status: the broker (version, database reachable, maintenance).
 * Not tenant-scoped. */
void route_status(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    char version[128] = "";
    queen_error err;
    if (queen_health(srv->engine, version, sizeof version, &err) != 0) {
        http_engine_error(res, FAMILY_OPS, &err);
        return;
    }
    char *m = NULL;
    if (queen_maintenance(srv->engine, &m, &err) != 0) {
        http_engine_error(res, FAMILY_OPS, &err);
        return;
    }
    json_t *maint = json_loads(m, 0, NULL);
    free(m);
    /* The major version only ("PostgreSQL 15"): which features the
     * database has is the operator's business; its exact release (which
     * advisories apply) stays in the start-up log, as with /health. */
    version[strcspn(version, ".")] = '\0';
    http_json(res, 200,
              json_pack("{s:s, s:s, s:s, s:s, s:o}", "status", "healthy", "version", QUEEN_VERSION, "database",
                        "connected", "databaseVersion", version, "maintenance", maint ? maint : json_null()));
}
