/* Exactly-once through the transaction wire, with crashes.
 *
 * A consumer pops a batch, and for each message commits ONE bundle: the kv
 * marker putIfAbsent done:<txid> (required), the effect (a push to the output
 * queue, with NO transactionId, so push dedup cannot hide a double effect)
 * and the ack. Two ways to die:
 *
 * 1. terminate_backend_never_leaves_a_partial_bundle: a killer thread runs
 *    pg_terminate_backend against the workers' backends while bundles are in
 *    flight (each bundle is BEGIN; wire; pg_sleep(random); COMMIT), many
 *    times; an observer checks, in one REPEATABLE READ snapshot, again and
 *    again, that for every input message marker <=> effect <=> acked.
 * 2. exactly_once_1000_messages_with_client_crashes: 1000 messages, several
 *    threads, short leases; the consumer randomly drops its connection after
 *    doing the work, before the commit or while the COMMIT is on the wire,
 *    and some bundles ack without their lease (so a stale consumer can race
 *    the redelivery and only the marker stops it), and a few stall past
 *    their lease before committing (so two consumers really do process the
 *    same message and race). At the end: exactly 1000
 *    effects, one per input, and 1000 markers.
 *
 * Own random tenant per run; threads never call cmocka (they count). */
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
#include <time.h>
#include <unistd.h>

#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

static char tenant[37];

/* $1 tenant, $2 partitionId, $3 txid, $4 leaseId or NULL, $5 out queue. */
static const char *const bundle_sql =
    "SELECT queen.log_transaction_wire_v1($1::uuid, jsonb_build_object("
    " 'operations', jsonb_build_array("
    "   jsonb_build_object('type', 'push', 'items', jsonb_build_array(jsonb_build_object("
    "     'queue', $5::text, 'payload', jsonb_build_object('src', $3::text)))),"
    "   jsonb_strip_nulls(jsonb_build_object('type', 'ack', 'transactionId', $3::text, 'partitionId', $2::text,"
    "     'consumerGroup', 'eo', 'leaseId', $4::text))),"
    " 'kv', jsonb_build_array(jsonb_build_object('op', 'putIfAbsent', 'ns', 'done', 'key', $3::text,"
    "   'value', true, 'forever', true, 'required', true))))::text";

static const char *const pop_sql =
    "SELECT b->>'partitionId', b->>'leaseId', m->>'transactionId'"
    " FROM (SELECT queen.log_pop_v1($1::uuid, $2, NULL, 'eo', 5, $3::int, false, NULL) AS b) s,"
    " jsonb_array_elements(b->'messages') AS m";

typedef struct run {
    char in[64], out[64];
    int lease_s;
    int drop_before_pct, drop_during_pct, leaseless_pct;
    int stall_pct;       /* sleep past the lease before committing */
    bool txn_with_sleep; /* BEGIN; wire; pg_sleep; COMMIT (for the killer) */
    volatile int stop;
    pthread_mutex_t mu;
    int pids[8];         /* backend pid of each worker, 0 when none */
    int committed, markers_seen, lease_lost, crashes, terminated, errors;
    char first_error[300];
} run;

typedef struct worker_arg {
    run *r;
    int me;
} worker_arg;

static void count(run *r, int *field, const char *err)
{
    pthread_mutex_lock(&r->mu);
    (*field)++;
    if (err != NULL && field == &r->errors && r->first_error[0] == '\0')
        snprintf(r->first_error, sizeof r->first_error, "%s", err);
    pthread_mutex_unlock(&r->mu);
}

static void set_pid(run *r, int me, int pid)
{
    pthread_mutex_lock(&r->mu);
    r->pids[me] = pid;
    pthread_mutex_unlock(&r->mu);
}

static bool is_conn_loss(PGconn *c, const PGresult *res)
{
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return PQstatus(c) != CONNECTION_OK || (st != NULL && (strncmp(st, "08", 2) == 0 || strcmp(st, "57P01") == 0));
}

/* Runs one statement; returns its result (caller clears). */
static PGresult *q(PGconn *c, const char *sql)
{
    return PQexec(c, sql);
}

