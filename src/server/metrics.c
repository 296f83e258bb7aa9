/* metrics: request counters and latency histograms per route, lock-free
 * (atomics), and their two renderings (see metrics.h). Never calls libpq:
 * the engine's figures come from queen_stats_json. */
#include "metrics.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging.h"

/* The route table is static and small; one slot more for unmatched paths. */
#define MAX_ROUTES 48
#define MAX_STATUS 600

/* Upper bounds in seconds. Long polls land in the top buckets by design
 * (their duration includes the wait). */
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                0.25,   0.5,   1,      2.5,   5,    10,    30,    60};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

typedef struct route_figures {
    atomic_ulong by_status[MAX_STATUS];
    atomic_ulong bucket[NBOUNDS + 1]; /* per bucket, not cumulative; last = +Inf */
    atomic_ullong sum_us;
    atomic_ulong count;
} route_figures;

static route_figures figures[MAX_ROUTES + 1];

static size_t slot_of(const route *r)
{
    if (r == NULL)
        return MAX_ROUTES;
    size_t i = (size_t)(r - http_routes);
    return i < MAX_ROUTES ? i : MAX_ROUTES;
}

void metrics_init(void)
{
    if (http_route_count > MAX_ROUTES)
        log_warn("metrics: %zu routes, only %d counted separately", http_route_count, MAX_ROUTES);
    for (size_t i = 0; i <= MAX_ROUTES; i++) {
        for (size_t s = 0; s < MAX_STATUS; s++)
            atomic_store(&figures[i].by_status[s], 0);
        for (size_t b = 0; b <= NBOUNDS; b++)
            atomic_store(&figures[i].bucket[b], 0);
        atomic_store(&figures[i].sum_us, 0);
        atomic_store(&figures[i].count, 0);
    }
}

void metrics_record(const route *r, unsigned status, double seconds)
{
    route_figures *f = &figures[slot_of(r)];
    atomic_fetch_add(&f->by_status[status < MAX_STATUS ? status : 0], 1);
    size_t b = 0;
    while (b < NBOUNDS && seconds > bounds[b])
        b++;
    atomic_fetch_add(&f->bucket[b], 1);
    atomic_fetch_add(&f->sum_us, (unsigned long long)(seconds * 1e6));
    atomic_fetch_add(&f->count, 1);
}

static const char *slot_method(size_t i)
{
    return i < http_route_count && i < MAX_ROUTES ? http_routes[i].method : "";
}

static const char *slot_pattern(size_t i)
{
    return i < http_route_count && i < MAX_ROUTES ? http_routes[i].pattern : "(unmatched)";
}

static bool slot_used(size_t i)
{
    return i == MAX_ROUTES || i < http_route_count;
}

/* ---- JSON ------------------------------------------------------------------ */

char *metrics_json(server *srv)
{
    json_t *requests = json_array(), *latency = json_array();
    for (size_t i = 0; i <= MAX_ROUTES; i++) {
        if (!slot_used(i))
            continue;
        route_figures *f = &figures[i];
        for (size_t s = 0; s < MAX_STATUS; s++) {
            unsigned long n = atomic_load(&f->by_status[s]);
            if (n > 0)
                json_array_append_new(requests, json_pack("{s:s, s:s, s:i, s:I}", "method", slot_method(i), "route",
                                                          slot_pattern(i), "status", (int)s, "count",
                                                          (json_int_t)n));
        }
        unsigned long count = atomic_load(&f->count);
        if (count == 0)
            continue;
        json_t *buckets = json_object();
        unsigned long cumulative = 0;
        for (size_t b = 0; b < NBOUNDS; b++) {
            char le[32];
            snprintf(le, sizeof le, "%g", bounds[b]);
            cumulative += atomic_load(&f->bucket[b]);
            json_object_set_new(buckets, le, json_integer((json_int_t)cumulative));
        }
        json_array_append_new(latency, json_pack("{s:s, s:s, s:I, s:f, s:o}", "method", slot_method(i), "route",
                                                 slot_pattern(i), "count", (json_int_t)count, "sumSeconds",
                                                 (double)atomic_load(&f->sum_us) / 1e6, "buckets", buckets));
    }
    json_t *http = json_pack("{s:o, s:o, s:i, s:i}", "requests", requests, "latency", latency, "longPollsWaiting",
                             atomic_load(&srv->nsuspended), "inFlight", atomic_load(&srv->inflight));
    char *head = http ? json_dumps(http, JSON_COMPACT) : NULL;
    json_decref(http);
    char *engine = queen_stats_json(srv->engine);
    char *out = NULL;
    if (head == NULL || asprintf(&out, "{\"http\":%s,\"engine\":%s}", head, engine ? engine : "null") < 0)
        out = NULL;
    free(head);
    free(engine);
    return out;
}

