-- one-op putIfAbsent of a fresh idempotency marker (ns bench_marker, key drawn
-- from 1e9, 1 h TTL): the insert path, as a consumer's marker
\set k random(1, 1000000000)
SELECT queen.kv_apply_v1(format('[{"op": "putIfAbsent","ns": "bench_marker","key": "m%s","value": true,"ttlSeconds": 3600}]', :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
