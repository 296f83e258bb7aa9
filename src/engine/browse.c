/* browse: the log-browsing calls of libqueen (queen.h, "Browsing the log"):
 * a partition's messages with their state, a transactionId's messages,
 * delete; one message named by partitionId and transactionId: get, delete,
 * retry (its dead letters requeued). One row each of the call table
 * (calls.c), calling sql/log_browse.sql; SQL judges every argument. Answers holding
 * messages have their sealed payloads opened (ENGINE_CALL_OPEN). */
#include "calls.h"

int queen_messages_list(queen *q, const char *tenant, const queen_messages_query *query, char **result_json,
                        queen_error *err)
{
    static const queen_messages_query none = {0};
    const queen_messages_query *o = query ? query : &none;
    return engine_call(q, CALL_MESSAGES_LIST, tenant,
                       ENGINE_ARGS(ENGINE_S(o->queue), ENGINE_S(o->partition), ENGINE_S(o->consumer_group),
                                   ENGINE_N(o->limit), ENGINE_N(o->after)),
                       result_json, err);
}

int queen_message_get(queen *q, const char *tenant, const char *transaction_id, const char *queue, const char *group,
                      char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_GET, tenant,
                       ENGINE_ARGS(ENGINE_S(transaction_id), ENGINE_S(queue), ENGINE_S(group)), result_json, err);
}

int queen_message_delete(queen *q, const char *tenant, const char *queue, const char *transaction_id,
                         const char *partition, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_DELETE, tenant,
                       ENGINE_ARGS(ENGINE_S(queue), ENGINE_S(transaction_id), ENGINE_S(partition)), result_json, err);
}

int queen_message_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                     const char *group, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_AT, tenant,
                       ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id), ENGINE_S(group)), result_json,
                       err);
}

int queen_message_delete_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_DELETE_AT, tenant, ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id)),
                       result_json, err);
}

int queen_message_retry(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                        char **result_json, queen_error *err)
{
    return engine_call(q, CALL_MESSAGE_RETRY, tenant, ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id)),
                       result_json, err);
}
