-- one-op putIfAbsent over the 100k seeded keys (ns bench): the key exists, so
-- the verdict is applied:false/exists (this is the mix's 10%)
\set k random(0, 99999)
SELECT queen.kv_apply_v1(format('[{"op": "putIfAbsent","ns": "bench","key": "k%s","value": true,"forever": true}]', :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
