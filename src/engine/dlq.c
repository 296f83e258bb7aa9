/* dlq: the dead-letter calls of libqueen (queen.h, "Dead letters"): list,
 * requeue, delete. One row each of the call table (calls.c), calling
 * sql/log_dlq.sql; SQL judges every argument. The listing's sealed payloads are
 * opened (ENGINE_CALL_OPEN). */
#include "calls.h"

int queen_dlq_list(queen *q, const char *tenant, const queen_dlq_query *query, char **result_json, queen_error *err)
{
    static const queen_dlq_query all = {0};
    const queen_dlq_query *o = query ? query : &all;
    return engine_call(q, CALL_DLQ_LIST, tenant,
                       ENGINE_ARGS(ENGINE_S(o->queue), ENGINE_S(o->partition), ENGINE_S(o->consumer_group),
                                   ENGINE_N(o->limit), ENGINE_N(o->after)),
                       result_json, err);
}

int queen_dlq_requeue(queen *q, const char *tenant, const char *queue, const char *ids_json, int max,
                      char **result_json, queen_error *err)
{
    return engine_call(q, CALL_DLQ_REQUEUE, tenant, ENGINE_ARGS(ENGINE_S(queue), ENGINE_S(ids_json), ENGINE_N(max)),
                       result_json, err);
}

int queen_dlq_delete(queen *q, const char *tenant, long long id, const char *queue, char **result_json,
                     queen_error *err)
{
    return engine_call(q, CALL_DLQ_DELETE, tenant, ENGINE_ARGS(ENGINE_N(id), ENGINE_S(queue)), result_json, err);
}
