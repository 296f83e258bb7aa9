/* exactly_once: an embedded consumer with effectively-once processing, on
 * libqueen alone (no HTTP, no broker process).
 *
 *   QUEEN_PG_URL=postgresql://user@host/db build/examples/exactly_once [IN [OUT [SEED]]]
 *
 * IN (default "orders-in") is popped, each message's effect is computed
 * (here: the square of its "n"), and ONE transaction commits, together:
 *   - the marker   kv putIfAbsent ns "exactly-once", key "done:<IN>:<transactionId>"
 *                  (a producer's transactionId is unique per queue, so the
 *                  queue is part of the key), required: if it already
 *                  exists the whole bundle rolls back;
 *   - the effect   a push to OUT (default "orders-out"), itself deduplicated
 *                  by its transactionId "out:<transactionId>";
 *   - the ack      the input message's cursor advance, under its lease.
 * All three commit or none does, so a crash anywhere (before the commit, or
 * after it but before the consumer heard the answer) leads to a redelivery
 * that either redoes the work from scratch or finds the marker and only
 * acks. SEED > 0 first pushes that many demo messages {"n": i} to IN. The
 * program applies the schema (idempotent), consumes until IN stays empty
 * for 2 s, prints what it did and exits 0.
 *
 * Build: `make` builds it into build/examples/exactly_once (it links
 * build/libqueen.a with -ljansson -lpq -lpthread; see docs/embedding.md).
 * Markers are kept 7 days (MARKER_TTL): a redelivery later than that would
 * be processed again; use QUEEN_FOREVER to trade disk for an unbounded
 * guarantee. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queen.h"

#define MARKER_NS "exactly-once"
#define MARKER_TTL (7L * 24 * 3600)

static int fail(const char *what, const queen_error *err)
{
    fprintf(stderr, "exactly_once: %s: %s (%s)\n", what, err->reason, err->detail);
    return 1;
}

static int seed(queen *q, const char *in, int count)
{
    json_t *items = json_array();
    for (int i = 1; i <= count; i++) {
        char txid[32];
        snprintf(txid, sizeof txid, "seed-%d", i);
        json_array_append_new(items, json_pack("{s:s, s:{s:i}, s:s}", "queue", in, "payload", "n", i, "transactionId", txid));
    }
    char *text = json_dumps(items, JSON_COMPACT);
    json_decref(items);
    char *out = NULL;
    queen_error err;
    int rc = queen_push(q, NULL, text, &out, &err);
    free(text);
    free(out);
    return rc == 0 ? 0 : fail("push", &err);
}

/* The bundle for one message: marker + effect + ack. Built with jansson;
 * the tenant is an argument of queen_transaction, never part of it. */
static char *bundle_for(json_t *msg, const char *in, const char *partition_id, const char *lease_id,
                        const char *out_queue)
{
    const char *txid = json_string_value(json_object_get(msg, "transactionId"));
    json_int_t n = (json_int_t)json_number_value(json_object_get(json_object_get(msg, "data"), "n"));
    char key[520], out_txid[300];
    snprintf(key, sizeof key, "done:%s:%s", in, txid);
    snprintf(out_txid, sizeof out_txid, "out:%s", txid);
    json_t *b = json_pack("{s:[{s:s, s:s, s:s, s:s}, {s:s, s:[{s:s, s:{s:I, s:I}, s:s}]}],"
                          " s:[{s:s, s:s, s:s, s:{s:I}, s:I, s:b}]}",
                          "operations",
                          "type", "ack", "transactionId", txid, "partitionId", partition_id, "leaseId", lease_id,
                          "type", "push", "items", "queue", out_queue, "payload", "n", n, "square", n * n,
                          "transactionId", out_txid,
                          "kv", "op", "putIfAbsent", "ns", MARKER_NS, "key", key, "value", "n", n, "ttlSeconds",
                          (json_int_t)MARKER_TTL, "required", 1);
    char *text = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    return text;
}

/* The marker says an earlier attempt already committed this message's
 * effect (for example a producer re-sent it after its dedup window): only
 * advance the cursor. */