/* ---- Prometheus text format ---------------------------------------------- */

/* Label values are route patterns and engine names: escape \ " and newline
 * anyway, as the format requires. */
static void label(FILE *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', out);
        if (*v == '\n') {
            fputs("\\n", out);
            continue;
        }
        fputc(*v, out);
    }
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void http_families(FILE *out, server *srv)
{
    family(out, "queen_http_requests_total", "counter", "HTTP requests answered, by route pattern and status.");
    for (size_t i = 0; i <= MAX_ROUTES; i++) {
        if (!slot_used(i))
            continue;
        for (size_t s = 0; s < MAX_STATUS; s++) {
            unsigned long n = atomic_load(&figures[i].by_status[s]);
            if (n == 0)
                continue;
            fputs("queen_http_requests_total{method=\"", out);
            label(out, slot_method(i));
            fputs("\",route=\"", out);
            label(out, slot_pattern(i));
            fprintf(out, "\",status=\"%zu\"} %lu\n", s, n);
        }
    }
    family(out, "queen_http_request_duration_seconds", "histogram",
           "Time from a request's arrival to its answer, by route pattern (long polls include the wait).");
    for (size_t i = 0; i <= MAX_ROUTES; i++) {
        route_figures *f = &figures[i];
        unsigned long count = atomic_load(&f->count);
        if (!slot_used(i) || count == 0)
            continue;
        unsigned long cumulative = 0;
        for (size_t b = 0; b <= NBOUNDS; b++) {
            cumulative += atomic_load(&f->bucket[b]);
            fputs("queen_http_request_duration_seconds_bucket{method=\"", out);
            label(out, slot_method(i));
            fputs("\",route=\"", out);
            label(out, slot_pattern(i));
            if (b < NBOUNDS)
                fprintf(out, "\",le=\"%g\"} %lu\n", bounds[b], cumulative);
            else
                fprintf(out, "\",le=\"+Inf\"} %lu\n", cumulative);
        }
        for (int k = 0; k < 2; k++) {
            fprintf(out, "queen_http_request_duration_seconds_%s{method=\"", k == 0 ? "sum" : "count");
            label(out, slot_method(i));
            fputs("\",route=\"", out);
            label(out, slot_pattern(i));
            if (k == 0)
                fprintf(out, "\"} %.6f\n", (double)atomic_load(&f->sum_us) / 1e6);
            else
                fprintf(out, "\"} %lu\n", count);
        }
    }
    family(out, "queen_http_long_polls_waiting", "gauge", "Pop requests suspended waiting for a push.");
    fprintf(out, "queen_http_long_polls_waiting %d\n", atomic_load(&srv->nsuspended));
    family(out, "queen_http_requests_in_flight", "gauge", "Requests received and not yet answered.");
    fprintf(out, "queen_http_requests_in_flight %d\n", atomic_load(&srv->inflight));
}

/* The engine's scalar figures (queen_stats_json, src/engine/stats.c): JSON
 * path -> family. Scale turns milliseconds into Prometheus' base unit. */
