/* dlq: the dead-letter calls of libqueen (queen.h, "Dead letters"): list,
 * requeue, delete. One prepared statement each, calling sql/log_dlq.sql; SQL judges
 * every argument. */
#include <stdio.h>

#include "engine.h"

#define SQL_DLQ_LIST "SELECT queen.log_dlq_list_v1($1::uuid, $2, $3, $4, $5::integer, $6::bigint)::text"
#define SQL_DLQ_REQUEUE "SELECT queen.log_dlq_requeue_v1($1::uuid, $2, $3::jsonb, $4::integer)::text"
#define SQL_DLQ_DELETE "SELECT queen.log_dlq_delete_v1($1::uuid, $2::bigint, $3)::text"

int queen_dlq_list(queen *q, const char *tenant, const queen_dlq_query *query, char **result_json, queen_error *err)
{
    static const queen_dlq_query all = {0};
    const queen_dlq_query *o = query ? query : &all;
    char limit[24], after[24];
    const char *params[] = {NULL,
                            o->queue,
                            o->partition,
                            o->consumer_group,
                            engine_int_or_null(limit, sizeof limit, o->limit),
                            engine_int_or_null(after, sizeof after, o->after)};
    return engine_open_answer(q, tenant,
                              engine_call_body(q, tenant, "queen_dlq_list", SQL_DLQ_LIST, 6, params, result_json, err),
                              result_json, err);
}

int queen_dlq_requeue(queen *q, const char *tenant, const char *queue, const char *ids_json, int max,
                      char **result_json, queen_error *err)
{
    char mx[24];
    const char *params[] = {NULL, queue, ids_json, engine_int_or_null(mx, sizeof mx, max)};
    return engine_call_body(q, tenant, "queen_dlq_requeue", SQL_DLQ_REQUEUE, 4, params, result_json, err);
}

int queen_dlq_delete(queen *q, const char *tenant, long long id, const char *queue, char **result_json,
                     queen_error *err)
{
    char idt[24];
    const char *params[] = {NULL, engine_int_or_null(idt, sizeof idt, id), queue};
    return engine_call_body(q, tenant, "queen_dlq_delete", SQL_DLQ_DELETE, 3, params, result_json, err);
}
