-- tests/sql/log_pop.sql: log_pop_v1 (sql/log_pop.sql): body shape,
-- batch, one live lease per (partition, group), independent groups,
-- redelivery after expiry, autoAck, subscription modes, queue-level choice,
-- and every refusal. Expiry is simulated by moving lease_expires_at (now() is
-- frozen inside this transaction). Own tenant; rolled back.
BEGIN;
SELECT plan(93);
SELECT gen_random_uuid() AS t \gset

SELECT volatility_is('queen', 'log_pop_v1',
       ARRAY['uuid', 'text', 'text', 'text', 'integer', 'integer', 'boolean', 'text', 'text', 'integer'], 'volatile',
       'log_pop_v1 is VOLATILE');

SELECT is(queen.log_pop_v1(:'t', 't004_none', NULL, NULL, NULL, NULL, NULL, NULL), NULL, 'unknown queue: NULL (204)');
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't004_empty', '{}') $$, :'t'), 'configure an empty queue');
SELECT is(queen.log_pop_v1(:'t', 't004_empty', NULL, NULL, NULL, NULL, NULL, NULL), NULL, 'empty queue: NULL');

SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't004_a', 'payload', jsonb_build_object('n', i), 'transactionId', 'm' || i)) FROM generate_series(1, 5) i)) IS NOT NULL AS pushed;

CREATE TEMP TABLE p1 AS SELECT queen.log_pop_v1(:'t', 't004_a', NULL, NULL, 3, NULL, NULL, NULL) AS b;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(b) k),
          ARRAY['consumerGroup', 'leaseId', 'messages', 'partition', 'partitionId', 'queue', 'success'], 'body keys') FROM p1;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(b -> 'messages' -> 0) k),
          ARRAY['consumerGroup', 'createdAt', 'data', 'deliveryAttempt', 'id', 'leaseId', 'partition', 'partitionId', 'producer',
                'queue', 'traceId', 'transactionId'],
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
SELECT lives_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, NULL, NULL, NULL, 'latest') $$, :'t'), 'any mode is accepted (all)');

-- Modes other than new mean all; new-only is new; queue mode never skips its backlog.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_m","payload":"m1"}]') IS NOT NULL AS pushed;
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 't004_m', NULL, 'gfb', 10, NULL, NULL, 'from_beginning') -> 'messages'), 1,
          'mode from_beginning: all');
SELECT is(queen.log_pop_v1(:'t', 't004_m', NULL, 'gno', 10, NULL, NULL, 'new-only'), NULL, 'mode new-only: new');
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 't004_m', NULL, NULL, 10, NULL, NULL, 'new') -> 'messages'), 1,
          'queue mode with mode new still gets the backlog');

-- subscription_from: now, an instant (only when the group is created), malformed.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_f","payload":1},{"queue":"t004_f","payload":2},{"queue":"t004_f","payload":3}]') IS NOT NULL AS pushed;
UPDATE queen.log_messages m SET created_at = timestamptz '2020-01-01Z' + (m.msg_offset || ' months')::interval
FROM queen.log_partitions p, queen.queues q
WHERE p.id = m.partition_id AND q.id = p.queue_id AND q.tenant_id = :'t' AND q.name = 't004_f' AND m.msg_offset < 3;
SELECT is(queen.log_pop_v1(:'t', 't004_f', NULL, 'gnow', 10, NULL, NULL, NULL, 'now'), NULL, 'from now: the backlog is skipped');
SELECT is(queen.log_pop_v1(:'t', 't004_f', NULL, 'gts', 10, NULL, true, NULL, '2020-02-15T00:00:00Z') -> 'messages' -> 0 -> 'data',
          '2'::jsonb, 'from an instant: messages created from it on');
SELECT is(queen.log_pop_v1(:'t', 't004_f', NULL, 'gts', 10, NULL, NULL, NULL, '2019-01-01') , NULL,
          'an existing group keeps its cursor whatever its subscription_from');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 't004_f', NULL, 'gbad', NULL, NULL, NULL, NULL, 'yesterday') $$, :'t'),
                 '22023', 'log_bad_subscription_from', 'from yesterday: refused');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 't004_f', NULL, 'gbad', NULL, NULL, NULL, NULL, '2020-02-30') $$, :'t'),
                 '22023', 'log_bad_subscription_from', 'from an impossible date: refused');

