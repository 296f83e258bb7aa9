-- tests/sql/log_browse.sql: a partition's messages with their state per
-- group (pending, leased, consumed, dead), a transactionId's messages, and
-- delete (refused while leased); one message by partitionId and
-- transactionId: get, delete, retry (sql/log_browse.sql). Own tenant; rolled back.
BEGIN;
SELECT plan(24);
SELECT gen_random_uuid() AS t \gset

SELECT queen.log_configure_v1(:'t', 'b032', '{"retryLimit":0}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"b032","payload":1,"transactionId":"k1"},
                                {"queue":"b032","payload":2,"transactionId":"k2"},
                                {"queue":"b032","payload":3,"transactionId":"k3"},
                                {"queue":"b032","payload":4,"transactionId":"k4"}]') IS NOT NULL AS pushed;
SELECT p.id AS pid FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = :'t' AND q.name = 'b032' \gset
-- k1 consumed, k2 dead, k3 leased, k4 pending (queue mode).
SELECT queen.log_pop_v1(:'t', 'b032', NULL, NULL, 1, NULL, true, NULL) IS NOT NULL AS k1_consumed;
SELECT queen.log_pop_v1(:'t', 'b032', NULL, NULL, 1, NULL, false, NULL) IS NOT NULL AS k2_popped;
SELECT queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'k2', 'partitionId', :'pid', 'status', 'failed')), NULL) IS NOT NULL AS k2_dead;
SELECT queen.log_pop_v1(:'t', 'b032', NULL, NULL, 1, 300, false, NULL) IS NOT NULL AS k3_leased;

SELECT is((SELECT jsonb_agg(jsonb_build_array(m ->> 'transactionId', m ->> 'state'))
           FROM jsonb_array_elements(queen.log_messages_list_v1(:'t', 'b032', NULL, NULL, NULL, NULL) -> 'messages') m),
          '[["k1","consumed"],["k2","dead"],["k3","leased"],["k4","pending"]]'::jsonb,
          'each message with its state for queue mode');
SELECT is((SELECT jsonb_agg(m ->> 'state')
           FROM jsonb_array_elements(queen.log_messages_list_v1(:'t', 'b032', 'Default', 'other', NULL, NULL) -> 'messages') m),
          '["pending","pending","pending","pending"]'::jsonb, 'for a group that never popped: all pending');
SELECT is(queen.log_messages_list_v1(:'t', 'b032', NULL, NULL, 2, NULL) -> 'nextAfter', '2'::jsonb, 'a full page names its last offset');
SELECT is(queen.log_messages_list_v1(:'t', 'b032', NULL, NULL, 2, 2) #>> '{messages,0,transactionId}', 'k3', 'the next page starts after it');
SELECT is(queen.log_messages_list_v1(:'t', 'b032', 'nope', NULL, NULL, NULL) -> 'messages', '[]'::jsonb, 'an unknown partition: none');
SELECT is(queen.log_messages_list_v1(gen_random_uuid(), 'b032', NULL, NULL, NULL, NULL) -> 'messages', '[]'::jsonb, 'another tenant: none');
SELECT throws_ok(format($$ SELECT queen.log_messages_list_v1(%L, 'b032', NULL, NULL, 0, NULL) $$, :'t'), '22023', 'log_bad_limit', 'limit 0');
SELECT throws_ok(format($$ SELECT queen.log_messages_list_v1(%L, NULL, NULL, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_queue', 'queue required');

SELECT is((queen.log_message_get_v1(:'t', 'k4', NULL, NULL) #> '{messages,0}') - 'id' - 'partitionId' - 'createdAt',
          '{"transactionId":"k4","queue":"b032","partition":"Default","offset":4,"data":4,"traceId":null,
            "producer":null,"consumerGroup":"__QUEUE_MODE__","state":"pending"}'::jsonb, 'get by transactionId');
SELECT is(queen.log_message_get_v1(:'t', 'zz', NULL, NULL) -> 'messages', '[]'::jsonb, 'an unknown transactionId: none');
SELECT is(queen.log_message_at_v1(:'t', :'pid', 'k2', NULL) - 'id' - 'partitionId' - 'createdAt',
          '{"transactionId":"k2","queue":"b032","partition":"Default","offset":2,"data":2,"traceId":null,
            "producer":null,"consumerGroup":"__QUEUE_MODE__","state":"dead","errorMessage":null,"retryCount":1}'::jsonb,
          'by partitionId: the message, with its dead letter''s error and attempts');
SELECT is(queen.log_message_at_v1(:'t', :'pid', 'zz', NULL), 'null'::jsonb, 'by partitionId, none: null');
SELECT is(queen.log_message_at_v1(gen_random_uuid(), :'pid', 'k2', NULL), 'null'::jsonb, 'another tenant''s partition: null');
SELECT throws_ok(format($$ SELECT queen.log_message_at_v1(%L, 'nope', 'k2', NULL) $$, :'t'), '22023', 'log_bad_partition_id',
                 'a partitionId that is no uuid');
SELECT is(queen.log_message_delete_at_v1(gen_random_uuid(), :'pid', 'k4') ->> 'deleted', '0', 'another tenant deletes nothing');

SELECT throws_ok(format($$ SELECT queen.log_message_delete_v1(%L, 'b032', 'k3', NULL) $$, :'t'), '55000', 'log_message_leased',
                 'a leased message cannot be deleted');
SELECT is(queen.log_message_delete_v1(:'t', 'b032', 'k4', NULL), '{"deleted":1}'::jsonb, 'a pending one can');
SELECT is(queen.log_message_delete_v1(:'t', 'b032', 'k4', NULL), '{"deleted":0}'::jsonb, 'once');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'pid';
SELECT is(queen.log_message_delete_v1(:'t', 'b032', 'k3', 'Default'), '{"deleted":1}'::jsonb, 'after its lease expired, k3 too');
SELECT is(queen.log_pop_v1(:'t', 'b032', NULL, NULL, 10, NULL, true, NULL), NULL, 'nothing left to pop (the redelivery range is gone)');
SELECT is(queen.log_message_retry_v1(:'t', :'pid', 'k2') - 'partitionId',
          '{"retried":true,"requeued":1,"transactionId":"k2"}'::jsonb, 'retry requeues its dead letter');
SELECT is(queen.log_message_retry_v1(:'t', :'pid', 'k2') ->> 'retried', 'false', 'once');
SELECT is(queen.log_pop_v1(:'t', 'b032', NULL, NULL, 10, NULL, true, NULL) #>> '{messages,0,transactionId}', 'k2',
          'and the next pop delivers it');
SELECT is(queen.log_message_delete_at_v1(:'t', :'pid', 'k1') - 'partitionId', '{"deleted":1,"transactionId":"k1"}'::jsonb,
          'delete by partitionId');
SELECT * FROM finish();
ROLLBACK;
