-- the raw floor for put: the same single-row upsert on queen.kv as plain SQL,
-- no validation, no expiry rules, no result document
\set k random(0, 99999)
INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at)
VALUES ('00000000-0000-0000-0000-000000000001'::uuid, 'bench_put', 'k' || :k::int, format('{"n":%s,"s":"bench"}', :k::int)::jsonb, nextval('queen.kv_version_seq'), NULL)
ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at, updated_at = now();
