-- kv_sweeper.sql: the SQL half of the kv sweeper (the loop is in
-- src/engine/sweeper.c).
--
-- Owns: kv_expire_step_v1 (delete expired rows, one bounded step) and
-- kv_usage_measure_v1 (the slow sub-cadence that writes queen.kv_usage).
-- May call: the helpers of kv.sql (kv_live_v1). Reads and writes
-- queen.kv (delete only) and queen.kv_usage (upsert only).
-- Must never: be needed for correctness. Every read and write path already
-- treats an expired row as absent (kv_live_v1), so the sweeper is a disk-space
-- job: a broker that never sweeps serves exactly the same answers.
--
-- Coordination: none. Every broker sweeps all 64 shards starting at a
-- rotating offset; rows are picked FOR UPDATE SKIP LOCKED, so two sweepers
-- (or a sweeper and a writer) never wait on each other and a dead broker
-- orphans nothing: no leader, no lease, no advisory lock.
--
-- The batch size (p_max_rows, QUEEN_KV_EXPIRE_BATCH = 1000) and the cadence
-- (QUEEN_KV_EXPIRE_EVERY_MS = 1000, a pass capped at QUEEN_KV_EXPIRE_MAX_ROWS
-- = 100000 rows) were chosen by analogy with the log engine.
-- Measured 2026-12-02 (2-core VM shared with other builds; durable cluster;
-- bench/SOAK.md), question "under an expiry burst of 1M keys, what lag, CPU
-- and lock waits do the batch and cadence give, and does another pair do
-- better?": the defaults stay. The 30-minute soak, 1,000,000 keys expiring
-- at one instant under the mixed load (load average about 20): all deleted
-- 127.0 s after they expired (to the 5 s sample), lagMs at most 123714, up to
-- 15903 rows/s, passes of up to 17988 ms; the sweeper's backend used 18.5%
-- of a core meanwhile; writers logged no row-lock wait (every wait over
-- 100 ms was NOTIFY's commit lock) and their p99 (worst of put, incr, tx per
-- 5 s window, median over windows) was 172.03 ms during the burst as before
-- it. Three runs side by side (load average about 29, 360 s each, the same
-- burst): batch 1000 every 1000 ms cleared it in 220.5 s; every 250 ms in
-- 231.7 s; batch 10000 had 241482 keys left after 244 s. The cadence does
-- not matter under a burst because a pass then lasts 10-18 s (its 100000-row
-- cap), and a larger batch did not delete faster; none made a writer wait on
-- a row (SKIP LOCKED on the sweeper's side, and no writer touched the
-- expired keys). Reproduce: make soak, and
-- SOAK_MINUTES=6 SOAK_BURST_AT=200 bench/soak_compare.sh sweeper.
--
-- Re-applied at every boot: CREATE OR REPLACE FUNCTION only.

-- kv_expire_step_v1(p_shards smallint[], p_now timestamptz, p_max_rows int) -> jsonb
--
-- Deletes up to p_max_rows rows of the given shards whose expires_at <= now
-- (the boundary of kv_live_v1: a row is dead exactly when kv_live_v1 says so).
-- Arguments: p_shards, the shards to scan (0..63); p_now, the instant (NULL =
-- now()); p_max_rows, the batch bound (>= 1).
-- Picking goes through idx_kv_shard_expires, one range per shard (shard = s,
-- expires_at <= now, oldest first), FOR UPDATE SKIP LOCKED: a row a writer
-- holds is skipped, never waited for. Under the lock the expiry is checked
-- again in the DELETE, because a put may have refreshed the row between the
-- index read and the lock (READ COMMITTED re-evaluates the picker's WHERE on
-- the newest version as well; the DELETE's own check is the one that reads
-- as the rule).
-- Result: {deleted, done, lagMs}
--   deleted  rows deleted by this step.
--   done     true when the step took fewer rows than p_max_rows, i.e. it
--            found nothing more it could take now (rows locked by others are
--            theirs to finish). The broker loops while done is false.
--   lagMs    when not done, the age in ms of the oldest expired row still
--            present in these shards (the backlog the operator should see);
--            0 when done. Measured with one index probe per shard.
-- Raises 22023 kv_bad_request on NULL/empty shards or p_max_rows < 1.
-- VOLATILE (deletes), PARALLEL UNSAFE, CALLED ON NULL INPUT (NULLs raise).
-- enable_seqscan off: the sweeper's session keeps the generic plans it made
-- at its first step. Made while queen.kv was empty, they read it with a
-- sequential scan, and went on doing so as it filled: 200,000 keys, none
-- expiring, were read whole 45 times a second until an autoanalyze came
-- (27,000,000 rows in 3 s, bench/RESULTS.md, 2026-12-04).
CREATE OR REPLACE FUNCTION queen.kv_expire_step_v1(p_shards SMALLINT[], p_now TIMESTAMPTZ, p_max_rows INTEGER)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
SET enable_seqscan = off
AS $$
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_picked  integer;
    v_deleted integer;
    v_oldest  timestamptz;
