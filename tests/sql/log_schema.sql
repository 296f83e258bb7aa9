-- tests/sql/log_schema.sql: the log tables, their identity, storage
-- settings and the shared helpers (sql/log_schema.sql).
-- Self-contained and rolled back; touches no shared rows.
BEGIN;
SELECT plan(65);

SELECT has_table('queen', 'queues', 'queen.queues exists');
SELECT has_table('queen', 'log_partitions', 'queen.log_partitions exists');
SELECT has_table('queen', 'log_messages', 'queen.log_messages exists');
SELECT has_table('queen', 'log_consumers', 'queen.log_consumers exists');
SELECT has_table('queen', 'log_dead_letters', 'queen.log_dead_letters exists');

SELECT col_is_pk('queen', 'log_messages', ARRAY['partition_id', 'msg_offset'], 'a message is (partition, offset)');
SELECT col_is_pk('queen', 'log_consumers', ARRAY['partition_id', 'consumer_group'], 'a cursor is (partition, group)');
SELECT col_is_unique('queen', 'queues', ARRAY['tenant_id', 'name'], 'queues are per tenant');
SELECT col_is_unique('queen', 'log_partitions', ARRAY['queue_id', 'name'], 'partitions are per queue, by name');
SELECT col_type_is('queen', 'log_messages', 'payload', 'jsonb', 'payload is jsonb');
SELECT col_type_is('queen', 'log_messages', 'id', 'uuid', 'message ids are uuids');
SELECT col_type_is('queen', 'log_partitions', 'id', 'uuid', 'partition ids are uuids');

SELECT is((SELECT array_agg(a.attname::text ORDER BY a.attname)
           FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
           WHERE a.attrelid IN ('queen.queues'::regclass, 'queen.log_partitions'::regclass,
                                'queen.log_consumers'::regclass)
             AND a.attname IN ('name', 'consumer_group') AND c.collname = 'C'),
          ARRAY['consumer_group', 'name', 'name'],
          'queue, partition and group names are COLLATE "C" (one lock order on every host)');

SELECT is_indexed('queen', 'log_messages', ARRAY['partition_id', 'transaction_id'],
                  'dedup and ack lookup are indexed');
SELECT has_index('queen', 'log_consumers', 'idx_log_consumers_lease_id', 'lease_id',
                  'a lease id finds its cursors by index');
SELECT ok(NOT (SELECT indisunique FROM pg_index WHERE indexrelid = 'queen.idx_log_consumers_lease_id'::regclass),
          'not unique: a partitions=N pop shares one lease id among its cursors');

SELECT ok('fillfactor=70' = ANY (reloptions), 'log_partitions fillfactor 70')
FROM pg_class WHERE oid = 'queen.log_partitions'::regclass;
SELECT ok('fillfactor=70' = ANY (reloptions), 'log_consumers fillfactor 70')
FROM pg_class WHERE oid = 'queen.log_consumers'::regclass;
SELECT ok('autovacuum_vacuum_scale_factor=0' = ANY (reloptions), 'log_consumers vacuums on a dead-tuple count')
FROM pg_class WHERE oid = 'queen.log_consumers'::regclass;
SELECT ok('vacuum_truncate=off' = ANY (reloptions) OR 'vacuum_truncate=false' = ANY (reloptions),
          'log_messages never truncates its heap (ACCESS EXCLUSIVE would stall pops)')
FROM pg_class WHERE oid = 'queen.log_messages'::regclass;

-- Defaults of an auto-created queue.
INSERT INTO queen.queues (tenant_id, name) VALUES (gen_random_uuid(), 't001_defaults');
SELECT row_eq($$ SELECT lease_time, retry_limit, dedup_window_seconds, retention_seconds
                FROM queen.queues WHERE name = 't001_defaults' $$,
              ROW(60, 3, 3600, 0), 'auto-created queue: leaseTime 60, retryLimit 3, dedup 3600, retention 0');

