/* status: the dashboard reads of libqueen (queen.h, "Status"): the queue
 * list and one queue with counts from offsets, messages pushed per bucket,
 * moving one message to the dead letters, and the database's statistics.
 * One prepared statement each, calling sql/log_status.sql; SQL judges every argument. */
#include <stdio.h>

#include "engine.h"
#include "sqlcall.h"

#define SQL_QUEUES "SELECT queen.log_status_queues_v1($1::uuid, $2, $3, $4::integer, $5::integer)::text"
#define SQL_QUEUE "SELECT queen.log_status_queue_v1($1::uuid, $2)::text"
#define SQL_ANALYTICS "SELECT queen.log_status_analytics_v1($1::uuid, $2, $3, $4, $5, $6, $7)::text"
#define SQL_MESSAGE_DLQ "SELECT queen.log_message_dlq_v1($1::uuid, $2, $3)::text"
#define SQL_PG_STATS "SELECT queen.system_pg_stats_v1()::text"

int queen_status_queues(queen *q, const char *tenant, const char *namespace_, const char *task, int limit,
                        long long offset, char **result_json, queen_error *err)
{
    char lim[24], off[24];
    snprintf(lim, sizeof lim, "%d", limit);
    snprintf(off, sizeof off, "%lld", offset);
    const char *params[] = {NULL, namespace_, task, limit != 0 ? lim : NULL, off};
    return engine_call_body(q, tenant, "queen_status_queues", SQL_QUEUES, 5, params, result_json, err);
}

int queen_status_queue(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue};
    return engine_call_body(q, tenant, "queen_status_queue", SQL_QUEUE, 2, params, result_json, err);
}

int queen_status_analytics(queen *q, const char *tenant, const queen_analytics_query *query, char **result_json,
                           queen_error *err)
{
    const queen_analytics_query none = {0};
    const queen_analytics_query *a = query ? query : &none;
    const char *params[] = {NULL, a->from, a->to, a->interval, a->queue, a->namespace_, a->task};
    return engine_call_body(q, tenant, "queen_status_analytics", SQL_ANALYTICS, 7, params, result_json, err);
}

int queen_message_dlq(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                      char **result_json, queen_error *err)
{
    const char *params[] = {NULL, partition_id, transaction_id};
    return engine_call_body(q, tenant, "queen_message_dlq", SQL_MESSAGE_DLQ, 3, params, result_json, err);
}

int queen_pg_stats(queen *q, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!engine_enter(q, err))
        return -1;
    int rc = sql_call_text(q->pool, "queen_pg_stats", SQL_PG_STATS, 0, NULL, result_json, err);
    engine_leave(q);
    return rc;
}
