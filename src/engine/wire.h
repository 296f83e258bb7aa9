/* wire: the transaction bundle (queen_transaction in queen.h). This header
 * exposes the pure parts (pre-flight, failure mapping) for unit tests. */
#ifndef QUEEN_WIRE_H
#define QUEEN_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "queen.h"

/* In the wire: at most 64 kv ops and 256 keys, no getPrefix (kv_apply_v1
 * enforces the same, this is the 400 before a connection is taken). */
#define WIRE_MAX_KV_OPS 64
#define WIRE_MAX_KV_KEYS 256

typedef struct wire_plan {
    bool kv_only;         /* no operations, no requiredLeases, kv non-empty */
    int flat_before_kv;   /* push items + acks: the flat index of kv[0] */
    int kv_ops;
} wire_plan;

/* Checks what must be refused with 400 before SQL: not JSON, not an object,
 * a tenant in the body, an operation of type kv, operations/kv not arrays,
 * neither present, a kv op that is not an object, carries a tenant, is
 * getPrefix, more than 64 kv ops or 256 keys. Fills plan. Returns 0, or -1
 * with err (category BAD_REQUEST, reason an opaque code). Pure. */
int wire_preflight(const char *bundle_json, wire_plan *plan, queen_error *err);

/* The failure body's reason for an error the wire raised, from (SQLSTATE,
 * message) as docs/sql-log.md tabulates it. *retryable says whether the
 * same bundle may succeed later (serialization, deadlock, connection,
 * operator intervention classes). Pure. */
const char *wire_failure_reason(const char *sqlstate, const char *message, bool *retryable);

/* Renders the 200 failure body {"transactionId","success":false,"reason",
 * "error","results":[]} for err (as filled by queen_error_from_fields), with
 * failedIndex/kvReason/version/value for kv_precondition. txid: the id to
 * report. Returns malloc'd text (caller frees) or NULL when out of memory. */
char *wire_failure_body(const char *txid, const queen_error *err, int flat_before_kv);

/* A random (version 4) uuid, lower-case, into out[37]. */
void wire_uuid4(char out[37]);

/* true when s is a canonical uuid text (8-4-4-4-12 hex digits). */
bool wire_is_uuid(const char *s);

#endif
