/* metrics: the HTTP edge's own figures (requests by route pattern and
 * status, latency histograms, long polls waiting) plus the engine's
 * (queen_stats), rendered as JSON (/metrics) or Prometheus text
 * (/metrics/prometheus). Labels are route patterns, never raw paths. */
#ifndef QUEEN_METRICS_H
#define QUEEN_METRICS_H

#include <stdio.h>

#include "http.h"

/* Zeroes every figure (http_start calls it). */
void metrics_init(void);

/* Counts one answered request; r NULL when no route took it (counted under
 * its method's label, see metrics_method_label). Lock-free. */
void metrics_record(const route *r, const char *method, unsigned status, double seconds);

/* The label an unmatched request's method is counted under: the method
 * when it is one of the standard ones, else "OTHER". */
const char *metrics_method_label(const char *method);

/* Requests answered (any status) by the route of that method and pattern
 * since the broker started; 0 for a route the table does not hold. */
unsigned long metrics_route_requests(const char *method, const char *pattern);

/* The renderings; malloc'd text (caller frees), NULL when out of memory. */
char *metrics_json(server *srv);
char *metrics_prometheus(server *srv);

/* The engine's families of the Prometheus text (one per row of
 * stats_families), for s. Part of metrics_prometheus; for tests. */
void metrics_engine_prometheus(FILE *out, const queen_stats *s);

#endif
