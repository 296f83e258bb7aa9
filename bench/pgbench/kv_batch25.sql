-- 25 ops in one kv_apply_v1 call, each drawn 60% incr / 30% get / 10%
-- putIfAbsent over the 100k seeded keys; keys base + i*4001 (mod 100000) are
-- distinct, so no key is written twice in one call
\set base random(0, 99999)
SELECT queen.kv_apply_v1((SELECT jsonb_agg(CASE WHEN r < 0.6 THEN jsonb_build_object('op','incr','ns','bench','key','k' || ((:base::int + i * 4001) % 100000),'delta',1,'forever',true) WHEN r < 0.9 THEN jsonb_build_object('op','get','ns','bench','key','k' || ((:base::int + i * 4001) % 100000)) ELSE jsonb_build_object('op','putIfAbsent','ns','bench','key','k' || ((:base::int + i * 4001) % 100000),'value',true,'forever',true) END ORDER BY i) FROM (SELECT i, random() AS r FROM generate_series(0, 24) AS i) s), '00000000-0000-0000-0000-000000000001'::uuid, NULL, false);
