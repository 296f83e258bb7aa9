-- tests/sql/streams.sql: streams (sql/streams.sql): registration by
-- name and configuration hash (resume, refusal, reset), the cycle (state,
-- sink push and source ack together, refused whole when the lease is gone),
-- the partial ack with and without releasing the lease, the state reads and
-- their filters, and the refusals of bad input. Own tenant; rolled back.
BEGIN;
SELECT plan(46);
SELECT gen_random_uuid() AS t \gset
SELECT gen_random_uuid() AS other \gset

-- Registration.
SELECT queen.streams_register_v1(:'t', '{"name":"agg","source_queue":"s040","sink_queue":"k040","config_hash":"h1"}') AS r \gset
SELECT is(:'r'::jsonb -> 'fresh', 'true'::jsonb, 'a new name is fresh');
SELECT is(:'r'::jsonb -> 'success', 'true'::jsonb, 'and succeeds');
SELECT :'r'::jsonb ->> 'query_id' AS qid \gset
SELECT queen.streams_register_v1(:'t', '{"name":"agg","source_queue":"s040","sink_queue":"k040","config_hash":"h1"}') AS r2 \gset
SELECT is(:'r2'::jsonb ->> 'query_id', :'qid', 'the same name and hash resumes the same query');
SELECT is(:'r2'::jsonb -> 'fresh', 'false'::jsonb, 'not fresh');
SELECT is(:'r2'::jsonb -> 'reset', 'false'::jsonb, 'nothing reset');
SELECT throws_ok($$SELECT queen.streams_register_v1('$$ || :'t' || $$',
                  '{"name":"agg","source_queue":"s040","config_hash":"h2"}')$$,
                 '55000', 'streams_config_mismatch', 'another hash for the same name is refused');
SELECT is((SELECT config_hash FROM queen.streams_queries WHERE id = :'qid'), 'h1', 'and the hash is unchanged');
SELECT isnt((queen.streams_register_v1(:'other', '{"name":"agg","source_queue":"s040","config_hash":"h2"}') ->> 'query_id'),
            :'qid', 'the same name in another tenant is another query');
SELECT throws_ok($$SELECT queen.streams_register_v1('$$ || :'t' || $$', '{"source_queue":"s040","config_hash":"h"}')$$,
                 '22023', 'streams_bad_name', 'a name is required');
SELECT throws_ok($$SELECT queen.streams_register_v1('$$ || :'t' || $$', '{"name":"x","config_hash":"h"}')$$,
                 '22023', 'log_bad_queue', 'a source queue is required');
SELECT throws_ok($$SELECT queen.streams_register_v1('$$ || :'t' || $$', '{"name":"x","source_queue":"s040"}')$$,
                 '22023', 'streams_bad_config_hash', 'a config hash is required');
SELECT throws_ok($$SELECT queen.streams_register_v1('$$ || :'t' || $$',
                  '{"name":"x","source_queue":"s040","config_hash":"h","reset":"yes"}')$$,
                 '22023', 'streams_bad_reset', 'reset is a boolean');
SELECT is((SELECT count(*) FROM queen.streams_queries WHERE tenant_id = :'t' AND name = 'x'), 0::bigint,
          'a refused registration writes nothing');

-- A batch of three on partition a, popped under a lease by the query's group.
SELECT queen.log_push_v1(:'t', '[{"queue":"s040","partition":"a","payload":{"n":1},"transactionId":"m1"},
                                {"queue":"s040","partition":"a","payload":{"n":2},"transactionId":"m2"},
                                {"queue":"s040","partition":"a","payload":{"n":3},"transactionId":"m3"}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 's040', 'a', 'g', 3, 60, false, NULL) AS pop \gset
SELECT :'pop'::jsonb ->> 'leaseId' AS lease, :'pop'::jsonb #>> '{messages,0,partitionId}' AS pid \gset
CREATE TEMP TABLE cyc AS SELECT jsonb_build_object('query_id', :'qid', 'partition_id', :'pid', 'consumer_group', 'g',
    'state_ops', '[{"type":"upsert","key":"w1","value":{"acc":6,"windowEnd":1000}},
                   {"type":"upsert","key":"w2","value":{"acc":1,"windowEnd":5000}},
                   {"type":"upsert","key":"gone","value":1}]'::jsonb,
    'push_items', '[{"queue":"k040","payload":{"sum":6},"transactionId":"out1"}]'::jsonb,
    'ack', jsonb_build_object('transactionId', 'm3', 'leaseId', :'lease', 'status', 'completed', 'count', 3)) AS body;

