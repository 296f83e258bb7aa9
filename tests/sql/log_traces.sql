-- tests/sql/log_traces.sql: recording traces against a message, lookup
-- by message and by name (with a cursor), the refusals, and the retention
-- step (sql/log_traces.sql). Own tenants; rolled back.
BEGIN;
SELECT plan(16);
SELECT gen_random_uuid() AS t, gen_random_uuid() AS other \gset
SELECT (queen.log_push_v1(:'t', '[{"queue":"t033","payload":1,"transactionId":"x1"}]') -> 0 ->> 'partition_id') AS pid \gset

SELECT is((queen.log_trace_add_v1(:'t', :'pid', 'x1', 'received', '{"by":"w1"}')) -> 'recorded', 'true'::jsonb, 'a trace is recorded');
SELECT queen.log_trace_add_v1(:'t', :'pid', 'x1', 'processed', '42') IS NOT NULL AS second;
SELECT queen.log_trace_add_v1(:'t', :'pid', 'x2', 'received', NULL) IS NOT NULL AS third;
SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'traceName', e -> 'data'))
           FROM jsonb_array_elements(queen.log_traces_by_message_v1(:'t', :'pid', 'x1') -> 'traces') e),
          '[["received",{"by":"w1"}],["processed",42]]'::jsonb, 'by message: both, in order, with their data');
SELECT is(queen.log_traces_by_message_v1(:'t', :'pid', 'x1') #>> '{traces,0,queue}', 't033', 'a trace names its queue');
SELECT is(jsonb_array_length(queen.log_traces_by_name_v1(:'t', 'received', NULL, NULL) -> 'traces'), 2, 'by name: two received');
SELECT is(queen.log_traces_by_name_v1(:'t', 'received', 1, NULL) #>> '{traces,0,transactionId}', 'x1', 'a page of one');
SELECT is(queen.log_traces_by_name_v1(:'t', 'received', 1,
             (queen.log_traces_by_name_v1(:'t', 'received', 1, NULL) ->> 'nextAfter')::bigint) #>> '{traces,0,transactionId}',
          'x2', 'the next page');
SELECT is(queen.log_traces_by_message_v1(:'other', :'pid', 'x1') -> 'traces', '[]'::jsonb, 'another tenant sees none');
SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'trace_name', e -> 'trace_count', e -> 'message_count') ORDER BY e ->> 'trace_name')
           FROM jsonb_array_elements(queen.log_trace_names_v1(:'t', NULL) -> 'trace_names') e),
          '[["processed",1,1],["received",2,2]]'::jsonb, 'the names with their counts');
SELECT is(queen.log_trace_names_v1(:'t', 1) - 'trace_names', '{"total":2,"pagination":{"limit":1,"offset":0}}'::jsonb,
          'total counts every name, past the limit');
SELECT is(queen.log_trace_names_v1(:'other', NULL), '{"trace_names":[],"total":0,"pagination":{"limit":50,"offset":0}}'::jsonb,
          'another tenant: none');
SELECT throws_ok(format($$ SELECT queen.log_trace_add_v1(%L, %L, 'x1', 'n', NULL) $$, :'other', :'pid'), '22023',
                 'log_bad_partition_id', 'another tenant cannot trace this partition');
SELECT throws_ok(format($$ SELECT queen.log_trace_add_v1(%L, %L, 'x1', '', NULL) $$, :'t', :'pid'), '22023',
                 'log_bad_trace_name', 'an empty name');
SELECT throws_ok(format($$ SELECT queen.log_trace_add_v1(%L, %L, 'x1', 'n', to_jsonb(repeat('a', 70000))) $$, :'t', :'pid'), '22001',
                 'log_trace_too_large', 'data over 64 KiB');
-- Retention: age the first trace past a day; a step with one day deletes it alone.
UPDATE queen.log_traces SET created_at = now() - interval '2 days' WHERE tenant_id = :'t' AND trace_name = 'processed';
SELECT is(queen.log_trace_retention_step_v1(now() - interval '100 years', 86400, 1000), '{"deleted":0}'::jsonb,
          'nothing is that old');
SELECT ok((queen.log_trace_retention_step_v1(now(), 86400, 1000) ->> 'deleted')::int >= 1, 'the step deletes');
SELECT ok(NOT EXISTS (SELECT 1 FROM queen.log_traces WHERE tenant_id = :'t' AND trace_name = 'processed')
          AND (SELECT count(*) FROM queen.log_traces WHERE tenant_id = :'t') = 2,
          'the old trace is gone, the recent ones stay');
SELECT * FROM finish();
ROLLBACK;
