-- tests/sql/log_push.sql: log_push_v1 (sql/log_push.sql): result
-- shape and order, auto-creation, dedup within the window, offsets, and every
-- refusal. Own tenant per run, so concurrent files never meet; rolled back.
BEGIN;
SELECT plan(83);
SELECT gen_random_uuid() AS t, gen_random_uuid() AS t2, gen_random_uuid() AS t3 \gset

SELECT volatility_is('queen', 'log_push_v1', ARRAY['uuid', 'jsonb'], 'volatile', 'log_push_v1 is VOLATILE');
SELECT isnt_strict('queen', 'log_push_v1', ARRAY['uuid', 'jsonb'], 'log_push_v1 is not STRICT (NULL tenant raises)');

CREATE TEMP TABLE r1 AS SELECT queen.log_push_v1(:'t', '[
    {"queue":"t003_a","payload":{"n":1},"transactionId":"a1"},
    {"queue":"t003_a","payload":{"n":2},"transactionId":"a1"},
    {"queue":"t003_a","partition":"p2","payload":null,"transactionId":"a1"},
    {"queue":"t003_a","payload":[1,2]}]'::jsonb) AS r;

SELECT is(jsonb_array_length(r), 4, 'one result per item') FROM r1;
SELECT is((SELECT array_agg(e ->> 'index' ORDER BY o) FROM jsonb_array_elements(r) WITH ORDINALITY AS x(e, o)),
          ARRAY['0', '1', '2', '3'], 'results in request order') FROM r1;
SELECT is((SELECT array_agg(e ->> 'status' ORDER BY o) FROM jsonb_array_elements(r) WITH ORDINALITY AS x(e, o)),
          ARRAY['queued', 'duplicate', 'queued', 'queued'],
          'same transactionId in one call: the second is a duplicate; another partition is not') FROM r1;
SELECT is(r -> 1 ->> 'message_id', r -> 0 ->> 'message_id', 'a duplicate names the message already there') FROM r1;
SELECT is(r -> 3 ->> 'transaction_id', r -> 3 ->> 'message_id', 'transactionId defaults to the message id') FROM r1;
SELECT ok((r -> 0 ->> 'message_id') ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
          'message ids are uuids') FROM r1;
SELECT is(r -> 0 ->> 'queueName', 't003_a', 'queueName echoes the queue') FROM r1;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(r -> 0) AS k),
          ARRAY['index', 'message_id', 'partition_id', 'queueName', 'status', 'trace_id', 'transaction_id'],
          'element keys') FROM r1;
SELECT is(r -> 0 ->> 'partition_id',
          (SELECT p.id::text FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'t' AND q.name = 't003_a' AND p.name = 'Default'),
          'partition_id is the partition''s id') FROM r1;
SELECT is(r -> 1 ->> 'partition_id', r -> 0 ->> 'partition_id', 'a duplicate names its partition too') FROM r1;
SELECT isnt(r -> 2 ->> 'partition_id', r -> 0 ->> 'partition_id', 'another partition, another id') FROM r1;
SELECT is(r -> 0 -> 'trace_id', 'null'::jsonb, 'no traceId: trace_id is null, none is generated') FROM r1;

-- traceId: stored with the message, echoed as trace_id; "" is none
CREATE TEMP TABLE rt AS SELECT queen.log_push_v1(:'t3', '[
    {"queue":"t003_t","payload":1,"transactionId":"tr1","traceId":"0190B3C4-5D6E-7F80-9A1B-2C3D4E5F6A7B"},
    {"queue":"t003_t","payload":2,"transactionId":"tr2","traceId":""},
    {"queue":"t003_t","payload":3,"transactionId":"tr3","traceId":null},
    {"queue":"t003_t","payload":4,"transactionId":"tr1"}]'::jsonb) AS r;
SELECT is(r -> 0 ->> 'trace_id', '0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b', 'trace_id echoes the traceId (as a uuid)') FROM rt;
SELECT is((SELECT array_agg(COALESCE(m.trace_id::text, '-') ORDER BY m.msg_offset) FROM queen.log_messages m
           JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'t3' AND q.name = 't003_t'),
          ARRAY['0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b', '-', '-'], 'trace_id stored per message; "" and null are none');
SELECT is(r -> 3 ->> 'trace_id', r -> 0 ->> 'trace_id', 'a duplicate answers the stored message''s trace_id') FROM rt;
SELECT col_type_is('queen', 'log_messages', 'trace_id', 'uuid', 'trace_id is a uuid column');

