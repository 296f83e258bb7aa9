/* log: the message half of libqueen: push, pop (and the waiting pop,
 * queen_poll: the one long-poll wait, stepped by the HTTP edge and blocked
 * on by queen_pop with wait), ack, lease extend (and the queues its ids name), configure, queue listing
 * and delete.
 *
 * Each call is one prepared statement calling one function of sql/log_push.sql, log_pop.sql,
 * log_ack.sql, log_lease.sql or log_queues.sql
 * (pushes made together may share one: push_group below), the request JSON
 * passed in and the body PostgreSQL rendered passed back.
 * Must never hold a pooled connection while waiting for a push (a waiting
 * pop costs a queen_poll, not a connection), and never build SQL against a
 * table or JSON from strings. */
#include "queen.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "engine.h"
#include "notify.h"

/* The producer is a transaction-local setting that the log's producer
 * column defaults to (sql/log_producer.sql): set in a materialized CTE, which runs before
 * the push it feeds, within the same statement's transaction; so is the
 * deferral of the push's NOTIFY (engine.h). No producer is '' (log_producer.sql reads ''
 * as none), so every push is one statement of three parameters and pushes
 * with and without a producer share a group (below). */
#define SQL_PUSH                                                                                                       \
    "WITH settings AS MATERIALIZED (SELECT set_config('queen.producer', COALESCE($3, ''), true), "                    \
    ENGINE_SQL_DEFER_NOTIFY ") "                                                                                       \
    "SELECT queen.log_push_v1($1::uuid, $2::jsonb)::text FROM settings"