SELECT queen.streams_cycle_v1(:'t', (SELECT body FROM cyc), NULL) AS c \gset
SELECT is(:'c'::jsonb -> 'success', 'true'::jsonb, 'the cycle commits');
SELECT is(:'c'::jsonb -> 'state_ops_applied', '3'::jsonb, 'three state ops applied');
SELECT is(:'c'::jsonb ->> 'queueName', 's040', 'named by its source queue');
SELECT is(:'c'::jsonb #>> '{push_results,0,status}', 'queued', 'the sink message is queued');
SELECT is(:'c'::jsonb -> 'ack_result', '{"success":true,"count":3,"lease_released":true,"dlq":false}'::jsonb,
          'the ack reaches the end of the batch and ends the lease');
SELECT is((SELECT committed_offset FROM queen.log_consumers WHERE partition_id = :'pid' AND consumer_group = 'g'),
          3::bigint, 'the cursor is through m3');
SELECT is((SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 'k040'), 1::bigint,
          'one message in the sink');
SELECT is((SELECT value FROM queen.streams_state WHERE tenant_id = :'t' AND query_id = :'qid' AND key = 'w1'),
          '{"acc":6,"windowEnd":1000}'::jsonb, 'the state is written');

-- The same cycle again (a response lost, the worker retries): its lease is
-- gone, so nothing of it commits.
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'t' || $$', (SELECT body FROM cyc) ||
                   '{"state_ops":[{"type":"upsert","key":"w1","value":0}]}', NULL)$$,
                 '55000', 'streams_lease_lost', 'a cycle whose lease is gone is refused');
SELECT is((SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 'k040'), 1::bigint,
          'and pushes nothing');
SELECT is((SELECT value FROM queen.streams_state WHERE tenant_id = :'t' AND query_id = :'qid' AND key = 'w1'),
          '{"acc":6,"windowEnd":1000}'::jsonb, 'and changes no state');

-- State reads.
SELECT is(queen.streams_state_get_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid')) #>> '{rows,0,key}',
          'gone', 'every key, ascending');
SELECT is(jsonb_array_length(queen.streams_state_get_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid',
          'keys', '["w2","nope"]'::jsonb)) -> 'rows'), 1, 'keys: only those that exist');
SELECT is(jsonb_array_length(queen.streams_state_get_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid',
          'key_prefix', 'w')) -> 'rows'), 2, 'key_prefix');
SELECT is(queen.streams_state_get_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid',
          'ripe_at_or_before', 2000)) #>> '{rows,0,key}', 'w1', 'ripe_at_or_before: the windows ended by then');
SELECT ok(queen.streams_state_get_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid')) #>> '{rows,0,updated_at}'
          LIKE '____-__-__T__:__:__.______Z', 'updated_at is ISO-8601 UTC');
SELECT is(queen.streams_state_get_v1(:'other', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid')) -> 'rows',
          '[]'::jsonb, 'another tenant reads nothing of it');
SELECT throws_ok($$SELECT queen.streams_state_get_v1('$$ || :'t' || $$', '{"query_id":"nope","partition_id":"x"}')$$,
                 '22023', 'streams_bad_query_id', 'state/get: query_id is a uuid');

-- A flush: no ack, state delete and a push.
SELECT is(queen.streams_cycle_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid',
          'state_ops', '[{"type":"delete","key":"gone"}]'::jsonb,
          'push_items', '[{"queue":"k040","payload":{"flushed":true}}]'::jsonb, 'ack', NULL), NULL) -> 'ack_result',
          'null'::jsonb, 'a cycle without an ack commits state and push alone');
SELECT is((SELECT count(*) FROM queen.streams_state WHERE tenant_id = :'t' AND key = 'gone'), 0::bigint,
          'the delete is applied');

