-- one-op get through kv_apply_v1 (100k seeded keys, ns bench)
\set k random(0, 99999)
SELECT queen.kv_apply_v1(format('[{"op": "get","ns": "bench","key": "k%s"}]', :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
