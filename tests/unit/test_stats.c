/* The engine's figures, no database: the table of families (stats.h) covers
 * every field of queen_stats exactly once; every figure appears, with its
 * value, in both renderings (queen_stats_json's and the Prometheus text of
 * /metrics/prometheus) and nothing else does; the JSON shape and the
 * Prometheus family names are the ones users already read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "queen.h"
#include "stats.h"

#define NCELLS (sizeof(queen_stats) / sizeof(long long))

static long long *cell_ptr(queen_stats *s, const stats_family *f, size_t k)
{
    return (long long *)((char *)s + f->offset) + k;
}

/* noinline: once inlined, gcc takes the memstream's buffer for a pointer
 * into this frame (-Wdangling-pointer). */
__attribute__((noinline)) static char *prometheus(const queen_stats *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    metrics_engine_prometheus(out, s);
    fclose(out);
    return text;
}

/* What a Prometheus sample of cell k reads, built here rather than by the
 * code under test. */
static char *expected_sample(const stats_family *f, size_t k, long long v)
{
    char labels[256] = "";
    if (f->dim[0].label != NULL) {
        int i0, i1;
        stats_cell_labels(f, k, &i0, &i1);
        if (f->dim[1].label != NULL)
            snprintf(labels, sizeof labels, "{%s=\"%s\",%s=\"%s\"}", f->dim[0].label, f->dim[0].values[i0],
                     f->dim[1].label, f->dim[1].values[i1]);
        else
            snprintf(labels, sizeof labels, "{%s=\"%s\"}", f->dim[0].label, f->dim[0].values[i0]);
    }
    char *line = NULL;
    int n = f->unit == STATS_MS ? asprintf(&line, "\n%s%s %lld.%03lld\n", f->name, labels, v / 1000, v % 1000)
                                : asprintf(&line, "\n%s%s %lld\n", f->name, labels, v);
    assert_true(n > 0);
    return line;
}

static size_t json_leaves(const json_t *v)
{
    if (!json_is_object(v))
        return 1;
    size_t n = 0;
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m)
    {
        n += json_leaves(m);
    }
    return n;
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0, at = 0;
    const char *hit;
    while ((hit = strstr(text + at, needle)) != NULL) {
        n++;
        at = (size_t)(hit - text) + 1;
    }
    return n;
}

/* A field of queen_stats missing from the table would be in neither
 * rendering: every long long of the struct is the cell of exactly one
 * family. */
static void table_covers_every_field_once(void **state)
{
    (void)state;
    assert_int_equal(sizeof(queen_stats) % sizeof(long long), 0);
    int owner[NCELLS];
    for (size_t c = 0; c < NCELLS; c++)
        owner[c] = -1;
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        assert_non_null(f->json[0]);
        assert_non_null(f->help);
        assert_true(strcmp(f->type, "counter") == 0 || strcmp(f->type, "gauge") == 0);
        assert_int_equal(f->offset % sizeof(long long), 0);
        if (f->dim[1].label != NULL)
            assert_non_null(f->dim[0].label);
        for (size_t j = 0; j < i; j++)
            if (strcmp(stats_families[j].name, f->name) == 0)
                fail_msg("family %s twice", f->name);
        for (size_t k = 0; k < stats_cells(f); k++) {
            size_t c = f->offset / sizeof(long long) + k;
            if (c >= NCELLS)
                fail_msg("%s cell %zu is past the struct", f->name, k);
            if (owner[c] >= 0)
                fail_msg("%s cell %zu is also %s's", f->name, k, stats_families[owner[c]].name);
            owner[c] = (int)i;
        }
    }
    for (size_t c = 0; c < NCELLS; c++)
        if (owner[c] < 0)
            fail_msg("queen_stats long long #%zu (byte %zu) is in no family", c, c * sizeof(long long));
}

/* Each cell gets its own value, so a renderer that drops a figure, shows
 * another one in its place or invents one fails here. */
