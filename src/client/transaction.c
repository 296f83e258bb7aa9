/* transaction: the bundle builder and POST /api/v1/transaction. */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"
#include "transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct queen_client_tx {
    jbuf ops;       /* the operations array's members, comma-separated */
    jbuf kv;        /* the kv array's members */
    jbuf leases;    /* requiredLeases members */
    bool open_push; /* the last operation is a push still taking items */
    bool carries_id;/* an ack or an item with a transactionId: a repeat rolls back whole */
    bool oom;
};

queen_client_tx *queen_client_tx_new(void) { return calloc(1, sizeof(queen_client_tx)); }

void queen_client_tx_free(queen_client_tx *tx)
{
    if (tx == NULL)
        return;
    jbuf_free(&tx->ops);
    jbuf_free(&tx->kv);
    jbuf_free(&tx->leases);
    free(tx);
}

static int done(queen_client_tx *tx)
{
    if (tx->ops.oom || tx->kv.oom || tx->leases.oom)
        tx->oom = true;
    return tx->oom ? -1 : 0;
}

/* The pushes' "items" array is left open while pushes follow each other;
 * any other operation closes it. */
static void close_push(queen_client_tx *tx)
{
    if (tx->open_push)
        jbuf_add(&tx->ops, "]}");
    tx->open_push = false;
}

int queen_client_tx_ack(queen_client_tx *tx, const char *transaction_id, const char *partition_id,
                        const char *lease_id, const char *status, const char *group)
{
    if (tx == NULL)
        return -1;
    close_push(tx);
    if (tx->ops.len > 0)
        jbuf_add(&tx->ops, ",");
    jbuf_add(&tx->ops, "{\"type\":\"ack\",\"transactionId\":");
    jbuf_str(&tx->ops, transaction_id);
    jbuf_add(&tx->ops, ",\"partitionId\":");
    jbuf_str(&tx->ops, partition_id);
    if (lease_id != NULL) {
        jbuf_add(&tx->ops, ",\"leaseId\":");
        jbuf_str(&tx->ops, lease_id);
    }
    if (status != NULL) {
        jbuf_add(&tx->ops, ",\"status\":");
        jbuf_str(&tx->ops, status);
    }
    if (group != NULL) {
        jbuf_add(&tx->ops, ",\"consumerGroup\":");
        jbuf_str(&tx->ops, group);
    }
    jbuf_add(&tx->ops, "}");
    tx->carries_id = true;
    return done(tx);
}

int queen_client_tx_push(queen_client_tx *tx, const char *queue, const char *partition, const char *payload_json,
                         const char *transaction_id)
{
    if (tx == NULL)
        return -1;
    if (!tx->open_push) {
        if (tx->ops.len > 0)
            jbuf_add(&tx->ops, ",");
        jbuf_add(&tx->ops, "{\"type\":\"push\",\"items\":[");
        tx->open_push = true;
    } else {
        jbuf_add(&tx->ops, ",");
    }
    jbuf_add(&tx->ops, "{\"queue\":");
    jbuf_str(&tx->ops, queue);
    if (partition != NULL) {
        jbuf_add(&tx->ops, ",\"partition\":");
        jbuf_str(&tx->ops, partition);
    }
    jbuf_add(&tx->ops, ",\"payload\":");
    jbuf_add(&tx->ops, payload_json != NULL ? payload_json : "null");
    if (transaction_id != NULL) {
        jbuf_add(&tx->ops, ",\"transactionId\":");
        jbuf_str(&tx->ops, transaction_id);
        tx->carries_id = true;
    }
    jbuf_add(&tx->ops, "}");
    return done(tx);
}

int queen_client_tx_kv(queen_client_tx *tx, const char *op_json)
{
    if (tx == NULL)
        return -1;
    if (tx->kv.len > 0)
        jbuf_add(&tx->kv, ",");
    jbuf_add(&tx->kv, op_json != NULL ? op_json : "null");
    return done(tx);
}

int queen_client_tx_require_lease(queen_client_tx *tx, const char *lease_id)
{
    if (tx == NULL)
        return -1;
    if (tx->leases.len > 0)
        jbuf_add(&tx->leases, ",");
    jbuf_str(&tx->leases, lease_id);
    return done(tx);
}

char *queen_client_tx_json(const queen_client_tx *tx)
{
    if (tx == NULL || tx->oom)
        return NULL;
    jbuf b = {0};
    bool first = true;
    jbuf_add(&b, "{");
    if (tx->ops.len > 0) {
        jbuf_add(&b, "\"operations\":[");
        jbuf_raw(&b, tx->ops.s, tx->ops.len);
        if (tx->open_push) /* closed in the copy: the builder may take more pushes */
            jbuf_add(&b, "]}");
        jbuf_add(&b, "]");
        first = false;
    }
    if (tx->kv.len > 0) {
        jbuf_add(&b, first ? "\"kv\":[" : ",\"kv\":[");
        jbuf_raw(&b, tx->kv.s, tx->kv.len);
        jbuf_add(&b, "]");
        first = false;
    }
    if (tx->leases.len > 0) {
        jbuf_add(&b, first ? "\"requiredLeases\":[" : ",\"requiredLeases\":[");
        jbuf_raw(&b, tx->leases.s, tx->leases.len);
        jbuf_add(&b, "]");
    }
    jbuf_add(&b, "}");
    return jbuf_take(&b);
}

static int send_bundle(queen_client *c, const char *tenant, const char *bundle, bool safe, char **result_json,
                       queen_client_error *err)
{
    client_request rq = {.method = "POST", .path = "/api/v1/transaction", .body = bundle, .tenant = tenant,
                         .safe = safe};
    client_reply r;
    if (client_call(c, &rq, &r, err) != 0)
        return -1;
    if (result_json != NULL)
        *result_json = r.body;
    else
        free(r.body);
    return 0;
}

/* Whether a bundle carries a transactionId (an ack, or a pushed item with
 * one): a repeat of one that committed then rolls back whole. */
static bool bundle_carries_id(const char *bundle_json)
{
    jd *b = jd_parse(bundle_json, strlen(bundle_json), NULL, 0);
    const jd *ops = jd_get(b, "operations");
    bool found = false;
    for (size_t i = 0; ops != NULL && ops->type == JD_ARRAY && i < ops->n && !found; i++) {
        const jd *op = ops->items[i];
        const char *type = jd_str(op, "type");
        if (type != NULL && strcmp(type, "ack") == 0 && jd_str(op, "transactionId") != NULL)
            found = true;
        const jd *items = jd_get(op, "items");
        for (size_t k = 0; items != NULL && items->type == JD_ARRAY && k < items->n && !found; k++)
            found = jd_str(items->items[k], "transactionId") != NULL;
    }
    jd_free(b);
    return found;
}

int queen_client_transaction(queen_client *c, const char *tenant, const char *bundle_json, char **result_json,
                             queen_client_error *err)
{
    const char *bundle = bundle_json != NULL ? bundle_json : "null";
    return send_bundle(c, tenant, bundle, bundle_json != NULL && bundle_carries_id(bundle_json), result_json, err);
}

int queen_client_tx_commit(queen_client *c, const char *tenant, const queen_client_tx *tx, char **result_json,
                           queen_client_error *err)
{
    char *bundle = queen_client_tx_json(tx);
    if (bundle == NULL)
        return client_oom(err);
    int rc = send_bundle(c, tenant, bundle, tx->carries_id, result_json, err);
    free(bundle);
    return rc;
}
