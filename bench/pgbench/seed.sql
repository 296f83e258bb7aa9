-- 100k counters (value 0, forever) in ns bench and 100k objects in ns
-- bench_put; markers go to ns bench_marker. Seeded with plain INSERT (the
-- benchmark's fixture, not a code path under test).
DELETE FROM queen.kv WHERE tenant_id = '00000000-0000-0000-0000-000000000001'::uuid AND namespace IN ('bench', 'bench_put', 'bench_marker', 'wire');
INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)
SELECT '00000000-0000-0000-0000-000000000001'::uuid, 'bench', 'k' || i, '0'::jsonb, nextval('queen.kv_version_seq'), NULL FROM generate_series(0, 99999) AS i;
INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)
SELECT '00000000-0000-0000-0000-000000000001'::uuid, 'bench_put', 'k' || i, jsonb_build_object('n', i, 's', 'bench'), nextval('queen.kv_version_seq'), NULL FROM generate_series(0, 99999) AS i;
VACUUM ANALYZE queen.kv;
