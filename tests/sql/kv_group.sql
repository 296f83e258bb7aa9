-- tests/sql/kv_group.sql: pgTAP for sql/kv_group.sql.
--
-- Self-contained: two tenants drawn at random for this run, every row rolled
-- back. A group must answer each member exactly as the member's own
-- kv_apply_v1 call would, take its keys in the global lock order, and
-- commit nothing when any member fails.
BEGIN;
SELECT plan(22);

SELECT set_config('t025.a', gen_random_uuid()::text, true);
SELECT set_config('t025.b', gen_random_uuid()::text, true);

-- grp(calls, tenants as 'a'/'b' letters): the group, each row's result as jsonb.
CREATE FUNCTION pg_temp.grp(p_calls text, p_who text[])
RETURNS TABLE (n integer, r jsonb) LANGUAGE sql VOLATILE AS $$
    SELECT g.n, g.result::jsonb
    FROM queen.kv_apply_group_v1(p_calls::jsonb,
         (SELECT jsonb_agg(current_setting('t025.' || w) ORDER BY o) FROM unnest(p_who) WITH ORDINALITY AS x(w, o))) AS g
$$;
-- one(ops, tenant letter): a call of its own.
CREATE FUNCTION pg_temp.one(p_ops text, p_who text DEFAULT 'a') RETURNS jsonb LANGUAGE sql VOLATILE AS $$
    SELECT queen.kv_apply_v1(p_ops::jsonb, current_setting('t025.' || p_who)::uuid, now(), false)
$$;
-- ver(ns, key, tenant letter): the stored version, NULL when absent.
CREATE FUNCTION pg_temp.ver(p_ns text, p_key text, p_who text DEFAULT 'a') RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT version FROM queen.kv
    WHERE tenant_id = current_setting('t025.' || p_who)::uuid AND namespace = p_ns AND key = p_key
