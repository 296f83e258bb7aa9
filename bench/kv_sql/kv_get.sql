-- one-op kv_apply_v1 get
\set k random(1, 10000)
SELECT queen.kv_apply_v1(('[{"op": "get","ns": "bench","key": "k' || :k || '"}]')::jsonb, '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false);
