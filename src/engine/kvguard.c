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
    const input_limits *sql = input_limits_get();
    kv_limits lim = {
        .max_ops = min_int(cfg->kv_max_ops_per_call, in_wire ? sql->wire_max_kv_ops : sql->kv_max_ops),
        .max_keys = min_int(cfg->kv_max_keys_per_call, in_wire ? sql->wire_max_kv_keys : sql->kv_max_keys),
        .max_value_bytes = cfg->kv_max_value_bytes,
        .max_key_bytes = min_int(cfg->kv_max_key_bytes, sql->kv_max_key_bytes),
        .page_default = sql->page_default,
        .page_max = sql->page_max,
        .in_wire = in_wire,
    };
    return lim;
}

static int too_large_key(size_t bytes, const kv_limits *lim, queen_error *err)
{
    queen_error_set(err, QUEEN_ERR_TOO_LARGE, "kv_key_too_large", "a key is %zu bytes, the limit is %d", bytes,
                    lim->max_key_bytes);
    return -1;
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
static long prefix_keys(rawjson_span op, const kv_limits *lim)
{
    rawjson_span limit;
    if (!rawjson_member(op, "limit", &limit) || limit.len == 0 || limit.len > 30 ||
        !(limit.p[0] == '-' || (limit.p[0] >= '0' && limit.p[0] <= '9')))
        return lim->page_default;
    char buf[32];
    memcpy(buf, limit.p, limit.len);
    buf[limit.len] = '\0';
    double l = strtod(buf, NULL);
    return l < 1 ? 1 : l > lim->page_max ? lim->page_max : (long)l;
}

/* The members and op names the guard tells apart. */
enum member { M_OTHER, M_TENANT, M_OP, M_NS, M_KEY, M_PREFIX, M_KEYS, M_VALUE };
enum kind { K_OTHER, K_GET, K_GET_MANY, K_GET_PREFIX, K_PUT, K_PUT_IF_ABSENT, K_INCR, K_DELETE };

static const struct name_row {
    const char *name;
    int value;
} member_names[] = {{"op", M_OP},     {"ns", M_NS},       {"key", M_KEY},
                    {"prefix", M_PREFIX}, {"keys", M_KEYS}, {"value", M_VALUE}},
  kind_names[] = {{"get", K_GET},       {"getMany", K_GET_MANY}, {"getPrefix", K_GET_PREFIX}, {"put", K_PUT},
                  {"putIfAbsent", K_PUT_IF_ABSENT}, {"incr", K_INCR}, {"delete", K_DELETE}};

/* Which row a raw string token names, as SQL will read it (escapes
 * decoded); fallback when none or when the token is not a string. Most
 * tokens hold no escape and are compared as bytes: this runs for every
 * member of every op. */
static bool token_is(rawjson_span token, bool escaped, const char *name)
{
    size_t len = token.len - 2;
    return escaped ? rawjson_key_is(token, name) : strlen(name) == len && memcmp(name, token.p + 1, len) == 0;
}

static int lookup(rawjson_span token, const struct name_row *rows, size_t n, int fallback)
{
    static const char *const tenant_fields[] = QUEEN_TENANT_FIELDS;
    if (token.len < 2 || token.p[0] != '"')
        return fallback;
    bool escaped = memchr(token.p + 1, '\\', token.len - 2) != NULL;
    for (size_t i = 0; i < n; i++)
        if (token_is(token, escaped, rows[i].name))
            return rows[i].value;
    if (rows == member_names)
        for (size_t i = 0; i < sizeof tenant_fields / sizeof tenant_fields[0]; i++)
            if (token_is(token, escaped, tenant_fields[i]))
                return M_TENANT;
    return fallback;
}

int kv_guard_ops(rawjson_span ops, const kv_limits *lim, kv_demand *d, queen_error *err)
{
    kv_demand none;
    if (d == NULL)
        d = &none;
    *d = (kv_demand){0, 0, 0, 0, 0};
    rawjson_iter it;
    if (!rawjson_open(&it, ops, '[')) {
        queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "ops must be a JSON array");
        return -1;
    }
    rawjson_span op;
    long keys = 0, i;
    for (i = 0; rawjson_next(&it, NULL, &op); i++) {
        /* Counted on the way, not in a pass of its own (it would read every
         * value twice): a call with too many ops whose first ones are also
         * malformed is refused for those, where SQL would name the count
         * first; either way a 4xx and nothing written. */
        if (i == lim->max_ops) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_too_many_ops", "%ld ops in one call, the limit is %d",
                            rawjson_array_count(ops), lim->max_ops);
            return -1;
        }
        rawjson_iter members;
        if (!rawjson_open(&members, op, '{')) {
            queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_bad_request", "op %ld is not a JSON object", i);
            return -1;
        }
        rawjson_span ns = {NULL, 0}, key = {NULL, 0}, prefix = {NULL, 0}, many = {NULL, 0}, value = {NULL, 0}, name,
                     v;
        int kind = K_OTHER;
        bool has_value = false;
        while (rawjson_next(&members, &name, &v)) {
            switch (lookup(name, member_names, sizeof member_names / sizeof member_names[0], M_OTHER)) {
            case M_TENANT:
                queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "kv_tenant_not_an_input",
                                "op %ld carries a tenant field; the tenant comes from the request", i);
                return -1;
            case M_OP:
                kind = lookup(v, kind_names, sizeof kind_names / sizeof kind_names[0], K_OTHER);
                break;
            case M_NS:
                ns = v;
                break;
            case M_KEY:
                key = v;
                break;
            case M_PREFIX:
                prefix = v;
                break;
            case M_KEYS:
                many = v;
                break;
            case M_VALUE:
                value = v;
                has_value = true;
                break;
            }
        }
        if (lim->in_wire && kind == K_GET_PREFIX) {
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
        if (kind == K_GET_MANY) {
            rawjson_iter ks;
            rawjson_span k;
            op_keys = 0;
            if (rawjson_open(&ks, many, '['))
                while (rawjson_next(&ks, NULL, &k)) {
                    if (kv_guard_key_token(k, lim, err) != 0)
                        return -1;
                    op_keys++;
                }
        } else if (kind == K_GET_PREFIX) {
            op_keys = prefix_keys(op, lim);
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
        if (kind == K_GET || kind == K_GET_MANY || kind == K_GET_PREFIX) {
            d->reads++;
        } else if (kind == K_PUT || kind == K_PUT_IF_ABSENT || kind == K_INCR) {
            d->writes++;
            d->creating++;
            d->bytes += has_value ? (long)value.len : 8; /* incr: a number */
        } else if (kind == K_DELETE) {
            d->writes++;
        }
    }
    d->ops = (int)i;
    return 0;
}
