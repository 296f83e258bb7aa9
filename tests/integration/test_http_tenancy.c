/* Tenancy over HTTP: with QUEEN_TENANCY_HEADER=1 (and the trusted proxy it
 * requires) the tenant is the x-queen-tenant header. Two tenants using the
 * same namespace, key and queue never see each other; a malformed header is
 * 400; an op or bundle carrying a tenant is 400; absent is the default
 * tenant, present but empty is 400; the header is ignored when tenancy is off; and the broker
 * refuses to start with the header but without the trusted proxy. Every
 * tenant used here is granted kv (a kv_quota row, no limits) in setup. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

static test_broker B;
static char TA[37], TB[37]; /* two fresh tenants */
static char HA[64], HB[64], HA_UPPER[64];

static int setup(void **state)
{
    (void)state;
    wire_uuid4(TA);
    wire_uuid4(TB);
    snprintf(HA, sizeof HA, "x-queen-tenant: %s", TA);
    snprintf(HB, sizeof HB, "x-queen-tenant: %s", TB);
    snprintf(HA_UPPER, sizeof HA_UPPER, "x-queen-tenant: %s", TA);
    for (char *p = HA_UPPER + 16; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    /* Under tenancy a tenant needs a kv grant (docs/api.md, KV quota, else 403
     * feature_gated): both fresh tenants, and the default one (no header). */
    char why[256];
    PGconn *c = pgtest_connect_quiet(why, sizeof why);
    if (c == NULL) {
        fprintf(stderr, "setup: %s\n", why);
        return -1;
    }
    const char *params[] = {TA, TB, QUEEN_DEFAULT_TENANT};
    PGresult *r = PQexecParams(c,
                               "INSERT INTO queen.kv_quota (tenant_id) VALUES ($1::uuid), ($2::uuid), ($3::uuid) "
                               "ON CONFLICT (tenant_id) DO NOTHING",
                               3, NULL, params, NULL, NULL, 0);
    bool granted = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    PQfinish(c);
    if (!granted)
        return -1;
    static const char *const env[] = {"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", NULL};
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* One call as the tenant of header h (NULL: no header). */
static json_t *as(const test_broker *b, const char *h, const char *method, const char *path, const char *body,
                  long status)
{
    const char *headers[] = {h, NULL};
    return http_call_json(b, h ? headers : NULL, method, path, body, status);
}

static void kv_isolation(void **state)
{
    (void)state;
    char *ns = pgtest_unique("tenancy");
    char *path = fmt("/api/v1/kv/%s/shared/key", ns);
    json_decref(as(&B, HA, "PUT", path, "{\"value\":\"from-a\",\"forever\":true}", 200));
    json_decref(as(&B, HB, "PUT", path, "{\"value\":\"from-b\",\"forever\":true}", 200));

    json_t *v = as(&B, HA, "GET", path, NULL, 200);
    assert_string_equal(jstr(v, "value"), "from-a");
    json_decref(v);
    v = as(&B, HA_UPPER, "GET", path, NULL, 200); /* the same tenant, lower-cased */
    assert_string_equal(jstr(v, "value"), "from-a");
    json_decref(v);
    v = as(&B, HB, "GET", path, NULL, 200);
    assert_string_equal(jstr(v, "value"), "from-b");
    json_decref(v);
    v = as(&B, NULL, "GET", path, NULL, 200); /* no header: the default tenant, who wrote nothing */
    assert_true(json_is_false(json_object_get(v, "found")));
    json_decref(v);
    v = as(&B, "x-queen-tenant;", "GET", path, NULL, 400); /* an empty header is not "no header" */
    assert_string_equal(jstr(v, "reason"), "bad_tenant");
    json_decref(v);

    /* B deleting its key leaves A's */
    json_decref(as(&B, HB, "DELETE", path, NULL, 200));
    v = as(&B, HA, "GET", path, NULL, 200);
    assert_true(json_is_true(json_object_get(v, "found")));
    json_decref(v);

    /* the console reads are per tenant too */
    char *list = fmt("{\"namespace\":\"%s\"}", ns);
    v = as(&B, HB, "POST", "/api/v1/resources/kv/list", list, 200);
    assert_int_equal(json_array_size(json_object_get(v, "rows")), 0);
    json_decref(v);
    v = as(&B, HA, "POST", "/api/v1/resources/kv/list", list, 200);
    assert_int_equal(json_array_size(json_object_get(v, "rows")), 1);
    json_decref(v);

    /* and the rows carry the header's tenant, nothing else */
    PGconn *c = pgtest_connect();
    const char *p[] = {ns};
    char *tenants = pgtest_scalar(c, "SELECT string_agg(tenant_id::text, ',') FROM queen.kv WHERE namespace = $1", 1,
                                  p);
    assert_string_equal(tenants, TA);
    free(tenants);
    PQfinish(c);
    free(ns);
    free(path);
    free(list);
}

static void queue_isolation(void **state)
{
    (void)state;
    char *q = pgtest_unique("tq");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q);
    json_decref(as(&B, HA, "POST", "/api/v1/push", push, 201));
    char *pop = fmt("/api/v1/pop/queue/%s", q);
    json_decref(as(&B, HB, "GET", pop, NULL, 204));
    json_t *v = as(&B, HB, "GET", "/api/v1/resources/queues", NULL, 200);
    size_t i;
    json_t *el;
    json_array_foreach(json_object_get(v, "queues"), i, el)
    {
        if (strcmp(jstr(el, "name"), q) == 0)
            fail_msg("tenant B sees tenant A's queue");
    }
    json_decref(v);
    v = as(&B, HA, "GET", pop, NULL, 200);
    json_decref(v);
    free(q);
    free(push);
    free(pop);
}

static void refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "x-queen-tenant: nope",
        "x-queen-tenant: {00000000-0000-0000-0000-000000000002}",
        "x-queen-tenant: 00000000000000000000000000000002",
        "x-queen-tenant: 00000000-0000-0000-0000-00000000000g",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *v = as(&B, bad[i], "GET", "/api/v1/kv/ns/k", NULL, 400);
        assert_string_equal(jstr(v, "code"), "kv_bad_request");
        assert_string_equal(jstr(v, "reason"), "bad_tenant");
        json_decref(v);
        v = as(&B, bad[i], "GET", "/api/v1/resources/queues", NULL, 400);
        assert_string_equal(jstr(v, "code"), "bad_request");
        json_decref(v);
        /* operations routes are not tenant-scoped */
        json_decref(as(&B, bad[i], "GET", "/health", NULL, 200));
    }
    /* a tenant in an op or a bundle is refused, whatever the header says */
    json_t *v = as(&B, HA, "POST", "/api/v1/kv", "[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\",\"tenant\":\"x\"}]", 400);
    assert_string_equal(jstr(v, "reason"), "kv_tenant_not_an_input");
    json_decref(v);
    char *op = fmt("[{\"op\":\"put\",\"ns\":\"a\",\"key\":\"k\",\"value\":1,\"forever\":true,\"tenantId\":\"%s\"}]",
                   TB);
    v = as(&B, HA, "POST", "/api/v1/kv", op, 400);
    assert_string_equal(jstr(v, "reason"), "kv_tenant_not_an_input");
    json_decref(v);
    v = as(&B, HA, "PUT", "/api/v1/kv/a/k", "{\"value\":1,\"forever\":true,\"_tenant\":null}", 400);
    assert_string_equal(jstr(v, "reason"), "kv_tenant_not_an_input");
    json_decref(v);
    v = as(&B, HA, "POST", "/api/v1/transaction",
           "{\"kv\":[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\",\"tenant\":\"x\"}]}", 400);
    assert_string_equal(jstr(v, "reason"), "kv_tenant_not_an_input");
    json_decref(v);
    char *bundle = fmt("{\"kv\":[{\"op\":\"get\",\"ns\":\"a\",\"key\":\"k\"}],\"tenant\":\"%s\"}", TB);
    v = as(&B, HA, "POST", "/api/v1/transaction", bundle, 400);
    assert_string_equal(jstr(v, "reason"), "tenant_not_an_input");
    json_decref(v);
    free(op);
    free(bundle);
}

