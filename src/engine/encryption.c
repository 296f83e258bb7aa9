/* encryption: payload encryption at rest, the engine's half (queen.h,
 * "Payload encryption"; the cipher is crypt.c, the queue flag sql/035).
 * A push to a queue with encryptionEnabled has its payloads sealed before
 * SQL sees them; every answer that carries payloads (pop, dead letters,
 * browse) has them opened for the calling tenant. Items travel as the
 * client's raw JSON: only the payload's bytes are replaced. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
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

int engine_seal_items(queen *q, const char *tenant, const char *items_json, char **sealed_items, queen_error *err)
{
    *sealed_items = NULL;
    if (q->keyring.n == 0 || items_json == NULL)
        return 0;
    char *names_text = NULL;
    const char *params[] = {tenant, items_json};
    if (queen_call_text(q, "queen_encrypted_queues", SQL_ENCRYPTED, 2, params, &names_text, err) != 0)
        return -1;
    json_t *names = names_text ? json_loads(names_text, 0, NULL) : NULL;
    free(names_text);
    if (json_array_size(names) == 0) {
        json_decref(names);
        return 0;
    }
    rawjson_iter it;
    rawjson_span item, key;
    size_t used = 0, cap = strlen(items_json) * 2 + 64;
    char *out = malloc(cap);
    bool ok = out != NULL && rawjson_open(&it, (rawjson_span){items_json, strlen(items_json)}, '[') &&
              engine_buf_append(&out, &used, &cap, "[", 1);
    bool first = true;
    while (ok && rawjson_next(&it, &key, &item)) {
        rawjson_span qname, payload;
        json_t *decoded = NULL;
        bool seal = rawjson_member(item, "queue", &qname) && rawjson_member(item, "payload", &payload) &&
                    (decoded = json_loadb(qname.p, qname.len, JSON_DECODE_ANY, NULL)) != NULL &&
                    listed(names, json_string_value(decoded));
        json_decref(decoded);
        ok = first || engine_buf_append(&out, &used, &cap, ",", 1);
        first = false;
        if (!seal) {
            ok = ok && engine_buf_append(&out, &used, &cap, item.p, item.len);
            continue;
        }
        char *sealed = crypt_seal(&q->keyring, tenant, payload.p, payload.len);
        ok = ok && sealed != NULL && engine_buf_append(&out, &used, &cap, item.p, (size_t)(payload.p - item.p)) &&
             engine_buf_append(&out, &used, &cap, sealed, strlen(sealed)) &&
             engine_buf_append(&out, &used, &cap, payload.p + payload.len, (size_t)(item.p + item.len - payload.p - payload.len));
        free(sealed);
    }
    ok = ok && engine_buf_append(&out, &used, &cap, "]", 1);
    json_decref(names);
    if (!ok) {
        free(out);
        queen_error_set(err, QUEEN_ERR_INTERNAL, "encryption_failed", "payloads could not be sealed");
        return -1;
    }
    *sealed_items = out;
    return 0;
}

void engine_open_body(queen *q, const char *tenant, char **body)
{
    if (q->keyring.n == 0 || *body == NULL)
        return;
    char *opened = crypt_open_body(&q->keyring, tenant, *body);
    if (opened != NULL) {
        free(*body);
        *body = opened;
    }
}

int engine_open_answer(queen *q, const char *tenant, int rc, char **result_json)
{
    char canon[QUEEN_TENANT_LEN + 1];
    if (rc == 0 && engine_tenant(tenant, canon, NULL) != NULL)
        engine_open_body(q, canon, result_json);
    return rc;
}