-- partitions: up to N claims under ONE lease id, batch caps the call.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_n","partition":"a","payload":1},{"queue":"t004_n","partition":"b","payload":2},{"queue":"t004_n","partition":"b","payload":3},{"queue":"t004_n","partition":"c","payload":4}]') IS NOT NULL AS pushed;
CREATE TEMP TABLE p6 AS SELECT queen.log_pop_v1(:'t', 't004_n', NULL, NULL, 3, NULL, NULL, NULL, NULL, 5) AS b;
SELECT is((SELECT jsonb_array_length(b -> 'messages') FROM p6), 3, 'partitions 5, batch 3: three messages');
SELECT ok((SELECT count(DISTINCT m ->> 'partitionId') FROM p6, jsonb_array_elements(b -> 'messages') m) >= 2,
          'from at least two partitions');
SELECT is((SELECT array_agg(DISTINCT m ->> 'leaseId') FROM p6, jsonb_array_elements(b -> 'messages') m),
          (SELECT ARRAY[b ->> 'leaseId'] FROM p6), 'one lease id on every message, the body''s own');
SELECT is((SELECT count(*) FROM queen.log_consumers WHERE lease_id = (SELECT (b ->> 'leaseId')::uuid FROM p6)),
          (SELECT count(DISTINCT m ->> 'partitionId') FROM p6, jsonb_array_elements(b -> 'messages') m),
          'every claimed cursor holds it');
-- A second consumer cannot claim any of those partitions while the lease lives.
CREATE TEMP TABLE p6b AS SELECT queen.log_pop_v1(:'t', 't004_n', NULL, NULL, 10, NULL, NULL, NULL, NULL, 5) AS b;
SELECT is((SELECT count(*) FROM p6b, jsonb_array_elements(b -> 'messages') m
           WHERE m ->> 'partitionId' IN (SELECT x ->> 'partitionId' FROM p6, jsonb_array_elements(b -> 'messages') x)),
          0::bigint, 'a second pop claims none of the leased partitions');
SELECT isnt((SELECT b ->> 'leaseId' FROM p6b), (SELECT b ->> 'leaseId' FROM p6), 'and gets a lease of its own');
-- One extension renews every partition of the lease.
UPDATE queen.log_consumers SET lease_expires_at = now() + interval '5 seconds'
WHERE lease_id = (SELECT (b ->> 'leaseId')::uuid FROM p6);
SELECT is(queen.log_lease_extend_v1(:'t', (SELECT b ->> 'leaseId' FROM p6), 90) ->> 'newExpiresAt',
          queen.log_iso_v1(now() + interval '90 seconds'), 'extending the shared lease answers one expiry');
SELECT is((SELECT array_agg(DISTINCT lease_expires_at - now()) FROM queen.log_consumers
           WHERE lease_id = (SELECT (b ->> 'leaseId')::uuid FROM p6)),
          ARRAY[interval '90 seconds'], 'and moves every cursor holding it');
-- Each message acks with the shared lease, per partition.
SELECT is((SELECT array_agg(DISTINCT r ->> 'success') FROM p6, jsonb_array_elements(b -> 'messages') m,
           LATERAL jsonb_array_elements(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object(
               'transactionId', m ->> 'transactionId', 'partitionId', m ->> 'partitionId',
               'leaseId', m ->> 'leaseId')), NULL)) r),
          ARRAY['true'], 'every message acks with the shared lease id');
SELECT is((SELECT count(*) FROM queen.log_consumers WHERE lease_id = (SELECT (b ->> 'leaseId')::uuid FROM p6)),
          0::bigint, 'acking each batch released the lease on every partition');
-- Single-partition pops keep one lease per pop.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_n1","partition":"a","payload":1},{"queue":"t004_n1","partition":"b","payload":2}]') IS NOT NULL AS pushed;
SELECT isnt(queen.log_pop_v1(:'t', 't004_n1', NULL, NULL, 1, NULL, NULL, NULL) ->> 'leaseId',
            queen.log_pop_v1(:'t', 't004_n1', NULL, NULL, 1, NULL, NULL, NULL) ->> 'leaseId',
            'two single-partition pops: two leases');
-- windowBuffer: a partition pushed to within the window is not delivered.
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't004_w', '{"windowBuffer": 2}') $$, :'t'),
                'configure windowBuffer 2');
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_w","partition":"a","payload":1},{"queue":"t004_w","partition":"a","payload":2},{"queue":"t004_w","partition":"b","payload":3}]') IS NOT NULL AS pushed;
SELECT is(queen.log_pop_v1(:'t', 't004_w', NULL, NULL, 4, NULL, NULL, NULL, NULL, 5), NULL,
          'windowBuffer: nothing while the partitions were pushed to within the window');
SELECT is(queen.log_pop_v1(:'t', 't004_w', 'a', NULL, 4, NULL, NULL, NULL), NULL,
          'windowBuffer: a named partition too');
