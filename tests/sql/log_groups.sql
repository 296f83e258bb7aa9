-- tests/sql/log_groups.sql: the consumer-group view (offsets, lag in
-- messages and seconds, lease holder), the lagging view, seek (beginning,
-- end, an instant; refused under a live lease) and delete
-- (sql/log_groups.sql). Own tenant; rolled back.
BEGIN;
SELECT plan(30);
SELECT gen_random_uuid() AS t \gset

SELECT queen.log_push_v1(:'t', '[{"queue":"q030","partition":"a","payload":1,"transactionId":"m1"},
                                {"queue":"q030","partition":"a","payload":2,"transactionId":"m2"},
                                {"queue":"q030","partition":"a","payload":3,"transactionId":"m3"},
                                {"queue":"q030","partition":"b","payload":4,"transactionId":"m4"}]') IS NOT NULL AS pushed;
-- m1 and m2 are an hour old, m3 a minute; m4 (partition b) two hours.
UPDATE queen.log_messages m SET created_at = now() - CASE m.transaction_id WHEN 'm1' THEN interval '1 hour'
                                                                        WHEN 'm2' THEN interval '1 hour'
                                                                        WHEN 'm3' THEN interval '1 minute'
                                                                        ELSE interval '2 hours' END
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = m.partition_id AND q.tenant_id = :'t';
-- Group g consumes m1 on a (autoAck) and holds a lease on b.
SELECT queen.log_pop_v1(:'t', 'q030', 'a', 'g', 1, NULL, true, NULL) IS NOT NULL AS consumed;
SELECT queen.log_pop_v1(:'t', 'q030', 'b', 'g', 1, 60, false, NULL) -> 'leaseId' AS lease \gset

