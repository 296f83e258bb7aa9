/* The engine's figures on a real engine and a real broker: queen_stats_get
 * and queen_stats_json of one handle agree cell for cell (the JSON is
 * rendered from the struct), kv calls move the cells they should, a NULL
 * handle has no figures, and the broker's /metrics and /metrics/prometheus
 * carry every family of the table (stats.h). The renderings themselves are
 * checked figure by figure in tests/unit/test_stats.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "engine_fixture.h"
#include "metrics.h"
#include "pgtest.h"
#include "queen.h"
#include "stats.h"
#include "testutil.h"

/* Fails unless every cell of s is in root with s's value (a sparse cell
 * at 0 is absent). */
static void json_matches(const json_t *root, const queen_stats *s, const char *text)
{
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        for (size_t k = 0; k < stats_cells(f); k++) {
            long long want = stats_cell(s, f, k);
            const json_t *v = stats_json_cell(root, f, k);
            bool ok = f->sparse && want == 0 ? v == NULL
                      : f->unit == STATS_FLAG ? json_is_boolean(v) && json_is_true(v) == (want != 0)
                                              : json_is_integer(v) && json_integer_value(v) == want;
            if (!ok)
                fail_msg("%s cell %zu: want %lld in %s", f->name, k, want, text);
        }
    }
}

static void struct_and_json_agree(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    queen_error e = {0};
    char *ns = pgtest_unique("stats-");
    char *out = NULL;
    must(queen_kv_put(q, NULL, ns, "k", "41", QUEEN_FOREVER, -1, false, &out, &e), &e);
    free(out);
    must(queen_kv_get(q, NULL, ns, "k", &out, &e), &e);
    free(out);
    must(queen_kv_get(q, NULL, ns, "nope", &out, &e), &e);
    free(out);
    char *ops = fmt("[{\"op\":\"get\",\"ns\":\"%s\",\"key\":\"k\"}]", ns);
    must(queen_kv_apply(q, NULL, ops, false, &out, &e), &e);
    free(out);

    /* The notifier connects on its own thread: wait for it, so that the
     * two reads below see an idle handle whose figures hold still. */
    queen_stats s, again;
    long long until = now_ms() + 10000;
    for (;;) {
        assert_int_equal(queen_stats_get(q, &s), 0);
        if (s.notifier.connected || now_ms() > until)
            break;
        usleep(10000);
    }
    assert_int_equal(s.notifier.connected, 1);
    assert_int_equal(s.pool.size, 2);
    assert_int_equal(s.pool.in_use, 0);
    assert_true(s.pool.acquired_total >= 4);
    assert_int_equal(s.kv.ops[QUEEN_STATS_KV_PUT][QUEEN_STATS_KV_APPLIED], 1);
    assert_int_equal(s.kv.ops[QUEEN_STATS_KV_GET][QUEEN_STATS_KV_FOUND], 1);
    assert_int_equal(s.kv.ops[QUEEN_STATS_KV_GET][QUEEN_STATS_KV_MISSING], 1);
    assert_int_equal(s.kv.batch[QUEEN_STATS_BATCH_OK], 1);
    assert_int_equal(s.sweeper.enabled, 0); /* engine_config turns it off */
    assert_int_equal(s.waiters, 0);

    char *text = queen_stats_json(q);
    assert_non_null(text);
    assert_int_equal(queen_stats_get(q, &again), 0);
    assert_memory_equal(&s, &again, sizeof s); /* nothing moved around the JSON read */
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    json_matches(root, &s, text);
    json_decref(root);
    free(text);

    char *prom = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&prom, &len);
    assert_non_null(f);
    metrics_engine_prometheus(f, &s);
    fclose(f);
    assert_non_null(strstr(prom, "\nqueen_kv_ops_total{op=\"put\",outcome=\"applied\"} 1\n"));
    assert_non_null(strstr(prom, "\nqueen_kv_ops_total{op=\"get\",outcome=\"missing\"} 1\n"));
    assert_non_null(strstr(prom, "\nqueen_notifier_connected 1\n"));
    free(prom);

    queen_close(q);
    free(ops);
    free(ns);
}

static void null_handle_has_no_figures(void **state)
{
    (void)state;
    queen_stats s;
    assert_int_equal(queen_stats_get(NULL, &s), -1);
    assert_null(queen_stats_json(NULL));
    queen *q = engine_open(1);
    assert_int_equal(queen_stats_get(q, NULL), -1);
    queen_close(q);
}

/* The broker renders both from the same struct: every family is declared
 * once in the Prometheus text, and every figure is in the JSON. */
static void broker_serves_every_family(void **state)
{
    (void)state;
    test_broker b;
    if (!broker_start(&b, NULL))
        fail_msg("broker did not become healthy (log: %s)", b.log);
    http_reply r = broker_http(&b, "GET", "/metrics/prometheus", NULL, NULL);
    assert_int_equal(r.status, 200);
    for (size_t i = 0; i < stats_family_count; i++) {
        char *type = fmt("# TYPE %s %s\n", stats_families[i].name, stats_families[i].type);
        const char *at = strstr(r.body, type);
        if (at == NULL || strstr(at + 1, type) != NULL)
            fail_msg("/metrics/prometheus does not declare %s once:\n%s", stats_families[i].name, r.body);
        free(type);
    }
    http_reply_free(&r);

    r = broker_http(&b, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *m = json_loads(r.body, 0, NULL);
    const json_t *engine = json_object_get(m, "engine");
    assert_true(json_is_object(engine));
    for (size_t i = 0; i < stats_family_count; i++) {
        const stats_family *f = &stats_families[i];
        for (size_t k = 0; k < stats_cells(f); k++) {
            const json_t *v = stats_json_cell(engine, f, k);
            if (f->sparse ? v != NULL && !json_is_integer(v) : !json_is_integer(v) && !json_is_boolean(v))
                fail_msg("/metrics engine lacks %s cell %zu:\n%s", f->name, k, r.body);
        }
    }
    json_decref(m);
    http_reply_free(&r);
    assert_int_equal(broker_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(struct_and_json_agree),
        cmocka_unit_test(null_handle_has_no_figures),
        cmocka_unit_test(broker_serves_every_family),
    };
    return cmocka_run_group_tests_name("engine_stats", tests, NULL, NULL);
}
