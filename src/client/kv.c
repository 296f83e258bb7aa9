/* kv: the KV calls. get/put/delete go to the per-key routes (the key
 * percent-encoded once, so '/' and '%' stay inside it); the other ops are a
 * one-op batch on POST /api/v1/kv whose single element is the result. */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"
#include "transport.h"

#include <stdlib.h>
#include <string.h>

/* A KV answer: the verdict becomes the typed error, anything else is the
 * result text. */
static int kv_finish(client_reply *r, char **result_json, queen_client_error *err)
{
    if (client_kv_verdict(r->body, r->len, err)) {
        free(r->body);
        return -1;
    }
    if (result_json != NULL)
        *result_json = r->body;
    else
        free(r->body);
    return 0;
}

static char *key_path(const char *ns, const char *key)
{
    jbuf p = {0};
    jbuf_add(&p, "/api/v1/kv/");
    jbuf_pct(&p, ns != NULL ? ns : "");
    jbuf_add(&p, "/");
    jbuf_pct(&p, key != NULL ? key : "");
    return jbuf_take(&p);
}

/* Exactly one expiry or nothing is sent (clients/API.md, "Expiry"): a ttl
 * of 0 or below would store a key for a time nobody chose. */
static int add_expiry(jbuf *b, long ttl_seconds, queen_client_error *err)
{
    if (ttl_seconds == QUEEN_FOREVER) {
        jbuf_add(b, ",\"forever\":true");
        return 0;
    }
    if (ttl_seconds > 0) {
        jbuf_printf(b, ",\"ttlSeconds\":%ld", ttl_seconds);
        return 0;
    }
    jbuf_free(b);
    if (err != NULL)
        err->attempts = 0;
    client_error_set(err, 0, "bad_argument", "expiry: give ttl (seconds > 0) or forever (QUEEN_FOREVER)");
    return -1;
}

/* Whether every op of a batch leaves the same state when repeated: reads,
 * and puts and deletes without expect. Unparseable text is not safe. */
static bool ops_repeatable(const char *ops_json)
{
    jd *a = jd_parse(ops_json, strlen(ops_json), NULL, 0);
    const jd *ops = a;
    if (ops != NULL && ops->type == JD_OBJECT)
        ops = jd_get(ops, "operations");
    bool safe = ops != NULL && ops->type == JD_ARRAY;
    for (size_t i = 0; safe && i < ops->n; i++) {
        const char *op = jd_str(ops->items[i], "op");
        bool has_expect = jd_get(ops->items[i], "expect") != NULL;
        safe = op != NULL && (strcmp(op, "get") == 0 || strcmp(op, "getMany") == 0 || strcmp(op, "getPrefix") == 0 ||
                              ((strcmp(op, "put") == 0 || strcmp(op, "delete") == 0) && !has_expect));
    }
    jd_free(a);
    return safe;
}

/* The batch route answers {"results":[...]}; the caller gets the array's
 * text byte for byte, as libqueen's queen_kv_apply returns it. */
static int batch_results(client_reply *r, char **results_json, queen_client_error *err)
{
    if (client_kv_verdict(r->body, r->len, err)) {
        free(r->body);
        return -1;
    }
    jd *o = jd_parse(r->body, r->len, NULL, 0);
    const jd *results = jd_get(o, "results");
    char *t = results != NULL && results->type == JD_ARRAY ? jd_text(results) : NULL;
    bool shaped = results != NULL && results->type == JD_ARRAY;
    jd_free(o);
    free(r->body);
    if (!shaped) {
        client_error_set(err, (int)r->status, "bad_response", "a kv batch answered without results");
        return -1;
    }
    if (t == NULL)
        return client_oom(err);
    if (results_json != NULL)
        *results_json = t;
    else
        free(t);
    return 0;
}

int queen_client_kv_apply(queen_client *c, const char *tenant, const char *ops_json, char **results_json,
                          queen_client_error *err)
{
    client_request rq = {.method = "POST", .path = "/api/v1/kv", .body = ops_json != NULL ? ops_json : "null",
                         .tenant = tenant, .safe = ops_json != NULL && ops_repeatable(ops_json)};
    client_reply r;
    if (client_call(c, &rq, &r, err) != 0)
        return -1;
    return batch_results(&r, results_json, err);
}

