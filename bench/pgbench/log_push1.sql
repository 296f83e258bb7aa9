-- one-message push through log_push_v1, one call per transaction, as the
-- broker sends it alone: its NOTIFY deferred (sql/log_push.sql says why), 16 partitions
-- of queue bench_push drawn per call like bench/push.lua
-- (the JSON has a space after every colon: pgbench would read ":word" as a variable)
\set p random(0, 15)
WITH settings AS MATERIALIZED (SELECT set_config('queen.notify', 'after_commit', true))
SELECT queen.log_push_v1('00000000-0000-0000-0000-000000000001'::uuid, format('[{"queue": "bench_push","partition": "p%s","payload": {"n": 1,"s": "bench"}}]', :p::int)::jsonb)::text FROM settings;
