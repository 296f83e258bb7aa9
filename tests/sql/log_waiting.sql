-- tests/sql/log_waiting.sql: log_poppable_v1 (sql/log_waiting.sql)
-- agrees with what log_pop_v1 could take: per key, the partitions with a
-- message past the group's cursor and no live lease; partition keys, groups,
-- labels, expired leases, acks, unknown queues and junk input. Own tenant;
-- rolled back.
BEGIN;
SELECT plan(16);
SELECT gen_random_uuid() AS t \gset

SELECT volatility_is('queen', 'log_poppable_v1', ARRAY['jsonb'], 'stable', 'log_poppable_v1 is STABLE (read-only)');

-- keys: 0 the queue (queue mode), 1 its partition p1, 2 its partition p9
-- (never pushed), 3 group g1, 4 an unknown queue, 5 by labels, 6 another queue.
SELECT jsonb_build_array(
    jsonb_build_object('t', :'t', 'q', 't037_a'),
    jsonb_build_object('t', :'t', 'q', 't037_a', 'p', 'p1'),
    jsonb_build_object('t', :'t', 'q', 't037_a', 'p', 'p9'),
    jsonb_build_object('t', :'t', 'q', 't037_a', 'g', 'g1'),
    jsonb_build_object('t', :'t', 'q', 't037_none'),
    jsonb_build_object('t', :'t', 'ns', 't037_ns', 'g', 'g2'),
    jsonb_build_object('t', :'t', 'q', 't037_b')) AS keys \gset

CREATE TEMP TABLE r AS SELECT * FROM queen.log_poppable_v1(:'keys');
SELECT is((SELECT count(*) FROM r), 0::bigint, 'nothing pushed: no key is ready');

SELECT queen.log_configure_v1(:'t', 't037_a', '{}', 't037_ns', NULL, NULL) IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', jsonb_build_array(
    jsonb_build_object('queue', 't037_a', 'partition', 'p1', 'payload', 1),
    jsonb_build_object('queue', 't037_a', 'partition', 'p2', 'payload', 2),
    jsonb_build_object('queue', 't037_a', 'partition', 'p2', 'payload', 3))) IS NOT NULL AS pushed;

CREATE TEMP TABLE r1 AS SELECT * FROM queen.log_poppable_v1(:'keys');
SELECT is((SELECT ready FROM r1 WHERE key_index = 0), 2, 'queue key: two partitions to claim');
SELECT is((SELECT ready FROM r1 WHERE key_index = 1), 1, 'partition key p1: ready');
SELECT ok(NOT EXISTS (SELECT 1 FROM r1 WHERE key_index IN (2, 4, 6)), 'p9, an unknown queue, an empty queue: absent');
SELECT is((SELECT ready FROM r1 WHERE key_index = 3), 2, 'a group with no cursor sees every partition with a message');
SELECT is((SELECT ready FROM r1 WHERE key_index = 5), 2, 'by labels: the labelled queue''s partitions');

-- A pop of p1 (queue mode) holds its lease: p1 is not claimable for queue mode,
-- still is for g1 (groups are separate consumers).
CREATE TEMP TABLE popped AS SELECT queen.log_pop_v1(:'t', 't037_a', 'p1', NULL, 10, NULL, false, NULL) AS b;
CREATE TEMP TABLE r2 AS SELECT * FROM queen.log_poppable_v1(:'keys');
SELECT is((SELECT ready FROM r2 WHERE key_index = 0), 1, 'a live lease: that partition no longer counts');
SELECT ok(NOT EXISTS (SELECT 1 FROM r2 WHERE key_index = 1), 'p1 leased: its key is absent');
SELECT is((SELECT ready FROM r2 WHERE key_index = 3), 2, 'another group still sees both');

-- The lease expires: claimable again (as the pop would redeliver it).
UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 second'
FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE c.partition_id = p.id AND q.tenant_id = :'t' AND p.name = 'p1' AND c.consumer_group = '__QUEUE_MODE__';
SELECT is((SELECT ready FROM queen.log_poppable_v1(:'keys') WHERE key_index = 1), 1, 'an expired lease counts again');

-- Redelivered under a fresh lease, then acked: consumed, nothing left on p1.
CREATE TEMP TABLE popped2 AS SELECT queen.log_pop_v1(:'t', 't037_a', 'p1', NULL, 10, NULL, false, NULL) AS b;
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object(
              'transactionId', b -> 'messages' -> 0 ->> 'transactionId',
              'partitionId', b ->> 'partitionId', 'leaseId', b ->> 'leaseId', 'status', 'completed')), NULL)
          -> 0 -> 'success', 'true'::jsonb, 'acked') FROM popped2;
SELECT ok(NOT EXISTS (SELECT 1 FROM queen.log_poppable_v1(:'keys') WHERE key_index = 1), 'consumed: p1 absent');

-- What it says agrees with what a pop then takes: ready says 1, one pop claims
-- p2, and after it nothing is ready.
SELECT isnt(queen.log_pop_v1(:'t', 't037_a', NULL, NULL, 10, NULL, true, NULL), NULL, 'the one ready partition pops');
SELECT ok(NOT EXISTS (SELECT 1 FROM queen.log_poppable_v1(:'keys') WHERE key_index = 0), 'then nothing is ready');

SELECT is((SELECT count(*) FROM queen.log_poppable_v1('{"not": "an array"}')), 0::bigint, 'not an array: nothing');

SELECT * FROM finish();
ROLLBACK;
