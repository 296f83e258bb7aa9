-- tests/sql/log_status.sql: the status reads (counts from offsets), the
-- analytics buckets, moving a message to the dead letters, the database's
-- statistics (sql/log_status.sql). Own tenant; rolled back.
BEGIN;
SELECT plan(23);
SELECT gen_random_uuid() AS t \gset
SELECT queen.log_configure_v1(:'t', 'r039a', '{"retryLimit":4}', 'n39', NULL) IS NOT NULL AS a;
SELECT queen.log_configure_v1(:'t', 'r039z', NULL, 'n39', NULL) IS NOT NULL AS z;
SELECT queen.log_push_v1(:'t', '[{"queue":"r039a","partition":"x","payload":1,"transactionId":"x1"},
                                {"queue":"r039a","partition":"x","payload":2,"transactionId":"x2"},
                                {"queue":"r039a","partition":"x","payload":3,"transactionId":"x3"},
                                {"queue":"r039a","partition":"y","payload":4,"transactionId":"y1"}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 'r039a', 'x', NULL, 1, 300, false, NULL) IS NOT NULL AS leased;

-- The list: queue mode's counts, newest first, paged.
SELECT queen.log_status_queues_v1(:'t', 'n39', NULL, NULL, NULL) AS s \gset
SELECT is(jsonb_array_length(:'s'::jsonb -> 'queues'), 2, 'both queues of the namespace');
SELECT is((SELECT e -> 'messages' FROM jsonb_array_elements(:'s'::jsonb -> 'queues') e WHERE e ->> 'name' = 'r039a'),
          '{"total":4,"pending":3,"processing":1}'::jsonb, 'total, pending and the leased one');
SELECT is((SELECT e -> 'partitions' FROM jsonb_array_elements(:'s'::jsonb -> 'queues') e WHERE e ->> 'name' = 'r039a'),
          '2'::jsonb, 'two partitions');
SELECT is(:'s'::jsonb -> 'pagination', '{"limit":100,"offset":0}'::jsonb, 'the default page');
SELECT is(jsonb_array_length(queen.log_status_queues_v1(:'t', NULL, NULL, 1, 1) -> 'queues'), 1, 'limit and offset');
SELECT is(queen.log_status_queues_v1(:'t', 'other', NULL, NULL, NULL) -> 'queues', '[]'::jsonb, 'another namespace: none');
SELECT throws_ok(format($$ SELECT queen.log_status_queues_v1(%L, NULL, NULL, 0, NULL) $$, :'t'), '22023',
                 'log_bad_limit', 'limit 0');
SELECT throws_ok(format($$ SELECT queen.log_status_queues_v1(%L, NULL, NULL, NULL, -1) $$, :'t'), '22023',
                 'log_bad_offset', 'offset < 0');

-- One queue: per partition, completed after an ack.
SELECT queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'x1', 'partitionId',
           (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.tenant_id = :'t' AND q.name = 'r039a' AND p.name = 'x'), 'status', 'completed')), NULL)
       IS NOT NULL AS acked;
SELECT queen.log_status_queue_v1(:'t', 'r039a') AS d \gset
SELECT is((SELECT e -> 'messages' FROM jsonb_array_elements(:'d'::jsonb -> 'partitions') e WHERE e ->> 'name' = 'x'),
          '{"total":3,"pending":2,"processing":0,"completed":1,"failed":0,"deadLetter":0}'::jsonb,
          'partition x: one completed, two pending');
SELECT is(:'d'::jsonb #> '{totals,messages,total}', '4'::jsonb, 'totals');
SELECT is(:'d'::jsonb #> '{queue,config,retryLimit}', '4'::jsonb, 'the configuration');
SELECT is(queen.log_status_queue_v1(:'t', 'nope'), 'null'::jsonb, 'an unknown queue: null');

-- Analytics: every message pushed in this (rolled-back) transaction is in one bucket.
SELECT queen.log_status_analytics_v1(:'t', NULL, NULL, 'minute', 'r039a', NULL, NULL) AS an \gset
SELECT is((SELECT sum((e ->> 'messages')::int) FROM jsonb_array_elements(:'an'::jsonb -> 'dataPoints') e), 4::bigint,
          'four messages pushed');
SELECT is(jsonb_array_length(:'an'::jsonb -> 'dataPoints'), 1441, 'a day of minutes, every bucket present');
SELECT throws_ok(format($$ SELECT queen.log_status_analytics_v1(%L, NULL, NULL, 'week', NULL, NULL, NULL) $$, :'t'),
                 '22023', 'log_bad_interval', 'interval week');
SELECT throws_ok(format($$ SELECT queen.log_status_analytics_v1(%L, 'yesterday', NULL, NULL, NULL, NULL, NULL) $$, :'t'),
                 '22023', 'log_bad_from', 'from yesterday');
SELECT throws_ok(format($$ SELECT queen.log_status_analytics_v1(%L, '2020-01-02', '2020-01-01', NULL, NULL, NULL, NULL) $$,
                        :'t'), '22023', 'log_bad_range', 'from after to');

-- Moving to the dead letters: leased refused, queue mode's when nobody read
-- the queue, consumed refused, the message gone.
SELECT p.id AS px FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = :'t' AND q.name = 'r039a' AND p.name = 'x' \gset
SELECT queen.log_pop_v1(:'t', 'r039a', 'x', NULL, 1, 300, false, NULL) IS NOT NULL AS leased2;
SELECT throws_ok(format($$ SELECT queen.log_message_dlq_v1(%L, %L, 'x2') $$, :'t', :'px'), '55000',
                 'log_message_leased', 'a leased message stays');
SELECT queen.log_push_v1(:'t', '[{"queue":"r039z","payload":{"k":1},"transactionId":"z1"},
                                {"queue":"r039z","payload":{"k":2},"transactionId":"z2"}]') IS NOT NULL AS pushed_z;
SELECT p.id AS pz FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = :'t' AND q.name = 'r039z' \gset
SELECT is(queen.log_message_dlq_v1(:'t', :'pz', 'z2') #>> '{deadLetters,0,consumerGroup}', '__QUEUE_MODE__',
          'nobody read the queue: queue mode''s dead letter');
SELECT is((SELECT jsonb_build_array(d.reason, d.error, d.payload) FROM queen.log_dead_letters d
           WHERE d.tenant_id = :'t' AND d.transaction_id = 'z2'),
          '["moved","moved to the dead letters by an operator",{"k":2}]'::jsonb, 'the dead letter');
SELECT is(queen.log_message_dlq_v1(:'t', :'pz', 'z2'), 'null'::jsonb, 'the message is gone');
SELECT queen.log_pop_v1(:'t', 'r039z', NULL, 'g', 1, NULL, true, NULL) IS NOT NULL AS g_read;
SELECT throws_ok(format($$ SELECT queen.log_message_dlq_v1(%L, %L, 'z1') $$, :'t', :'pz'), '55000',
                 'log_message_consumed', 'every group consumed it: nothing written');

SELECT ok(queen.system_pg_stats_v1() -> 'tableSizes' @> '[{"table":"log_messages"}]', 'the database''s table sizes');
SELECT * FROM finish();
ROLLBACK;
