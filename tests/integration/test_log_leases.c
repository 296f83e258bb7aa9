/* Leases and cursors of the log (sql/log_pop.sql, log_ack.sql, log_lease.sql)
 * with several real connections: two consumers of one group never hold the
 * same partition at once; pop never waits on a locked cursor; a stale or
 * foreign lease cannot ack; lease expiry redelivers with deliveryAttempt + 1;
 * a `failed` ack past retryLimit dead-letters; push wakes LISTENers on
 * queen_push. Every run uses its own random tenant, so runs never meet.
 * Threads never call cmocka: they count problems, main asserts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

static char tenant[37];

/* One pop, one row per delivered message:
 * partitionId, leaseId, transactionId, deliveryAttempt, partition name. */
static const char *const pop_sql =
    "SELECT b->>'partitionId', b->>'leaseId', m->>'transactionId', m->>'deliveryAttempt', b->>'partition'"
    " FROM (SELECT queen.log_pop_v1($1::uuid, $2, NULL, $3, $4::int, $5::int, false, NULL) AS b) s,"
    " jsonb_array_elements(b->'messages') AS m";

/* Ack one message; returns success, error. */
static const char *const ack_sql =
    "SELECT r->>'success', coalesce(r->>'error', ''), r->>'leaseReleased', r->>'dlq' FROM (SELECT queen.log_ack_v1($1::uuid,"
    " jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('transactionId', $2::text, 'partitionId', $3::text,"
    " 'leaseId', $4::text, 'status', $5::text))), $6) -> 0 AS r) s";

static void push_n(PGconn *c, const char *queue, const char *partition, int n, const char *txprefix)
{
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    const char *p[5] = {tenant, queue, partition, nbuf, txprefix};
    PQclear(pgtest_exec(c,
        "SELECT queen.log_push_v1($1::uuid, (SELECT jsonb_agg(jsonb_build_object('queue', $2::text,"
        " 'partition', $3::text, 'payload', i, 'transactionId', $5::text || i) ORDER BY i)"
        " FROM generate_series(1, $4::int) i))", 5, p));
}

static PGresult *pop(PGconn *c, const char *queue, const char *group, const char *batch, const char *lease)
{
    const char *p[5] = {tenant, queue, group, batch, lease};
    return PQexecParams(c, pop_sql, 5, NULL, p, NULL, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Two consumers of one group never hold the same partition at once.  */

#define HOLD_THREADS 4
#define HOLD_PARTS 3
#define HOLD_PER_PART 40

static struct {
    pthread_mutex_t mu;
    char holder_part[HOLD_THREADS][40]; /* partition id held by thread i, "" if none */
    int violations;
    int acked;
    int errors;
    char queue[64];
    char first_error[256];
} hold = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void hold_error(const char *what, const char *why)
{
    pthread_mutex_lock(&hold.mu);
    if (hold.errors++ == 0)
        snprintf(hold.first_error, sizeof hold.first_error, "%s: %s", what, why);
    pthread_mutex_unlock(&hold.mu);
}

static void *hold_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    char err[200]; /* fits first_error with its prefix */
    PGconn *c = pgtest_connect_quiet(err, sizeof err);
    if (c == NULL) {
        hold_error("connect", err);
        return NULL;
    }
    unsigned seed = (unsigned)me * 7919u + (unsigned)time(NULL);
    double deadline = now_s() + 20.0;
    int empty = 0;
    while (now_s() < deadline && empty < 30) {
        PGresult *r = pop(c, hold.queue, "g", "4", "30");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            hold_error("pop", PQerrorMessage(c));
            PQclear(r);
            break;
        }
        int n = PQntuples(r);
        if (n == 0) {
            PQclear(r);
            empty++;
            usleep(5000);
            continue;
        }
        empty = 0;
        const char *part = PQgetvalue(r, 0, 0);
        pthread_mutex_lock(&hold.mu);
        for (int t = 0; t < HOLD_THREADS; t++)
            if (t != me && strcmp(hold.holder_part[t], part) == 0)
                hold.violations++;
        snprintf(hold.holder_part[me], sizeof hold.holder_part[me], "%s", part);
        pthread_mutex_unlock(&hold.mu);

        usleep(rand_r(&seed) % 3000); /* "work" while holding the lease */

        /* Stop claiming before the ack commits: after it, another thread may
         * legitimately take the partition. */
        pthread_mutex_lock(&hold.mu);
        hold.holder_part[me][0] = '\0';
        pthread_mutex_unlock(&hold.mu);
        for (int i = 0; i < n; i++) {
            const char *p[6] = {tenant, PQgetvalue(r, i, 2), part, PQgetvalue(r, i, 1), "completed", "g"};
            PGresult *a = PQexecParams(c, ack_sql, 6, NULL, p, NULL, NULL, 0);
            if (PQresultStatus(a) != PGRES_TUPLES_OK || strcmp(PQgetvalue(a, 0, 0), "true") != 0) {
                hold_error("ack", PQerrorMessage(c));
            } else {
                pthread_mutex_lock(&hold.mu);
                hold.acked++;
                pthread_mutex_unlock(&hold.mu);
            }
            PQclear(a);
        }
        PQclear(r);
    }
    PQfinish(c);
    return NULL;
}

