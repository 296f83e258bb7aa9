/* maintenance: the maintenance switch (queen.h, "Maintenance mode"; sql/system_maintenance.sql):
 * the public get/set of it and of pop maintenance (pops only), and the
 * cached read every push and pop consults. The
 * switch lives in the database so that all brokers agree; each handle keeps
 * the last answer and re-reads it when it is older than
 * MAINTENANCE_RECHECK_MS, one caller at a time (the others use the last
 * answer meanwhile, so a burst of requests costs one read). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Half a second: with the read's own latency, a switch reaches every broker
 * within a second. */
#define MAINTENANCE_RECHECK_MS 500

#define SQL_MAINTENANCE "SELECT queen.system_maintenance_v1()::text"
#define SQL_MAINTENANCE_SET "SELECT queen.system_maintenance_set_v1($1::boolean)::text"
#define SQL_POP_MAINTENANCE_SET "SELECT queen.system_pop_maintenance_set_v1($1::boolean)::text"

/* The answer's member "name": true, from text PostgreSQL rendered
 * ({"since": ..., "popSince": ..., "maintenance": true, "popMaintenance":
 * false} in jsonb's key order; the leading quote keeps "maintenance" from
 * matching inside "popMaintenance", whose M is upper case anyway). */
static bool answer_is_on(const char *text, const char *member)
{
    return text != NULL && strstr(text, member) != NULL;
}

static void remember(queen *q, const char *text)
{
    atomic_store(&q->maintenance.on, answer_is_on(text, "\"maintenance\": true"));
    atomic_store(&q->maintenance.pops_off, answer_is_on(text, "\"popMaintenance\": true"));
    atomic_store(&q->maintenance.checked_ms, engine_now_ms());
}

/* Reads the switches again when the last read is stale (one caller at a
 * time). */
static void refresh(queen *q)
{
    long long now = engine_now_ms();
    if (now - atomic_load(&q->maintenance.checked_ms) < MAINTENANCE_RECHECK_MS)
        return;
    bool idle = false;
    if (!atomic_compare_exchange_strong(&q->maintenance.refreshing, &idle, true))
        return;
    char *text = NULL;
    queen_error err;
    if (sql_call_text(q->pool, "queen_maintenance", SQL_MAINTENANCE, 0, NULL, &text, &err) == 0)
        remember(q, text);
    free(text);
    atomic_store(&q->maintenance.refreshing, false);
}

bool engine_in_maintenance(queen *q)
{
    refresh(q);
    return atomic_load(&q->maintenance.on);
}

bool engine_pops_paused(queen *q)
{
    refresh(q);
    return atomic_load(&q->maintenance.on) || atomic_load(&q->maintenance.pops_off);
}

int engine_refuse_push_in_maintenance(queen *q, queen_error *err)
{
    if (!engine_in_maintenance(q))
        return 0;
    queen_error_set(err, QUEEN_ERR_UNAVAILABLE, "maintenance",
                    "the broker is in maintenance mode: pushes are refused until it ends; retry later");
    return -1;
}

int queen_maintenance(queen *q, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!engine_enter(q, err))
        return -1;
    int rc = sql_call_text(q->pool, "queen_maintenance", SQL_MAINTENANCE, 0, NULL, result_json, err);
    if (rc == 0)
        remember(q, *result_json);
    engine_leave(q);
    return rc;
}

int queen_maintenance_set(queen *q, bool enabled, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!engine_enter(q, err))
        return -1;
    const char *params[] = {enabled ? "true" : "false"};
    int rc = sql_call_text(q->pool, "queen_maintenance_set", SQL_MAINTENANCE_SET, 1, params, result_json, err);
    if (rc == 0)
        remember(q, *result_json);
    engine_leave(q);
    return rc;
}

int queen_pop_maintenance_set(queen *q, bool enabled, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (!engine_enter(q, err))
        return -1;
    const char *params[] = {enabled ? "true" : "false"};
    int rc = sql_call_text(q->pool, "queen_pop_maintenance_set", SQL_POP_MAINTENANCE_SET, 1, params, result_json, err);
    if (rc == 0)
        remember(q, *result_json);
    engine_leave(q);
    return rc;
}
