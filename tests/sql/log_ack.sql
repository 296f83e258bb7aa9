-- tests/sql/log_ack.sql: ack, lease extension, configure, queues and delete
-- (sql/log_ack.sql, log_lease.sql, log_queues.sql): every contract and every
-- refusal (the wire's: tests/sql/log_transaction_wire.sql). Expiry is
-- simulated by moving lease_expires_at. Own tenant; rolled back.
BEGIN;
SELECT plan(73);
SELECT gen_random_uuid() AS t, gen_random_uuid() AS t2 \gset

-- pg_temp helpers: push n messages k1..kn to (queue, partition) and pop them.
CREATE FUNCTION pg_temp.fill(p_t uuid, p_q text, p_n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM (SELECT queen.log_push_v1(p_t, (SELECT jsonb_agg(jsonb_build_object(
        'queue', p_q, 'payload', i, 'transactionId', 'k' || i)) FROM generate_series(1, p_n) i))) s $$;
CREATE FUNCTION pg_temp.ack(p_t uuid, p_tx text, p_pid text, p_lease text, p_status text DEFAULT NULL, p_group text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT queen.log_ack_v1(p_t, jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
        'transactionId', p_tx, 'partitionId', p_pid, 'leaseId', p_lease, 'status', p_status,
        'consumerGroup', p_group))), NULL) -> 0 $$;
CREATE FUNCTION pg_temp.cursor(p_pid text, p_group text DEFAULT '__QUEUE_MODE__') RETURNS bigint LANGUAGE sql AS $$
    SELECT committed_offset FROM queen.log_consumers WHERE partition_id = p_pid::uuid AND consumer_group = p_group $$;

SELECT volatility_is('queen', 'log_ack_v1', ARRAY['uuid', 'jsonb', 'text'], 'volatile', 'log_ack_v1 is VOLATILE');

-- ---------------------------------------------------------------- ack
SELECT pg_temp.fill(:'t', 't005_a', 5);
SELECT b ->> 'partitionId' AS pid, b ->> 'leaseId' AS lease
FROM (SELECT queen.log_pop_v1(:'t', 't005_a', NULL, NULL, 3, NULL, NULL, NULL) AS b) s \gset

SELECT is(pg_temp.ack(:'t', 'k2', :'pid', :'lease'),
          '{"index":0,"transactionId":"k2","success":true,"error":null,"queueName":"t005_a","partitionName":"Default",
            "leaseReleased":false,"dlq":false,"noop":false}'::jsonb,
          'completed k2 inside the lease: success, lease kept');
SELECT is(pg_temp.cursor(:'pid'), 2::bigint, 'acking offset 2 commits through 2 (k1 too)');
SELECT is(pg_temp.ack(:'t', 'k1', :'pid', :'lease') -> 'noop', 'true', 'completed at or below the cursor: noop');
SELECT is(pg_temp.ack(:'t', 'k1', :'pid', :'lease') -> 'success', 'true', 'a noop is a success');
SELECT is(pg_temp.ack(:'t', 'k4', :'pid', :'lease') ->> 'error', 'outside_lease', 'k4 is not in the leased batch');
SELECT is(pg_temp.ack(:'t', 'k3', :'pid', gen_random_uuid()::text) ->> 'error', 'lease_mismatch', 'a foreign lease cannot ack');
SELECT is(pg_temp.ack(:'t', 'nope', :'pid', :'lease') ->> 'error', 'message_not_found', 'unknown transactionId');
SELECT is(pg_temp.ack(:'t', 'k3', :'pid', NULL, NULL, 'never') ->> 'error', 'not_delivered', 'a group that never popped');
SELECT is(pg_temp.ack(:'t2', 'k3', :'pid', :'lease') ->> 'error', 'partition_not_found', 'another tenant''s partition');
SELECT is(pg_temp.ack(:'t', 'k3', gen_random_uuid()::text, :'lease') ->> 'error', 'partition_not_found', 'unknown partition');
SELECT is(pg_temp.ack(:'t2', 'k3', :'pid', :'lease') - ARRAY['index', 'transactionId', 'success', 'error', 'leaseReleased', 'dlq', 'noop'],
          '{"queueName":null,"partitionName":null}'::jsonb, 'another tenant''s partition: no names are told');
