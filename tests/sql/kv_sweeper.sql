-- tests/sql/kv_sweeper.sql: pgTAP for sql/kv_sweeper.sql.
--
-- Self-contained: rows belong to a tenant drawn at random for this run and
-- are rolled back. The sweeper deletes across tenants, so every instant here
-- is in 1970-1971: nothing another test writes can be expired that early,
-- and the counts asserted below are this file's rows only.
-- What a single session cannot show (SKIP LOCKED never waiting on a row
-- another transaction holds) is in tests/integration/test_kv_concurrency.c.
BEGIN;
SELECT plan(29);

SELECT set_config('t026.tenant', gen_random_uuid()::text, true);

-- key_in(shard, n): the n-th key (t026-k0, t026-k1, ...) whose stored shard is `shard`.
CREATE FUNCTION pg_temp.key_in(p_shard int, p_n int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT k FROM (SELECT 't026-k' || g AS k FROM generate_series(0, 100000) g) s
    WHERE (hashtextextended(k, 0) & 63) = p_shard ORDER BY length(k), k OFFSET p_n LIMIT 1
$$;
CREATE FUNCTION pg_temp.put(p_key text, p_expires text) RETURNS void LANGUAGE sql VOLATILE AS $$
    INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)
    VALUES (current_setting('t026.tenant')::uuid, 't026-ns', p_key, '"v"', nextval('queen.kv_version_seq'), p_expires::timestamptz)
$$;
CREATE FUNCTION pg_temp.n(p_shard int) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM queen.kv WHERE tenant_id = current_setting('t026.tenant')::uuid AND shard = p_shard
$$;

-- structure
SELECT function_returns('queen', 'kv_expire_step_v1', ARRAY['smallint[]', 'timestamp with time zone', 'integer'], 'jsonb',
                        'S1 kv_expire_step_v1(smallint[], timestamptz, int) returns jsonb');
SELECT results_eq($$SELECT provolatile::text, proisstrict FROM pg_proc WHERE oid = 'queen.kv_expire_step_v1(smallint[],timestamptz,integer)'::regprocedure$$,
                  $$VALUES ('v', false)$$, 'S2 VOLATILE, not STRICT');
SELECT ok((SELECT prosrc ~ 'FOR UPDATE SKIP LOCKED' AND prosrc ~ 'NOT queen\.kv_live_v1' FROM pg_proc
           WHERE oid = 'queen.kv_expire_step_v1(smallint[],timestamptz,integer)'::regprocedure),
          'S3 picks FOR UPDATE SKIP LOCKED and re-checks expiry with kv_live_v1 under the lock');
SELECT throws_ok($$SELECT queen.kv_expire_step_v1(NULL, NULL, 10)$$, '22023', 'kv_bad_request', 'S4 NULL shards');
SELECT throws_ok($$SELECT queen.kv_expire_step_v1('{}', NULL, 10)$$, '22023', 'kv_bad_request', 'S5 no shards');
SELECT throws_ok($$SELECT queen.kv_expire_step_v1('{1}', NULL, 0)$$, '22023', 'kv_bad_request', 'S6 max_rows 0');

-- Shard 5: three rows expired at 1970-01-01 00:00, 00:01 and exactly at now
-- (1970-01-01 00:10: the boundary, expires_at <= now is dead), one still live,
-- one forever. Shard 6: one expired row that a sweep of shard 5 must not touch.
SELECT pg_temp.put(pg_temp.key_in(5, 0), '1970-01-01 00:00:00+00');
SELECT pg_temp.put(pg_temp.key_in(5, 1), '1970-01-01 00:01:00+00');
SELECT pg_temp.put(pg_temp.key_in(5, 2), '1970-01-01 00:10:00+00');
SELECT pg_temp.put(pg_temp.key_in(5, 3), '1970-01-01 00:10:00.000001+00');
SELECT pg_temp.put(pg_temp.key_in(5, 4), NULL);
SELECT pg_temp.put(pg_temp.key_in(6, 0), '1970-01-01 00:00:00+00');
SELECT is(pg_temp.n(5), 5::bigint, 'E1 setup: five rows in shard 5');