-- Partial acks: three more, popped; ack the first keeping the lease.
SELECT queen.log_push_v1(:'t', '[{"queue":"s040","partition":"a","payload":4,"transactionId":"m4"},
                                {"queue":"s040","partition":"a","payload":5,"transactionId":"m5"},
                                {"queue":"s040","partition":"a","payload":6,"transactionId":"m6"}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 's040', 'a', 'g', 3, 60, false, NULL) ->> 'leaseId' AS lease2 \gset
SELECT is(queen.streams_cycle_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid', 'consumer_group', 'g',
          'ack', jsonb_build_object('transactionId', 'm4', 'leaseId', :'lease2'), 'release_lease', false), NULL)
          #> '{ack_result,lease_released}', 'false'::jsonb, 'release_lease false: the tail stays leased');
SELECT is((SELECT lease_id::text FROM queen.log_consumers WHERE partition_id = :'pid' AND consumer_group = 'g'),
          :'lease2', 'to the same worker');
SELECT is(COALESCE(queen.log_pop_v1(:'t', 's040', 'a', 'g', 3, 60, false, NULL) -> 'messages', '[]'), '[]'::jsonb,
          'nobody else pops the tail meanwhile');
SELECT is(queen.streams_cycle_v1(:'t', jsonb_build_object('query_id', :'qid', 'partition_id', :'pid', 'consumer_group', 'g',
          'ack', jsonb_build_object('transactionId', 'm5', 'leaseId', :'lease2')), NULL)
          #> '{ack_result,lease_released}', 'true'::jsonb, 'release_lease true (default): the lease ends short of the batch');
SELECT is(queen.log_pop_v1(:'t', 's040', 'a', 'g', 3, 60, false, NULL) #>> '{messages,0,transactionId}', 'm6',
          'and the tail is popped at once, in order, from where the ack stopped');
SELECT is((SELECT committed_offset FROM queen.log_consumers WHERE partition_id = :'pid' AND consumer_group = 'g'),
          5::bigint, 'the tail was never acked');

-- Refusals.
SELECT queen.log_push_v1(:'t', '[{"queue":"elsewhere","payload":1}]') #>> '{0,partition_id}' AS foreign_pid \gset
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'t' || $$', '{"query_id":"$$ || :'qid' ||
                   $$","partition_id":"$$ || :'foreign_pid' || $$"}', NULL)$$,
                 '22023', 'streams_partition_not_source', 'a partition of another queue is refused');
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'other' || $$', '{"query_id":"$$ || :'qid' ||
                   $$","partition_id":"$$ || :'pid' || $$"}', NULL)$$,
                 '22023', 'streams_query_not_found', 'another tenant''s query is refused');
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'t' || $$', '{"query_id":"$$ || :'qid' ||
                   $$","partition_id":"$$ || :'pid' || $$","state_ops":[{"type":"merge","key":"k"}]}', NULL)$$,
                 '22023', 'streams_bad_state_op', 'an unknown state op is refused');
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'t' || $$', '{"query_id":"$$ || :'qid' ||
                   $$","partition_id":"$$ || :'pid' || $$","ack":{"transactionId":"m6"}}', NULL)$$,
                 '22023', 'streams_bad_ack', 'an ack without its lease is refused');
SELECT throws_ok($$SELECT queen.streams_cycle_v1('$$ || :'t' || $$', '{"query_id":"$$ || :'qid' ||
                   $$","partition_id":"$$ || :'pid' || $$","push_items":[{"payload":1}]}', NULL)$$,
                 '22023', NULL, 'a push item without a queue is refused by the push''s own check');

-- Reset: a new hash with consent deletes the state.
SELECT is(queen.streams_register_v1(:'t', '{"name":"agg","source_queue":"s040","config_hash":"h2","reset":true}') -> 'reset',
          'true'::jsonb, 'reset: true with another hash resets');
SELECT is((SELECT count(*) FROM queen.streams_state WHERE tenant_id = :'t' AND query_id = :'qid'), 0::bigint,
          'and deletes the query''s state');

SELECT * FROM finish();
ROLLBACK;
