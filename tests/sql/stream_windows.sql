-- tests/sql/stream_windows.sql: stream windows (sql/stream_windows.sql):
-- define, windows handed out in order with their messages, one holder per
-- window, nack and lease expiry handing the window out again, ack
-- advancing, the watermark and grace, partitioned keys, renew, seek, and
-- the refusals of bad input. Message times are set by UPDATE (a push stamps
-- now()). Own tenant; rolled back.
BEGIN;
SELECT plan(53);
SELECT gen_random_uuid() AS t \gset
SELECT gen_random_uuid() AS other \gset

-- Define.
SELECT queen.stream_window_define_v1(:'t', '{"name":"sw","namespace":"ns","source_queue_names":["q041"],
    "window_type":"tumbling","window_duration_ms":1000,"window_grace_period_ms":500,
    "window_lease_timeout_ms":60000}') AS d \gset
SELECT is(:'d'::jsonb -> 'created', 'true'::jsonb, 'a new stream is created');
SELECT :'d'::jsonb ->> 'streamId' AS sid \gset
SELECT is(queen.stream_window_define_v1(:'t', '{"name":"sw","source_queue_names":["q041"],"window_duration_ms":1000,
    "window_grace_period_ms":500,"window_lease_timeout_ms":60000}') ->> 'streamId', :'sid',
    'defining it again keeps the stream');
SELECT throws_ok($$SELECT queen.stream_window_define_v1('$$ || :'t' || $$', '{"source_queue_names":["q"]}')$$,
                 '22023', 'streams_window_bad_name', 'a name is required');
SELECT throws_ok($$SELECT queen.stream_window_define_v1('$$ || :'t' || $$', '{"name":"x","source_queue_names":[]}')$$,
                 '22023', 'streams_window_bad_sources', 'at least one source queue');
SELECT throws_ok($$SELECT queen.stream_window_define_v1('$$ || :'t' || $$', '{"name":"x","source_queue_names":["q"],
                   "window_type":"sliding"}')$$, '22023', 'streams_window_bad_config', 'only tumbling windows');
SELECT throws_ok($$SELECT queen.stream_window_define_v1('$$ || :'t' || $$', '{"name":"x","source_queue_names":["q"],
                   "window_duration_ms":0}')$$, '22023', 'streams_window_bad_config', 'a duration of at least 1 ms');
SELECT throws_ok($$SELECT queen.stream_window_define_v1('$$ || :'t' || $$', '{"name":"x","source_queue_names":["q"],
                   "partitioned":"yes"}')$$, '22023', 'streams_window_bad_config', 'partitioned is a boolean');
SELECT is((SELECT count(*) FROM queen.stream_windows WHERE tenant_id = :'t' AND name = 'x'), 0::bigint,
          'a refused definition writes nothing');

-- Nothing pushed yet: no window.
SELECT is(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window', 'null'::jsonb,
          'no message, no window');
SELECT throws_ok($$SELECT queen.stream_window_poll_v1('$$ || :'t' || $$', '{"streamName":"nope","consumerGroup":"g"}')$$,
                 '22023', 'streams_window_not_found', 'an undefined stream is refused');
SELECT throws_ok($$SELECT queen.stream_window_poll_v1('$$ || :'other' || $$', '{"streamName":"sw","consumerGroup":"g"}')$$,
                 '22023', 'streams_window_not_found', 'another tenant does not see it');
SELECT throws_ok($$SELECT queen.stream_window_poll_v1('$$ || :'t' || $$', '{"streamName":"sw"}')$$,
                 '22023', 'log_bad_group', 'a consumer group is required');

-- Six messages in three windows of 1 s (two each, partitions a and b),
-- 100 s ago: the watermark (now) is past all of them.
SELECT queen.log_push_v1(:'t', '[{"queue":"q041","partition":"a","payload":{"n":1},"transactionId":"m1"},
    {"queue":"q041","partition":"b","payload":{"n":2},"transactionId":"m2"},
    {"queue":"q041","partition":"a","payload":{"n":3},"transactionId":"m3"},
    {"queue":"q041","partition":"b","payload":{"n":4},"transactionId":"m4"},
    {"queue":"q041","partition":"a","payload":{"n":5},"transactionId":"m5"},
    {"queue":"q041","partition":"a","payload":{"n":6},"transactionId":"m6"}]') IS NOT NULL AS pushed;
SELECT to_timestamp(floor(extract(epoch FROM now())) - 100) AS base \gset
UPDATE queen.log_messages m SET created_at = :'base'::timestamptz + make_interval(secs =>
    CASE m.transaction_id WHEN 'm1' THEN 0.1 WHEN 'm2' THEN 0.2 WHEN 'm3' THEN 1.1 WHEN 'm4' THEN 1.2
                          WHEN 'm5' THEN 2.1 ELSE 2.9 END)
FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
WHERE m.partition_id = lp.id AND q.tenant_id = :'t';

SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window' AS w1 \gset
SELECT is(:'w1'::jsonb ->> 'key', '__GLOBAL__', 'an unpartitioned stream has one key');
SELECT is((:'w1'::jsonb ->> 'start')::timestamptz, :'base'::timestamptz, 'the first window starts at its aligned start');
SELECT is((:'w1'::jsonb ->> 'end')::timestamptz, :'base'::timestamptz + interval '1 second', 'and lasts the duration');
SELECT is(jsonb_path_query_array(:'w1'::jsonb, '$.messages[*].payload.n'), '[1,2]'::jsonb,
          'with its messages, in time order, across partitions');
SELECT is(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window', 'null'::jsonb,
          'a second consumer of the group does not get the leased window');
SELECT is(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"h"}') #>> '{window,start}',
          :'w1'::jsonb ->> 'start', 'another group gets the same window');

-- Nack: the same window again, under a new lease.
SELECT is(queen.stream_window_ack_v1(:'t', jsonb_build_object('windowId', :'w1'::jsonb -> 'id',
          'leaseId', :'w1'::jsonb -> 'leaseId', 'success', false)) -> 'acked', 'false'::jsonb, 'a nack is taken');
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window' AS w1b \gset
SELECT is(:'w1b'::jsonb ->> 'id', :'w1'::jsonb ->> 'id', 'a nacked window is handed out again');
SELECT isnt(:'w1b'::jsonb ->> 'leaseId', :'w1'::jsonb ->> 'leaseId', 'under a new lease');
SELECT throws_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"$$ || (:'w1'::jsonb ->> 'leaseId') || $$"}')$$,
                 '55000', 'streams_window_lease_lost', 'the old lease acks nothing');

