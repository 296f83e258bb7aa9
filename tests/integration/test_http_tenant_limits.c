/* Per-tenant limits over HTTP (docs/settings.md and docs/api.md,
 * "Per-tenant limits"), the review's reproductions of abuse by low-privilege tokens
 * (issue 34, findings 3 and 9), each against real brokers:
 *   - with the tenant taken from the JWT claim, a kv write of a tenant whose
 *     kv_quota row has enabled = false, or that has none, is 403
 *     feature_gated, as with header tenancy; an enabled row writes;
 *   - QUEEN_MAX_QUEUES_PER_TENANT / QUEEN_MAX_PARTITIONS_PER_TENANT: a push
 *     or configure that would create one more is 403 tenant_queue_limit /
 *     tenant_partition_limit (the transaction: its failure body, reason
 *     limit_exceeded) and writes nothing;
 *     pushes to existing pairs and other tenants go on;
 *   - QUEEN_MAX_TRACES_PER_TENANT / QUEEN_MAX_TRACE_BYTES_PER_TENANT: a trace
 *     past either is 403 tenant_trace_limit, nothing recorded; deleting
 *     traces (retention) gives the room back;
 *   - a long poll's timeout of INT_MAX on every pop route is served as
 *     QUEEN_MAX_POLL_TIMEOUT_MS, past INT_MAX refused 400;
 *   - 40 long polls of one tenant against a connection cap of 30: past the
 *     tenant's share (a quarter of the cap) they are 429 tenant_long_poll_limit
 *     at once, and another tenant's request is served meanwhile.
 * Every test has tenants of its own (fresh uuids), so each runs alone or in
 * any order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker.h"
#include "http_fixture.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

#define SECRET "tenant-limits-secret-of-32-bytes!"
#define POLL_CAP_MS 1500
#define CONN_CAP 30

static test_broker JWT;   /* QUEEN_AUTH=jwt: the tenant is the token's claim */
static test_broker LIM;   /* header tenancy, small limits */
static test_broker POLLS; /* header tenancy, a connection cap of 30 */
static PGconn *DB;

static int setup(void **state)
{
    (void)state;
    char why[256];
    DB = pgtest_connect_quiet(why, sizeof why);
    if (DB == NULL) {
        fprintf(stderr, "setup: %s\n", why);
        return -1;
    }
    static const char *const jwt[] = {"QUEEN_AUTH=jwt", "QUEEN_JWT_SECRET=" SECRET, "QUEEN_KV_QUOTA_REFRESH_MS=200",
                                      NULL};
    static const char *const lim[] = {"QUEEN_TENANCY_HEADER=1",
                                      "QUEEN_TRUSTED_PROXY=1",
                                      "QUEEN_MAX_QUEUES_PER_TENANT=3",
                                      "QUEEN_MAX_PARTITIONS_PER_TENANT=5",
                                      "QUEEN_MAX_TRACES_PER_TENANT=3",
                                      "QUEEN_MAX_TRACE_BYTES_PER_TENANT=1000",
                                      "QUEEN_MAX_POLL_TIMEOUT_MS=1500",
                                      NULL};
    static const char *const polls[] = {"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", "QUEEN_MAX_CONNECTIONS=30",
                                        "QUEEN_HTTP_THREADS=1", NULL};
    return broker_start(&JWT, jwt) && broker_start(&LIM, lim) && broker_start(&POLLS, polls) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    PQfinish(DB);
    int a = broker_stop(&JWT), b = broker_stop(&LIM), c = broker_stop(&POLLS);
    return a == 0 && b == 0 && c == 0 ? 0 : -1;
}

static void fresh(char tenant[37], char header[64])
{
    wire_uuid4(tenant);
    snprintf(header, 64, "x-queen-tenant: %s", tenant);
}

static http_reply as(const test_broker *b, const char *header, const char *method, const char *path, const char *body)
{
    const char *h[] = {header, NULL};
    return broker_http(b, method, path, body, h);
}

