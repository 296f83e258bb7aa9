/* routes: every handler of the HTTP edge, one prototype per route. The table
 * that binds them to methods and patterns is routes.c. */
#ifndef QUEEN_ROUTES_H
#define QUEEN_ROUTES_H

#include "http.h"

/* routes_ops.c */
void route_health(server *srv, const http_request *req, http_response *res);
void route_metrics_json(server *srv, const http_request *req, http_response *res);
void route_metrics_prometheus(server *srv, const http_request *req, http_response *res);

/* routes_kv.c */
void route_kv_batch(server *srv, const http_request *req, http_response *res);
void route_kv_get(server *srv, const http_request *req, http_response *res);
void route_kv_put(server *srv, const http_request *req, http_response *res);
void route_kv_delete(server *srv, const http_request *req, http_response *res);
void route_kv_namespaces(server *srv, const http_request *req, http_response *res);
void route_kv_list(server *srv, const http_request *req, http_response *res);
void route_kv_quota(server *srv, const http_request *req, http_response *res);

/* routes_log.c */
void route_push(server *srv, const http_request *req, http_response *res);
void route_pop(server *srv, const http_request *req, http_response *res);
void route_ack(server *srv, const http_request *req, http_response *res);
void route_ack_batch(server *srv, const http_request *req, http_response *res);
void route_lease_extend(server *srv, const http_request *req, http_response *res);
void route_configure(server *srv, const http_request *req, http_response *res);
void route_queues(server *srv, const http_request *req, http_response *res);
void route_queue_delete(server *srv, const http_request *req, http_response *res);

/* routes_dlq.c */
void route_dlq_list(server *srv, const http_request *req, http_response *res);
void route_dlq_requeue(server *srv, const http_request *req, http_response *res);
void route_dlq_delete_one(server *srv, const http_request *req, http_response *res);
void route_dlq_delete_queue(server *srv, const http_request *req, http_response *res);

/* routes_groups.c */
void route_groups(server *srv, const http_request *req, http_response *res);
void route_groups_lagging(server *srv, const http_request *req, http_response *res);
void route_group(server *srv, const http_request *req, http_response *res);
void route_group_delete(server *srv, const http_request *req, http_response *res);
void route_group_queue_delete(server *srv, const http_request *req, http_response *res);
void route_group_subscription(server *srv, const http_request *req, http_response *res);
void route_stats_refresh(server *srv, const http_request *req, http_response *res);
void route_group_seek(server *srv, const http_request *req, http_response *res);

/* routes_browse.c */
void route_messages(server *srv, const http_request *req, http_response *res);
void route_message_get(server *srv, const http_request *req, http_response *res);
void route_message_delete(server *srv, const http_request *req, http_response *res);
void route_message_at(server *srv, const http_request *req, http_response *res);
void route_message_delete_at(server *srv, const http_request *req, http_response *res);
void route_message_retry(server *srv, const http_request *req, http_response *res);
void route_message_dlq(server *srv, const http_request *req, http_response *res);

/* routes_traces.c */
void route_trace_add(server *srv, const http_request *req, http_response *res);
void route_traces_by_message(server *srv, const http_request *req, http_response *res);
void route_traces_by_name(server *srv, const http_request *req, http_response *res);
void route_trace_names(server *srv, const http_request *req, http_response *res);

/* routes_system.c */
void route_maintenance(server *srv, const http_request *req, http_response *res);
void route_maintenance_set(server *srv, const http_request *req, http_response *res);
void route_pop_maintenance(server *srv, const http_request *req, http_response *res);
void route_pop_maintenance_set(server *srv, const http_request *req, http_response *res);

/* routes_resources.c */
void route_overview(server *srv, const http_request *req, http_response *res);
void route_namespaces(server *srv, const http_request *req, http_response *res);
void route_tasks(server *srv, const http_request *req, http_response *res);
void route_queue_detail(server *srv, const http_request *req, http_response *res);
void route_queue_partitions(server *srv, const http_request *req, http_response *res);
void route_queue_clear(server *srv, const http_request *req, http_response *res);
void route_partitions(server *srv, const http_request *req, http_response *res);
void route_status(server *srv, const http_request *req, http_response *res);
void route_status_queues(server *srv, const http_request *req, http_response *res);
void route_status_queue(server *srv, const http_request *req, http_response *res);
void route_status_analytics(server *srv, const http_request *req, http_response *res);
void route_system_metrics(server *srv, const http_request *req, http_response *res);
void route_worker_metrics(server *srv, const http_request *req, http_response *res);
void route_postgres_stats(server *srv, const http_request *req, http_response *res);

/* routes_console.c */
void route_console_index(server *srv, const http_request *req, http_response *res);
void route_console_asset(server *srv, const http_request *req, http_response *res);

/* routes_streams.c */
void route_streams_register(server *srv, const http_request *req, http_response *res);
void route_streams_state_get(server *srv, const http_request *req, http_response *res);
void route_streams_cycle(server *srv, const http_request *req, http_response *res);
void route_stream_window_define(server *srv, const http_request *req, http_response *res);
void route_stream_window_poll(server *srv, const http_request *req, http_response *res);
void route_stream_window_ack(server *srv, const http_request *req, http_response *res);
void route_stream_window_renew(server *srv, const http_request *req, http_response *res);
void route_stream_window_seek(server *srv, const http_request *req, http_response *res);
void route_stream_window_list(server *srv, const http_request *req, http_response *res);
void route_stream_window_stats(server *srv, const http_request *req, http_response *res);
void route_stream_window_get(server *srv, const http_request *req, http_response *res);
void route_stream_window_consumers(server *srv, const http_request *req, http_response *res);
void route_stream_window_delete(server *srv, const http_request *req, http_response *res);

/* routes_txn.c */
void route_transaction(server *srv, const http_request *req, http_response *res);

#endif
