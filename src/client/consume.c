/* consume: the consume loop (queen_client.h, "The consume loop"). Worker
 * threads pop with a short long poll and run the handler; one renewer
 * thread extends the lease of every message a handler is working on. */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"
#include "transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct consume_run {
    queen_client *c;
    const queen_client_consume_options *o;
    int lease_seconds, poll_ms, batch;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    char **held;     /* per worker: the lease its handler holds, or NULL */
    bool finished;   /* the workers are done: the renewer leaves */
    bool fatal;      /* a refused pop: every worker leaves */
    queen_client_error fatal_err;
} consume_run;

typedef struct worker {
    consume_run *run;
    int slot;
} worker;

static bool stopping(consume_run *run)
{
    if (__atomic_load_n(run->o->stop, __ATOMIC_ACQUIRE) != 0)
        return true;
    pthread_mutex_lock(&run->lock);
    bool fatal = run->fatal;
    pthread_mutex_unlock(&run->lock);
    return fatal;
}

static void hold(consume_run *run, int slot, const char *lease)
{
    pthread_mutex_lock(&run->lock);
    free(run->held[slot]);
    run->held[slot] = lease != NULL ? strdup(lease) : NULL;
    pthread_mutex_unlock(&run->lock);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A failed message goes back to the broker, which redelivers it. */
static void fail_message(consume_run *run, const queen_client_message *m)
{
    jbuf b = {0};
    jbuf_add(&b, "[{\"transactionId\":");
    jbuf_str(&b, m->transaction_id);
    jbuf_add(&b, ",\"partitionId\":");
    jbuf_str(&b, m->partition_id);
    jbuf_add(&b, ",\"leaseId\":");
    jbuf_str(&b, m->lease_id);
    jbuf_add(&b, ",\"status\":\"failed\",\"error\":\"handler failed\"}]");
    char *acks = jbuf_take(&b);
    if (acks != NULL) {
        /* Best effort: if it is lost, the lease expires and the message comes back anyway. */
        queen_client_ack(run->c, run->o->tenant, acks, run->o->consumer_group, NULL, NULL);
        free(acks);
    }
}

static void handle_one(consume_run *run, int slot, const jd *msg, const jd *body)
{
    queen_client_message m = {0};
    m.queue = jd_str(msg, "queue");
    m.partition = jd_str(msg, "partition");
    m.partition_id = jd_str(msg, "partitionId") != NULL ? jd_str(msg, "partitionId") : jd_str(body, "partitionId");
    m.lease_id = jd_str(msg, "leaseId") != NULL ? jd_str(msg, "leaseId") : jd_str(body, "leaseId");
    m.transaction_id = jd_str(msg, "transactionId");
    m.consumer_group = jd_str(msg, "consumerGroup");
    m.delivery_attempt = (int)jd_int(msg, "deliveryAttempt", 1);
    char *payload = jd_text(jd_get(msg, "data"));
    char *whole = jd_text(msg);
    m.payload_json = payload != NULL ? payload : "null";
    m.message_json = whole != NULL ? whole : "{}";
    if (m.transaction_id == NULL || m.partition_id == NULL) {
        free(payload);
        free(whole);
        return; /* not a message this loop can settle; its lease runs out */
    }
    hold(run, slot, m.lease_id);
    queen_client_tx *tx = queen_client_tx_new();
    int verdict = QUEEN_CLIENT_FAILED;
    if (tx != NULL && queen_client_tx_ack(tx, m.transaction_id, m.partition_id, m.lease_id, NULL,
                                          run->o->consumer_group) == 0)
        verdict = run->o->handler(run->o->ctx, &m, tx);
    hold(run, slot, NULL);
    bool settled = false;
    if (verdict == QUEEN_CLIENT_HANDLED) {
        char *result = NULL;
        if (queen_client_tx_commit(run->c, run->o->tenant, tx, &result, NULL) == 0) {
            jd *r = jd_parse(result, strlen(result), NULL, 0);
            settled = jd_true(r, "success");
            jd_free(r);
            free(result);
        }
    }
    if (!settled)
        fail_message(run, &m);
    queen_client_tx_free(tx);
    free(payload);
    free(whole);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    consume_run *run = w->run;
    const queen_client_consume_options *o = run->o;
    long idle_wait = 50;
    while (!stopping(run)) {
        queen_pop_options po = {.queue = o->queue, .partition = o->partition, .consumer_group = o->consumer_group,
                                .batch = run->batch, .lease_seconds = run->lease_seconds, .wait = true,
                                .timeout_ms = run->poll_ms};
        char *body = NULL;
        queen_client_error err;
        if (queen_client_pop(run->c, o->tenant, &po, &body, &err) != 0) {
            if (err.status >= 400 && err.status < 500 && err.status != 408 && err.status != 429) {
                pthread_mutex_lock(&run->lock);
                if (!run->fatal) {
                    run->fatal = true;
                    run->fatal_err = err;
                }
                pthread_mutex_unlock(&run->lock);
                break;
            }
            /* Unavailable: wait and pop again, longer each time, up to 2 s. */
            pause_ms(idle_wait);
            idle_wait = idle_wait * 2 > 2000 ? 2000 : idle_wait * 2;
            continue;
        }
        idle_wait = 50;
        if (body == NULL)
            continue;
        jd *b = jd_parse(body, strlen(body), NULL, 0);
        const jd *msgs = jd_get(b, "messages");
        /* Every message popped is handled, even after a stop: it is leased to us. */
        for (size_t i = 0; msgs != NULL && msgs->type == JD_ARRAY && i < msgs->n; i++)
            handle_one(run, w->slot, msgs->items[i], b);
        jd_free(b);
        free(body);
    }
    return NULL;
}

static void *renewer_main(void *arg)
{
    consume_run *run = arg;
    long period_ms = run->lease_seconds * 1000L / 3;
    if (period_ms < 100)
        period_ms = 100;
    int n = run->o->concurrency > 0 ? run->o->concurrency : 1;
    char **leases = calloc((size_t)n, sizeof *leases);
    pthread_mutex_lock(&run->lock);
    while (!run->finished && leases != NULL) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += period_ms / 1000;
        until.tv_nsec += (period_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!run->finished && pthread_cond_timedwait(&run->wake, &run->lock, &until) == 0) {
        }
        if (run->finished)
            break;
        for (int i = 0; i < n; i++)
            leases[i] = run->held[i] != NULL ? strdup(run->held[i]) : NULL;
        pthread_mutex_unlock(&run->lock);
        for (int i = 0; i < n; i++) {
            if (leases[i] != NULL)
                queen_client_lease_extend(run->c, run->o->tenant, leases[i], run->lease_seconds, NULL, NULL);
            free(leases[i]);
            leases[i] = NULL;
        }
        pthread_mutex_lock(&run->lock);
    }
    pthread_mutex_unlock(&run->lock);
    free(leases);
    return NULL;
}

