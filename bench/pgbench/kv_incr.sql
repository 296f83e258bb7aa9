-- one-op incr through kv_apply_v1 (100k seeded counters, ns bench)
\set k random(0, 99999)
SELECT queen.kv_apply_v1(format('[{"op": "incr","ns": "bench","key": "k%s","delta": 1,"forever": true}]', :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
