/* Exactly-once through the stream cycle (sql/streams.sql), with the worker killed at
 * every point of a cycle.
 *
 * Workers pop a batch of one or two messages of the source queue under a
 * lease, read their partition's counter "n" from the state, and commit ONE
 * cycle: the state ops (n += messages processed, and a marker seen:<txid>
 * per message), the sink pushes (one per message, payload {src: txid} and NO
 * transactionId, so push dedup cannot hide a double effect) and the ack of
 * the last processed message under the lease. Some cycles process only the
 * head of the batch (a partial ack), releasing the lease or keeping it.
 * Every cycle is BEGIN; cycle; pg_sleep(0..4 ms); COMMIT, and the worker
 * dies at random points: its connection closed before the cycle is sent
 * (before), after the cycle ran with the COMMIT never sent or sent and never
 * read (during / after the commit), and a killer terminates the workers'
 * backends at random moments (pg_terminate_backend) meanwhile. An observer
 * checks, in one REPEATABLE READ snapshot, again and again, and once at the
 * end, that for every source message: acked <=> exactly one sink message
 * <=> its seen marker, no message has two sink messages, and each
 * partition's counter n equals its cursor. At least 1,000 cycles run.
 *
 * Own random tenant per run; threads never call cmocka (they count). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
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

enum { N = 1800, PARTS = 12, WORKERS = 3, LEASE_S = 1, MAX_KILLS = 150 };

static char tenant[37], query_id[37], in_q[64], out_q[64];

static const char *const pop_sql =
    "SELECT b->>'partitionId', b->>'leaseId', m->>'transactionId'"
    " FROM (SELECT queen.log_pop_v1($1::uuid, $2, NULL, 'sq', $3::int, $4::int, false, NULL) AS b) s,"
    " jsonb_array_elements(b->'messages') AS m";

static const char *const n_sql =
    "SELECT coalesce(queen.streams_state_get_v1($1::uuid, jsonb_build_object('query_id', $2::text,"
    " 'partition_id', $3::text, 'keys', jsonb_build_array('n'))) #>> '{rows,0,value}', '0')";

static const char *const cycle_sql = "SELECT queen.streams_cycle_v1($1::uuid, $2::jsonb, NULL)::text";

typedef struct run {
    volatile int stop;
    pthread_mutex_t mu;
    int pids[WORKERS];
    int sent, committed, partial, lease_lost, dropped_before, dropped_during, terminated, errors;
    char first_error[300];
} run;

static run R;

static void count(int *field, const char *err)
{
    pthread_mutex_lock(&R.mu);
    (*field)++;
    if (err != NULL && field == &R.errors && R.first_error[0] == '\0')
        snprintf(R.first_error, sizeof R.first_error, "%s", err);
    pthread_mutex_unlock(&R.mu);
}

static void set_pid(int me, int pid)
{
    pthread_mutex_lock(&R.mu);
    R.pids[me] = pid;
    pthread_mutex_unlock(&R.mu);
}

static bool is_conn_loss(PGconn *c, const PGresult *res)
{
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return PQstatus(c) != CONNECTION_OK || (st != NULL && (strncmp(st, "08", 2) == 0 || strcmp(st, "57P01") == 0));
}

/* The cycle's body for messages txs[0..k) of partition pid. */
static char *cycle_body(const char *pid, const char *lease, char **txs, int k, long long n, bool release)
{
    json_t *ops = json_array(), *items = json_array();
    json_array_append_new(ops, json_pack("{s:s, s:s, s:I}", "type", "upsert", "key", "n", "value", (json_int_t)(n + k)));
    for (int i = 0; i < k; i++) {
        char key[300];
        snprintf(key, sizeof key, "seen:%s", txs[i]);
        json_array_append_new(ops, json_pack("{s:s, s:s, s:b}", "type", "upsert", "key", key, "value", 1));
        json_array_append_new(items, json_pack("{s:s, s:{s:s}}", "queue", out_q, "payload", "src", txs[i]));
    }
    json_t *body = json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:s, s:s, s:i}, s:b}", "query_id", query_id,
                             "partition_id", pid, "consumer_group", "sq", "state_ops", ops, "push_items", items, "ack",
                             "transactionId", txs[k - 1], "leaseId", lease, "status", "completed", "count", k,
                             "release_lease", release);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return text;
}

