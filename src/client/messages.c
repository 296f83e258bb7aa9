/* messages: push, pop, ack, lease renewal and the queues, shaped for the
 * broker's routes (docs/api.md, Messages). */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"
#include "transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 2xx body handed to the caller as it is. */
static int finish(client_reply *r, char **result_json)
{
    if (result_json != NULL)
        *result_json = r->body;
    else
        free(r->body);
    return 0;
}

static int send_call(queen_client *c, const char *tenant, const char *method, const char *path, const char *body,
                     bool safe, char **result_json, queen_client_error *err)
{
    client_request rq = {.method = method, .path = path, .body = body, .tenant = tenant, .safe = safe};
    client_reply r;
    if (client_call(c, &rq, &r, err) != 0)
        return -1;
    return finish(&r, result_json);
}

/* A push is repeatable when every item carries a transactionId: the broker
 * answers a repeated one "duplicate" instead of queueing it twice. */
static bool items_have_ids(const char *items_json)
{
    jd *a = jd_parse(items_json, strlen(items_json), NULL, 0);
    bool safe = a != NULL && a->type == JD_ARRAY && a->n > 0;
    for (size_t i = 0; safe && i < a->n; i++) {
        const char *id = jd_str(a->items[i], "transactionId");
        safe = id != NULL && id[0] != '\0';
    }
    jd_free(a);
    return safe;
}

int queen_client_push(queen_client *c, const char *tenant, const char *items_json, char **results_json,
                      queen_client_error *err)
{
    jbuf b = {0};
    jbuf_add(&b, "{\"items\":");
    jbuf_add(&b, items_json != NULL ? items_json : "null");
    jbuf_add(&b, "}");
    char *body = jbuf_take(&b);
    if (body == NULL)
        return client_oom(err);
    int rc = send_call(c, tenant, "POST", "/api/v1/push", body, items_json != NULL && items_have_ids(items_json),
                       results_json, err);
    free(body);
    return rc;
}

static void query(jbuf *b, bool *first, const char *name, const char *value)
{
    jbuf_add(b, *first ? "?" : "&");
    *first = false;
    jbuf_add(b, name);
    jbuf_add(b, "=");
    jbuf_pct(b, value);
}

static void query_int(jbuf *b, bool *first, const char *name, int value)
{
    char t[24];
    snprintf(t, sizeof t, "%d", value);
    query(b, first, name, t);
}

int queen_client_pop(queen_client *c, const char *tenant, const queen_pop_options *o, char **body_json,
                     queen_client_error *err)
{
    if (body_json != NULL)
        *body_json = NULL;
    queen_pop_options none = {0};
    if (o == NULL)
        o = &none;
    jbuf p = {0};
    bool first = true;
    if (o->queue != NULL) {
        jbuf_add(&p, "/api/v1/pop/queue/");
        jbuf_pct(&p, o->queue);
        if (o->partition != NULL) {
            jbuf_add(&p, "/partition/");
            jbuf_pct(&p, o->partition);
        }
    } else {
        jbuf_add(&p, "/api/v1/pop");
        if (o->namespace_label != NULL)
            query(&p, &first, "namespace", o->namespace_label);
        if (o->task_label != NULL)
            query(&p, &first, "task", o->task_label);
    }
    if (o->consumer_group != NULL)
        query(&p, &first, "consumerGroup", o->consumer_group);
    if (o->batch != 0)
        query_int(&p, &first, "batch", o->batch);
    if (o->lease_seconds != 0)
        query_int(&p, &first, "leaseSeconds", o->lease_seconds);
    if (o->partitions != 0)
        query_int(&p, &first, "partitions", o->partitions);
    if (o->auto_ack)
        query(&p, &first, "autoAck", "true");
    if (o->subscription_mode != NULL)
        query(&p, &first, "subscriptionMode", o->subscription_mode);
    if (o->subscription_from != NULL)
        query(&p, &first, "subscriptionFrom", o->subscription_from);
    long wait_ms = 0;
    if (o->wait) {
        wait_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
        query(&p, &first, "wait", "true");
        query_int(&p, &first, "timeout", (int)wait_ms);
    }
    char *path = jbuf_take(&p);
    if (path == NULL)
        return client_oom(err);
    /* Never repeated on a lost answer: the lease of what it popped expires
     * and the message comes back; the caller's loop pops again. */
    client_request rq = {.method = "GET", .path = path, .tenant = tenant, .safe = false, .extra_ms = wait_ms};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(path);
    if (rc != 0)
        return -1;
    if (r.status == 204 || r.len == 0) {
        free(r.body);
        return 0;
    }
    return finish(&r, body_json);
}