SELECT is(pg_temp.cursor(:'pid'), 2::bigint, 'refused acks moved nothing');
SELECT is(pg_temp.ack(:'t', 'k3', :'pid', :'lease') -> 'leaseReleased', 'true', 'acking the end of the batch releases the lease');
SELECT is((SELECT lease_id FROM queen.log_consumers WHERE partition_id = :'pid'::uuid), NULL, 'lease gone');
SELECT is(pg_temp.ack(:'t', 'k3', :'pid', :'lease') ->> 'error', 'lease_mismatch', 'a released lease is stale');

-- expired lease cannot ack
SELECT b ->> 'leaseId' AS lease2 FROM (SELECT queen.log_pop_v1(:'t', 't005_a', NULL, NULL, 1, NULL, NULL, NULL) AS b) s \gset
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE lease_id = :'lease2'::uuid;
SELECT is(pg_temp.ack(:'t', 'k4', :'pid', :'lease2') ->> 'error', 'lease_expired', 'an expired lease cannot ack');
SELECT is(pg_temp.ack(:'t', 'k4', :'pid', NULL) -> 'success', 'true', 'without leaseId the lease is not checked');

-- failed: releases, counts against retryLimit, then dead-letters
SELECT lives_ok(format($$ SELECT queen.log_configure_v1(%L, 't005_f', '{"retryLimit":1}') $$, :'t'), 'retryLimit 1');
SELECT pg_temp.fill(:'t', 't005_f', 3);
SELECT b ->> 'partitionId' AS fpid, b ->> 'leaseId' AS fl1 FROM (SELECT queen.log_pop_v1(:'t', 't005_f', NULL, NULL, 3, NULL, NULL, NULL) AS b) s \gset
SELECT is(pg_temp.ack(:'t', 'k2', :'fpid', :'fl1', 'failed'),
          '{"index":0,"transactionId":"k2","success":true,"error":null,"queueName":"t005_f","partitionName":"Default",
            "leaseReleased":true,"dlq":false,"noop":false}'::jsonb,
          'failed k2: success, lease released, not yet dead');
SELECT is(pg_temp.cursor(:'fpid'), 1::bigint, 'failed on 2 commits through 1');
SELECT is((SELECT array_agg(m ->> 'transactionId') || array_agg((m ->> 'deliveryAttempt')::text)
           FROM jsonb_array_elements(queen.log_pop_v1(:'t', 't005_f', NULL, NULL, 10, NULL, NULL, NULL) -> 'messages') m),
          ARRAY['k2', 'k3', '2', '2'], 'k2 is redelivered with its batch, attempt 2');
SELECT lease_id AS fl2 FROM queen.log_consumers WHERE partition_id = :'fpid'::uuid \gset
SELECT is(pg_temp.ack(:'t', 'k2', :'fpid', :'fl2', 'failed') -> 'dlq', 'true', 'the failure past retryLimit dead-letters');
SELECT is((SELECT jsonb_build_array(transaction_id, payload, attempts, queue_name, consumer_group)
           FROM queen.log_dead_letters WHERE partition_id = :'fpid'::uuid),
          '["k2", 2, 2, "t005_f", "__QUEUE_MODE__"]'::jsonb, 'the dead letter row');
SELECT is(pg_temp.cursor(:'fpid'), 2::bigint, 'the dead-lettered message is past the cursor');
SELECT is(pg_temp.ack(:'t', 'k3', :'fpid', :'fl2') -> 'leaseReleased', 'true', 'the rest of the batch is still leased and acks');

