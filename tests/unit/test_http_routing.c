/* Unit tests of the HTTP edge's routing pieces: the route matcher, percent-
 * decoding exactly once, the route table, and the tenant header parser
 * (src/server/http.c, routes.c, tenancy.c). No daemon, no database. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "http.h"

/* Table-driven: pattern, path, expected verdict, captures. */
static void match_table(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *path;
        int verdict;
        const char *p0, *p1;
    } cases[] = {
        {"/health", "/health", 1, NULL, NULL},
        {"/health", "/health/", 0, NULL, NULL},
        {"/health", "/healthz", 0, NULL, NULL},
        {"/api/v1/kv", "/api/v1/kv/", 0, NULL, NULL},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/k", 1, "ns", "k"},
        /* the rest of the path is the key, slashes included */
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a/b/c", 1, "ns", "a/b/c"},
        /* %2F is a slash inside the key; decoded once: %252F stays %2F */
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a%2Fb", 1, "ns", "a/b"},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a%252Fb", 1, "ns", "a%2Fb"},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/%E2%82%AC", 1, "ns", "\xE2\x82\xAC"},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a//b", 1, "ns", "a//b"},
        /* a :param never spans a slash, even an encoded one decoded later */
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/n%2Fs/k", 1, "n/s", "k"},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/", 0, NULL, NULL},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns", 0, NULL, NULL},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv//k", 0, NULL, NULL},
        /* the route's shape with a broken capture: 400, not 404 */
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a%00b", -1, NULL, NULL},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a%zz", -1, NULL, NULL},
        {"/api/v1/kv/:ns/*key", "/api/v1/kv/ns/a%2", -1, NULL, NULL},
        {"/api/v1/pop/queue/:queue", "/api/v1/pop/queue/q", 1, "q", NULL},
        {"/api/v1/pop/queue/:queue", "/api/v1/pop/queue/q/partition/p", 0, NULL, NULL},
        {"/api/v1/pop/queue/:queue/partition/:partition", "/api/v1/pop/queue/q/partition/p", 1, "q", "p"},
        {"/api/v1/lease/:leaseId/extend", "/api/v1/lease/abc/extend", 1, "abc", NULL},
        {"/api/v1/lease/:leaseId/extend", "/api/v1/lease//extend", 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *params[HTTP_MAX_PARAMS];
        size_t lens[HTTP_MAX_PARAMS], n = 99;
        int v = http_match(cases[i].pattern, cases[i].path, params, lens, &n);
        if (v != cases[i].verdict)
            fail_msg("case %zu: %s on %s: got %d, want %d", i, cases[i].pattern, cases[i].path, v, cases[i].verdict);
        if (v == 1 && cases[i].p0 == NULL) {
            assert_int_equal(n, 0);
        } else if (v == 1) {
            assert_string_equal(params[0], cases[i].p0);
            assert_int_equal(lens[0], strlen(cases[i].p0));
            if (cases[i].p1) {
                assert_int_equal(n, 2);
                assert_string_equal(params[1], cases[i].p1);
            }
        } else if (v == 0) {
            assert_int_equal(n, 0);
        }
        http_free_params(params, n);
    }
}

static void percent_decode_once(void **state)
{
    (void)state;
    size_t n = 0;
    char *s = http_percent_decode("a%41%2f%2F%25", 13, &n);
    assert_string_equal(s, "aA//%");
    assert_int_equal(n, 5);
    free(s);
    s = http_percent_decode("%2541", 5, &n); /* once: %25 -> %, then "41" stays */
    assert_string_equal(s, "%41");
    free(s);
    s = http_percent_decode("a+b", 3, &n); /* '+' is not a space in a path */
    assert_string_equal(s, "a+b");
    free(s);
    assert_null(http_percent_decode("%00", 3, &n)); /* a key can never hold a NUL */
    assert_null(http_percent_decode("%", 1, &n));
    assert_null(http_percent_decode("%4", 2, &n));
    assert_null(http_percent_decode("%G1", 3, &n));
    s = http_percent_decode("", 0, &n);
    assert_string_equal(s, "");
    free(s);
}

