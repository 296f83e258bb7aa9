/* kvguard: see kvguard.h. A refusal here costs no connection and writes
 * nothing. */
#include "kvguard.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "input_limits.h"

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

kv_limits kv_limits_from(const queen_config *cfg, bool in_wire)
{
    kv_limits lim = {
        .max_ops = min_int(cfg->kv_max_ops_per_call, QUEEN_KV_MAX_OPS),
        .max_keys = min_int(cfg->kv_max_keys_per_call, QUEEN_KV_MAX_KEYS),
        .max_value_bytes = cfg->kv_max_value_bytes,
        .max_key_bytes = min_int(cfg->kv_max_key_bytes, QUEEN_KV_MAX_KEY_BYTES),
        .in_wire = in_wire,
    };
    if (in_wire) {
        lim.max_ops = min_int(lim.max_ops, QUEEN_WIRE_MAX_KV_OPS);
        lim.max_keys = min_int(lim.max_keys, QUEEN_WIRE_MAX_KV_KEYS);
    }
    return lim;
}

static int too_large_key(size_t bytes, const kv_limits *lim, queen_error *err)
{
    queen_error_set(err, QUEEN_ERR_TOO_LARGE, "kv_key_too_large", "a key is %zu bytes, the limit is %d", bytes,
                    lim->max_key_bytes);
    return -1;
}

int kv_guard_key(const char *key, size_t len, const kv_limits *lim, queen_error *err)
{
    if (memchr(key, '\0', len) != NULL) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_key", "a key may not hold a NUL byte");
        return -1;
    }
    return len > (size_t)lim->max_key_bytes ? too_large_key(len, lim, err) : 0;
}

int kv_guard_key_token(rawjson_span token, const kv_limits *lim, queen_error *err)
{
    size_t bytes;
    bool nul;
    if (!rawjson_string_info(token, &bytes, &nul))
        return 0;
    if (nul) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_key", "a key may not hold a NUL byte");
        return -1;
    }
    return bytes > (size_t)lim->max_key_bytes ? too_large_key(bytes, lim, err) : 0;
}

/* getPrefix counts its limit clamped as SQL clamps it (absent or not a
 * number: the default page). */
static long prefix_keys(rawjson_span op)
{
    rawjson_span limit;
    if (!rawjson_member(op, "limit", &limit) || limit.len == 0 || limit.len > 30 ||
        !(limit.p[0] == '-' || (limit.p[0] >= '0' && limit.p[0] <= '9')))
        return QUEEN_KV_PAGE_DEFAULT;
    char buf[32];
    memcpy(buf, limit.p, limit.len);
    buf[limit.len] = '\0';
    double l = strtod(buf, NULL);
    return l < 1 ? 1 : l > QUEEN_KV_PAGE_MAX ? QUEEN_KV_PAGE_MAX : (long)l;
}

static bool kind_is(rawjson_span kind, const char *name)
{
    return kind.len > 0 && rawjson_key_is(kind, name);
}

int kv_guard_ops(rawjson_span ops, const kv_limits *lim, kv_demand *d, queen_error *err)
{
    static const char *const tenant_fields[] = QUEEN_TENANT_FIELDS;
    kv_demand none;
    if (d == NULL)
        d = &none;
    *d = (kv_demand){0, 0, 0, 0};
    long n = rawjson_array_count(ops);
    if (n < 0) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "ops must be a JSON array");
        return -1;
    }
    /* The count first, as SQL does: a call over budget is refused whole
     * before any op is looked at. */
    if (n > lim->max_ops) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_too_many_ops", "%ld ops in one call, the limit is %d", n,
                        lim->max_ops);
        return -1;
    }
    rawjson_iter it;
    rawjson_open(&it, ops, '[');
    rawjson_span op;
    long keys = 0;
    for (long i = 0; rawjson_next(&it, NULL, &op); i++) {
        rawjson_iter members;
        if (!rawjson_open(&members, op, '{')) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "op %ld is not a JSON object", i);
            return -1;
        }
        rawjson_span kind = {NULL, 0}, ns = {NULL, 0}, key = {NULL, 0}, prefix = {NULL, 0}, many = {NULL, 0},
                     value = {NULL, 0}, name, v;
        bool has_value = false;
        while (rawjson_next(&members, &name, &v)) {
            for (size_t t = 0; t < sizeof tenant_fields / sizeof tenant_fields[0]; t++) {
                if (rawjson_key_is(name, tenant_fields[t])) {
                    queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_tenant_not_an_input",
                                    "op %ld carries a tenant field; the tenant comes from the request", i);
                    return -1;
                }
            }
            if (rawjson_key_is(name, "op"))
                kind = v;
            else if (rawjson_key_is(name, "ns"))
                ns = v;
            else if (rawjson_key_is(name, "key"))
                key = v;
            else if (rawjson_key_is(name, "prefix"))
                prefix = v;
            else if (rawjson_key_is(name, "keys"))
                many = v;
            else if (rawjson_key_is(name, "value")) {
                value = v;
                has_value = true;
            }
        }
        if (lim->in_wire && kind_is(kind, "getPrefix")) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_get_prefix_not_allowed_in_transaction",
                            "op %ld: getPrefix is not allowed in a transaction bundle", i);
            return -1;
        }
        size_t bytes;
        bool nul;
        if (ns.len > 0 && rawjson_string_info(ns, &bytes, &nul) && nul) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_namespace", "a namespace may not hold a NUL byte");
            return -1;
        }
        if (kv_guard_key_token(key, lim, err) != 0 || kv_guard_key_token(prefix, lim, err) != 0)
            return -1;
        long op_keys = 1;
        if (kind_is(kind, "getMany")) {
            rawjson_iter ks;
            rawjson_span k;
            op_keys = 0;
            if (rawjson_open(&ks, many, '['))
                while (rawjson_next(&ks, NULL, &k)) {
                    if (kv_guard_key_token(k, lim, err) != 0)
                        return -1;
                    op_keys++;
                }
        } else if (kind_is(kind, "getPrefix")) {
            op_keys = prefix_keys(op);
        }
        keys += op_keys;
        if (keys > lim->max_keys) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_too_many_keys", "more than %d keys in one call (at op %ld)",
                            lim->max_keys, i);
            return -1;
        }
        if (has_value && value.len > (size_t)lim->max_value_bytes) {
            queen_error_set(err, QUEEN_ERR_TOO_LARGE, "kv_value_too_large",
                            "op %ld: value is %zu bytes of JSON text, the limit is %d", i, value.len,
                            lim->max_value_bytes);
            return -1;
        }
        if (kind_is(kind, "get") || kind_is(kind, "getMany") || kind_is(kind, "getPrefix")) {
            d->reads++;
        } else if (kind_is(kind, "put") || kind_is(kind, "putIfAbsent") || kind_is(kind, "incr")) {
            d->writes++;
            d->creating++;
            d->bytes += has_value ? (long)value.len : 8; /* incr: a number */
        } else if (kind_is(kind, "delete")) {
            d->writes++;
        }
    }
    return 0;
}
