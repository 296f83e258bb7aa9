/* log: the message half of libqueen: push, pop (with its long-poll wait),
 * ack, lease extend (and the queues its ids name), configure, queue listing
 * and delete.
 *
 * Each call is one prepared statement calling one function of sql/003..005
 * (pushes made together may share one: push_group below), the request JSON
 * passed in and the body PostgreSQL rendered passed back.
 * Must never hold a pooled connection while waiting for a push (a waiting
 * pop costs a stack frame, not a connection), and never build SQL against a
 * table or JSON from strings. */
#include "log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "notify.h"

/* The producer is a transaction-local setting that the log's producer
 * column defaults to (sql/028): set in a materialized CTE, which runs before
 * the push it feeds, within the same statement's transaction; so is the
 * deferral of the push's NOTIFY (engine.h). No producer is '' (028 reads ''
 * as none), so every push is one statement of three parameters and pushes
 * with and without a producer share a group (below). */
#define SQL_PUSH                                                                                                       \
    "WITH settings AS MATERIALIZED (SELECT set_config('queen.producer', COALESCE($3, ''), true), "                    \
    ENGINE_SQL_DEFER_NOTIFY ") "                                                                                       \
    "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text FROM settings"

/* Pushes made together commit as one group (sql/003, log_push_group_v1):
 * one statement, one transaction and one WAL flush for all of them, each
 * still answered as its own log_push_v1 call (its results, its refusal,
 * its producer; members apply in arrival order). A member the group
 * refuses comes back as a row with its error, not as a failed statement,
 * so it fails no other; a group that fails anyway (a partition vanished, a
 * lock waited past the group's lock_timeout) runs every member alone
 * (pipeline.c). On two cores a one-message push's commit and the apply's
 * statement start-ups are most of its cost; a group pays them once. */
static const sql_coalesce push_group = {
    .name = "queen_push_group",
    .sql = "SELECT g.result, g.err_state, g.err_message, g.err_detail "
           "FROM queen.log_push_group_v1($1::jsonb, $2::jsonb, $3::jsonb, true) AS g ORDER BY g.n",
    .param_kinds = "sjs",
    .max_calls = 32,
    .waits_for_group = true,
    .one_per_engine = true,
};

/* Pushes larger than this go alone: their own commit is already shared by
 * their many messages, and a group carrying one would hold the small pushes
 * beside it for as long as it takes to apply. */
#define PUSH_GROUP_MAX_BYTES (64 * 1024)

#define SQL_POP                                                                                                        \
    "SELECT queen.log_pop_v1($1::uuid, $2, $3, $4, $5::integer, $6::integer, $7::boolean, $8, $9, $10::integer)::text"
#define SQL_POP_LABELS                                                                                                 \
    "SELECT queen.log_pop_labels_v1($1::uuid, $2, $3, $4, $5::integer, $6::integer, $7::boolean, $8, $9, "            \
    "$10::integer)::text"
#define SQL_ACK "SELECT queen.log_ack_v1($1::uuid, $2::jsonb, $3)::text"
#define SQL_LEASE "SELECT queen.log_lease_extend_v1($1::uuid, $2, $3::integer)::text"
#define SQL_QUEUES_OF "SELECT queen.log_queues_of_v1($1::uuid, $2::jsonb)::text"
#define SQL_CONFIGURE "SELECT queen.log_configure_v1($1::uuid, $2, $3::jsonb, $4, $5, $6)::text"
#define SQL_QUEUES "SELECT queen.log_queues_v1($1::uuid)::text"
#define SQL_DELETE "SELECT queen.log_queue_delete_v1($1::uuid, $2)::text"

#define call_body engine_call_body

static const char *int_or_null(char *buf, size_t len, int v)
{
    return engine_int_or_null(buf, len, v);
}

/* A push's answer: its own statement's one column, or its row of a group's
 * (result, err_state, err_message, err_detail), whose refusal is read as
 * the error that push's own call would have raised. */
