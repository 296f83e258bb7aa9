-- one-op kv_apply_v1 put (unconditional upsert, forever)
\set k random(1, 10000)
SELECT queen.kv_apply_v1(('[{"op": "put","ns": "bench","key": "k' || :k || '","value": {"n": 1},"forever": true}]')::jsonb, '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false);
