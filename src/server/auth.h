/* auth: who may call which route (QUEEN_AUTH=jwt). A bearer JWT (jwt.h)
 * gives the caller's role, optional scopes, tenant and subject; the route
 * table (routes.c, docs/auth.md) says which role each route
 * needs and which resources it touches. Judged before the handler runs, so before
 * any database connection is taken, but for the calls that name a queue
 * only by a partition or lease id (auth_settle_refused). Tokens and secrets never reach a log
 * line, a metric or an error body. */
#ifndef QUEEN_AUTH_H
#define QUEEN_AUTH_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "http.h"

/* Longest sub claim accepted: it is stored on every message pushed. */
#define AUTH_SUBJECT_MAX 256

/* What is left to judge once the database can be asked (auth_settle_refused). */
typedef struct auth_pending auth_pending;

/* What auth_refused learnt about an admitted caller. */
typedef struct auth_identity {
    bool authenticated;                 /* a token was verified (QUEEN_AUTH=jwt) */
    char subject[AUTH_SUBJECT_MAX + 1]; /* its sub claim, "" when none */
    auth_pending *pending;              /* NULL, or the caller's to settle or free */
} auth_identity;

/* Loads the keys (QUEEN_AUTH=jwt) or says auth is off, with a warning when
 * the broker is reachable beyond loopback. 0, or -1 logged. */
int auth_start(server *srv);
void auth_stop(server *srv);
bool auth_enabled(const server *srv);

/* The hook of the dispatch path, after the route matched and the body is
 * whole: false when the call may go on (tenant, when the token names one,
 * and *who filled); true with the refusal in res (401 with
 * WWW-Authenticate: Bearer, or 403). body may be NULL. */
bool auth_refused(server *srv, struct conn *c, const route *r, char *const *params, size_t nparams,
                  const char *body, size_t body_len, char tenant[QUEEN_TENANT_LEN + 1], auth_identity *who,
                  http_response *res);

/* The second half of the judgement, for a token narrowed by queue scopes
 * whose call names partitions or leases (ack, ack batch, transaction acks
 * and requiredLeases, lease extension, trace): run on the request's fiber
 * before its handler, so nothing is written when it refuses. One read-only
 * statement (queen_queues_of) names each one's queue; each must be one the
 * scopes give read on. false when the call may go on; true with the 403 (or
 * the engine's error) in res. Frees p either way. A partition's queue never
 * changes, so the answer holds when the handler's own statement runs. */
bool auth_settle_refused(server *srv, auth_pending *p, const route *r, const char *tenant, http_response *res);
void auth_pending_free(auth_pending *p);

/* queen_auth_failures_total{reason} (Prometheus text), and the same as a
 * JSON object of reason -> count for /metrics. */
void auth_metrics_prometheus(FILE *out);
json_t *auth_metrics_json(void);

#endif
