/* queenctl configure, ack, lease extend, dlq: the operator's side of a
 * queue (its options, settling and keeping leases by hand, dead letters).
 * Results print as the broker's JSON, one line each. */
#include "ctl.h"
#include "jbuf.h"
#include "jdoc.h"

#include <stdlib.h>
#include <string.h>

static const char CONFIGURE_USAGE[] =
    "usage: queenctl configure QUEUE [OPTIONS_JSON] [--namespace NS] [--task TASK]\n"
    "  Creates QUEUE or changes its options ('{\"leaseTime\":30,\"retryLimit\":3}'), and its labels.\n";

static const char ACK_USAGE[] =
    "usage: queenctl ack [TRANSACTION_ID PARTITION_ID LEASE_ID] [--failed [--error TEXT]] [--group G]\n"
    "  Settles messages: the one named, else each message on stdin, one JSON object a line (what\n"
    "  'queenctl pop' prints). --failed hands them back for redelivery (then the dead letters).\n"
    "  Exit 1 when the broker settled not all of them.\n";

static const char LEASE_USAGE[] =
    "usage: queenctl lease extend LEASE_ID [--seconds N]\n"
    "  Renews a lease for N more seconds (default 30), so its messages stay with their holder.\n"
    "  Exit 1 when the lease is gone (expired, settled or unknown).\n";

static const char DLQ_USAGE[] =
    "usage: queenctl dlq ls QUEUE [--partition P] [--group G] [--limit N] [--after ID]\n"
    "       queenctl dlq requeue QUEUE [ID]... [--max N]\n"
    "       queenctl dlq del QUEUE [ID]\n"
    "  The dead letters of QUEUE: list them (oldest first; exit 1 when none), put them back on\n"
    "  their partitions (the ids given, else all), or delete them (the one given, else all).\n";

/* A result body as one line; CTL_OK. */
static int print_result(char *result)
{
    ctl_json_line(stdout, result != NULL ? result : "null");
    free(result);
    return CTL_OK;
}

int cmd_configure(ctl *x, int argc, char **argv)
{
    const char *ns = NULL, *task = NULL;
    const ctl_opt spec[] = {{"namespace", &ns, NULL}, {"task", &task, NULL}, {NULL, NULL, NULL}};
    const char *pos[2];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 2, &npos, NULL, NULL, CONFIGURE_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos < 1)
        return ctl_usage_error(CONFIGURE_USAGE, "configure needs QUEUE");
    char *result = NULL;
    queen_client_error err;
    if (queen_client_configure_ex(x->client, x->tenant, pos[0], npos == 2 ? pos[1] : NULL, ns, task, NULL, &result,
                                  &err) != 0)
        return ctl_fail("configure", &err);
    return print_result(result);
}

/* One ack item from the three ids; status failed with an error when given. */
static void add_ack(jbuf *acks, const char *tid, const char *pid, const char *lease, bool failed, const char *error)
{
    jbuf_add(acks, acks->len == 0 ? "[" : ",");
    jbuf_add(acks, "{\"transactionId\":");
    jbuf_str(acks, tid);
    jbuf_add(acks, ",\"partitionId\":");
    jbuf_str(acks, pid);
    if (lease != NULL) {
        jbuf_add(acks, ",\"leaseId\":");
        jbuf_str(acks, lease);
    }
    if (failed) {
        jbuf_add(acks, ",\"status\":\"failed\"");
        if (error != NULL) {
            jbuf_add(acks, ",\"error\":");
            jbuf_str(acks, error);
        }
    }
    jbuf_add(acks, "}");
}