static const struct {
    const char *path[2];
    const char *name, *type, *help;
    double scale;
} engine_scalars[] = {
    {{"pool", "size"}, "queen_pool_size", "gauge", "Database connections in the pool.", 1},
    {{"pool", "inUse"}, "queen_pool_in_use", "gauge", "Pooled connections handed out now.", 1},
    {{"pool", "waiting"}, "queen_pool_waiting", "gauge", "Callers waiting for a pooled connection now.", 1},
    {{"pool", "acquiredTotal"}, "queen_pool_acquired_total", "counter", "Pooled connections handed out.", 1},
    {{"pool", "timeoutsTotal"}, "queen_pool_timeouts_total", "counter",
     "Waits for a connection that ended unavailable (503).", 1},
    {{"pool", "reconnectsTotal"}, "queen_pool_reconnects_total", "counter", "Broken connections replaced.", 1},
    {{"pops", "total"}, "queen_pops_total", "counter", "Pop attempts (one per long-poll round).", 1},
    {{"pops", "empty"}, "queen_pops_empty_total", "counter", "Pop attempts that found nothing.", 1},
    {{"sweeper", "enabled"}, "queen_sweeper_enabled", "gauge", "1 when this process runs the sweeper.", 1},
    {{"sweeper", "deletedTotal"}, "queen_sweeper_deleted_total", "counter", "Expired kv rows deleted.", 1},
    {{"sweeper", "lagMs"}, "queen_sweeper_lag_seconds", "gauge",
     "Age of the oldest expired row seen by the last pass.", 1e-3},
    {{"sweeper", "cycles"}, "queen_sweeper_cycles_total", "counter", "Sweeper passes.", 1},
    {{"sweeper", "errors"}, "queen_sweeper_errors_total", "counter", "Sweeper passes that failed.", 1},
    {{"sweeper", "partitionsReclaimedTotal"}, "queen_sweeper_partitions_reclaimed_total", "counter",
     "Idle empty partitions reclaimed.", 1},
    {{"sweeper", "retentionDeletedTotal"}, "queen_sweeper_retention_deleted_total", "counter",
     "Messages deleted by retention.", 1},
    {{"sweeper", "lastCycleMs"}, "queen_sweeper_last_cycle_seconds", "gauge", "Duration of the last pass.", 1e-3},
    {{"notifier", "connected"}, "queen_notifier_connected", "gauge", "1 while the LISTEN connection is up.", 1},
    {{"notifier", "reconnects"}, "queen_notifier_reconnects_total", "counter", "LISTEN connection re-opened.", 1},
    {{"notifier", "notifies"}, "queen_notifier_notifies_total", "counter", "Push notifications received.", 1},
    {{"waiters", NULL}, "queen_push_waiters", "gauge", "Long-poll waiters registered with the engine.", 1},
};

static double leaf(const json_t *v)
{
    return json_is_boolean(v) ? (json_is_true(v) ? 1 : 0) : json_number_value(v);
}

/* One family with one label over an object of counters:
 * {"ok":3,"error":1} -> name{label="ok"} 3 ... */
static void labelled(FILE *out, const char *name, const char *help, const char *label_name, const json_t *obj)
{
    if (!json_is_object(obj))
        return;
    family(out, name, "counter", help);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        fprintf(out, "%s{%s=\"", name, label_name);
        label(out, k);
        fprintf(out, "\"} %.17g\n", leaf(v));
    }
}

static void engine_families(FILE *out, const json_t *stats)
{
    for (size_t i = 0; i < sizeof engine_scalars / sizeof engine_scalars[0]; i++) {
        const json_t *v = json_object_get(stats, engine_scalars[i].path[0]);
        if (engine_scalars[i].path[1] != NULL)
            v = json_object_get(v, engine_scalars[i].path[1]);
        if (!json_is_number(v) && !json_is_boolean(v))
            continue;
        family(out, engine_scalars[i].name, engine_scalars[i].type, engine_scalars[i].help);
        fprintf(out, "%s %.17g\n", engine_scalars[i].name, leaf(v) * engine_scalars[i].scale);
    }
    const json_t *kv = json_object_get(stats, "kv");
    const json_t *ops = json_object_get(kv, "ops");
    if (json_is_object(ops)) {
        family(out, "queen_kv_ops_total", "counter",
               "Single-op kv calls (the path routes, the typed API) by op and outcome.");
        const char *op, *outcome;
        json_t *outcomes, *v;
        json_object_foreach((json_t *)ops, op, outcomes)
        {
            json_object_foreach(outcomes, outcome, v)
            {
                fputs("queen_kv_ops_total{op=\"", out);
                label(out, op);
                fputs("\",outcome=\"", out);
                label(out, outcome);
                fprintf(out, "\"} %.17g\n", leaf(v));
            }
        }
    }
    labelled(out, "queen_kv_batches_total", "kv batch calls by outcome.", "outcome", json_object_get(kv, "batch"));
    labelled(out, "queen_kv_quota_refusals_total", "kv calls refused by quota, grant or rate limit, by reason.",
             "reason", json_object_get(kv, "quotaRefusals"));
    labelled(out, "queen_transactions_total", "Transaction bundles by outcome.", "outcome",
             json_object_get(stats, "transactions"));
}

char *metrics_prometheus(server *srv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return NULL;
    http_families(out, srv);
    char *engine = queen_stats_json(srv->engine);
    json_t *stats = engine ? json_loads(engine, 0, NULL) : NULL;
    free(engine);
    if (stats != NULL)
        engine_families(out, stats);
    json_decref(stats);
    fclose(out);
    return text;
}