static void *worker(void *p)
{
    worker_arg *wa = p;
    run *r = wa->r;
    unsigned seed = (unsigned)wa->me * 2654435761u ^ (unsigned)time(NULL);
    PGconn *c = NULL;
    char lease_s[16];
    snprintf(lease_s, sizeof lease_s, "%d", r->lease_s);

    while (!r->stop) {
        if (c == NULL || PQstatus(c) != CONNECTION_OK) {
            if (c != NULL)
                PQfinish(c);
            set_pid(r, wa->me, 0);
            char err[256];
            c = pgtest_connect_quiet(err, sizeof err);
            if (c == NULL) {
                usleep(50000);
                continue;
            }
            set_pid(r, wa->me, PQbackendPID(c));
        }
        const char *pp[3] = {tenant, r->in, lease_s};
        PGresult *batch = PQexecParams(c, pop_sql, 3, NULL, pp, NULL, NULL, 0);
        if (PQresultStatus(batch) != PGRES_TUPLES_OK) {
            if (is_conn_loss(c, batch))
                count(r, &r->terminated, NULL);
            else
                count(r, &r->errors, PQresultErrorMessage(batch));
            PQclear(batch);
            PQfinish(c);
            c = NULL;
            continue;
        }
        if (PQntuples(batch) == 0) {
            PQclear(batch);
            usleep(20000);
            continue;
        }
        for (int i = 0; i < PQntuples(batch) && c != NULL; i++) {
            /* The work is done here (its effect is the push in the bundle). */
            int roll = (int)(rand_r(&seed) % 100);
            if (roll < r->drop_before_pct) { /* crash before the commit */
                PQfinish(c);
                c = NULL;
                count(r, &r->crashes, NULL);
                break;
            }
            if ((int)(rand_r(&seed) % 100) < r->stall_pct)
                usleep((useconds_t)r->lease_s * 1000000 + 300000); /* a slow consumer: lease expires */
            bool leaseless = (int)(rand_r(&seed) % 100) < r->leaseless_pct;
            const char *bp[5] = {tenant, PQgetvalue(batch, i, 0), PQgetvalue(batch, i, 2),
                                 leaseless ? NULL : PQgetvalue(batch, i, 1), r->out};
            bool explicit_txn = r->txn_with_sleep || roll < r->drop_before_pct + r->drop_during_pct;
            if (explicit_txn) {
                PGresult *b = q(c, "BEGIN");
                PQclear(b);
            }
            PGresult *res = PQexecParams(c, bundle_sql, 5, NULL, bp, NULL, NULL, 0);
            ExecStatusType st = PQresultStatus(res);
            if (st == PGRES_TUPLES_OK && roll < r->drop_before_pct + r->drop_during_pct) {
                /* crash during the commit: COMMIT sent (or not), never read */
                if (rand_r(&seed) % 2)
                    PQsendQuery(c, "COMMIT");
                PQclear(res);
                PQfinish(c);
                c = NULL;
                count(r, &r->crashes, NULL);
                break;
            }
            if (st == PGRES_TUPLES_OK && r->txn_with_sleep) {
                char sl[64];
                snprintf(sl, sizeof sl, "SELECT pg_sleep(%d / 1000.0)", (int)(rand_r(&seed) % 15));
                PQclear(res);
                res = q(c, sl);
                if (PQresultStatus(res) == PGRES_TUPLES_OK) {
                    PQclear(res);
                    res = q(c, "COMMIT");
                }
                st = PQresultStatus(res) == PGRES_COMMAND_OK ? PGRES_TUPLES_OK : PQresultStatus(res);
            }
            if (st == PGRES_TUPLES_OK) {
                count(r, &r->committed, NULL);
                PQclear(res);
                continue;
            }
            const char *ss = PQresultErrorField(res, PG_DIAG_SQLSTATE);
            if (is_conn_loss(c, res)) {
                count(r, &r->terminated, NULL);
                PQclear(res);
                PQfinish(c);
                c = NULL;
                break;
            }
            if (explicit_txn) {
                PGresult *b = q(c, "ROLLBACK");
                PQclear(b);
            }
            if (ss != NULL && strcmp(ss, "23514") == 0) {
                /* Someone already did this message: go on with the next. */
                count(r, &r->markers_seen, NULL);
                PQclear(res);
                continue;
            }
            if (ss != NULL && strcmp(ss, "55000") == 0) {
                /* Our lease is gone: the batch is someone else's now. */
                count(r, &r->lease_lost, NULL);
                PQclear(res);
                break;
            }
            count(r, &r->errors, PQresultErrorMessage(res));
            PQclear(res);
            break;
        }
        PQclear(batch);
    }
    set_pid(r, wa->me, 0);
    if (c != NULL)
        PQfinish(c);
    return NULL;
}