-- Columns added after the table first shipped (ADD COLUMN IF NOT EXISTS).
SELECT col_type_is('queen', 'queues', 'namespace', 'text', 'queues.namespace is text (the configure label)');
SELECT col_type_is('queen', 'queues', 'task', 'text', 'queues.task is text (the configure label)');
SELECT col_is_null('queen', 'queues', 'namespace', 'namespace is nullable: NULL = no label');
SELECT col_is_null('queen', 'queues', 'task', 'task is nullable: NULL = no label');
SELECT row_eq($$ SELECT namespace, task, completed_retention_seconds, stored_options
                FROM queen.queues WHERE name = 't001_defaults' $$,
              ROW(NULL::text, NULL::text, 0, '{}'::jsonb),
              'auto-created queue: no labels, completedRetentionSeconds 0, no stored options');
SELECT throws_ok($$ INSERT INTO queen.queues (tenant_id, name, completed_retention_seconds)
                   VALUES (gen_random_uuid(), 't001_neg', -1) $$, '23514', NULL,
                 'completed_retention_seconds >= 0');
SELECT volatility_is('queen', '_log_retention_seconds_v1', ARRAY['integer', 'integer'], 'immutable',
                     '_log_retention_seconds_v1 is IMMUTABLE');

-- _log_partition_retry_v1: the third try of a call whose partition kept
-- vanishing is the retryable refusal.
SELECT is(queen._log_partition_retry_v1(0), 1, 'the first retry counts 1');
SELECT is(queen._log_partition_retry_v1(1), 2, 'the second retry counts 2');
SELECT throws_ok($$ SELECT queen._log_partition_retry_v1(2) $$, '40001', 'log_partition_vanished',
                 'the third raises 40001 log_partition_vanished');

-- log_name_ok_v1
SELECT ok(queen.log_name_ok_v1('orders'), 'a plain name is ok');
SELECT ok(queen.log_name_ok_v1(repeat('é', 127)), '254 bytes of multibyte text is ok');
SELECT ok(NOT queen.log_name_ok_v1(repeat('a', 256)), '256 bytes is refused');
SELECT ok(NOT queen.log_name_ok_v1(''), 'the empty name is refused');
SELECT ok(NOT queen.log_name_ok_v1(NULL), 'NULL is refused, not NULL');
SELECT ok(NOT queen.log_name_ok_v1('a' || chr(10) || 'b'), 'a control character is refused');
SELECT volatility_is('queen', 'log_name_ok_v1', ARRAY['text'], 'immutable', 'log_name_ok_v1 is IMMUTABLE');
SELECT isnt_strict('queen', 'log_name_ok_v1', ARRAY['text'], 'log_name_ok_v1 is not STRICT (total)');