static void every_figure_in_both_renderings(void **state)
{
    (void)state;
    queen_stats s;
    memset(&s, 0, sizeof s);
    long long next = 1001;
    for (size_t i = 0; i < stats_family_count; i++)
        for (size_t k = 0; k < stats_cells(&stats_families[i]); k++, next += 1001)
            *cell_ptr(&s, &stats_families[i], k) = stats_families[i].unit == STATS_FLAG ? 1 : next;

    char *text = stats_render_json(&s);
    assert_non_null(text);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    char *prom = prometheus(&s);
    /* a leading newline lets every sample be matched as "\nname ..." */
    char *body = NULL;
    assert_true(asprintf(&body, "\n%s", prom) > 0);

    size_t cells = 0;
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        char *type = NULL;
        assert_true(asprintf(&type, "\n# TYPE %s %s\n", f->name, f->type) > 0);
        if (count(body, type) != 1)
            fail_msg("Prometheus: %s not declared once\n%s", f->name, prom);
        free(type);
        for (size_t k = 0; k < stats_cells(f); k++, cells++) {
            long long v = *cell_ptr(&s, f, k);
            const json_t *j = stats_json_cell(root, f, k);
            bool same = f->unit == STATS_FLAG ? json_is_true(j) : json_is_integer(j) && json_integer_value(j) == v;
            if (!same)
                fail_msg("JSON: %s.%s cell %zu is not %lld\n%s", f->json[0], f->json[1] ? f->json[1] : "", k, v,
                         text);
            char *sample = expected_sample(f, k, v);
            if (strstr(body, sample) == NULL)
                fail_msg("Prometheus lacks:%s%s", sample, prom);
            free(sample);
        }
    }
    assert_int_equal(cells, NCELLS);
    /* nothing beyond the table: one JSON leaf and one sample per cell */
    assert_int_equal(json_leaves(root), NCELLS);
    size_t samples = 0;
    for (const char *p = body; (p = strchr(p, '\n')) != NULL; p++)
        if (p[1] != '\0' && p[1] != '#')
            samples++;
    assert_int_equal(samples, NCELLS);
    free(body);
    free(prom);
    free(text);
    json_decref(root);
}

/* queen_stats_json's text is read by tests and users: the shape (keys,
 * order, booleans, the empty objects of kv.ops) stays what it was. */
static void json_shape_is_unchanged(void **state)
{
    (void)state;
    queen_stats s;
    memset(&s, 0, sizeof s);
    s.kv.ops[QUEEN_STATS_KV_GET][QUEEN_STATS_KV_FOUND] = 3;
    s.kv.ops[QUEEN_STATS_KV_PUT][QUEEN_STATS_KV_APPLIED] = 2;
    s.kv.quota_refusals[QUEEN_STATS_REFUSED_FEATURE_GATED] = 4;
    s.sweeper.lag_ms = 1500;
    s.notifier.connected = 1;
    s.waiters = 5;
    char *text = stats_render_json(&s);
    assert_string_equal(
        text,
        "{\"pool\":{\"size\":0,\"inUse\":0,\"waiting\":0,\"acquiredTotal\":0,\"timeoutsTotal\":0,"
        "\"reconnectsTotal\":0},"
        "\"kv\":{\"ops\":{\"get\":{\"found\":3},\"put\":{\"applied\":2},\"putIfAbsent\":{},\"delete\":{},\"incr\":{},"
        "\"getMany\":{},\"getPrefix\":{}},\"batch\":{\"ok\":0,\"precondition\":0,\"error\":0},"
        "\"quotaRefusals\":{\"kv_quota_exceeded\":0,\"feature_gated\":4,\"rate_limited\":0}},"
        "\"transactions\":{\"success\":0,\"failed\":0,\"refused\":0,\"unavailable\":0},"
        "\"pops\":{\"total\":0,\"empty\":0,\"waits\":0,\"openFailures\":0},"
        "\"sweeper\":{\"enabled\":false,\"deletedTotal\":0,\"lagMs\":1500,\"cycles\":0,\"errors\":0,"
        "\"partitionsReclaimedTotal\":0,\"retentionDeletedTotal\":0,\"usageMeasures\":0,\"lastCycleMs\":0},"
        "\"notifier\":{\"connected\":true,\"reconnects\":0,\"notifies\":0,\"announced\":0,\"announceStatements\":0,"
        "\"announceDropped\":0,\"localWakes\":0,\"checks\":0,\"checkTicks\":0,\"checkWakes\":0,\"pushWakes\":0},\"waiters\":5}");
    free(text);
}