BEGIN
    IF p_shards IS NULL OR cardinality(p_shards) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = 'p_shards must be a non-empty array of shard numbers (0..63)';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = format('p_max_rows must be >= 1, got %s', COALESCE(p_max_rows::text, 'NULL'));
    END IF;

    -- Oldest first, shard by shard: one range of idx_kv_shard_expires per
    -- shard (shard = s, expires_at <= now, in index order), so a step reads
    -- what is expired and stops there. As "shard = ANY (..) AND expires_at
    -- <= now ... LIMIT n", the planner took a sequential scan whenever its
    -- statistics said many rows had expired (the LIMIT looked like an early
    -- stop); with none actually expired that read the whole table, 8 steps
    -- a second: 35-41 ms a step at 140,000 keys, a third of a core
    -- (pg_stat_statements during the wire benchmark, 2026-12-03).
    WITH picked AS (
        SELECT k.tenant_id, k.namespace, k.key
        FROM unnest(p_shards) AS s(shard)
        CROSS JOIN LATERAL (
            SELECT k.tenant_id, k.namespace, k.key
            FROM queen.kv AS k
            WHERE k.shard = s.shard
              AND k.expires_at IS NOT NULL AND k.expires_at <= v_now   -- the partial index's predicate
            ORDER BY k.expires_at
            LIMIT p_max_rows
            FOR UPDATE SKIP LOCKED) AS k
        LIMIT p_max_rows
    ), gone AS (
        DELETE FROM queen.kv AS k
        USING picked AS p
        WHERE k.tenant_id = p.tenant_id AND k.namespace = p.namespace AND k.key = p.key
          AND NOT queen.kv_live_v1(k.expires_at, v_now)               -- re-checked under the lock
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM picked), (SELECT count(*) FROM gone)
    INTO v_picked, v_deleted;

    IF v_picked < p_max_rows THEN
        RETURN jsonb_build_object('deleted', v_deleted, 'done', true, 'lagMs', 0);
    END IF;

    SELECT min(o.expires_at) INTO v_oldest
    FROM unnest(p_shards) AS s(shard)
    CROSS JOIN LATERAL (
        SELECT k.expires_at
        FROM queen.kv AS k
        WHERE k.shard = s.shard AND k.expires_at IS NOT NULL AND k.expires_at <= v_now
        ORDER BY k.expires_at
        LIMIT 1
    ) AS o;

    RETURN jsonb_build_object(
        'deleted', v_deleted,
        'done', v_oldest IS NULL,
        'lagMs', CASE WHEN v_oldest IS NULL THEN 0
                      ELSE floor(extract(epoch FROM (v_now - v_oldest)) * 1000)::bigint END);
END
$$;