static void two_consumers_never_hold_one_partition(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *q = pgtest_unique("lease_hold_");
    snprintf(hold.queue, sizeof hold.queue, "%s", q);
    for (int p = 0; p < HOLD_PARTS; p++) {
        char part[16];
        snprintf(part, sizeof part, "p%d", p);
        push_n(c, q, part, HOLD_PER_PART, "m");
    }
    pthread_t th[HOLD_THREADS];
    for (int i = 0; i < HOLD_THREADS; i++)
        pthread_create(&th[i], NULL, hold_worker, (void *)(intptr_t)i);
    for (int i = 0; i < HOLD_THREADS; i++)
        pthread_join(th[i], NULL);
    if (hold.errors)
        fail_msg("%d errors, first: %s", hold.errors, hold.first_error);
    assert_int_equal(hold.violations, 0);
    /* Every message acked exactly once: no lease was ever shared. */
    assert_int_equal(hold.acked, HOLD_PARTS * HOLD_PER_PART);
    free(q);
    PQfinish(c);
}

/* ------------------------------------------------------------------ */

static void pop_never_waits_on_a_held_cursor(void **state)
{
    (void)state;
    PGconn *a = pgtest_connect(), *b = pgtest_connect();
    char *q = pgtest_unique("lease_nowait_");
    /* The group's first contact with the queue (its subscription, sql/log_pop.sql's
     * one wait) is made and committed before the race: what is raced here
     * is a partition's first cursor and a held one. */
    const char *cfg[] = {tenant, q};
    PQclear(pgtest_exec(a, "SELECT queen.log_configure_v1($1::uuid, $2, '{}')", 2, cfg));
    PQclear(pop(a, q, "g", "1", "30"));
    push_n(a, q, "Default", 4, "m");
    PQclear(pgtest_exec(b, "SET statement_timeout = '3s'", 0, NULL));

    /* First pop of the group in an open transaction: its cursor row is not
     * even committed yet. */
    PQclear(pgtest_exec(a, "BEGIN", 0, NULL));
    PGresult *r = pop(a, q, "g", "1", "30");
    assert_int_equal(PQntuples(r), 1);
    PQclear(r);
    double t0 = now_s();
    r = pop(b, q, "g", "1", "30");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 0);
    PQclear(r);
    assert_true(now_s() - t0 < 1.0);
    PQclear(pgtest_exec(a, "COMMIT", 0, NULL));

    /* An existing cursor row locked by a pop in flight (after its lease
     * expired, so it would otherwise be claimable). */
    PQclear(pgtest_exec(a, "UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 s'"
                           " FROM queen.log_partitions p, queen.queues q WHERE p.id = c.partition_id"
                           " AND q.id = p.queue_id AND q.name = $1", 1, (const char *const[]){q}));
    PQclear(pgtest_exec(a, "BEGIN", 0, NULL));
    r = pop(a, q, "g", "1", "30");
    assert_int_equal(PQntuples(r), 1);
    PQclear(r);
    t0 = now_s();
    r = pop(b, q, "g", "1", "30");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 0);
    PQclear(r);
    assert_true(now_s() - t0 < 1.0);
    PQclear(pgtest_exec(a, "ROLLBACK", 0, NULL));
    free(q);
    PQfinish(a);
    PQfinish(b);
}