/* Pushes n messages t<k> round-robin over nparts partitions of r->in. */
static void fill(PGconn *c, run *r, int n, int nparts)
{
    char nb[16], pb[16];
    snprintf(nb, sizeof nb, "%d", n);
    snprintf(pb, sizeof pb, "%d", nparts);
    const char *p[4] = {tenant, r->in, nb, pb};
    /* Leases here expire on purpose (killed and slow consumers), and each
     * expiry counts toward retryLimit (log_pop.sql): a limit no run reaches, so every
     * input is processed and none becomes a dead letter (acked, no effect). */
    PQclear(pgtest_exec(c, "SELECT queen.log_configure_v1($1::uuid, $2, '{\"retryLimit\":1000000}')", 2, p));
    PQclear(pgtest_exec(c, "SELECT queen.log_push_v1($1::uuid, (SELECT jsonb_agg(jsonb_build_object('queue', $2::text,"
                           " 'partition', 'p' || (i % $4::int), 'payload', i, 'transactionId', 't' || i) ORDER BY i)"
                           " FROM generate_series(1, $3::int) i))", 4, p));
}

/* Messages of r->in not yet consumed by group eo (an unseen partition
 * counts whole). */
static long remaining(PGconn *c, run *r)
{
    const char *p[2] = {tenant, r->in};
    return pgtest_int(c, "SELECT coalesce(sum(p.last_offset - coalesce(c.committed_offset, 0)), -1)"
                         " FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
                         " LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = 'eo'"
                         " WHERE q.tenant_id = $1::uuid AND q.name = $2", 2, p);
}

/* Input messages whose marker, effect and ack do not agree, in one snapshot. */
static const char *const disagree_sql =
    "WITH src AS ("
    "  SELECT m.transaction_id AS tx, m.msg_offset <= coalesce(c.committed_offset, 0) AS acked"
    "  FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id"
    "  JOIN queen.queues q ON q.id = p.queue_id"
    "  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = 'eo'"
    "  WHERE q.tenant_id = $1::uuid AND q.name = $2),"
    " eff AS ("
    "  SELECT m.payload->>'src' AS tx, count(*) AS n FROM queen.log_messages m"
    "  JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id"
    "  WHERE q.tenant_id = $1::uuid AND q.name = $3 GROUP BY 1),"
    " mk AS ("
    "  SELECT r->>'key' AS tx FROM jsonb_array_elements("
    "    queen.kv_list_v1($1::uuid, 'done', '', NULL, 1000, true, false)->'rows') r)"
    " SELECT count(*) FROM src"
    " WHERE (SELECT coalesce(max(n), 0) FROM eff WHERE eff.tx = src.tx) > 1"
    "    OR EXISTS (SELECT 1 FROM eff WHERE eff.tx = src.tx) <> EXISTS (SELECT 1 FROM mk WHERE mk.tx = src.tx)"
    "    OR EXISTS (SELECT 1 FROM eff WHERE eff.tx = src.tx) <> src.acked";

static long disagreements(PGconn *c, run *r)
{
    PQclear(pgtest_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL));
    const char *p[3] = {tenant, r->in, r->out};
    long n = pgtest_int(c, disagree_sql, 3, p);
    PQclear(pgtest_exec(c, "COMMIT", 0, NULL));
    return n;
}

static void start(run *r, pthread_t *th, worker_arg *wa, int n)
{
    for (int i = 0; i < n; i++) {
        wa[i] = (worker_arg){r, i};
        pthread_create(&th[i], NULL, worker, &wa[i]);
    }
}

