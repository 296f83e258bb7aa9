/* admit: see admit.h. queen_kv_admit is the same admission for an embedder
 * that wants to ask ahead of a call. */
#include "admit.h"

#include <string.h>

#include "quota.h"

/* Tenancy is on whenever requests carry a tenant from any source: the
 * trusted proxy's header or a verified token's claim (QUEEN_AUTH=jwt, whose
 * tenant is the claim's or, with QUEEN_JWT_DEFAULT_TENANT, the default one).
 * The kv grant then applies to every tenant the same way, whichever source
 * named it; only a handle serving the one default tenant is never gated. */
static bool tenancy_on(const queen_config *cfg)
{
    return cfg->tenancy_header || (cfg->auth != NULL && strcmp(cfg->auth, "jwt") == 0);
}

int engine_kv_admit(queen *q, const char *tenant, kv_demand d, queen_error *err)
{
    if (d.reads == 0 && d.writes == 0)
        return 0;
    int retry = 1;
    quota_verdict v = quota_admit(q->quota, tenant, tenancy_on(&q->cfg), d.reads, d.writes, d.creating, d.bytes,
                                  &retry, err);
    switch (v) {
    case QUOTA_ADMIT:
        return 0;
    case QUOTA_ERROR:
        return -1;
    case QUOTA_GATED:
        queen_error_set(err, QUEEN_ERR_FEATURE_GATED, "feature_gated",
                        "this tenant has no enabled kv grant (queen.kv_quota)");
        break;
    case QUOTA_FULL:
        queen_error_set(err, QUEEN_ERR_QUOTA_EXCEEDED, "kv_quota_exceeded",
                        "the write would pass the tenant's max_rows or max_bytes; nothing was written");
        break;
    case QUOTA_RATE:
        queen_error_set(err, QUEEN_ERR_RATE_LIMITED, "rate_limited", "over the tenant's kv %s per second; retry in %d s",
                        d.reads > 0 && d.writes > 0 ? "reads or writes" : d.reads > 0 ? "reads" : "writes", retry);
        if (err != NULL)
            err->retry_after_s = retry;
        break;
    }
    atomic_fetch_add(&q->counters.kv_quota_refusals[v - 1], 1);
    return -1;
}

int queen_kv_admit(queen *q, const char *tenant, int reads, int writes, int creating, long bytes, int *retry_after_s,
                   queen_error *err)
{
    if (retry_after_s != NULL)
        *retry_after_s = 0;
    char canon[QUEEN_TENANT_LEN + 1];
    tenant = engine_enter_tenant(q, tenant, canon, err);
    if (tenant == NULL)
        return -1;
    queen_error local;
    if (err == NULL)
        err = &local;
    int rc = engine_kv_admit(q, tenant, (kv_demand){reads, writes, creating, bytes, 0}, err);
    if (rc != 0 && err->category == QUEEN_ERR_RATE_LIMITED && retry_after_s != NULL)
        *retry_after_s = err->retry_after_s;
    engine_leave(q);
    return rc;
}