/* Dashboards query these names and labels: the families /metrics/prometheus
 * had before the table; the sparse kv.ops cells at 0 are left out there
 * too, but the family is still declared. */
static void prometheus_names_are_unchanged(void **state)
{
    (void)state;
    queen_stats s;
    memset(&s, 0, sizeof s);
    s.kv.ops[QUEEN_STATS_KV_GET][QUEEN_STATS_KV_FOUND] = 1;
    s.sweeper.enabled = 1;
    s.sweeper.lag_ms = 1500;
    s.sweeper.last_cycle_ms = 7;
    char *prom = prometheus(&s);
    static const char *const lines[] = {
        "# TYPE queen_pool_size gauge\n",
        "# TYPE queen_pool_in_use gauge\n",
        "# TYPE queen_pool_waiting gauge\n",
        "# TYPE queen_pool_acquired_total counter\n",
        "# TYPE queen_pool_timeouts_total counter\n",
        "# TYPE queen_pool_reconnects_total counter\n",
        "# TYPE queen_kv_ops_total counter\n",
        "\nqueen_kv_ops_total{op=\"get\",outcome=\"found\"} 1\n",
        "\nqueen_kv_batches_total{outcome=\"ok\"} 0\n",
        "\nqueen_kv_batches_total{outcome=\"precondition\"} 0\n",
        "\nqueen_kv_batches_total{outcome=\"error\"} 0\n",
        "\nqueen_kv_quota_refusals_total{reason=\"kv_quota_exceeded\"} 0\n",
        "\nqueen_kv_quota_refusals_total{reason=\"feature_gated\"} 0\n",
        "\nqueen_kv_quota_refusals_total{reason=\"rate_limited\"} 0\n",
        "\nqueen_transactions_total{outcome=\"success\"} 0\n",
        "\nqueen_transactions_total{outcome=\"failed\"} 0\n",
        "\nqueen_transactions_total{outcome=\"refused\"} 0\n",
        "\nqueen_transactions_total{outcome=\"unavailable\"} 0\n",
        "# TYPE queen_pops_total counter\n",
        "# TYPE queen_pops_empty_total counter\n",
        "# TYPE queen_pops_open_failures_total counter\n",
        "\nqueen_sweeper_enabled 1\n",
        "# TYPE queen_sweeper_enabled gauge\n",
        "# TYPE queen_sweeper_deleted_total counter\n",
        "\nqueen_sweeper_lag_seconds 1.500\n",
        "# TYPE queen_sweeper_lag_seconds gauge\n",
        "# TYPE queen_sweeper_cycles_total counter\n",
        "# TYPE queen_sweeper_errors_total counter\n",
        "# TYPE queen_sweeper_partitions_reclaimed_total counter\n",
        "# TYPE queen_sweeper_retention_deleted_total counter\n",
        "\nqueen_sweeper_last_cycle_seconds 0.007\n",
        "# TYPE queen_sweeper_last_cycle_seconds gauge\n",
        "# TYPE queen_notifier_connected gauge\n",
        "# TYPE queen_notifier_reconnects_total counter\n",
        "# TYPE queen_notifier_notifies_total counter\n",
        "# TYPE queen_notifier_announced_total counter\n",
        "# TYPE queen_notifier_announce_statements_total counter\n",
        "# TYPE queen_notifier_announce_dropped_total counter\n",
        "# TYPE queen_notifier_local_wakes_total counter\n",
        "# TYPE queen_notifier_checks_total counter\n",
        "# TYPE queen_notifier_check_ticks_total counter\n",
        "# TYPE queen_notifier_check_wakes_total counter\n",
        "# TYPE queen_notifier_push_wakes_total counter\n",
        "\nqueen_push_waiters 0\n",
        "# TYPE queen_push_waiters gauge\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (strstr(prom, lines[i]) == NULL)
            fail_msg("Prometheus lacks: %s\n%s", lines[i], prom);
    assert_int_equal(count(prom, "\nqueen_kv_ops_total{"), 1);
    free(prom);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_covers_every_field_once),
        cmocka_unit_test(every_figure_in_both_renderings),
        cmocka_unit_test(json_shape_is_unchanged),
        cmocka_unit_test(prometheus_names_are_unchanged),
    };
    return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
