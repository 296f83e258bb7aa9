/* routes_status: the reference broker's dashboard routes (docs/compat.md,
 * "Dashboard status"): /api/v1/status/queues[/:queue],
 * /api/v1/status/analytics (tenant reads, sql/log_status.sql through
 * src/engine/status.c), and /api/v1/analytics/system-metrics,
 * worker-metrics and postgres-stats (the operator's: this broker's figures
 * and the database's, under the reference's names). Parse, call, render. */
#include "routes.h"

#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "errors.h"
#include "metrics.h"

static void answer(http_response *res, int rc, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, 200, text);
    else
        http_engine_error(res, FAMILY_LOG, err);
}

/* GET /api/v1/status/queues?namespace=&task=&limit=&offset= (from and to,
 * which the reference takes for its throughput history, are not read: the
 * counts are now's) */
void route_status_queues(server *srv, const http_request *req, http_response *res)
{
    char nsbuf[1024], taskbuf[1024];
    const char *ns = NULL, *task = NULL;
    long long limit = 0, offset = 0;
    if (!arg_str(req, "namespace", nsbuf, sizeof nsbuf, &ns, res, "log_bad_namespace") ||
        !arg_str(req, "task", taskbuf, sizeof taskbuf, &task, res, "log_bad_task") ||
        !arg_int(req, "limit", 1, 1000, &limit, res, "log_bad_limit") ||
        !arg_int(req, "offset", 0, INT_MAX, &offset, res, "log_bad_offset"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_status_queues(srv->engine, req->tenant, ns, task, (int)limit, offset, &result, &err);
    answer(res, rc, result, &err);
}

/* GET /api/v1/status/queues/:queue: 404 for a queue the tenant does not
 * have, as the reference answers "Queue not found". */
void route_status_queue(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    int rc = queen_status_queue(srv->engine, req->tenant, req->params[0], &result, &err);
    if (rc == 0 && result != NULL && strcmp(result, "null") == 0) {
        free(result);
        http_error(res, 404, "not_found", "log_no_such_queue", "the tenant has no queue of that name");
        return;
    }
    answer(res, rc, result, &err);
}

/* GET /api/v1/status/analytics?from=&to=&interval=&queue=&namespace=&task= */
void route_status_analytics(server *srv, const http_request *req, http_response *res)
{
    char from[64], to[64], interval[16], queue[1024], ns[1024], task[1024];
    queen_analytics_query a = {0};
    if (!arg_str(req, "from", from, sizeof from, &a.from, res, "log_bad_from") ||
        !arg_str(req, "to", to, sizeof to, &a.to, res, "log_bad_to") ||
        !arg_str(req, "interval", interval, sizeof interval, &a.interval, res, "log_bad_interval") ||
        !arg_str(req, "queue", queue, sizeof queue, &a.queue, res, "log_bad_queue") ||
        !arg_str(req, "namespace", ns, sizeof ns, &a.namespace_, res, "log_bad_namespace") ||
        !arg_str(req, "task", task, sizeof task, &a.task, res, "log_bad_task"))
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_status_analytics(srv->engine, req->tenant, &a, &result, &err);
    answer(res, rc, result, &err);
}

/* GET /api/v1/analytics/postgres-stats */
void route_postgres_stats(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    char *result = NULL;
    queen_error err;
    if (queen_pg_stats(srv->engine, &result, &err) != 0) {
        http_engine_error(res, FAMILY_OPS, &err);
        return;
    }
    http_text(res, 200, result);
}

/* ---- this broker's figures under the reference's names --------------------
 * The reference samples every worker of every server into a table and
 * answers time series; this broker keeps no history, so both routes answer
 * one point, now, for the broker that answers (its event loops share one
 * set of figures). from, to, hostname and workerId are accepted and not
 * read. */

static void now_iso(char out[32])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* The reference's {avg, min, max, last} of one sample: all four the value now. */
static json_t *sample(long long v)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "avg", (json_int_t)v, "min", (json_int_t)v, "max", (json_int_t)v,
                     "last", (json_int_t)v);
}

/* Resident and virtual bytes from /proc/self/statm; 0 when unreadable. */
static void memory_now(long long *rss, long long *vsz)
{
    *rss = *vsz = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return;
    long long pages = 0, resident = 0;
    if (fscanf(f, "%lld %lld", &pages, &resident) == 2) {
        long page = sysconf(_SC_PAGESIZE);
        *vsz = pages * page;
        *rss = resident * page;
    }
    fclose(f);
}

static json_t *time_range(const char *now)
{
    return json_pack("{s:s, s:s}", "from", now, "to", now);
}

