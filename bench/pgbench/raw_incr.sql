-- the raw floor for incr: the same single-row counter upsert on queen.kv as
-- plain SQL (add 1 in place), no validation, no expiry or type rules, no
-- result document
\set k random(0, 99999)
INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at)
VALUES ('00000000-0000-0000-0000-000000000001'::uuid, 'bench', 'k' || :k::int, '1', nextval('queen.kv_version_seq'), NULL)
ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET value = to_jsonb(k.value::numeric + 1), version = EXCLUDED.version, updated_at = now();
