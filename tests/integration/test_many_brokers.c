/* Many brokers on one database: three real `queen serve` processes share one
 * PostgreSQL database (a fresh one per test), as a deployment behind a load
 * balancer would.
 *   - three brokers booting the schema at the same instant all come up, and
 *     every table, index, sequence and schema is created exactly once
 *     (an event trigger of the test's own records each creation);
 *   - a long poll on broker A is woken by a push through broker B (A's
 *     notifier hears B's NOTIFY);
 *   - the sweeper runs on all three: the expired rows seeded are all gone,
 *     the three deletion counters add up to exactly the rows seeded (none
 *     deleted twice), and PostgreSQL logged no lock wait of a writer or of a
 *     sweeper step (log_lock_waits with deadlock_timeout = 1 ms on the test's
 *     database; the server log is read from where the test began);
 *   - a rolling restart (SIGTERM, start again, one broker after the other)
 *     under write load loses no acknowledged write and doubles no effect;
 *   - the kv quota overshoot with three brokers stays within the documented
 *     bound (N - 1) x headroom (docs/api.md, Quota and rate limits; quota.c).
 * Figures are printed as "# figure NAME VALUE" lines. */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "campaign.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

#define NB 3 /* brokers */
#define DEFAULT_TENANT "00000000-0000-0000-0000-000000000001"

/* The brokers of the running test, killed by its teardown when the test
 * failed before stopping them. */
static test_broker *running;

static int kill_leftovers(void **state)
{
    (void)state;
    for (int i = 0; running != NULL && i < NB; i++) {
        if (running[i].pid > 0) {
            kill(running[i].pid, SIGKILL);
            waitpid(running[i].pid, NULL, 0);
            running[i].pid = 0;
        }
    }
    running = NULL;
    return 0;
}

/* Starts NB brokers on url at once (no waiting between the spawns) and waits
 * until every one answers /health. */
static void start_brokers(test_broker b[NB], const char *url, const char *const *env)
{
    running = b;
    for (int i = 0; i < NB; i++)
        broker_spawn(&b[i], url, env);
    for (int i = 0; i < NB; i++)
        if (!broker_wait_healthy(&b[i], 60000))
            fail_msg("broker %d never became healthy (log: %s)", i, b[i].log);
}

static void stop_brokers(test_broker b[NB])
{
    for (int i = 0; i < NB; i++) {
        if (b[i].pid > 0 && broker_stop(&b[i]) != 0)
            fail_msg("broker %d did not stop cleanly (log: %s)", i, b[i].log);
        unlink(b[i].log);
    }
}

static void exec_on(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect: %s", PQerrorMessage(c));
    PQclear(pgtest_exec(c, sql, 0, NULL));
    PQfinish(c);
}

static long long int_on(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect: %s", PQerrorMessage(c));
    long long v = pgtest_int(c, sql, 0, NULL);
    PQfinish(c);
    return v;
}

/* ---- schema boot ---------------------------------------------------------- */

/* Records every object a CREATE made (not the CREATE OR REPLACE kinds, which
 * re-create by design and keep their OIDs, nor ALTER): an IF NOT EXISTS that
 * found its object reports nothing, so each identity must appear once. */
static const char *const creation_audit[] = {
    "CREATE TABLE public.created_objects (tag text, identity text)",
    "CREATE FUNCTION public.record_creation() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN "
    "  INSERT INTO public.created_objects SELECT command_tag, object_identity FROM pg_event_trigger_ddl_commands()"
    "  WHERE command_tag IN ('CREATE TABLE', 'CREATE INDEX', 'CREATE SEQUENCE', 'CREATE SCHEMA', 'CREATE TYPE');"
    " END $$",
    "CREATE EVENT TRIGGER record_creation ON ddl_command_end EXECUTE FUNCTION public.record_creation()",
    NULL,
};

