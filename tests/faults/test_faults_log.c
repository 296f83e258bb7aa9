/* Acknowledged messages survive faults: writer threads push messages with
 * unique transactionIds (a call without an answer is retried with the SAME
 * transactionId, which the queue's dedup window makes safe) while consumer
 * threads pop and ack them, half through plain acks (queue "ack") and half
 * through the exactly-once bundle of POST /api/v1/transaction (queue "tx":
 * the ack + a push of {"src":<transactionId>} to queue "out" + a required
 * putIfAbsent marker done:<transactionId>). Meanwhile the broker is killed
 * with SIGKILL and PostgreSQL stopped in immediate mode, each started again.
 * Leases are short (leaseTime 2 s) so what a killed call left leased comes
 * back. At the end, what is left is drained and the database is read:
 *   - every acknowledged push (201, queued or duplicate) is in its queue
 *     exactly once, and no transactionId is there twice;
 *   - no message whose ack was confirmed is delivered by a pop sent after
 *     the confirmation, and every message is consumed (the cursor passed it);
 *   - each "tx" message's effect (its "out" message and its marker) exists
 *     exactly once.
 * The database commits synchronously (campaign_durable_database).
 *
 * Sizing: FAULT_SECONDS (default 3; the faults cycle until it passes),
 * FAULT_WRITERS (2), FAULT_CONSUMERS (4: half per path). */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "campaign.h"
#include "pgtest.h"
#include "testutil.h"

#define MAX_WRITERS 8
#define MAX_CONSUMERS 16
#define MAX_MSGS 100000 /* per writer */
#define BACKLOG 400     /* writers wait while this many pushes are not yet consumed */


/* Per message w<i>-<n>: what the threads saw, read by all of them. */
typedef struct msg_state {
    atomic_llong acked_at;  /* ns the consumer heard its ack confirmed; 0 = not yet */
    atomic_int deliveries;
    atomic_int redelivered; /* delivered by a pop sent after acked_at */
    unsigned char pushed;   /* writer: 1 acknowledged */
} msg_state;

typedef struct shared {
    char *q_ack, *q_tx, *q_out, *ns;
    int writers;
    msg_state *m[MAX_WRITERS];
    atomic_int sent[MAX_WRITERS]; /* messages w<i>-<n> with n < sent[i] were acknowledged */
    atomic_bool stop_writers, stop_consumers;
    atomic_llong pushes_acked, consumed, push_retries, push_duplicate_answers;
    atomic_llong tx_committed, tx_marker_found, acks_confirmed, calls_unanswered;
} shared;

static shared S;

typedef struct worker {
    int id;
} worker;

static msg_state *lookup(const char *txid)
{
    int i, n;
    if (txid == NULL || sscanf(txid, "w%d-%d", &i, &n) != 2 || i < 0 || i >= S.writers || n < 0 || n >= MAX_MSGS)
        return NULL;
    return &S.m[i][n];
}

static json_t *parse(const char *reply)
{
    return reply ? json_loads(reply, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL) : NULL;
}

static void *writer_run(void *arg)
{
    worker *w = arg;
    void *curl = NULL;
    char body[512];
    for (int n = 0; n < MAX_MSGS && !atomic_load(&S.stop_writers); n++) {
        while (atomic_load(&S.pushes_acked) - atomic_load(&S.consumed) > BACKLOG && !atomic_load(&S.stop_writers))
            pause_ms(5);
        snprintf(body, sizeof body,
                 "{\"items\":[{\"queue\":\"%s\",\"partition\":\"p%d\",\"payload\":{\"n\":%d},"
                 "\"transactionId\":\"w%d-%d\"}]}",
                 n % 2 ? S.q_tx : S.q_ack, n % 4, n, w->id, n);
        /* the same transactionId until an answer says it is in: a stop only
         * takes effect between messages, after the last fault */
        for (int attempt = 0;; attempt++) {
            long status;
            char *reply;
            campaign_outcome out = campaign_post(&curl, RIG.broker.base, "/api/v1/push", body, &status, &reply);
            json_t *v = out == CALL_ANSWERED && status == 201 ? parse(reply) : NULL;
            const char *st = json_string_value(json_object_get(json_array_get(v, 0), "status"));
            bool in = st && (strcmp(st, "queued") == 0 || strcmp(st, "duplicate") == 0);
            if (in && attempt > 0 && strcmp(st, "duplicate") == 0)
                atomic_fetch_add(&S.push_duplicate_answers, 1);
            json_decref(v);
            free(reply);
            if (in)
                break;
            if (out != CALL_NOT_SENT)
                atomic_fetch_add(&S.calls_unanswered, out == CALL_NO_ANSWER);
            atomic_fetch_add(&S.push_retries, 1);
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
        }
        S.m[w->id][n].pushed = 1;
        atomic_store(&S.sent[w->id], n + 1);
        atomic_fetch_add(&S.pushes_acked, 1);
    }
    campaign_http_done(&curl);
    return NULL;
}