static int push_answer(PGresult *res, char **out, queen_error *err)
{
    if (res == NULL)
        return -1; /* err filled */
    int rc = -1;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        queen_error_from_result(err, res);
    else if (PQntuples(res) != 1 || PQnfields(res) < 1)
        queen_error_set(err, QUEEN_ERR_INTERNAL, "bad_result", "queen_push returned %d rows", PQntuples(res));
    else if (PQnfields(res) >= 4 && !PQgetisnull(res, 0, 1))
        queen_error_from_fields(err, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
                                PQgetisnull(res, 0, 3) ? NULL : PQgetvalue(res, 0, 3));
    else if (PQgetisnull(res, 0, 0))
        queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "queen_push returned NULL");
    else if ((*out = strdup(PQgetvalue(res, 0, 0))) == NULL)
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "out of memory");
    else
        rc = 0;
    PQclear(res);
    return rc;
}

int queen_push(queen *q, const char *tenant, const char *items_json, char **results_json, queen_error *err)
{
    return queen_push_as(q, tenant, NULL, items_json, results_json, err);
}

int queen_push_as(queen *q, const char *tenant, const char *producer, const char *items_json, char **results_json,
                  queen_error *err)
{
    *results_json = NULL;
    if (items_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_request", "items_json is NULL");
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    const char *t = engine_enter_tenant(q, tenant, canon, err);
    if (t == NULL)
        return -1;
    char *sealed = NULL; /* the items with encrypted queues' payloads sealed (encryption.c) */
    int rc = engine_refuse_push_in_maintenance(q, err);
    if (rc == 0)
        rc = engine_seal_items(q, t, items_json, &sealed, err);
    if (rc != 0) {
        engine_leave(q);
        return -1;
    }
    const char *items = sealed ? sealed : items_json;
    const char *params[] = {t, items, producer != NULL && producer[0] != '\0' ? producer : NULL};
    PGresult *res = sql_exec_coalesced(q->pool, "queen_push", SQL_PUSH, 3, params,
                                       strlen(items) <= PUSH_GROUP_MAX_BYTES ? &push_group : NULL, NULL, err);
    rc = push_answer(res, results_json, err);
    free(sealed);
    if (rc == 0)
        engine_notify_pushed(q, t, *results_json);
    engine_leave(q);
    return rc;
}

/* One pop attempt; *body NULL when nothing was available. */
static int pop_once(queen *q, const char *tenant, const queen_pop_options *o, char **body, queen_error *err)
{
    char batch[16], lease[16], parts[16];
    bool by_labels = o->queue == NULL;
    const char *params[] = {tenant,
                            by_labels ? o->namespace_label : o->queue,
                            by_labels ? o->task_label : o->partition,
                            o->consumer_group,
                            int_or_null(batch, sizeof batch, o->batch),
                            int_or_null(lease, sizeof lease, o->lease_seconds),
                            o->auto_ack ? "true" : "false",
                            o->subscription_mode,
                            o->subscription_from,
                            int_or_null(parts, sizeof parts, o->partitions)};
    atomic_fetch_add(&q->counters.pops, 1);
    if (engine_pops_paused(q)) { /* nothing is delivered under (pop) maintenance (sql/034) */
        atomic_fetch_add(&q->counters.pops_empty, 1);
        *body = NULL;
        return 0;
    }
    int rc = by_labels ? queen_call_text(q, "queen_pop_labels", SQL_POP_LABELS, 10, params, body, err)
                       : queen_call_text(q, "queen_pop", SQL_POP, 10, params, body, err);
    if (rc == 0 && *body == NULL)
        atomic_fetch_add(&q->counters.pops_empty, 1);
    if (rc == 0 && engine_open_body(q, tenant, body, err) != 0) {
        free(*body); /* leased messages come back when the lease runs out */
        *body = NULL;
        rc = -1;
    }
    return rc;
}

/* The pop thread's side of a wait: the notifier's callback sets fired. */
typedef struct pop_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool fired, woken;
} pop_sync;

