/* admit: the kv admission every kv call of libqueen makes before SQL (quota
 * and rate limits, quota.c's table), with its refusal counters. */
#ifndef QUEEN_ADMIT_H
#define QUEEN_ADMIT_H

#include "engine.h"
#include "kvguard.h"

/* Admits d for a canonical tenant: 0, or -1 with err (QUEEN_ERR_FEATURE_GATED,
 * QUEEN_ERR_QUOTA_EXCEEDED, QUEEN_ERR_RATE_LIMITED with err->retry_after_s,
 * or what the tenant's first load met). A call asking nothing passes. */
int engine_kv_admit(queen *q, const char *tenant, kv_demand d, queen_error *err);

#endif