-- one call: results in input order, applied in offset order; a failed blocks later offsets
SELECT pg_temp.fill(:'t', 't005_b', 3);
SELECT b ->> 'partitionId' AS bpid, b ->> 'leaseId' AS bl FROM (SELECT queen.log_pop_v1(:'t', 't005_b', NULL, NULL, 3, NULL, NULL, NULL) AS b) s \gset
SELECT is((SELECT array_agg((e ->> 'index') || ':' || (e ->> 'success') || ':' || COALESCE(e ->> 'error', '-') ORDER BY o)
           FROM jsonb_array_elements(queen.log_ack_v1(:'t', jsonb_build_array(
               jsonb_build_object('transactionId', 'k3', 'partitionId', :'bpid'),
               jsonb_build_object('transactionId', 'k2', 'partitionId', :'bpid', 'status', 'failed'),
               jsonb_build_object('transactionId', 'k1', 'partitionId', :'bpid')), NULL)) WITH ORDINALITY x(e, o)),
          ARRAY['0:false:after_failed', '1:true:-', '2:true:-'], 'input order kept; k3 after a failed k2 is refused');
SELECT is(pg_temp.cursor(:'bpid'), 1::bigint, 'cursor at 1: k1 completed, k2 failed');

-- ack refusals
SELECT throws_ok($$ SELECT queen.log_ack_v1(NULL, '[]', NULL) $$, '22023', 'log_bad_tenant', 'ack: NULL tenant');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '{}', NULL) $$, :'t'), '22023', 'log_bad_request', 'ack: not an array');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '["x"]', NULL) $$, :'t'), '22023', 'log_bad_request', 'ack: not an object');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[{"partitionId":"00000000-0000-0000-0000-000000000000"}]', NULL) $$, :'t'),
                 '22023', 'log_bad_transaction_id', 'ack: missing transactionId');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[{"transactionId":"a","partitionId":"p1"}]', NULL) $$, :'t'),
                 '22023', 'log_bad_partition_id', 'ack: partitionId not a uuid');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[{"transactionId":"a","partitionId":"00000000-0000-0000-0000-000000000000","leaseId":"x"}]', NULL) $$, :'t'),
                 '22023', 'log_bad_lease_id', 'ack: leaseId not a uuid');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[{"transactionId":"a","partitionId":"00000000-0000-0000-0000-000000000000","status":"retry"}]', NULL) $$, :'t'),
                 '22023', 'log_bad_status', 'ack: unknown status');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[{"transactionId":"a","partitionId":"00000000-0000-0000-0000-000000000000","consumerGroup":""}]', NULL) $$, :'t'),
                 '22023', 'log_bad_group', 'ack: empty consumerGroup');
SELECT throws_ok(format($$ SELECT queen.log_ack_v1(%L, '[]', '') $$, :'t'), '22023', 'log_bad_group', 'ack: empty batch group');
SELECT is(queen.log_ack_v1(:'t', '[]', NULL), '[]'::jsonb, 'ack: empty batch answers []');

-- ---------------------------------------------------------------- lease extend
SELECT pg_temp.fill(:'t', 't005_l', 1);
SELECT b ->> 'leaseId' AS ll FROM (SELECT queen.log_pop_v1(:'t', 't005_l', NULL, NULL, 1, 10, NULL, NULL) AS b) s \gset
SELECT is(queen.log_lease_extend_v1(:'t', :'ll', 120) - 'expiresAt' - 'newExpiresAt',
          jsonb_build_object('leaseId', :'ll', 'success', true, 'renewed', true), 'extend a live lease');
SELECT is(queen.log_lease_extend_v1(:'t', :'ll', 120) ->> 'newExpiresAt', queen.log_iso_v1(now() + interval '120 seconds'),
          'newExpiresAt, the name the reference clients read, is expiresAt');
