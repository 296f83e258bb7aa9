/* queenctl push, pop, queues: messages in and out, one JSON line each. */
#include "ctl.h"
#include "jbuf.h"
#include "jdoc.h"

#include <stdlib.h>
#include <string.h>

#define PUSH_CHUNK 100 /* lines per request */

static const char PUSH_USAGE[] =
    "usage: queenctl push QUEUE [--partition P] [--id-prefix PREFIX] < messages.jsonl\n"
    "  Each non-empty line of stdin is one message's payload (JSON text), pushed in order,\n"
    "  100 per request. --id-prefix gives line N the transactionId PREFIX-N, which makes a\n"
    "  repeated push a duplicate instead of a second message (and lets the client retry it).\n";

static const char POP_USAGE[] =
    "usage: queenctl pop QUEUE [--partition P] [--group G] [--batch N] [--lease SECONDS]\n"
    "                          [--wait] [--timeout MS] [--ack]\n"
    "  Leases up to N messages (default 1) and prints them; --wait long-polls up to --timeout\n"
    "  (default 30000 ms) for one; --ack acknowledges what was printed. Exit 1 when empty.\n";

static const char QUEUES_USAGE[] = "usage: queenctl queues\n"
                                   "  The queues with their labels, partitions and message counts.\n";

static int push_chunk(ctl *x, jbuf *items, int *index_base, ctl_table *t)
{
    jbuf_add(items, "]");
    char *text = jbuf_take(items);
    if (text == NULL)
        return CTL_UNAVAILABLE;
    char *result = NULL;
    queen_client_error err;
    int rc = queen_client_push(x->client, x->tenant, text, &result, &err);
    free(text);
    if (rc != 0)
        return ctl_fail("push", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    for (size_t i = 0; r != NULL && r->type == JD_ARRAY && i < r->n; i++) {
        const jd *e = r->items[i];
        if (t != NULL) {
            char idx[24];
            snprintf(idx, sizeof idx, "%d", *index_base + (int)i);
            ctl_table_row(t, (const char *[]){idx, jd_str(e, "status"), jd_str(e, "transaction_id"),
                                              jd_str(e, "message_id")});
        } else {
            char *line = jd_text(e);
            ctl_json_line(stdout, line);
            free(line);
        }
    }
    *index_base += r != NULL ? (int)r->n : 0;
    jd_free(r);
    free(result);
    return CTL_OK;
}

int cmd_push(ctl *x, int argc, char **argv)
{
    const char *partition = NULL, *id_prefix = NULL;
    const ctl_opt spec[] = {{"partition", &partition, NULL}, {"id-prefix", &id_prefix, NULL}, {NULL, NULL, NULL}};
    const char *pos[1];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 1, &npos, NULL, NULL, PUSH_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 1)
        return ctl_usage_error(PUSH_USAGE, "push needs QUEUE");
    ctl_table *t = x->table ? ctl_table_new(4, (const char *[]){"INDEX", "STATUS", "TRANSACTION_ID", "MESSAGE_ID"})
                            : NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    jbuf items = {0};
    int count = 0, in_chunk = 0, base = 0, lineno = 0, rc = CTL_OK;
    while (rc == CTL_OK && (n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = '\0';
        if (n == 0)
            continue;
        jbuf_add(&items, in_chunk == 0 ? "[" : ",");
        jbuf_add(&items, "{\"queue\":");
        jbuf_str(&items, pos[0]);
        if (partition != NULL) {
            jbuf_add(&items, ",\"partition\":");
            jbuf_str(&items, partition);
        }
        if (id_prefix != NULL) {
            char *id = NULL;
            if (asprintf(&id, "%s-%d", id_prefix, lineno) < 0)
                id = NULL;
            jbuf_add(&items, ",\"transactionId\":");
            jbuf_str(&items, id != NULL ? id : "");
            free(id);
        }
        jbuf_add(&items, ",\"payload\":");
        jbuf_add(&items, line);
        jbuf_add(&items, "}");
        count++;
        if (++in_chunk == PUSH_CHUNK) {
            rc = push_chunk(x, &items, &base, t);
            in_chunk = 0;
        }
    }
    if (rc == CTL_OK && in_chunk > 0)
        rc = push_chunk(x, &items, &base, t);
    jbuf_free(&items);
    free(line);
    ctl_table_print(t, stdout);
    if (rc == CTL_OK && count == 0)
        fprintf(stderr, "queenctl: push: stdin held no message\n");
    return rc;
}

int cmd_pop(ctl *x, int argc, char **argv)
{
    const char *partition = NULL, *group = NULL, *batch = NULL, *lease = NULL, *timeout = NULL;
    bool wait = false, ack = false;
    const ctl_opt spec[] = {{"partition", &partition, NULL}, {"group", &group, NULL}, {"batch", &batch, NULL},
                            {"lease", &lease, NULL},         {"timeout", &timeout, NULL}, {"wait", NULL, &wait},
                            {"ack", NULL, &ack},             {NULL, NULL, NULL}};
    const char *pos[1];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 1, &npos, NULL, NULL, POP_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 1)
        return ctl_usage_error(POP_USAGE, "pop needs QUEUE");
    long nbatch = 0, nlease = 0, ntimeout = 0;
    if ((batch != NULL && !ctl_long("--batch", batch, &nbatch)) || (lease != NULL && !ctl_long("--lease", lease, &nlease)) ||
        (timeout != NULL && !ctl_long("--timeout", timeout, &ntimeout)))
        return CTL_USAGE;
    queen_pop_options o = {.queue = pos[0], .partition = partition, .consumer_group = group, .batch = (int)nbatch,
                           .lease_seconds = (int)nlease, .wait = wait, .timeout_ms = (int)ntimeout};
    char *body = NULL;
    queen_client_error err;
    if (queen_client_pop(x->client, x->tenant, &o, &body, &err) != 0)
        return ctl_fail("pop", &err);
    if (body == NULL) {
        fprintf(stderr, "queenctl: pop: %s: nothing to pop\n", pos[0]);
        return CTL_NEGATIVE;
    }
    jd *b = jd_parse(body, strlen(body), NULL, 0);
    const jd *msgs = jd_get(b, "messages");
    ctl_table *t = x->table ? ctl_table_new(5, (const char *[]){"TRANSACTION_ID", "PARTITION", "ATTEMPT", "LEASE", "DATA"})
                            : NULL;
    jbuf acks = {0};
    for (size_t i = 0; msgs != NULL && i < msgs->n; i++) {
        const jd *m = msgs->items[i];
        if (t != NULL) {
            char *attempt = jd_text(jd_get(m, "deliveryAttempt")), *data = jd_text(jd_get(m, "data"));
            ctl_table_row(t, (const char *[]){jd_str(m, "transactionId"), jd_str(m, "partition"), attempt,
                                              jd_str(m, "leaseId"), data});
            free(attempt);
            free(data);
        } else {
            char *line = jd_text(m);
            ctl_json_line(stdout, line);
            free(line);
        }
        jbuf_add(&acks, i == 0 ? "[" : ",");
        jbuf_add(&acks, "{\"transactionId\":");
        jbuf_str(&acks, jd_str(m, "transactionId"));
        jbuf_add(&acks, ",\"partitionId\":");
        jbuf_str(&acks, jd_str(m, "partitionId"));
        jbuf_add(&acks, ",\"leaseId\":");
        jbuf_str(&acks, jd_str(m, "leaseId"));
        jbuf_add(&acks, "}");
    }
    ctl_table_print(t, stdout);
    int rc = CTL_OK;
    if (ack && acks.len > 0) {
        jbuf_add(&acks, "]");
        char *text = jbuf_take(&acks);
        char *result = NULL;
        if (text != NULL && queen_client_ack(x->client, x->tenant, text, group, &result, &err) != 0)
            rc = ctl_fail("pop --ack", &err);
        free(result);
        free(text);
    }
    jbuf_free(&acks);
    jd_free(b);
    free(body);
    return rc;
}

