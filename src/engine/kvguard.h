/* kvguard: the judge of a kv call's input before a connection is taken:
 * the budgets (sql/limits.sql's, read by input_limits.h; the configured
 * guards clamped to them), names that SQL could
 * not carry (a NUL), tenants in ops, getPrefix in a transaction; and, in the
 * same pass, what the call asks of the tenant's quota (kv_demand). SQL
 * judges the same again and everything else about an op's shape; this
 * refuses early with SQL's own reasons, so a caller sees one vocabulary.
 * Pure: raw JSON text in (never re-rendered: values stay byte for byte). */
#ifndef QUEEN_KVGUARD_H
#define QUEEN_KVGUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "queen.h"
#include "rawjson.h"

typedef struct kv_limits {
    int max_ops;
    int max_keys; /* summed over ops: getMany its keys, getPrefix its clamped limit, others 1 */
    int max_value_bytes; /* of one value's raw JSON, as sent */
    int max_key_bytes;
    int page_default, page_max; /* getPrefix's page, as SQL clamps it */
    bool in_wire; /* the transaction's kv array: getPrefix refused */
} kv_limits;

/* The configured guards clamped to the SQL budgets (input_limits.h);
 * in_wire takes the transaction's. */
kv_limits kv_limits_from(const queen_config *cfg, bool in_wire);

/* What one call asks of the tenant's quota: get/getMany/getPrefix one read
 * each; put/putIfAbsent/incr one write, one possible new row (only SQL
 * knows whether the key exists) and their value's raw bytes (incr: 8);
 * delete one write. An unknown op counts nothing (SQL refuses it). */
typedef struct kv_demand {
    int reads, writes, creating;
    long bytes;
    int ops; /* the call's ops, counted on the way */
} kv_demand;

/* One key (or prefix) as a raw JSON string token: a NUL is kv_bad_key
 * (400), more than max_key_bytes decoded is kv_key_too_large (413). A token
 * that is not a string is left to SQL. 0, or -1 with err. */
int kv_guard_key_token(rawjson_span token, const kv_limits *lim, queen_error *err);

/* Every guard over a raw ops array, and its demand (d may be NULL).
 * Reasons: kv_bad_request (not an array, an op not an object),
 * kv_too_many_ops, kv_too_many_keys, kv_tenant_not_an_input,
 * kv_get_prefix_not_allowed_in_transaction, kv_bad_namespace / kv_bad_key
 * (NUL), kv_key_too_large, kv_value_too_large. 0, or -1 with err (category
 * BAD_REQUEST or TOO_LARGE). */
int kv_guard_ops(rawjson_span ops, const kv_limits *lim, kv_demand *d, queen_error *err);

#endif
