-- the equivalent raw statement: a primary-key SELECT of a live row
\set k random(1, 10000)
SELECT value, version, expires_at, updated_at FROM queen.kv
 WHERE tenant_id = '00000000-0000-0000-0000-0000000000be'::uuid AND namespace = 'bench' AND key = 'k' || :k
   AND (expires_at IS NULL OR expires_at > now());