static void three_brokers_boot_the_schema_at_once(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("mb_boot_", &db);
    for (int i = 0; creation_audit[i]; i++)
        exec_on(url, creation_audit[i]);
    static const char *const env[] = {"QUEEN_LOG_LEVEL=info", NULL};
    test_broker b[NB];
    start_brokers(b, url, env);
    /* every broker went through the boot itself (none skipped it) */
    for (int i = 0; i < NB; i++) {
        char *log = read_file(b[i].log);
        if (strstr(log, "schema: applied") == NULL)
            fail_msg("broker %d never reported its schema boot:\n%s", i, log);
        free(log);
    }
    long long created = int_on(url, "SELECT count(*) FROM public.created_objects");
    long long twice = int_on(url, "SELECT count(*) FROM (SELECT identity FROM public.created_objects "
                                  "GROUP BY identity HAVING count(*) > 1) d");
    long long tables = int_on(url, "SELECT count(*) FROM pg_class WHERE relnamespace = 'queen'::regnamespace "
                                   "AND relkind IN ('r', 'p')");
    long long audited_tables = int_on(url, "SELECT count(DISTINCT identity) FROM public.created_objects "
                                           "WHERE tag = 'CREATE TABLE' AND identity LIKE 'queen.%'");
    print_message("# figure many_brokers.boot.objects_created %lld\n", created);
    print_message("# figure many_brokers.boot.objects_created_twice %lld\n", twice);
    if (twice != 0)
        fail_msg("%lld objects were created more than once by the concurrent boots", twice);
    /* the audit saw the boot (a trigger that recorded nothing would pass the
     * check above vacuously) */
    assert_true(tables > 0);
    assert_int_equal(audited_tables, tables);
    for (int i = 0; i < NB; i++) {
        http_reply r = broker_http(&b[i], "GET", "/health", NULL, NULL);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    stop_brokers(b);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* ---- long poll across brokers ----------------------------------------------- */

static void long_poll_on_a_is_woken_by_a_push_through_b(void **state)
{
    (void)state;
    char *db;
    char *url = pgtest_create_database("mb_poll_", &db);
    static const char *const env[] = {"QUEEN_LOG_LEVEL=error", NULL};
    test_broker b[NB];
    start_brokers(b, url, env);
    test_broker *A = &b[0], *B = &b[1];
    char *q = pgtest_unique("xpoll");
    char *path = fmt("/api/v1/pop/queue/%s?wait=true&timeout=20000", q);
    timed_get poll = {.b = A, .path = path};
    long long waiting = http_metric(A, "http", NULL, "longPollsWaiting");
    pthread_t t;
    pthread_create(&t, NULL, timed_get_run, &poll);
    /* suspended on A: its first attempt found nothing */
    WAIT_UNTIL(http_metric(A, "http", NULL, "longPollsWaiting") > waiting, 10000, "the long poll on A never waited");
    long long heard_before = http_metric(A, "engine", "notifier", "notifies");
    long long b_waiters = http_metric(B, "http", NULL, "longPollsWaiting");
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":{\"via\":\"B\"}}]}", q);
    json_decref(http_ok(B, "POST", "/api/v1/push", push, 201));
    pthread_join(t, NULL);
    assert_int_equal(poll.status, 200);
    /* A heard B's NOTIFY (the periodic re-check would also have found the
     * message, so delivery alone proves nothing about the wake-up). */
    long long heard = http_metric(A, "engine", "notifier", "notifies");
    if (heard <= heard_before)
        fail_msg("broker A's notifier heard no notification of B's push (%lld before, %lld after)", heard_before,
                 heard);
    assert_int_equal(b_waiters, 0); /* B served the push only */
    print_message("# figure many_brokers.long_poll.answered_ms %lld\n", poll.took_ms);
    free(q);
    free(path);
    free(push);
    stop_brokers(b);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* ---- sweepers ------------------------------------------------------------------ */

/* The size of the cluster's server log now: lock waits are read from here on. */
static long server_log_size(void)
{
    const char *dir = getenv("QUEEN_TEST_PG_DIR");
    if (dir == NULL)
        fail_msg("QUEEN_TEST_PG_DIR is not set: run the suite through make test");
    char *path = fmt("%s/server.log", dir);
    struct stat st;
    long size = stat(path, &st) == 0 ? (long)st.st_size : 0;
    free(path);
    return size;
}

/* The lock waits PostgreSQL logged since offset (log_lock_waits): each
 * "still waiting for" message with its DETAIL and CONTEXT lines. Counted
 * apart, not returned: waits of kv_usage_measure_v1 (sweepers measuring one
 * tenant's usage row at the same moment; no writer touches kv_usage) in
 * *measure_waits, and waits to extend a table (inserting writers growing
 * queen.kv together, whoever sweeps) in *extension_waits. The rest (row,
 * tuple, transaction and relation locks) are returned. */
static long long lock_waits_since(long offset, long long *measure_waits, long long *extension_waits)
{
    char *path = fmt("%s/server.log", getenv("QUEEN_TEST_PG_DIR"));
    FILE *f = fopen(path, "r");
    free(path);
    if (f == NULL)
        fail_msg("cannot read the server log");
    fseek(f, offset, SEEK_SET);
    long long others = 0;
    *measure_waits = *extension_waits = 0;
    char line[4096], block[16384] = "";
    bool in_wait = false;
    for (;;) {
        bool eof = fgets(line, sizeof line, f) == NULL;
        /* a new message (a LOG line, or the end) closes the block of the last wait */
        if (in_wait && (eof || strstr(line, " LOG: ") != NULL)) {
            if (strstr(block, "kv_usage_measure_v1") != NULL) {
                (*measure_waits)++;
            } else if (strstr(block, "on extension of relation") != NULL) {
                (*extension_waits)++;
            } else {
                others++;
                print_message("# lock wait:\n%s", block);
            }
            in_wait = false;
            block[0] = '\0';
        }
        if (eof)
            break;
        if (strstr(line, "still waiting for") != NULL)
            in_wait = true;
        if (in_wait && strlen(block) + strlen(line) < sizeof block)
            strcat(block, line);
    }
    fclose(f);
    return others;
}

typedef struct kv_writer {
    int id;
    const char *base;
    const char *ns;
    atomic_bool *stop;
    atomic_llong acked;
    long long failed;
} kv_writer;

/* Writes keys of its own only (a counter and new keys), so two writers never
 * want one row: any lock wait seen is one the sweepers caused. */
static void *kv_writer_run(void *arg)
{
    kv_writer *w = arg;
    void *curl = NULL;
    char body[256];
    for (long n = 0; !atomic_load(w->stop); n++) {
        if (n % 2 == 0)
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"incr\",\"ns\":\"%s\",\"key\":\"c%d\",\"delta\":1,\"forever\":true}]}",
                     w->ns, w->id);
        else
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"k%d-%ld\",\"value\":%ld,"
                     "\"ttlSeconds\":3600}]}",
                     w->ns, w->id, n, n);
        long status;
        char *reply;
        if (campaign_post(&curl, w->base, "/api/v1/kv", body, &status, &reply) == CALL_ANSWERED && status == 200 &&
            campaign_applied(reply))
            atomic_fetch_add(&w->acked, 1);
        else
            w->failed++;
        free(reply);
    }
    campaign_http_done(&curl);
    return NULL;
}

