-- log_encryption.sql: which queues seal their payloads. The sealing and
-- opening are the engine's (src/engine/crypt.c: AES-256-GCM with a key
-- PostgreSQL never sees); a sealed payload is stored as one JSON string
-- "qenc:v2:<key id>:<nonce>:<ciphertext>" bound to its tenant, queue,
-- partition and transactionId, so the database holds no plaintext of an
-- encryptionEnabled queue's messages, dead letters included. The broker asks
-- this function before every push (a broker without the key refuses pushes
-- into these queues) and before opening an answer's "qenc:" data strings
-- (only those of these queues are ever opened).
--
-- Owns: queen.log_encrypted_queues_v1.
-- May call: log_schema.sql. Never names the kv table.

-- log_encrypted_queues_v1(tenant, items) -> a JSON array of the distinct
-- queue names among items ([{queue, ...}], as a push takes them) whose
-- queue exists with encryptionEnabled true. Reads only; NULL or malformed
-- items give []. Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.log_encrypted_queues_v1(p_tenant UUID, p_items JSONB)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' THEN
        RETURN '[]'::jsonb;
    END IF;
    RETURN COALESCE((
        SELECT jsonb_agg(q.name ORDER BY q.name)
        FROM queen.queues q
        WHERE q.tenant_id = p_tenant
          AND (q.stored_options -> 'encryptionEnabled') = 'true'::jsonb
          AND q.name IN (SELECT e ->> 'queue' FROM jsonb_array_elements(p_items) e
                         WHERE jsonb_typeof(e) = 'object')), '[]'::jsonb);
END
$$;
