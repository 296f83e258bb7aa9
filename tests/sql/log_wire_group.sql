-- tests/sql/log_wire_group.sql: pgTAP for sql/log_wire_group.sql.
--
-- Self-contained: two tenants drawn at random for this run, every row rolled
-- back. A group answers each member as its own log_transaction_wire_v1 call
-- would (a result, or the error it raises as columns), a failing member
-- leaves the others' writes in place and its own nowhere, each member has
-- its tenant and producer, and an error that is not a member's own verdict
-- fails the whole group.
BEGIN;
SELECT plan(12);

SELECT set_config('t038.a', gen_random_uuid()::text, true);
SELECT set_config('t038.b', gen_random_uuid()::text, true);
SELECT set_config('t038.q', 'wg_' || substr(md5(random()::text), 1, 10), true);

-- push(queue suffix, partition, transactionId): a one-item push bundle.
CREATE FUNCTION pg_temp.push(p_sfx text, p_part text, p_txn text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('operations', jsonb_build_array(jsonb_build_object('type', 'push', 'items',
        jsonb_build_array(jsonb_build_object('queue', current_setting('t038.q') || p_sfx, 'partition', p_part,
                                             'payload', 1, 'transactionId', p_txn)))))
$$;
-- msgs(queue suffix, tenant letter): the messages of that queue, with producers.
CREATE FUNCTION pg_temp.msgs(p_sfx text, p_who text) RETURNS TABLE (txn text, producer text) LANGUAGE sql STABLE AS $$
    SELECT m.transaction_id COLLATE "default", m.producer FROM queen.log_messages m
    JOIN queen.log_partitions lp ON lp.id = m.partition_id JOIN queen.queues q ON q.id = lp.queue_id
    WHERE q.name = current_setting('t038.q') || p_sfx AND q.tenant_id = current_setting('t038.' || p_who)::uuid
$$;

SELECT function_returns('queen', 'log_transaction_wire_group_v1', ARRAY['jsonb', 'jsonb', 'jsonb', 'boolean'],
                        'setof record', 'W1 log_transaction_wire_group_v1 returns a set of rows');

SELECT throws_ok($$SELECT * FROM queen.log_transaction_wire_group_v1('[{}]', '[]', '[]', true)$$,
                 '22023', 'log_bad_request', 'W2 arrays of different lengths: log_bad_request');

-- A committed "dup" in tenant a's queue, then a group of four: a push (a),
-- a duplicate of "dup" (a), a bad shape (b), a push (b) with a producer.
SELECT lives_ok(format($$SELECT queen.log_transaction_wire_v1(%L, %L)$$,
                       current_setting('t038.a'), pg_temp.push('', 'p', 'dup')), 'W3 the first push');
CREATE TEMP TABLE g AS
SELECT * FROM queen.log_transaction_wire_group_v1(
    jsonb_build_array(pg_temp.push('', 'p', 'one'),
                      jsonb_build_object('operations', jsonb_build_array(
                          jsonb_build_object('type', 'push', 'items', jsonb_build_array(
                              jsonb_build_object('queue', current_setting('t038.q') || '_x', 'payload', 5))),
                          pg_temp.push('', 'p', 'dup') -> 'operations' -> 0)),
                      '{"operations":[{"type":"ack","transactionId":"x","partitionId":"nope"}]}'::jsonb,
                      pg_temp.push('', 'p', 'two')),
    jsonb_build_array(current_setting('t038.a'), current_setting('t038.a'), current_setting('t038.b'),
                      current_setting('t038.b')),
    '[null, "", null, "bob"]', true);

SELECT results_eq($$SELECT n, result IS NOT NULL, err_state, err_message FROM g ORDER BY n$$,
                  $$VALUES (0, true, NULL::text, NULL::text), (1, false, '23505', 'log_duplicate'),
                           (2, false, '22023', 'log_bad_partition_id'), (3, true, NULL, NULL)$$,
                  'W4 one row per member: results, and each failure as its own call raises it');
SELECT is((SELECT (err_detail::jsonb) ->> 'opIndex' FROM g WHERE n = 1), '1',
          'W5 the duplicate''s DETAIL is the single call''s (opIndex of its own bundle)');
SELECT is((SELECT (result::jsonb) ->> 'success' FROM g WHERE n = 0), 'true', 'W6 a member''s result is the wire''s');
SELECT bag_eq($$SELECT txn FROM pg_temp.msgs('', 'a')$$, $$VALUES ('dup'), ('one')$$,
              'W7 tenant a: the first member''s push is in, the failed member''s duplicate added nothing');
SELECT is((SELECT count(*)::int FROM pg_temp.msgs('_x', 'a')), 0,
          'W8 the failed member''s other push, applied before its duplicate, was rolled back with it');
SELECT results_eq($$SELECT txn, producer FROM pg_temp.msgs('', 'b')$$, $$VALUES ('two', 'bob')$$,
                  'W9 tenant b: the last member''s push, stamped with its own producer');
SELECT is(current_setting('queen.producer', true), '', 'W10 the producer setting is restored after the group');

-- A member failing with an error that is not its own verdict (here 40001 from
-- a trigger standing for a partition that vanished) fails the whole group.
CREATE FUNCTION pg_temp.vanish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.transaction_id = 'vanish' THEN
        RAISE EXCEPTION 'log_partition_vanished' USING ERRCODE = '40001';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER t038_vanish BEFORE INSERT ON queen.log_messages FOR EACH ROW EXECUTE FUNCTION pg_temp.vanish();
SELECT throws_ok(format($$SELECT * FROM queen.log_transaction_wire_group_v1(%L, %L, '[null, null]', true)$$,
                        jsonb_build_array(pg_temp.push('', 'p', 'three'), pg_temp.push('', 'p', 'vanish')),
                        jsonb_build_array(current_setting('t038.a'), current_setting('t038.a'))),
                 '40001', 'log_partition_vanished', 'W11 a non-verdict error fails the group');
SELECT bag_eq($$SELECT txn FROM pg_temp.msgs('', 'a')$$, $$VALUES ('dup'), ('one')$$,
              'W12 and nothing of it stays (throws_ok rolled it back to its savepoint)');

SELECT * FROM finish();
ROLLBACK;