-- log_uuid_ok_v1: the 36-character form only, hex digits of either case
SELECT ok(queen.log_uuid_ok_v1('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), 'a lower-case uuid is ok');
SELECT ok(queen.log_uuid_ok_v1('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'), 'an upper-case uuid is ok');
SELECT is(array_agg(x ORDER BY x) FILTER (WHERE queen.log_uuid_ok_v1(x)), NULL,
          'refused: no hyphens, braces, a digit short, a trailing space or newline, a non-hex or multibyte character, a moved hyphen, empty, NULL')
FROM (VALUES ('a0eebc999c0b4ef8bb6d6bb9bd380a11'), ('{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'),
             ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1'), ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 '),
             ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' || chr(10)), ('g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
             ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1é'), ('a0eebc99-9c0b4-ef8-bb6d-6bb9bd380a11'),
             (''), (NULL)) AS t(x);
SELECT is(queen.log_uuid_ok_v1(NULL), false, 'NULL is false, not NULL (total)');

-- log_iso_v1
SELECT is(queen.log_iso_v1('2025-01-02 03:04:05.000001+02'), '2025-01-02T01:04:05.000001Z',
          'UTC, microseconds, Z');
SELECT is(queen.log_iso_v1('2025-01-02 03:04:05+00'), '2025-01-02T03:04:05.000000Z',
          'microseconds always printed');
SET LOCAL timezone = 'America/New_York';
SELECT is(queen.log_iso_v1('2025-06-01 12:00:00+00'), '2025-06-01T12:00:00.000000Z',
          'independent of the session time zone');
SELECT is(queen.log_iso_v1(NULL), NULL, 'NULL in, NULL out');
SELECT volatility_is('queen', 'log_iso_v1', ARRAY['timestamp with time zone'], 'stable', 'log_iso_v1 is STABLE');

-- _log_require_queue_v1
SELECT gen_random_uuid() AS t001, gen_random_uuid() AS other001 \gset
INSERT INTO queen.queues (tenant_id, name) VALUES (:'t001', 't001_known');
SELECT is(queen._log_require_queue_v1(:'t001', 't001_known'),
          (SELECT id FROM queen.queues WHERE tenant_id = :'t001' AND name = 't001_known'), 'a known queue: its id');
SELECT throws_ok(format($$ SELECT queen._log_require_queue_v1(%L, 't001_known') $$, :'other001'),
                 '22023', 'log_no_such_queue', 'another tenant''s queue is no such queue');
SELECT throws_ok(format($$ SELECT queen._log_require_queue_v1(%L, 'nope') $$, :'t001'),
                 '22023', 'log_no_such_queue', 'an unknown name is no such queue');
SELECT volatility_is('queen', '_log_require_queue_v1', ARRAY['uuid', 'text'], 'stable',
                     '_log_require_queue_v1 is STABLE');

-- The keyset page (the dead-letter, message and trace listings use it).
CREATE FUNCTION pg_temp.refusal_of(p_sql TEXT) RETURNS TEXT LANGUAGE plpgsql AS $f$
DECLARE
    v_msg TEXT;
    v_detail TEXT;
BEGIN
    EXECUTE p_sql;
    RETURN 'no refusal';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || v_msg || ': ' || v_detail;
END
$f$;
SELECT is(queen._log_page_limit_v1(NULL, NULL, 'an offset'), 100, 'no limit: pages of 100');
SELECT is(queen._log_page_limit_v1(1, 0, 'an offset'), 1, 'limit 1, after 0');
SELECT is(queen._log_page_limit_v1(1000, 9, 'an offset'), 1000, 'limit 1000 is the largest');
SELECT is(pg_temp.refusal_of($$ SELECT queen._log_page_limit_v1(0, NULL, 'an offset') $$),
          '22023 log_bad_limit: limit must be 1..1000, got 0', 'limit 0 is refused');
SELECT is(pg_temp.refusal_of($$ SELECT queen._log_page_limit_v1(1001, NULL, 'an offset') $$),
          '22023 log_bad_limit: limit must be 1..1000, got 1001', 'limit 1001 is refused');
SELECT is(pg_temp.refusal_of($$ SELECT queen._log_page_limit_v1(NULL, -1, 'a trace id') $$),
          '22023 log_bad_after: after must be a trace id >= 0', 'after -1 is refused, naming the cursor');
SELECT is(pg_temp.refusal_of($$ SELECT queen._log_page_limit_v1(0, -1, 'an offset') $$),
          '22023 log_bad_limit: limit must be 1..1000, got 0', 'the limit is judged before after');
SELECT is(queen._log_page_v1('messages', '[{"id":4},{"id":7}]', 2, 'id'),
          '{"messages":[{"id":4},{"id":7}],"nextAfter":7}', 'a full page names its last cursor');
SELECT is(queen._log_page_v1('traces', '[{"offset":3}]', 2, 'offset'),
          '{"traces":[{"offset":3}],"nextAfter":null}', 'a short page has no nextAfter');
SELECT is(queen._log_page_v1('messages', '[]', 100, 'id'),
          '{"messages":[],"nextAfter":null}', 'an empty page has no nextAfter');
SELECT volatility_is('queen', '_log_page_limit_v1', ARRAY['integer', 'bigint', 'text'], 'immutable',
                     '_log_page_limit_v1 is IMMUTABLE');
SELECT volatility_is('queen', '_log_page_v1', ARRAY['text', 'jsonb', 'integer', 'text'], 'immutable',
                     '_log_page_v1 is IMMUTABLE');

SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'queen' AND p.proname LIKE '%log%' AND p.prosrc ~ 'queen\.kv\M'
             AND p.proname <> 'log_transaction_wire_v1'),
          0, 'no log function but the wire names queen.kv');

SELECT * FROM finish();
ROLLBACK;
