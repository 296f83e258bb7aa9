-- tests/sql/004_log_pop.sql: log_pop_v1 (sql/004_log_pop.sql): body shape,
-- batch, one live lease per (partition, group), independent groups,
-- redelivery after expiry, autoAck, subscription modes, queue-level choice,
-- and every refusal. Expiry is simulated by moving lease_expires_at (now() is
-- frozen inside this transaction). Own tenant; rolled back.
BEGIN;
SELECT plan(38);
SELECT gen_random_uuid() AS t \gset

SELECT volatility_is('queen', 'log_pop_v1',
       ARRAY['uuid', 'text', 'text', 'text', 'integer', 'integer', 'boolean', 'text'], 'volatile', 'log_pop_v1 is VOLATILE');

SELECT is(queen.log_pop_v1(:'t', 't004_none', NULL, NULL, NULL, NULL, NULL, NULL), NULL, 'unknown queue: NULL (204)');
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't004_empty', '{}') $$, :'t'), 'configure an empty queue');
SELECT is(queen.log_pop_v1(:'t', 't004_empty', NULL, NULL, NULL, NULL, NULL, NULL), NULL, 'empty queue: NULL');

SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't004_a', 'payload', jsonb_build_object('n', i), 'transactionId', 'm' || i)) FROM generate_series(1, 5) i)) IS NOT NULL AS pushed;

CREATE TEMP TABLE p1 AS SELECT queen.log_pop_v1(:'t', 't004_a', NULL, NULL, 3, NULL, NULL, NULL) AS b;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(b) k),
          ARRAY['consumerGroup', 'leaseId', 'messages', 'partition', 'partitionId', 'queue', 'success'], 'body keys') FROM p1;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(b -> 'messages' -> 0) k),
          ARRAY['consumerGroup', 'createdAt', 'data', 'deliveryAttempt', 'id', 'leaseId', 'partition', 'partitionId', 'transactionId'],
          'message keys') FROM p1;
SELECT is(jsonb_array_length(b -> 'messages'), 3, 'batch 3 delivers 3') FROM p1;
SELECT is((SELECT array_agg(m ->> 'transactionId' ORDER BY o) FROM jsonb_array_elements(b -> 'messages') WITH ORDINALITY x(m, o)),
          ARRAY['m1', 'm2', 'm3'], 'in offset order') FROM p1;
SELECT is(b ->> 'consumerGroup', '__QUEUE_MODE__', 'default group') FROM p1;
SELECT is(b ->> 'partition', 'Default', 'partition name') FROM p1;
SELECT is(b -> 'messages' -> 0 -> 'data', '{"n":1}'::jsonb, 'data is the payload') FROM p1;
SELECT is((b -> 'messages' -> 0 ->> 'deliveryAttempt')::int, 1, 'first delivery: attempt 1') FROM p1;
SELECT is(b -> 'messages' -> 0 ->> 'leaseId', b ->> 'leaseId', 'every message carries the lease') FROM p1;
SELECT ok((b -> 'messages' -> 0 ->> 'createdAt') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$', 'createdAt is ISO-8601 UTC with microseconds') FROM p1;
SELECT is((SELECT lease_expires_at - now() FROM queen.log_consumers WHERE lease_id = (b ->> 'leaseId')::uuid),
          interval '60 seconds', 'lease defaults to the queue leaseTime (60 on an auto-created queue)') FROM p1;

SELECT is(queen.log_pop_v1(:'t', 't004_a', NULL, NULL, 3, NULL, NULL, NULL), NULL,
          'one live lease per (partition, group): a second pop gets nothing');
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 't004_a', 'Default', 'g2', 10, 30, NULL, NULL) -> 'messages'), 5,
          'another group has its own cursor and sees all 5');

-- Expiry: the same batch comes back with deliveryAttempt 2 and a new lease.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
WHERE lease_id = (SELECT (b ->> 'leaseId')::uuid FROM p1);
CREATE TEMP TABLE p2 AS SELECT queen.log_pop_v1(:'t', 't004_a', NULL, NULL, 10, 5, NULL, NULL) AS b;
SELECT is((SELECT array_agg(m ->> 'transactionId' ORDER BY o) FROM jsonb_array_elements(b -> 'messages') WITH ORDINALITY x(m, o)),
          ARRAY['m1', 'm2', 'm3'], 'an expired lease redelivers its batch, not more') FROM p2;
SELECT is((b -> 'messages' -> 0 ->> 'deliveryAttempt')::int, 2, 'with deliveryAttempt + 1') FROM p2;
SELECT isnt(b ->> 'leaseId', (SELECT b ->> 'leaseId' FROM p1), 'under a new lease') FROM p2;