static long long deleted_total(test_broker b[NB])
{
    long long sum = 0;
    for (int i = 0; i < NB; i++)
        sum += http_metric(&b[i], "engine", "sweeper", "deletedTotal");
    return sum;
}

static void sweepers_on_three_brokers_delete_each_row_once_and_never_block_writers(void **state)
{
    (void)state;
    enum { SEEDED = 30000 };
    char *db;
    char *url = pgtest_create_database("mb_sweep_", &db);
    /* Every lock wait longer than 1 ms on this database goes to the server
     * log, whoever waits (set before any broker connects). */
    char *sql = fmt("ALTER DATABASE \"%s\" SET log_lock_waits = on", db);
    exec_on(url, sql);
    free(sql);
    sql = fmt("ALTER DATABASE \"%s\" SET deadlock_timeout = '1ms'", db);
    exec_on(url, sql);
    free(sql);
    /* small batches at a short cadence: the three sweepers meet on the same
     * shards over and over */
    static const char *const env[] = {"QUEEN_LOG_LEVEL=error", "QUEEN_KV_EXPIRE_EVERY_MS=50",
                                      "QUEEN_KV_EXPIRE_BATCH=100", "QUEEN_KV_EXPIRE_MAX_ROWS=2000", NULL};
    test_broker b[NB];
    start_brokers(b, url, env);
    /* from here: the schema boots (whose DDL may wait, bounded by
     * QUEEN_SCHEMA_LOCK_TIMEOUT_MS) are over */
    long log_from = server_log_size();
    long long before = deleted_total(b);
    /* Rows that are already expired, in every shard, committed at once
     * before the writers start (a bulk insert beside them would make them
     * wait to extend the table). */
    char *seed = fmt("INSERT INTO queen.kv (namespace, key, value, version, expires_at) "
                     "SELECT 'expired', 'e' || g, to_jsonb(g), nextval('queen.kv_version_seq'), "
                     "now() - interval '1 second' FROM generate_series(1, %d) g",
                     SEEDED);
    exec_on(url, seed);
    free(seed);
    atomic_bool stop = false;
    kv_writer w[NB];
    pthread_t th[NB];
    for (int i = 0; i < NB; i++) {
        w[i] = (kv_writer){.id = i, .base = b[i].base, .ns = "live", .stop = &stop};
        pthread_create(&th[i], NULL, kv_writer_run, &w[i]);
    }
    WAIT_UNTIL(int_on(url, "SELECT count(*) FROM queen.kv WHERE namespace = 'expired'") == 0, 120000,
               "the sweepers never removed every expired row");
    WAIT_UNTIL(deleted_total(b) - before >= SEEDED, 30000, "the deletion counters never reached the rows seeded");
    /* two more passes of every sweeper: a late double delete would show */
    long long cycles[NB];
    for (int i = 0; i < NB; i++)
        cycles[i] = http_metric(&b[i], "engine", "sweeper", "cycles");
    for (int i = 0; i < NB; i++)
        WAIT_UNTIL(http_metric(&b[i], "engine", "sweeper", "cycles") >= cycles[i] + 2, 30000,
                   "broker %d's sweeper stopped cycling", i);
    atomic_store(&stop, true);
    long long acked = 0;
    for (int i = 0; i < NB; i++) {
        pthread_join(th[i], NULL);
        acked += atomic_load(&w[i].acked);
    }
    long long deleted = deleted_total(b) - before;
    for (int i = 0; i < NB; i++) {
        long long d = http_metric(&b[i], "engine", "sweeper", "deletedTotal");
        print_message("# figure many_brokers.sweep.broker%d_deleted %lld\n", i, d);
        assert_int_equal(http_metric(&b[i], "engine", "sweeper", "errors"), 0);
    }
    long long measure_waits, extension_waits;
    long long waits = lock_waits_since(log_from, &measure_waits, &extension_waits);
    print_message("# figure many_brokers.sweep.seeded %d\n", SEEDED);
    print_message("# figure many_brokers.sweep.deleted %lld\n", deleted);
    print_message("# figure many_brokers.sweep.writes_acknowledged %lld\n", acked);
    print_message("# figure many_brokers.sweep.lock_waits %lld\n", waits);
    print_message("# figure many_brokers.sweep.usage_measure_lock_waits %lld\n", measure_waits);
    print_message("# figure many_brokers.sweep.table_extension_lock_waits %lld\n", extension_waits);
    if (deleted != SEEDED)
        fail_msg("the sweepers counted %lld deletions of %d rows seeded", deleted, SEEDED);
    if (waits != 0)
        fail_msg("PostgreSQL logged %lld lock waits of writers or sweeper steps (printed above)", waits);
    assert_true(acked > 0);
    /* the writers' rows are all there (the sweepers took nothing live) */
    assert_int_equal(int_on(url, "SELECT count(*) FROM queen.kv WHERE namespace = 'live' AND expires_at < now()"), 0);
    stop_brokers(b);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* ---- rolling restart ------------------------------------------------------------- */

#define MAX_KEYS 100000

typedef struct rr_writer {
    campaign_writer cw;
    const char *bases[NB];
    atomic_bool *stop;
    long long switches;       /* moves to the next broker */
    long long no_answer;      /* sent, and no answer came back */
} rr_writer;

/* A client behind a load balancer: a refused connection sends the same
 * write to the next broker, any other failure the next write. */
static void *rr_writer_run(void *arg)
{
    rr_writer *w = arg;
    void *curl = NULL;
    int at = w->cw.id % NB;
    while (!atomic_load(w->stop) && campaign_writer_has_room(&w->cw)) {
        bool acked;
        campaign_outcome out = campaign_write_next(&w->cw, &curl, w->bases[at], &acked);
        if (out == CALL_NO_ANSWER)
            w->no_answer++;
        if (!acked) {
            at = (at + 1) % NB;
            w->switches++;
        }
    }
    campaign_http_done(&curl);
    return NULL;
}

static long long rr_acked(rr_writer *w, int n)
{
    long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += atomic_load(&w[i].cw.acked);
    return sum;
}

static void rolling_restart_under_write_load_loses_no_acknowledged_write(void **state)
{
    (void)state;
    enum { WRITERS = 4 };
    char *db;
    char *url = campaign_durable_database("mb_roll_", &db);
    static const char *const env[] = {"QUEEN_LOG_LEVEL=error", NULL};
    test_broker b[NB];
    start_brokers(b, url, env);
    char *ns = pgtest_unique("roll");
    atomic_bool stop = false;
    rr_writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (rr_writer){.cw = {.id = i, .ns = ns, .max_keys = MAX_KEYS, .key_state = calloc(MAX_KEYS, 1)},
                           .stop = &stop};
        for (int k = 0; k < NB; k++)
            w[i].bases[k] = b[k].base;
        pthread_create(&th[i], NULL, rr_writer_run, &w[i]);
    }
    int exits_clean = 0;
    for (int round = 0; round < NB; round++) {
        long long before = rr_acked(w, WRITERS);
        WAIT_UNTIL(rr_acked(w, WRITERS) >= before + 100, 60000, "writers made no progress before restart %d", round);
        int port = b[round].port;
        if (broker_stop(&b[round]) == 0)
            exits_clean++;
        /* the same port, so the "load balancer" keeps its address */
        char port_env[32];
        snprintf(port_env, sizeof port_env, "QUEEN_PORT=%d", port);
        const char *again[] = {"QUEEN_LOG_LEVEL=error", port_env, NULL};
        unlink(b[round].log);
        broker_spawn(&b[round], url, again);
        b[round].port = port;
        snprintf(b[round].base, sizeof b[round].base, "http://127.0.0.1:%d", port);
        if (!broker_wait_healthy(&b[round], 60000))
            fail_msg("broker %d did not come back (log: %s)", round, b[round].log);
    }
    long long before = rr_acked(w, WRITERS);
    WAIT_UNTIL(rr_acked(w, WRITERS) >= before + 100, 60000, "writers made no progress after the rolling restart");
    atomic_store(&stop, true);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);

    PGconn *conn = PQconnectdb(url);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    long long acked = 0, unknown = 0, lost = 0, doubled = 0, switches = 0, no_answer = 0;
    for (int i = 0; i < WRITERS; i++) {
        switches += w[i].switches;
        no_answer += w[i].no_answer;
        campaign_check_writer(conn, &w[i].cw, &acked, &unknown, &lost, &doubled);
        free(w[i].cw.key_state);
    }
    PQfinish(conn);
    print_message("# figure many_brokers.rolling.writes_acknowledged %lld\n", acked);
    print_message("# figure many_brokers.rolling.writes_unknown %lld\n", unknown);
    print_message("# figure many_brokers.rolling.writes_lost %lld\n", lost);
    print_message("# figure many_brokers.rolling.effects_doubled %lld\n", doubled);
    print_message("# figure many_brokers.rolling.writes_without_answer %lld\n", no_answer);
    print_message("# figure many_brokers.rolling.broker_switches %lld\n", switches);
    print_message("# figure many_brokers.rolling.clean_exits %d\n", exits_clean);
    assert_int_equal(lost, 0);
    assert_int_equal(doubled, 0);
    assert_int_equal(exits_clean, NB); /* SIGTERM drained and exited 0 each time */
    /* A graceful stop answers what reached it: a client that reconnects
     * during the drain is refused at once, not parked in a backlog that is
     * reset when the drain ends (that cost about three writes per restart:
     * 9 in both runs before the fix, 0 in both after, 2 once under ASan).
     * Up to one per restart is tolerated: a connection can still cross the
     * instant the listening socket closes (an idle keep-alive connection is
     * served for QUEEN_DRAIN_QUIET_MS after the last request, so one that
     * carries a request at the drain's end is answered: test_http_lifecycle). */
    if (no_answer > NB)
        fail_msg("%lld writes got no answer across %d graceful restarts", no_answer, NB);
    free(ns);
    stop_brokers(b);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