SELECT is((SELECT lease_expires_at - now() FROM queen.log_consumers WHERE lease_id = :'ll'::uuid), interval '120 seconds', 'expiry = now + seconds');
SELECT is(queen.log_lease_extend_v1(:'t', :'ll', 120) ->> 'expiresAt', queen.log_iso_v1(now() + interval '120 seconds'), 'expiresAt ISO');
SELECT is(queen.log_lease_extend_v1(:'t2', :'ll', 120) -> 'success', 'false', 'another tenant cannot extend it');
SELECT is(queen.log_lease_extend_v1(:'t', gen_random_uuid()::text, 120) -> 'success', 'false', 'unknown lease');
SELECT is(queen.log_lease_extend_v1(:'t', 'not-a-uuid', 120), '{"leaseId":"not-a-uuid","success":false,"renewed":false,"expiresAt":null,"newExpiresAt":null}'::jsonb, 'malformed lease id');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE lease_id = :'ll'::uuid;
SELECT is(queen.log_lease_extend_v1(:'t', :'ll', 120) -> 'success', 'false', 'an expired lease is not revived');
SELECT throws_ok(format($$ SELECT queen.log_lease_extend_v1(%L, %L, 0) $$, :'t', :'ll'), '22023', 'log_bad_seconds', 'extend: 0 seconds');
SELECT throws_ok(format($$ SELECT queen.log_lease_extend_v1(NULL, %L, 1) $$, :'ll'), '22023', 'log_bad_tenant', 'extend: NULL tenant');

-- ---------------------------------------------------------------- queues of partitions and leases
SELECT lp.id AS qp FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
WHERE q.tenant_id = :'t' AND q.name = 't005_a' \gset
SELECT is(queen.log_queues_of_v1(:'t', jsonb_build_array(jsonb_build_object('partitionId', :'qp'),
                                                        jsonb_build_object('leaseId', :'ll'),
                                                        jsonb_build_object('partitionId', upper(:'qp')))),
          '["t005_a", "t005_l", "t005_a"]'::jsonb, 'a partition and a lease name their queues, in order');
SELECT is(queen.log_queues_of_v1(:'t2', jsonb_build_array(jsonb_build_object('partitionId', :'qp'),
                                                         jsonb_build_object('leaseId', :'ll'))),
          '[null, null]'::jsonb, 'another tenant''s partition and lease name nothing');
SELECT is(queen.log_queues_of_v1(:'t', jsonb_build_array(jsonb_build_object('partitionId', gen_random_uuid()),
          '{"partitionId": "nope"}'::jsonb, '{"partitionId": 7}'::jsonb, '{"partitionId": null}'::jsonb,
          '{"leaseId": ["x"]}'::jsonb, '{}'::jsonb, '"x"'::jsonb)),
          '[null, null, null, null, null, null, null]'::jsonb, 'unknown, malformed or absent ids name nothing, never raise');
SELECT is(queen.log_queues_of_v1(:'t', '[]'), '[]'::jsonb, 'no refs, no names');
SELECT throws_ok(format($$ SELECT queen.log_queues_of_v1(%L, '{}') $$, :'t'), '22023', 'log_bad_request', 'refs must be an array');

-- ---------------------------------------------------------------- configure / queues / delete
-- (every option name, labels, merge and replace: tests/sql/log_queues.sql)
SELECT ok(queen.log_configure_v1(:'t', 't005_c', NULL) -> 'options'
          @> '{"leaseTime":300,"retryLimit":3,"dedupWindowSeconds":3600,"retentionSeconds":0}',
          'configure creates with leaseTime 300');
SELECT ok(queen.log_configure_v1(:'t', 't005_c', '{"retryLimit":0,"retentionSeconds":60}') -> 'options'
          @> '{"leaseTime":300,"retryLimit":0,"dedupWindowSeconds":3600,"retentionSeconds":60}', 'configure updates only what is given');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'x', '{"tll":1}') $$, :'t'), '22023', 'log_bad_options', 'unknown option');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'x', '{"retryLimit":1.5}') $$, :'t'), '22023', 'log_bad_options', 'non-integer option');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'x', '{"retryLimit":"3"}') $$, :'t'), '22023', 'log_bad_options', 'string option');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'x', '{"leaseTime":0}') $$, :'t'), '22023', 'log_bad_options', 'leaseTime 0');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, 'x', '[]') $$, :'t'), '22023', 'log_bad_options', 'options not an object');