static void expect(const test_broker *b, const char *header, const char *method, const char *path, const char *body,
                   long status, const char *error, const char *reason)
{
    http_reply r = as(b, header, method, path, body);
    if (r.status != status)
        fail_msg("%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
    if (error != NULL)
        http_expect(&r, status, error, reason);
    http_reply_free(&r);
}

static long long count_of(const char *sql, const char *tenant)
{
    const char *p[] = {tenant};
    PGresult *res = pgtest_exec(DB, sql, 1, p);
    long long n = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n;
}

static long long queues_of(const char *tenant)
{
    return count_of("SELECT count(*) FROM queen.queues WHERE tenant_id = $1::uuid", tenant);
}

static long long partitions_of(const char *tenant)
{
    return count_of("SELECT count(*) FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id "
                    "WHERE q.tenant_id = $1::uuid",
                    tenant);
}

static long long messages_of(const char *tenant)
{
    return count_of("SELECT count(*) FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id "
                    "JOIN queen.log_messages m ON m.partition_id = p.id WHERE q.tenant_id = $1::uuid",
                    tenant);
}

/* ---- finding 3: the kv grant under JWT tenancy ---------------------------- */

static char *token_for(const char *tenant)
{
    char *payload = fmt("{\"sub\":\"t\",\"role\":\"write\",\"tenant\":\"%s\",\"exp\":%lld}", tenant,
                        (long long)time(NULL) + 600);
    char *t = mint_jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload, SECRET, strlen(SECRET), NULL);
    free(payload);
    return t;
}

static void kv_put_as(const char *tenant, long status, const char *error)
{
    char *t = token_for(tenant);
    char *auth = fmt("Authorization: Bearer %s", t);
    char *path = fmt("/api/v1/kv/gate/%s", tenant);
    http_reply r = as(&JWT, auth, "PUT", path, "{\"value\":1,\"forever\":true}");
    if (r.status != status)
        fail_msg("PUT %s as %s: %ld, expected %ld: %s", path, tenant, r.status, status, r.body);
    if (error != NULL)
        http_expect(&r, status, error, error);
    http_reply_free(&r);
    free(path);
    free(auth);
    free(t);
}

static void jwt_tenancy_gates_kv_like_header_tenancy(void **state)
{
    (void)state;
    char off[37], none[37], on[37];
    wire_uuid4(off);
    wire_uuid4(none);
    wire_uuid4(on);
    const char *p[] = {off};
    PQclear(pgtest_exec(DB, "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ($1::uuid, false)", 1, p));
    p[0] = on;
    PQclear(pgtest_exec(DB, "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ($1::uuid, true)", 1, p));
    kv_put_as(off, 403, "feature_gated");
    kv_put_as(none, 403, "feature_gated");
    kv_put_as(on, 200, NULL);
    assert_int_equal(count_of("SELECT count(*) FROM queen.kv WHERE tenant_id = $1::uuid", off), 0);
    assert_int_equal(count_of("SELECT count(*) FROM queen.kv WHERE tenant_id = $1::uuid", none), 0);
}

/* ---- finding 9b: queues and partitions per tenant ------------------------- */

static void queue_limit_refuses_the_creating_push_and_configure(void **state)
{
    (void)state;
    char t[37], h[64], other[37], oh[64];
    fresh(t, h);
    fresh(other, oh);
    expect(&LIM, h, "POST", "/api/v1/push",
           "{\"items\":[{\"queue\":\"a\",\"payload\":1},{\"queue\":\"b\",\"payload\":2},{\"queue\":\"c\",\"payload\":3}]}",
           201, NULL, NULL);
    /* One more queue, alone or among existing ones: refused, nothing written. */
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"d\",\"payload\":4}]}", 403, "limit_exceeded",
           "tenant_queue_limit");
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"a\",\"payload\":5},{\"queue\":\"e\",\"payload\":6}]}",
           403, "limit_exceeded", "tenant_queue_limit");
    expect(&LIM, h, "POST", "/api/v1/configure", "{\"queue\":\"f\"}", 403, "limit_exceeded", "tenant_queue_limit");
    /* The transaction answers its own failure body (success false, 200). */
    http_reply r = as(&LIM, h, "POST", "/api/v1/transaction",
                      "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"g\",\"payload\":7}]}]}");
    json_t *tb = json_of(&r);
    assert_true(json_is_false(json_object_get(tb, "success")));
    assert_string_equal(json_string_value(json_object_get(tb, "reason")), "limit_exceeded");
    assert_string_equal(json_string_value(json_object_get(tb, "error")), "tenant_queue_limit");
    json_decref(tb);
    http_reply_free(&r);
    assert_int_equal(queues_of(t), 3);
    assert_int_equal(messages_of(t), 3);
    /* Existing queues still take pushes and configure; other tenants are their own. */
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"a\",\"payload\":8}]}", 201, NULL, NULL);
    expect(&LIM, h, "POST", "/api/v1/configure", "{\"queue\":\"a\",\"options\":{\"leaseTime\":30}}", 200, NULL, NULL);
    expect(&LIM, oh, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"d\",\"payload\":1}]}", 201, NULL, NULL);
    /* A deleted queue frees its place. */
    expect(&LIM, h, "DELETE", "/api/v1/resources/queues/b", NULL, 200, NULL, NULL);
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"d\",\"payload\":9}]}", 201, NULL, NULL);
    assert_int_equal(queues_of(t), 3);
}