/* ---- quota overshoot ----------------------------------------------------------------- */

typedef struct quota_writer {
    int id;
    const char *base;
    const char *ns;
    int cap;          /* attempts at most: past it the quota never refused */
    int admitted;
    bool refused;     /* a 403 kv_quota_exceeded came back */
    int other;        /* any other answer */
} quota_writer;

/* New keys until this broker refuses one. */
static void *quota_writer_run(void *arg)
{
    quota_writer *w = arg;
    void *curl = NULL;
    char body[256];
    for (int n = 0; n < w->cap && !w->refused; n++) {
        snprintf(body, sizeof body,
                 "{\"operations\":[{\"op\":\"put\",\"ns\":\"%s\",\"key\":\"b%d-%d\",\"value\":1,\"forever\":true}]}",
                 w->ns, w->id, n);
        long status;
        char *reply;
        campaign_outcome out = campaign_post(&curl, w->base, "/api/v1/kv", body, &status, &reply);
        if (out == CALL_ANSWERED && status == 200 && campaign_applied(reply))
            w->admitted++;
        else if (out == CALL_ANSWERED && status == 403 && strstr(reply, "kv_quota_exceeded") != NULL)
            w->refused = true;
        else
            w->other++;
        free(reply);
    }
    campaign_http_done(&curl);
    return NULL;
}

