-- tests/sql/system_maintenance.sql: the maintenance switch and pop maintenance
-- (sql/system_maintenance.sql). The row is shared by every broker and
-- test: everything here is rolled back.
BEGIN;
SELECT plan(11);
SELECT is(queen.system_maintenance_set_v1(false) -> 'maintenance', 'false'::jsonb, 'off');
SELECT is(queen.system_pop_maintenance_set_v1(false) -> 'popMaintenance', 'false'::jsonb, 'pop maintenance off');
SELECT is(queen.system_maintenance_v1(), '{"maintenance":false,"since":null,"popMaintenance":false,"popSince":null}'::jsonb,
          'off: no since');
SELECT is(queen.system_maintenance_set_v1(true) -> 'changed', 'true'::jsonb, 'switching on changes it');
SELECT is(queen.system_maintenance_v1() -> 'maintenance', 'true'::jsonb, 'on');
SELECT ok(queen.system_maintenance_v1() ->> 'since' IS NOT NULL, 'with its since');
SELECT is(queen.system_maintenance_set_v1(true) -> 'changed', 'false'::jsonb, 'on again: unchanged');
SELECT is(queen.system_pop_maintenance_set_v1(true) - 'since' - 'popSince',
          '{"maintenance":true,"popMaintenance":true,"changed":true}'::jsonb, 'pop maintenance on, the other switch as it was');
SELECT ok(queen.system_maintenance_v1() ->> 'popSince' IS NOT NULL, 'with its own since');
SELECT throws_ok($$ SELECT queen.system_pop_maintenance_set_v1(NULL) $$, '22023', 'log_bad_request', 'NULL is refused (pop)');
SELECT throws_ok($$ SELECT queen.system_maintenance_set_v1(NULL) $$, '22023', 'log_bad_request', 'NULL is refused');
SELECT * FROM finish();
ROLLBACK;
