/* metrics: request counters and latency histograms per route, lock-free
 * (atomics), and their two renderings (see metrics.h). Never calls libpq:
 * the engine's figures come from queen_stats_get, rendered by walking the
 * engine's table of families (stats.h), as queen_stats_json does. */
#include "metrics.h"

#include "auth.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "queen_runtime.h"

/* The route table is static and small; after its slots, one per method for
 * requests no route took (unknown path, or a known path with another
 * method). Methods outside the standard set share OTHER: the method is the
 * client's text, and a label per spelling would let any client grow
 * /metrics without bound. MAX_ROUTES stays above the table's length (66
 * routes now; metrics_init warns when it is not). */
#define MAX_ROUTES 96
#define MAX_STATUS 600
static const char *const unmatched_methods[] = {"GET",     "HEAD",  "POST",  "PUT",  "DELETE",
                                                "OPTIONS", "PATCH", "TRACE", "CONNECT", "OTHER"};
#define NUNMATCHED (sizeof unmatched_methods / sizeof unmatched_methods[0])
#define NSLOTS (MAX_ROUTES + NUNMATCHED)

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

static route_figures figures[NSLOTS];

static size_t unmatched_index(const char *method)
{
    for (size_t k = 0; k + 1 < NUNMATCHED; k++)
        if (method != NULL && strcmp(method, unmatched_methods[k]) == 0)
            return k;
    return NUNMATCHED - 1;
}

const char *metrics_method_label(const char *method)
{
    return unmatched_methods[unmatched_index(method)];
}

static size_t slot_of(const route *r, const char *method)
{
    size_t i = r != NULL ? (size_t)(r - http_routes) : MAX_ROUTES;
    return i < MAX_ROUTES ? i : MAX_ROUTES + unmatched_index(method);
}

void metrics_init(void)
{
    if (http_route_count > MAX_ROUTES)
        log_warn("metrics: %zu routes, only %d counted separately", http_route_count, MAX_ROUTES);
    for (size_t i = 0; i < NSLOTS; i++) {
        for (size_t s = 0; s < MAX_STATUS; s++)
            atomic_store(&figures[i].by_status[s], 0);
        for (size_t b = 0; b <= NBOUNDS; b++)
            atomic_store(&figures[i].bucket[b], 0);
        atomic_store(&figures[i].sum_us, 0);
        atomic_store(&figures[i].count, 0);
    }
}

void metrics_record(const route *r, const char *method, unsigned status, double seconds)
{
    route_figures *f = &figures[slot_of(r, method)];
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
    if (i >= MAX_ROUTES)
        return unmatched_methods[i - MAX_ROUTES];
    return i < http_route_count ? http_routes[i].method : "";
}

static const char *slot_pattern(size_t i)
{
    return i < http_route_count && i < MAX_ROUTES ? http_routes[i].pattern : "(unmatched)";
}

static bool slot_used(size_t i)
{
    return i >= MAX_ROUTES || i < http_route_count;
}

unsigned long metrics_route_requests(const char *method, const char *pattern)
{
    for (size_t i = 0; i < http_route_count && i < MAX_ROUTES; i++)
        if (strcmp(http_routes[i].method, method) == 0 && strcmp(http_routes[i].pattern, pattern) == 0)
            return atomic_load(&figures[i].count);
    return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *connections_json(const server *srv)
{
    conn_figures f;
    conn_figures_get(srv, &f);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "open", (json_int_t)f.open, "cap", (json_int_t)f.cap,
                     "refused", (json_int_t)f.refused, "readTimeouts", (json_int_t)f.read_timeouts, "idleClosed",
                     (json_int_t)f.idle_closed, "writeTimeouts", (json_int_t)f.write_timeouts, "answerBytes",
                     (json_int_t)f.answer_bytes);
}