int queen_client_ack(queen_client *c, const char *tenant, const char *acks_json, const char *group,
                     char **results_json, queen_client_error *err)
{
    jbuf b = {0};
    jbuf_add(&b, "{\"acknowledgments\":");
    jbuf_add(&b, acks_json != NULL ? acks_json : "null");
    if (group != NULL) {
        jbuf_add(&b, ",\"consumerGroup\":");
        jbuf_str(&b, group);
    }
    jbuf_add(&b, "}");
    char *body = jbuf_take(&b);
    if (body == NULL)
        return client_oom(err);
    /* Each ack names its message by transactionId: a repeat settles nothing twice. */
    int rc = send_call(c, tenant, "POST", "/api/v1/ack/batch", body, true, results_json, err);
    free(body);
    return rc;
}

int queen_client_lease_extend(queen_client *c, const char *tenant, const char *lease_id, int seconds,
                              char **result_json, queen_client_error *err)
{
    jbuf p = {0};
    jbuf_add(&p, "/api/v1/lease/");
    jbuf_pct(&p, lease_id != NULL ? lease_id : "");
    jbuf_add(&p, "/extend");
    char *path = jbuf_take(&p);
    char body[48];
    snprintf(body, sizeof body, "{\"seconds\":%d}", seconds);
    if (path == NULL)
        return client_oom(err);
    int rc = send_call(c, tenant, "POST", path, body, true, result_json, err);
    free(path);
    return rc;
}

int queen_client_configure_ex(queen_client *c, const char *tenant, const char *queue, const char *options_json,
                              const char *label_namespace, const char *label_task, const char *mode,
                              char **result_json, queen_client_error *err)
{
    jbuf b = {0};
    jbuf_add(&b, "{\"queue\":");
    jbuf_str(&b, queue);
    if (options_json != NULL) {
        jbuf_add(&b, ",\"options\":");
        jbuf_add(&b, options_json);
    }
    if (label_namespace != NULL) {
        jbuf_add(&b, ",\"namespace\":");
        jbuf_str(&b, label_namespace);
    }
    if (label_task != NULL) {
        jbuf_add(&b, ",\"task\":");
        jbuf_str(&b, label_task);
    }
    if (mode != NULL) {
        jbuf_add(&b, ",\"mode\":");
        jbuf_str(&b, mode);
    }
    jbuf_add(&b, "}");
    char *body = jbuf_take(&b);
    if (body == NULL)
        return client_oom(err);
    int rc = send_call(c, tenant, "POST", "/api/v1/configure", body, true, result_json, err);
    free(body);
    return rc;
}

int queen_client_configure(queen_client *c, const char *tenant, const char *queue, const char *options_json,
                           char **result_json, queen_client_error *err)
{
    return queen_client_configure_ex(c, tenant, queue, options_json, NULL, NULL, NULL, result_json, err);
}

int queen_client_queues(queen_client *c, const char *tenant, char **result_json, queen_client_error *err)
{
    return send_call(c, tenant, "GET", "/api/v1/resources/queues", NULL, true, result_json, err);
}

int queen_client_queue_delete(queen_client *c, const char *tenant, const char *queue, char **result_json,
                              queen_client_error *err)
{
    jbuf p = {0};
    jbuf_add(&p, "/api/v1/resources/queues/");
    jbuf_pct(&p, queue != NULL ? queue : "");
    char *path = jbuf_take(&p);
    if (path == NULL)
        return client_oom(err);
    int rc = send_call(c, tenant, "DELETE", path, NULL, true, result_json, err);
    free(path);
    return rc;
}
