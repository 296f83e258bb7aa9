/* engine_fixture: libqueen handles for the integration tests that drive the
 * library itself, without HTTP (test_engine_*.c): the usual configuration on
 * the private cluster, opening it, and reading a call's outcome and the
 * handle's counters. Every helper fails the running cmocka test (fail_msg)
 * instead of returning an error. */
#ifndef QUEEN_ENGINE_FIXTURE_H
#define QUEEN_ENGINE_FIXTURE_H

#include "queen.h"
#include "queen_runtime.h"

/* Library defaults, QUEEN_PG_URL = pg_url, a pool of pg_pool connections and
 * no sweeper (its cycles would move the counters tests read); the caller
 * adjusts more fields, then engine_open_config(). */
void engine_config(queen_config *cfg, const char *pg_url, int pg_pool);

/* Opens cfg and frees it, whatever the outcome; fails the test when
 * queen_open refuses. */
queen *engine_open_config(queen_config *cfg);

/* engine_config on the test database (pgtest_url) + engine_open_config. */
queen *engine_open(int pg_pool);

/* Fails the test with e's SQLSTATE, reason and detail unless rc is 0. */
void must(int rc, const queen_error *e);

/* The number group.name of queen_stats_json (true counts as 1). */
long long engine_stat(queen *q, const char *group, const char *name);

#endif