SELECT throws_ok(format($$ SELECT queen.log_configure_v1(%L, '', '{}') $$, :'t'), '22023', 'log_bad_queue', 'configure: empty queue');

SELECT is(queen.log_queues_v1(:'t2'), '{"queues":[]}'::jsonb, 'queues: another tenant sees none of them');
SELECT is((SELECT q FROM jsonb_array_elements(queen.log_queues_v1(:'t') -> 'queues') q WHERE q ->> 'name' = 't005_l'),
          '{"name":"t005_l","namespace":null,"task":null,"partitions":1,"messages":{"total":1,"pending":1,"processing":0}}'::jsonb,
          'queues: counts (the expired lease makes its message pending again)');
SELECT is((SELECT array_agg(q ->> 'name') FROM jsonb_array_elements(queen.log_queues_v1(:'t') -> 'queues') q),
          ARRAY['t005_a', 't005_b', 't005_c', 't005_f', 't005_l'], 'queues: byte order of name');
SELECT is(queen.log_queue_delete_v1(:'t', 't005_b'), '{"deleted":true,"queue":"t005_b","existed":true}'::jsonb, 'delete an existing queue');
SELECT is((SELECT count(*)::int FROM queen.log_messages WHERE partition_id = :'bpid'::uuid)
          + (SELECT count(*)::int FROM queen.log_consumers WHERE partition_id = :'bpid'::uuid), 0, 'its messages and cursors went with it');
SELECT is(queen.log_queue_delete_v1(:'t', 't005_b') -> 'existed', 'false', 'delete again: existed false');
SELECT throws_ok($$ SELECT queen.log_queues_v1(NULL) $$, '22023', 'log_bad_tenant', 'queues: NULL tenant');

