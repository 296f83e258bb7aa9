/* groups: the consumer-group calls of libqueen (queen.h, "Consumer groups"):
 * the view with lag, the lagging view, seek, delete, the subscription start. One prepared statement
 * each, calling sql/log_groups.sql; SQL judges every argument. */
#include <stdio.h>

#include "engine.h"

#define SQL_GROUPS "SELECT queen.log_groups_v1($1::uuid, $2, $3::integer)::text"
#define SQL_GROUP_SEEK "SELECT queen.log_group_seek_v1($1::uuid, $2, $3, $4)::text"
#define SQL_GROUP_DELETE "SELECT queen.log_group_delete_v1($1::uuid, $2, $3)::text"
#define SQL_GROUP_SUBSCRIPTION "SELECT queen.log_group_subscription_v1($1::uuid, $2, $3)::text"

int queen_groups(queen *q, const char *tenant, const char *group, int min_lag_seconds, char **result_json,
                 queen_error *err)
{
    char lag[24];
    if (min_lag_seconds >= 0)
        snprintf(lag, sizeof lag, "%d", min_lag_seconds);
    const char *params[] = {NULL, group, min_lag_seconds >= 0 ? lag : NULL};
    return engine_call_body(q, tenant, "queen_groups", SQL_GROUPS, 3, params, result_json, err);
}

int queen_group_seek(queen *q, const char *tenant, const char *group, const char *queue, const char *to,
                     char **result_json, queen_error *err)
{
    const char *params[] = {NULL, group, queue, to};
    return engine_call_body(q, tenant, "queen_group_seek", SQL_GROUP_SEEK, 4, params, result_json, err);
}

int queen_group_delete(queen *q, const char *tenant, const char *group, const char *queue, char **result_json,
                       queen_error *err)
{
    const char *params[] = {NULL, group, queue};
    return engine_call_body(q, tenant, "queen_group_delete", SQL_GROUP_DELETE, 3, params, result_json, err);
}

int queen_group_subscription(queen *q, const char *tenant, const char *group, const char *from, char **result_json,
                             queen_error *err)
{
    const char *params[] = {NULL, group, from};
    return engine_call_body(q, tenant, "queen_group_subscription", SQL_GROUP_SUBSCRIPTION, 3, params, result_json,
                            err);
}