static int ack_only(queen *q, json_t *msg, const char *partition_id, const char *lease_id)
{
    json_t *acks = json_pack("[{s:O, s:s, s:s}]", "transactionId", json_object_get(msg, "transactionId"),
                             "partitionId", partition_id, "leaseId", lease_id);
    char *text = json_dumps(acks, JSON_COMPACT);
    json_decref(acks);
    char *out = NULL;
    queen_error err;
    int rc = queen_ack(q, NULL, text, NULL, &out, &err);
    free(text);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    const char *in = argc > 1 ? argv[1] : "orders-in";
    const char *out_queue = argc > 2 ? argv[2] : "orders-out";
    int seed_count = argc > 3 ? atoi(argv[3]) : 0;

    queen_config *cfg = queen_config_new(); /* every setting at its default */
    char msg[512];
    int level = QUEEN_LOG_INFO;
    if (cfg == NULL || queen_config_from_env(cfg, msg, sizeof msg) != 0 || /* QUEEN_PG_URL and friends */
        queen_config_set(cfg, "QUEEN_PG_POOL", "2", msg, sizeof msg) != 0) {
        fprintf(stderr, "exactly_once: %s\n", cfg == NULL ? "out of memory" : msg);
        queen_config_free(cfg);
        return 2;
    }
    queen_config_get_int(cfg, "QUEEN_LOG_LEVEL", &level);
    queen_log_set_level((queen_log_level)level);
    if (queen_schema_apply(cfg, msg, sizeof msg) != 0) {
        fprintf(stderr, "exactly_once: schema: %s\n", msg);
        queen_config_free(cfg);
        return 1;
    }
    queen_error err;
    queen *q = queen_open(cfg, &err);
    queen_config_free(cfg);
    if (q == NULL)
        return fail("open", &err);
    if (seed_count > 0 && seed(q, in, seed_count) != 0) {
        queen_close(q);
        return 1;
    }

    int processed = 0, skipped = 0, retried = 0;
    for (;;) {
        queen_pop_options o = {.queue = in, .batch = 10, .wait = true, .timeout_ms = 2000};
        char *body = NULL;
        if (queen_pop(q, NULL, &o, &body, &err) != 0) {
            queen_close(q);
            return fail("pop", &err);
        }
        if (body == NULL)
            break; /* idle for 2 s: done */
        json_t *pop = json_loads(body, JSON_DECODE_INT_AS_REAL, NULL);
        free(body);
        const char *partition_id = json_string_value(json_object_get(pop, "partitionId"));
        const char *lease_id = json_string_value(json_object_get(pop, "leaseId"));
        json_t *messages = json_object_get(pop, "messages");
        for (size_t i = 0; i < json_array_size(messages); i++) {
            json_t *m = json_array_get(messages, i);
            char *bundle = bundle_for(m, in, partition_id, lease_id, out_queue);
            char *result = NULL;
            int rc = bundle ? queen_transaction(q, NULL, bundle, &result, &err) : -1;
            free(bundle);
            if (rc != 0) {
                /* Unavailable: the outcome is unknown. Leave the message; its
                 * lease expires, it is redelivered, and the marker decides. */
                fprintf(stderr, "exactly_once: transaction: %s (will be redelivered)\n", err.reason);
                retried++;
                continue;
            }
            json_t *r = json_loads(result, JSON_DECODE_INT_AS_REAL, NULL);
            free(result);
            const char *reason = json_string_value(json_object_get(r, "reason"));
            if (json_is_true(json_object_get(r, "success"))) {
                processed++;
            } else if (reason && strcmp(reason, "kv_precondition") == 0) {
                skipped += ack_only(q, m, partition_id, lease_id) == 0;
            } else {
                fprintf(stderr, "exactly_once: bundle failed: %s (will be redelivered)\n", reason ? reason : "?");
                retried++;
            }
            json_decref(r);
        }
        json_decref(pop);
    }
    printf("exactly_once: processed %d, skipped %d already done, %d left for redelivery\n", processed, skipped,
           retried);
    queen_close(q);
    return 0;
}
