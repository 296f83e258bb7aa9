/* calls: the table of the engine's plain SQL calls and their one caller
 * (calls.h). SQL judges every argument; this only carries them. */
#include "calls.h"

#include <stdio.h>
#include <string.h>

#include "engine.h"

#define T ENGINE_CALL_TENANT
#define B ENGINE_CALL_BODY
#define O ENGINE_CALL_OPEN

const engine_call_row engine_calls[ENGINE_CALL_COUNT] = {
    [CALL_OVERVIEW] = {"queen_overview", "SELECT queen.log_overview_v1($1::uuid)::text", "", T | B},
    [CALL_LABELS] = {"queen_labels", "SELECT queen.log_labels_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_QUEUE_DETAIL] = {"queen_queue_detail", "SELECT queen.log_queue_detail_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_QUEUE_PARTITIONS] = {"queen_queue_partitions", "SELECT queen.log_queue_partitions_v1($1::uuid, $2)::text",
                               "s", T | B},
    [CALL_QUEUE_CLEAR] = {"queen_queue_clear", "SELECT queen.log_queue_clear_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_PARTITIONS] = {"queen_partitions",
                         "SELECT queen.log_partitions_v1($1::uuid, $2, $3::bigint, $4::integer)::text", "spz", T | B},

    [CALL_STATUS_QUEUES] = {"queen_status_queues",
                            "SELECT queen.log_status_queues_v1($1::uuid, $2, $3, $4::integer, $5::integer)::text",
                            "sszi", T | B},
    [CALL_STATUS_QUEUE] = {"queen_status_queue", "SELECT queen.log_status_queue_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_STATUS_ANALYTICS] = {"queen_status_analytics",
                               "SELECT queen.log_status_analytics_v1($1::uuid, $2, $3, $4, $5, $6, $7)::text",
                               "ssssss", T | B},
    [CALL_MESSAGE_DLQ] = {"queen_message_dlq", "SELECT queen.log_message_dlq_v1($1::uuid, $2, $3)::text", "ss",
                          T | B},
    [CALL_PG_STATS] = {"queen_pg_stats", "SELECT queen.system_pg_stats_v1()::text", "", 0},

    [CALL_GROUPS] = {"queen_groups", "SELECT queen.log_groups_v1($1::uuid, $2, $3::integer)::text", "sn", T | B},
    [CALL_GROUP_SEEK] = {"queen_group_seek", "SELECT queen.log_group_seek_v1($1::uuid, $2, $3, $4)::text", "sss",
                         T | B},
    [CALL_GROUP_DELETE] = {"queen_group_delete", "SELECT queen.log_group_delete_v1($1::uuid, $2, $3)::text", "ss",
                           T | B},
    [CALL_GROUP_SUBSCRIPTION] = {"queen_group_subscription",
                                 "SELECT queen.log_group_subscription_v1($1::uuid, $2, $3)::text", "ss", T | B},

    [CALL_TRACE_ADD] = {"queen_trace_add",
                        "SELECT queen.log_trace_add_v1($1::uuid, $2::uuid, $3, $4, $5::jsonb)::text", "sssj", T | B},
    [CALL_TRACES_BY_MESSAGE] = {"queen_traces_by_message",
                                "SELECT queen.log_traces_by_message_v1($1::uuid, $2::uuid, $3)::text", "ss", T | B},
    [CALL_TRACES_BY_NAME] = {"queen_traces_by_name",
                             "SELECT queen.log_traces_by_name_v1($1::uuid, $2, $3::integer, $4::bigint)::text", "szz",
                             T | B},
    [CALL_TRACE_NAMES] = {"queen_trace_names", "SELECT queen.log_trace_names_v1($1::uuid, $2::integer)::text", "z",
                          T | B},

    [CALL_DLQ_LIST] = {"queen_dlq_list",
                       "SELECT queen.log_dlq_list_v1($1::uuid, $2, $3, $4, $5::integer, $6::bigint)::text", "ssszz",
                       T | B | O},
    [CALL_DLQ_REQUEUE] = {"queen_dlq_requeue",
                          "SELECT queen.log_dlq_requeue_v1($1::uuid, $2, $3::jsonb, $4::integer)::text", "sjz", T | B},
    [CALL_DLQ_DELETE] = {"queen_dlq_delete", "SELECT queen.log_dlq_delete_v1($1::uuid, $2::bigint, $3)::text", "zs",
                         T | B},

    [CALL_MESSAGES_LIST] = {"queen_messages_list",
                            "SELECT queen.log_messages_list_v1($1::uuid, $2, $3, $4, $5::integer, $6::bigint)::text",
                            "ssszz", T | B | O},
    [CALL_MESSAGE_GET] = {"queen_message_get", "SELECT queen.log_message_get_v1($1::uuid, $2, $3, $4)::text", "sss",
                          T | B | O},
    [CALL_MESSAGE_DELETE] = {"queen_message_delete",
                             "SELECT queen.log_message_delete_v1($1::uuid, $2, $3, $4)::text", "sss", T | B},
    [CALL_MESSAGE_AT] = {"queen_message_at", "SELECT queen.log_message_at_v1($1::uuid, $2, $3, $4)::text", "sss",
                         T | B | O},
    [CALL_MESSAGE_DELETE_AT] = {"queen_message_delete_at",
                                "SELECT queen.log_message_delete_at_v1($1::uuid, $2, $3)::text", "ss", T | B},
    [CALL_MESSAGE_RETRY] = {"queen_message_retry", "SELECT queen.log_message_retry_v1($1::uuid, $2, $3)::text", "ss",
                            T | B},

    [CALL_STREAMS_REGISTER] = {"queen_streams_register", "SELECT queen.streams_register_v1($1::uuid, $2::jsonb)::text",
                               "j", T | B},
    [CALL_STREAMS_STATE_GET] = {"queen_streams_state_get",
                                "SELECT queen.streams_state_get_v1($1::uuid, $2::jsonb)::text", "j", T | B},

    [CALL_STREAM_WINDOW_DEFINE] = {"queen_stream_window_define",
        "SELECT queen.stream_window_define_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_STREAM_WINDOW_POLL] = {"queen_stream_window_poll",
        "SELECT queen.stream_window_poll_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_STREAM_WINDOW_ACK] = {"queen_stream_window_ack",
        "SELECT queen.stream_window_ack_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_STREAM_WINDOW_RENEW] = {"queen_stream_window_renew",
        "SELECT queen.stream_window_renew_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_STREAM_WINDOW_SEEK] = {"queen_stream_window_seek",
        "SELECT queen.stream_window_seek_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_STREAM_WINDOW_LIST] = {"queen_stream_window_list",
        "SELECT queen.stream_window_list_v1($1::uuid)::text", "", T | B},
    [CALL_STREAM_WINDOW_STATS] = {"queen_stream_window_stats",
        "SELECT queen.stream_window_stats_v1($1::uuid)::text", "", T | B},
    [CALL_STREAM_WINDOW_GET] = {"queen_stream_window_get",
        "SELECT queen.stream_window_get_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_STREAM_WINDOW_CONSUMERS] = {"queen_stream_window_consumers",
        "SELECT queen.stream_window_consumers_v1($1::uuid, $2)::text", "s", T | B},
    [CALL_STREAM_WINDOW_DELETE] = {"queen_stream_window_delete",
        "SELECT queen.stream_window_delete_v1($1::uuid, $2)::text", "s", T | B},

    [CALL_ACK] = {"queen_ack", "SELECT queen.log_ack_v1($1::uuid, $2::jsonb, $3)::text", "js", T | B},
    [CALL_LEASE_EXTEND] = {"queen_lease_extend", "SELECT queen.log_lease_extend_v1($1::uuid, $2, $3::integer)::text",
                           "sz", T | B},
    [CALL_QUEUES_OF] = {"queen_queues_of", "SELECT queen.log_queues_of_v1($1::uuid, $2::jsonb)::text", "j", T | B},
    [CALL_CONFIGURE] = {"queen_configure", "SELECT queen.log_configure_v1($1::uuid, $2, $3::jsonb, $4, $5, $6)::text",
                        "sjsss", T | B},
    [CALL_QUEUES] = {"queen_queues", "SELECT queen.log_queues_v1($1::uuid)::text", "", T | B},
    [CALL_QUEUE_DELETE] = {"queen_queue_delete", "SELECT queen.log_queue_delete_v1($1::uuid, $2)::text", "s", T | B},

    [CALL_KV_LIST] = {"queen_kv_list",
                      "SELECT queen.kv_list_v1($1::uuid, $2, $3, $4, $5::integer, $6::boolean, $7::boolean)::text",
                      "ssspbb", T},
    /* The route answers {"namespaces": [...]}; PostgreSQL wraps it so the
     * edge passes the text through like every other body. */
    [CALL_KV_NAMESPACES] = {"queen_kv_namespaces",
                            "SELECT jsonb_build_object('namespaces', queen.kv_namespaces_v1($1::uuid))::text", "", T},
    /* The quota reader the broker's refresh uses, for one tenant: its one
     * element is the route's body. */
    [CALL_KV_QUOTA] = {"queen_kv_quota", "SELECT (queen.kv_quota_read_v1(ARRAY[$1::uuid]) -> 0)::text", "", T},
};