/* Off: the header means nothing, every request is the default tenant. */
static void header_ignored_when_off(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_SWEEPER=0", NULL};
    test_broker off;
    assert_true(broker_start(&off, env));
    char *ns = pgtest_unique("tenoff");
    char *path = fmt("/api/v1/kv/%s/k", ns);
    json_decref(as(&off, HA, "PUT", path, "{\"value\":1,\"forever\":true}", 200));
    json_t *v = as(&off, "x-queen-tenant: nope", "GET", path, NULL, 200);
    assert_true(json_is_true(json_object_get(v, "found")));
    json_decref(v);
    PGconn *c = pgtest_connect();
    const char *p[] = {ns};
    char *t = pgtest_scalar(c, "SELECT tenant_id::text FROM queen.kv WHERE namespace = $1", 1, p);
    assert_string_equal(t, "00000000-0000-0000-0000-000000000001");
    free(t);
    PQfinish(c);
    assert_int_equal(broker_stop(&off), 0);
    free(ns);
    free(path);
}

static void header_needs_trusted_proxy(void **state)
{
    (void)state;
    static const char *const env[] = {"QUEEN_TENANCY_HEADER=1", NULL};
    test_broker b;
    broker_spawn(&b, pgtest_url(), env);
    int status = 0;
    assert_int_equal(waitpid(b.pid, &status, 0), b.pid);
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 0);
    FILE *f = fopen(b.log, "r");
    assert_non_null(f);
    char buf[2048] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_non_null(strstr(buf, "QUEEN_TRUSTED_PROXY"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_isolation),
        cmocka_unit_test(queue_isolation),
        cmocka_unit_test(refusals),
        cmocka_unit_test(header_ignored_when_off),
        cmocka_unit_test(header_needs_trusted_proxy),
    };
    return cmocka_run_group_tests_name("http_tenancy", tests, setup, teardown);
}