SELECT queen.log_groups_v1(:'t', NULL, NULL) AS v \gset
SELECT is(jsonb_array_length(:'v'::jsonb -> 'consumerGroups'), 1, 'one group');
SELECT is(:'v'::jsonb #>> '{consumerGroups,0,name}', 'g', 'named g');
SELECT is(:'v'::jsonb #> '{consumerGroups,0,queues,0,partitions,0,committedOffset}', '1'::jsonb, 'a: committed offset 1');
SELECT is(:'v'::jsonb #> '{consumerGroups,0,queues,0,partitions,0,lagMessages}', '2'::jsonb, 'a: two messages behind');
SELECT ok((:'v'::jsonb #>> '{consumerGroups,0,queues,0,partitions,0,lagSeconds}')::int BETWEEN 3599 AND 3700,
          'a: lag in seconds is the age of m2, the oldest unconsumed');
SELECT is(:'v'::jsonb #> '{consumerGroups,0,queues,0,partitions,0,leaseId}', 'null'::jsonb, 'a: no lease (autoAck)');
SELECT is(:'v'::jsonb #> '{consumerGroups,0,queues,0,partitions,1,leaseId}', :'lease'::jsonb, 'b: the live lease is shown');
SELECT ok(:'v'::jsonb #>> '{consumerGroups,0,queues,0,partitions,1,leaseExpiresAt}' IS NOT NULL, 'b: with its expiry');
SELECT is(:'v'::jsonb #> '{consumerGroups,0,lagMessages}', '3'::jsonb, 'the group sums its lag (2 on a, 1 on b)');
SELECT ok((:'v'::jsonb #>> '{consumerGroups,0,lagSeconds}')::int >= 7199, 'and takes the largest age (m4, 2 hours)');

-- The lagging view.
SELECT is(jsonb_array_length(queen.log_groups_v1(:'t', NULL, 5400) #> '{consumerGroups,0,queues,0,partitions}'), 1,
          'lagging 90 min: only b');
SELECT is(queen.log_groups_v1(:'t', NULL, 9000) -> 'consumerGroups', '[]'::jsonb, 'lagging 2.5 h: none');
SELECT throws_ok(format($$ SELECT queen.log_groups_v1(%L, NULL, -1) $$, :'t'), '22023', 'log_bad_seconds', 'minLagSeconds < 0');

-- Seek is refused while b's lease is live, and moves nothing.
SELECT throws_ok(format($$ SELECT queen.log_group_seek_v1(%L, 'g', 'q030', 'beginning') $$, :'t'), '55000', 'log_group_leased',
                 'seek under a live lease: refused');
SELECT is((SELECT committed_offset FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
           WHERE p.name = 'a' AND c.consumer_group = 'g' AND p.queue_id = (SELECT id FROM queen.queues WHERE tenant_id = :'t')),
          1::bigint, 'the refused seek moved nothing');
SELECT throws_ok(format($$ SELECT queen.log_group_delete_v1(%L, 'g', NULL) $$, :'t'), '55000', 'log_group_leased',
                 'delete under a live lease: refused');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE lease_id = (:'lease'::jsonb #>> '{}')::uuid;

SELECT throws_ok(format($$ SELECT queen.log_group_seek_v1(%L, 'g', 'q030', 'yesterday') $$, :'t'), '22023', 'log_bad_seek', 'a bad target');
SELECT throws_ok(format($$ SELECT queen.log_group_seek_v1(%L, 'g', 'nope', 'end') $$, :'t'), '22023', 'log_no_such_queue', 'an unknown queue');
-- To an instant half an hour ago: m3 (a minute old) is delivered again, m1 and m2 are skipped.
SELECT is(queen.log_group_seek_v1(:'t', 'g', 'q030', to_char(now() - interval '30 minutes', 'YYYY-MM-DD"T"HH24:MI:SSOF')) -> 'partitions',
          (SELECT jsonb_build_array(jsonb_build_object('partition', 'a', 'partitionId', pa.id, 'committedOffset', 2),
                                    jsonb_build_object('partition', 'b', 'partitionId', pb.id, 'committedOffset', 1))
           FROM queen.log_partitions pa, queen.log_partitions pb, queen.queues q
           WHERE q.tenant_id = :'t' AND pa.queue_id = q.id AND pb.queue_id = q.id AND pa.name = 'a' AND pb.name = 'b'),
          'seek to an instant: each partition before its first message at or after it');
SELECT is(queen.log_pop_v1(:'t', 'q030', 'a', 'g', 10, NULL, true, NULL) #>> '{messages,0,transactionId}', 'm3', 'the pop resumes at m3');
SELECT is((queen.log_group_seek_v1(:'t', 'g', 'q030', 'beginning') #>> '{partitions,0,committedOffset}')::int, 0, 'to the beginning');
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 'q030', 'a', 'g', 10, NULL, true, NULL) -> 'messages'), 3, 'everything again');
-- A group that never popped: seek to the end gives it cursors there.
SELECT is((queen.log_group_seek_v1(:'t', 'h', 'q030', 'end') #>> '{partitions,0,committedOffset}')::int, 3, 'a new group sought to the end');
SELECT is(queen.log_pop_v1(:'t', 'q030', NULL, 'h', 10, NULL, true, NULL), NULL, 'so it has nothing to read');

-- The subscription start: moved on every queue the group reads, its cursors untouched.
SELECT is(queen.log_group_subscription_v1(:'t', 'g', '2000-01-02T03:04:05Z'),
          '{"consumerGroup":"g","subscriptionTimestamp":"2000-01-02T03:04:05.000000Z","queues":1}'::jsonb,
          'the group''s subscription moves');
SELECT is((SELECT start_at FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
           WHERE q.tenant_id = :'t' AND q.name = 'q030' AND s.consumer_group = 'g'),
          '2000-01-02T03:04:05Z'::timestamptz, 'its start_at');
SELECT is(queen.log_group_subscription_v1(:'t', 'nobody', 'now') ->> 'queues', '0', 'a group without subscriptions: none moved');
SELECT throws_ok(format($$ SELECT queen.log_group_subscription_v1(%L, 'g', 'yesterday') $$, :'t'), '22023',
                 'log_bad_subscription_from', 'not an instant');
SELECT throws_ok(format($$ SELECT queen.log_group_subscription_v1(%L, 'g', NULL) $$, :'t'), '22023',
                 'log_bad_subscription_from', 'none');
SELECT is(queen.log_group_delete_v1(:'t', 'g', NULL), '{"consumerGroup":"g","deleted":2}'::jsonb, 'delete the group''s two cursors');
SELECT * FROM finish();
ROLLBACK;