static void pop_wake(void *ctx, bool woken)
{
    pop_sync *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->fired = true;
    s->woken = woken;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* With wait: the waiter is opened BEFORE the first attempt, so a push that
 * commits between an empty pop and the sleep still wakes it (no lost
 * wake-up), and stays open, in its place, until the answer (notify.h): a
 * push wakes as many waiters as it queued messages, the notifier's check
 * wakes waiters of keys with something to pop (leases that expired or were
 * released make messages available without a push). Woken: try again. Not
 * woken: the timeout passed (or the engine closes): nothing, *body NULL. */
int queen_pop(queen *q, const char *tenant, const queen_pop_options *opts, char **body_json, queen_error *err)
{
    *body_json = NULL;
    if (opts == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_queue", "opts is NULL");
        return -1;
    }
    if (opts->queue == NULL && opts->namespace_label == NULL && opts->task_label == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_labels", "a queue, or a namespace and/or task, is required");
        return -1;
    }
    if (opts->queue == NULL && opts->partition != NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_partition", "a pop by labels names no partition");
        return -1;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    tenant = engine_enter_tenant(q, tenant, canon, err);
    if (tenant == NULL)
        return -1;
    int rc;
    if (!opts->wait) {
        rc = pop_once(q, tenant, opts, body_json, err);
        engine_leave(q);
        return rc;
    }
    atomic_fetch_add(&q->counters.pop_waits, 1);
    int timeout = opts->timeout_ms > 0 ? opts->timeout_ms : QUEEN_POP_DEFAULT_TIMEOUT_MS;
    pop_sync s = {.fired = false};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    queen_waiter *w = atomic_load(&q->closing) ? NULL
                      : notifier_wait_open(q->notifier, tenant, opts->queue, opts->namespace_label, opts->task_label,
                                           opts->consumer_group, opts->partition, timeout, pop_wake, &s);
    for (;;) {
        pthread_mutex_lock(&s.mu);
        s.fired = false; /* a wake before this attempt is this attempt's */
        pthread_mutex_unlock(&s.mu);
        rc = pop_once(q, tenant, opts, body_json, err);
        if (rc != 0 || *body_json != NULL || w == NULL)
            break;
        pthread_mutex_lock(&s.mu);
        bool fired = s.fired, woken = s.woken;
        pthread_mutex_unlock(&s.mu);
        if (fired && woken)
            continue; /* woken during the attempt: its push may have come after the read */
        if (fired)
            break;
        notify_verdict v = notifier_wait_again(q->notifier, w);
        if (v == NOTIFY_RETRY)
            continue;
        if (v == NOTIFY_DONE)
            break;
        pthread_mutex_lock(&s.mu);
        while (!s.fired)
            pthread_cond_wait(&s.cv, &s.mu);
        woken = s.woken;
        pthread_mutex_unlock(&s.mu);
        if (!woken)
            break;
    }
    if (w != NULL)
        notifier_wait_close(q->notifier, w, rc == 0 && *body_json != NULL);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    engine_leave(q);
    return rc;
}

int queen_ack(queen *q, const char *tenant, const char *acks_json, const char *group, char **results_json,
              queen_error *err)
{
    *results_json = NULL;
    if (acks_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_request", "acks_json is NULL");
        return -1;
    }
    const char *params[] = {NULL, acks_json, group};
    return call_body(q, tenant, "queen_ack", SQL_ACK, 3, params, results_json, err);
}

int queen_lease_extend(queen *q, const char *tenant, const char *lease_id, int seconds, char **result_json,
                       queen_error *err)
{
    char sec[16];
    const char *params[] = {NULL, lease_id, int_or_null(sec, sizeof sec, seconds)};
    return call_body(q, tenant, "queen_lease_extend", SQL_LEASE, 3, params, result_json, err);
}

int queen_queues_of(queen *q, const char *tenant, const char *refs_json, char **names_json, queen_error *err)
{
    const char *params[] = {NULL, refs_json};
    return call_body(q, tenant, "queen_queues_of", SQL_QUEUES_OF, 2, params, names_json, err);
}

int queen_configure(queen *q, const char *tenant, const char *queue, const char *options_json, char **result_json,
                    queen_error *err)
{
    return queen_configure_ex(q, tenant, queue, options_json, NULL, NULL, NULL, result_json, err);
}

/* SQL judges every argument (NULL options is {}, NULL labels and mode keep). */
int queen_configure_ex(queen *q, const char *tenant, const char *queue, const char *options_json,
                       const char *label_namespace, const char *label_task, const char *mode, char **result_json,
                       queen_error *err)
{
    /* encryptionEnabled without a key would store what it promises to seal:
     * refused here, where the key is known (SQL never sees it). */
    json_t *opts = options_json ? json_loads(options_json, JSON_DECODE_ANY, NULL) : NULL;
    bool wants_key = json_is_true(json_object_get(opts, "encryptionEnabled"));
    json_decref(opts);
    if (wants_key && q != NULL && q->keyring.n == 0) {
        *result_json = NULL;
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_encryption_key_missing",
                        "encryptionEnabled needs a payload key: set QUEEN_ENCRYPTION_KEY (64 hex digits) on every "
                        "broker of this database, then configure again");
        return -1;
    }
    const char *params[] = {NULL, queue, options_json, label_namespace, label_task, mode};
    return call_body(q, tenant, "queen_configure", SQL_CONFIGURE, 6, params, result_json, err);
}

int queen_queues(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    const char *params[] = {NULL};
    return call_body(q, tenant, "queen_queues", SQL_QUEUES, 1, params, result_json, err);
}

int queen_queue_delete(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    const char *params[] = {NULL, queue};
    return call_body(q, tenant, "queen_queue_delete", SQL_DELETE, 2, params, result_json, err);
}

/* The public door (queen.h): a registration is an in-flight call only for
 * the time it takes, so queen_close never waits on a registered waiter; it
 * fires it instead. */
queen_waiter *queen_wait_for_push(queen *q, const char *tenant, const char *queue, int timeout_ms, queen_wake_fn fn,
                                  void *ctx)
{
    char canon[QUEEN_TENANT_LEN + 1];
    if (engine_enter_tenant(q, tenant, canon, NULL) == NULL)
        return NULL;
    queen_waiter *w = notifier_add(q->notifier, canon, queue, timeout_ms, true, fn, ctx);
    engine_leave(q);
    return w;
}

queen_waiter *queen_pop_wait_open(queen *q, const char *tenant, const queen_pop_options *opts, int timeout_ms,
                                  queen_wake_fn fn, void *ctx)
{
    char canon[QUEEN_TENANT_LEN + 1];
    if (opts == NULL || engine_enter_tenant(q, tenant, canon, NULL) == NULL)
        return NULL;
    queen_waiter *w = notifier_wait_open(q->notifier, canon, opts->queue, opts->namespace_label, opts->task_label,
                                         opts->consumer_group, opts->partition, timeout_ms, fn, ctx);
    engine_leave(q);
    return w;
}

queen_wait_verdict queen_pop_wait_again(queen *q, queen_waiter *w)
{
    switch (notifier_wait_again(q->notifier, w)) {
    case NOTIFY_SLEEP:
        return QUEEN_WAIT_SLEEP;
    case NOTIFY_RETRY:
        return QUEEN_WAIT_RETRY;
    default:
        return QUEEN_WAIT_DONE;
    }
}

void queen_pop_wait_close(queen *q, queen_waiter *w, bool popped)
{
    notifier_wait_close(q->notifier, w, popped);
}
