/* streams: the stream calls of libqueen (queen.h, "Streams"): register a
 * query, read its state, commit a cycle. One prepared statement each,
 * calling sql/streams.sql; SQL judges every argument and owns every rule (the
 * cycle's push and ack are log_push.sql's and log_ack.sql's own, called from streams.sql).
 *
 * What the cycle adds here is what a push gets in queen_push: the refusal
 * under maintenance, the sealing of payloads for encrypted sink queues (the
 * body's push_items go to SQL as a separate argument, sealed, everything
 * else of the body as the caller wrote it), the NOTIFY deferred past the
 * commit and sent afterwards for the sink queues. */
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "engine.h"
#include "rawjson.h"

/* The settings run before the cycle (a materialized CTE): its pushes'
 * NOTIFY deferred (engine.h), no producer stamped. */
#define SQL_STREAMS_CYCLE                                                                                              \
    "WITH settings AS MATERIALIZED (SELECT set_config('queen.producer', '', true), " ENGINE_SQL_DEFER_NOTIFY ") "     \
    "SELECT queen.streams_cycle_v1($1::uuid, $2::jsonb, $3::jsonb)::text FROM settings"

int queen_streams_register(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAMS_REGISTER, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_streams_state_get(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAMS_STATE_GET, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

/* The body's push_items when it is a non-empty array, as a malloc'd copy of
 * its text; NULL when absent, empty, not an array (SQL refuses that) or out
 * of memory (*oom). */
static char *push_items_of(const char *body_json, bool *oom)
{
    *oom = false;
    rawjson_span items;
    if (!rawjson_member((rawjson_span){body_json, strlen(body_json)}, "push_items", &items))
        return NULL;
    items = rawjson_trim(items);
    rawjson_iter it;
    rawjson_span first;
    if (items.len == 0 || items.p[0] != '[' || !rawjson_open(&it, items, '[') || !rawjson_next(&it, NULL, &first))
        return NULL;
    char *copy = malloc(items.len + 1);
    if (copy == NULL) {
        *oom = true;
        return NULL;
    }
    memcpy(copy, items.p, items.len);
    copy[items.len] = '\0';
    return copy;
}

/* The push_results array of a committed cycle, as text for
 * engine_notify_pushed; NULL when none. */
static char *push_results_of(const char *result)
{
    rawjson_span r;
    if (!rawjson_member((rawjson_span){result, strlen(result)}, "push_results", &r) || r.len == 0)
        return NULL;
    char *copy = malloc(r.len + 1);
    if (copy != NULL) {
        memcpy(copy, r.p, r.len);
        copy[r.len] = '\0';
    }
    return copy;
}

int queen_streams_cycle(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    *result_json = NULL;
    if (body_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "streams_bad_request", "body_json is NULL");
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    const char *t = engine_enter_tenant(q, tenant, canon, err);
    if (t == NULL)
        return -1;
    bool oom = false;
    char *items = push_items_of(body_json, &oom), *sealed = NULL;
    int rc = 0;
    if (oom) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
        rc = -1;
    }
    if (rc == 0 && items != NULL) {
        rc = engine_refuse_push_in_maintenance(q, err);
        if (rc == 0)
            rc = engine_seal_items(q, t, items, &sealed, err);
    }
    if (rc == 0) {
        const char *params[] = {t, body_json, sealed};
        rc = queen_call_text(q, "queen_streams_cycle", SQL_STREAMS_CYCLE, 3, params, result_json, err);
        if (rc == 0 && *result_json == NULL) {
            queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "streams_cycle_v1 returned NULL");
            rc = -1;
        }
        if (rc == 0 && items != NULL) {
            char *pushed = push_results_of(*result_json);
            engine_notify_pushed(q, t, pushed);
            free(pushed);
        }
    }
    free(items);
    free(sealed);
    engine_leave(q);
    return rc;
}

/* ---- Stream windows (sql/stream_windows.sql): one SQL call each, the rules all there. */

int queen_stream_window_define(queen *q, const char *tenant, const char *body_json, char **result_json,
                               queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_DEFINE, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_stream_window_poll(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_POLL, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_stream_window_ack(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_ACK, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_stream_window_renew(queen *q, const char *tenant, const char *body_json, char **result_json,
                              queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_RENEW, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_stream_window_seek(queen *q, const char *tenant, const char *body_json, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_SEEK, tenant, ENGINE_ARGS(ENGINE_S(body_json)), result_json, err);
}

int queen_stream_window_list(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_LIST, tenant, ENGINE_NO_ARGS, result_json, err);
}

int queen_stream_window_stats(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_STATS, tenant, ENGINE_NO_ARGS, result_json, err);
}

int queen_stream_window_get(queen *q, const char *tenant, const char *name, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_GET, tenant, ENGINE_ARGS(ENGINE_S(name)), result_json, err);
}

int queen_stream_window_consumers(queen *q, const char *tenant, const char *name, char **result_json,
                                  queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_CONSUMERS, tenant, ENGINE_ARGS(ENGINE_S(name)), result_json, err);
}

int queen_stream_window_delete(queen *q, const char *tenant, const char *name, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_STREAM_WINDOW_DELETE, tenant, ENGINE_ARGS(ENGINE_S(name)), result_json, err);
}