-- Lease expiry: the same window again.
UPDATE queen.stream_window_cursors SET lease_expires_at = now() - interval '1 second'
WHERE lease_id = (:'w1b'::jsonb ->> 'leaseId')::uuid;
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window' AS w1c \gset
SELECT is(:'w1c'::jsonb ->> 'id', :'w1'::jsonb ->> 'id', 'an expired lease hands the window out again');
SELECT throws_ok($$SELECT queen.stream_window_renew_v1('$$ || :'t' || $$', '{"leaseId":"$$ || (:'w1b'::jsonb ->> 'leaseId') || $$"}')$$,
                 '55000', 'streams_window_lease_lost', 'the expired lease cannot be renewed');
SELECT ok((queen.stream_window_renew_v1(:'t', jsonb_build_object('leaseId', :'w1c'::jsonb -> 'leaseId', 'extend_ms', 120000))
           ->> 'leaseExpiresAt')::timestamptz > now() + interval '100 seconds', 'the live lease is renewed');
SELECT throws_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"$$ || (:'w1c'::jsonb ->> 'leaseId') || $$","windowId":"other"}')$$,
                 '55000', 'streams_window_lease_lost', 'an ack naming another window is refused');
SELECT throws_ok($$SELECT queen.stream_window_ack_v1('$$ || :'other' || $$', '{"leaseId":"$$ || (:'w1c'::jsonb ->> 'leaseId') || $$"}')$$,
                 '55000', 'streams_window_lease_lost', 'another tenant cannot ack it');

-- Ack: the next windows, in order.
SELECT is(queen.stream_window_ack_v1(:'t', jsonb_build_object('windowId', :'w1'::jsonb -> 'id',
          'leaseId', :'w1c'::jsonb -> 'leaseId', 'success', true)) -> 'acked', 'true'::jsonb, 'an ack is taken');
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window' AS w2 \gset
SELECT is((:'w2'::jsonb ->> 'start')::timestamptz, :'base'::timestamptz + interval '1 second', 'the ack advances to window 2');
SELECT is(jsonb_path_query_array(:'w2'::jsonb, '$.messages[*].payload.n'), '[3,4]'::jsonb, 'with its messages');
SELECT lives_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"$$ || (:'w2'::jsonb ->> 'leaseId') || $$"}')$$,
                'success defaults to true');
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window' AS w3 \gset
SELECT is(jsonb_path_query_array(:'w3'::jsonb, '$.messages[*].payload.n'), '[5,6]'::jsonb, 'window 3');
SELECT lives_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"$$ || (:'w3'::jsonb ->> 'leaseId') || $$"}')$$,
                'window 3 acked');
SELECT is(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window', 'null'::jsonb,
          'nothing after the last window');