/* The table is the contract: every route of docs/api.md is in it, once. */
static void route_table_covers_the_api(void **state)
{
    (void)state;
    static const char *const expected[][2] = {
        {"GET", "/health"},
        {"GET", "/metrics"},
        {"GET", "/metrics/prometheus"},
        {"GET", "/api/v1/system/maintenance"},
        {"POST", "/api/v1/system/maintenance"},
        {"GET", "/api/v1/system/maintenance/pop"},
        {"POST", "/api/v1/system/maintenance/pop"},
        {"GET", "/api/v1/status"},
        {"GET", "/api/v1/analytics/system-metrics"},
        {"GET", "/api/v1/analytics/worker-metrics"},
        {"GET", "/api/v1/analytics/postgres-stats"},
        {"GET", "/api/v1/status/queues"},
        {"GET", "/api/v1/status/queues/:queue"},
        {"GET", "/api/v1/status/analytics"},
        {"GET", "/api/v1/resources/queues/:queue"},
        {"GET", "/api/v1/resources/queues/:queue/partitions"},
        {"POST", "/api/v1/resources/queues/:queue/clear"},
        {"DELETE", "/api/v1/queues/:queue/clear"},
        {"GET", "/api/v1/resources/partitions"},
        {"GET", "/api/v1/resources/overview"},
        {"GET", "/api/v1/resources/namespaces"},
        {"GET", "/api/v1/resources/tasks"},
        {"POST", "/api/v1/kv"},
        {"GET", "/api/v1/kv/:ns/*key"},
        {"PUT", "/api/v1/kv/:ns/*key"},
        {"DELETE", "/api/v1/kv/:ns/*key"},
        {"GET", "/api/v1/resources/kv/namespaces"},
        {"POST", "/api/v1/resources/kv/list"},
        {"GET", "/api/v1/resources/kv/quota"},
        {"POST", "/api/v1/push"},
        {"GET", "/api/v1/pop"},
        {"GET", "/api/v1/pop/queue/:queue"},
        {"GET", "/api/v1/pop/queue/:queue/partition/:partition"},
        {"POST", "/api/v1/ack"},
        {"POST", "/api/v1/ack/batch"},
        {"POST", "/api/v1/lease/:leaseId/extend"},
        {"POST", "/api/v1/configure"},
        {"GET", "/api/v1/resources/queues"},
        {"DELETE", "/api/v1/resources/queues/:queue"},
        {"POST", "/api/v1/transaction"},
        {"POST", "/streams/v1/queries"},
        {"POST", "/streams/v1/state/get"},
        {"POST", "/streams/v1/cycle"},
        {"POST", "/api/v1/stream/define"},
        {"POST", "/api/v1/stream/poll"},
        {"POST", "/api/v1/stream/ack"},
        {"POST", "/api/v1/stream/renew-lease"},
        {"POST", "/api/v1/stream/seek"},
        {"GET", "/api/v1/resources/streams"},
        {"GET", "/api/v1/resources/streams/stats"},
        {"GET", "/api/v1/resources/streams/:name"},
        {"GET", "/api/v1/resources/streams/:name/consumers"},
        {"DELETE", "/api/v1/resources/streams/:name"},
        {"GET", "/api/v1/dlq"},
        {"DELETE", "/api/v1/dlq"},
        {"POST", "/api/v1/dlq/requeue"},
        {"DELETE", "/api/v1/dlq/:id"},
        {"GET", "/api/v1/consumer-groups"},
        {"GET", "/api/v1/consumer-groups/lagging"},
        {"GET", "/api/v1/consumer-groups/:group"},
        {"DELETE", "/api/v1/consumer-groups/:group"},
        {"POST", "/api/v1/consumer-groups/:group/subscription"},
        {"DELETE", "/api/v1/consumer-groups/:group/queues/:queue"},
        {"POST", "/api/v1/consumer-groups/:group/queues/:queue/seek"},
        {"POST", "/api/v1/stats/refresh"},
        {"GET", "/api/v1/messages"},
        {"GET", "/api/v1/messages/:transactionId"},
        {"DELETE", "/api/v1/messages/:transactionId"},
        {"GET", "/api/v1/messages/:partitionId/:transactionId"},
        {"DELETE", "/api/v1/messages/:partitionId/:transactionId"},
        {"POST", "/api/v1/messages/:partitionId/:transactionId/retry"},
        {"POST", "/api/v1/messages/:partitionId/:transactionId/dlq"},
        {"POST", "/api/v1/traces"},
        {"GET", "/api/v1/traces/names"},
        {"GET", "/api/v1/traces/by-name/:traceName"},
        {"GET", "/api/v1/traces/:partitionId/:transactionId"},
        {"GET", "/"},
        {"GET", "/console/"},
        {"GET", "/console/*file"},
    };
    size_t n = sizeof expected / sizeof expected[0];
    assert_int_equal(http_route_count, n);
    for (size_t i = 0; i < n; i++) {
        size_t found = 0;
        for (size_t r = 0; r < http_route_count; r++)
            if (strcmp(http_routes[r].method, expected[i][0]) == 0 &&
                strcmp(http_routes[r].pattern, expected[i][1]) == 0)
                found++;
        if (found != 1)
            fail_msg("%s %s is in the table %zu times", expected[i][0], expected[i][1], found);
    }
    /* Families: the KV routes speak kv_* codes; only /health, /metrics and
     * the broker-wide /api/v1/system switches, /api/v1/status, the broker's
     * /api/v1/analytics figures and the console's files are not
     * tenant-scoped (the /streams/v1 routes are, like /api/v1). */
    for (size_t r = 0; r < http_route_count; r++) {
        bool kv = strstr(http_routes[r].pattern, "/kv") != NULL;
        bool tenant_path = strncmp(http_routes[r].pattern, "/api/", 5) == 0 ||
                           strncmp(http_routes[r].pattern, "/streams/", 9) == 0;
        bool ops = !tenant_path || strncmp(http_routes[r].pattern, "/api/v1/system/", 15) == 0 ||
                   strncmp(http_routes[r].pattern, "/api/v1/analytics/", 18) == 0 ||
                   strcmp(http_routes[r].pattern, "/api/v1/status") == 0;
        assert_int_equal(http_routes[r].family, kv ? FAMILY_KV : ops ? FAMILY_OPS : FAMILY_LOG);
    }
}

