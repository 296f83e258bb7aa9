/* groups: the consumer-group calls of libqueen (queen.h, "Consumer groups"):
 * the view with lag, the lagging view, seek, delete, the subscription start.
 * One row each of the call table (calls.c), calling sql/log_groups.sql; SQL judges
 * every argument. */
#include "calls.h"

/* min_lag_seconds < 0: every group (SQL NULL). */
int queen_groups(queen *q, const char *tenant, const char *group, int min_lag_seconds, char **result_json,
                 queen_error *err)
{
    return engine_call(q, CALL_GROUPS, tenant, ENGINE_ARGS(ENGINE_S(group), ENGINE_N(min_lag_seconds)), result_json,
                       err);
}

int queen_group_seek(queen *q, const char *tenant, const char *group, const char *queue, const char *to,
                     char **result_json, queen_error *err)
{
    return engine_call(q, CALL_GROUP_SEEK, tenant, ENGINE_ARGS(ENGINE_S(group), ENGINE_S(queue), ENGINE_S(to)),
                       result_json, err);
}

int queen_group_delete(queen *q, const char *tenant, const char *group, const char *queue, char **result_json,
                       queen_error *err)
{
    return engine_call(q, CALL_GROUP_DELETE, tenant, ENGINE_ARGS(ENGINE_S(group), ENGINE_S(queue)), result_json, err);
}

int queen_group_subscription(queen *q, const char *tenant, const char *group, const char *from, char **result_json,
                             queen_error *err)
{
    return engine_call(q, CALL_GROUP_SUBSCRIPTION, tenant, ENGINE_ARGS(ENGINE_S(group), ENGINE_S(from)), result_json,
                       err);
}
