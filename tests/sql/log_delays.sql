-- tests/sql/log_delays.sql: delayedProcessing and maxWaitTimeSeconds at
-- their boundaries, in pop and in the maintenance step (sql/log_delays.sql, log_pop.sql).
-- now() is fixed inside the transaction, so created_at is set to the exact
-- boundary. Own tenant; rolled back.
BEGIN;
SELECT plan(17);
SELECT gen_random_uuid() AS t \gset

-- delayedProcessing 60: a message exactly 60 s old is visible, one a
-- microsecond younger is not, and it holds back everything after it.
SELECT is(queen.log_configure_v1(:'t', 'd031', '{"delayedProcessing":60}') #> '{options,delayedProcessing}', '60'::jsonb,
          'delayedProcessing is configured');
SELECT ok(NOT (queen.log_configure_v1(:'t', 'd031', '{}') -> 'storedOnly') ? 'delayedProcessing',
          'and no longer listed as stored only');
SELECT queen.log_push_v1(:'t', '[{"queue":"d031","payload":1,"transactionId":"d1"},
                                {"queue":"d031","payload":2,"transactionId":"d2"},
                                {"queue":"d031","payload":3,"transactionId":"d3"}]') IS NOT NULL AS pushed;
SELECT is(queen.log_pop_v1(:'t', 'd031', NULL, NULL, 10, NULL, true, NULL), NULL, 'just pushed: invisible');
UPDATE queen.log_messages m SET created_at = CASE m.transaction_id
        WHEN 'd1' THEN now() - interval '60 seconds'
        WHEN 'd2' THEN now() - interval '60 seconds' + interval '1 microsecond'
        ELSE now() - interval '1 hour' END
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'd031';
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(
              queen.log_pop_v1(:'t', 'd031', NULL, NULL, 10, NULL, true, NULL) -> 'messages') e),
          '["d1"]'::jsonb, 'exactly 60 s old: delivered; 1 us younger: held, and d3 behind it too (FIFO)');
UPDATE queen.log_messages m SET created_at = now() - interval '61 seconds'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'd031' AND m.transaction_id = 'd2';
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(
              queen.log_pop_v1(:'t', 'd031', NULL, NULL, 10, NULL, true, NULL) -> 'messages') e),
          '["d2","d3"]'::jsonb, 'once d2 is old enough, d2 and d3');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'd031', '{"delayedProcessing":-1}') $$, :'t'), '22023',
                 'log_bad_options', 'a negative delay is refused');

-- maxWaitTimeSeconds 60: exactly 60 s old is delivered; older goes to the
-- dead letters with reason expired.
SELECT queen.log_configure_v1(:'t', 'w031', '{"maxWaitTimeSeconds":60}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"w031","payload":1,"transactionId":"w1"},
                                {"queue":"w031","payload":2,"transactionId":"w2"},
                                {"queue":"w031","payload":3,"transactionId":"w3"}]') IS NOT NULL AS pushed;
UPDATE queen.log_messages m SET created_at = CASE m.transaction_id
        WHEN 'w1' THEN now() - interval '60 seconds' - interval '1 microsecond'
        WHEN 'w2' THEN now() - interval '60 seconds'
        ELSE now() END
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'w031';
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(
              queen.log_pop_v1(:'t', 'w031', NULL, NULL, 10, NULL, true, NULL) -> 'messages') e),
          '["w2","w3"]'::jsonb, 'pop: 1 us past maxWait expired, exactly maxWait delivered');
SELECT is((SELECT jsonb_agg(jsonb_build_array(m ->> 'transactionId', m ->> 'reason', m -> 'retryCount'))
           FROM jsonb_array_elements(queen.log_dlq_list_v1(:'t', 'w031', NULL, NULL, 10, NULL) -> 'messages') m),
          '[["w1","expired",0]]'::jsonb, 'w1 is a dead letter, reason expired');

-- The maintenance step: a group that stopped popping.
SELECT queen.log_push_v1(:'t', '[{"queue":"w031","payload":4,"transactionId":"w4"},
                                {"queue":"w031","payload":5,"transactionId":"w5"}]') IS NOT NULL AS pushed_more;
UPDATE queen.log_messages m SET created_at = now() - interval '2 minutes'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'w031' AND m.transaction_id = 'w4';
SELECT throws_ok($$ SELECT queen.log_expire_step_v1(now(), -1) $$, '22023', 'log_bad_request', 'max_rows < 0');
SELECT ok((queen.log_expire_step_v1(now(), 1000) ->> 'expired')::int >= 1, 'the step expires w4');
SELECT is((SELECT count(*)::int FROM queen.log_dead_letters WHERE tenant_id = :'t' AND transaction_id = 'w4' AND reason = 'expired'),
          1, 'w4 is an expired dead letter, once');
SELECT is((queen.log_expire_step_v1(now(), 1000) ->> 'expired')::int, 0, 'a second step expires nothing of ours');
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(
              queen.log_pop_v1(:'t', 'w031', NULL, NULL, 10, NULL, true, NULL) -> 'messages') e),
          '["w5"]'::jsonb, 'the group resumes at w5');
-- A live lease keeps the step off the cursor.
SELECT queen.log_push_v1(:'t', '[{"queue":"w031","payload":6,"transactionId":"w6"}]') IS NOT NULL AS pushed_w6;
SELECT queen.log_pop_v1(:'t', 'w031', NULL, NULL, 1, 300, false, NULL) IS NOT NULL AS leased;
UPDATE queen.log_messages m SET created_at = now() - interval '2 minutes'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'w031' AND m.transaction_id = 'w6';
SELECT lives_ok($$ SELECT queen.log_expire_step_v1(now(), 1000) $$, 'the step runs');
SELECT is((SELECT count(*)::int FROM queen.log_dead_letters WHERE tenant_id = :'t' AND transaction_id = 'w6'), 0,
          'a message in a live lease is not expired under its consumer');
-- A queue nobody popped: queue mode's cursor is made and its head expired.
SELECT queen.log_configure_v1(:'t', 'n031', '{"maxWaitTimeSeconds":30}') IS NOT NULL AS configured_n;
SELECT queen.log_push_v1(:'t', '[{"queue":"n031","payload":1,"transactionId":"n1"}]') IS NOT NULL AS pushed_n;
UPDATE queen.log_messages m SET created_at = now() - interval '31 seconds'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t' AND q.name = 'n031';
SELECT lives_ok($$ SELECT queen.log_expire_step_v1(now(), 1000) $$, 'the step runs again');
SELECT is((SELECT consumer_group || '/' || reason FROM queen.log_dead_letters WHERE tenant_id = :'t' AND transaction_id = 'n1'),
          '__QUEUE_MODE__/expired', 'a never-popped queue: expired for queue mode');
SELECT * FROM finish();
ROLLBACK;