static void *worker(void *p)
{
    int me = (int)(intptr_t)p;
    unsigned seed = (unsigned)me * 2654435761u ^ (unsigned)time(NULL);
    PGconn *c = NULL;
    char lease_s[16];
    snprintf(lease_s, sizeof lease_s, "%d", LEASE_S);
    while (!R.stop) {
        if (c == NULL || PQstatus(c) != CONNECTION_OK) {
            if (c != NULL)
                PQfinish(c);
            set_pid(me, 0);
            char err[256];
            c = pgtest_connect_quiet(err, sizeof err);
            if (c == NULL) {
                usleep(50000);
                continue;
            }
            set_pid(me, PQbackendPID(c));
        }
        char batch_s[8];
        snprintf(batch_s, sizeof batch_s, "%d", 1 + (int)(rand_r(&seed) % 2));
        const char *pp[4] = {tenant, in_q, batch_s, lease_s};
        PGresult *batch = PQexecParams(c, pop_sql, 4, NULL, pp, NULL, NULL, 0);
        if (PQresultStatus(batch) != PGRES_TUPLES_OK || PQntuples(batch) == 0) {
            if (PQresultStatus(batch) != PGRES_TUPLES_OK) {
                if (is_conn_loss(c, batch))
                    count(&R.terminated, NULL);
                else
                    count(&R.errors, PQresultErrorMessage(batch));
                PQfinish(c);
                c = NULL;
            } else {
                usleep(5000);
            }
            PQclear(batch);
            continue;
        }
        int size = PQntuples(batch);
        const char *pid = PQgetvalue(batch, 0, 0), *lease = PQgetvalue(batch, 0, 1);
        const char *np[3] = {tenant, query_id, pid};
        PGresult *nres = PQexecParams(c, n_sql, 3, NULL, np, NULL, NULL, 0);
        if (PQresultStatus(nres) != PGRES_TUPLES_OK) {
            if (is_conn_loss(c, nres))
                count(&R.terminated, NULL);
            else
                count(&R.errors, PQresultErrorMessage(nres));
            PQclear(nres);
            PQclear(batch);
            PQfinish(c);
            c = NULL;
            continue;
        }
        long long n = atoll(PQgetvalue(nres, 0, 0));
        PQclear(nres);
        /* The head of the batch only, now and then: a partial ack. */
        int k = size > 1 && rand_r(&seed) % 4 == 0 ? 1 : size;
        bool release = k == size || rand_r(&seed) % 2 == 0;
        char *txs[2];
        for (int i = 0; i < k; i++)
            txs[i] = PQgetvalue(batch, i, 2);
        char *body = cycle_body(pid, lease, txs, k, n, release);
        int roll = (int)(rand_r(&seed) % 100);
        if (roll < 3) { /* dies before the cycle is sent */
            free(body);
            PQclear(batch);
            PQfinish(c);
            c = NULL;
            count(&R.dropped_before, NULL);
            continue;
        }
        PQclear(PQexec(c, "BEGIN"));
        const char *cp[2] = {tenant, body};
        count(&R.sent, NULL);
        PGresult *res = PQexecParams(c, cycle_sql, 2, NULL, cp, NULL, NULL, 0);
        free(body);
        PQclear(batch);
        if (PQresultStatus(res) == PGRES_TUPLES_OK && roll < 8) {
            /* dies during the commit: COMMIT never sent, or sent and never read */
            if (rand_r(&seed) % 2)
                PQsendQuery(c, "COMMIT");
            PQclear(res);
            PQfinish(c);
            c = NULL;
            count(&R.dropped_during, NULL);
            continue;
        }
        if (PQresultStatus(res) == PGRES_TUPLES_OK) {
            char sl[64];
            snprintf(sl, sizeof sl, "SELECT pg_sleep(%d / 1000.0)", (int)(rand_r(&seed) % 5));
            PQclear(res);
            res = PQexec(c, sl);
            if (PQresultStatus(res) == PGRES_TUPLES_OK) {
                PQclear(res);
                res = PQexec(c, "COMMIT");
            }
            if (PQresultStatus(res) == PGRES_COMMAND_OK) {
                count(&R.committed, NULL);
                if (k < size)
                    count(&R.partial, NULL);
                PQclear(res);
                continue;
            }
        }
        if (is_conn_loss(c, res)) {
            count(&R.terminated, NULL);
            PQclear(res);
            PQfinish(c);
            c = NULL;
            continue;
        }
        const char *ss = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (ss != NULL && strcmp(ss, "55000") == 0)
            count(&R.lease_lost, NULL); /* the batch's lease is gone: someone else's now */
        else
            count(&R.errors, PQresultErrorMessage(res));
        PQclear(res);
        PQclear(PQexec(c, "ROLLBACK"));
    }
    set_pid(me, 0);
    if (c != NULL)
        PQfinish(c);
    return NULL;
}

