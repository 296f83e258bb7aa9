-- the raw floor for get: the same single-row primary-key select as plain SQL
\set k random(0, 99999)
SELECT value, version, expires_at, updated_at FROM queen.kv WHERE tenant_id = '00000000-0000-0000-0000-000000000001'::uuid AND namespace = 'bench' AND key = 'k' || :k::int;