static void confirmed(msg_state *m)
{
    long long zero = 0;
    if (m && atomic_compare_exchange_strong(&m->acked_at, &zero, campaign_now_ns()))
        atomic_fetch_add(&S.consumed, 1);
    atomic_fetch_add(&S.acks_confirmed, 1);
}

/* Plain path: one ack/batch for the whole pop; acks are cumulative per
 * partition, so only the answer's own successes count as confirmed. */
static bool ack_batch(void **curl, json_t *msgs)
{
    json_t *acks = json_array();
    size_t i;
    json_t *m;
    json_array_foreach (msgs, i, m)
        json_array_append_new(acks, json_pack("{s:O, s:O, s:O, s:s}", "transactionId",
                                              json_object_get(m, "transactionId"), "partitionId",
                                              json_object_get(m, "partitionId"), "leaseId",
                                              json_object_get(m, "leaseId"), "status", "completed"));
    json_t *b = json_pack("{s:o}", "acknowledgments", acks);
    char *body = json_array_size(acks) == json_array_size(msgs) ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (body == NULL)
        return false; /* a message without its ids: left to its lease */
    long status;
    char *reply;
    campaign_outcome out = campaign_post(curl, RIG.broker.base, "/api/v1/ack/batch", body, &status, &reply);
    free(body);
    json_t *v = out == CALL_ANSWERED && status == 200 ? parse(reply) : NULL;
    free(reply);
    json_t *r;
    json_array_foreach (v, i, r)
        if (json_is_true(json_object_get(r, "success")))
            confirmed(lookup(json_string_value(json_object_get(r, "transactionId"))));
    json_decref(v);
    atomic_fetch_add(&S.calls_unanswered, out == CALL_NO_ANSWER);
    return out == CALL_ANSWERED && status == 200;
}

/* Exactly-once path: one bundle per message, in offset order. A bundle that
 * did not commit stops the batch: the next one's cumulative ack would pass
 * over this message. */
static bool tx_one(void **curl, json_t *m)
{
    const char *txid = json_string_value(json_object_get(m, "transactionId"));
    char key[300];
    snprintf(key, sizeof key, "done:%s", txid ? txid : "");
    json_t *b = json_pack("{s:[{s:s, s:O, s:O, s:O}, {s:s, s:[{s:s, s:s, s:{s:O}}]}], s:[O], "
                          "s:[{s:s, s:s, s:s, s:b, s:b, s:b}]}",
                          "operations", "type", "ack", "transactionId", json_object_get(m, "transactionId"),
                          "partitionId", json_object_get(m, "partitionId"), "leaseId", json_object_get(m, "leaseId"),
                          "type", "push", "items", "queue", S.q_out, "partition", "Default", "payload", "src",
                          json_object_get(m, "transactionId"), "requiredLeases", json_object_get(m, "leaseId"), "kv",
                          "op", "putIfAbsent", "ns", S.ns, "key", key, "value", 1, "forever", 1, "required", 1);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (body == NULL)
        return false; /* a message without its ids: left to its lease */
    long status;
    char *reply;
    campaign_outcome out = campaign_post(curl, RIG.broker.base, "/api/v1/transaction", body, &status, &reply);
    free(body);
    json_t *v = out == CALL_ANSWERED && status == 200 ? parse(reply) : NULL;
    free(reply);
    atomic_fetch_add(&S.calls_unanswered, out == CALL_NO_ANSWER);
    bool ok = json_is_true(json_object_get(v, "success"));
    const char *reason = json_string_value(json_object_get(v, "reason"));
    if (ok) {
        atomic_fetch_add(&S.tx_committed, 1);
        confirmed(lookup(txid));
    } else if (reason && strcmp(reason, "kv_precondition") == 0) {
        /* the marker says an earlier bundle committed: since its ack came
         * with it, this delivery should not have happened; advance anyway */
        atomic_fetch_add(&S.tx_marker_found, 1);
        json_t *one = json_pack("[O]", m);
        ok = ack_batch(curl, one);
        json_decref(one);
    }
    json_decref(v);
    return ok;
}

