-- tests/sql/log_resources.sql: overview, namespaces and tasks, a queue's
-- detail and partitions, clear (refused while leased)
-- (sql/log_resources.sql). Own tenant; rolled back.
BEGIN;
SELECT plan(18);
SELECT gen_random_uuid() AS t \gset
SELECT queen.log_configure_v1(:'t', 'r036a', '{"leaseTime":30}', 'billing', 'invoice') IS NOT NULL AS a;
SELECT queen.log_configure_v1(:'t', 'r036b', NULL, 'billing', NULL) IS NOT NULL AS b;
SELECT queen.log_push_v1(:'t', '[{"queue":"r036a","partition":"x","payload":1},{"queue":"r036a","partition":"y","payload":2},
                                {"queue":"r036a","partition":"y","payload":3}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 'r036a', 'x', 'g', 1, NULL, true, NULL) IS NOT NULL AS consumed;

SELECT queen.log_overview_v1(:'t') AS o \gset
SELECT is(:'o'::jsonb -> 'queues', '2'::jsonb, 'two queues');
SELECT is(:'o'::jsonb -> 'partitions', '2'::jsonb, 'two partitions');
SELECT is(:'o'::jsonb #> '{messages,total}', '3'::jsonb, 'three messages');
SELECT is(:'o'::jsonb -> 'pushedLastMinute', '3'::jsonb, 'all three pushed in the last minute');
SELECT is(:'o'::jsonb -> 'consumerGroups', '1'::jsonb, 'one consumer group');
SELECT is(queen.log_labels_v1(:'t', 'namespace'), '{"namespaces":[{"name":"billing","queues":2}]}'::jsonb, 'namespaces');
SELECT is(queen.log_labels_v1(:'t', 'task'), '{"tasks":[{"name":"invoice","queues":1}]}'::jsonb, 'tasks');
SELECT throws_ok(format($$ SELECT queen.log_labels_v1(%L, 'x') $$, :'t'), '22023', 'log_bad_request', 'a bad kind');

SELECT queen.log_queue_detail_v1(:'t', 'r036a') AS d \gset
SELECT is(jsonb_build_array(:'d'::jsonb -> 'namespace', :'d'::jsonb -> 'partitions', :'d'::jsonb #> '{options,leaseTime}',
                            :'d'::jsonb #> '{messages,total}'),
          '["billing",2,30,3]'::jsonb, 'detail: labels, partitions, options, messages');
SELECT throws_ok(format($$ SELECT queen.log_queue_detail_v1(%L, 'nope') $$, :'t'), '22023', 'log_no_such_queue', 'unknown queue');
SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'name', e -> 'messages', e -> 'headOffset'))
           FROM jsonb_array_elements(queen.log_queue_partitions_v1(:'t', 'r036a') -> 'partitions') e),
          '[["x",1,1],["y",2,2]]'::jsonb, 'partitions with their counts and heads');

SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'name', (e ->> 'depth')::int, e ->> 'namespace'))
           FROM jsonb_array_elements(queen.log_partitions_v1(:'t', NULL, NULL, NULL) -> 'partitions') e),
          '[["y",2,"billing"],["x",1,"billing"]]'::jsonb, 'the tenant''s partitions, deepest first (queue mode''s depth)');
SELECT is(jsonb_array_length(queen.log_partitions_v1(:'t', 'r036a', 2, NULL) -> 'partitions'), 1, 'minDepth');
SELECT is(queen.log_partitions_v1(gen_random_uuid(), NULL, NULL, NULL) -> 'partitions', '[]'::jsonb, 'another tenant: none');
SELECT throws_ok(format($$ SELECT queen.log_partitions_v1(%L, NULL, -1, NULL) $$, :'t'), '22023', 'log_bad_depth', 'minDepth < 0');
SELECT queen.log_pop_v1(:'t', 'r036a', 'y', NULL, 1, 300, false, NULL) IS NOT NULL AS leased;
SELECT throws_ok(format($$ SELECT queen.log_queue_clear_v1(%L, 'r036a') $$, :'t'), '55000', 'log_message_leased',
                 'clear is refused under a live lease');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
WHERE partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                       WHERE q.tenant_id = :'t' AND q.name = 'r036a');
SELECT is(queen.log_queue_clear_v1(:'t', 'r036a'), '{"queue":"r036a","deleted":3}'::jsonb, 'clear deletes every message');
SELECT is(queen.log_pop_v1(:'t', 'r036a', NULL, NULL, 10, NULL, true, NULL), NULL, 'nothing left to pop');
SELECT * FROM finish();
ROLLBACK;