UPDATE queen.log_partitions p SET last_push_at = now() - interval '2 seconds' FROM queen.queues q
WHERE q.id = p.queue_id AND q.tenant_id = :'t' AND q.name = 't004_w' AND p.name = 'a';
SELECT is((SELECT array_agg(m ->> 'data' ORDER BY m ->> 'data') FROM jsonb_array_elements(
               queen.log_pop_v1(:'t', 't004_w', NULL, NULL, 4, NULL, NULL, NULL, NULL, 5) -> 'messages') m),
          ARRAY['1', '2'], 'the window over (2 s quiet): partition a delivers; b, pushed now, waits');
SELECT throws_ok(format($$ SELECT queen.log_pop_v1(%L, 'q', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0) $$, :'t'),
                 '22023', 'log_bad_partitions', 'partitions 0');

-- Labels: the queues whose namespace/task match; each message names its queue; traceId comes back.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_l1","payload":"l1"},{"queue":"t004_l2","payload":"l2"}]') IS NOT NULL AS pushed;
UPDATE queen.queues SET namespace = 'ns4', task = CASE name WHEN 't004_l1' THEN 'k1' ELSE 'k2' END
WHERE tenant_id = :'t' AND name IN ('t004_l1', 't004_l2');
UPDATE queen.log_messages m SET trace_id = '7a1c0e52-3b4d-4e6f-8a9b-0c1d2e3f4a5b' FROM queen.log_partitions p, queen.queues q
WHERE p.id = m.partition_id AND q.id = p.queue_id AND q.tenant_id = :'t' AND q.name = 't004_l1';
CREATE TEMP TABLE p7 AS SELECT queen.log_pop_labels_v1(:'t', 'ns4', 'k1', NULL, 10, NULL, NULL, NULL, NULL, NULL) AS b;
SELECT is((SELECT b -> 'messages' -> 0 ->> 'queue' FROM p7), 't004_l1', 'labels namespace+task: that queue');
SELECT is((SELECT b -> 'messages' -> 0 ->> 'traceId' FROM p7), '7a1c0e52-3b4d-4e6f-8a9b-0c1d2e3f4a5b', 'traceId comes back');
SELECT is(queen.log_pop_labels_v1(:'t', NULL, 'k2', NULL, 10, NULL, NULL, NULL, NULL, NULL) -> 'messages' -> 0 ->> 'queue', 't004_l2',
          'labels task only');
-- A lease over the partitions of two queues names no one queue for the
-- scope check (log_queues_of_v1: null); a one-queue lease names its queue.
CREATE TEMP TABLE p8 AS SELECT queen.log_pop_labels_v1(:'t', 'ns4', NULL, 'gl2', 10, NULL, NULL, NULL, NULL, 5) AS b;
SELECT is((SELECT count(DISTINCT m ->> 'queue') FROM p8, jsonb_array_elements(b -> 'messages') m), 2::bigint,
          'labels, partitions 5: both queues under one pop');
SELECT is(queen.log_queues_of_v1(:'t', (SELECT jsonb_build_array(jsonb_build_object('leaseId', b ->> 'leaseId')) FROM p8)),
          '[null]'::jsonb, 'a lease across two queues: no queue for the scope check');
SELECT is(queen.log_queues_of_v1(:'t', (SELECT jsonb_build_array(jsonb_build_object('leaseId', c.lease_id))
                                         FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
                                         JOIN queen.queues q ON q.id = p.queue_id
                                         WHERE q.tenant_id = :'t' AND q.name = 't004_n1' AND c.lease_id IS NOT NULL
                                         LIMIT 1)),
          '["t004_n1"]'::jsonb, 'a one-queue lease: its queue');
SELECT throws_ok(format($$ SELECT queen.log_pop_labels_v1(%L, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) $$, :'t'),
                 '22023', 'log_bad_labels', 'no label: refused');

-- The per-partition pop reads its batch with LIMIT <parameter>: without a
-- forced generic plan the plan cache re-plans that read on every pop.
SELECT is((SELECT proconfig FROM pg_proc
           WHERE oid = 'queen._log_pop_partition_v1(bigint,text,uuid,text,boolean,bigint,text,integer,integer,boolean,timestamptz,integer,integer,uuid)'::regprocedure),
          ARRAY['plan_cache_mode=force_generic_plan'], 'the partition pop plans its statements once (generic plans)');
