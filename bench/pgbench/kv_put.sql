-- one-op put through kv_apply_v1 (100k keys, ns bench_put, small object value)
-- (the JSON has a space after every colon: pgbench would read ":word" as a variable)
\set k random(0, 99999)
SELECT queen.kv_apply_v1(format('[{"op": "put","ns": "bench_put","key": "k%s","value": {"n": %s,"s": "bench"},"forever": true}]', :k::int, :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