static void partition_limit_refuses_the_creating_push(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh(t, h);
    expect(&LIM, h, "POST", "/api/v1/push",
           "{\"items\":[{\"queue\":\"p\",\"partition\":\"1\",\"payload\":1},{\"queue\":\"p\",\"partition\":\"2\",\"payload\":1},"
           "{\"queue\":\"p\",\"partition\":\"3\",\"payload\":1},{\"queue\":\"p\",\"partition\":\"4\",\"payload\":1}]}",
           201, NULL, NULL);
    /* Two new ones where one fits: the whole push is refused. */
    expect(&LIM, h, "POST", "/api/v1/push",
           "{\"items\":[{\"queue\":\"p\",\"partition\":\"5\",\"payload\":1},{\"queue\":\"p\",\"partition\":\"6\",\"payload\":1}]}",
           403, "limit_exceeded", "tenant_partition_limit");
    assert_int_equal(partitions_of(t), 4);
    assert_int_equal(messages_of(t), 4);
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"p\",\"partition\":\"5\",\"payload\":1}]}", 201,
           NULL, NULL);
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":1}]}", 403, "limit_exceeded",
           "tenant_partition_limit");
    assert_int_equal(partitions_of(t), 5);
    assert_int_equal(queues_of(t), 1);
    expect(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"p\",\"partition\":\"3\",\"payload\":2}]}", 201,
           NULL, NULL);
}

/* ---- finding 9a: the trace budget ------------------------------------------ */

/* A partition of the tenant's (a push creates it): its id. */
static char *partition_id(const char *h)
{
    http_reply r = as(&LIM, h, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"tr\",\"payload\":1}]}");
    assert_int_equal(r.status, 201);
    json_t *b = json_of(&r);
    char *id = strdup(json_string_value(json_object_get(json_array_get(b, 0), "partition_id")));
    json_decref(b);
    http_reply_free(&r);
    return id;
}

static void trace_as(const char *h, const char *pid, int data_bytes, long status, const char *reason)
{
    char *data = malloc((size_t)data_bytes + 1);
    memset(data, 'x', (size_t)data_bytes);
    data[data_bytes] = '\0';
    /* data is a JSON string: its stored size is data_bytes + 2 quotes. */
    char *body = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"m\",\"traceName\":\"n\",\"data\":\"%s\"}", pid, data);
    expect(&LIM, h, "POST", "/api/v1/traces", body, status, reason ? "limit_exceeded" : NULL, reason);
    free(body);
    free(data);
}

static long long traces_of(const char *tenant)
{
    return count_of("SELECT count(*) FROM queen.log_traces WHERE tenant_id = $1::uuid", tenant);
}

static void traces_count_against_a_tenant_budget(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh(t, h);
    char *pid = partition_id(h);
    for (int i = 0; i < 3; i++)
        trace_as(h, pid, 10, 201, NULL);
    trace_as(h, pid, 10, 403, "tenant_trace_limit");
    assert_int_equal(traces_of(t), 3);
    /* Retention (or a queue delete) gives the room back. */
    const char *p[] = {t};
    PQclear(pgtest_exec(DB, "DELETE FROM queen.log_traces WHERE tenant_id = $1::uuid", 1, p));
    trace_as(h, pid, 10, 201, NULL);
    free(pid);

    /* Bytes: 1000 in all; 600 + 600 does not fit, 600 + 300 does. */
    char u[37], uh[64];
    fresh(u, uh);
    pid = partition_id(uh);
    trace_as(uh, pid, 598, 201, NULL);
    trace_as(uh, pid, 598, 403, "tenant_trace_limit");
    trace_as(uh, pid, 298, 201, NULL);
    assert_int_equal(traces_of(u), 2);
    PQclear(pgtest_exec(DB, "SELECT queen.log_trace_retention_step_v1(now() + interval '1 day', 60, 1000)", 0, NULL));
    assert_int_equal(traces_of(u), 0);
    trace_as(uh, pid, 598, 201, NULL);
    free(pid);
}

/* ---- finding 9c: the long poll's timeout ------------------------------------ */

static void int_max_timeouts_are_capped_on_every_pop_route(void **state)
{
    (void)state;
    char t[37], h[64];
    fresh(t, h);
    static const char *const paths[] = {
        "/api/v1/pop/queue/lp?wait=true&timeout=2147483647",
        "/api/v1/pop/queue/lp/partition/x?wait=true&timeout=2147483647",
        "/api/v1/pop?namespace=lpns&wait=true&timeout=2147483647",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        long long t0 = now_ms();
        expect(&LIM, h, "GET", paths[i], NULL, 204, NULL, NULL);
        long long took = now_ms() - t0;
        if (took < POLL_CAP_MS - 200 || took > POLL_CAP_MS + 3000)
            fail_msg("%s answered after %lld ms on a broker capped at %d ms", paths[i], took, POLL_CAP_MS);
    }
    expect(&LIM, h, "GET", "/api/v1/pop/queue/lp?wait=true&timeout=2147483648", NULL, 400, NULL, NULL);
}

