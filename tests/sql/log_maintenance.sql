-- tests/sql/log_maintenance.sql: log_partition_dead_v1, the reclaim step
-- and retention (sql/log_maintenance.sql). Uses timestamps far in the
-- past (or far ahead) so rows of concurrently running tests never qualify.
-- Own tenant; rolled back.
BEGIN;
SELECT plan(30);
SELECT gen_random_uuid() AS t \gset

SELECT function_lang_is('queen', 'log_partition_dead_v1', ARRAY['uuid', 'timestamp with time zone', 'integer'], 'sql',
                        'log_partition_dead_v1 is LANGUAGE sql (tables resolved when log_maintenance.sql is applied)');
SELECT volatility_is('queen', 'log_partition_dead_v1', ARRAY['uuid', 'timestamp with time zone', 'integer'], 'stable',
                     'log_partition_dead_v1 is STABLE');
SELECT isnt_strict('queen', 'log_partition_dead_v1', ARRAY['uuid', 'timestamp with time zone', 'integer'],
                   'log_partition_dead_v1 is not STRICT (total: NULL -> false)');
SELECT ok((SELECT prosrc FROM pg_proc WHERE oid = 'queen.log_partition_dead_v1(uuid, timestamptz, integer)'::regprocedure) !~ 'queen\.kv\M',
          'log_partition_dead_v1 never names the kv');

SELECT queen.log_push_v1(:'t', '[{"queue":"t006_a","payload":1,"transactionId":"a1"},{"queue":"t006_b","payload":1}]') IS NOT NULL AS pushed;
SELECT p.id AS pa FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't006_a' \gset
SELECT p.id AS pb FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't006_b' \gset
-- Age both partitions ten years: only they are idle for 9 years.
UPDATE queen.log_partitions SET last_push_at = now() - interval '10 years' WHERE id IN (:'pa', :'pb');

SELECT is(queen.log_partition_dead_v1(gen_random_uuid(), now(), 0), false, 'unknown partition: not dead');
SELECT is(queen.log_partition_dead_v1(:'pa', NULL, 0), false, 'NULL now: false, not NULL');
SELECT is(queen.log_partition_dead_v1(:'pa', now(), 0), false, 'a partition holding a message is alive');

-- Consume a1, then retention removes it (it is old and every group is past it).
SELECT queen.log_pop_v1(:'t', 't006_a', NULL, NULL, 10, NULL, true, NULL) IS NOT NULL AS consumed;
SELECT is(queen.log_retention_step_v1(now(), 100) -> 'deleted', '0', 'retention 0 keeps consumed messages');
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't006_a', '{"retentionSeconds":60}') $$, :'t'), 'retentionSeconds 60');
SELECT is(queen.log_retention_step_v1(now(), 100) -> 'deleted', '0', 'a consumed message younger than retention stays');
UPDATE queen.log_messages SET created_at = now() - interval '10 years' WHERE partition_id IN (:'pa', :'pb');
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't006_b', '{"retentionSeconds":60}') $$, :'t'), 'retention on b too');
SELECT is((queen.log_retention_step_v1(now(), 100) ->> 'deleted')::int >= 1, true, 'retention deletes the old consumed message');
SELECT is((SELECT count(*)::int FROM queen.log_messages WHERE partition_id = :'pa'), 0, 'partition a is empty');
SELECT is((SELECT count(*)::int FROM queen.log_messages WHERE partition_id = :'pb'), 1,
          'a partition no group has popped keeps its messages');

SELECT is(queen.log_partition_dead_v1(:'pa', now(), 9 * 365 * 86400), true, 'empty, idle, no live lease: dead');
SELECT is(queen.log_partition_dead_v1(:'pa', now() - interval '10 years 1 day', 0), false, 'not idle at that instant: alive');
UPDATE queen.log_consumers SET lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' WHERE partition_id = :'pa';
SELECT is(queen.log_partition_dead_v1(:'pa', now(), 9 * 365 * 86400), false, 'a live lease keeps it alive');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'pa';
SELECT is(queen.log_partition_dead_v1(:'pa', now(), 9 * 365 * 86400), true, 'an expired lease does not');

