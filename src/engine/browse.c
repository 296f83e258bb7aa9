/* browse: the log-browsing calls of libqueen (queen.h, "Browsing the log"):
 * a partition's messages with their state, a transactionId's messages,
 * delete; one message named by partitionId and transactionId: get, delete,
 * retry (its dead letters requeued). One prepared statement each, calling sql/log_browse.sql; SQL judges every
 * argument. */
#include <stdio.h>

#include "engine.h"

#define SQL_MESSAGES "SELECT queen.log_messages_list_v1($1::uuid, $2, $3, $4, $5::integer, $6::bigint)::text"
#define SQL_MESSAGE_GET "SELECT queen.log_message_get_v1($1::uuid, $2, $3, $4)::text"
#define SQL_MESSAGE_DELETE "SELECT queen.log_message_delete_v1($1::uuid, $2, $3, $4)::text"
#define SQL_MESSAGE_AT "SELECT queen.log_message_at_v1($1::uuid, $2, $3, $4)::text"
#define SQL_MESSAGE_DELETE_AT "SELECT queen.log_message_delete_at_v1($1::uuid, $2, $3)::text"
#define SQL_MESSAGE_RETRY "SELECT queen.log_message_retry_v1($1::uuid, $2, $3)::text"

int queen_messages_list(queen *q, const char *tenant, const queen_messages_query *query, char **result_json,
                        queen_error *err)
{
    static const queen_messages_query none = {0};
    const queen_messages_query *o = query ? query : &none;
    char limit[24], after[24];
    const char *params[] = {NULL,
                            o->queue,
                            o->partition,
                            o->consumer_group,
                            engine_int_or_null(limit, sizeof limit, o->limit),
                            engine_int_or_null(after, sizeof after, o->after)};
    return engine_open_answer(
        q, tenant, engine_call_body(q, tenant, "queen_messages_list", SQL_MESSAGES, 6, params, result_json, err),
        result_json, err);
}

int queen_message_get(queen *q, const char *tenant, const char *transaction_id, const char *queue, const char *group,
                      char **result_json, queen_error *err)
{
    const char *params[] = {NULL, transaction_id, queue, group};
    return engine_open_answer(
        q, tenant, engine_call_body(q, tenant, "queen_message_get", SQL_MESSAGE_GET, 4, params, result_json, err),
        result_json, err);
}

int queen_message_delete(queen *q, const char *tenant, const char *queue, const char *transaction_id,
                         const char *partition, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue, transaction_id, partition};
    return engine_call_body(q, tenant, "queen_message_delete", SQL_MESSAGE_DELETE, 4, params, result_json, err);
}

int queen_message_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                     const char *group, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, partition_id, transaction_id, group};
    return engine_open_answer(
        q, tenant, engine_call_body(q, tenant, "queen_message_at", SQL_MESSAGE_AT, 4, params, result_json, err),
        result_json, err);
}

int queen_message_delete_at(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err)
{
    const char *params[] = {NULL, partition_id, transaction_id};
    return engine_call_body(q, tenant, "queen_message_delete_at", SQL_MESSAGE_DELETE_AT, 3, params, result_json, err);
}

int queen_message_retry(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                        char **result_json, queen_error *err)
{
    const char *params[] = {NULL, partition_id, transaction_id};
    return engine_call_body(q, tenant, "queen_message_retry", SQL_MESSAGE_RETRY, 3, params, result_json, err);
}
