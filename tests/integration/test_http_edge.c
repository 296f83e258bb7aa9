/* The HTTP edge's sizing and budgets against a real broker: the HTTP threads
 * follow the resolved connection pool. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "testutil.h"

static void start(test_broker *b, const char *const *env)
{
    if (!broker_start(b, env))
        fail_msg("broker did not become healthy (log: %s)", b->log);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* QUEEN_PG_POOL and QUEEN_HTTP_THREADS left at 0: the broker serves with as
 * many HTTP threads as the pool it opened (README: "0: the same as the
 * connection pool"), both from one resolved config. */
static void http_threads_follow_the_pool(void **state)
{
    (void)state;
    const char *env[] = {"QUEEN_LOG_LEVEL=info", "QUEEN_PG_POOL=0", "QUEEN_HTTP_THREADS=0", NULL};
    test_broker b;
    start(&b, env);
    long long pool = http_metric(&b, "engine", "pool", "size");
    char *log = slurp(b.log);
    const char *at = strstr(log, " threads (database pool ");
    if (at == NULL)
        fail_msg("no listening line with the thread count in %s", b.log);
    const char *with = at;
    while (with > log && with[-1] != ' ')
        with--;
    int threads = atoi(with);
    int logged_pool = atoi(at + strlen(" threads (database pool "));
    assert_true(pool >= 8);
    assert_int_equal(threads, pool);
    assert_int_equal(logged_pool, pool);
    free(log);
    assert_int_equal(broker_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(http_threads_follow_the_pool),
    };
    return cmocka_run_group_tests_name("http_edge", tests, NULL, NULL);
}