static void ack_expect(PGconn *c, const char *tn, const char *tx, const char *part, const char *lease,
                       const char *status, const char *success, const char *error)
{
    const char *p[6] = {tn, tx, part, lease, status, "g"};
    PGresult *r = pgtest_exec(c, ack_sql, 6, p);
    if (strcmp(PQgetvalue(r, 0, 0), success) != 0 || strcmp(PQgetvalue(r, 0, 1), error) != 0)
        fail_msg("ack %s with lease %s: success=%s error=%s, expected %s/%s", tx, lease ? lease : "-",
                 PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), success, error);
    PQclear(r);
}

static void stale_or_foreign_lease_cannot_ack_and_expiry_redelivers(void **state)
{
    (void)state;
    PGconn *a = pgtest_connect(), *b = pgtest_connect();
    char *q = pgtest_unique("lease_stale_");
    push_n(a, q, "Default", 3, "m");

    PGresult *ra = pop(a, q, "g", "2", "1"); /* 1-second lease */
    assert_int_equal(PQntuples(ra), 2);
    assert_string_equal(PQgetvalue(ra, 0, 3), "1");
    char part[40], la[40];
    snprintf(part, sizeof part, "%s", PQgetvalue(ra, 0, 0));
    snprintf(la, sizeof la, "%s", PQgetvalue(ra, 0, 1));

    PGresult *early = pop(b, q, "g", "2", "1");
    assert_int_equal(PQntuples(early), 0); /* still leased */
    PQclear(early);

    usleep(1300 * 1000);
    /* Expired but not yet re-claimed: the holder can no longer ack. */
    ack_expect(a, tenant, "m1", part, la, "completed", "false", "lease_expired");

    PGresult *rb = pop(b, q, "g", "5", "30");
    assert_int_equal(PQntuples(rb), 2); /* its batch, not more */
    assert_string_equal(PQgetvalue(rb, 0, 2), "m1");
    assert_string_equal(PQgetvalue(rb, 1, 2), "m2");
    assert_string_equal(PQgetvalue(rb, 0, 3), "2"); /* deliveryAttempt + 1 */
    char lb[40];
    snprintf(lb, sizeof lb, "%s", PQgetvalue(rb, 0, 1));
    assert_string_not_equal(la, lb);

    ack_expect(a, tenant, "m1", part, la, "completed", "false", "lease_mismatch");
    char *foreign = pgtest_scalar(a, "SELECT gen_random_uuid()::text", 0, NULL);
    ack_expect(a, tenant, "m1", part, foreign, "completed", "false", "lease_mismatch");
    char *other = pgtest_scalar(a, "SELECT gen_random_uuid()::text", 0, NULL);
    ack_expect(a, other, "m1", part, lb, "completed", "false", "partition_not_found");

    ack_expect(b, tenant, "m2", part, lb, "completed", "true", "");
    const char *pc[2] = {part, "g"};
    char *cur = pgtest_scalar(a, "SELECT committed_offset FROM queen.log_consumers WHERE partition_id = $1::uuid"
                                 " AND consumer_group = $2", 2, pc);
    assert_string_equal(cur, "2");
    PGresult *rc = pop(a, q, "g", "5", "30");
    assert_int_equal(PQntuples(rc), 1);
    assert_string_equal(PQgetvalue(rc, 0, 2), "m3");
    assert_string_equal(PQgetvalue(rc, 0, 3), "1");
    PQclear(rc);
    free(cur);
    free(foreign);
    free(other);
    PQclear(ra);
    PQclear(rb);
    free(q);
    PQfinish(a);
    PQfinish(b);
}