int cmd_ack(ctl *x, int argc, char **argv)
{
    const char *group = NULL, *error = NULL;
    bool failed = false;
    const ctl_opt spec[] = {{"group", &group, NULL}, {"error", &error, NULL}, {"failed", NULL, &failed},
                            {NULL, NULL, NULL}};
    const char *pos[3];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 3, &npos, NULL, NULL, ACK_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 0 && npos != 3)
        return ctl_usage_error(ACK_USAGE, "ack takes TRANSACTION_ID PARTITION_ID LEASE_ID, or messages on stdin");
    if (error != NULL && !failed)
        return ctl_usage_error(ACK_USAGE, "--error goes with --failed");
    jbuf acks = {0};
    if (npos == 3) {
        add_ack(&acks, pos[0], pos[1], pos[2], failed, error);
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        int lineno = 0;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            lineno++;
            jd *m = jd_parse(line, (size_t)n, NULL, 0);
            bool blank = m == NULL && strspn(line, " \t\r\n") == (size_t)n;
            if (blank)
                continue;
            const char *tid = jd_str(m, "transactionId"), *pid = jd_str(m, "partitionId");
            if (tid == NULL || pid == NULL) {
                jd_free(m);
                free(line);
                jbuf_free(&acks);
                return ctl_usage_error(ACK_USAGE, "stdin line %d is not a message with transactionId and partitionId",
                                       lineno);
            }
            add_ack(&acks, tid, pid, jd_str(m, "leaseId"), failed, error);
            jd_free(m);
        }
        free(line);
        if (acks.len == 0) {
            jbuf_free(&acks);
            return ctl_usage_error(ACK_USAGE, "stdin held no message to ack");
        }
    }
    jbuf_add(&acks, "]");
    char *text = jbuf_take(&acks);
    if (text == NULL)
        return CTL_UNAVAILABLE;
    char *result = NULL;
    queen_client_error err;
    int rc = queen_client_ack(x->client, x->tenant, text, group, &result, &err);
    free(text);
    if (rc != 0)
        return ctl_fail("ack", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    int code = CTL_OK;
    for (size_t i = 0; r != NULL && r->type == JD_ARRAY && i < r->n; i++) {
        char *one = jd_text(r->items[i]);
        ctl_json_line(stdout, one != NULL ? one : "null");
        free(one);
        if (!jd_true(r->items[i], "success"))
            code = CTL_NEGATIVE;
    }
    jd_free(r);
    free(result);
    return code;
}

int cmd_lease(ctl *x, int argc, char **argv)
{
    const char *seconds = NULL;
    const ctl_opt spec[] = {{"seconds", &seconds, NULL}, {NULL, NULL, NULL}};
    const char *pos[2];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 2, &npos, NULL, NULL, LEASE_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 2 || strcmp(pos[0], "extend") != 0)
        return ctl_usage_error(LEASE_USAGE, "lease takes: extend LEASE_ID");
    long n = 30;
    if (seconds != NULL && !ctl_long("--seconds", seconds, &n))
        return CTL_USAGE;
    char *result = NULL;
    queen_client_error err;
    if (queen_client_lease_extend(x->client, x->tenant, pos[1], (int)n, &result, &err) != 0)
        return ctl_fail("lease extend", &err);
    /* A lease gone (expired, settled, never held) is a 200 renewed:false: a "no". */
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    bool renewed = jd_true(r, "renewed");
    jd_free(r);
    print_result(result);
    if (!renewed)
        fprintf(stderr, "queenctl: lease extend: %s: not renewed (expired, settled or unknown)\n", pos[1]);
    return renewed ? CTL_OK : CTL_NEGATIVE;
}