static void *consumer_run(void *arg)
{
    worker *w = arg;
    bool tx = w->id % 2 == 1;
    void *curl = NULL;
    char path[512];
    snprintf(path, sizeof path, "/api/v1/pop/queue/%s?batch=10&wait=true&timeout=500&partitions=2",
             tx ? S.q_tx : S.q_ack);
    while (!atomic_load(&S.stop_consumers)) {
        long long sent_at = campaign_now_ns();
        long status;
        char *reply;
        campaign_outcome out = campaign_post(&curl, RIG.broker.base, path, NULL, &status, &reply);
        if (out != CALL_ANSWERED || (status != 200 && status != 204)) {
            free(reply);
            atomic_fetch_add(&S.calls_unanswered, out == CALL_NO_ANSWER);
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
            continue; /* what that pop leased comes back when its lease ends */
        }
        json_t *v = status == 200 ? parse(reply) : NULL;
        free(reply);
        json_t *msgs = json_object_get(v, "messages");
        size_t i;
        json_t *m;
        json_array_foreach (msgs, i, m) {
            msg_state *s = lookup(json_string_value(json_object_get(m, "transactionId")));
            if (s == NULL)
                continue;
            atomic_fetch_add(&s->deliveries, 1);
            long long at = atomic_load(&s->acked_at);
            if (at != 0 && at < sent_at)
                atomic_fetch_add(&s->redelivered, 1);
        }
        bool ok = true;
        if (json_array_size(msgs) > 0 && !tx)
            ok = ack_batch(&curl, msgs);
        for (i = 0; tx && ok && i < json_array_size(msgs); i++)
            ok = tx_one(&curl, json_array_get(msgs, i));
        json_decref(v);
        if (!ok)
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
    }
    campaign_http_done(&curl);
    return NULL;
}