static void failed_past_retry_limit_dead_letters(void **state)
{
    (void)state;
    PGconn *c = pgtest_connect();
    char *q = pgtest_unique("lease_dlq_");
    const char *pq[2] = {tenant, q};
    PQclear(pgtest_exec(c, "SELECT queen.log_configure_v1($1::uuid, $2, '{\"retryLimit\":2}')", 2, pq));
    push_n(c, q, "Default", 2, "m");
    for (int attempt = 1; attempt <= 3; attempt++) {
        PGresult *r = pop(c, q, "g", "1", "30");
        assert_int_equal(PQntuples(r), 1);
        assert_string_equal(PQgetvalue(r, 0, 2), "m1");
        assert_int_equal(atoi(PQgetvalue(r, 0, 3)), attempt);
        const char *p[6] = {tenant, "m1", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), "failed", "g"};
        PGresult *a = pgtest_exec(c, ack_sql, 6, p);
        assert_string_equal(PQgetvalue(a, 0, 0), "true");
        assert_string_equal(PQgetvalue(a, 0, 3), attempt == 3 ? "true" : "false"); /* dlq */
        PQclear(a);
        PQclear(r);
    }
    char *dl = pgtest_scalar(c, "SELECT string_agg(d.transaction_id || ':' || d.attempts, ',') FROM queen.log_dead_letters d"
                                " JOIN queen.queues q ON q.id = d.queue_id WHERE q.tenant_id = $1::uuid AND q.name = $2", 2, pq);
    assert_non_null(dl);
    assert_string_equal(dl, "m1:3");
    PGresult *r = pop(c, q, "g", "5", "30");
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 2), "m2");
    assert_string_equal(PQgetvalue(r, 0, 3), "1");
    PQclear(r);
    free(dl);
    free(q);
    PQfinish(c);
}

/* Reads queen_push notifications on l until one carries `until` (true) or 5 s
 * pass (false); counts in *others those carrying `other` on the way. A
 * listener gets notifications in commit order, so once a push committed after
 * some transaction has been seen, whatever that transaction notified has been
 * seen too: the observation that replaces waiting and hoping nothing came. */
static bool notified_until(PGconn *l, const char *until, const char *other, int *others)
{
    double deadline = now_s() + 5.0;
    while (now_s() < deadline) {
        PQconsumeInput(l);
        PGnotify *n;
        bool seen = false;
        while ((n = PQnotifies(l)) != NULL) {
            if (strcmp(n->relname, "queen_push") == 0) {
                if (other != NULL && strcmp(n->extra, other) == 0)
                    (*others)++;
                if (!seen && strcmp(n->extra, until) == 0)
                    seen = true;
            }
            PQfreemem(n);
            if (seen)
                return true;
        }
        int fd = PQsocket(l);
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(fd, &rs);
        struct timeval tv = {0, 200000};
        select(fd + 1, &rs, NULL, NULL, &tv);
    }
    return false;
}

static void push_notifies_queen_push(void **state)
{
    (void)state;
    PGconn *l = pgtest_connect(), *c = pgtest_connect();
    char *q = pgtest_unique("lease_notify_"), *m1 = pgtest_unique("lease_mark_"), *m2 = pgtest_unique("lease_mark_");
    PQclear(pgtest_exec(l, "LISTEN queen_push", 0, NULL));
    push_n(c, q, "Default", 3, "m");
    char want[128], mark1[128], mark2[128];
    snprintf(want, sizeof want, "%s:%s", tenant, q);
    snprintf(mark1, sizeof mark1, "%s:%s", tenant, m1);
    snprintf(mark2, sizeof mark2, "%s:%s", tenant, m2);
    assert_true(notified_until(l, want, NULL, NULL));
    /* Everything the committed push notified is read before the rollback. */
    push_n(c, m1, "Default", 1, "m");
    assert_true(notified_until(l, mark1, NULL, NULL));
    /* A rolled-back push notifies nobody: a push committed after it is
     * seen, and nothing for q came before it. */
    PQclear(pgtest_exec(c, "BEGIN", 0, NULL));
    push_n(c, q, "Default", 1, "r");
    PQclear(pgtest_exec(c, "ROLLBACK", 0, NULL));
    push_n(c, m2, "Default", 1, "m");
    int rolled_back = 0;
    assert_true(notified_until(l, mark2, want, &rolled_back));
    assert_int_equal(rolled_back, 0);
    free(q);
    free(m1);
    free(m2);
    PQfinish(l);
    PQfinish(c);
}

int main(void)
{
    wire_uuid4(tenant);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_consumers_never_hold_one_partition),
        cmocka_unit_test(pop_never_waits_on_a_held_cursor),
        cmocka_unit_test(stale_or_foreign_lease_cannot_ack_and_expiry_redelivers),
        cmocka_unit_test(failed_past_retry_limit_dead_letters),
        cmocka_unit_test(push_notifies_queen_push),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
