/* status: the dashboard reads of libqueen (queen.h, "Status"): the queue
 * list and one queue with counts from offsets, messages pushed per bucket,
 * moving one message to the dead letters, and the database's statistics.
 * One row each of the call table (calls.c), calling sql/log_status.sql; SQL judges
 * every argument. */
#include "calls.h"

int queen_status_queues(queen *q, const char *tenant, const char *namespace_, const char *task, int limit,
                        long long offset, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STATUS_QUEUES, tenant,
                       ENGINE_ARGS(ENGINE_S(namespace_), ENGINE_S(task), ENGINE_N(limit), ENGINE_N(offset)),
                       result_json, err);
}

int queen_status_queue(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STATUS_QUEUE, tenant, ENGINE_ARGS(ENGINE_S(queue)), result_json, err);
}

int queen_status_analytics(queen *q, const char *tenant, const queen_analytics_query *query, char **result_json,
                           queen_error *err)
{
    const queen_analytics_query none = {0};
    const queen_analytics_query *a = query ? query : &none;
    return engine_call(q, CALL_STATUS_ANALYTICS, tenant,
                       ENGINE_ARGS(ENGINE_S(a->from), ENGINE_S(a->to), ENGINE_S(a->interval), ENGINE_S(a->queue),
                                   ENGINE_S(a->namespace_), ENGINE_S(a->task)),
                       result_json, err);
}

int queen_message_dlq(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                      char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_DLQ, tenant, ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id)),
                       result_json, err);
}

int queen_pg_stats(queen *q, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_PG_STATS, NULL, ENGINE_NO_ARGS, result_json, err);
}