static void configure(const char *queue)
{
    char *body = fmt("{\"queue\":\"%s\",\"options\":{\"leaseTime\":2,\"retryLimit\":1000}}", queue);
    http_reply r = broker_http(&RIG.broker, "POST", "/api/v1/configure", body, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    free(body);
}

/* Messages of the two input queues the queue-mode cursor has not passed. */
static long long unconsumed(PGconn *conn)
{
    const char *p[] = {S.q_ack, S.q_tx};
    return pgtest_int(conn,
                      "SELECT count(*) FROM queen.log_messages m "
                      "JOIN queen.log_partitions p ON p.id = m.partition_id "
                      "JOIN queen.queues q ON q.id = p.queue_id AND q.name IN ($1, $2) "
                      "LEFT JOIN queen.log_consumers c ON c.partition_id = p.id "
                      " AND c.consumer_group = '__QUEUE_MODE__' "
                      "WHERE m.msg_offset > COALESCE(c.committed_offset, 0)",
                      2, p);
}

static long long progress(void)
{
    return atomic_load(&S.pushes_acked) + atomic_load(&S.acks_confirmed);
}

static void acknowledged_messages_survive_broker_kills_and_database_crashes(void **state)
{
    (void)state;
    S.writers = (int)campaign_env_long("FAULT_WRITERS", 2);
    int consumers = (int)campaign_env_long("FAULT_CONSUMERS", 4);
    long seconds = campaign_env_long("FAULT_SECONDS", 3);
    if (S.writers < 1 || S.writers > MAX_WRITERS || consumers < 2 || consumers > MAX_CONSUMERS)
        fail_msg("FAULT_WRITERS 1..%d, FAULT_CONSUMERS 2..%d", MAX_WRITERS, MAX_CONSUMERS);
    S.q_ack = pgtest_unique("ack");
    S.q_tx = pgtest_unique("tx");
    S.q_out = pgtest_unique("out");
    S.ns = pgtest_unique("marks");
    configure(S.q_ack);
    configure(S.q_tx);
    for (int i = 0; i < S.writers; i++)
        S.m[i] = calloc(MAX_MSGS, sizeof(msg_state));

    worker ww[MAX_WRITERS], cw[MAX_CONSUMERS];
    pthread_t wt[MAX_WRITERS], ct[MAX_CONSUMERS];
    for (int i = 0; i < S.writers; i++) {
        ww[i].id = i;
        pthread_create(&wt[i], NULL, writer_run, &ww[i]);
    }
    for (int i = 0; i < consumers; i++) {
        cw[i].id = i;
        pthread_create(&ct[i], NULL, consumer_run, &cw[i]);
    }
    long long kills = 0, crashes = 0, until = now_ms() + seconds * 1000;
    do {
        /* each fault lands on pushes and acks in flight */
        long long before = progress();
        WAIT_UNTIL(progress() >= before + 60, 60000, "no progress before a fault");
        if ((kills + crashes) % 2 == 0) {
            assert_true(campaign_broker_restart_hard(&RIG.broker, RIG.db_url, RIG.env));
            kills++;
        } else {
            assert_true(campaign_pg_crash());
            crashes++;
            assert_true(campaign_pg_up());
        }
    } while (now_ms() < until || crashes == 0);
    long long before = progress();
    WAIT_UNTIL(progress() >= before + 60, 60000, "no progress after the last fault");
    atomic_store(&S.stop_writers, true);
    for (int i = 0; i < S.writers; i++)
        pthread_join(wt[i], NULL);

    /* Drain: leases of killed calls end within 2 s and are popped again. */
    PGconn *conn = PQconnectdb(RIG.db_url);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    WAIT_UNTIL(unconsumed(conn) == 0, 60000, "messages left unconsumed: %lld", unconsumed(conn));
    atomic_store(&S.stop_consumers, true);
    for (int i = 0; i < consumers; i++)
        pthread_join(ct[i], NULL);

    /* Every copy of every transactionId in the input queues, every "out"
     * message by its source, every marker. */
    const char *qs[] = {S.q_ack, S.q_tx};
    PGresult *r = pgtest_exec(conn,
                              "SELECT m.transaction_id, q.name = $2, count(*) FROM queen.log_messages m "
                              "JOIN queen.log_partitions p ON p.id = m.partition_id "
                              "JOIN queen.queues q ON q.id = p.queue_id AND q.name IN ($1, $2) GROUP BY 1, 2",
                              2, qs);
    int *copies[MAX_WRITERS], *outs[MAX_WRITERS];
    unsigned char *marks[MAX_WRITERS], *in_tx[MAX_WRITERS];
    for (int i = 0; i < S.writers; i++) {
        copies[i] = calloc(MAX_MSGS, sizeof(int));
        outs[i] = calloc(MAX_MSGS, sizeof(int));
        marks[i] = calloc(MAX_MSGS, 1);
        in_tx[i] = calloc(MAX_MSGS, 1);
    }
    long long strangers = 0; /* rows no writer of this run pushed */
    for (int row = 0; row < PQntuples(r); row++) {
        int i, n, c = atoi(PQgetvalue(r, row, 2));
        if (sscanf(PQgetvalue(r, row, 0), "w%d-%d", &i, &n) != 2 || i < 0 || i >= S.writers || n < 0 ||
            n >= MAX_MSGS) {
            strangers += c;
            continue;
        }
        copies[i][n] += c;
        in_tx[i][n] = PQgetvalue(r, row, 1)[0] == 't';
    }
    PQclear(r);
    const char *qo[] = {S.q_out};
    r = pgtest_exec(conn,
                    "SELECT m.payload->>'src', count(*) FROM queen.log_messages m "
                    "JOIN queen.log_partitions p ON p.id = m.partition_id "
                    "JOIN queen.queues q ON q.id = p.queue_id AND q.name = $1 GROUP BY 1",
                    1, qo);
    for (int row = 0; row < PQntuples(r); row++) {
        int i, n, c = atoi(PQgetvalue(r, row, 1));
        if (sscanf(PQgetvalue(r, row, 0), "w%d-%d", &i, &n) != 2 || i < 0 || i >= S.writers || n < 0 ||
            n >= MAX_MSGS)
            strangers += c;
        else
            outs[i][n] += c;
    }
    PQclear(r);
    const char *qn[] = {S.ns};
    r = pgtest_exec(conn, "SELECT substr(key, 6) FROM queen.kv WHERE namespace = $1 AND key LIKE 'done:%'", 1, qn);
    for (int row = 0; row < PQntuples(r); row++) {
        int i, n;
        if (sscanf(PQgetvalue(r, row, 0), "w%d-%d", &i, &n) == 2 && i >= 0 && i < S.writers && n >= 0 &&
            n < MAX_MSGS)
            marks[i][n] = 1;
        else
            strangers++;
    }
    PQclear(r);

    long long lost = 0, duplicated = 0, redelivered = 0, never_delivered = 0, effects_lost = 0,
              effects_doubled = 0, pushed = 0;
    for (int i = 0; i < S.writers; i++) {
        for (int n = 0; n < MAX_MSGS; n++) {
            msg_state *m = &S.m[i][n];
            pushed += m->pushed;
            if (m->pushed && copies[i][n] == 0) {
                lost++;
                print_message("# acknowledged push w%d-%d is not in its queue\n", i, n);
            }
            if (copies[i][n] > 1) {
                duplicated += copies[i][n] - 1;
                print_message("# w%d-%d is in its queue %d times\n", i, n, copies[i][n]);
            }
            if (atomic_load(&m->redelivered)) {
                redelivered += atomic_load(&m->redelivered);
                print_message("# w%d-%d delivered %d times after its ack was confirmed\n", i, n,
                              atomic_load(&m->redelivered));
            }
            if (copies[i][n] > 0 && atomic_load(&m->deliveries) == 0) {
                never_delivered++;
                print_message("# w%d-%d was never delivered\n", i, n);
            }
            /* a "tx" message's effect: one "out" message and its marker; an
             * "ack" message has neither */
            int want = copies[i][n] > 0 && in_tx[i][n];
            if (outs[i][n] < want || marks[i][n] < want) {
                effects_lost++;
                print_message("# w%d-%d: %d out messages, marker %s\n", i, n, outs[i][n],
                              marks[i][n] ? "present" : "missing");
            }
            if (outs[i][n] > want || marks[i][n] > want) {
                effects_doubled += outs[i][n] > want ? outs[i][n] - want : 1;
                print_message("# w%d-%d: %d out messages, marker %s (expected %d)\n", i, n, outs[i][n],
                              marks[i][n] ? "present" : "missing", want);
            }
        }
        free(copies[i]);
        free(outs[i]);
        free(marks[i]);
        free(in_tx[i]);
    }
    /* nothing left to pop, once every lease has ended */
    long long left = unconsumed(conn);
    PQfinish(conn);

    campaign_figure("faults_log.pushes_acked", pushed);
    campaign_figure("faults_log.push_retries", atomic_load(&S.push_retries));
    campaign_figure("faults_log.retries_found_duplicate", atomic_load(&S.push_duplicate_answers));
    campaign_figure("faults_log.acks_confirmed", atomic_load(&S.acks_confirmed));
    campaign_figure("faults_log.tx_committed", atomic_load(&S.tx_committed));
    campaign_figure("faults_log.tx_marker_found", atomic_load(&S.tx_marker_found));
    campaign_figure("faults_log.calls_unanswered", atomic_load(&S.calls_unanswered));
    campaign_figure("faults_log.lost", lost);
    campaign_figure("faults_log.duplicated", duplicated);
    campaign_figure("faults_log.redelivered_after_ack", redelivered);
    campaign_figure("faults_log.never_delivered", never_delivered);
    campaign_figure("faults_log.unconsumed", left);
    campaign_figure("faults_log.effects_lost", effects_lost);
    campaign_figure("faults_log.effects_doubled", effects_doubled);
    campaign_figure("faults_log.strangers", strangers);
    campaign_figure("faults_log.broker_kills", kills);
    campaign_figure("faults_log.pg_crashes", crashes);
    for (int i = 0; i < S.writers; i++)
        free(S.m[i]);
    free(S.q_ack);
    free(S.q_tx);
    free(S.q_out);
    free(S.ns);
    assert_true(pushed > 0);
    assert_int_equal(lost, 0);
    assert_int_equal(duplicated, 0);
    assert_int_equal(redelivered, 0);
    assert_int_equal(never_delivered, 0);
    assert_int_equal(left, 0);
    assert_int_equal(effects_lost, 0);
    assert_int_equal(effects_doubled, 0);
    assert_int_equal(strangers, 0);
}

CAMPAIGN_MAIN("faultslog", acknowledged_messages_survive_broker_kills_and_database_crashes)