/* ---- finding 9d: long polls per tenant ------------------------------------- */

#define POLLERS 40

typedef struct poller {
    const char *path, *header;
    long status;
    pthread_t t;
} poller;

static void *poll_run(void *arg)
{
    poller *p = arg;
    http_reply r = as(&POLLS, p->header, "GET", p->path, NULL);
    __atomic_store_n(&p->status, r.status, __ATOMIC_RELEASE);
    http_reply_free(&r);
    return NULL;
}

static int count_status(poller *p, int n, long status)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += __atomic_load_n(&p[i].status, __ATOMIC_ACQUIRE) == status;
    return k;
}

static void one_tenant_cannot_take_every_connection(void **state)
{
    (void)state;
    char a[37], ah[64], b[37], bh[64];
    fresh(a, ah);
    fresh(b, bh);
    const int share = CONN_CAP / 4;
    poller p[POLLERS];
    memset(p, 0, sizeof p);
    for (int i = 0; i < POLLERS; i++) {
        p[i].path = "/api/v1/pop/queue/hog?wait=true&timeout=2147483647";
        p[i].header = ah;
        pthread_create(&p[i].t, NULL, poll_run, &p[i]);
    }
    /* Those past the tenant's share are answered at once: 429, or 503 for
     * the few that arrived while the cap was full of their siblings. */
    WAIT_UNTIL(count_status(p, POLLERS, 429) + count_status(p, POLLERS, 503) == POLLERS - share, 10000,
               "%d refused 429 and %d 503 of %d long polls, expected %d in all", count_status(p, POLLERS, 429),
               count_status(p, POLLERS, 503), POLLERS, POLLERS - share);
    assert_true(count_status(p, POLLERS, 429) > 0);
    WAIT_UNTIL(http_metric(&POLLS, "http", NULL, "longPollsWaiting") == share, 5000, "%lld long polls waiting",
               http_metric(&POLLS, "http", NULL, "longPollsWaiting"));
    /* The refusal itself: at once, with Retry-After. */
    http_reply r = as(&POLLS, ah, "GET", "/api/v1/pop/queue/hog?wait=true&timeout=60000", NULL);
    http_expect(&r, 429, "rate_limited", "tenant_long_poll_limit");
    char *ra = http_reply_header(&r, "Retry-After");
    assert_non_null(ra);
    free(ra);
    http_reply_free(&r);
    /* Another tenant is served, its own long poll included, while the
     * first tenant's waits hold. */
    expect(&POLLS, bh, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"other\",\"payload\":1}]}", 201, NULL, NULL);
    expect(&POLLS, bh, "GET", "/api/v1/pop/queue/other?wait=true&timeout=5000", NULL, 200, NULL, NULL);
    assert_int_equal(count_status(p, POLLERS, 0), share);
    /* The waits end with messages for them, and free their places. */
    char *items = strdup("{\"items\":[");
    for (int i = 0; i < share; i++) {
        char *next = fmt("%s%s{\"queue\":\"hog\",\"partition\":\"p%d\",\"payload\":%d}", items, i ? "," : "", i, i);
        free(items);
        items = next;
    }
    char *body = fmt("%s]}", items);
    expect(&POLLS, ah, "POST", "/api/v1/push", body, 201, NULL, NULL);
    for (int i = 0; i < POLLERS; i++)
        pthread_join(p[i].t, NULL);
    assert_int_equal(count_status(p, POLLERS, 200), share);
    free(body);
    free(items);
    WAIT_UNTIL(http_metric(&POLLS, "http", NULL, "longPollsWaiting") == 0, 5000, "waits left");
    expect(&POLLS, ah, "GET", "/api/v1/pop/queue/hog?wait=true&timeout=1000", NULL, 204, NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jwt_tenancy_gates_kv_like_header_tenancy),
        cmocka_unit_test(queue_limit_refuses_the_creating_push_and_configure),
        cmocka_unit_test(partition_limit_refuses_the_creating_push),
        cmocka_unit_test(traces_count_against_a_tenant_budget),
        cmocka_unit_test(int_max_timeouts_are_capped_on_every_pop_route),
        cmocka_unit_test(one_tenant_cannot_take_every_connection),
    };
    return cmocka_run_group_tests_name("http_tenant_limits", tests, setup, teardown);
}