#undef T
#undef B
#undef O

/* Parameters of the widest row, the tenant included. */
#define CALL_MAX_PARAMS 8

/* The text of argument a of kind k in buf (NULL: SQL NULL); false when a
 * is not what k takes. */
static bool render(char k, const engine_arg *a, char *buf, size_t len, const char **out)
{
    bool text = k == 's' || k == 'j';
    if (a->is != (text ? 's' : 'n'))
        return false;
    switch (k) {
    case 's':
    case 'j':
        *out = a->s;
        return true;
    case 'z':
        *out = engine_int_or_null(buf, len, a->n);
        return true;
    case 'p':
    case 'n':
    case 'i':
        if ((k == 'p' && a->n <= 0) || (k == 'n' && a->n < 0)) {
            *out = NULL;
            return true;
        }
        snprintf(buf, len, "%lld", a->n);
        *out = buf;
        return true;
    case 'b':
        *out = a->n ? "true" : "false";
        return true;
    }
    return false;
}

int engine_call(queen *q, engine_call_id id, const char *tenant, const engine_arg *args, int nargs, char **out,
                queen_error *err)
{
    *out = NULL;
    const engine_call_row *row = (unsigned)id < ENGINE_CALL_COUNT ? &engine_calls[id] : NULL;
    bool tenanted = row != NULL && (row->flags & ENGINE_CALL_TENANT);
    int first = tenanted ? 1 : 0;
    const char *params[CALL_MAX_PARAMS];
    char numbers[CALL_MAX_PARAMS][24];
    bool fits = row != NULL && strlen(row->args) == (size_t)nargs && nargs + first <= CALL_MAX_PARAMS;
    for (int i = 0; fits && i < nargs; i++)
        fits = render(row->args[i], &args[i], numbers[i], sizeof numbers[i], &params[first + i]);
    if (!fits) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "call_mismatch", "engine call %d: arguments do not match its row",
                        (int)id);
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    if (tenanted) {
        params[0] = engine_enter_tenant(q, tenant, canon, err);
        if (params[0] == NULL)
            return -1;
    } else if (!engine_enter(q, err)) {
        return -1;
    }
    int rc = queen_call_text(q, row->name, row->sql, nargs + first, params, out, err);
    if (rc == 0 && *out == NULL && (row->flags & ENGINE_CALL_BODY)) {
        queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "%s returned NULL", row->name);
        rc = -1;
    }
    engine_leave(q);
    if (row->flags & ENGINE_CALL_OPEN)
        rc = engine_open_answer(q, tenant, rc, out, err);
    return rc;
}
