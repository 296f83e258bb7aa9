/* stats: the one table of the engine's figures (queen_stats in queen.h).
 * Each row is a family: where it sits in queen_stats_json, its Prometheus
 * name, type and help, and the cells of queen_stats it covers. The JSON
 * rendering (stats.c) and the Prometheus rendering (src/server/metrics.c)
 * both walk this table and nothing else, so a figure added here appears in
 * both, and a key renamed in one cannot silently drop it from the other. */
#ifndef QUEEN_STATS_H
#define QUEEN_STATS_H

#include <stddef.h>

#include <jansson.h>

#include "queen.h"

/* The table (stats_family, stats_families, stats_cell, ...) is the HTTP
 * edge's too (its Prometheus rendering): queen_runtime.h. */
#include "queen_runtime.h"

/* queen_stats_json's text for s (malloc'd, caller frees; NULL when memory
 * is short). Pure: for queen_stats_json and tests. */
char *stats_render_json(const queen_stats *s);

/* The JSON value of cell k of f inside root (queen_stats_json parsed): its
 * path, then its label values as keys; NULL when absent (a sparse cell at
 * 0). For readers that check the rendering against the struct. */
const json_t *stats_json_cell(const json_t *root, const stats_family *f, size_t k);

#endif