static void join(run *r, pthread_t *th, int n)
{
    r->stop = 1;
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

static void final_checks(PGconn *c, run *r, long n)
{
    const char *p[3] = {tenant, r->in, r->out};
    const char *po[2] = {tenant, r->out};
    char *eff = pgtest_scalar(c, "SELECT count(*) || ' ' || count(DISTINCT m.payload->>'src') FROM queen.log_messages m"
                                 " JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id"
                                 " WHERE q.tenant_id = $1::uuid AND q.name = $2", 2, po);
    char want[64];
    snprintf(want, sizeof want, "%ld %ld", n, n);
    assert_string_equal(eff, want); /* exactly n effects, one per input */
    char *orphans = pgtest_scalar(c, "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id"
                                     " JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1::uuid AND q.name = $2"
                                     " AND NOT EXISTS (SELECT 1 FROM queen.log_messages e JOIN queen.log_partitions ep ON ep.id = e.partition_id"
                                     "   JOIN queen.queues eq ON eq.id = ep.queue_id WHERE eq.tenant_id = $1::uuid AND eq.name = $3"
                                     "   AND e.payload->>'src' = m.transaction_id)", 3, p);
    assert_string_equal(orphans, "0");
    char *markers = pgtest_scalar(c, "SELECT coalesce((SELECT (e->>'keys')::bigint FROM jsonb_array_elements("
                                     "queen.kv_namespaces_v1($1::uuid)) e WHERE e->>'namespace' = 'done'), 0)", 1, po);
    snprintf(want, sizeof want, "%ld", n);
    assert_string_equal(markers, want);
    assert_int_equal(disagreements(c, r), 0);
    free(eff);
    free(orphans);
    free(markers);
}

/* A fresh run under a fresh tenant: the markers of one test (namespace
 * "done", keys t1..tN) never meet another's. */
static void new_run(run *r, const char *tag)
{
    wire_uuid4(tenant);
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    char *a = pgtest_unique(tag), *b = pgtest_unique("eo_out_");
    snprintf(r->in, sizeof r->in, "%s", a);
    snprintf(r->out, sizeof r->out, "%s", b);
    free(a);
    free(b);
}

static void terminate_backend_never_leaves_a_partial_bundle(void **state)
{
    (void)state;
    enum { N = 200, PARTS = 4, WORKERS = 3 };
    static run r;
    new_run(&r, "eo_kill_");
    r.lease_s = 1;
    r.txn_with_sleep = true;
    PGconn *c = pgtest_connect(), *killer = pgtest_connect();
    fill(c, &r, N, PARTS);

    pthread_t th[WORKERS];
    worker_arg wa[WORKERS];
    start(&r, th, wa, WORKERS);
    unsigned seed = (unsigned)time(NULL);
    int kills = 0, snapshots = 0;
    long bad = 0;
    double t0 = now_s(), last_kill = 0;
    while (now_s() - t0 < 45.0 && remaining(c, &r) != 0) {
        if (kills < 40 && now_s() - last_kill > 0.08) {
            pthread_mutex_lock(&r.mu);
            int pid = r.pids[rand_r(&seed) % WORKERS];
            pthread_mutex_unlock(&r.mu);
            if (pid != 0) {
                char pb[16];
                snprintf(pb, sizeof pb, "%d", pid);
                char *ok = pgtest_scalar(killer, "SELECT pg_terminate_backend($1::int)", 1, (const char *const[]){pb});
                if (ok && strcmp(ok, "t") == 0)
                    kills++;
                free(ok);
            }
            last_kill = now_s();
        }
        bad += disagreements(c, &r);
        snapshots++;
        usleep(30000);
    }
    join(&r, th, WORKERS);
    if (r.errors)
        fail_msg("%d unexpected errors, first: %s", r.errors, r.first_error);
    printf("# %d kills, %d snapshots, %d bundles committed, %d backends lost, %.1f s\n", kills, snapshots,
           r.committed, r.terminated, now_s() - t0);
    assert_int_equal(bad, 0);
    assert_true(kills >= 20);
    assert_true(snapshots >= 20);
    assert_int_equal(remaining(c, &r), 0);
    final_checks(c, &r, N);
    PQfinish(killer);
    PQfinish(c);
}

static void exactly_once_1000_messages_with_client_crashes(void **state)
{
    (void)state;
    enum { N = 1000, PARTS = 8, WORKERS = 4 };
    static run r;
    new_run(&r, "eo_in_");
    r.lease_s = 1;
    r.drop_before_pct = 2;
    r.drop_during_pct = 2;
    r.leaseless_pct = 30;
    r.stall_pct = 1;
    PGconn *c = pgtest_connect();
    fill(c, &r, N, PARTS);

    pthread_t th[WORKERS];
    worker_arg wa[WORKERS];
    start(&r, th, wa, WORKERS);
    double t0 = now_s();
    while (now_s() - t0 < 50.0 && remaining(c, &r) != 0)
        usleep(100000);
    join(&r, th, WORKERS);
    if (r.errors)
        fail_msg("%d unexpected errors, first: %s", r.errors, r.first_error);
    printf("# %d crashes, %d bundles committed, %d found the marker, %d lost the lease, %.1f s\n", r.crashes,
           r.committed, r.markers_seen, r.lease_lost, now_s() - t0);
    assert_int_equal(remaining(c, &r), 0);
    assert_true(r.crashes >= 10);
    assert_true(r.markers_seen + r.lease_lost >= 1); /* a real race happened */
    final_checks(c, &r, N);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(terminate_backend_never_leaves_a_partial_bundle),
        cmocka_unit_test(exactly_once_1000_messages_with_client_crashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
