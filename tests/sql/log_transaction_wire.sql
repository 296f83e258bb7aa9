-- tests/sql/log_transaction_wire.sql: the transaction wire
-- (sql/log_transaction_wire.sql): kv ops, pushes and acks that commit or
-- roll back together, its results' order, every refusal, and its one form
-- (the tenant an argument; the form that read it from the bundle is gone).
-- Own tenants; rolled back.
BEGIN;
SELECT plan(26);
SELECT gen_random_uuid() AS t, gen_random_uuid() AS t2 \gset

-- pg_temp helpers: push n messages k1..kn to a queue; a partition's cursor.
CREATE FUNCTION pg_temp.fill(p_t uuid, p_q text, p_n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM (SELECT queen.log_push_v1(p_t, (SELECT jsonb_agg(jsonb_build_object(
        'queue', p_q, 'payload', i, 'transactionId', 'k' || i)) FROM generate_series(1, p_n) i))) s $$;
CREATE FUNCTION pg_temp.cursor(p_pid text, p_group text DEFAULT '__QUEUE_MODE__') RETURNS bigint LANGUAGE sql AS $$
    SELECT committed_offset FROM queen.log_consumers WHERE partition_id = p_pid::uuid AND consumer_group = p_group $$;

SELECT function_lang_is('queen', 'log_transaction_wire_v1', ARRAY['uuid', 'jsonb'], 'plpgsql',
                        'the wire is plpgsql (resolves kv_apply_v1 at run time)');
SELECT hasnt_function('queen', 'log_transaction_wire_v1', ARRAY['jsonb'],
                      'the form that took the tenant inside the bundle is gone');
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'queen' AND p.proname = 'log_transaction_wire_v1'), 1, 'the wire has one form');

SELECT pg_temp.fill(:'t', 't005_w', 2);
SELECT b ->> 'partitionId' AS wpid, b ->> 'leaseId' AS wl FROM (SELECT queen.log_pop_v1(:'t', 't005_w', NULL, NULL, 2, NULL, NULL, NULL) AS b) s \gset
CREATE TEMP TABLE w1 AS SELECT queen.log_transaction_wire_v1(:'t', jsonb_build_object(
    'operations', jsonb_build_array(
        jsonb_build_object('type', 'push', 'items', '[{"queue":"t005_out","payload":"e1","transactionId":"e1"},{"queue":"t005_out","payload":"e1b"}]'::jsonb),
        jsonb_build_object('type', 'ack', 'transactionId', 'k1', 'partitionId', :'wpid', 'leaseId', :'wl')),
    'requiredLeases', jsonb_build_array(:'wl'),
    'kv', '[{"op":"putIfAbsent","ns":"t005","key":"done:k1","value":1,"forever":true,"required":true},
            {"op":"putIfAbsent","ns":"t005","key":"done:k1b","value":1,"ttlSeconds":60}]'::jsonb)) AS r;
SELECT is(r -> 'success', 'true', 'wire: marker + push + ack succeed together') FROM w1;
SELECT is((SELECT array_agg((e ->> 'type') || (e ->> 'index') || '/' || (e ->> 'opIndex') ORDER BY o)
           FROM jsonb_array_elements(r -> 'results') WITH ORDINALITY x(e, o)),
          ARRAY['push0/0', 'push1/0', 'ack2/1', 'kv3/0', 'kv4/1'], 'wire: results in operations order, then kv; flat index and opIndex') FROM w1;
SELECT is(r -> 'results' -> 1 -> 'itemIndex', '1', 'wire: push results carry itemIndex') FROM w1;
SELECT is(r -> 'results' -> 3 -> 'applied', 'true', 'wire: kv result fields are passed through') FROM w1;
SELECT is(pg_temp.cursor(:'wpid'), 1::bigint, 'wire: the ack moved the cursor');
SELECT is((SELECT count(*)::int FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't005_out'), 2, 'wire: the effects landed');

CREATE FUNCTION pg_temp.outs() RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
    JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 't005_out' $$;
CREATE FUNCTION pg_temp.bundle(p_t uuid, p_tx text, p_pid text, p_lease text, p_kv jsonb, p_eff text DEFAULT 'e2') RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT queen.log_transaction_wire_v1(%L, %L)', p_t, jsonb_build_object(
        'operations', jsonb_build_array(
            jsonb_build_object('type', 'push', 'items', jsonb_build_array(jsonb_build_object('queue', 't005_out', 'payload', 1, 'transactionId', p_eff))),
            jsonb_strip_nulls(jsonb_build_object('type', 'ack', 'transactionId', p_tx, 'partitionId', p_pid, 'leaseId', p_lease))),
        'kv', p_kv)) $$;