SELECT row_eq(format($$ SELECT lease_time, retry_limit FROM queen.queues WHERE tenant_id = %L AND name = 't003_a' $$, :'t'),
              ROW(60, 3), 'the queue is created on first push with leaseTime 60');
SELECT is((SELECT array_agg(p.name::text ORDER BY p.name) FROM queen.log_partitions p
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t'),
          ARRAY['Default', 'p2'], 'partitions created on first push, Default by default');
SELECT is((SELECT array_agg(m.msg_offset ORDER BY m.msg_offset) FROM queen.log_messages m
           JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'t' AND p.name = 'Default'),
          ARRAY[1, 2]::bigint[], 'a duplicate writes nothing; offsets are dense from 1');
SELECT is((SELECT p.last_offset FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'t' AND p.name = 'Default'), 2::bigint, 'last_offset is the newest offset');
SELECT is((SELECT m.payload FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND p.name = 'p2'),
          'null'::jsonb, 'a JSON null payload is stored as JSON null');

SELECT is(queen.log_push_v1(:'t', '[{"queue":"t003_a","payload":9,"transactionId":"a1"}]') -> 0 ->> 'status',
          'duplicate', 'a later call inside the window is a duplicate');
UPDATE queen.log_messages m SET created_at = now() - interval '2 hours'
FROM queen.log_partitions p, queen.queues q
WHERE p.id = m.partition_id AND q.id = p.queue_id AND q.tenant_id = :'t';
SELECT is(queen.log_push_v1(:'t', '[{"queue":"t003_a","payload":9,"transactionId":"a1"}]') -> 0 ->> 'status',
          'queued', 'outside the window (3600 s) the same transactionId is queued again');
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE tenant_id = :'t';
SELECT is(queen.log_push_v1(:'t', '[{"queue":"t003_a","payload":9,"transactionId":"z"},{"queue":"t003_a","payload":9,"transactionId":"z"}]')::text ~ 'duplicate',
          false, 'dedupWindowSeconds 0 turns dedup off');
SELECT is(queen.log_push_v1(:'t2', '[{"queue":"t003_a","payload":1,"transactionId":"a1"}]') -> 0 ->> 'status',
          'queued', 'another tenant''s queue of the same name is another queue');
SELECT is(queen.log_push_v1(:'t', '[]'), '[]'::jsonb, 'an empty array answers []');

-- Refusals: 22023 with an opaque message; nothing written.
SELECT throws_ok($$ SELECT queen.log_push_v1(NULL, '[]') $$, '22023', 'log_bad_tenant', 'NULL tenant');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '{}') $$, :'t'), '22023', 'log_bad_request', 'items not an array');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, NULL) $$, :'t'), '22023', 'log_bad_request', 'items NULL');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[1]') $$, :'t'), '22023', 'log_bad_request', 'item not an object');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"payload":1}]') $$, :'t'), '22023', 'log_bad_queue', 'missing queue');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":7,"payload":1}]') $$, :'t'), '22023', 'log_bad_queue', 'queue not a string');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"","payload":1}]') $$, :'t'), '22023', 'log_bad_queue', 'empty queue');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, jsonb_build_array(jsonb_build_object('queue', repeat('q', 256), 'payload', 1))) $$, :'t'),
                 '22023', 'log_bad_queue', 'queue over 255 bytes');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","partition":"","payload":1}]') $$, :'t'), '22023', 'log_bad_partition', 'empty partition');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","partition":3,"payload":1}]') $$, :'t'), '22023', 'log_bad_partition', 'partition not a string');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q"}]') $$, :'t'), '22023', 'log_bad_payload', 'missing payload');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","payload":1,"transactionId":5}]') $$, :'t'), '22023', 'log_bad_transaction_id', 'transactionId not a string');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","payload":1,"transactionId":""}]') $$, :'t'), '22023', 'log_bad_transaction_id', 'empty transactionId');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","payload":1,"traceId":"abc"}]') $$, :'t'), '22023', 'log_bad_trace_id', 'traceId not a uuid');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"q","payload":1,"traceId":7}]') $$, :'t'), '22023', 'log_bad_trace_id', 'traceId not a string');
SELECT throws_ok(format($$ SELECT queen.log_push_v1(%L, '[{"queue":"t003_new","payload":1},{"queue":"q"}]') $$, :'t'),
                 '22023', 'log_bad_payload', 'a bad second item refuses the call');