static void tenant_header(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        const char *want; /* NULL: refused */
    } cases[] = {
        {NULL, QUEEN_DEFAULT_TENANT},
        {"", QUEEN_DEFAULT_TENANT},
        {"5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"},
        {"5F0C1A2B-3C4D-4E5F-8A9B-0C1D2E3F4A5B", "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"},
        {"{5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b}", NULL},
        {"5f0c1a2b3c4d4e5f8a9b0c1d2e3f4a5b", NULL},
        {"5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5", NULL},
        {"5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b0", NULL},
        {"5f0c1a2b-3c4d-4e5f-8a9b_0c1d2e3f4a5b", NULL},
        {"5g0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", NULL},
        {" 5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5", NULL},
        {"tenant-a", NULL},
        {"00000000-0000-0000-0000-000000000001", QUEEN_DEFAULT_TENANT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[QUEEN_TENANT_LEN + 1];
        int rc = queen_tenant_canonical(cases[i].header, out);
        if (cases[i].want == NULL) {
            if (rc != -1)
                fail_msg("case %zu: '%s' accepted", i, cases[i].header);
        } else {
            assert_int_equal(rc, 0);
            assert_string_equal(out, cases[i].want);
        }
    }
}

/* route_find passes over rows by their literal start; what it finds must be
 * what trying every row in order finds: the same row, the same 404/405 and
 * 400 verdicts, the same captures. Paths: every pattern with its captures
 * filled (plainly, with a slash in the rest, with a bad escape), every
 * prefix of each, and each with a byte more; under five methods. */
