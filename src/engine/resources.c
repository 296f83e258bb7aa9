/* resources: the resource reads of libqueen (queen.h, "Resources"):
 * overview, labels, a queue's detail and partitions, the tenant's
 * partitions by depth, clearing a queue. One row each of the call table
 * (calls.c), calling sql/log_resources.sql; SQL judges every argument. */
#include "calls.h"

int queen_overview(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_OVERVIEW, tenant, ENGINE_NO_ARGS, result_json, err);
}

int queen_labels(queen *q, const char *tenant, const char *kind, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_LABELS, tenant, ENGINE_ARGS(ENGINE_S(kind)), result_json, err);
}

int queen_queue_detail(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUE_DETAIL, tenant, ENGINE_ARGS(ENGINE_S(queue)), result_json, err);
}

int queen_queue_partitions(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUE_PARTITIONS, tenant, ENGINE_ARGS(ENGINE_S(queue)), result_json, err);
}

int queen_queue_clear(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUE_CLEAR, tenant, ENGINE_ARGS(ENGINE_S(queue)), result_json, err);
}

int queen_partitions(queen *q, const char *tenant, const char *queue, long long min_depth, int limit,
                     char **result_json, queen_error *err)
{
    return engine_call(q, CALL_PARTITIONS, tenant, ENGINE_ARGS(ENGINE_S(queue), ENGINE_N(min_depth), ENGINE_N(limit)),
                       result_json, err);
}
