/* quota: KV quota and rate limits in the engine (docs/api.md, KV), behind
 * queen_kv_admit. Two halves: the pure admission arithmetic (a token bucket
 * and quota_decide, unit-tested table by table) and the per-tenant table
 * with the refresh thread that keeps it current from kv_quota_read_v1.
 * Never runs SQL for an admission once a tenant is loaded, and never writes
 * kv_quota or kv_usage. */
#ifndef QUEEN_QUOTA_H
#define QUEEN_QUOTA_H

#include <stdbool.h>

#include "queen.h"

#include "pool.h"

typedef struct queen_quota queen_quota;

/* A token bucket of `rate` tokens per second holding at most one second's
 * worth (at least 1 token). primed false: full at the first take. */
typedef struct quota_bucket {
    double tokens;
    long long last_ms;
    bool primed;
} quota_bucket;

/* Takes n tokens at now_ms from a bucket of rate per second (rate < 0:
 * unlimited, always true; rate 0: nothing ever, retry 1). A call wanting more than the bucket holds is
 * admitted once the bucket is full and leaves it in debt, so a big batch is
 * slowed, never starved. false: nothing taken, *retry_after_s = whole
 * seconds until enough tokens, >= 1. */
bool quota_bucket_take(quota_bucket *b, long long rate, long long now_ms, int n, int *retry_after_s);

/* Like quota_bucket_take without taking: whether n tokens are there. */
bool quota_bucket_ready(quota_bucket *b, long long rate, long long now_ms, int n, int *retry_after_s);

/* What one broker knows of one tenant. Limits < 0 are unlimited. */
typedef struct quota_state {
    bool loaded;                      /* a read answered for this tenant */
    bool has_row, enabled;            /* a kv_quota row, and its enabled */
    long long max_rows, max_bytes;
    long long max_rps, max_wps;
    long long used_rows, used_bytes;   /* the last kv_usage measurement */
    long long added_rows, added_bytes; /* admitted here since that measurement */
    char computed_at[48];              /* of that measurement; "" none */
    quota_bucket reads, writes;
} quota_state;

typedef enum quota_verdict { QUOTA_ADMIT = 0, QUOTA_GATED, QUOTA_FULL, QUOTA_RATE, QUOTA_ERROR } quota_verdict;

/* The admission of one call: reads and writes are ops (token costs),
 * creating the ops that may create a key (put, putIfAbsent, incr: +1 row
 * each) and bytes their value bytes. Order: gated (tenancy on and no row or
 * not enabled), full (creating or bytes would pass max_rows / max_bytes
 * counting used + added; deletes and reads carry none, so are never full),
 * rate (both buckets checked before either is taken). On QUOTA_ADMIT the
 * tokens are taken and creating/bytes added to s->added_*. */
quota_verdict quota_decide(quota_state *s, bool tenancy, int reads, int writes, int creating, long bytes,
                           long long now_ms, int *retry_after_s);

/* Folds one kv_quota_read_v1 element (tenant-less fields) into s: limits
 * replaced; when computed_at differs from the one held, the measurement
 * replaces used_* and the delta restarts at zero. */
void quota_apply_read(quota_state *s, bool has_row, bool enabled, long long max_rows, long long max_bytes,
                      long long max_rps, long long max_wps, long long rows, long long bytes, const char *computed_at);

/* The table and its refresh thread, reading kv_quota_read_v1 on pool every
 * refresh_ms. NULL with msg filled when the thread cannot start. */
queen_quota *quota_start(queen_pool *pool, int refresh_ms, char *msg, size_t len);

/* The admission of one call by a canonical tenant (tenant.h judged it):
 * loads the tenant once when first seen, then quota_decide under the
 * table's lock. QUOTA_ERROR with err filled when that load failed. */
quota_verdict quota_admit(queen_quota *qq, const char *tenant, bool tenancy, int reads, int writes, int creating,
                          long bytes, int *retry_after_s, queen_error *err);
/* Stops the thread and frees the table. NULL allowed. */
void quota_stop(queen_quota *qq);

#endif