-- ---------------------------------------------------------------- one ack, two paths
-- _log_ack_apply_v1 reads a lone ack's rows by its own short path; with a
-- second ack in the call it takes the general one. Each case below runs both
-- ways, each undone before the next, and the lone ack's verdict must be the
-- same (the second ack names no message, so it decides and writes nothing).
CREATE FUNCTION pg_temp.both_paths(p_t uuid, p_ack jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_one jsonb[];
    v_two jsonb[];
BEGIN
    BEGIN
        v_one := queen._log_ack_apply_v1(p_t, ARRAY[jsonb_populate_record(NULL::queen._log_ack_in_v1, p_ack || '{"i": 0}')], '[]');
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
    BEGIN
        v_two := queen._log_ack_apply_v1(p_t, ARRAY[jsonb_populate_record(NULL::queen._log_ack_in_v1, p_ack || '{"i": 0}'),
                     jsonb_populate_record(NULL::queen._log_ack_in_v1, p_ack || '{"i": 1, "txid": "no-such-message"}')], '[]');
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
    RETURN CASE WHEN v_one[1] IS NOT DISTINCT FROM v_two[1] THEN NULL
                ELSE jsonb_build_object('ack', p_ack, 'one', v_one[1], 'general', v_two[1]) END;
END $$;
CREATE FUNCTION pg_temp.ack_row(p_tx text, p_pid text, p_lease text, p_status text DEFAULT 'completed',
                                p_group text DEFAULT '__QUEUE_MODE__') RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('txid', p_tx, 'pid', p_pid, 'grp', p_group, 'lease', p_lease,
                              'status', p_status, 'error', NULL) $$;
SELECT pg_temp.fill(:'t', 't005_p', 4);
SELECT b ->> 'partitionId' AS ppid, b ->> 'leaseId' AS pl
FROM (SELECT queen.log_pop_v1(:'t', 't005_p', NULL, NULL, 2, NULL, NULL, NULL) AS b) s \gset
SELECT pg_temp.ack(:'t', 'k1', :'ppid', :'pl') IS NOT NULL AS acked_k1 \gset
CREATE TEMP TABLE parity AS
SELECT pg_temp.both_paths(tt, a) AS mismatch FROM (VALUES
    (:'t'::uuid, pg_temp.ack_row('k2', :'ppid', :'pl')),                     -- end of batch: releases
    (:'t', pg_temp.ack_row('k1', :'ppid', :'pl')),                           -- at the cursor: noop
    (:'t', pg_temp.ack_row('k3', :'ppid', :'pl')),                           -- outside_lease
    (:'t', pg_temp.ack_row('k2', :'ppid', gen_random_uuid()::text)),         -- lease_mismatch
    (:'t', pg_temp.ack_row('k3', :'ppid', NULL)),                            -- no lease named: applies
    (:'t', pg_temp.ack_row('k2', :'ppid', :'pl', 'failed')),                 -- failed: releases
    (:'t', pg_temp.ack_row('nope', :'ppid', :'pl')),                         -- message_not_found
    (:'t', pg_temp.ack_row('k2', :'ppid', NULL, 'completed', 'never')),      -- not_delivered
    (:'t2', pg_temp.ack_row('k2', :'ppid', :'pl')),                          -- another tenant's
    (:'t', pg_temp.ack_row('k2', gen_random_uuid()::text, :'pl'))            -- unknown partition
) AS c(tt, a);
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE lease_id = :'pl'::uuid;
INSERT INTO parity SELECT pg_temp.both_paths(:'t', pg_temp.ack_row('k2', :'ppid', :'pl'));  -- lease_expired
SELECT is((SELECT count(*)::int FROM parity), 11, 'one ack, two paths: every case ran');
SELECT is((SELECT jsonb_agg(mismatch) FROM parity WHERE mismatch IS NOT NULL), NULL,
          'one ack, two paths: the same verdict, names and flags in every case');

-- An ack reads cursors by key, never by a scan of log_consumers, whatever
-- the planner believed when the session made the plans it keeps (one made
-- while the table was a page kept scanning it as it grew). Here the plans
-- are made afresh under costs that favour any scan over an index.
SELECT is((SELECT proconfig::text FROM pg_proc
           WHERE oid = 'queen._log_ack_apply_v1(uuid, queen._log_ack_in_v1[], jsonb)'::regprocedure),
          '{enable_seqscan=off}', 'an ack reads its tables by index only');
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't005_scan', 'partition', 'p' || i,
                                                                    'payload', i, 'transactionId', 'm' || i))
                                FROM generate_series(1, 400) i)) IS NOT NULL AS pushed_many;
CREATE TEMP TABLE scan_pops AS
SELECT queen.log_pop_v1(:'t', 't005_scan', NULL, NULL, 1, NULL, false, NULL) AS b FROM generate_series(1, 400);
SET LOCAL random_page_cost = 1000000;
DISCARD PLANS;
SELECT COALESCE(sum(seq_scan), 0) AS cursor_scans_before FROM pg_stat_xact_user_tables
WHERE relid = 'queen.log_consumers'::regclass \gset
SELECT is((SELECT pg_temp.ack(:'t', b -> 'messages' -> 0 ->> 'transactionId', b ->> 'partitionId', b ->> 'leaseId') ->> 'success'
           FROM scan_pops LIMIT 1), 'true', 'an ack beside 400 cursors applies');
SELECT is((SELECT COALESCE(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
           WHERE relid = 'queen.log_consumers'::regclass)::bigint - :cursor_scans_before, 0::bigint,
          '... and scans no cursor table');
RESET random_page_cost;

SELECT * FROM finish();
ROLLBACK;