SELECT throws_ok(pg_temp.bundle(:'t', 'k2', :'wpid', :'wl', '[{"op":"putIfAbsent","ns":"t005","key":"done:k1","value":1,"forever":true,"required":true}]'),
                 '23514', 'kv_precondition_failed', 'wire: marker present + required: 23514 kv_precondition_failed');
SELECT is(pg_temp.outs(), 2, 'wire: after a kv_precondition the push did not land');
SELECT is(pg_temp.cursor(:'wpid'), 1::bigint, 'wire: after a kv_precondition the cursor did not move');
SELECT throws_ok(pg_temp.bundle(:'t', 'k2', :'wpid', gen_random_uuid()::text, '[]'), '55000', 'log_ack_rejected', 'wire: a stale lease rejects the bundle');
SELECT throws_ok(pg_temp.bundle(:'t', 'k2', :'wpid', :'wl', '[]', 'e1'), '23505', 'log_duplicate', 'wire: a duplicate push fails the bundle');
SELECT throws_ok(pg_temp.bundle(:'t2', 'k2', :'wpid', NULL, '[]'), '55000', 'log_ack_rejected', 'wire: an ack on another tenant''s partition');
SELECT is(pg_temp.outs() * 10 + pg_temp.cursor(:'wpid')::int, 21, 'wire: none of the refused bundles left anything');
SELECT is((SELECT r -> 'success' FROM (SELECT queen.log_transaction_wire_v1(:'t', jsonb_build_object(
               'kv', '[{"op":"putIfAbsent","ns":"t005","key":"done:k1","value":1,"forever":true}]'::jsonb)) r) s),
          'true', 'wire: a lost non-required kv op rolls back nothing');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, %L) $$, :'t', jsonb_build_object('operations', '[]'::jsonb,
                 'requiredLeases', jsonb_build_array(gen_random_uuid()))), '55000', 'log_ack_rejected', 'wire: a required lease that is not live');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, %L) $$, :'t', jsonb_build_object(
                 'kv', '[{"op":"getPrefix","ns":"t005","prefix":"d"}]'::jsonb)), '22023', NULL, 'wire: getPrefix is refused (kv_apply_v1, in wire)');

SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '[]') $$, :'t'), '22023', 'log_bad_request', 'wire: not an object');
SELECT throws_ok($$ SELECT queen.log_transaction_wire_v1(NULL, '{"operations":[]}') $$, '22023', 'log_bad_tenant', 'wire: NULL tenant');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '{}') $$, :'t'), '22023', 'log_bad_request', 'wire: neither operations nor kv');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '{"operations":[{"type":"kv"}]}') $$, :'t'), '22023', 'log_kv_in_operations', 'wire: an operation of type kv');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '{"operations":[{"type":"pop"}]}') $$, :'t'), '22023', 'log_bad_operation', 'wire: unknown operation type');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '{"operations":[{"type":"push","items":[{"queue":"q"}]}]}') $$, :'t'), '22023', 'log_bad_payload', 'wire: a bad push item');
SELECT throws_ok(format($$ SELECT queen.log_transaction_wire_v1(%L, '{"operations":[],"requiredLeases":["x"]}') $$, :'t'), '22023', 'log_bad_lease_id', 'wire: a bad required lease');

SELECT * FROM finish();
ROLLBACK;
