/* kvguard: edge guards on KV input (see kvguard.h). Never calls the engine:
 * a refusal here costs no connection and writes nothing. */
#include "kvguard.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int refuse(queen_error *why, queen_error_category cat, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(queen_error *why, queen_error_category cat, const char *reason, const char *fmt, ...)
{
    memset(why, 0, sizeof *why);
    why->category = cat;
    snprintf(why->reason, sizeof why->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->detail, sizeof why->detail, fmt, ap);
    va_end(ap);
    return -1;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

kv_limits kv_limits_from(const queen_config *cfg, bool in_wire)
{
    kv_limits lim = {
        .max_ops = cfg->kv_max_ops_per_call,
        .max_keys = cfg->kv_max_keys_per_call,
        .max_value_bytes = cfg->kv_max_value_bytes,
        .max_key_bytes = cfg->kv_max_key_bytes,
        .in_wire = in_wire,
    };
    if (in_wire) {
        lim.max_ops = min_int(lim.max_ops, 64);
        lim.max_keys = min_int(lim.max_keys, 256);
    }
    return lim;
}

int kv_guard_key(const char *key, size_t len, const kv_limits *lim, queen_error *why)
{
    if (memchr(key, '\0', len) != NULL)
        return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_bad_key", "a key may not hold a NUL byte");
    if (len > (size_t)lim->max_key_bytes)
        return refuse(why, QUEEN_ERR_TOO_LARGE, "kv_key_too_large", "a key is %zu bytes, the limit is %d", len,
                      lim->max_key_bytes);
    return 0;
}

int kv_guard_ns(const char *ns, size_t len, queen_error *why)
{
    if (memchr(ns, '\0', len) != NULL)
        return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_bad_namespace", "a namespace may not hold a NUL byte");
    return 0;
}

/* A string member of an op, checked as a key; absent or not a string is
 * left to SQL, which names the exact shape error. */
static int guard_string_key(const json_t *v, const kv_limits *lim, queen_error *why)
{
    if (!json_is_string(v))
        return 0;
    return kv_guard_key(json_string_value(v), json_string_length(v), lim, why);
}

/* The keys an op counts against the per-call budget, as SQL counts them. */
static long op_keys(const char *kind, const json_t *op)
{
    if (strcmp(kind, "getMany") == 0) {
        const json_t *keys = json_object_get(op, "keys");
        return json_is_array(keys) ? (long)json_array_size(keys) : 0;
    }
    if (strcmp(kind, "getPrefix") == 0) {
        const json_t *limit = json_object_get(op, "limit");
        if (!json_is_number(limit))
            return 100;
        double l = json_number_value(limit);
        return l < 1 ? 1 : l > 1000 ? 1000 : (long)l;
    }
    return 1;
}

int kv_guard_ops(const json_t *ops, rawjson_span raw, const kv_limits *lim, queen_error *why)
{
    if (!json_is_array(ops))
        return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "ops must be a JSON array");
    size_t n = json_array_size(ops);
    if (n > (size_t)lim->max_ops)
        return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_too_many_ops", "%zu ops in one call, the limit is %d", n,
                      lim->max_ops);
    rawjson_iter it;
    if (!rawjson_open(&it, raw, '['))
        return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "ops must be a JSON array");
    long keys = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *op = json_array_get(ops, i);
        rawjson_span op_raw;
        if (!rawjson_next(&it, NULL, &op_raw) || !json_is_object(op))
            return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "op %zu is not a JSON object", i);
        if (json_object_get(op, "tenant") || json_object_get(op, "tenantId") || json_object_get(op, "_tenant"))
            return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_tenant_not_an_input",
                          "op %zu carries a tenant field; the tenant comes from the request", i);
        const char *kind = json_string_value(json_object_get(op, "op"));
        if (kind == NULL)
            kind = "";
        if (lim->in_wire && strcmp(kind, "getPrefix") == 0)
            return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_get_prefix_not_allowed_in_transaction",
                          "op %zu: getPrefix is not allowed in a transaction bundle", i);
        const json_t *ns = json_object_get(op, "ns");
        if (json_is_string(ns) && kv_guard_ns(json_string_value(ns), json_string_length(ns), why) != 0)
            return -1;
        if (guard_string_key(json_object_get(op, "key"), lim, why) != 0 ||
            guard_string_key(json_object_get(op, "prefix"), lim, why) != 0)
            return -1;
        const json_t *many = json_object_get(op, "keys");
        if (strcmp(kind, "getMany") == 0 && json_is_array(many)) {
            size_t j;
            const json_t *k;
            json_array_foreach(many, j, k)
            {
                if (guard_string_key(k, lim, why) != 0)
                    return -1;
            }
        }
        keys += op_keys(kind, op);
        if (keys > lim->max_keys)
            return refuse(why, QUEEN_ERR_BAD_REQUEST, "kv_too_many_keys", "more than %d keys in one call (at op %zu)",
                          lim->max_keys, i);
        rawjson_span value;
        if (rawjson_member(op_raw, "value", &value) && value.len > (size_t)lim->max_value_bytes)
            return refuse(why, QUEEN_ERR_TOO_LARGE, "kv_value_too_large",
                          "op %zu: value is %zu bytes of JSON text, the limit is %d", i, value.len,
                          lim->max_value_bytes);
    }
    return 0;
}
