-- the PL/pgSQL floor for get: bench/pgbench/plpgsql_get_fn.sql, called as kv_get.sql calls kv_apply_v1
\set k random(0, 99999)
SELECT public.bench_plpgsql_get(format('[{"op": "get","ns": "bench","key": "k%s"}]', :k::int)::jsonb, '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