-- The watermark and grace: a message now is in a window not yet closed.
SELECT queen.log_push_v1(:'t', '[{"queue":"q041","partition":"a","payload":{"n":7},"transactionId":"m7"}]') IS NOT NULL AS p2;
SELECT is(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}') -> 'window', 'null'::jsonb,
          'a window whose end plus grace the watermark has not reached is not handed out');

-- Seek: back to window 2 (any time inside it).
SELECT is(queen.stream_window_seek_v1(:'t', jsonb_build_object('streamName', 'sw', 'consumerGroup', 'g',
          'timestamp', queen.log_iso_v1(:'base'::timestamptz + interval '1.5 seconds'))) ->> 'timestamp',
          queen.log_iso_v1(:'base'::timestamptz + interval '1 second'), 'seek goes to the start of the window');
SELECT is(jsonb_path_query_array(queen.stream_window_poll_v1(:'t', '{"streamName":"sw","consumerGroup":"g"}'),
          '$.window.messages[*].payload.n'), '[3,4]'::jsonb, 'and window 2 is handed out again');
SELECT throws_ok($$SELECT queen.stream_window_seek_v1('$$ || :'t' || $$', '{"streamName":"sw","consumerGroup":"g","timestamp":"soon"}')$$,
                 '22023', 'streams_window_bad_timestamp', 'a seek needs a time');

-- Partitioned: one key per partition name.
SELECT queen.stream_window_define_v1(:'t', '{"name":"sp","source_queue_names":["q041"],"partitioned":true,
    "window_duration_ms":1000,"window_grace_period_ms":0}') IS NOT NULL AS d2;
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sp","consumerGroup":"g"}') -> 'window' AS pa \gset
SELECT queen.stream_window_poll_v1(:'t', '{"streamName":"sp","consumerGroup":"g"}') -> 'window' AS pb \gset
SELECT is(ARRAY[:'pa'::jsonb ->> 'key', :'pb'::jsonb ->> 'key'], ARRAY['a', 'b'], 'each partition is a key, leased apart');
SELECT is(jsonb_path_query_array(:'pa'::jsonb, '$.messages[*].payload.n'), '[1]'::jsonb, 'key a has its own messages');
SELECT is(jsonb_path_query_array(:'pb'::jsonb, '$.messages[*].payload.n'), '[2]'::jsonb, 'and key b its own');

-- Bad bodies.
SELECT throws_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"x"}')$$,
                 '22023', 'streams_window_bad_lease', 'a lease id is a uuid');
SELECT throws_ok($$SELECT queen.stream_window_ack_v1('$$ || :'t' || $$', '{"leaseId":"$$ || gen_random_uuid() || $$","success":1}')$$,
                 '22023', 'streams_window_bad_success', 'success is a boolean');
SELECT throws_ok($$SELECT queen.stream_window_renew_v1('$$ || :'t' || $$', '{"leaseId":"$$ || gen_random_uuid() || $$","extend_ms":-1}')$$,
                 '22023', 'streams_window_bad_config', 'extend_ms is positive');

-- The resource reads and the delete.
SELECT is(jsonb_path_query_array(queen.stream_window_list_v1(:'t'), '$.streams[*].name'), '["sp","sw"]'::jsonb,
          'the list names the tenant''s streams by name');
SELECT is(jsonb_path_query_first(queen.stream_window_list_v1(:'t'), '$.streams[*] ? (@.name == "sw").consumerGroups'),
          '2'::jsonb, 'with their consumer groups');
SELECT is(queen.stream_window_stats_v1(:'t'), '{"totalStreams":2,"activeLeases":4}'::jsonb,
          'stats count streams and live leases (sw: g and h; sp: a and b)');
SELECT is(queen.stream_window_get_v1(:'t', 'sw') -> 'sourceQueues', '["q041"]'::jsonb, 'a stream by name');
SELECT is(queen.stream_window_get_v1(:'other', 'sw'), 'null'::jsonb, 'not another tenant''s');
SELECT is(jsonb_path_query_array(queen.stream_window_consumers_v1(:'t', 'sp'), '$.consumers[*].streamKey'),
          '["a","b"]'::jsonb, 'its consumers per group and key');
SELECT is(queen.stream_window_delete_v1(:'other', 'sw'), 'null'::jsonb, 'another tenant cannot delete it');
SELECT is(queen.stream_window_delete_v1(:'t', 'sw') -> 'success', 'true'::jsonb, 'a delete');
SELECT is((SELECT count(*) FROM queen.stream_window_cursors WHERE stream_id = :'sid'), 0::bigint,
          'takes the groups'' places with it');

SELECT * FROM finish();
ROLLBACK;