static int dlq_ls(ctl *x, const char *queue, const char *partition, const char *group, const char *limit,
                  const char *after)
{
    long nlimit = 0, nafter = 0;
    if ((limit != NULL && !ctl_long("--limit", limit, &nlimit)) || (after != NULL && !ctl_long("--after", after, &nafter)))
        return CTL_USAGE;
    queen_dlq_query q = {.queue = queue, .partition = partition, .consumer_group = group, .limit = (int)nlimit,
                         .after = nafter};
    char *result = NULL;
    queen_client_error err;
    if (queen_client_dlq_list(x->client, x->tenant, &q, &result, &err) != 0)
        return ctl_fail("dlq ls", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    const jd *msgs = jd_get(r, "messages");
    ctl_table *t = x->table ? ctl_table_new(5, (const char *[]){"ID", "TRANSACTION_ID", "PARTITION", "REASON", "ERROR"})
                            : NULL;
    size_t n = msgs != NULL && msgs->type == JD_ARRAY ? msgs->n : 0;
    for (size_t i = 0; i < n; i++) {
        const jd *m = msgs->items[i];
        if (t != NULL) {
            char *id = jd_text(jd_get(m, "id"));
            ctl_table_row(t, (const char *[]){id, jd_str(m, "transactionId"), jd_str(m, "partition"),
                                              jd_str(m, "reason"), jd_str(m, "errorMessage")});
            free(id);
        } else {
            char *line = jd_text(m);
            ctl_json_line(stdout, line);
            free(line);
        }
    }
    ctl_table_print(t, stdout);
    const jd *next = jd_get(r, "nextAfter");
    if (next != NULL && next->type == JD_NUMBER)
        fprintf(stderr, "queenctl: dlq ls: more after this page: --after %.*s\n", (int)next->rawlen, next->raw);
    if (n == 0)
        fprintf(stderr, "queenctl: dlq ls: %s: no dead letters\n", queue);
    jd_free(r);
    free(result);
    return n > 0 ? CTL_OK : CTL_NEGATIVE;
}

/* A dead-letter id from the command line; false (after saying so) when it is not one. */
static bool dlq_id(const char *text, long *id)
{
    if (!ctl_long("ID", text, id))
        return false;
    if (*id < 1) {
        fprintf(stderr, "queenctl: ID: a dead-letter id is a positive integer: %s\n", text);
        return false;
    }
    return true;
}

int cmd_dlq(ctl *x, int argc, char **argv)
{
    const char *partition = NULL, *group = NULL, *limit = NULL, *after = NULL, *max = NULL;
    const ctl_opt spec[] = {{"partition", &partition, NULL}, {"group", &group, NULL}, {"limit", &limit, NULL},
                            {"after", &after, NULL},         {"max", &max, NULL},     {NULL, NULL, NULL}};
    const char *pos[64];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 64, &npos, NULL, NULL, DLQ_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos < 2)
        return ctl_usage_error(DLQ_USAGE, "dlq needs ls|requeue|del and QUEUE");
    const char *sub = pos[0], *queue = pos[1];
    char *result = NULL;
    queen_client_error err;
    if (strcmp(sub, "ls") == 0) {
        if (npos != 2)
            return ctl_usage_error(DLQ_USAGE, "dlq ls takes QUEUE");
        return dlq_ls(x, queue, partition, group, limit, after);
    }
    if (strcmp(sub, "requeue") == 0) {
        long nmax = 0, id;
        if (max != NULL && !ctl_long("--max", max, &nmax))
            return CTL_USAGE;
        jbuf ids = {0};
        for (int i = 2; i < npos; i++) {
            if (!dlq_id(pos[i], &id)) {
                jbuf_free(&ids);
                return CTL_USAGE;
            }
            jbuf_printf(&ids, "%s%ld", i == 2 ? "[" : ",", id);
        }
        if (npos > 2)
            jbuf_add(&ids, "]");
        char *text = npos > 2 ? jbuf_take(&ids) : NULL;
        jbuf_free(&ids);
        int rc = queen_client_dlq_requeue(x->client, x->tenant, queue, text, (int)nmax, &result, &err);
        free(text);
        if (rc != 0)
            return ctl_fail("dlq requeue", &err);
        return print_result(result);
    }
    if (strcmp(sub, "del") == 0) {
        long id = 0;
        if (npos > 3)
            return ctl_usage_error(DLQ_USAGE, "dlq del takes QUEUE and at most one ID");
        if (npos == 3 && !dlq_id(pos[2], &id))
            return CTL_USAGE;
        if (queen_client_dlq_delete(x->client, x->tenant, id, queue, &result, &err) != 0)
            return ctl_fail("dlq del", &err);
        return print_result(result);
    }
    return ctl_usage_error(DLQ_USAGE, "unknown dlq command %s", sub);
}
