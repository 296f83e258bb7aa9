/* read.c: reading what the client hands back without a JSON library of
 * one's own: the messages of a pop body (queen_client_popped_*) and the
 * name of an error category (queen_client_category_name).
 *
 * A popped set reads its body once with jdoc and fills one
 * queen_client_message per message, as the consume loop hands them to a
 * handler: strings point into the parsed document, payload_json and
 * message_json are copies of the broker's text (numbers byte for byte).
 * Everything lives until queen_client_popped_free. */
#include "queen_client.h"

#include <stdlib.h>
#include <string.h>

#include "jdoc.h"
#include "transport.h"


struct queen_client_popped {
    jd *doc;
    size_t n;
    queen_client_message *msgs;
    char **texts; /* 2 per message: payload_json, message_json */
};

void queen_client_popped_free(queen_client_popped *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < 2 * p->n; i++)
        free(p->texts[i]);
    free(p->texts);
    free(p->msgs);
    jd_free(p->doc);
    free(p);
}

queen_client_popped *queen_client_popped_parse(const char *body_json, queen_client_error *err)
{
    queen_client_popped *p = calloc(1, sizeof *p);
    if (p == NULL) {
        client_error_set(err, 0, "out_of_memory", "out of memory reading a pop body");
        return NULL;
    }
    /* NULL is what queen_client_pop gives for 204: nothing popped. */
    if (body_json == NULL)
        return p;
    char why[128] = "";
    p->doc = jd_parse(body_json, strlen(body_json), why, sizeof why);
    const jd *msgs = jd_get(p->doc, "messages");
    if (p->doc == NULL || p->doc->type != JD_OBJECT || msgs == NULL || msgs->type != JD_ARRAY) {
        client_error_set(err, 0, "bad_response", why[0] != '\0' ? why : "a pop body has a messages array");
        queen_client_popped_free(p);
        return NULL;
    }
    p->msgs = calloc(msgs->n ? msgs->n : 1, sizeof *p->msgs);
    p->texts = calloc(msgs->n ? 2 * msgs->n : 1, sizeof *p->texts);
    if (p->msgs == NULL || p->texts == NULL) {
        client_error_set(err, 0, "out_of_memory", "out of memory reading a pop body");
        queen_client_popped_free(p);
        return NULL;
    }
    for (size_t i = 0; i < msgs->n; i++) {
        const jd *msg = msgs->items[i];
        queen_client_message *m = &p->msgs[p->n];
        /* A pop of one partition names the partition and lease once, on the body. */
        m->queue = jd_str(msg, "queue");
        m->partition = jd_str(msg, "partition");
        m->partition_id = jd_str(msg, "partitionId") != NULL ? jd_str(msg, "partitionId") : jd_str(p->doc, "partitionId");
        m->lease_id = jd_str(msg, "leaseId") != NULL ? jd_str(msg, "leaseId") : jd_str(p->doc, "leaseId");
        m->transaction_id = jd_str(msg, "transactionId");
        m->consumer_group = jd_str(msg, "consumerGroup");
        m->delivery_attempt = (int)jd_int(msg, "deliveryAttempt", 1);
        const jd *data = jd_get(msg, "data");
        char *payload = data != NULL ? jd_text(data) : strdup("null");
        char *whole = jd_text(msg);
        p->texts[2 * p->n] = payload;
        p->texts[2 * p->n + 1] = whole;
        p->n++; /* counted before the check, so free releases both */
        if (payload == NULL || whole == NULL) {
            client_error_set(err, 0, "out_of_memory", "out of memory reading a pop body");
            queen_client_popped_free(p);
            return NULL;
        }
        m->payload_json = payload;
        m->message_json = whole;
    }
    return p;
}

size_t queen_client_popped_count(const queen_client_popped *p)
{
    return p != NULL ? p->n : 0;
}

const queen_client_message *queen_client_popped_at(const queen_client_popped *p, size_t i)
{
    return p != NULL && i < p->n ? &p->msgs[i] : NULL;
}

/* Indexed by category; a category added to queen.h without a name here
 * reads "unknown", which tests/client/test_client.c refuses. */
static const char *const category_names[] = {
    [QUEEN_OK] = "ok",
    [QUEEN_ERR_BAD_REQUEST] = "bad_request",
    [QUEEN_ERR_TOO_LARGE] = "too_large",
    [QUEEN_ERR_PRECONDITION] = "precondition",
    [QUEEN_ERR_UNAVAILABLE] = "unavailable",
    [QUEEN_ERR_MISCONFIGURED] = "misconfigured",
    [QUEEN_ERR_INTERNAL] = "internal",
    [QUEEN_ERR_QUOTA_EXCEEDED] = "quota_exceeded",
    [QUEEN_ERR_FEATURE_GATED] = "feature_gated",
    [QUEEN_ERR_RATE_LIMITED] = "rate_limited",
    [QUEEN_ERR_CONFLICT] = "conflict",
    [QUEEN_ERR_UNAUTHORIZED] = "unauthorized",
    [QUEEN_ERR_FORBIDDEN] = "forbidden",
    [QUEEN_ERR_LIMIT_EXCEEDED] = "limit_exceeded",
};

const char *queen_client_category_name(queen_error_category category)
{
    if ((int)category < 0 || (size_t)category >= sizeof category_names / sizeof category_names[0] ||
        category_names[category] == NULL)
        return "unknown";
    return category_names[category];
}
