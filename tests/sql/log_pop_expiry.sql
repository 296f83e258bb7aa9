-- tests/sql/log_pop_expiry.sql: a lease that expires without an ack is a
-- failed attempt for every message of its batch not acked, counted by the pop
-- that reclaims it (sql/log_pop.sql, _log_pop_expired_v1) against the
-- queue's retryLimit; past it the messages go to the dead letters as a failed
-- ack past the limit sends them (log_ack.sql). In every pop mode; groups count
-- separately. Expiry is simulated by moving lease_expires_at (now() is frozen
-- inside this transaction). Own tenant; rolled back.
BEGIN;
SELECT plan(35);
SELECT gen_random_uuid() AS t \gset

CREATE FUNCTION pg_temp.expire(p_t UUID, p_queue TEXT) RETURNS VOID LANGUAGE sql AS $$
    UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 second'
    FROM queen.log_partitions p, queen.queues q
    WHERE p.id = c.partition_id AND q.id = p.queue_id AND q.tenant_id = p_t AND q.name = p_queue
      AND c.lease_id IS NOT NULL
$$;
CREATE FUNCTION pg_temp.txids(b JSONB) RETURNS TEXT[] LANGUAGE sql AS $$
    SELECT array_agg(m ->> 'transactionId' ORDER BY o) FROM jsonb_array_elements(b -> 'messages') WITH ORDINALITY x(m, o)
$$;
CREATE FUNCTION pg_temp.count_of(p_t UUID, p_queue TEXT, p_group TEXT) RETURNS INTEGER LANGUAGE sql AS $$
    SELECT sum(c.expired_count)::int FROM queen.log_consumers c
    JOIN queen.log_partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id
    WHERE q.tenant_id = p_t AND q.name = p_queue AND c.consumer_group = p_group
$$;

-- A batch of two whose consumer dies every time, retryLimit 2: three
-- deliveries come back, the third expiry sends both to the dead letters and
-- the same pop delivers the next message.
SELECT queen.log_configure_v1(:'t', 'x1', '{"retryLimit":2}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"x1","transactionId":"a","payload":1},{"queue":"x1","transactionId":"b","payload":2},
                                 {"queue":"x1","transactionId":"c","payload":3}]') IS NOT NULL AS pushed;
SELECT is(pg_temp.txids(queen.log_pop_v1(:'t', 'x1', NULL, NULL, 2, 30, NULL, NULL)), ARRAY['a', 'b'], 'delivery 1: a, b');
SELECT pg_temp.expire(:'t', 'x1');
CREATE TEMP TABLE d2 AS SELECT queen.log_pop_v1(:'t', 'x1', NULL, NULL, 2, 30, NULL, NULL) AS b;
SELECT is(pg_temp.txids(b), ARRAY['a', 'b'], 'delivery 2 after an expiry: the same batch') FROM d2;
SELECT is(pg_temp.count_of(:'t', 'x1', '__QUEUE_MODE__'), 1, 'one expiry counted');
SELECT is((SELECT lease_id FROM queen.log_consumers WHERE lease_id = (b ->> 'leaseId')::uuid), (b ->> 'leaseId')::uuid,
          'the cursor holds the new lease') FROM d2;
