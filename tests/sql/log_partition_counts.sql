-- tests/sql/log_partition_counts.sql: the per-tenant partition count of
-- sql/log_schema.sql (log_partition_counts) agrees with the partitions the tenant has
-- after every path that creates or deletes them (push, requeue, reclaim,
-- queue delete), stays a few rows however many creations there were (the
-- fold), and is what the partition limit reads. Own tenant; rolled back.
BEGIN;
SELECT plan(13);
SELECT gen_random_uuid() AS t \gset

CREATE TEMP VIEW agree AS
SELECT (SELECT COALESCE(sum(partitions), 0) FROM queen.log_partition_counts WHERE tenant_id = :'t') AS counted,
       (SELECT count(*) FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
        WHERE q.tenant_id = :'t') AS real;

SELECT queen.log_push_v1(:'t', '[{"queue":"t001c_a","partition":"p1","payload":1},
                                 {"queue":"t001c_a","partition":"p2","payload":2},
                                 {"queue":"t001c_b","payload":3}]') IS NOT NULL AS pushed;
SELECT is((SELECT counted FROM agree), 3::numeric, 'a push creating three partitions counts three');
SELECT queen.log_push_v1(:'t', '[{"queue":"t001c_a","partition":"p1","payload":4}]') IS NOT NULL AS again;
SELECT is((SELECT counted FROM agree), 3::numeric, 'a push to an existing partition counts nothing');

-- 100 creating pushes, one partition each: the count follows, its rows fold.
SELECT count(queen.log_push_v1(:'t', jsonb_build_array(jsonb_build_object('queue', 't001c_many', 'partition', 'm' || i, 'payload', i))))
FROM generate_series(1, 100) AS i;
SELECT is((SELECT counted FROM agree), 103::numeric, 'after 100 more creating pushes: 103');
SELECT is((SELECT counted = real FROM agree), true, 'the count is the partitions the tenant has');
SELECT cmp_ok((SELECT count(*) FROM queen.log_partition_counts WHERE tenant_id = :'t'), '<=', 65::bigint,
              'folded: a few rows, not one per creation');

-- The limit reads the count: room for 2 more, a push creating 3 is refused
-- and writes nothing; one creating 2 passes.
SELECT set_config('queen.max_partitions_per_tenant', '105', true) IS NOT NULL AS limited;
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"t001c_a","partition":"x1","payload":1},
    {"queue":"t001c_a","partition":"x2","payload":1},{"queue":"t001c_a","partition":"x3","payload":1}]') $$, :'t'),
    '54000', 'tenant_partition_limit', 'three more than the room: refused');
SELECT is((SELECT counted = real AND real = 103 FROM agree), true, 'the refused push created nothing');
SELECT lives_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"t001c_a","partition":"x1","payload":1},
    {"queue":"t001c_a","partition":"x2","payload":1}]') $$, :'t'), 'two fit');
SELECT set_config('queen.max_partitions_per_tenant', '', true) IS NOT NULL AS unlimited;

-- Reclaim of an idle, empty partition subtracts it.
SELECT queen.log_pop_v1(:'t', 't001c_b', NULL, NULL, 10, NULL, true, NULL) IS NOT NULL AS drained;
DELETE FROM queen.log_messages m USING queen.log_partitions lp, queen.queues q
WHERE m.partition_id = lp.id AND q.id = lp.queue_id AND q.tenant_id = :'t' AND q.name = 't001c_b'; -- retention's part
UPDATE queen.log_partitions lp SET last_push_at = now() - interval '10 years'
FROM queen.queues q WHERE q.id = lp.queue_id AND q.tenant_id = :'t' AND q.name = 't001c_b';
SELECT cmp_ok((queen.log_partition_reclaim_step_v1(now(), 9 * 365 * 86400, 1000) ->> 'deleted')::int, '>=', 1,
              'the idle partition is reclaimed');
SELECT is((SELECT counted = real AND real = 104 FROM agree), true, 'reclaim subtracts it');

-- A requeued dead letter re-creates its reclaimed partition: counted again.
INSERT INTO queen.log_dead_letters (tenant_id, queue_id, queue_name, partition_id, partition_name, consumer_group,
                                    msg_offset, message_id, transaction_id, payload, attempts, created_at)
SELECT :'t', q.id, q.name, gen_random_uuid(), 'Default', '__QUEUE_MODE__', 1, gen_random_uuid(), 'dl-1', '1', 1, now()
FROM queen.queues q WHERE q.tenant_id = :'t' AND q.name = 't001c_b';
SELECT is((queen.log_dlq_requeue_v1(:'t', 't001c_b', NULL, 10) ->> 'requeued')::int, 1, 'requeued');
SELECT is((SELECT counted = real AND real = 105 FROM agree), true, 'the re-created partition counts');

-- A queue delete subtracts every partition the cascade takes.
SELECT queen.log_queue_delete_v1(:'t', 't001c_many') IS NOT NULL AS deleted;
SELECT is((SELECT counted = real AND real = 5 FROM agree), true, 'a queue delete subtracts its 100');

SELECT * FROM finish();
ROLLBACK;
