/* traces: the trace calls of libqueen (queen.h, "Traces"): record an event
 * against a message, look them up by message or by name. One row each of
 * the call table (calls.c), calling sql/log_traces.sql; SQL judges every argument. */
#include "calls.h"
#include "engine.h"

/* A partition id that is not a uuid would be PostgreSQL's own cast error
 * (a generic 400 with its prose): refused here by the same name SQL uses. */
static bool uuid_ok(const char *s, queen_error *err)
{
    char canon[QUEEN_TENANT_LEN + 1];
    /* queen_tenant_canonical is the project's one uuid judge; "" would be its default tenant */
    if (s != NULL && s[0] != '\0' && queen_tenant_canonical(s, canon) == 0)
        return true;
    queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_partition_id", "partitionId must be a uuid");
    return false;
}

int queen_trace_add(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                    const char *name, const char *data_json, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!uuid_ok(partition_id, err))
        return -1;
    return engine_call(q, CALL_TRACE_ADD, tenant,
                       ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id), ENGINE_S(name),
                                   ENGINE_S(data_json)),
                       result_json, err);
}

int queen_traces_by_message(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!uuid_ok(partition_id, err))
        return -1;
    return engine_call(q, CALL_TRACES_BY_MESSAGE, tenant,
                       ENGINE_ARGS(ENGINE_S(partition_id), ENGINE_S(transaction_id)), result_json, err);
}

int queen_traces_by_name(queen *q, const char *tenant, const char *name, int limit, long long after,
                         char **result_json, queen_error *err)
{
    return engine_call(q, CALL_TRACES_BY_NAME, tenant, ENGINE_ARGS(ENGINE_S(name), ENGINE_N(limit), ENGINE_N(after)),
                       result_json, err);
}

int queen_trace_names(queen *q, const char *tenant, int limit, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_TRACE_NAMES, tenant, ENGINE_ARGS(ENGINE_N(limit)), result_json, err);
}