SELECT is((SELECT string_agg(l, ' ') FROM (SELECT * FROM regexp_split_to_table(
              (SELECT prosrc FROM pg_proc WHERE proname = '_log_pop_partition_v1'), '\n') AS l
           WHERE l ~ 'NOT v_redo OR') x), NULL, 'the batch read has no OR in its offset bound (one index range)');

-- The queue-level pop's walk over the ready rows: generic plans (a custom
-- plan per pop re-planned it every time), and never a scan or a hash or
-- merge join, whatever the statistics were when a session made its plans
-- (a plan cached while the cursors were few read all of them on every step
-- once they were many).
SELECT is((SELECT proconfig FROM pg_proc
           WHERE oid = 'queen._log_pop_claim_v1(uuid[],text,text,integer,integer,boolean,timestamptz,integer)'::regprocedure),
          ARRAY['plan_cache_mode=force_generic_plan', 'enable_seqscan=off', 'enable_hashjoin=off',
                'enable_mergejoin=off'],
          'the queue pop plans its statements once (generic plans), as index probes in nested loops');
-- The walk's only choice of index is the primary key: an index on
-- partition_id alone offered an ordered scan of every subscription's rows.
SELECT is((SELECT array_agg(indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'queen.log_ready'::regclass),
          ARRAY['queen.log_ready_pkey'], 'the ready rows have one index, the primary key');

-- The ready rows (log_schema.sql): the partitions a group's queue-level pop walks.
-- A drained partition has none, so it costs a pop nothing; a push puts one
-- back for every subscribed group; one session serves the partitions with
-- work in turn.
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't004_r', 'partition', 'p' || i, 'payload', i))
                                FROM generate_series(1, 40) i)) IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 't004_r', NULL, 'gr', 1, NULL, true, NULL) IS NOT NULL AS first_contact;
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_subscriptions s ON s.id = r.subscription_id
           JOIN queen.queues q ON q.id = s.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r' AND s.consumer_group = 'gr'),
          39, 'first contact: a ready row per partition with work, less the one its autoAck pop drained');
SELECT is((SELECT count(*)::int FROM (SELECT queen.log_pop_v1(:'t', 't004_r', NULL, 'gr', 1, NULL, true, NULL) AS b
                                      FROM generate_series(1, 39)) x WHERE b IS NOT NULL), 39, 'every partition served');
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_subscriptions s ON s.id = r.subscription_id
           JOIN queen.queues q ON q.id = s.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r'),
          0, 'drained: no ready row left');
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_r","partition":"p7","payload":"again"}]') IS NOT NULL AS pushed;
SELECT is((SELECT array_agg(p.name) FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r'),
          ARRAY['p7'], 'a push puts back its partition''s ready row');
SELECT is(queen.log_pop_v1(:'t', 't004_r', NULL, 'gr', 1, NULL, true, NULL) -> 'messages' -> 0 -> 'data', '"again"'::jsonb,
          'and the next pop finds it');
-- A leased batch keeps its row (the lease may end unacked); its partition
-- is stepped over while the lease lives.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_r","partition":"p1","payload":"l1"},{"queue":"t004_r","partition":"p2","payload":"l2"}]') IS NOT NULL AS pushed;
CREATE TEMP TABLE pr1 AS SELECT queen.log_pop_v1(:'t', 't004_r', NULL, 'gr', 1, NULL, false, NULL) AS b;
CREATE TEMP TABLE pr2 AS SELECT queen.log_pop_v1(:'t', 't004_r', NULL, 'gr', 1, NULL, false, NULL) AS b;
SELECT isnt((SELECT b ->> 'partition' FROM pr1), (SELECT b ->> 'partition' FROM pr2), 'a leased partition is stepped over');
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r'),
          2, 'leased partitions keep their ready rows');
-- Round robin within a session: 4 partitions of 3 messages, 8 pops of one.
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't004_rr', 'partition', 'q' || (i % 4), 'payload', i))
                                FROM generate_series(0, 11) i)) IS NOT NULL AS pushed;
CREATE TEMP TABLE rr AS SELECT n, queen.log_pop_v1(:'t', 't004_rr', NULL, NULL, 1, NULL, true, NULL) ->> 'partition' AS part
                        FROM generate_series(1, 8) n;
SELECT is((SELECT count(DISTINCT part)::int FROM rr WHERE n <= 4), 4, 'four pops take four partitions');
SELECT is((SELECT count(DISTINCT part)::int FROM rr WHERE n > 4), 4, 'and the next four the same four again');
-- A second group subscribed later gets ready rows of its own from its
-- first contact; a push after that adds to both groups'.
SELECT queen.log_pop_v1(:'t', 't004_rr', NULL, 'g2', 1, NULL, true, NULL) IS NOT NULL AS g2_first;
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_subscriptions s ON s.id = r.subscription_id
           JOIN queen.queues q ON q.id = s.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_rr' AND s.consumer_group = 'g2'),
          4, 'the new group: every partition with work is ready for it');