/* A one-op batch; the result is its only element. */
static int one_op(queen_client *c, const char *tenant, jbuf *op, bool safe, char **result_json,
                  queen_client_error *err)
{
    jbuf body = {0};
    jbuf_add(&body, "[");
    if (op->s != NULL)
        jbuf_raw(&body, op->s, op->len);
    jbuf_add(&body, "]");
    jbuf_free(op);
    char *text = jbuf_take(&body);
    if (text == NULL)
        return client_oom(err);
    client_request rq = {.method = "POST", .path = "/api/v1/kv", .body = text, .tenant = tenant, .safe = safe};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(text);
    char *results = NULL;
    if (rc != 0 || batch_results(&r, &results, err) != 0)
        return -1;
    jd *a = jd_parse(results, strlen(results), NULL, 0);
    const jd *el = jd_at(a, 0);
    char *t = jd_text(el);
    jd_free(a);
    free(results);
    if (el == NULL) {
        client_error_set(err, 200, "bad_response", "a one-op batch answered no element");
        return -1;
    }
    if (t == NULL)
        return client_oom(err);
    if (result_json != NULL)
        *result_json = t;
    else
        free(t);
    return 0;
}

static void op_head(jbuf *b, const char *op, const char *ns, const char *key)
{
    jbuf_add(b, "{\"op\":");
    jbuf_str(b, op);
    jbuf_add(b, ",\"ns\":");
    jbuf_str(b, ns);
    if (key != NULL) {
        jbuf_add(b, ",\"key\":");
        jbuf_str(b, key);
    }
}

int queen_client_kv_get(queen_client *c, const char *tenant, const char *ns, const char *key, char **result_json,
                        queen_client_error *err)
{
    char *path = key_path(ns, key);
    if (path == NULL)
        return client_oom(err);
    client_request rq = {.method = "GET", .path = path, .tenant = tenant, .safe = true};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(path);
    return rc != 0 ? -1 : kv_finish(&r, result_json, err);
}

int queen_client_kv_put(queen_client *c, const char *tenant, const char *ns, const char *key, const char *value_json,
                        long ttl_seconds, long long expect, bool required, char **result_json,
                        queen_client_error *err)
{
    char *path = key_path(ns, key);
    jbuf b = {0};
    jbuf_add(&b, "{");
    if (value_json != NULL) {
        jbuf_add(&b, "\"value\":");
        jbuf_add(&b, value_json);
    } else {
        jbuf_add(&b, "\"value\":null");
    }
    if (add_expiry(&b, ttl_seconds, err) != 0) {
        free(path);
        return -1;
    }
    if (expect >= 0)
        jbuf_printf(&b, ",\"expect\":%lld", expect);
    if (required)
        jbuf_add(&b, ",\"required\":true");
    jbuf_add(&b, "}");
    char *body = jbuf_take(&b);
    if (path == NULL || body == NULL) {
        free(path);
        free(body);
        return client_oom(err);
    }
    client_request rq = {.method = "PUT", .path = path, .body = body, .tenant = tenant, .safe = expect < 0};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(path);
    free(body);
    return rc != 0 ? -1 : kv_finish(&r, result_json, err);
}

/* The wire ops the one-op calls and the transaction builder share: a put or
 * putIfAbsent, a delete, an incr, closed; -1 (op freed, err filled) for an
 * expiry that is not exactly one. */
static int op_write(jbuf *op, const char *name, const char *ns, const char *key, const char *value_json,
                    long ttl_seconds, long long expect, bool required, queen_client_error *err)
{
    op_head(op, name, ns, key);
    jbuf_add(op, ",\"value\":");
    jbuf_add(op, value_json != NULL ? value_json : "null");
    if (add_expiry(op, ttl_seconds, err) != 0)
        return -1;
    if (expect >= 0)
        jbuf_printf(op, ",\"expect\":%lld", expect);
    if (required)
        jbuf_add(op, ",\"required\":true");
    jbuf_add(op, "}");
    return 0;
}

static int op_incr(jbuf *op, const char *ns, const char *key, double delta, const double *min, const double *max,
                   long ttl_seconds, bool required, queen_client_error *err)
{
    op_head(op, "incr", ns, key);
    jbuf_add(op, ",\"delta\":");
    jbuf_double(op, delta);
    if (min != NULL) {
        jbuf_add(op, ",\"min\":");
        jbuf_double(op, *min);
    }
    if (max != NULL) {
        jbuf_add(op, ",\"max\":");
        jbuf_double(op, *max);
    }
    if (add_expiry(op, ttl_seconds, err) != 0)
        return -1;
    if (required)
        jbuf_add(op, ",\"required\":true");
    jbuf_add(op, "}");
    return 0;
}