$$;
-- nover(results): each element without its version (versions come from a
-- sequence, so two runs of the same calls differ only there).
CREATE FUNCTION pg_temp.nover(p jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_agg(e - 'version' ORDER BY o) FROM jsonb_array_elements(p) WITH ORDINALITY AS x(e, o)
$$;

SELECT function_returns('queen', 'kv_apply_group_v1', ARRAY['jsonb', 'jsonb'], 'setof record',
                        'G1 kv_apply_group_v1(jsonb, jsonb) returns a set of (n, result)');
SELECT results_eq($$SELECT provolatile::text, proisstrict FROM pg_proc
                    WHERE oid = 'queen.kv_apply_group_v1(jsonb,jsonb)'::regprocedure$$,
                  $$VALUES ('v', false)$$, 'G2 VOLATILE, not STRICT');

-- The same starting state in two namespaces: g1 for the group, g2 for the
-- same calls made one by one.
SELECT pg_temp.one('[{"op":"put","ns":"g1","key":"k2","value":5,"forever":true},
                     {"op":"put","ns":"g1","key":"k3","value":"old","forever":true},
                     {"op":"put","ns":"g1","key":"k4","value":"gone","forever":true}]');
SELECT pg_temp.one('[{"op":"put","ns":"g2","key":"k2","value":5,"forever":true},
                     {"op":"put","ns":"g2","key":"k3","value":"old","forever":true},
                     {"op":"put","ns":"g2","key":"k4","value":"gone","forever":true}]');

-- Members in arrival order; applied in (ns, key, arrival) order:
-- k1(3), k1(6), k2(0), k2(4), k3(1), k4(2), k9(5).
SELECT set_config('t025.calls', $$[
    [{"op":"incr","ns":"NS","key":"k2","delta":1,"forever":true}],
    [{"op":"putIfAbsent","ns":"NS","key":"k3","value":"new","forever":true}],
    [{"op":"delete","ns":"NS","key":"k4"}],
    [{"op":"put","ns":"NS","key":"k1","value":{"a":1},"ttlSeconds":60}],
    [{"op":"incr","ns":"NS","key":"k2","delta":10,"forever":true}],
    [{"op":"delete","ns":"NS","key":"k9"}],
    [{"op":"put","ns":"NS","key":"k1","value":2,"expect":1,"forever":true}]
  ]$$, true);
CREATE TEMP TABLE grp_res AS
    SELECT n, r FROM pg_temp.grp(replace(current_setting('t025.calls'), '"NS"', '"g1"'),
                                 ARRAY['a', 'a', 'a', 'a', 'a', 'a', 'a']);
CREATE TEMP TABLE one_res (n integer, r jsonb);
INSERT INTO one_res
    SELECT o - 1, pg_temp.one(c::text)
    FROM jsonb_array_elements(replace(current_setting('t025.calls'), '"NS"', '"g2"')::jsonb) WITH ORDINALITY AS x(c, o)
    ORDER BY c -> 0 ->> 'key', o;

SELECT results_eq('SELECT n FROM grp_res', 'SELECT generate_series(0, 6)',
                  'G3 one row per member, in member order');
SELECT results_eq('SELECT n, pg_temp.nover(r) FROM grp_res ORDER BY n',
                  'SELECT n, pg_temp.nover(r) FROM one_res ORDER BY n',
                  'G4 every member answered as its own call would be (versions aside)');
SELECT results_eq($$SELECT (r -> 0 ->> 'value')::int FROM grp_res WHERE n IN (0, 4) ORDER BY n$$,
                  $$VALUES (6), (16)$$, 'G5 two members on one key apply in arrival order');
SELECT ok((SELECT (r -> 0 ->> 'version')::bigint FROM grp_res WHERE n = 3)
          < (SELECT (r -> 0 ->> 'version')::bigint FROM grp_res WHERE n = 0)
          AND (SELECT (r -> 0 ->> 'version')::bigint FROM grp_res WHERE n = 0)
          < (SELECT (r -> 0 ->> 'version')::bigint FROM grp_res WHERE n = 4),
          'G6 applied in ascending key order, not arrival order (k1 before k2)');
SELECT results_eq($$SELECT k, (SELECT value FROM queen.kv WHERE tenant_id = current_setting('t025.a')::uuid
                                AND namespace = 'g1' AND key = k)
                    FROM unnest(ARRAY['k1', 'k2', 'k3', 'k4']) AS k ORDER BY k$$,
                  $$SELECT k, (SELECT value FROM queen.kv WHERE tenant_id = current_setting('t025.a')::uuid
                                AND namespace = 'g2' AND key = k)
                    FROM unnest(ARRAY['k1', 'k2', 'k3', 'k4']) AS k ORDER BY k$$,
                  'G7 the same stored state as the calls one by one');

-- The order is byte order ("B" is 0x42, "a" 0x61), and tenant before key.
CREATE TEMP TABLE ord_res AS
    SELECT n, r FROM pg_temp.grp('[[{"op":"put","ns":"o","key":"a","value":1,"forever":true}],
                                   [{"op":"put","ns":"o","key":"B","value":1,"forever":true}]]', ARRAY['a', 'a']);
SELECT ok((SELECT (r -> 0 ->> 'version')::bigint FROM ord_res WHERE n = 1)
          < (SELECT (r -> 0 ->> 'version')::bigint FROM ord_res WHERE n = 0),
          'G8 keys in byte order (COLLATE "C"): B before a');
CREATE TEMP TABLE ten_res AS
    SELECT n, r FROM pg_temp.grp('[[{"op":"put","ns":"o","key":"t","value":1,"forever":true}],
                                   [{"op":"put","ns":"o","key":"t","value":1,"forever":true}]]', ARRAY['a', 'b']);
SELECT ok(((SELECT (r -> 0 ->> 'version')::bigint FROM ten_res WHERE n = 0)
           < (SELECT (r -> 0 ->> 'version')::bigint FROM ten_res WHERE n = 1))
          = (current_setting('t025.a')::uuid < current_setting('t025.b')::uuid),
          'G9 the lower tenant uuid first');
SELECT is(pg_temp.ver('o', 't', 'b') IS NOT NULL AND pg_temp.ver('o', 't', 'a') IS NOT NULL, true,
          'G10 each member writes under its own tenant');

-- A member that raises fails the group: its own error, and nothing of any
-- member stays (the broker then runs each alone).
SELECT throws_ok($$SELECT * FROM pg_temp.grp('[[{"op":"put","ns":"f","key":"a1","value":1,"forever":true}],
    [{"op":"putIfAbsent","ns":"g1","key":"k3","value":1,"forever":true,"required":true}],
    [{"op":"put","ns":"f","key":"z9","value":1,"forever":true}]]', ARRAY['a', 'a', 'a'])$$,
    '23514', 'kv_precondition_failed', 'G11 a required op that fails raises kv_apply_v1''s own 23514');
SELECT is(pg_temp.ver('f', 'a1'), NULL, 'G12 nothing of a failed group stays (a member applied before the failure)');

-- What the group refuses before any write: the lock-order argument needs
-- exactly one write op per member.
SELECT throws_ok($$SELECT * FROM pg_temp.grp('[[{"op":"put","ns":"f","key":"a2","value":1,"forever":true}],
    [{"op":"put","ns":"f","key":"b","value":1,"forever":true},{"op":"put","ns":"f","key":"c","value":1,"forever":true}]]',
    ARRAY['a', 'a'])$$, '22023', 'kv_bad_request', 'G13 a member of two ops is refused');