-- kv_usage_measure_v1(p_now timestamptz, p_sample_above_rows bigint, p_sample_shards int) -> jsonb
--
-- The slow sub-cadence: measures, per tenant, the rows and the value bytes
-- (pg_column_size(value), the stored, possibly compressed, size) of queen.kv
-- and overwrites queen.kv_usage. Counts every physical row, expired-unswept
-- included: they occupy the disk the quota is about.
-- Sampling: when the table's planner estimate (pg_class.reltuples) exceeds
-- p_sample_above_rows, only p_sample_shards of the 64 shards are counted,
-- starting at an offset that rotates with p_now (one per minute), and the
-- counts are scaled by 64 / p_sample_shards; sampled = true says so. The
-- shard is a hash of the key, so a shard subset is an unbiased sample of
-- keys. NOTE: with no index on shard alone (deliberately, see kv.sql) a sampled
-- pass still reads the heap; it saves the aggregation, not the I/O.
-- Last writer wins on computed_at: a measurement older than the stored one
-- does not overwrite it (any broker may measure; none coordinates).
-- A tenant with no row left is written as zero if it already had a usage
-- row, on a full (unsampled) pass only: a sample that misses a small tenant
-- proves nothing about it.
-- Arguments: p_now NULL = now(); p_sample_above_rows NULL = never sample;
-- p_sample_shards 1..64 (NULL = 8).
-- Result: {tenants, sampled, shards} (tenants written, whether sampled, how
-- many shards counted).
-- Raises 22023 kv_bad_request when p_sample_shards is outside 1..64.
-- VOLATILE (writes kv_usage), PARALLEL UNSAFE, CALLED ON NULL INPUT.
CREATE OR REPLACE FUNCTION queen.kv_usage_measure_v1(p_now TIMESTAMPTZ, p_sample_above_rows BIGINT, p_sample_shards INTEGER)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_now     timestamptz := COALESCE(p_now, now());
    v_n       integer := COALESCE(p_sample_shards, 8);
    v_sampled boolean;
    v_shards  smallint[];
    v_start   integer;
    v_written integer;
BEGIN
    IF v_n < 1 OR v_n > 64 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = format('p_sample_shards must be 1..64, got %s', v_n);
    END IF;
    SELECT p_sample_above_rows IS NOT NULL AND c.reltuples > p_sample_above_rows AND v_n < 64
    INTO v_sampled
    FROM pg_catalog.pg_class c WHERE c.oid = 'queen.kv'::regclass;
    IF NOT v_sampled THEN
        v_n := 64;
    END IF;
    v_start := (floor(extract(epoch FROM v_now) / 60)::bigint % 64)::integer;
    SELECT array_agg(((v_start + g) % 64)::smallint) INTO v_shards FROM generate_series(0, v_n - 1) AS g;

    WITH m AS (
        SELECT k.tenant_id,
               (count(*) * 64 / v_n)::bigint AS kv_rows,
               (COALESCE(sum(pg_column_size(k.value)), 0) * 64 / v_n)::bigint AS kv_bytes
        FROM queen.kv AS k
        WHERE NOT v_sampled OR k.shard = ANY (v_shards)
        GROUP BY k.tenant_id
    ), allt AS (
        SELECT m.tenant_id, m.kv_rows, m.kv_bytes FROM m
        UNION ALL
        SELECT u.tenant_id, 0, 0 FROM queen.kv_usage AS u
        WHERE NOT v_sampled   -- a sample missing a small tenant proves nothing
          AND NOT EXISTS (SELECT 1 FROM m WHERE m.tenant_id = u.tenant_id)
    ), w AS (
        INSERT INTO queen.kv_usage AS u (tenant_id, kv_rows, kv_bytes, sampled, computed_at)
        SELECT a.tenant_id, a.kv_rows, a.kv_bytes, v_sampled, v_now FROM allt AS a
        ORDER BY a.tenant_id   -- one lock order for concurrent measurers
        ON CONFLICT (tenant_id) DO UPDATE
           SET kv_rows = EXCLUDED.kv_rows, kv_bytes = EXCLUDED.kv_bytes,
               sampled = EXCLUDED.sampled, computed_at = EXCLUDED.computed_at
         WHERE u.computed_at <= EXCLUDED.computed_at
        RETURNING 1
    )
    SELECT count(*) INTO v_written FROM w;

    RETURN jsonb_build_object('tenants', v_written, 'sampled', v_sampled, 'shards', v_n);
END
$$;
