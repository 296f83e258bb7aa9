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

typedef enum stats_unit {
    STATS_NUMBER, /* JSON integer, Prometheus integer */
    STATS_FLAG,   /* JSON true/false, Prometheus 1/0 */
    STATS_MS,     /* JSON milliseconds, Prometheus seconds (its base unit) */
} stats_unit;

/* One label of a family: its Prometheus name and its values, which are also
 * the JSON keys of the cells. */
typedef struct stats_dim {
    const char *label; /* NULL: unused */
    const char *const *values;
    int n;
} stats_dim;

typedef struct stats_family {
    /* JSON path: without labels, the last element is the figure's key;
     * with labels, the object whose keys are the label values. NULL ends a
     * shorter path. */
    const char *json[2];
    const char *name; /* Prometheus family */
    const char *type; /* "counter" or "gauge" */
    const char *help;
    stats_unit unit;
    size_t offset;    /* of the first cell in queen_stats; cells follow row-major over dim */
    stats_dim dim[2]; /* dim[1] only with dim[0] */
    bool sparse;      /* cells at 0 are left out of both renderings */
} stats_family;

extern const stats_family stats_families[];
extern const size_t stats_family_count;

/* Cells a family covers (product of its dims, 1 without labels). */
size_t stats_cells(const stats_family *f);

/* Cell k (row-major over dim) of family f in s. */
long long stats_cell(const queen_stats *s, const stats_family *f, size_t k);

/* The label value indices of cell k: *i0 over dim[0], *i1 over dim[1]
 * (0 when the dim is unused). */
void stats_cell_labels(const stats_family *f, size_t k, int *i0, int *i1);

/* queen_stats_json's text for s (malloc'd, caller frees; NULL when memory
 * is short). Pure: for queen_stats_json and tests. */
char *stats_render_json(const queen_stats *s);

/* The JSON value of cell k of f inside root (queen_stats_json parsed): its
 * path, then its label values as keys; NULL when absent (a sparse cell at
 * 0). For readers that check the rendering against the struct. */
const json_t *stats_json_cell(const json_t *root, const stats_family *f, size_t k);

#endif