-- autoAck: no lease, the cursor moves in the same call.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_auto","payload":1},{"queue":"t004_auto","payload":2}]') IS NOT NULL AS pushed;
CREATE TEMP TABLE p3 AS SELECT queen.log_pop_v1(:'t', 't004_auto', NULL, NULL, 1, NULL, true, NULL) AS b;
SELECT is(b -> 'leaseId', 'null'::jsonb, 'autoAck: leaseId null') FROM p3;
SELECT is((queen.log_pop_v1(:'t', 't004_auto', NULL, NULL, 5, NULL, true, NULL) -> 'messages' -> 0 -> 'data'), '2'::jsonb,
          'autoAck moved the cursor: the next pop gets the next message');
SELECT is(queen.log_pop_v1(:'t', 't004_auto', NULL, NULL, 5, NULL, true, NULL), NULL, 'and then nothing');

-- subscriptionMode: 'new' starts after what was pushed before the group's first pop.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_sub","payload":"old"}]') IS NOT NULL AS pushed;
UPDATE queen.log_messages m SET created_at = now() - interval '1 minute'
FROM queen.log_partitions p, queen.queues q
WHERE p.id = m.partition_id AND q.id = p.queue_id AND q.tenant_id = :'t' AND q.name = 't004_sub';
SELECT is(queen.log_pop_v1(:'t', 't004_sub', NULL, 'gnew', 10, NULL, NULL, 'new'), NULL, 'mode new: the old message is not delivered');
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_sub","payload":"fresh"},{"queue":"t004_sub","partition":"later","payload":"fresh2"}]') IS NOT NULL AS pushed;
SELECT is(queen.log_pop_v1(:'t', 't004_sub', 'Default', 'gnew', 10, NULL, NULL, 'new') -> 'messages' -> 0 -> 'data', '"fresh"'::jsonb,
          'mode new: a message pushed after the first pop is delivered');
SELECT is(queen.log_pop_v1(:'t', 't004_sub', 'later', 'gnew', 10, NULL, NULL, 'new') -> 'messages' -> 0 -> 'data', '"fresh2"'::jsonb,
          'mode new: a partition created after the first pop is new from its start');
SELECT is(queen.log_pop_v1(:'t', 't004_sub', 'Default', 'gall', 10, NULL, NULL, 'all') -> 'messages' -> 0 -> 'data', '"old"'::jsonb,
          'mode all: a new group starts at the beginning');

-- Queue-level pop picks a partition with work; partition pop sticks to its partition.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_q","partition":"x","payload":"x1"},{"queue":"t004_q","partition":"y","payload":"y1"}]') IS NOT NULL AS pushed;
CREATE TEMP TABLE p4 AS SELECT queen.log_pop_v1(:'t', 't004_q', NULL, NULL, 10, NULL, NULL, NULL) AS b;
CREATE TEMP TABLE p5 AS SELECT queen.log_pop_v1(:'t', 't004_q', NULL, NULL, 10, NULL, NULL, NULL) AS b;
SELECT is((SELECT array_agg(b ->> 'partition' ORDER BY b ->> 'partition') FROM (SELECT b FROM p4 UNION ALL SELECT b FROM p5) s),
          ARRAY['x', 'y'], 'two queue-level pops take the two partitions, one each');
SELECT is(queen.log_pop_v1(:'t', 't004_q', NULL, NULL, 10, NULL, NULL, NULL), NULL, 'a third finds both leased');
SELECT is(queen.log_pop_v1(:'t', 't004_q', 'nope', NULL, 10, NULL, NULL, NULL), NULL, 'unknown partition: NULL');

-- Refusals.
SELECT throws_ok($$ SELECT queen.log_pop_v1(NULL, 'q', NULL, NULL, NULL, NULL, NULL, NULL) $$, '22023', 'log_bad_tenant', 'NULL tenant');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, '', NULL, NULL, NULL, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_queue', 'empty queue');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', '', NULL, NULL, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_partition', 'empty partition');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, E'a\tb', NULL, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_group', 'control character in group');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, 0, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_batch', 'batch 0');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, 10001, NULL, NULL, NULL) $$, :'t'), '22023', 'log_bad_batch', 'batch 10001');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, NULL, 0, NULL, NULL) $$, :'t'), '22023', 'log_bad_lease_seconds', 'lease 0 s');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, NULL, NULL, NULL, 'latest') $$, :'t'), '22023', 'log_bad_subscription_mode', 'mode latest');

SELECT * FROM finish();
ROLLBACK;
