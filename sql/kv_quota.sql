-- kv_quota.sql: the one read of KV quota and usage the broker makes
-- (docs/api.md, KV, "Quota and rate limits"): kv_quota_read_v1.
--
-- May call: only pg_catalog. Reads queen.kv_quota (operator configuration)
-- and queen.kv_usage (the sweeper's measurement, kv_sweeper.sql), both from kv.sql.
--
-- Must never: write anything, and never be called on a request's write
-- path. Enforcement is an in-process delta in each broker (src/engine/
-- quota.c): the last measurement plus what that broker admitted since. The
-- broker calls this on a cadence (QUEEN_KV_QUOTA_REFRESH_MS) for the tenants
-- it saw recently, and once for a tenant's first request; a per-request read
-- would put a query in front of every write, and a write to these tables
-- would serialise every bundle of a tenant on one row.
--
-- Re-applied at every boot: CREATE OR REPLACE FUNCTION only (keeps the OID),
-- so a second apply leaves the catalog identical.

-- kv_quota_read_v1(p_tenants uuid[]) -> jsonb
--
-- Contract: one element per distinct non-NULL tenant of p_tenants, in no
-- particular order:
--   {"tenant", "hasQuota", "enabled", "maxRows", "maxBytes",
--    "maxReadsPerSec", "maxWritesPerSec", "rows", "bytes", "sampled",
--    "computedAt"}
-- hasQuota false (no kv_quota row): enabled false and every max null; the
-- broker decides what that means (gated under tenancy, unlimited without).
-- A NULL max is unlimited. No kv_usage row: rows 0, bytes 0, computedAt
-- null (nothing measured yet). NULL or empty p_tenants: []. Raises nothing.
-- STABLE (reads tables, writes nothing; one snapshot per statement),
-- PARALLEL SAFE, not STRICT (NULL input is the empty answer, not NULL).
CREATE OR REPLACE FUNCTION queen.kv_quota_read_v1(p_tenants UUID[])
RETURNS JSONB LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'tenant', t.id,
               'hasQuota', q.tenant_id IS NOT NULL,
               'enabled', COALESCE(q.enabled, false),
               'maxRows', q.max_rows,
               'maxBytes', q.max_bytes,
               'maxReadsPerSec', q.max_reads_per_sec,
               'maxWritesPerSec', q.max_writes_per_sec,
               'rows', COALESCE(u.kv_rows, 0),
               'bytes', COALESCE(u.kv_bytes, 0),
               'sampled', COALESCE(u.sampled, false),
               'computedAt', u.computed_at)), '[]'::jsonb)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_tenants) AS x WHERE x IS NOT NULL) t
    LEFT JOIN queen.kv_quota q ON q.tenant_id = t.id
    LEFT JOIN queen.kv_usage u ON u.tenant_id = t.id
$$;