SELECT is(queen.log_pop_v1(:'t', 'x1', NULL, NULL, 2, 30, NULL, NULL), NULL, 'a live lease is not counted (nothing popped)');
SELECT is(pg_temp.count_of(:'t', 'x1', '__QUEUE_MODE__'), 1, 'still one');
SELECT pg_temp.expire(:'t', 'x1');
SELECT is(pg_temp.txids(queen.log_pop_v1(:'t', 'x1', NULL, NULL, 2, 30, NULL, NULL)), ARRAY['a', 'b'], 'delivery 3');
SELECT is(pg_temp.count_of(:'t', 'x1', '__QUEUE_MODE__'), 2, 'two expiries counted');
SELECT is((SELECT count(*)::int FROM queen.log_dead_letters WHERE tenant_id = :'t'), 0, 'at retryLimit: no dead letter yet');
SELECT pg_temp.expire(:'t', 'x1');
CREATE TEMP TABLE d4 AS SELECT queen.log_pop_v1(:'t', 'x1', NULL, NULL, 2, 30, NULL, NULL) AS b;
SELECT is(pg_temp.txids(b), ARRAY['c'], 'third expiry: a and b are gone, the pop delivers c') FROM d4;
SELECT is((b -> 'messages' -> 0 ->> 'deliveryAttempt')::int, 1, 'c is a first delivery') FROM d4;
SELECT is((SELECT array_agg(transaction_id || ':' || attempts || ':' || reason || ':' || error ORDER BY msg_offset)
           FROM queen.log_dead_letters WHERE tenant_id = :'t' AND queue_name = 'x1'),
          ARRAY['a:3:failed:lease expired 3 times without an ack', 'b:3:failed:lease expired 3 times without an ack'],
          'a and b dead-lettered: 3 attempts, the error says the lease expired 3 times');
SELECT is(pg_temp.count_of(:'t', 'x1', '__QUEUE_MODE__'), 0, 'c starts its own count');
SELECT is((queen.log_dlq_list_v1(:'t', 'x1', NULL, NULL, NULL, NULL) -> 'messages' -> 0 ->> 'errorMessage'),
          'lease expired 3 times without an ack', 'the dead letters route reads them');

-- A partial ack: only what was not acked is counted, and an ack after an
-- expiry and a redelivery works under the new lease (the old one is refused).
SELECT queen.log_configure_v1(:'t', 'x2', '{"retryLimit":1}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"x2","transactionId":"a","payload":1},{"queue":"x2","transactionId":"b","payload":2}]')
       IS NOT NULL AS pushed;
CREATE TEMP TABLE e1 AS SELECT queen.log_pop_v1(:'t', 'x2', NULL, NULL, 2, 30, NULL, NULL) AS b;
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'a', 'partitionId', b ->> 'partitionId',
                                                                      'leaseId', b ->> 'leaseId')), NULL) -> 0 ->> 'success',
          'true', 'a acked inside the lease') FROM e1;
SELECT pg_temp.expire(:'t', 'x2');
CREATE TEMP TABLE e2 AS SELECT queen.log_pop_v1(:'t', 'x2', NULL, NULL, 2, 30, NULL, NULL) AS b;
SELECT is(pg_temp.txids(b), ARRAY['b'], 'after the expiry only b comes back') FROM e2;
SELECT is(pg_temp.count_of(:'t', 'x2', '__QUEUE_MODE__'), 1, 'counted once');
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'b', 'partitionId', b ->> 'partitionId',
                                                                      'leaseId', b ->> 'leaseId')), NULL) -> 0 ->> 'error',
          'lease_mismatch', 'the expired lease cannot ack') FROM e1;
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'b', 'partitionId', b ->> 'partitionId',
                                                                      'leaseId', b ->> 'leaseId')), NULL) -> 0 ->> 'leaseReleased',
          'true', 'the redelivery acks under its lease') FROM e2;
SELECT is(queen.log_pop_v1(:'t', 'x2', NULL, NULL, 2, 30, NULL, NULL), NULL, 'consumed: nothing left, no dead letter');
SELECT is((SELECT count(*)::int FROM queen.log_dead_letters WHERE tenant_id = :'t' AND queue_name = 'x2'), 0, 'x2 has none');