CREATE TEMP TABLE t026_step ON COMMIT DROP AS
SELECT queen.kv_expire_step_v1('{5}', '1970-01-01 00:10:00+00', 2) AS r;
SELECT is((SELECT r - 'lagMs' FROM t026_step), '{"deleted":2,"done":false}'::jsonb, 'E2 a bounded step: 2 deleted, not done');
SELECT is((SELECT (r->>'lagMs')::numeric FROM t026_step),
          (SELECT extract(epoch FROM '1970-01-01 00:10:00+00'::timestamptz - min(expires_at)) * 1000 FROM queen.kv
           WHERE tenant_id = current_setting('t026.tenant')::uuid AND shard = 5 AND expires_at <= '1970-01-01 00:10:00+00'),
          'E2b lagMs = age of the oldest expired row left, in ms');
SELECT is(pg_temp.n(5), 3::bigint, 'E3 ... two rows gone');
SELECT is(queen.kv_expire_step_v1('{5}', '1970-01-01 00:10:00+00', 2),
          '{"deleted":1,"done":true,"lagMs":0}'::jsonb, 'E4 the next step finishes: done, lagMs 0');
SELECT is(pg_temp.n(5), 2::bigint, 'E5 the row expiring exactly at now was deleted (same boundary as kv_live_v1)');
SELECT ok(EXISTS (SELECT 1 FROM queen.kv WHERE tenant_id = current_setting('t026.tenant')::uuid AND key = pg_temp.key_in(5, 3)),
          'E6 a row expiring a microsecond later is kept');
SELECT ok(EXISTS (SELECT 1 FROM queen.kv WHERE tenant_id = current_setting('t026.tenant')::uuid AND key = pg_temp.key_in(5, 4)),
          'E7 a forever row is never swept');
SELECT is(pg_temp.n(6), 1::bigint, 'E8 shards not asked for are not touched');
SELECT is(queen.kv_expire_step_v1('{5}', '1970-01-01 00:10:00+00', 100), '{"deleted":0,"done":true,"lagMs":0}'::jsonb,
          'E9 nothing left: deleted 0, done');
SELECT is(queen.kv_expire_step_v1('{6,7}', '1970-01-01 00:10:00+00', 100)->'deleted', '1'::jsonb, 'E10 several shards in one step');

-- A step reads the expired range of each shard's index, never the table:
-- statistics that say most rows expired (taken before the keys were given
-- a future expiry, as after a burst that was then rewritten) made the
-- planner scan the whole table when the picker was one "shard = ANY (..)
-- ... LIMIT n" predicate. Seven steps: past the plan cache's five custom
-- plans.
INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)
SELECT '00000000-0000-0000-0000-00000000026e'::uuid, 't026-scan', 'k' || i, '1', nextval('queen.kv_version_seq'),
       '1970-01-01 00:00:00+00'
FROM generate_series(1, 100000) AS i;
ANALYZE queen.kv;
UPDATE queen.kv SET expires_at = '2100-01-01 00:00:00+00'
WHERE tenant_id = '00000000-0000-0000-0000-00000000026e';
SELECT pg_stat_get_xact_numscans('queen.kv'::regclass) AS scans_before \gset
SELECT is((SELECT sum((queen.kv_expire_step_v1(ARRAY[8 * g, 8 * g + 1, 8 * g + 2, 8 * g + 3, 8 * g + 4, 8 * g + 5,
                                                    8 * g + 6, 8 * g + 7]::smallint[],
                                               '1970-01-01 00:10:00+00', 1000) ->> 'deleted')::integer)
           FROM generate_series(0, 6) AS g), 0::bigint, 'E12 nothing expired: seven steps delete nothing');
SELECT is(pg_stat_get_xact_numscans('queen.kv'::regclass) - :scans_before, 0::bigint,
          'E13 ... and none of them scanned the table');
DELETE FROM queen.kv WHERE tenant_id = '00000000-0000-0000-0000-00000000026e';

-- Reads never depend on the sweeper: an expired, unswept row is already absent.
SELECT pg_temp.put(pg_temp.key_in(9, 0), '1970-01-01 00:00:00+00');
SELECT is(queen.kv_apply_v1(jsonb_build_array(jsonb_build_object('op', 'get', 'ns', 't026-ns', 'key', pg_temp.key_in(9, 0))),
                            current_setting('t026.tenant')::uuid, '1970-01-01 00:10:00+00', false) #> '{0,found}',
          'false'::jsonb, 'E11 an unswept expired row reads as absent');

