/* kvadmit: the KV quota and rate-limit gate of the HTTP edge (README.md,
 * HTTP API > KV). Counts what a kv call asks for (reads, writes, keys it may create,
 * value bytes) and asks queen_kv_admit, before any database connection is
 * taken for the call. The engine decides; this file only counts and renders
 * 403 kv_quota_exceeded / 403 feature_gated / 429 rate_limited. */
#ifndef QUEEN_KVADMIT_H
#define QUEEN_KVADMIT_H

#include <stdbool.h>

#include "http.h"
#include "rawjson.h"

/* What one call asks for. */
typedef struct kv_demand {
    int reads, writes, creating;
    long bytes;
} kv_demand;

/* Counts a raw ops array the guards already accepted: get/getMany/getPrefix
 * one read each, put/putIfAbsent/incr one write, one possible new row and
 * their value's raw JSON bytes, delete one write; an unknown op nothing
 * (SQL refuses it). Pure. */
kv_demand kv_demand_of(rawjson_span ops);

/* Admits d for the request's tenant: true, or false with res rendered for
 * the route's family (Retry-After from the engine on a 429). */
bool kv_admit(server *srv, const http_request *req, kv_demand d, http_family fam, http_response *res);

#endif
