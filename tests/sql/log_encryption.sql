-- tests/sql/log_encryption.sql: which queues seal their payloads
-- (sql/log_encryption.sql) and encryptionEnabled being acted on, not
-- stored only (log_queues.sql's specs). Own tenant; rolled back.
BEGIN;
SELECT plan(6);
SELECT gen_random_uuid() AS t \gset
SELECT queen.log_configure_v1(:'t', 'e035', '{"encryptionEnabled":true}') -> 'storedOnly' AS so \gset
SELECT ok(NOT (:'so'::jsonb ? 'encryptionEnabled'), 'encryptionEnabled is acted on, not stored only');
SELECT queen.log_configure_v1(:'t', 'p035', '{"encryptionEnabled":false}') IS NOT NULL AS plain;
SELECT is(queen.log_encrypted_queues_v1(:'t', '[{"queue":"e035","payload":1},{"queue":"p035"},{"queue":"e035"},{"queue":"nope"}]'),
          '["e035"]'::jsonb, 'only the encrypted queue, once');
SELECT is(queen.log_encrypted_queues_v1(gen_random_uuid(), '[{"queue":"e035"}]'), '[]'::jsonb, 'another tenant''s queue is not ours');
SELECT is(queen.log_encrypted_queues_v1(:'t', '{"queue":"e035"}'), '[]'::jsonb, 'not an array: none');
SELECT is(queen.log_encrypted_queues_v1(:'t', NULL), '[]'::jsonb, 'NULL: none');
SELECT throws_ok($$ SELECT queen.log_encrypted_queues_v1(NULL, '[]') $$, '22023', 'log_bad_tenant', 'a tenant is required');
SELECT * FROM finish();
ROLLBACK;
