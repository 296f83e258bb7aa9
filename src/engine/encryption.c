/* encryption: payload encryption at rest, the engine's half (queen.h,
 * "Payload encryption"; the cipher is crypt.c, the queue flag sql/log_encryption.sql).
 *
 * Push: an item for a queue with encryptionEnabled has its payload sealed
 * for its place (tenant, queue, partition, transactionId) before SQL sees
 * it; an item without a transactionId is given a fresh uuid first, so every
 * sealed payload names its message. Items travel as the client's raw JSON:
 * only the payload's bytes are replaced (and a transactionId added).
 *
 * Fails closed: without a key, a push naming such a queue is refused (503
 * encryption_key_missing) rather than stored in plaintext; the push's own
 * SQL refuses an unsealed payload into such a queue (sql/log_push.sql), so a broker
 * without a key makes no extra statement to find out.
 *
 * Answers (pop, browse, dead letters): only the "data" of a message of a
 * queue with encryptionEnabled is ever opened, and only for that message's
 * own place. A "qenc:" string pushed into any other queue, or nested inside
 * a payload, is a plain string and comes back as it was pushed: opening it
 * there would make the broker decrypt for anyone who can push and pop one
 * queue. A message whose envelope does not open (no key, a retired key,
 * altered bytes, a ciphertext moved to another queue, partition or message)
 * is delivered with "data": null and "encryptionError": <reason>, counted
 * (queen_pops_open_failures_total) and logged with its identity: its
 * lease and ack work as for any message, so one bad payload never stops a
 * queue, and the consumer is told rather than handed ciphertext as data. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "crypt.h"
#include "engine.h"
#include "logging.h"
#include "rawjson.h"

#define SQL_ENCRYPTED "SELECT queen.log_encrypted_queues_v1($1::uuid, $2::jsonb)::text"

static bool listed(const json_t *names, const char *queue)
{
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        if (queue != NULL && strcmp(json_string_value(n), queue) == 0)
            return true;
    }
    return false;
}

/* The decoded text of a raw JSON string token (malloc'd), NULL when it is
 * not one. */
static char *decoded(rawjson_span s)
{
    json_t *v = json_loadb(s.p, s.len, JSON_DECODE_ANY, NULL);
    char *out = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    json_decref(v);
    return out;
}

/* The queues among items_json ([{queue, ...}]) with encryptionEnabled, as a
 * JSON array in *names (possibly empty). -1 with err. */
static int encrypted_names(queen *q, const char *tenant, const char *items_json, json_t **names, queen_error *err)
{
    char *text = NULL;
    const char *params[] = {tenant, items_json};
    *names = NULL;
    if (queen_call_text(q, "queen_encrypted_queues", SQL_ENCRYPTED, 2, params, &text, err) != 0)
        return -1;
    *names = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!json_is_array(*names)) {
        json_decref(*names);
        *names = NULL;
        queen_error_set(err, QUEEN_ERR_INTERNAL, "log_result_misaligned", "log_encrypted_queues_v1 answered no array");
        return -1;
    }
    return 0;
}

/* One item of an encrypted queue, sealed, appended to out. false with err
 * (400, the reasons SQL would give) for a partition or transactionId that
 * is neither absent, null nor a string, or (500) when sealing failed. */
