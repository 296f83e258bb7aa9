/* engine_fixture: libqueen handles for tests (see engine_fixture.h). */
#include "engine_fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "pgtest.h"
#include "testutil.h"

void engine_config(queen_config *cfg, const char *pg_url, int pg_pool)
{
    queen_config_defaults(cfg);
    char err[256];
    if (queen_config_set(cfg, "QUEEN_PG_URL", pg_url, err, sizeof err) != 0)
        fail_msg("%s", err);
    cfg->pg_pool = pg_pool;
    cfg->sweeper = false;
}

queen *engine_open_config(queen_config *cfg)
{
    queen_error e = {0};
    queen *q = queen_open(cfg, &e);
    queen_config_clear(cfg);
    if (q == NULL)
        fail_msg("queen_open: %s %s", e.reason, e.detail);
    return q;
}

queen *engine_open(int pg_pool)
{
    queen_config cfg;
    engine_config(&cfg, pgtest_url(), pg_pool);
    return engine_open_config(&cfg);
}

void must(int rc, const queen_error *e)
{
    if (rc != 0)
        fail_msg("call failed: %s %s %s", e->sqlstate, e->reason, e->detail);
}

long long engine_stat(queen *q, const char *group, const char *name)
{
    json_t *s = take_json(queen_stats_json(q));
    json_t *v = json_object_get(json_object_get(s, group), name);
    long long out = json_is_true(v) ? 1 : jnum(v);
    json_decref(s);
    return out;
}