-- Deleting the group drops its subscription and its rows; its next pop is a
-- first contact again.
SELECT queen.log_group_delete_v1(:'t', 'g2', 't004_rr') IS NOT NULL AS deleted;
SELECT is((SELECT count(*)::int FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
           WHERE q.tenant_id = :'t' AND q.name = 't004_rr' AND s.consumer_group = 'g2'), 0, 'group delete: its subscription is gone');
-- A seek back gives the drained partitions their rows again.
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r'
           AND p.name = 'p30'), 0, 'p30 drained');
UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 second'
FROM queen.log_partitions p, queen.queues q
WHERE p.id = c.partition_id AND q.id = p.queue_id AND q.tenant_id = :'t' AND q.name = 't004_r' AND c.lease_id IS NOT NULL;
SELECT queen.log_group_seek_v1(:'t', 'gr', 't004_r', 'beginning') IS NOT NULL AS sought;
SELECT is((SELECT count(*)::int FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't004_r'),
          40, 'seek to the beginning: every partition is ready again');

-- A ready row whose partition is gone (no foreign key) is dropped by the
-- walk that meets it, and the walk goes on past it.
SELECT s.id AS rsub FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
WHERE q.tenant_id = :'t' AND q.name = 't004_rr' AND s.consumer_group = '__QUEUE_MODE__' \gset
INSERT INTO queen.log_ready (subscription_id, partition_id)
SELECT :rsub, ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid FROM generate_series(1, 3) i;
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_rr","partition":"q9","payload":"after orphans"}]') IS NOT NULL AS pushed;
SELECT is((SELECT count(*)::int FROM (SELECT queen.log_pop_v1(:'t', 't004_rr', NULL, NULL, 1, NULL, true, NULL) AS b
                                      FROM generate_series(1, 6)) x WHERE b IS NOT NULL), 5, 'orphans skipped: all five messages popped');
SELECT is((SELECT count(*)::int FROM queen.log_ready WHERE subscription_id = :rsub), 0, 'and the orphan rows are gone');
-- A walk that meets a partition it cannot take (here a ready row left
-- behind with nothing to deliver, as a pop that lost the race sees it)
-- leaves a random hand, so sessions that collide do not walk on in a
-- convoy; a walk without a collision leaves the hand at what it took.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_h","partition":"hs","payload":"s"}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 't004_h', NULL, NULL, 1, NULL, true, NULL) IS NOT NULL AS drained_hs;
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_h","partition":"hl","payload":"l"}]') IS NOT NULL AS pushed;
SELECT s.id AS hsub, (SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = q.id AND p.name = 'hs') AS hs,
       (SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = q.id AND p.name = 'hl') AS hl
FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
WHERE q.tenant_id = :'t' AND q.name = 't004_h' AND s.consumer_group = '__QUEUE_MODE__' \gset
INSERT INTO queen.log_ready (subscription_id, partition_id) VALUES (:hsub, :'hs');
-- From hl's own place the walk meets hs before it comes round to hl.
SELECT set_config('queen.pop_hand', :'hl', false) IS NOT NULL AS hand_set;
SELECT is(queen.log_pop_v1(:'t', 't004_h', NULL, NULL, 1, NULL, true, NULL) ->> 'partition', 'hl',
          'the walk steps past the partition it could not take');
SELECT isnt(current_setting('queen.pop_hand'), :'hl', 'after a collision the hand is not where the walk stopped');
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_h","partition":"hl","payload":"l2"}]') IS NOT NULL AS pushed;
SELECT is(queen.log_pop_v1(:'t', 't004_h', NULL, NULL, 1, NULL, true, NULL) ->> 'partition', 'hl', 'the next pop takes hl');
SELECT is(current_setting('queen.pop_hand'), :'hl', 'without a collision the hand stays where the walk stopped');

-- Deleting the queue deletes its subscriptions' ready rows.
SELECT queen.log_push_v1(:'t', '[{"queue":"t004_rr","partition":"q9","payload":"left"}]') IS NOT NULL AS pushed;
SELECT queen.log_queue_delete_v1(:'t', 't004_rr') IS NOT NULL AS deleted;
SELECT is((SELECT count(*)::int FROM queen.log_ready WHERE subscription_id = :rsub), 0, 'queue delete: its ready rows go too');

SELECT * FROM finish();
ROLLBACK;