/* Source messages not yet consumed by group sq (an unseen partition counts whole). */
static long remaining(PGconn *c)
{
    const char *p[2] = {tenant, in_q};
    return pgtest_int(c, "SELECT coalesce(sum(p.last_offset - coalesce(c.committed_offset, 0)), -1)"
                         " FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
                         " LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = 'sq'"
                         " WHERE q.tenant_id = $1::uuid AND q.name = $2", 2, p);
}

/* Source messages whose ack, sink message and seen marker disagree, plus
 * partitions whose counter is not their cursor, in one snapshot. */
static const char *const violations_sql =
    "WITH src AS ("
    "  SELECT m.transaction_id AS tx, m.msg_offset <= coalesce(c.committed_offset, 0) AS acked"
    "  FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id"
    "  JOIN queen.queues q ON q.id = p.queue_id"
    "  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = 'sq'"
    "  WHERE q.tenant_id = $1::uuid AND q.name = $2),"
    " eff AS ("
    "  SELECT m.payload->>'src' AS tx, count(*) AS n FROM queen.log_messages m"
    "  JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id"
    "  WHERE q.tenant_id = $1::uuid AND q.name = $3 GROUP BY 1),"
    " seen AS ("
    "  SELECT substr(s.key, 6) AS tx FROM queen.streams_state s"
    "  WHERE s.tenant_id = $1::uuid AND s.query_id = $4::uuid AND s.key LIKE 'seen:%'),"
    " bad_msgs AS ("
    "  SELECT count(*) AS n FROM src LEFT JOIN eff ON eff.tx = src.tx LEFT JOIN seen ON seen.tx = src.tx"
    "  WHERE coalesce(eff.n, 0) > 1 OR (eff.tx IS NOT NULL) <> src.acked OR (seen.tx IS NOT NULL) <> src.acked),"
    " bad_counters AS ("
    "  SELECT count(*) AS n FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
    "  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = 'sq'"
    "  LEFT JOIN queen.streams_state s ON s.tenant_id = $1::uuid AND s.query_id = $4::uuid"
    "    AND s.partition_id = p.id AND s.key = 'n'"
    "  WHERE q.tenant_id = $1::uuid AND q.name = $2"
    "    AND coalesce((s.value #>> '{}')::bigint, 0) <> coalesce(c.committed_offset, 0))"
    " SELECT (SELECT n FROM bad_msgs) + (SELECT n FROM bad_counters)";

static long violations(PGconn *c)
{
    PQclear(pgtest_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL));
    const char *p[4] = {tenant, in_q, out_q, query_id};
    long n = pgtest_int(c, violations_sql, 4, p);
    PQclear(pgtest_exec(c, "COMMIT", 0, NULL));
    return n;
}

