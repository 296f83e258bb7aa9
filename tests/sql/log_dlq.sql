-- tests/sql/log_dlq.sql: dead letters listed with a keyset cursor,
-- requeued (once, for their group only, attempt reset) and deleted
-- (sql/log_dlq.sql). Own tenants; rolled back.
BEGIN;
SELECT plan(32);
SELECT gen_random_uuid() AS t, gen_random_uuid() AS other \gset

SELECT queen.log_configure_v1(:'t', 'q029', '{"retryLimit":0}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"q029","partition":"p","payload":{"n":1},"transactionId":"a"},
                                {"queue":"q029","partition":"p","payload":{"n":2},"transactionId":"b"},
                                {"queue":"q029","partition":"p","payload":{"n":3},"transactionId":"c"}]') IS NOT NULL AS pushed;
SELECT p.id AS pid FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = :'t' AND q.name = 'q029' \gset

-- a and b fail once each: retryLimit 0 sends them to the dead letters.
SELECT queen.log_pop_v1(:'t', 'q029', NULL, NULL, 1, NULL, false, NULL) -> 'messages' -> 0 ->> 'transactionId' AS first \gset
SELECT is(:'first'::text, 'a', 'the first pop delivers a');
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'a', 'partitionId', :'pid', 'status', 'failed', 'error', 'boom')), NULL) -> 0 ->> 'dlq',
          'true', 'a failed past retryLimit 0: dead letter');
SELECT queen.log_pop_v1(:'t', 'q029', NULL, NULL, 1, NULL, false, NULL) IS NOT NULL AS popped_b;
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'b', 'partitionId', :'pid', 'status', 'failed')), NULL) -> 0 ->> 'dlq',
          'true', 'b too');

SELECT queen.log_dlq_list_v1(:'t', 'q029', NULL, NULL, NULL, NULL) AS all_ \gset
SELECT is(jsonb_array_length(:'all_'::jsonb -> 'messages'), 2, 'two dead letters listed');
SELECT is((:'all_'::jsonb -> 'messages' -> 0) - 'id' - 'messageId' - 'partitionId' - 'createdAt' - 'failedAt',
          '{"transactionId":"a","queue":"q029","partition":"p","consumerGroup":"__QUEUE_MODE__","offset":1,
            "data":{"n":1},"errorMessage":"boom","retryCount":1,"reason":"failed"}'::jsonb,
          'a dead letter carries its transactionId, payload, error, attempts and reason');
SELECT is(:'all_'::jsonb -> 'nextAfter', 'null'::jsonb, 'a page that is not full has no nextAfter');
SELECT (:'all_'::jsonb -> 'messages' -> 0 ->> 'id')::bigint AS ida, (:'all_'::jsonb -> 'messages' -> 1 ->> 'id')::bigint AS idb \gset

