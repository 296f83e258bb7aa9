/* traces: the trace calls of libqueen (queen.h, "Traces"): record an event
 * against a message, look them up by message or by name. One prepared
 * statement each, calling sql/log_traces.sql; SQL judges every argument. */
#include <stdio.h>

#include "engine.h"

#define SQL_TRACE_ADD "SELECT queen.log_trace_add_v1($1::uuid, $2::uuid, $3, $4, $5::jsonb)::text"
#define SQL_TRACES_MSG "SELECT queen.log_traces_by_message_v1($1::uuid, $2::uuid, $3)::text"
#define SQL_TRACES_NAME "SELECT queen.log_traces_by_name_v1($1::uuid, $2, $3::integer, $4::bigint)::text"
#define SQL_TRACE_NAMES "SELECT queen.log_trace_names_v1($1::uuid, $2::integer)::text"

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
    const char *params[] = {NULL, partition_id, transaction_id, name, data_json};
    return engine_call_body(q, tenant, "queen_trace_add", SQL_TRACE_ADD, 5, params, result_json, err);
}

int queen_traces_by_message(queen *q, const char *tenant, const char *partition_id, const char *transaction_id,
                            char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!uuid_ok(partition_id, err))
        return -1;
    const char *params[] = {NULL, partition_id, transaction_id};
    return engine_call_body(q, tenant, "queen_traces_by_message", SQL_TRACES_MSG, 3, params, result_json, err);
}

int queen_traces_by_name(queen *q, const char *tenant, const char *name, int limit, long long after,
                         char **result_json, queen_error *err)
{
    char lim[24], aft[24];
    const char *params[] = {NULL, name, engine_int_or_null(lim, sizeof lim, limit),
                            engine_int_or_null(aft, sizeof aft, after)};
    return engine_call_body(q, tenant, "queen_traces_by_name", SQL_TRACES_NAME, 4, params, result_json, err);
}

int queen_trace_names(queen *q, const char *tenant, int limit, char **result_json, queen_error *err)
{
    char lim[24];
    snprintf(lim, sizeof lim, "%d", limit);
    const char *params[] = {NULL, limit != 0 ? lim : NULL};
    return engine_call_body(q, tenant, "queen_trace_names", SQL_TRACE_NAMES, 2, params, result_json, err);
}
