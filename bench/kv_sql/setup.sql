-- bench/kv_sql/setup.sql: 10000 keys in namespace "bench" of the bench tenant
-- (forever, value {"n":1}) so get/put/incr hit existing rows, as a hot key
-- space does. Re-runnable: it overwrites.
SELECT queen.kv_apply_v1(
         (SELECT jsonb_agg(jsonb_build_object('op', 'put', 'ns', 'bench', 'key', 'k' || g, 'value', '{"n":1}'::jsonb, 'forever', true))
            FROM generate_series(b * 250 + 1, b * 250 + 250) g),
         '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false)
  FROM generate_series(0, 39) b;
SELECT queen.kv_apply_v1(
         (SELECT jsonb_agg(jsonb_build_object('op', 'put', 'ns', 'bench', 'key', 'c' || g, 'value', 0, 'forever', true))
            FROM generate_series(b * 250 + 1, b * 250 + 250) g),
         '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false)
  FROM generate_series(0, 39) b;
VACUUM ANALYZE queen.kv;
