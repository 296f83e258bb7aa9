-- tests/sql/kv_quota.sql: pgTAP for sql/kv_quota.sql.
--
-- Self-contained: three tenants drawn at random for this run, every row
-- rolled back.
BEGIN;
SELECT plan(12);

SELECT set_config('t027.a', gen_random_uuid()::text, true); -- quota and usage
SELECT set_config('t027.b', gen_random_uuid()::text, true); -- quota, disabled, no usage
SELECT set_config('t027.c', gen_random_uuid()::text, true); -- nothing

INSERT INTO queen.kv_quota (tenant_id, max_rows, max_bytes, max_reads_per_sec, max_writes_per_sec)
VALUES (current_setting('t027.a')::uuid, 5, 1000, NULL, 2);
INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES (current_setting('t027.b')::uuid, false);
INSERT INTO queen.kv_usage (tenant_id, kv_rows, kv_bytes, sampled, computed_at)
VALUES (current_setting('t027.a')::uuid, 3, 120, true, '2020-01-01T00:00:00Z');

CREATE FUNCTION pg_temp.one(p_tenant text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT e FROM jsonb_array_elements(queen.kv_quota_read_v1(ARRAY[p_tenant::uuid])) e
$$;

SELECT function_returns('queen', 'kv_quota_read_v1', ARRAY['uuid[]'], 'jsonb', 'Q1 kv_quota_read_v1(uuid[]) returns jsonb');
SELECT results_eq($$SELECT provolatile::text, proisstrict FROM pg_proc WHERE oid = 'queen.kv_quota_read_v1(uuid[])'::regprocedure$$,
                  $$VALUES ('s', false)$$, 'Q2 STABLE, not STRICT');
SELECT is(queen.kv_quota_read_v1(NULL), '[]'::jsonb, 'Q3 NULL tenants: []');
SELECT is(queen.kv_quota_read_v1('{}'), '[]'::jsonb, 'Q4 no tenants: []');
SELECT is(jsonb_array_length(queen.kv_quota_read_v1(ARRAY[current_setting('t027.a')::uuid, current_setting('t027.a')::uuid,
                                                          current_setting('t027.c')::uuid, NULL])),
          2, 'Q5 one element per distinct non-NULL tenant');
SELECT is(pg_temp.one(current_setting('t027.a')) - 'tenant',
          '{"hasQuota":true,"enabled":true,"maxRows":5,"maxBytes":1000,"maxReadsPerSec":null,"maxWritesPerSec":2,
            "rows":3,"bytes":120,"sampled":true,"computedAt":"2020-01-01T00:00:00+00:00"}'::jsonb,
          'Q6 quota and usage of a tenant with both rows');
SELECT is(pg_temp.one(current_setting('t027.a')) ->> 'tenant', current_setting('t027.a'), 'Q7 the tenant is named');
SELECT is(pg_temp.one(current_setting('t027.b')) - 'tenant',
          '{"hasQuota":true,"enabled":false,"maxRows":null,"maxBytes":null,"maxReadsPerSec":null,"maxWritesPerSec":null,
            "rows":0,"bytes":0,"sampled":false,"computedAt":null}'::jsonb,
          'Q8 a disabled grant, nothing measured: zeros and computedAt null');
SELECT is(pg_temp.one(current_setting('t027.c')) - 'tenant',
          '{"hasQuota":false,"enabled":false,"maxRows":null,"maxBytes":null,"maxReadsPerSec":null,"maxWritesPerSec":null,
            "rows":0,"bytes":0,"sampled":false,"computedAt":null}'::jsonb,
          'Q9 no quota row: hasQuota false');
SELECT lives_ok($$SELECT queen.kv_quota_read_v1(ARRAY[gen_random_uuid()])$$, 'Q10 an unknown tenant raises nothing');
SELECT ok((SELECT prosrc !~* '(insert|update|delete)' FROM pg_proc WHERE oid = 'queen.kv_quota_read_v1(uuid[])'::regprocedure),
          'Q11 writes nothing');
SELECT is((SELECT count(*) FROM queen.kv_usage WHERE tenant_id = current_setting('t027.c')::uuid), 0::bigint,
          'Q12 reading a tenant creates no usage row');

SELECT * FROM finish();
ROLLBACK;