static bool seal_item(queen *q, const char *tenant, const char *queue, rawjson_span item, size_t index, char **out,
                      size_t *used, size_t *cap, queen_error *err)
{
    rawjson_span payload, part, txn;
    if (!rawjson_member(item, "payload", &payload)) /* SQL refuses it (log_bad_payload): nothing to hide */
        return engine_buf_append(out, used, cap, item.p, item.len);
    bool has_part = rawjson_member(item, "partition", &part), part_null = has_part && part.len == 4 && !memcmp(part.p, "null", 4);
    bool has_txn = rawjson_member(item, "transactionId", &txn), txn_null = has_txn && txn.len == 4 && !memcmp(txn.p, "null", 4);
    char *pname = has_part && !part_null ? decoded(part) : strdup("Default");
    char *tname = has_txn && !txn_null ? decoded(txn) : NULL, fresh[37] = "";
    bool ok = true;
    if (pname == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_partition", "items[%zu].partition must be a string", index);
        ok = false;
    } else if (has_txn && !txn_null && tname == NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_bad_transaction_id",
                        "items[%zu].transactionId must be a string", index);
        ok = false;
    } else if (tname == NULL && !crypt_uuid4(fresh)) {
        ok = false;
    }
    crypt_place at = {tenant, queue, pname, tname ? tname : fresh};
    char *sealed = ok ? crypt_seal(&q->keyring, &at, payload.p, payload.len) : NULL;
    ok = ok && sealed != NULL;
    if (ok) {
        /* The item with its payload replaced and, without a transactionId of
         * its own, the fresh one: in place of a null, else as a last member. */
        char tid[64];
        snprintf(tid, sizeof tid, "\"%s\"", fresh);
        rawjson_span cut[2] = {payload, txn_null ? txn : (rawjson_span){NULL, 0}};
        const char *with[2] = {sealed, tid};
        int first = cut[1].p != NULL && cut[1].p < cut[0].p ? 1 : 0;
        const char *p = item.p, *end = item.p + item.len;
        for (int k = 0; k < 2 && ok; k++) {
            int i = k == 0 ? first : 1 - first;
            if (cut[i].p == NULL)
                continue;
            ok = engine_buf_append(out, used, cap, p, (size_t)(cut[i].p - p)) &&
                 engine_buf_append(out, used, cap, with[i], strlen(with[i]));
            p = cut[i].p + cut[i].len;
        }
        if (ok && !has_txn) { /* before the closing brace */
            char member[80];
            int n = snprintf(member, sizeof member, ",\"transactionId\":%s", tid);
            ok = engine_buf_append(out, used, cap, p, (size_t)(end - 1 - p)) &&
                 engine_buf_append(out, used, cap, member, (size_t)n) && engine_buf_append(out, used, cap, "}", 1);
        } else if (ok) {
            ok = engine_buf_append(out, used, cap, p, (size_t)(end - p));
        }
    }
    if (!ok && err->reason[0] == '\0')
        queen_error_set(err, QUEEN_ERR_INTERNAL, "encryption_failed", "payloads could not be sealed");
    free(sealed);
    free(pname);
    free(tname);
    return ok;
}

int engine_seal_items(queen *q, const char *tenant, const char *items_json, char **sealed_items, queen_error *err)
{
    *sealed_items = NULL;
    /* Without a key nothing is sealed and nothing is looked up: the push
     * itself refuses an unsealed payload into an encrypted queue (sql/log_push.sql,
     * 503 encryption_key_missing), so a keyless broker pays no statement. */
    if (items_json == NULL || q->keyring.n == 0)
        return 0;
    json_t *names = NULL;
    if (encrypted_names(q, tenant, items_json, &names, err) != 0)
        return -1;
    if (json_array_size(names) == 0) {
        json_decref(names);
        return 0;
    }
    queen_error local;
    if (err == NULL)
        err = &local;
    err->reason[0] = '\0';
    rawjson_iter it;
    rawjson_span item, key;
    size_t used = 0, cap = strlen(items_json) * 2 + 64, index = 0;
    char *out = malloc(cap);
    bool ok = out != NULL && rawjson_open(&it, (rawjson_span){items_json, strlen(items_json)}, '[') &&
              engine_buf_append(&out, &used, &cap, "[", 1);
    for (; ok && rawjson_next(&it, &key, &item); index++) {
        rawjson_span qname;
        char *queue = rawjson_member(item, "queue", &qname) ? decoded(qname) : NULL;
        ok = index == 0 || engine_buf_append(&out, &used, &cap, ",", 1);
        if (ok && listed(names, queue))
            ok = seal_item(q, tenant, queue, item, index, &out, &used, &cap, err);
        else if (ok)
            ok = engine_buf_append(&out, &used, &cap, item.p, item.len);
        free(queue);
    }
    ok = ok && engine_buf_append(&out, &used, &cap, "]", 1);
    json_decref(names);
    if (!ok) {
        free(out);
        if (err->reason[0] == '\0')
            queen_error_set(err, QUEEN_ERR_INTERNAL, "encryption_failed", "payloads could not be sealed");
        return -1;
    }
    *sealed_items = out;
    return 0;
}

int engine_refuse_encrypted_items(queen *q, const char *tenant, const char *items_json, queen_error *err)
{
    if (q->keyring.n == 0) /* the bundle's push refuses it in SQL (503 encryption_key_missing) */
        return 0;
    json_t *names = NULL;
    if (encrypted_names(q, tenant, items_json, &names, err) != 0)
        return -1;
    int rc = 0;
    if (json_array_size(names) > 0) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "log_encrypted_queue_in_transaction",
                        "a transaction cannot push to a queue with encryptionEnabled; push to it with /api/v1/push");
        rc = -1;
    }
    json_decref(names);
    return rc;
}

/* A message of an answer whose data is an envelope. */
typedef struct candidate {
    rawjson_span data;
    char *queue, *partition, *txn, *id;
} candidate;

static void candidates_free(candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c[i].queue);
        free(c[i].partition);
        free(c[i].txn);
        free(c[i].id);
    }
    free(c);
}

/* The messages of body ({"messages": [...], ...}) whose data is an
 * envelope string; *n of them (malloc'd array, NULL when none). */