/* Pushes made together commit as one group (sql/log_push.sql, log_push_group_v1):
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
/* ack, lease extend, queues_of, configure, queues and delete are rows of
 * the call table (calls.c). */

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
    if (engine_pops_paused(q)) { /* nothing is delivered under (pop) maintenance (sql/system_maintenance.sql) */
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

/* ---- the waiting pop ------------------------------------------------------
 * One mechanism for every waiting pop: the notifier's pop waiter (notify.h:
 * registration, wakes by pushes and by the check, deadline, cancel) and
 * the attempts around it, in queen_poll_step. The HTTP long poll steps it
 * from its event loop and sleeps by suspending its request; queen_pop with
 * wait steps it on its own thread and sleeps on the poll's condition. */
struct queen_poll {
    queen *q;
    queen_waiter *w;
    queen_poll_wake_fn fn;
    void *ctx;
    pthread_mutex_t mu; /* guards what follows; never held across a call out */
    pthread_cond_t cv;  /* fired became true */
    bool fired, woken;  /* the waiter fired since the current attempt began; with a wake or its end */
    bool asleep;        /* a step returned SLEEP and nothing fired since: fn is owed */
    bool popped;        /* the last attempt took messages (the close checks the key again) */
    queen_pop_options o;
    char tenant[QUEEN_TENANT_LEN + 1];
    char names[]; /* o's strings */
};

/* The waiter's callback, on the notifier thread (no engine lock held). */
static void poll_fired(void *ctx, bool woken)
{
    queen_poll *p = ctx;
    pthread_mutex_lock(&p->mu);
    p->fired = true;
    p->woken = woken;
    bool owed = p->asleep;
    p->asleep = false;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (owed && p->fn != NULL)
        p->fn(p->ctx);
}

static size_t name_len(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static const char *name_copy(char **at, const char *s)
{
    if (s == NULL)
        return NULL;
    char *mine = *at;
    size_t len = strlen(s) + 1;
    memcpy(mine, s, len);
    *at += len;
    return mine;
}

/* tenant is canonical and entered. The waiter opens here, BEFORE the first
 * attempt, so a push that commits during it still wakes it. */
static queen_poll *poll_open(queen *q, const char *tenant, const queen_pop_options *opts, queen_poll_wake_fn fn,
                             void *ctx)
{
    if (atomic_load(&q->closing))
        return NULL;
    const queen_pop_options *o = opts;
    size_t names = name_len(o->queue) + name_len(o->partition) + name_len(o->namespace_label) +
                   name_len(o->task_label) + name_len(o->consumer_group) + name_len(o->subscription_mode) +
                   name_len(o->subscription_from);
    queen_poll *p = calloc(1, sizeof *p + names);
    if (p == NULL)
        return NULL;
    p->q = q;
    p->fn = fn;
    p->ctx = ctx;
    p->o = *o;
    char *at = p->names;
    p->o.queue = name_copy(&at, o->queue);
    p->o.partition = name_copy(&at, o->partition);
    p->o.namespace_label = name_copy(&at, o->namespace_label);
    p->o.task_label = name_copy(&at, o->task_label);
    p->o.consumer_group = name_copy(&at, o->consumer_group);
    p->o.subscription_mode = name_copy(&at, o->subscription_mode);
    p->o.subscription_from = name_copy(&at, o->subscription_from);
    p->o.wait = false; /* each attempt is one pop */
    snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int timeout = o->timeout_ms > 0 ? o->timeout_ms : QUEEN_POP_DEFAULT_TIMEOUT_MS;
    p->w = notifier_wait_open(q->notifier, p->tenant, p->o.queue, p->o.namespace_label, p->o.task_label,
                              p->o.consumer_group, p->o.partition, timeout, poll_fired, p);
    if (p->w == NULL) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

/* The attempts of one step (the tenant entered). A wake that fired during
 * an attempt may be for a push that committed after its read: it pops
 * again rather than sleep. So does the notifier's RETRY (a push came while
 * it popped and found no one else to wake). */
static queen_poll_state poll_step(queen_poll *p, char **body, queen_error *err)
{
    *body = NULL;
    pthread_mutex_lock(&p->mu);
    bool ended = p->fired && !p->woken;
    p->fired = false; /* a wake before this attempt is this attempt's */
    pthread_mutex_unlock(&p->mu);
    if (ended)
        return QUEEN_POLL_NOTHING; /* woken for its end: nothing to pop */
    for (;;) {
        if (pop_once(p->q, p->tenant, &p->o, body, err) != 0)
            return QUEEN_POLL_ERROR;
        if (*body != NULL) {
            p->popped = true;
            return QUEEN_POLL_MESSAGES;
        }
        pthread_mutex_lock(&p->mu);
        bool fired = p->fired, woken = p->woken;
        p->fired = false;
        pthread_mutex_unlock(&p->mu);
        if (fired && woken)
            continue;
        if (fired)
            return QUEEN_POLL_NOTHING;
        switch (notifier_wait_again(p->q->notifier, p->w)) {
        case NOTIFY_RETRY:
            continue;
        case NOTIFY_DONE:
            return QUEEN_POLL_NOTHING;
        case NOTIFY_SLEEP:
            break;
        }
        /* Back in its place: it may fire at once. Asleep only if it has not. */
        pthread_mutex_lock(&p->mu);
        fired = p->fired;
        woken = p->woken;
        p->fired = false;
        p->asleep = !fired;
        pthread_mutex_unlock(&p->mu);
        if (!fired)
            return QUEEN_POLL_SLEEP;
        if (!woken)
            return QUEEN_POLL_NOTHING;
    }
}

static void poll_close(queen_poll *p)
{
    /* Waits for a callback in progress: after it poll_fired never runs. */
    notifier_wait_close(p->q->notifier, p->w, p->popped);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

queen_poll *queen_poll_open(queen *q, const char *tenant, const queen_pop_options *opts, queen_poll_wake_fn fn,
                            void *ctx)
{
    char canon[QUEEN_TENANT_LEN + 1];
    if (opts == NULL || (opts->queue == NULL && opts->namespace_label == NULL && opts->task_label == NULL) ||
        engine_enter_tenant(q, tenant, canon, NULL) == NULL)
        return NULL;
    queen_poll *p = poll_open(q, canon, opts, fn, ctx);
    engine_leave(q);
    return p;
}

/* Entered for the attempts only: an open poll is not an in-flight call, so
 * queen_close never waits for one; it ends it (the notifier fires it). */
queen_poll_state queen_poll_step(queen_poll *p, char **body_json, queen_error *err)
{
    *body_json = NULL;
    char canon[QUEEN_TENANT_LEN + 1];
    if (engine_enter_tenant(p->q, p->tenant, canon, err) == NULL)
        return QUEEN_POLL_ERROR;
    queen_poll_state st = poll_step(p, body_json, err);
    engine_leave(p->q);
    return st;
}

void queen_poll_close(queen_poll *p)
{
    if (p != NULL)
        poll_close(p);
}

/* With wait: the waiting pop above, blocking this thread on the poll's
 * condition between steps (holding no connection). Not woken: the timeout
 * passed (or the engine closes): nothing, *body NULL. */
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
    queen_poll *p = NULL;
    if (opts->wait) {
        atomic_fetch_add(&q->counters.pop_waits, 1);
        p = poll_open(q, tenant, opts, NULL, NULL);
    }
    int rc;
    if (p == NULL) { /* no wait, or none could be opened: one attempt */
        rc = pop_once(q, tenant, opts, body_json, err);
        engine_leave(q);
        return rc;
    }
    queen_poll_state st;
    while ((st = poll_step(p, body_json, err)) == QUEEN_POLL_SLEEP) {
        pthread_mutex_lock(&p->mu);
        while (!p->fired)
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    poll_close(p);
    engine_leave(q);
    return st == QUEEN_POLL_ERROR ? -1 : 0;
}

int queen_ack(queen *q, const char *tenant, const char *acks_json, const char *group, char **results_json,
              queen_error *err)
{
    *results_json = NULL;
    if (acks_json == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_request", "acks_json is NULL");
        return -1;
    }
    return engine_call(q, CALL_ACK, tenant, ENGINE_ARGS(ENGINE_S(acks_json), ENGINE_S(group)), results_json, err);
}

int queen_lease_extend(queen *q, const char *tenant, const char *lease_id, int seconds, char **result_json,
                       queen_error *err)
{
    return engine_call(q, CALL_LEASE_EXTEND, tenant, ENGINE_ARGS(ENGINE_S(lease_id), ENGINE_N(seconds)), result_json,
                       err);
}

int queen_queues_of(queen *q, const char *tenant, const char *refs_json, char **names_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUES_OF, tenant, ENGINE_ARGS(ENGINE_S(refs_json)), names_json, err);
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
    return engine_call(q, CALL_CONFIGURE, tenant,
                       ENGINE_ARGS(ENGINE_S(queue), ENGINE_S(options_json), ENGINE_S(label_namespace),
                                   ENGINE_S(label_task), ENGINE_S(mode)),
                       result_json, err);
}

int queen_queues(queen *q, const char *tenant, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUES, tenant, ENGINE_NO_ARGS, result_json, err);
}

int queen_queue_delete(queen *q, const char *tenant, const char *queue, char **result_json, queen_error *err)
{
    return engine_call(q, CALL_QUEUE_DELETE, tenant, ENGINE_ARGS(ENGINE_S(queue)), result_json, err);
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
    queen_waiter *w = notifier_add(q->notifier, canon, queue, timeout_ms, fn, ctx);
    engine_leave(q);
    return w;
}
