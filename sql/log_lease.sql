-- log_lease.sql: lease extension: a consumer still working on a popped
-- batch keeps its lease (the cursor rows log_pop.sql leased) alive.
--
-- Owns: queen.log_lease_extend_v1.
-- May call: log_schema.sql. Never names queen.kv.
-- Lock order (log_schema.sql): queen.log_consumers only (ascending
-- partition, group, as acks lock them).

-- log_lease_extend_v1(tenant, lease_id, seconds) ->
-- {leaseId, success, renewed, expiresAt, newExpiresAt}. Extends a live lease
-- of this tenant to now + seconds (NULL = 60). newExpiresAt = expiresAt: the
-- name the reference broker's clients read (an object, never an array:
-- Queen.renew reads result.newExpiresAt). An unknown, malformed, foreign or
-- expired lease answers success:false, renewed:false, both times null. A
-- pop that claimed several partitions gave them one lease id (log_pop.sql): every
-- live cursor holding it is extended, so the clients' one renew per lease id
-- keeps the whole batch. Locks those cursor rows in ascending (partition,
-- group), the order acks lock in (waits for a pop holding one, which is
-- short).
-- Raises 22023: log_bad_tenant, log_bad_seconds (1..604800).
CREATE OR REPLACE FUNCTION queen.log_lease_extend_v1(p_tenant UUID, p_lease_id TEXT, p_seconds INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_secs    INTEGER := COALESCE(p_seconds, 60);
    v_expires TIMESTAMPTZ;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF v_secs NOT BETWEEN 1 AND 604800 THEN
        RAISE EXCEPTION 'log_bad_seconds' USING ERRCODE = '22023',
            DETAIL = format('seconds must be 1..604800, got %s', v_secs);
    END IF;
    IF queen.log_uuid_ok_v1(p_lease_id) THEN
        PERFORM 1 FROM queen.log_consumers c
        JOIN queen.log_partitions p ON p.id = c.partition_id
        JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
        WHERE c.lease_id = p_lease_id::uuid
        ORDER BY c.partition_id, c.consumer_group
        FOR UPDATE OF c;
        WITH x AS (
            UPDATE queen.log_consumers c
            SET lease_expires_at = now() + make_interval(secs => v_secs)
            FROM queen.log_partitions p, queen.queues q
            WHERE c.lease_id = p_lease_id::uuid AND c.lease_expires_at > now()
              AND p.id = c.partition_id AND q.id = p.queue_id AND q.tenant_id = p_tenant
            RETURNING c.lease_expires_at)
        SELECT max(x.lease_expires_at) INTO v_expires FROM x;
    END IF;
    RETURN jsonb_build_object('leaseId', p_lease_id, 'success', v_expires IS NOT NULL,
                              'renewed', v_expires IS NOT NULL,
                              'expiresAt', queen.log_iso_v1(v_expires),
                              'newExpiresAt', queen.log_iso_v1(v_expires));
END
$$;

