/* routes: the one static route table. Method, pattern, handler, family (the
 * error vocabulary, and whether the route is tenant-scoped), and what
 * authorisation reads (auth.c): the role the route needs at least, the
 * resources it names and the access it takes to them. First match of
 * path and method wins; a path that matches under another method is 405.
 * Data only: never a branch on a route here or anywhere else. A fixed path
 * comes before a capture that would take it (consumer-groups/lagging before
 * consumer-groups/:group, traces/names and traces/by-name/:traceName before
 * traces/:partitionId/:transactionId). No comment inside the table: a checker reads it.
 *
 * The one table of roles: docs/auth.md and docs/openapi.yaml
 * (x-queen-role) say the same, and a test holds both to it. read consumes
 * (gets, pops, acks), write also produces (puts, pushes, transactions,
 * traces), admin also changes its tenant's queues; operator alone acts on
 * the whole broker (maintenance stops every tenant's pushes, /metrics counts
 * every tenant's traffic), so no tenant's admin may. */
#include "routes.h"

const route http_routes[] = {
    {"GET", "/health", route_health, FAMILY_OPS, ROLE_NONE, RES_NONE, ACCESS_READ},
    {"GET", "/metrics", route_metrics_json, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"GET", "/metrics/prometheus", route_metrics_prometheus, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"GET", "/api/v1/system/maintenance", route_maintenance, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"POST", "/api/v1/system/maintenance", route_maintenance_set, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_WRITE},
    {"GET", "/api/v1/system/maintenance/pop", route_pop_maintenance, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"POST", "/api/v1/system/maintenance/pop", route_pop_maintenance_set, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_WRITE},
    {"GET", "/api/v1/status", route_status, FAMILY_OPS, ROLE_READ, RES_NONE, ACCESS_READ},
    {"GET", "/api/v1/analytics/system-metrics", route_system_metrics, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"GET", "/api/v1/analytics/worker-metrics", route_worker_metrics, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},
    {"GET", "/api/v1/analytics/postgres-stats", route_postgres_stats, FAMILY_OPS, ROLE_OPERATOR, RES_BROKER, ACCESS_READ},

    {"POST", "/api/v1/kv", route_kv_batch, FAMILY_KV, ROLE_READ, RES_KV_BATCH, ACCESS_READ},
    {"GET", "/api/v1/kv/:ns/*key", route_kv_get, FAMILY_KV, ROLE_READ, RES_KV_PATH, ACCESS_READ},
    {"PUT", "/api/v1/kv/:ns/*key", route_kv_put, FAMILY_KV, ROLE_WRITE, RES_KV_PATH, ACCESS_WRITE},
    {"DELETE", "/api/v1/kv/:ns/*key", route_kv_delete, FAMILY_KV, ROLE_WRITE, RES_KV_PATH, ACCESS_WRITE},
    {"GET", "/api/v1/resources/kv/namespaces", route_kv_namespaces, FAMILY_KV, ROLE_READ, RES_KV_ALL, ACCESS_READ},
    {"POST", "/api/v1/resources/kv/list", route_kv_list, FAMILY_KV, ROLE_READ, RES_KV_LIST, ACCESS_READ},
    {"GET", "/api/v1/resources/kv/quota", route_kv_quota, FAMILY_KV, ROLE_READ, RES_KV_ALL, ACCESS_READ},

    {"POST", "/api/v1/push", route_push, FAMILY_LOG, ROLE_WRITE, RES_QUEUE_PUSH, ACCESS_WRITE},
    {"GET", "/api/v1/pop", route_pop, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/pop/queue/:queue", route_pop, FAMILY_LOG, ROLE_READ, RES_QUEUE_PATH, ACCESS_READ},
    {"GET", "/api/v1/pop/queue/:queue/partition/:partition", route_pop, FAMILY_LOG, ROLE_READ, RES_QUEUE_PATH, ACCESS_READ},
    {"POST", "/api/v1/ack", route_ack, FAMILY_LOG, ROLE_READ, RES_PARTITION, ACCESS_READ},
    {"POST", "/api/v1/ack/batch", route_ack_batch, FAMILY_LOG, ROLE_READ, RES_PARTITIONS, ACCESS_READ},
    {"POST", "/api/v1/lease/:leaseId/extend", route_lease_extend, FAMILY_LOG, ROLE_READ, RES_LEASE_PATH, ACCESS_READ},
    {"POST", "/api/v1/configure", route_configure, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_BODY, ACCESS_WRITE},
    {"GET", "/api/v1/resources/queues", route_queues, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/queues/:queue", route_queue_detail, FAMILY_LOG, ROLE_READ, RES_QUEUE_PATH, ACCESS_READ},
    {"DELETE", "/api/v1/resources/queues/:queue", route_queue_delete, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_PATH, ACCESS_WRITE},
    {"GET", "/api/v1/resources/queues/:queue/partitions", route_queue_partitions, FAMILY_LOG, ROLE_READ, RES_QUEUE_PATH, ACCESS_READ},
    {"POST", "/api/v1/resources/queues/:queue/clear", route_queue_clear, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_PATH, ACCESS_WRITE},
    {"DELETE", "/api/v1/queues/:queue/clear", route_queue_clear, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_PATH, ACCESS_WRITE},
    {"GET", "/api/v1/resources/partitions", route_partitions, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/overview", route_overview, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/namespaces", route_namespaces, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/tasks", route_tasks, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/status/queues", route_status_queues, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/status/queues/:queue", route_status_queue, FAMILY_LOG, ROLE_READ, RES_QUEUE_PATH, ACCESS_READ},
    {"GET", "/api/v1/status/analytics", route_status_analytics, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"POST", "/api/v1/transaction", route_transaction, FAMILY_LOG, ROLE_WRITE, RES_TRANSACTION, ACCESS_WRITE},

    {"POST", "/streams/v1/queries", route_streams_register, FAMILY_LOG, ROLE_READ, RES_STREAM_QUERY, ACCESS_READ},
    {"POST", "/streams/v1/state/get", route_streams_state_get, FAMILY_LOG, ROLE_READ, RES_STREAM_STATE, ACCESS_READ},
    {"POST", "/streams/v1/cycle", route_streams_cycle, FAMILY_LOG, ROLE_READ, RES_STREAM_CYCLE, ACCESS_READ},
    {"POST", "/api/v1/stream/define", route_stream_window_define, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"POST", "/api/v1/stream/poll", route_stream_window_poll, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"POST", "/api/v1/stream/ack", route_stream_window_ack, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"POST", "/api/v1/stream/renew-lease", route_stream_window_renew, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"POST", "/api/v1/stream/seek", route_stream_window_seek, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"GET", "/api/v1/resources/streams", route_stream_window_list, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/streams/stats", route_stream_window_stats, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/streams/:name", route_stream_window_get, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/resources/streams/:name/consumers", route_stream_window_consumers, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"DELETE", "/api/v1/resources/streams/:name", route_stream_window_delete, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},

    {"GET", "/api/v1/dlq", route_dlq_list, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"DELETE", "/api/v1/dlq", route_dlq_delete_queue, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"POST", "/api/v1/dlq/requeue", route_dlq_requeue, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_BODY, ACCESS_WRITE},
    {"DELETE", "/api/v1/dlq/:id", route_dlq_delete_one, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},

    {"GET", "/api/v1/consumer-groups", route_groups, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/consumer-groups/lagging", route_groups_lagging, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/consumer-groups/:group", route_group, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"DELETE", "/api/v1/consumer-groups/:group", route_group_delete, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"POST", "/api/v1/consumer-groups/:group/subscription", route_group_subscription, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"DELETE", "/api/v1/consumer-groups/:group/queues/:queue", route_group_queue_delete, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_PATH2, ACCESS_WRITE},
    {"POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", route_group_seek, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_PATH2, ACCESS_WRITE},

    {"POST", "/api/v1/stats/refresh", route_stats_refresh, FAMILY_LOG, ROLE_READ, RES_NONE, ACCESS_READ},

    {"GET", "/api/v1/messages", route_messages, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/messages/:transactionId", route_message_get, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"DELETE", "/api/v1/messages/:transactionId", route_message_delete, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"GET", "/api/v1/messages/:partitionId/:transactionId", route_message_at, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"DELETE", "/api/v1/messages/:partitionId/:transactionId", route_message_delete_at, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"POST", "/api/v1/messages/:partitionId/:transactionId/retry", route_message_retry, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},
    {"POST", "/api/v1/messages/:partitionId/:transactionId/dlq", route_message_dlq, FAMILY_LOG, ROLE_ADMIN, RES_QUEUE_ALL, ACCESS_WRITE},

    {"POST", "/api/v1/traces", route_trace_add, FAMILY_LOG, ROLE_WRITE, RES_PARTITION, ACCESS_READ},
    {"GET", "/api/v1/traces/names", route_trace_names, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/traces/by-name/:traceName", route_traces_by_name, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},
    {"GET", "/api/v1/traces/:partitionId/:transactionId", route_traces_by_message, FAMILY_LOG, ROLE_READ, RES_QUEUE_ALL, ACCESS_READ},

    {"GET", "/", route_console_index, FAMILY_OPS, ROLE_NONE, RES_NONE, ACCESS_READ},
    {"GET", "/console/", route_console_index, FAMILY_OPS, ROLE_NONE, RES_NONE, ACCESS_READ},
    {"GET", "/console/*file", route_console_asset, FAMILY_OPS, ROLE_NONE, RES_NONE, ACCESS_READ},
};

const size_t http_route_count = sizeof http_routes / sizeof http_routes[0];
