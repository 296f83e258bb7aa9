/* resources: the resource reads of libqueen (queen.h, "Resources"):
 * overview, labels, a queue's detail and partitions, the tenant's
 * partitions by depth, clearing a queue. One
 * prepared statement each, calling sql/log_resources.sql; SQL judges every argument. */
#include <stdio.h>

#include "engine.h"

#define SQL_OVERVIEW "SELECT queen.log_overview_v1($1::uuid)::text"
#define SQL_LABELS "SELECT queen.log_labels_v1($1::uuid, $2)::text"
#define SQL_DETAIL "SELECT queen.log_queue_detail_v1($1::uuid, $2)::text"
#define SQL_PARTITIONS "SELECT queen.log_queue_partitions_v1($1::uuid, $2)::text"
#define SQL_CLEAR "SELECT queen.log_queue_clear_v1($1::uuid, $2)::text"
#define SQL_ALL_PARTITIONS "SELECT queen.log_partitions_v1($1::uuid, $2, $3::bigint, $4::integer)::text"

int queen_overview(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    const char *params[] = {NULL};
    return engine_call_body(q, tenant, "queen_overview", SQL_OVERVIEW, 1, params, result_json, err);
}

int queen_labels(queen *q, const char *tenant, const char *kind, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, kind};
    return engine_call_body(q, tenant, "queen_labels", SQL_LABELS, 2, params, result_json, err);
}

int queen_queue_detail(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue};
    return engine_call_body(q, tenant, "queen_queue_detail", SQL_DETAIL, 2, params, result_json, err);
}

int queen_queue_partitions(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue};
    return engine_call_body(q, tenant, "queen_queue_partitions", SQL_PARTITIONS, 2, params, result_json, err);
}

int queen_queue_clear(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue};
    return engine_call_body(q, tenant, "queen_queue_clear", SQL_CLEAR, 2, params, result_json, err);
}

int queen_partitions(queen *q, const char *tenant, const char *queue, long long min_depth, int limit,
                     char **result_json, queen_error *err)
{
    char depth[24], lim[24];
    snprintf(depth, sizeof depth, "%lld", min_depth);
    snprintf(lim, sizeof lim, "%d", limit);
    const char *params[] = {NULL, queue, min_depth > 0 ? depth : NULL, limit != 0 ? lim : NULL};
    return engine_call_body(q, tenant, "queen_partitions", SQL_ALL_PARTITIONS, 4, params, result_json, err);
}