static json_t *database_json(server *srv)
{
    pipeline_figures *d = &srv->db_figures;
    return json_pack("{s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "connections", atomic_load(&d->connections),
                     "inFlight", atomic_load(&d->in_flight), "waiting", atomic_load(&d->waiting), "statementsTotal",
                     (json_int_t)atomic_load(&d->sent_total), "acquireTimeoutsTotal",
                     (json_int_t)atomic_load(&d->timeouts_total), "reconnectsTotal",
                     (json_int_t)atomic_load(&d->reconnects_total), "coalescedStatementsTotal",
                     (json_int_t)atomic_load(&d->coalesced_statements_total), "coalescedCallsTotal",
                     (json_int_t)atomic_load(&d->coalesced_calls_total), "coalescedRetriesTotal",
                     (json_int_t)atomic_load(&d->coalesced_retries_total), "deadlineCutsTotal",
                     (json_int_t)atomic_load(&d->deadline_cuts_total), "recycledTotal",
                     (json_int_t)atomic_load(&d->recycled_total));
}

char *metrics_json(server *srv)
{
    json_t *requests = json_array(), *latency = json_array();
    for (size_t i = 0; i < NSLOTS; i++) {
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
    json_t *http = json_pack("{s:o, s:o, s:i, s:i, s:o, s:o, s:{s:o}}", "requests", requests, "latency", latency,
                             "longPollsWaiting", atomic_load(&srv->nsuspended), "inFlight",
                             atomic_load(&srv->inflight), "connections", connections_json(srv), "database",
                             database_json(srv), "auth", "failures", auth_metrics_json());
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

static void connection_families(FILE *out, const server *srv)
{
    conn_figures f;
    conn_figures_get(srv, &f);
    family(out, "queen_http_connections_open", "gauge", "HTTP connections open now, those past the cap included.");
    fprintf(out, "queen_http_connections_open %lld\n", f.open);
    family(out, "queen_http_connections_max", "gauge", "QUEEN_MAX_CONNECTIONS in force.");
    fprintf(out, "queen_http_connections_max %lld\n", f.cap);
    family(out, "queen_http_connections_refused_total", "counter",
           "Requests answered 503 because their connection came past QUEEN_MAX_CONNECTIONS.");
    fprintf(out, "queen_http_connections_refused_total %lld\n", f.refused);
    family(out, "queen_http_request_read_timeouts_total", "counter",
           "Requests cut (408) for not arriving whole within QUEEN_REQUEST_READ_TIMEOUT_MS of their first byte.");
    fprintf(out, "queen_http_request_read_timeouts_total %lld\n", f.read_timeouts);
    family(out, "queen_http_idle_connections_closed_total", "counter",
           "Keep-alive connections closed after QUEEN_IDLE_TIMEOUT_MS without a request.");
    fprintf(out, "queen_http_idle_connections_closed_total %lld\n", f.idle_closed);
    family(out, "queen_http_response_write_timeouts_total", "counter",
           "Connections cut with their answer unwritten past QUEEN_RESPONSE_WRITE_TIMEOUT_MS (a client not reading).");
    fprintf(out, "queen_http_response_write_timeouts_total %lld\n", f.write_timeouts);
    family(out, "queen_http_answer_bytes", "gauge", "Bytes of answers held for their connections now.");
    fprintf(out, "queen_http_answer_bytes %lld\n", f.answer_bytes);
}

static void database_families(FILE *out, server *srv)
{
    pipeline_figures *d = &srv->db_figures;
    family(out, "queen_http_db_connections", "gauge", "Database connections of the event loops established now.");
    fprintf(out, "queen_http_db_connections %d\n", atomic_load(&d->connections));
    family(out, "queen_http_db_in_flight", "gauge", "Statements sent whose answer is not yet in.");
    fprintf(out, "queen_http_db_in_flight %d\n", atomic_load(&d->in_flight));
    family(out, "queen_http_db_waiting", "gauge", "Statements waiting for room on a database connection.");
    fprintf(out, "queen_http_db_waiting %d\n", atomic_load(&d->waiting));
    family(out, "queen_http_db_statements_total", "counter", "Statements sent by the event loops.");
    fprintf(out, "queen_http_db_statements_total %lu\n", atomic_load(&d->sent_total));
    family(out, "queen_http_db_acquire_timeouts_total", "counter",
           "Statements answered 503, never sent, after waiting QUEEN_PG_ACQUIRE_TIMEOUT_MS (or their deadline) for a connection.");
    fprintf(out, "queen_http_db_acquire_timeouts_total %lu\n", atomic_load(&d->timeouts_total));
    family(out, "queen_http_db_reconnects_total", "counter", "Event-loop database connections re-established.");
    fprintf(out, "queen_http_db_reconnects_total %lu\n", atomic_load(&d->reconnects_total));
    family(out, "queen_http_db_recycled_total", "counter",
           "Idle event-loop database connections replaced after a result past 1 MiB (libpq keeps its input buffer at the largest message).");
    fprintf(out, "queen_http_db_recycled_total %lu\n", atomic_load(&d->recycled_total));
    family(out, "queen_http_db_coalesced_statements_total", "counter",
           "Shared statements that answered several read calls made in one event-loop turn.");
    fprintf(out, "queen_http_db_coalesced_statements_total %lu\n", atomic_load(&d->coalesced_statements_total));
    family(out, "queen_http_db_coalesced_calls_total", "counter", "Read calls answered by a shared statement.");
    fprintf(out, "queen_http_db_coalesced_calls_total %lu\n", atomic_load(&d->coalesced_calls_total));
    family(out, "queen_http_db_coalesced_retries_total", "counter",
           "Read calls run alone after their shared statement failed (one of them was refused).");
    fprintf(out, "queen_http_db_coalesced_retries_total %lu\n", atomic_load(&d->coalesced_retries_total));
    family(out, "queen_http_db_deadline_cuts_total", "counter",
           "Database connections cut because a sent statement passed QUEEN_REQUEST_DEADLINE_MS unanswered.");
    fprintf(out, "queen_http_db_deadline_cuts_total %lu\n", atomic_load(&d->deadline_cuts_total));
}

static void http_families(FILE *out, server *srv)
{
    family(out, "queen_http_requests_total", "counter", "HTTP requests answered, by route pattern and status.");
    for (size_t i = 0; i < NSLOTS; i++) {
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
    for (size_t i = 0; i < NSLOTS; i++) {
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
    connection_families(out, srv);
    database_families(out, srv);
    auth_metrics_prometheus(out);
}

/* A figure in the family's unit: integers stay exact (no double on the
 * way), milliseconds become seconds written in decimal. */
static void value(FILE *out, stats_unit unit, long long v)
{
    if (unit != STATS_MS) {
        fprintf(out, "%lld", v);
        return;
    }
    unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    fprintf(out, "%s%llu.%03llu", v < 0 ? "-" : "", a / 1000, a % 1000);
}

void metrics_engine_prometheus(FILE *out, const queen_stats *s)
{
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        family(out, f->name, f->type, f->help);
        for (size_t k = 0, n = stats_cells(f); k < n; k++) {
            long long v = stats_cell(s, f, k);
            if (f->sparse && v == 0)
                continue;
            fputs(f->name, out);
            if (f->dim[0].label != NULL) {
                int ix[2];
                stats_cell_labels(f, k, &ix[0], &ix[1]);
                for (int d = 0; d < 2 && f->dim[d].label != NULL; d++) {
                    fprintf(out, "%s%s=\"", d == 0 ? "{" : ",", f->dim[d].label);
                    label(out, f->dim[d].values[ix[d]]);
                    fputc('"', out);
                }
                fputc('}', out);
            }
            fputc(' ', out);
            value(out, f->unit, v);
            fputc('\n', out);
        }
    }
}

char *metrics_prometheus(server *srv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return NULL;
    http_families(out, srv);
    queen_stats stats;
    if (queen_stats_get(srv->engine, &stats) == 0) /* not while closing */
        metrics_engine_prometheus(out, &stats);
    fclose(out);
    return text;
}
