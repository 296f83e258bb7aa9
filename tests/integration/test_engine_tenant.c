/* The tenant argument is judged once, in libqueen, at every public entry
 * (tenant.c): a canonical uuid in any case is that tenant, lower-cased;
 * anything else is 400 bad_tenant before any table, SQL or log sees it.
 * Regressions: a 39-byte tenant reached the quota table (a heap overflow in
 * its refresh), an upper-case tenant was never marked loaded (every
 * admission passed), and one malformed tenant failed every refresh chunk
 * (a healthy tenant's limit change never arrived). Real PostgreSQL. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

static void expect_bad_tenant(int rc, const queen_error *e, const char *what)
{
    if (rc != -1 || e->category != QUEEN_ERR_BAD_REQUEST || strcmp(e->reason, "bad_tenant") != 0)
        fail_msg("%s: rc %d category %d reason %s", what, rc, (int)e->category, e->reason);
}

static void never_called(void *ctx, bool woken)
{
    (void)ctx;
    (void)woken;
    fail_msg("a waiter registered for a malformed tenant fired");
}

static void every_entry_refuses_a_malformed_tenant(void **state)
{
    (void)state;
    queen *q = engine_open(2);
    static const char *const bad[] = {
        "00000000-0000-0000-0000-0000000000011", /* 37 bytes */
        "00000000-0000-0000-0000-00000000000",   /* 35 */
        "0000000000000000000000000000000000001",  /* no dashes */
        "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",  /* 36 bytes, not hex */
        "{0000000-0000-0000-0000-000000000001}", /* 38: braces */
        "0123456789012345678901234567890123456789"+1, /* 39 bytes: once written past the quota table's buffer */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *t = bad[i];
        queen_error e;
        char *out = NULL;
        int retry = 0;
        expect_bad_tenant(queen_kv_admit(q, t, 0, 1, 1, 1, &retry, &e), &e, "kv_admit");
        expect_bad_tenant(queen_kv_get(q, t, "ns", "k", &out, &e), &e, "kv_get");
        expect_bad_tenant(queen_kv_put(q, t, "ns", "k", "1", QUEEN_FOREVER, -1, false, &out, &e), &e, "kv_put");
        expect_bad_tenant(queen_kv_apply(q, t, "[]", false, &out, &e), &e, "kv_apply");
        expect_bad_tenant(queen_kv_list(q, t, "ns", NULL, NULL, 0, false, false, &out, &e), &e, "kv_list");
        expect_bad_tenant(queen_kv_namespaces(q, t, &out, &e), &e, "kv_namespaces");
        expect_bad_tenant(queen_push(q, t, "[{\"queue\":\"q\",\"payload\":1}]", &out, &e), &e, "push");
        queen_pop_options o = {.queue = "q"};
        expect_bad_tenant(queen_pop(q, t, &o, &out, &e), &e, "pop");
        expect_bad_tenant(queen_ack(q, t, "[]", NULL, &out, &e), &e, "ack");
        expect_bad_tenant(queen_lease_extend(q, t, "x", 10, &out, &e), &e, "lease_extend");
        expect_bad_tenant(queen_configure(q, t, "q", "{}", &out, &e), &e, "configure");
        expect_bad_tenant(queen_queues(q, t, &out, &e), &e, "queues");
        expect_bad_tenant(queen_queue_delete(q, t, "q", &out, &e), &e, "queue_delete");
        expect_bad_tenant(queen_transaction(q, t, "{\"kv\":[]}", &out, &e), &e, "transaction");
        assert_null(out);
        assert_null(queen_wait_for_push(q, t, "q", 10, never_called, NULL));
    }
    queen_close(q);
}

static char *tenant_with_quota(PGconn *db, const char *max_rows)
{
    char *t = malloc(37);
    wire_uuid4(t);
    const char *p[] = {t, max_rows};
    PQclear(pgtest_exec(db, "INSERT INTO queen.kv_quota (tenant_id, max_rows) VALUES ($1::uuid, $2::bigint)", 2, p));
    return t;
}

static void upper(char *s)
{
    for (; *s; s++)
        *s = (char)toupper((unsigned char)*s);
}

/* With max_rows = 1, the same tenant spelled upper-case gets one creating
 * write, not three: the table holds one entry per tenant, loaded once. */
static void upper_case_is_the_same_tenant(void **state)
{
    (void)state;
    PGconn *db = pgtest_connect();
    char *t = tenant_with_quota(db, "1");
    char *T = strdup(t);
    upper(T);
    queen *q = engine_open(2);
    int admitted = 0;
    for (int i = 0; i < 3; i++) {
        queen_error e;
        int retry;
        if (queen_kv_admit(q, T, 0, 1, 1, 1, &retry, &e) == 0)
            admitted++;
        else
            assert_string_equal(e.reason, "kv_quota_exceeded");
    }
    assert_int_equal(admitted, 1);
    /* The lower-case spelling is the same tenant: already full. */
    queen_error e;
    assert_int_equal(queen_kv_admit(q, t, 0, 1, 1, 1, NULL, &e), -1);
    assert_string_equal(e.reason, "kv_quota_exceeded");
    /* The typed calls admit too, so an embedder gets the same limits. */
    char *out = NULL;
    assert_int_equal(queen_kv_put(q, T, "ns", "k", "1", QUEEN_FOREVER, -1, false, &out, &e), -1);
    assert_string_equal(e.reason, "kv_quota_exceeded");
    queen_close(q);
    free(T);
    free(t);
    PQfinish(db);
}

/* A malformed tenant never enters the table, so the refresh (one
 * kv_quota_read_v1($1::uuid[]) per chunk of tenants) keeps working and a
 * healthy tenant's raised limit arrives within a refresh or two. */
static void a_malformed_tenant_never_blocks_a_refresh(void **state)
{
    (void)state;
    PGconn *db = pgtest_connect();
    char *t = tenant_with_quota(db, "1");
    queen_config cfg;
    engine_config(&cfg, pgtest_url(), 2);
    cfg.kv_quota_refresh_ms = 50;
    queen *q = engine_open_config(&cfg);
    queen_error e;
    assert_int_equal(queen_kv_admit(q, t, 0, 1, 1, 1, NULL, &e), 0);
    assert_int_equal(queen_kv_admit(q, t, 0, 1, 1, 1, NULL, &e), -1);
    expect_bad_tenant(queen_kv_admit(q, "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", 0, 1, 1, 1, NULL, &e), &e,
                      "malformed");
    const char *p[] = {t};
    PQclear(pgtest_exec(db, "UPDATE queen.kv_quota SET max_rows = 1000000 WHERE tenant_id = $1::uuid", 1, p));
    long long deadline = now_ms() + 10000;
    int rc;
    while ((rc = queen_kv_admit(q, t, 0, 1, 1, 1, NULL, &e)) != 0 && now_ms() < deadline)
        usleep(20000); /* polling the condition itself, with a deadline */
    if (rc != 0)
        fail_msg("the raised limit never arrived: %s", e.reason);
    queen_close(q);
    free(t);
    PQfinish(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_entry_refuses_a_malformed_tenant),
        cmocka_unit_test(upper_case_is_the_same_tenant),
        cmocka_unit_test(a_malformed_tenant_never_blocks_a_refresh),
    };
    return cmocka_run_group_tests_name("engine_tenant", tests, NULL, NULL);
}