-- kv_usage_measure_v1. Shards 0..3 are the sample at p_now 1970-01-01 00:00
-- (offset 0, 4 shards); this tenant has 2 rows in shard 0 and 1 in shard 10.
SELECT pg_temp.put(pg_temp.key_in(0, 0), NULL);
SELECT pg_temp.put(pg_temp.key_in(0, 1), NULL);
SELECT pg_temp.put(pg_temp.key_in(10, 0), NULL);
DELETE FROM queen.kv WHERE tenant_id = current_setting('t026.tenant')::uuid AND shard NOT IN (0, 10);
SELECT is(queen.kv_usage_measure_v1('1971-01-01 00:00:00+00', NULL, NULL) - 'tenants', '{"sampled":false,"shards":64}'::jsonb,
          'U1 a full pass when the table is small (no threshold)');
SELECT results_eq($$SELECT kv_rows, kv_bytes, sampled, computed_at FROM queen.kv_usage WHERE tenant_id = current_setting('t026.tenant')::uuid$$,
                  $$SELECT count(*), sum(pg_column_size(value))::bigint, false, '1971-01-01 00:00:00+00'::timestamptz
                    FROM queen.kv WHERE tenant_id = current_setting('t026.tenant')::uuid HAVING count(*) = 3$$,
                  'U2 rows and pg_column_size bytes per tenant');
SELECT is(queen.kv_usage_measure_v1('1970-06-01 00:00:00+00', NULL, NULL)->'sampled', 'false'::jsonb, 'U3 an older measurement runs');
SELECT is((SELECT computed_at FROM queen.kv_usage WHERE tenant_id = current_setting('t026.tenant')::uuid), '1971-01-01 00:00:00+00'::timestamptz,
          'U4 ... but last writer wins on computed_at: the older one does not overwrite');
SELECT is(queen.kv_usage_measure_v1('1972-01-01 00:00:00+00', -2, 4) - 'tenants', '{"sampled":true,"shards":4}'::jsonb,
          'U5 above the threshold only a subset of shards is counted, and says so');
SELECT results_eq($$SELECT kv_rows, sampled FROM queen.kv_usage WHERE tenant_id = current_setting('t026.tenant')::uuid$$,
                  $$VALUES (32::bigint, true)$$, 'U6 sampled counts are scaled by 64 / shards (2 rows in shard 0 -> 32)');
SELECT throws_ok($$SELECT queen.kv_usage_measure_v1(NULL, NULL, 65)$$, '22023', 'kv_bad_request', 'U7 sample shards outside 1..64');

-- A step reads the expired rows by index, never the table, whatever the
-- planner believed when the sweeper's session made the plans it keeps (made
-- while queen.kv was empty, they scanned it whole at every step as it
-- filled). Here the plans are made afresh under costs that favour any scan.
SELECT is((SELECT proconfig::text FROM pg_proc WHERE oid = 'queen.kv_expire_step_v1(smallint[],timestamptz,integer)'::regprocedure),
          '{enable_seqscan=off}', 'S10 a step reads queen.kv by index only');
INSERT INTO queen.kv (tenant_id, namespace, key, value, version)
SELECT current_setting('t026.tenant')::uuid, 'scan', 'k' || i, '1', 1 FROM generate_series(1, 2000) AS i;
SET LOCAL random_page_cost = 1000000;
DISCARD PLANS;
SELECT COALESCE(sum(seq_scan), 0) AS kv_scans_before FROM pg_stat_xact_user_tables WHERE relid = 'queen.kv'::regclass \gset
SELECT queen.kv_expire_step_v1((SELECT array_agg(g::smallint) FROM generate_series(0, 63) AS g), now(), 100) IS NOT NULL AS stepped;
SELECT is((SELECT COALESCE(sum(seq_scan), 0) FROM pg_stat_xact_user_tables WHERE relid = 'queen.kv'::regclass)::bigint
          - :kv_scans_before, 0::bigint, 'S11 ... a step over 64 shards beside 2,000 keys scans no table');
RESET random_page_cost;

SELECT * FROM finish();
ROLLBACK;
