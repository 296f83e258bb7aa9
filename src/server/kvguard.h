/* kvguard: the edge guards on KV input, checked before a database
 * connection is taken (README.md, HTTP API > KV). SQL enforces the same
 * budgets again (the floor stays); the edge refuses early and cheaply, with
 * the same opaque reasons SQL uses, so a client sees one vocabulary.
 * Pure: jansson values and raw spans in, a queen_error out. */
#ifndef QUEEN_KVGUARD_H
#define QUEEN_KVGUARD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "queen.h"
#include "rawjson.h"

typedef struct kv_limits {
    int max_ops;
    int max_keys;         /* summed over ops: getMany its keys, getPrefix its clamped limit, others 1 */
    int max_value_bytes;  /* of one value's raw JSON, as sent */
    int max_key_bytes;
    bool in_wire;         /* the transaction's kv array: getPrefix refused */
} kv_limits;

/* The configured limits; in_wire also caps at the wire's SQL budgets (64 ops,
 * 256 keys). */
kv_limits kv_limits_from(const queen_config *cfg, bool in_wire);

/* One key (or getPrefix prefix) of len bytes: a NUL is kv_bad_key (400),
 * more than max_key_bytes is kv_key_too_large (413). 0, or -1 with *why. */
int kv_guard_key(const char *key, size_t len, const kv_limits *lim, queen_error *why);

/* A namespace: only the NUL check (SQL owns the name pattern). */
int kv_guard_ns(const char *ns, size_t len, queen_error *why);

/* Every guard over an ops array: ops is the parsed array, raw the same
 * array's text (value sizes are measured there). Reasons: kv_bad_request
 * (not an array, an op not an object), kv_too_many_ops, kv_too_many_keys,
 * kv_tenant_not_an_input, kv_get_prefix_not_allowed_in_transaction,
 * kv_bad_namespace / kv_bad_key (NUL), kv_key_too_large, kv_value_too_large.
 * 0, or -1 with *why (category BAD_REQUEST or TOO_LARGE). */
int kv_guard_ops(const json_t *ops, rawjson_span raw, const kv_limits *lim, queen_error *why);

#endif