static const route *find_by_walk(const char *method, const char *path, char **params, size_t *lens,
                                 size_t *nparams, bool *path_matched, bool *bad_path)
{
    *nparams = 0;
    *path_matched = *bad_path = false;
    for (size_t i = 0; i < http_route_count; i++) {
        int m = http_match(http_routes[i].pattern, path, params, lens, nparams);
        if (m == 0)
            continue;
        *path_matched = true;
        if (strcmp(http_routes[i].method, method) == 0) {
            *bad_path = m < 0;
            return &http_routes[i];
        }
        http_free_params(params, *nparams);
        *nparams = 0;
    }
    return NULL;
}

static void route_find_is_the_walk(void **state)
{
    (void)state;
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
    static const char *const fills[] = {"q", "a/b", "a%zz"};
    size_t compared = 0, found = 0;
    for (size_t r = 0; r < http_route_count; r++) {
        for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
            char full[512];
            size_t n = 0;
            for (const char *p = http_routes[r].pattern; *p != '\0' && n < sizeof full - 16;) {
                if (*p == ':' || *p == '*') {
                    while (*p != '\0' && *p != '/')
                        p++;
                    n += (size_t)snprintf(full + n, sizeof full - n, "%s", fills[f]);
                } else {
                    full[n++] = *p++;
                }
            }
            full[n] = '\0';
            for (size_t cut = 0; cut <= n + 1; cut++) {
                char path[520];
                memcpy(path, full, n + 1);
                if (cut <= n)
                    path[cut] = '\0';
                else
                    strcat(path, "x");
                for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
                    char *pa[HTTP_MAX_PARAMS], *pb[HTTP_MAX_PARAMS];
                    size_t la[HTTP_MAX_PARAMS], lb[HTTP_MAX_PARAMS], na, nb;
                    bool ma, mb, ba, bb;
                    const route *a = route_find(methods[m], path, pa, la, &na, &ma, &ba);
                    const route *b = find_by_walk(methods[m], path, pb, lb, &nb, &mb, &bb);
                    if (a != b || ma != mb || ba != bb || na != nb)
                        fail_msg("%s %s: route_find and the walk differ", methods[m], path);
                    for (size_t k = 0; k < na; k++) {
                        assert_int_equal(la[k], lb[k]);
                        assert_memory_equal(pa[k], pb[k], la[k]);
                    }
                    http_free_params(pa, na);
                    http_free_params(pb, nb);
                    compared++;
                    found += a != NULL;
                }
            }
        }
    }
    /* every row is found by its own path at least */
    assert_true(found >= http_route_count);
    assert_true(compared > 1000);
}

/* A literal row before a capture of the same prefix wins: the stream
 * stats are not a stream named "stats". */
static void literal_before_capture(void **state)
{
    (void)state;
    char *pa[HTTP_MAX_PARAMS];
    size_t la[HTTP_MAX_PARAMS], na;
    bool ma, ba;
    const route *a = route_find("GET", "/api/v1/resources/streams/stats", pa, la, &na, &ma, &ba);
    assert_non_null(a);
    assert_string_equal(a->pattern, "/api/v1/resources/streams/stats");
    http_free_params(pa, na);
    a = route_find("GET", "/api/v1/resources/streams/orders", pa, la, &na, &ma, &ba);
    assert_non_null(a);
    assert_string_equal(a->pattern, "/api/v1/resources/streams/:name");
    http_free_params(pa, na);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(match_table),
        cmocka_unit_test(percent_decode_once),
        cmocka_unit_test(route_table_covers_the_api),
        cmocka_unit_test(tenant_header),
        cmocka_unit_test(route_find_is_the_walk),
        cmocka_unit_test(literal_before_capture),
    };
    return cmocka_run_group_tests_name("http_routing", tests, NULL, NULL);
}