int queen_client_kv_put_if_absent(queen_client *c, const char *tenant, const char *ns, const char *key,
                                  const char *value_json, long ttl_seconds, bool required, char **result_json,
                                  queen_client_error *err)
{
    jbuf op = {0};
    if (op_write(&op, "putIfAbsent", ns, key, value_json, ttl_seconds, -1, required, err) != 0)
        return -1;
    return one_op(c, tenant, &op, false, result_json, err);
}

int queen_client_kv_delete(queen_client *c, const char *tenant, const char *ns, const char *key, long long expect,
                           bool required, char **result_json, queen_client_error *err)
{
    char *path = key_path(ns, key);
    jbuf b = {0};
    if (expect >= 0 || required) {
        jbuf_add(&b, "{");
        if (expect >= 0)
            jbuf_printf(&b, "\"expect\":%lld", expect);
        if (required)
            jbuf_add(&b, expect >= 0 ? ",\"required\":true" : "\"required\":true");
        jbuf_add(&b, "}");
    }
    char *body = b.len > 0 ? jbuf_take(&b) : NULL;
    if (path == NULL || (b.oom && body == NULL)) {
        free(path);
        jbuf_free(&b);
        return client_oom(err);
    }
    client_request rq = {.method = "DELETE", .path = path, .body = body, .tenant = tenant, .safe = expect < 0};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(path);
    free(body);
    return rc != 0 ? -1 : kv_finish(&r, result_json, err);
}

int queen_client_kv_incr(queen_client *c, const char *tenant, const char *ns, const char *key, double delta,
                         const double *min, const double *max, long ttl_seconds, bool required, char **result_json,
                         queen_client_error *err)
{
    jbuf op = {0};
    if (op_incr(&op, ns, key, delta, min, max, ttl_seconds, required, err) != 0)
        return -1;
    return one_op(c, tenant, &op, false, result_json, err);
}

/* ---- the transaction builder's typed kv ops ---------------------------------- */

static int tx_add(queen_client_tx *tx, jbuf *op, queen_client_error *err)
{
    char *text = jbuf_take(op);
    int rc = text != NULL ? queen_client_tx_kv(tx, text) : -1;
    free(text);
    return rc != 0 ? client_oom(err) : 0;
}

int queen_client_tx_kv_put(queen_client_tx *tx, const char *ns, const char *key, const char *value_json,
                           long ttl_seconds, long long expect, bool required, queen_client_error *err)
{
    jbuf op = {0};
    if (op_write(&op, "put", ns, key, value_json, ttl_seconds, expect, required, err) != 0)
        return -1;
    return tx_add(tx, &op, err);
}

int queen_client_tx_kv_put_if_absent(queen_client_tx *tx, const char *ns, const char *key, const char *value_json,
                                     long ttl_seconds, bool required, queen_client_error *err)
{
    jbuf op = {0};
    if (op_write(&op, "putIfAbsent", ns, key, value_json, ttl_seconds, -1, required, err) != 0)
        return -1;
    return tx_add(tx, &op, err);
}

int queen_client_tx_kv_delete(queen_client_tx *tx, const char *ns, const char *key, long long expect, bool required,
                              queen_client_error *err)
{
    jbuf op = {0};
    op_head(&op, "delete", ns, key);
    if (expect >= 0)
        jbuf_printf(&op, ",\"expect\":%lld", expect);
    if (required)
        jbuf_add(&op, ",\"required\":true");
    jbuf_add(&op, "}");
    return tx_add(tx, &op, err);
}

int queen_client_tx_kv_incr(queen_client_tx *tx, const char *ns, const char *key, double delta, const double *min,
                            const double *max, long ttl_seconds, bool required, queen_client_error *err)
{
    jbuf op = {0};
    if (op_incr(&op, ns, key, delta, min, max, ttl_seconds, required, err) != 0)
        return -1;
    return tx_add(tx, &op, err);
}