-- A ready row left on it (one no pop has visited since it drained).
INSERT INTO queen.log_ready (subscription_id, partition_id)
SELECT s.id, :'pa' FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
WHERE q.tenant_id = :'t' AND q.name = 't006_a'
ON CONFLICT DO NOTHING;
SELECT is(queen.log_partition_reclaim_step_v1(now(), 9 * 365 * 86400, 100), '{"deleted":1}'::jsonb, 'the reclaim step deletes exactly the dead one');
SELECT is((SELECT count(*)::int FROM queen.log_ready WHERE partition_id = :'pa'), 0,
          'its ready rows went with it (found through the queue''s subscriptions)');
SELECT is((SELECT count(*)::int FROM queen.log_partitions WHERE id IN (:'pa', :'pb')), 1, 'a is gone, b (holding a message) stays');
SELECT is((SELECT count(*)::int FROM queen.log_consumers WHERE partition_id = :'pa'), 0, 'its cursors went with it');

-- completedRetentionSeconds alone (the reference broker's name for the same rule).
SELECT queen.log_push_v1(:'t', '[{"queue":"t006_c","payload":1},{"queue":"t006_c","payload":2}]') IS NOT NULL AS pushed;
SELECT p.id AS pc FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't006_c' \gset
SELECT queen.log_pop_v1(:'t', 't006_c', NULL, NULL, 1, NULL, true, NULL) IS NOT NULL AS consumed_one;
UPDATE queen.log_messages SET created_at = now() - interval '10 years' WHERE partition_id = :'pc';
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't006_c', '{"completedRetentionSeconds":60}') $$, :'t'),
                'completedRetentionSeconds 60, retentionSeconds 0');
SELECT is((queen.log_retention_step_v1(now(), 100) ->> 'deleted')::int >= 1, true,
          'completedRetentionSeconds drops the old consumed message');
SELECT is((SELECT array_agg(msg_offset) FROM queen.log_messages WHERE partition_id = :'pc'), ARRAY[2::bigint],
          'the unconsumed one stays');

-- The sweeper's steps read the partitions of queues that have their option
-- and no others: 300 partitions of a queue with neither, every message
-- consumed and old, are neither read nor emptied (this transaction's table
-- counters; the expiry step reads a partition twice, for cursors and heads).
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't006_none', 'partition', 'p' || i, 'payload', i))
                                FROM generate_series(1, 300) AS i)) IS NOT NULL AS pushed_many;
SELECT count(*) AS consumed_many
FROM (SELECT queen.log_pop_v1(:'t', 't006_none', NULL, NULL, 1, NULL, true, NULL) FROM generate_series(1, 300)) AS x;
UPDATE queen.log_messages m SET created_at = now() - interval '10 years'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE m.partition_id = p.id AND q.tenant_id = :'t' AND q.name = 't006_none';
-- partition_rows_read(sql): rows of log_partitions read while sql ran.
CREATE FUNCTION pg_temp.partition_rows_read(p_sql text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE v_before bigint;
BEGIN
    SELECT COALESCE(sum(seq_tup_read + idx_tup_fetch), 0) INTO v_before
    FROM pg_stat_xact_user_tables WHERE relid = 'queen.log_partitions'::regclass;
    EXECUTE p_sql;
    RETURN (SELECT COALESCE(sum(seq_tup_read + idx_tup_fetch), 0) FROM pg_stat_xact_user_tables
            WHERE relid = 'queen.log_partitions'::regclass) - v_before;
END $$;
SELECT cmp_ok(pg_temp.partition_rows_read('SELECT queen.log_retention_step_v1(now(), 100000)'),
              '<=', (SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                     WHERE q.retention_seconds > 0 OR q.completed_retention_seconds > 0),
              'retention reads only the partitions of queues that have a retention');
SELECT cmp_ok(pg_temp.partition_rows_read('SELECT queen.log_expire_step_v1(now(), 100000)'),
              '<=', (SELECT 2 * count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                     WHERE (q.stored_options ->> 'maxWaitTimeSeconds')::integer > 0),
              'the expiry step reads only the partitions of queues that have maxWaitTimeSeconds');
SELECT is((SELECT count(*)::int FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't006_none'), 300,
          'a queue without a retention keeps its consumed messages');

SELECT throws_ok($$ SELECT queen.log_partition_reclaim_step_v1(now(), NULL, 1) $$, '22023', 'log_bad_request', 'reclaim: NULL idle');
SELECT throws_ok($$ SELECT queen.log_retention_step_v1(now(), -1) $$, '22023', 'log_bad_request', 'retention: negative max');

SELECT * FROM finish();
ROLLBACK;