SELECT throws_ok($$SELECT * FROM pg_temp.grp('[[{"op":"put","ns":"f","key":"a2","value":1,"forever":true}],
    [{"op":"get","ns":"f","key":"b"}]]', ARRAY['a', 'a'])$$, '22023', 'kv_bad_request', 'G14 a read member is refused');
SELECT throws_ok($$SELECT * FROM pg_temp.grp('[[{"op":"put","ns":"f","key":"a2","value":1,"forever":true}],
    {"op":"put","ns":"f","key":"b","value":1,"forever":true}]', ARRAY['a', 'a'])$$, '22023', 'kv_bad_request',
    'G14b a member that is not an op array is refused');
SELECT throws_ok($$SELECT * FROM queen.kv_apply_group_v1('[[{"op":"put","ns":"f","key":"a2","value":1,"forever":true}]]',
    '[]')$$, '22023', 'kv_bad_request', 'G15 calls and tenants of different lengths are refused');
SELECT is(pg_temp.ver('f', 'a2'), NULL, 'G16 nothing written by a refused group');
SELECT is((SELECT count(*) FROM queen.kv_apply_group_v1('[]', '[]')), 0::bigint, 'G17 an empty group answers no rows');

SELECT is((SELECT proconfig FROM pg_proc WHERE oid = 'queen.kv_apply_group_v1(jsonb,jsonb)'::regprocedure),
          ARRAY['lock_timeout=100ms'], 'G18 a member stuck on a row lock fails the group after 100 ms');

-- kv_lock_writes_v1: the existing rows the write ops name, of each call's tenant, locked.
SELECT lives_ok($$SELECT * FROM pg_temp.grp('[[{"op":"put","ns":"l","key":"x","value":1,"forever":true}],
    [{"op":"put","ns":"l","key":"y","value":1,"forever":true}]]', ARRAY['a', 'b'])$$, 'L1 two rows to lock');
SELECT is(queen.kv_lock_writes_v1(jsonb_build_array(
              '[{"op":"incr","ns":"l","key":"y","delta":1},{"op":"get","ns":"l","key":"x"},{"op":"put","ns":"l","key":"new"}]'::jsonb,
              '[{"op":"delete","ns":"l","key":"x"}, 7]'::jsonb, '"not ops"'::jsonb),
              jsonb_build_array(current_setting('t025.b'), current_setting('t025.a'), current_setting('t025.a'))),
          2, 'L2 b''s y and a''s x (not a read, a missing key, another tenant''s row or a non-op)');
SELECT is((SELECT count(*)::int FROM queen.kv k
           WHERE k.namespace = 'l' AND k.xmax::text::bigint = txid_current() % 4294967296),
          2, 'L3 both rows now carry this transaction''s lock');

SELECT * FROM finish();
ROLLBACK;