static candidate *find_candidates(const char *body, size_t *n)
{
    *n = 0;
    rawjson_span msgs, m, key, whole = {body, strlen(body)};
    rawjson_iter it;
    if (!rawjson_member(whole, "messages", &msgs) || !rawjson_open(&it, msgs, '['))
        return NULL;
    candidate *c = NULL;
    size_t cap = 0;
    while (rawjson_next(&it, &key, &m)) {
        rawjson_span data, qs, ps, ts, is;
        if (!rawjson_member(m, "data", &data) || data.len < 2 || data.p[0] != '"' ||
            !crypt_is_envelope(data.p + 1, data.len - 2))
            continue;
        if (*n == cap) {
            size_t want = cap ? cap * 2 : 8;
            candidate *grown = realloc(c, want * sizeof *c);
            if (grown == NULL)
                break;
            c = grown;
            cap = want;
        }
        candidate *e = &c[(*n)++];
        e->data = data;
        e->queue = rawjson_member(m, "queue", &qs) ? decoded(qs) : NULL;
        e->partition = rawjson_member(m, "partition", &ps) ? decoded(ps) : NULL;
        e->txn = rawjson_member(m, "transactionId", &ts) ? decoded(ts) : NULL;
        e->id = rawjson_member(m, "id", &is) ? decoded(is) : NULL;
    }
    return c;
}

int engine_open_body(queen *q, const char *tenant, char **body, queen_error *err)
{
    /* Nearly every answer has no envelope at all: one scan, nothing else. */
    if (*body == NULL || strstr(*body, "\"qenc:v") == NULL)
        return 0;
    size_t n = 0;
    candidate *c = find_candidates(*body, &n);
    if (n == 0) {
        free(c);
        return 0;
    }
    json_t *queues = json_array();
    for (size_t i = 0; i < n; i++)
        if (c[i].queue != NULL)
            json_array_append_new(queues, json_pack("{s:s}", "queue", c[i].queue));
    char *items = json_dumps(queues, JSON_COMPACT);
    json_decref(queues);
    json_t *names = NULL;
    int rc = items ? encrypted_names(q, tenant, items, &names, err) : -1;
    free(items);
    if (rc != 0) {
        candidates_free(c, n);
        return -1;
    }
    size_t used = 0, cap = strlen(*body) + 64;
    char *out = malloc(cap);
    const char *p = *body;
    bool ok = out != NULL;
    if (ok)
        out[0] = '\0';
    for (size_t i = 0; i < n && ok; i++) {
        if (!listed(names, c[i].queue))
            continue; /* a plain string of a queue without encryption: as pushed */
        crypt_place at = {tenant, c[i].queue, c[i].partition, c[i].txn};
        char *plain = NULL;
        size_t plen = 0;
        crypt_verdict v = crypt_open(&q->keyring, &at, c[i].data.p + 1, c[i].data.len - 2, &plain, &plen);
        ok = engine_buf_append(&out, &used, &cap, p, (size_t)(c[i].data.p - p));
        if (v == CRYPT_OPENED) {
            ok = ok && engine_buf_append(&out, &used, &cap, plain, plen);
        } else {
            char marker[96];
            int mn = snprintf(marker, sizeof marker, "null, \"encryptionError\": \"%s\"", crypt_verdict_reason(v));
            ok = ok && engine_buf_append(&out, &used, &cap, marker, (size_t)mn);
            atomic_fetch_add(&q->counters.open_failures, 1);
            log_warn("payload not opened (%s): tenant %s, queue %s, partition %s, transactionId %s, message %s; "
                     "delivered with data null and encryptionError",
                     crypt_verdict_reason(v), tenant, c[i].queue, c[i].partition ? c[i].partition : "?",
                     c[i].txn ? c[i].txn : "?", c[i].id ? c[i].id : "?");
        }
        free(plain);
        p = c[i].data.p + c[i].data.len;
    }
    ok = ok && engine_buf_append(&out, &used, &cap, p, strlen(p));
    json_decref(names);
    candidates_free(c, n);
    if (!ok) {
        free(out);
        queen_error_set(err, QUEEN_ERR_INTERNAL, "out_of_memory", "payloads could not be opened");
        return -1;
    }
    free(*body);
    *body = out;
    return 0;
}

int engine_open_answer(queen *q, const char *tenant, int rc, char **result_json, queen_error *err)
{
    char canon[QUEEN_TENANT_LEN + 1];
    if (rc == 0 && engine_tenant(tenant, canon, NULL) != NULL && engine_open_body(q, canon, result_json, err) != 0) {
        free(*result_json);
        *result_json = NULL;
        return -1;
    }
    return rc;
}