SELECT is((SELECT count(*)::int FROM queen.queues WHERE tenant_id = :'t' AND name = 't003_new'), 0,
          'a refused call writes nothing, not even the valid first item''s queue');
SELECT is((SELECT count(*)::int FROM queen.queues WHERE tenant_id = :'t' AND name = 'q'), 0,
          'no queue is created by a refused call');

-- A push naming only existing partitions skips the creating statements; one
-- that names an existing and a new one still creates the new one, and the
-- offsets continue where they were.
SELECT is((SELECT array_agg(e ->> 'status' ORDER BY o) FROM jsonb_array_elements(queen.log_push_v1(:'t', '[
    {"queue":"t003_a","partition":"p2","payload":1,"transactionId":"mix1"},
    {"queue":"t003_a","partition":"p3-new","payload":2,"transactionId":"mix2"},
    {"queue":"t003_new_q","payload":3,"transactionId":"mix3"}]'::jsonb)) WITH ORDINALITY AS x(e, o)),
          ARRAY['queued', 'queued', 'queued'], 'existing, new partition and new queue in one call: all queued');
SELECT is((SELECT array_agg(lp.name || ':' || lp.last_offset ORDER BY lp.name) FROM queen.log_partitions lp
           JOIN queen.queues q ON q.id = lp.queue_id WHERE q.tenant_id = :'t' AND q.name = 't003_a' AND lp.name IN ('p2', 'p3-new')),
          ARRAY['p2:2', 'p3-new:1'], 'the existing partition continues its offsets, the new one starts at 1');
SELECT is((SELECT count(*)::int FROM queen.queues WHERE tenant_id = :'t' AND name = 't003_new_q'), 1, 'the new queue exists');

-- A duplicate whose holder is deleted between the dedup INSERT and the read
-- that names it (retention takes no partition lock) is not a duplicate any
-- more: the message goes in. A statement trigger stands in for retention: it
-- deletes the holder once, right after the INSERT that found it.
CREATE FUNCTION pg_temp.t003_vanish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('t003.vanish', true) = 'on' THEN
        PERFORM set_config('t003.vanish', 'off', true);
        DELETE FROM queen.log_messages WHERE transaction_id = 'vanish1';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER t003_vanish AFTER INSERT ON queen.log_messages
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.t003_vanish();
SELECT queen.log_push_v1(:'t', '[{"queue":"t003_v","payload":1,"transactionId":"vanish1"}]'::jsonb);
SELECT set_config('t003.vanish', 'on', true);
SELECT is(queen.log_push_v1(:'t', '[{"queue":"t003_v","payload":2,"transactionId":"vanish1"}]'::jsonb) -> 0 ->> 'status',
          'queued', 'a duplicate whose holder vanished before it was named is queued');
SELECT is((SELECT array_agg(m.payload::text || '@' || m.msg_offset) FROM queen.log_messages m
           JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'t' AND q.name = 't003_v'),
          ARRAY['2@2'], '... and stored, at the next offset');
DROP TRIGGER t003_vanish ON queen.log_messages;

-- Items interleaving two partitions: each partition's offsets follow item
-- order, one per queued item, and a duplicate between them takes none.
SELECT queen.log_push_v1(:'t', '[{"queue":"t003_i","partition":"x","payload":"x1","transactionId":"i1"},
    {"queue":"t003_i","partition":"y","payload":"y1","transactionId":"i2"},
    {"queue":"t003_i","partition":"x","payload":"x-dup","transactionId":"i1"},
    {"queue":"t003_i","partition":"x","payload":"x2","transactionId":"i3"},
    {"queue":"t003_i","partition":"y","payload":"y2"}]'::jsonb);
SELECT is((SELECT array_agg(p.name || ':' || (m.payload #>> '{}') || '@' || m.msg_offset ORDER BY p.name, m.msg_offset)
           FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't003_i'),
          ARRAY['x:x1@1', 'x:x2@2', 'y:y1@1', 'y:y2@2'], 'interleaved partitions: offsets per partition in item order');
SELECT is((SELECT array_agg(p.name || ':' || p.last_offset ORDER BY p.name) FROM queen.log_partitions p
           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = :'t' AND q.name = 't003_i'),
          ARRAY['x:2', 'y:2'], '... and each partition''s last_offset is its newest message');

-- The deferred NOTIFY (log_notify_pushed_v1): one per queue that received a
-- message, from a push's result array or a transaction's result object.
SELECT is(queen.log_notify_pushed_v1(:'t', '[{"queueName":"a","status":"queued"},{"queueName":"a","status":"queued"},
          {"queueName":"b","status":"queued"},{"queueName":"c","status":"duplicate"}]'), 2,
          'log_notify_pushed_v1: one notification per queue with a queued message, none for a duplicate');
SELECT is(queen.log_notify_pushed_v1(:'t', '{"success":true,"results":[{"type":"push","queueName":"a","status":"queued"},
          {"type":"ack","queueName":"b","success":true},{"type":"kv","status":"queued"}]}'), 1,
          '... from a transaction result only its pushes count');
SELECT is(queen.log_notify_pushed_v1(:'t', '{"success":false,"error":"x"}'), 0, '... a failed transaction notifies nothing');
SELECT is(queen.log_notify_pushed_v1(NULL, '[{"queueName":"a","status":"queued"}]'), 0, '... nor a NULL tenant');

-- The batch the broker's notifier sends (log_notify_announce_v1): the same
-- rule over many pushes, each (tenant, queue) once however many name it.
SELECT gen_random_uuid() AS t3 \gset
SELECT is(queen.log_notify_announce_v1(jsonb_build_array(
          jsonb_build_object('t', :'t', 'r', '[{"queueName":"a","status":"queued"}]'::jsonb),
          jsonb_build_object('t', :'t', 'r', '{"success":true,"results":[{"type":"push","queueName":"a","status":"queued"},
                                               {"type":"push","queueName":"b","status":"queued"}]}'::jsonb),
          jsonb_build_object('t', :'t3', 'r', '[{"queueName":"a","status":"queued"}]'::jsonb),
          jsonb_build_object('t', :'t3', 'r', '[{"queueName":"c","status":"duplicate"}]'::jsonb))), 3,
          'log_notify_announce_v1: one notification per (tenant, queue) across the batch');
SELECT is(queen.log_notify_announce_v1(jsonb_build_array(
          jsonb_build_object('t', NULL, 'r', '[{"queueName":"a","status":"queued"}]'::jsonb),
          jsonb_build_object('r', '[{"queueName":"a","status":"queued"}]'::jsonb),
          jsonb_build_object('t', :'t', 'r', '{"success":false,"error":"x"}'::jsonb),
          jsonb_build_object('t', :'t', 'r', '"nothing"'::jsonb))), 0,
          '... an element without a tenant, a failed transaction or a result of another shape notifies nothing');
SELECT is(queen.log_notify_announce_v1('{}'), 0, '... nor a batch that is not an array');
SELECT throws_ok($$ SELECT queen.log_notify_announce_v1('[{"t":"not-a-uuid","r":[{"queueName":"a","status":"queued"}]}]') $$,
                 '22P02', NULL, '... a tenant that is not a uuid fails the statement rather than notify a channel no one listens on');

-- One call of several items and the same items one call each decide alike:
-- statuses, offsets, and which message (by partition and offset) each
-- duplicate names. Two queues of the same state take the same items; one
-- queue dedups nothing (window 0), where the items' repeats all go in.
CREATE FUNCTION pg_temp.both_ways(p_t uuid, p_q text, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_all  jsonb;
    v_each jsonb := '[]';
    v_i    int;
BEGIN
    FOREACH v_i IN ARRAY ARRAY[0, 1] LOOP
        PERFORM queen.log_push_v1(p_t, jsonb_build_array(jsonb_build_object('queue', p_q || v_i, 'partition', 'x',
                                  'payload', 0, 'transactionId', 'old')));
    END LOOP;
    v_all := queen.log_push_v1(p_t, (SELECT jsonb_agg(e || jsonb_build_object('queue', p_q || '0'))
                                      FROM jsonb_array_elements(p_items) e));
    FOR v_i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        v_each := v_each || (queen.log_push_v1(p_t, jsonb_build_array(p_items -> v_i || jsonb_build_object('queue', p_q || '1'))) -> 0);
    END LOOP;
    -- each result as (status, partition name, offset of the message it names)
    RETURN (SELECT jsonb_agg(jsonb_build_array(r ->> 'status', p.name, m.msg_offset) ORDER BY o)
            FROM jsonb_array_elements(v_all) WITH ORDINALITY x(r, o)
            JOIN queen.log_messages m ON m.id = (r ->> 'message_id')::uuid
            JOIN queen.log_partitions p ON p.id = m.partition_id)
        || (SELECT jsonb_agg(jsonb_build_array(r ->> 'status', p.name, m.msg_offset) ORDER BY o)
            FROM jsonb_array_elements(v_each) WITH ORDINALITY x(r, o)
            JOIN queen.log_messages m ON m.id = (r ->> 'message_id')::uuid
            JOIN queen.log_partitions p ON p.id = m.partition_id);
END $$;
SELECT '[{"partition":"x","payload":1,"transactionId":"a"},
         {"partition":"y","payload":2,"transactionId":"a"},
         {"partition":"x","payload":3},
         {"partition":"x","payload":4,"transactionId":"a"},
         {"partition":"x","payload":5,"transactionId":"old"},
         {"partition":"y","payload":6,"transactionId":"old"},
         {"partition":"x","payload":7,"transactionId":"b"},
         {"partition":"x","payload":8,"transactionId":"a"},
         {"partition":"y","payload":9,"transactionId":"a"},
         {"partition":"x","payload":10}]' AS mixed \gset
SELECT is(r -> 0, r -> 1, 'several items in one call and one per call: the same statuses, offsets and named messages')
FROM (SELECT (SELECT jsonb_build_array(jsonb_path_query_array(v, '$[0 to 9]'), jsonb_path_query_array(v, '$[10 to 19]'))
              FROM (SELECT pg_temp.both_ways(:'t', 't003_w', :'mixed') AS v) s) AS r) s;
SELECT queen.log_configure_v1(:'t', q, '{"dedupWindowSeconds":0}') IS NOT NULL AS configured
FROM unnest(ARRAY['t003_z0', 't003_z1']) AS q;
SELECT is(r -> 0, r -> 1, '... and so with dedup off, where the repeats go in')
FROM (SELECT (SELECT jsonb_build_array(jsonb_path_query_array(v, '$[0 to 9]'), jsonb_path_query_array(v, '$[10 to 19]'))
              FROM (SELECT pg_temp.both_ways(:'t', 't003_z', :'mixed') AS v) s) AS r) s;

-- log_push_group_v1: members answered as their own log_push_v1 calls would
-- be. pg_temp.group_vs_each runs the members as one group on queues
-- <q>g, and again one log_push_v1 call each (its producer set, its error
-- caught) on queues <q>s, both seeded alike; each answer as [index, status,
-- partition, offset and producer of the message it names], or the error.
CREATE FUNCTION pg_temp.answers(p_res jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT COALESCE(jsonb_agg(jsonb_build_array((r ->> 'index')::int, r ->> 'status', p.name, m.msg_offset, m.producer)
                              ORDER BY o), '[]')
    FROM jsonb_array_elements(p_res) WITH ORDINALITY x(r, o)
    JOIN queen.log_messages m ON m.id = (r ->> 'message_id')::uuid
    JOIN queen.log_partitions p ON p.id = m.partition_id
$$;
CREATE FUNCTION pg_temp.group_vs_each(p_tenants jsonb, p_q text, p_members jsonb, p_producers jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_group jsonb := '[]';
    v_each  jsonb := '[]';
    v_named jsonb;
    v_row   record;
    v_st    text;
    v_msg   text;
    v_det   text;
    v_i     int;
BEGIN
    FOR v_i IN 0 .. jsonb_array_length(p_tenants) - 1 LOOP
        PERFORM queen.log_push_v1((p_tenants ->> v_i)::uuid, jsonb_build_array(
            jsonb_build_object('queue', p_q || s, 'partition', 'x', 'payload', 0, 'transactionId', 'old')))
        FROM unnest(ARRAY['g', 's']) AS s;
    END LOOP;
    FOR v_row IN
        SELECT g.* FROM queen.log_push_group_v1(p_tenants,
            (SELECT jsonb_agg((SELECT COALESCE(jsonb_agg(CASE WHEN jsonb_typeof(e) = 'object'
                                                              THEN e || jsonb_build_object('queue', p_q || 'g') ELSE e END), '[]')
                               FROM jsonb_array_elements(m) e) ORDER BY o)
             FROM jsonb_array_elements(p_members) WITH ORDINALITY AS x(m, o)),
            p_producers, true) AS g ORDER BY g.n
    LOOP
        v_group := v_group || jsonb_build_array(CASE WHEN v_row.err_state IS NULL THEN pg_temp.answers(v_row.result::jsonb)
                                                     ELSE jsonb_build_array(v_row.err_state, v_row.err_message, v_row.err_detail) END);
    END LOOP;
    FOR v_i IN 0 .. jsonb_array_length(p_members) - 1 LOOP
        PERFORM set_config('queen.producer', COALESCE(p_producers ->> v_i, ''), true);
        BEGIN
            v_named := pg_temp.answers(queen.log_push_v1((p_tenants ->> v_i)::uuid,
                (SELECT COALESCE(jsonb_agg(e || jsonb_build_object('queue', p_q || 's')), '[]')
                 FROM jsonb_array_elements(p_members -> v_i) e)));
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_st = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_det = PG_EXCEPTION_DETAIL;
            v_named := jsonb_build_array(v_st, v_msg, v_det);
        END;
        v_each := v_each || jsonb_build_array(v_named);
    END LOOP;
    PERFORM set_config('queen.producer', '', true);
    RETURN jsonb_build_array(v_group, v_each);
END $$;
SELECT gen_random_uuid() AS tg, gen_random_uuid() AS tg2 \gset
SELECT pg_temp.group_vs_each(jsonb_build_array(:'tg', :'tg', :'tg', :'tg', :'tg', :'tg', :'tg', :'tg', :'tg', :'tg2', :'tg',
                                               :'tg', :'tg'), 't003_g', '[
    [{"partition":"x","payload":1,"transactionId":"a"}],
    [{"partition":"y","payload":2,"transactionId":"a"}],
    [{"partition":"x","payload":3}],
    [{"partition":"x"}],
    [{"partition":"x","payload":5,"transactionId":"a"},{"partition":"y","payload":6}],
    [{"partition":"x","payload":7,"transactionId":"old"}],
    [],
    [{"partition":"x","payload":9,"transactionId":"b"}],
    [{"partition":"x","payload":10,"transactionId":"b"}],
    [{"partition":"x","payload":11,"transactionId":"a"}],
    [{"partition":"y","payload":12,"transactionId":"b"}],
    [{"partition":"x","payload":13},{"partition":"x","payload":14,"transactionId":"c"},{"partition":"x","payload":15,"transactionId":"c"}],
    [{"partition":"x","payload":16,"transactionId":"bad\u0001"}]]',
    '[null, null, null, null, "alice", null, null, "alice", null, "bob", "alice", null, null]') AS gv \gset
SELECT is((:'gv'::jsonb) -> 0, (:'gv'::jsonb) -> 1,
          'log_push_group_v1: every member answered as its own call: statuses, partitions, offsets, named duplicates, producers, refusals');
SELECT is(jsonb_array_length((:'gv'::jsonb) -> 0), 13, '... one answer per member');
SELECT is((:'gv'::jsonb) #> '{0,3}', '["22023", "log_bad_payload", "items[0].payload is missing"]',
          '... a refused member gets its own SQLSTATE, message and detail');
SELECT is((:'gv'::jsonb) #>> '{0,12,1}', 'log_bad_transaction_id', '... and another refusal its own');
SELECT is((SELECT count(*)::int FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
           JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'tg' AND q.name = 't003_gg' AND m.payload::text IN ('4', '16')), 0,
          '... writes nothing of a refused member');
SELECT is((SELECT array_agg(m.payload::text ORDER BY m.msg_offset) FROM queen.log_messages m
           JOIN queen.log_partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.tenant_id = :'tg' AND q.name = 't003_gg' AND p.name = 'x'),
          ARRAY['0', '1', '3', '9', '13', '14'], '... and keeps the members'' order within a partition');
SELECT is((:'gv'::jsonb) #> '{0,4,0}', jsonb_build_array(0, 'duplicate', 'x', 2, NULL),
          '... dedups against an earlier member of the same group');
SELECT is((:'gv'::jsonb) #> '{0,8,0}', jsonb_build_array(0, 'duplicate', 'x', 4, 'alice'),
          '... across producers, naming the earlier member''s message and its producer');
SELECT is((:'gv'::jsonb) #> '{0,9,0,1}', '"queued"', '... and never across tenants');
SELECT is((:'gv'::jsonb) #> '{0,6}', '[]', '... an empty member answers []');
SELECT is(current_setting('queen.producer', true), '', '... and leaves queen.producer as it found it');

-- one partition, one producer: one batch
SELECT pg_temp.group_vs_each(jsonb_build_array(:'tg', :'tg', :'tg'), 't003_h', '[
    [{"payload":1,"transactionId":"a"}], [{"payload":2,"transactionId":"a"}], [{"payload":3},{"payload":4,"transactionId":"a"}]]',
    '[null, null, null]') AS gv \gset
SELECT is((:'gv'::jsonb) -> 0, (:'gv'::jsonb) -> 1, '... so with every member on one partition');

-- One message a member, one tenant, one producer: the form the group checks
-- and applies all at once; a member that differs sends the group member by member.
SELECT pg_temp.group_vs_each(jsonb_build_array(:'tg', :'tg', :'tg', :'tg', :'tg'), 't003_k', '[
    [{"partition":"x","payload":1,"transactionId":"a"}], [{"partition":"y","payload":2,"transactionId":"a"}],
    [{"partition":"x","payload":3,"transactionId":"a"}], [{"partition":"x","payload":4,"transactionId":"old"}],
    [{"partition":"y","payload":5}]]', '["alice", "alice", "alice", "alice", "alice"]') AS gv \gset
SELECT is((:'gv'::jsonb) -> 0, (:'gv'::jsonb) -> 1, '... so with one message a member, one tenant and one producer');
SELECT is(jsonb_path_query_array((:'gv'::jsonb) -> 0, '$[*][0][1]'), '["queued", "queued", "duplicate", "duplicate", "queued"]',
          '... the duplicates among them found');
SELECT pg_temp.group_vs_each(jsonb_build_array(:'tg', :'tg', :'tg2', :'tg'), 't003_m', '[
    [{"partition":"x","payload":1,"transactionId":"a"}], [{"partition":"x","payload":2,"transactionId":"a"}],
    [{"partition":"x","payload":3,"transactionId":"a"}], [{"partition":"x"}]]', '[null, "", "alice", null]') AS gv \gset
SELECT is((:'gv'::jsonb) -> 0, (:'gv'::jsonb) -> 1, '... and with one message a member, tenants, producers and a refusal mixed');
SELECT throws_ok(format($$ SELECT * FROM queen.log_push_group_v1('[%s, 5]', '[[{"queue":"t003_n","payload":1}],[{"queue":"t003_n","payload":2}]]',
                                                        '[null, null]', true) $$, to_json(:'tg'::text)),
                 '22P02', 'invalid input syntax for type uuid: "5"',
                 '... a tenant that is not a uuid string fails the group, beside good ones too');
SELECT throws_ok($$ SELECT * FROM queen.log_push_group_v1('["00000000-0000-0000-0000-000000000001"]', '[[], []]', '[null]', true) $$,
                 '22023', 'log_bad_request', 'log_push_group_v1: arrays of different lengths are refused');
SELECT throws_ok($$ SELECT * FROM queen.log_push_group_v1('[null]', '[[]]', '[null]', true) $$,
                 '22023', 'log_bad_tenant', '... a NULL tenant fails the group (the broker then runs each member alone)');

-- A push finds, locks and creates its partitions by key, never by a scan of
-- log_partitions, whatever the statistics were when its plans were made (a
-- sequential scan per new pair timed out at 100,000 partitions).
SELECT is((SELECT proconfig::text FROM pg_proc WHERE oid = 'queen._log_push_apply_v1(uuid, jsonb)'::regprocedure),
          '{enable_seqscan=off}',
          'a push reads its tables by index only');
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't002_many', 'partition', 'p' || i, 'payload', i))
                                FROM generate_series(1, 300) AS i)) IS NOT NULL AS pushed_many;
SELECT COALESCE(sum(seq_scan), 0) AS part_scans_before FROM pg_stat_xact_user_tables
WHERE relid = 'queen.log_partitions'::regclass \gset
SELECT queen.log_push_v1(:'t', (SELECT jsonb_agg(jsonb_build_object('queue', 't002_many', 'partition', 'n' || i, 'payload', i))
                                FROM generate_series(1, 5) AS i)) IS NOT NULL AS pushed_new;
SELECT is((SELECT COALESCE(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
           WHERE relid = 'queen.log_partitions'::regclass)::bigint - :part_scans_before, 0::bigint,
          'a push creating 5 partitions beside 300 scans no partition table');

SELECT * FROM finish();
ROLLBACK;
