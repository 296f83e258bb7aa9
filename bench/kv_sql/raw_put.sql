-- the equivalent raw statement: INSERT ... ON CONFLICT DO UPDATE
\set k random(1, 10000)
INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at)
VALUES ('00000000-0000-0000-0000-0000000000be'::uuid, 'bench', 'k' || :k, '{"n": 1}', nextval('queen.kv_version_seq'), NULL)
ON CONFLICT (tenant_id, namespace, key) DO UPDATE
   SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at, updated_at = now()
RETURNING k.version;