/* GET /api/v1/analytics/system-metrics */
void route_system_metrics(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    queen_stats s;
    if (queen_stats_get(srv->engine, &s) != 0) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_UNAVAILABLE, "closing", "the broker is stopping");
        return;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long rss, vsz;
    memory_now(&rss, &vsz);
    char now[32], host[256] = "";
    now_iso(now);
    gethostname(host, sizeof host - 1);
    pipeline_figures *d = &srv->db_figures;
    json_t *metrics = json_pack(
        "{s:{s:o, s:o}, s:{s:o, s:o}, s:{s:o, s:o, s:o}, s:{s:{s:o, s:o}, s:{s:o, s:o}},"
        " s:{s:i, s:i, s:i, s:i}}",
        "cpu", "user_us", sample((long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec), "system_us",
        sample((long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec), "memory", "rss_bytes", sample(rss),
        "virtual_bytes", sample(vsz), "database", "pool_size", sample(s.pool.size), "pool_idle",
        sample(s.pool.size - s.pool.in_use), "pool_active", sample(s.pool.in_use), "threadpool", "db", "pool_size",
        sample(s.pool.size), "queue_size", sample(s.pool.waiting + atomic_load(&d->waiting)), "system", "pool_size",
        sample(srv->nloops), "queue_size", sample(atomic_load(&srv->inflight)), "eventLoops", "count", srv->nloops,
        "connections", atomic_load(&d->connections), "inFlight", atomic_load(&d->in_flight), "waiting",
        atomic_load(&d->waiting));
    json_t *point = json_pack("{s:s, s:i, s:o}", "timestamp", now, "sampleCount", 1, "metrics", metrics);
    json_t *replica = json_pack("{s:s, s:i, s:n, s:[o]}", "hostname", host, "port", srv->cfg->port, "workerId",
                                "timeSeries", point);
    http_json(res, 200,
              json_pack("{s:o, s:[o], s:i, s:i, s:i}", "timeRange", time_range(now), "replicas", replica,
                        "replicaCount", 1, "bucketMinutes", 1, "pointCount", 1));
}

/* GET /api/v1/analytics/worker-metrics: requests answered since the broker
 * started (the reference's counts are per minute bucket), and the state of
 * the event loops' database connections now. */
void route_worker_metrics(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    queen_stats s;
    if (queen_stats_get(srv->engine, &s) != 0) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_UNAVAILABLE, "closing", "the broker is stopping");
        return;
    }
    char now[32], host[256] = "";
    now_iso(now);
    gethostname(host, sizeof host - 1);
    pipeline_figures *d = &srv->db_figures;
    long long push = (long long)metrics_route_requests("POST", "/api/v1/push");
    long long pop = (long long)(metrics_route_requests("GET", "/api/v1/pop") +
                                metrics_route_requests("GET", "/api/v1/pop/queue/:queue") +
                                metrics_route_requests("GET", "/api/v1/pop/queue/:queue/partition/:partition"));
    long long ack = (long long)(metrics_route_requests("POST", "/api/v1/ack") +
                                metrics_route_requests("POST", "/api/v1/ack/batch"));
    long long txn = (long long)metrics_route_requests("POST", "/api/v1/transaction");
    long long conns = atomic_load(&d->connections), waiting = atomic_load(&d->waiting);
    json_t *point = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "timestamp", now, "pushRequests",
                              (json_int_t)push, "popRequests", (json_int_t)pop, "ackRequests", (json_int_t)ack,
                              "transactions", (json_int_t)txn, "dbConnections", (json_int_t)conns, "avgJobQueueSize",
                              (json_int_t)waiting, "maxJobQueueSize", (json_int_t)waiting, "minFreeSlots",
                              (json_int_t)(s.pool.size - s.pool.in_use), "avgFreeSlots",
                              (json_int_t)(s.pool.size - s.pool.in_use));
    json_t *worker = json_pack("{s:s, s:n, s:i, s:I, s:I, s:I, s:i, s:s}", "hostname", host, "workerId",
                               "eventLoops", srv->nloops, "dbConnections", (json_int_t)conns, "jobQueueSize",
                               (json_int_t)waiting, "freeSlots", (json_int_t)(s.pool.size - s.pool.in_use),
                               "inFlight", atomic_load(&d->in_flight), "lastSeen", now);
    json_t *summary = json_pack("{s:I, s:I, s:I, s:I, s:I}", "totalPushRequests", (json_int_t)push,
                                "totalPopRequests", (json_int_t)pop, "totalAckRequests", (json_int_t)ack,
                                "totalTransactions", (json_int_t)txn, "totalDbErrors",
                                (json_int_t)(atomic_load(&d->timeouts_total) + atomic_load(&d->reconnects_total)));
    http_json(res, 200,
              json_pack("{s:o, s:i, s:i, s:[o], s:[o], s:[], s:o}", "timeRange", time_range(now), "bucketMinutes", 1,
                        "pointCount", 1, "timeSeries", point, "workers", worker, "queues", "summary", summary));
}