int queen_client_consume(queen_client *c, const queen_client_consume_options *o, queen_client_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
    if (c == NULL || o == NULL || o->handler == NULL || o->stop == NULL || o->queue == NULL) {
        client_error_set(err, 0, "bad_request", "consume needs a client, a queue, a handler and a stop flag");
        return -1;
    }
    consume_run run = {.c = c, .o = o};
    run.lease_seconds = o->lease_seconds > 0 ? o->lease_seconds : 30;
    run.poll_ms = o->poll_ms > 0 ? o->poll_ms : 1000;
    run.batch = o->batch > 0 ? o->batch : 1;
    int n = o->concurrency > 0 ? o->concurrency : 1;
    run.held = calloc((size_t)n, sizeof *run.held);
    worker *workers = calloc((size_t)n, sizeof *workers);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    if (run.held == NULL || workers == NULL || threads == NULL) {
        free(run.held);
        free(workers);
        free(threads);
        return client_oom(err);
    }
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.wake, NULL);
    pthread_t renewer;
    bool renewing = pthread_create(&renewer, NULL, renewer_main, &run) == 0;
    int started = 0;
    for (int i = 0; i < n; i++) {
        workers[i] = (worker){.run = &run, .slot = i};
        if (pthread_create(&threads[i], NULL, worker_main, &workers[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_lock(&run.lock);
    run.finished = true;
    pthread_cond_broadcast(&run.wake);
    pthread_mutex_unlock(&run.lock);
    if (renewing)
        pthread_join(renewer, NULL);
    int rc = 0;
    if (run.fatal) {
        if (err != NULL)
            *err = run.fatal_err;
        rc = -1;
    } else if (started == 0) {
        client_error_set(err, 0, "out_of_memory", "no worker thread could start");
        rc = -1;
    }
    for (int i = 0; i < n; i++)
        free(run.held[i]);
    free(run.held);
    free(workers);
    free(threads);
    pthread_cond_destroy(&run.wake);
    pthread_mutex_destroy(&run.lock);
    return rc;
}
