/* wire: the transaction bundle (queen_transaction in queen.h). This header
 * exposes the pure parts (pre-flight, failure mapping) for unit tests. */
#ifndef QUEEN_WIRE_H
#define QUEEN_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "kvguard.h"
#include "queen.h"

typedef struct wire_plan {
    bool kv_only;        /* no operations, no requiredLeases, kv non-empty */
    bool has_push;       /* an operation of type push (refused under maintenance) */
    int flat_before_kv;  /* push items + acks: the flat index of kv[0] */
    int kv_ops;
    kv_demand kv_demand; /* what the kv part asks of the tenant's quota */
} wire_plan;

/* The transaction's one pre-flight: everything refused with 400 before a
 * connection is taken, for every caller (HTTP, embedded). Refuses: not
 * JSON or duplicate members (bad_body), not an object or an unknown member
 * (log_bad_request), a tenant member (tenant_not_an_input), operations /
 * requiredLeases not arrays (log_bad_request), kv not an array
 * (kv_bad_request), neither operations nor kv (log_bad_request; null is
 * absent, as in SQL), an operation of type kv (log_kv_in_operations) or
 * not ack/push (log_bad_operation), and every kv guard (kvguard.h) with
 * lim, the wire's limits. Fills plan. 0, or -1 with err. Pure. */
int wire_preflight(const char *bundle_json, const kv_limits *lim, wire_plan *plan, queen_error *err);

/* Renders the 200 failure body {"transactionId","success":false,"reason",
 * "error","results":[]} for err (as filled by queen_error_from_fields):
 * reason from the error registry, "retryable":true where the registry says
 * the same bundle may succeed later, the precondition members
 * (queen_error_precondition_json) for kv_precondition, else "detail".
 * Returns malloc'd text (caller frees) or NULL when out of memory. */
char *wire_failure_body(const char *txid, const queen_error *err, int flat_before_kv);

/* A random (version 4) uuid, lower-case, into out[37]. */
void wire_uuid4(char out[37]);

#endif