static void quota_overshoot_stays_within_n_minus_one_headrooms(void **state)
{
    (void)state;
    enum { MAX_ROWS = 40, USED = 10, HEADROOM = MAX_ROWS - USED };
    char *db;
    char *url = pgtest_create_database("mb_quota_", &db);
    /* No sweeper (it would measure usage on its own cadence) and no refresh
     * during the test: every broker works from the one measurement below,
     * the situation the bound describes. */
    static const char *const env[] = {"QUEEN_LOG_LEVEL=error", "QUEEN_SWEEPER=0",
                                      "QUEEN_KV_QUOTA_REFRESH_MS=3600000", NULL};
    test_broker b[NB];
    start_brokers(b, url, env);
    char *setup = fmt("INSERT INTO queen.kv_quota (tenant_id, max_rows) VALUES ('%s', %d)", DEFAULT_TENANT, MAX_ROWS);
    exec_on(url, setup);
    free(setup);
    setup = fmt("INSERT INTO queen.kv (namespace, key, value, version) SELECT 'seed', 's' || g, '1', "
                "nextval('queen.kv_version_seq') FROM generate_series(1, %d) g",
                USED);
    exec_on(url, setup);
    free(setup);
    exec_on(url, "SELECT queen.kv_usage_measure_v1(now(), NULL, 64)");

    quota_writer w[NB];
    pthread_t th[NB];
    for (int i = 0; i < NB; i++) {
        w[i] = (quota_writer){.id = i, .base = b[i].base, .ns = "quota", .cap = MAX_ROWS * NB + 10};
        pthread_create(&th[i], NULL, quota_writer_run, &w[i]);
    }
    int admitted = 0;
    for (int i = 0; i < NB; i++) {
        pthread_join(th[i], NULL);
        admitted += w[i].admitted;
        print_message("# figure many_brokers.quota.broker%d_admitted %d\n", i, w[i].admitted);
    }
    long long rows = int_on(url, "SELECT count(*) FROM queen.kv");
    long long overshoot = rows - MAX_ROWS, bound = (long long)(NB - 1) * HEADROOM;
    print_message("# figure many_brokers.quota.max_rows %d\n", MAX_ROWS);
    print_message("# figure many_brokers.quota.headroom %d\n", HEADROOM);
    print_message("# figure many_brokers.quota.rows %lld\n", rows);
    print_message("# figure many_brokers.quota.overshoot %lld\n", overshoot);
    print_message("# figure many_brokers.quota.bound %lld\n", bound);
    for (int i = 0; i < NB; i++) {
        assert_int_equal(w[i].other, 0);
        if (!w[i].refused)
            fail_msg("broker %d never refused: it admitted %d new keys against a headroom of %d", i, w[i].admitted,
                     HEADROOM);
    }
    assert_int_equal(rows, USED + admitted);
    if (overshoot > bound)
        fail_msg("%d brokers overshot max_rows %d by %lld rows, past the documented bound (N - 1) x headroom = %lld",
                 NB, MAX_ROWS, overshoot, bound);
    stop_brokers(b);
    pgtest_drop_database(db);
    free(db);
    free(url);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(three_brokers_boot_the_schema_at_once, kill_leftovers),
        cmocka_unit_test_teardown(long_poll_on_a_is_woken_by_a_push_through_b, kill_leftovers),
        cmocka_unit_test_teardown(sweepers_on_three_brokers_delete_each_row_once_and_never_block_writers, kill_leftovers),
        cmocka_unit_test_teardown(rolling_restart_under_write_load_loses_no_acknowledged_write, kill_leftovers),
        cmocka_unit_test_teardown(quota_overshoot_stays_within_n_minus_one_headrooms, kill_leftovers),
    };
    int rc = cmocka_run_group_tests_name("many_brokers", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
