/* dlq: the dead-letter calls, shaped for the broker's routes (docs/api.md,
 * Dead letters): the same names and arguments as libqueen's
 * queen_dlq_* (include/queen.h), the broker's bodies handed back as they are. */
#include "queen_client.h"
#include "jbuf.h"
#include "transport.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every dead-letter call is repeatable: a list reads, a requeue appends each
 * dead letter once however often it is asked, a delete of a gone one
 * deletes nothing. */
static int send_dlq(queen_client *c, const char *tenant, const char *method, char *path, const char *body,
                    char **result_json, queen_client_error *err)
{
    if (result_json != NULL)
        *result_json = NULL;
    if (path == NULL)
        return client_oom(err);
    client_request rq = {.method = method, .path = path, .body = body, .tenant = tenant, .safe = true};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(path);
    if (rc != 0)
        return -1;
    if (result_json != NULL)
        *result_json = r.body;
    else
        free(r.body);
    return 0;
}

static void query(jbuf *b, bool *first, const char *name, const char *value)
{
    jbuf_add(b, *first ? "?" : "&");
    *first = false;
    jbuf_add(b, name);
    jbuf_add(b, "=");
    jbuf_pct(b, value);
}

int queen_client_dlq_list(queen_client *c, const char *tenant, const queen_dlq_query *q, char **result_json,
                          queen_client_error *err)
{
    queen_dlq_query none = {0};
    if (q == NULL)
        q = &none;
    jbuf p = {0};
    bool first = true;
    jbuf_add(&p, "/api/v1/dlq");
    char num[24];
    if (q->queue != NULL)
        query(&p, &first, "queue", q->queue);
    if (q->partition != NULL)
        query(&p, &first, "partition", q->partition);
    if (q->consumer_group != NULL)
        query(&p, &first, "consumerGroup", q->consumer_group);
    if (q->limit != 0) {
        snprintf(num, sizeof num, "%d", q->limit);
        query(&p, &first, "limit", num);
    }
    if (q->after != 0) {
        snprintf(num, sizeof num, "%lld", q->after);
        query(&p, &first, "after", num);
    }
    return send_dlq(c, tenant, "GET", jbuf_take(&p), NULL, result_json, err);
}

int queen_client_dlq_requeue(queen_client *c, const char *tenant, const char *queue, const char *ids_json, int max,
                             char **result_json, queen_client_error *err)
{
    jbuf b = {0};
    jbuf_add(&b, "{\"queue\":");
    jbuf_str(&b, queue);
    if (ids_json != NULL) {
        jbuf_add(&b, ",\"ids\":");
        jbuf_add(&b, ids_json);
    }
    if (max != 0)
        jbuf_printf(&b, ",\"max\":%d", max);
    jbuf_add(&b, "}");
    char *body = jbuf_take(&b);
    if (body == NULL)
        return client_oom(err);
    int rc = send_dlq(c, tenant, "POST", strdup("/api/v1/dlq/requeue"), body, result_json, err);
    free(body);
    return rc;
}

int queen_client_dlq_delete(queen_client *c, const char *tenant, long long id, const char *queue, char **result_json,
                            queen_client_error *err)
{
    jbuf p = {0};
    bool first = true;
    if (id > 0) {
        jbuf_printf(&p, "/api/v1/dlq/%lld", id);
    } else {
        jbuf_add(&p, "/api/v1/dlq");
        query(&p, &first, "queue", queue != NULL ? queue : "");
    }
    return send_dlq(c, tenant, "DELETE", jbuf_take(&p), NULL, result_json, err);
}
