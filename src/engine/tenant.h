/* tenant: the one judge of a tenant argument (queen_tenant_canonical in
 * queen.h). Every public entry of libqueen passes its tenant through
 * engine_tenant before anything else sees it, so the quota table, SQL and
 * the logs all hold the same canonical lower-case text. */
#ifndef QUEEN_TENANT_H
#define QUEEN_TENANT_H

#include "queen.h"

/* The tenant argument canonicalised into out, or NULL with err filled
 * (QUEEN_ERR_BAD_REQUEST, reason "bad_tenant"). NULL or "" is
 * QUEEN_DEFAULT_TENANT. */
const char *engine_tenant(const char *tenant, char out[QUEEN_TENANT_LEN + 1], queen_error *err);

#endif