-- An expiry and an explicit failure add up (retryLimit 1): the failure is
-- the second attempt, past the limit.
SELECT queen.log_configure_v1(:'t', 'x3', '{"retryLimit":1}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"x3","transactionId":"a","payload":1}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 'x3', NULL, NULL, 1, 30, NULL, NULL) IS NOT NULL AS popped;
SELECT pg_temp.expire(:'t', 'x3');
CREATE TEMP TABLE f2 AS SELECT queen.log_pop_v1(:'t', 'x3', NULL, NULL, 1, 30, NULL, NULL) AS b;
SELECT is(queen.log_ack_v1(:'t', jsonb_build_array(jsonb_build_object('transactionId', 'a', 'partitionId', b ->> 'partitionId',
                                                                      'leaseId', b ->> 'leaseId', 'status', 'failed',
                                                                      'error', 'boom')), NULL) -> 0 ->> 'dlq',
          'true', 'expired once, then failed: past retryLimit 1, dead letter') FROM f2;
SELECT is((SELECT attempts FROM queen.log_dead_letters WHERE tenant_id = :'t' AND queue_name = 'x3'), 2, 'with 2 attempts');

-- Consumer groups count separately; a named partition and a pop of
-- partitions=2 count each cursor they reclaim; autoAck never leases.
SELECT queen.log_configure_v1(:'t', 'x4', '{"retryLimit":5}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"x4","partition":"p1","transactionId":"a","payload":1},
                                 {"queue":"x4","partition":"p2","transactionId":"b","payload":2}]') IS NOT NULL AS pushed;
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 'x4', NULL, 'g1', 10, 30, NULL, NULL, NULL, 2) -> 'messages'), 2,
          'g1, partitions=2: both partitions leased');
SELECT is(pg_temp.txids(queen.log_pop_v1(:'t', 'x4', 'p1', 'g2', 10, 30, NULL, NULL)), ARRAY['a'], 'g2, named partition p1');
SELECT pg_temp.expire(:'t', 'x4');
SELECT is(jsonb_array_length(queen.log_pop_v1(:'t', 'x4', NULL, 'g1', 10, 30, NULL, NULL, NULL, 2) -> 'messages'), 2,
          'g1 again: both redelivered');
SELECT is(pg_temp.count_of(:'t', 'x4', 'g1'), 2, 'one expiry on each of g1''s two cursors');
SELECT is(pg_temp.count_of(:'t', 'x4', 'g2'), 0, 'g2''s expired lease is not reclaimed yet: not counted');
SELECT is(pg_temp.txids(queen.log_pop_v1(:'t', 'x4', 'p1', 'g2', 10, 30, NULL, NULL)), ARRAY['a'], 'g2 reclaims p1');
SELECT is(pg_temp.count_of(:'t', 'x4', 'g2'), 1, 'g2 counts its own');
SELECT is(pg_temp.count_of(:'t', 'x4', 'g1'), 2, 'and g1''s stays');
SELECT is(pg_temp.txids(queen.log_pop_v1(:'t', 'x4', 'p2', 'g3', 10, NULL, true, NULL)), ARRAY['b'], 'g3 autoAck');
SELECT is(pg_temp.count_of(:'t', 'x4', 'g3'), 0, 'autoAck: no lease, nothing counted');

-- retryLimit 0: the first expiry dead-letters (a group's dead letter names it).
SELECT queen.log_configure_v1(:'t', 'x5', '{"retryLimit":0}') IS NOT NULL AS configured;
SELECT queen.log_push_v1(:'t', '[{"queue":"x5","transactionId":"a","payload":1}]') IS NOT NULL AS pushed;
SELECT queen.log_pop_v1(:'t', 'x5', NULL, 'g1', 1, 30, NULL, NULL) IS NOT NULL AS popped;
SELECT pg_temp.expire(:'t', 'x5');
SELECT is(queen.log_pop_v1(:'t', 'x5', NULL, 'g1', 1, 30, NULL, NULL), NULL, 'retryLimit 0: the first expiry ends it');
SELECT is((SELECT consumer_group || ':' || attempts FROM queen.log_dead_letters WHERE tenant_id = :'t' AND queue_name = 'x5'),
          'g1:1', 'dead letter of g1, 1 attempt');

SELECT * FROM finish();
ROLLBACK;