int queen_client_kv_get_many(queen_client *c, const char *tenant, const char *ns, const char *const *keys,
                             size_t nkeys, char **result_json, queen_client_error *err)
{
    jbuf op = {0};
    op_head(&op, "getMany", ns, NULL);
    jbuf_add(&op, ",\"keys\":[");
    for (size_t i = 0; i < nkeys; i++) {
        if (i > 0)
            jbuf_add(&op, ",");
        jbuf_str(&op, keys[i]);
    }
    jbuf_add(&op, "]}");
    return one_op(c, tenant, &op, true, result_json, err);
}

int queen_client_kv_get_prefix(queen_client *c, const char *tenant, const char *ns, const char *prefix,
                               const char *after, int limit, bool keys_only, char **result_json,
                               queen_client_error *err)
{
    jbuf op = {0};
    op_head(&op, "getPrefix", ns, NULL);
    jbuf_add(&op, ",\"prefix\":");
    jbuf_str(&op, prefix);
    if (after != NULL) {
        jbuf_add(&op, ",\"after\":");
        jbuf_str(&op, after);
    }
    if (limit != 0)
        jbuf_printf(&op, ",\"limit\":%d", limit);
    if (keys_only)
        jbuf_add(&op, ",\"keysOnly\":true");
    jbuf_add(&op, "}");
    return one_op(c, tenant, &op, true, result_json, err);
}

int queen_client_kv_scan(queen_client *c, const char *tenant, const char *ns, const char *prefix, int page_limit,
                         bool keys_only, queen_client_row_fn row_fn, void *ctx, queen_client_error *err)
{
    char *after = NULL;
    int pages = 0;
    for (;;) {
        char *page_text = NULL;
        if (queen_client_kv_get_prefix(c, tenant, ns, prefix, after, page_limit, keys_only, &page_text, err) != 0) {
            free(after);
            return -1;
        }
        pages++;
        jd *page = jd_parse(page_text, strlen(page_text), NULL, 0);
        free(page_text);
        const jd *rows = jd_get(page, "rows");
        if (rows == NULL || rows->type != JD_ARRAY) {
            jd_free(page);
            free(after);
            client_error_set(err, 200, "bad_response", "a getPrefix page without rows");
            return -1;
        }
        int stop = 0;
        for (size_t i = 0; i < rows->n && stop == 0; i++) {
            char *row = jd_text(rows->items[i]);
            if (row == NULL) {
                jd_free(page);
                free(after);
                return client_oom(err);
            }
            stop = row_fn != NULL ? row_fn(ctx, row) : 0;
            free(row);
        }
        const char *next = jd_str(page, "nextAfter");
        bool more = jd_true(page, "truncated") && next != NULL && stop == 0;
        free(after);
        after = more ? strdup(next) : NULL;
        jd_free(page);
        if (!more)
            return pages;
        if (after == NULL)
            return client_oom(err);
    }
}

int queen_client_kv_list(queen_client *c, const char *tenant, const char *ns, const char *prefix, const char *after,
                         int limit, bool keys_only, bool include_expired, char **result_json,
                         queen_client_error *err)
{
    jbuf b = {0};
    jbuf_add(&b, "{\"namespace\":");
    jbuf_str(&b, ns);
    if (prefix != NULL) {
        jbuf_add(&b, ",\"prefix\":");
        jbuf_str(&b, prefix);
    }
    if (after != NULL) {
        jbuf_add(&b, ",\"after\":");
        jbuf_str(&b, after);
    }
    if (limit != 0)
        jbuf_printf(&b, ",\"limit\":%d", limit);
    jbuf_printf(&b, ",\"keysOnly\":%s,\"includeExpired\":%s}", keys_only ? "true" : "false",
                include_expired ? "true" : "false");
    char *body = jbuf_take(&b);
    if (body == NULL)
        return client_oom(err);
    client_request rq = {.method = "POST", .path = "/api/v1/resources/kv/list", .body = body, .tenant = tenant,
                         .safe = true};
    client_reply r;
    int rc = client_call(c, &rq, &r, err);
    free(body);
    return rc != 0 ? -1 : kv_finish(&r, result_json, err);
}

int queen_client_kv_namespaces(queen_client *c, const char *tenant, char **result_json, queen_client_error *err)
{
    client_request rq = {.method = "GET", .path = "/api/v1/resources/kv/namespaces", .tenant = tenant, .safe = true};
    client_reply r;
    if (client_call(c, &rq, &r, err) != 0)
        return -1;
    return kv_finish(&r, result_json, err);
}