static void killed_at_every_point_of_a_cycle(void **state)
{
    (void)state;
    wire_uuid4(tenant);
    pthread_mutex_init(&R.mu, NULL);
    char *a = pgtest_unique("sq_in_"), *b = pgtest_unique("sq_out_");
    snprintf(in_q, sizeof in_q, "%s", a);
    snprintf(out_q, sizeof out_q, "%s", b);
    free(a);
    free(b);
    PGconn *c = pgtest_connect(), *killer = pgtest_connect();
    char nb[16], pb[16];
    snprintf(nb, sizeof nb, "%d", N);
    snprintf(pb, sizeof pb, "%d", PARTS);
    const char *fp[4] = {tenant, in_q, nb, pb};
    /* Killed workers' leases expire, and each expiry counts toward
     * retryLimit (log_pop.sql): a limit no run reaches, so no input becomes a dead
     * letter (acked without a sink message). */
    PQclear(pgtest_exec(c, "SELECT queen.log_configure_v1($1::uuid, $2, '{\"retryLimit\":1000000}')", 2, fp));
    PQclear(pgtest_exec(c, "SELECT queen.log_push_v1($1::uuid, (SELECT jsonb_agg(jsonb_build_object('queue', $2::text,"
                           " 'partition', 'p' || (i % $4::int), 'payload', i, 'transactionId', 't' || i) ORDER BY i)"
                           " FROM generate_series(1, $3::int) i))", 4, fp));
    char *reg = pgtest_scalar(c, "SELECT queen.streams_register_v1($1::uuid, jsonb_build_object('name', 'eo',"
                                 " 'source_queue', $2::text, 'config_hash', 'h')) ->> 'query_id'", 2, fp);
    snprintf(query_id, sizeof query_id, "%s", reg);
    free(reg);

    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    unsigned seed = (unsigned)time(NULL);
    int kills = 0, snapshots = 0;
    long bad = 0;
    double t0 = now_s(), last_kill = 0, last_snapshot = 0;
    while (now_s() - t0 < 180.0 && remaining(c) != 0) {
        /* A kill every 40..100 ms: each one that finds its worker holding a
         * lease stalls that partition for the lease (1 s). */
        if (kills < MAX_KILLS && now_s() - last_kill > 0.04 + (rand_r(&seed) % 60) / 1000.0) {
            pthread_mutex_lock(&R.mu);
            int pid = R.pids[rand_r(&seed) % WORKERS];
            pthread_mutex_unlock(&R.mu);
            if (pid != 0) {
                char pid_s[16];
                snprintf(pid_s, sizeof pid_s, "%d", pid);
                char *ok = pgtest_scalar(killer, "SELECT pg_terminate_backend($1::int)", 1, (const char *const[]){pid_s});
                if (ok && strcmp(ok, "t") == 0)
                    kills++;
                free(ok);
            }
            last_kill = now_s();
        }
        if (now_s() - last_snapshot > 0.25) { /* the check reads every message: not too often */
            bad += violations(c);
            snapshots++;
            last_snapshot = now_s();
        }
        usleep(20000);
    }
    R.stop = 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    if (R.errors)
        fail_msg("%d unexpected errors, first: %s", R.errors, R.first_error);
    printf("# %d cycles sent, %d committed (%d partial), %d lost their lease, %d dropped before, %d during/after the "
           "commit, %d backends terminated (%d kills), %d snapshots, %.1f s\n",
           R.sent, R.committed, R.partial, R.lease_lost, R.dropped_before, R.dropped_during, R.terminated, kills,
           snapshots, now_s() - t0);
    assert_int_equal(bad, 0);
    assert_int_equal(remaining(c), 0);
    assert_true(R.sent >= 1000);
    assert_true(R.committed >= 1000);
    assert_true(R.dropped_during >= 10);
    assert_true(R.partial >= 10);
    assert_true(kills >= 20);
    assert_true(snapshots >= 20);
    assert_int_equal(violations(c), 0);
    const char *op[3] = {tenant, out_q, query_id};
    char *eff = pgtest_scalar(c, "SELECT count(*) || ' ' || count(DISTINCT m.payload->>'src') FROM queen.log_messages m"
                                 " JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id"
                                 " WHERE q.tenant_id = $1::uuid AND q.name = $2",
                              2, op);
    char want[64];
    snprintf(want, sizeof want, "%d %d", N, N);
    assert_string_equal(eff, want); /* exactly N sink messages, one per input */
    const char *sp[2] = {tenant, query_id};
    assert_int_equal(pgtest_int(c, "SELECT count(*) FROM queen.streams_state WHERE tenant_id = $1::uuid"
                                   " AND query_id = $2::uuid AND key LIKE 'seen:%'", 2, sp),
                     N);
    assert_int_equal(pgtest_int(c, "SELECT sum((value #>> '{}')::bigint) FROM queen.streams_state WHERE tenant_id = $1::uuid"
                                   " AND query_id = $2::uuid AND key = 'n'", 2, sp),
                     N);
    free(eff);
    PQfinish(killer);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_at_every_point_of_a_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