int cmd_queues(ctl *x, int argc, char **argv)
{
    const char *pos[1];
    int npos;
    int p = ctl_parse(argc, argv, NULL, pos, 0, &npos, NULL, NULL, QUEUES_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    char *result = NULL;
    queen_client_error err;
    if (queen_client_queues(x->client, x->tenant, &result, &err) != 0)
        return ctl_fail("queues", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    const jd *qs = jd_get(r, "queues");
    ctl_table *t = x->table ? ctl_table_new(7, (const char *[]){"QUEUE", "NAMESPACE", "TASK", "PARTITIONS", "TOTAL",
                                                                "PENDING", "PROCESSING"})
                            : NULL;
    for (size_t i = 0; qs != NULL && i < qs->n; i++) {
        const jd *q = qs->items[i];
        if (t != NULL) {
            const jd *m = jd_get(q, "messages");
            char *parts = jd_text(jd_get(q, "partitions")), *total = jd_text(jd_get(m, "total")),
                 *pending = jd_text(jd_get(m, "pending")), *processing = jd_text(jd_get(m, "processing"));
            ctl_table_row(t, (const char *[]){jd_str(q, "name"), jd_str(q, "namespace"), jd_str(q, "task"), parts, total,
                                              pending, processing});
            free(parts);
            free(total);
            free(pending);
            free(processing);
        } else {
            char *line = jd_text(q);
            ctl_json_line(stdout, line);
            free(line);
        }
    }
    ctl_table_print(t, stdout);
    jd_free(r);
    free(result);
    return CTL_OK;
}
