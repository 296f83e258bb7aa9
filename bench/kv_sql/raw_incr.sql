-- the equivalent raw statement: INSERT ... ON CONFLICT adding 1 in place
\set k random(1, 10000)
INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at)
VALUES ('00000000-0000-0000-0000-0000000000be'::uuid, 'bench', 'c' || :k, '1', nextval('queen.kv_version_seq'), NULL)
ON CONFLICT (tenant_id, namespace, key) DO UPDATE
   SET value = to_jsonb(k.value::numeric + 1), version = EXCLUDED.version, updated_at = now()
RETURNING k.value, k.version;
