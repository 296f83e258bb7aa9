-- one-op kv_apply_v1 incr (delta 1, no limits, forever)
\set k random(1, 10000)
SELECT queen.kv_apply_v1(('[{"op": "incr","ns": "bench","key": "c' || :k || '","delta": 1,"forever": true}]')::jsonb, '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false);