-- The keyset cursor.
SELECT is(queen.log_dlq_list_v1(:'t', NULL, NULL, NULL, 1, NULL) -> 'nextAfter', to_jsonb(:ida::bigint), 'a full page names its last id');
SELECT is(queen.log_dlq_list_v1(:'t', NULL, NULL, NULL, 1, :ida) -> 'messages' -> 0 ->> 'transactionId', 'b', 'after the first id: b');
SELECT is((queen.log_dlq_list_v1(:'t', NULL, NULL, NULL, 1, :ida) ->> 'total')::int, 2, 'total counts every page, not this one');
SELECT is((queen.log_dlq_list_v1(:'t', 'q029', 'other', NULL, 10, 0) ->> 'total')::int, 0, 'total follows the filters');
SELECT is(queen.log_dlq_list_v1(:'t', NULL, NULL, NULL, 1, :idb) -> 'messages', '[]'::jsonb, 'after the last id: nothing');
-- Filters and isolation.
SELECT is(jsonb_array_length(queen.log_dlq_list_v1(:'t', 'q029', 'p', '__QUEUE_MODE__', 10, 0) -> 'messages'), 2, 'queue, partition and group filters match');
SELECT is(queen.log_dlq_list_v1(:'t', 'q029', 'other', NULL, 10, 0) -> 'messages', '[]'::jsonb, 'another partition: none');
SELECT is(queen.log_dlq_list_v1(:'t', NULL, NULL, 'g9', 10, 0) -> 'messages', '[]'::jsonb, 'another group: none');
SELECT is(queen.log_dlq_list_v1(:'other', NULL, NULL, NULL, 10, 0) -> 'messages', '[]'::jsonb, 'another tenant sees none');
SELECT is((queen.log_dlq_requeue_v1(:'other', 'q029', NULL, NULL) ->> 'requeued')::int, 0, 'another tenant requeues none');
-- Refusals.
SELECT throws_ok(format($$ SELECT queen.log_dlq_list_v1(%L, NULL, NULL, NULL, 0, NULL) $$, :'t'), '22023', 'log_bad_limit', 'limit 0');
SELECT throws_ok(format($$ SELECT queen.log_dlq_list_v1(%L, NULL, NULL, NULL, NULL, -1) $$, :'t'), '22023', 'log_bad_after', 'after -1');
SELECT throws_ok(format($$ SELECT queen.log_dlq_requeue_v1(%L, 'q029', '[1.5]', NULL) $$, :'t'), '22023', 'log_bad_ids', 'ids of non-integers');
SELECT throws_ok(format($$ SELECT queen.log_dlq_requeue_v1(%L, 'q029', '{}', NULL) $$, :'t'), '22023', 'log_bad_ids', 'ids not an array');
SELECT throws_ok(format($$ SELECT queen.log_dlq_requeue_v1(%L, '', NULL, NULL) $$, :'t'), '22023', 'log_bad_queue', 'requeue needs a queue');
SELECT throws_ok(format($$ SELECT queen.log_dlq_delete_v1(%L, NULL, NULL) $$, :'t'), '22023', 'log_bad_request', 'delete needs an id or a queue');

-- Requeue a: once.
SELECT queen.log_dlq_requeue_v1(:'t', 'q029', jsonb_build_array(:ida), NULL) AS rq \gset
SELECT is((:'rq'::jsonb ->> 'requeued')::int, 1, 'a requeued');
SELECT is((:'rq'::jsonb ->> 'remaining')::int, 1, 'b remains');
SELECT is((queen.log_dlq_requeue_v1(:'t', 'q029', jsonb_build_array(:ida), NULL) ->> 'requeued')::int, 0,
          'requeueing a again appends nothing');
-- c comes first (it was never delivered), then the requeued a, as attempt 1.
SELECT queen.log_pop_v1(:'t', 'q029', NULL, NULL, 10, NULL, true, NULL) -> 'messages' AS got \gset
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(:'got'::jsonb) e), '["c","a"]'::jsonb,
          'the group gets c, then the requeued a');
SELECT is(:'got'::jsonb -> 1 -> 'deliveryAttempt', '1'::jsonb, 'the requeued message starts at attempt 1');
SELECT is(:'got'::jsonb -> 1 -> 'data', '{"n":1}'::jsonb, 'with its payload');
-- Another group reads the log from the start and never sees the copy.
SELECT is((SELECT jsonb_agg(e ->> 'transactionId') FROM jsonb_array_elements(
              queen.log_pop_v1(:'t', 'q029', NULL, 'g2', 10, NULL, true, NULL) -> 'messages') e),
          '["a","b","c"]'::jsonb, 'another group sees the original three, not the copy');
-- An ack of a by g2 (already consumed) stays a no-op: the copy is not g2's.
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'a', 'partitionId', :'pid')), 'g2') -> 0 ->> 'noop',
          'true', 'the ack lookup skips a copy meant for another group');

-- Delete.
SELECT is(queen.log_dlq_delete_v1(:'t', :idb, NULL), '{"deleted":1}'::jsonb, 'b deleted by id');
SELECT is(queen.log_dlq_delete_v1(:'t', NULL, 'q029'), '{"deleted":0}'::jsonb, 'nothing left to delete');

SELECT * FROM finish();
ROLLBACK;
