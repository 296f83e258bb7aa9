-- bench/wire_sql/rules_inline.sql: the one-message bundle (ack + push of one
-- item + putIfAbsent marker) with its rules written as tightly as PL/pgSQL
-- allows: one function, every check the bundle's path evaluates (shapes,
-- names, uuids, the kv fast check), every decision it takes (the tenant of
-- the ack, the dedup probe, the ack's verdict and the cursor it leaves), the
-- same statements as statements_only.sql, and the results built once, in the
-- shape log_transaction_wire_v1 returns. Nothing is passed between functions
-- and no JSON is built on the way. It handles only this bundle's shape and
-- raises on anything else (no DETAILs, no other paths): it is a measuring
-- stick, not a second copy of the rules.
--
-- Beside statements_only.sql (the statements alone) it splits what the wire
-- costs over its statements into what any PL/pgSQL formulation of these
-- rules must pay (this function minus the statements) and what the wire's
-- structure adds (the wire minus this function). run.sh times the three
-- taking turns. It lives in schema public with the bench's other helpers.
CREATE OR REPLACE FUNCTION public.wire_sql_rules_inline(p JSONB) RETURNS JSONB
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant UUID;
    v_ops    JSONB := p -> 'operations';
    v_ack    JSONB := v_ops -> 0;
    v_item   JSONB := v_ops -> 1 -> 'items' -> 0;
    v_kv     JSONB := p -> 'kv';
    v_op     JSONB := v_kv -> 0;
    v_pid    UUID;
    v_grp    TEXT;
    v_lease  UUID;
    v_txid   TEXT;
    v_kvres  JSONB;
    v_part   UUID;
    v_last   BIGINT;
    v_win    INTEGER;
    v_c      queen.log_consumers%ROWTYPE;
    r        RECORD;
    v_msg    UUID;
    v_txn    TEXT;
    v_trace  UUID;
    v_err    TEXT;
    v_noop   BOOLEAN := false;
    v_released BOOLEAN := false;
BEGIN
    -- The bundle.
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'log_bad_request';
    END IF;
    IF jsonb_typeof(p -> 'tenant') IS DISTINCT FROM 'string' OR NOT queen.log_uuid_ok_v1(p ->> 'tenant') THEN
        RAISE EXCEPTION 'log_bad_tenant';
    END IF;
    v_tenant := (p ->> 'tenant')::uuid;
    IF jsonb_typeof(v_ops) <> 'array' OR jsonb_typeof(v_kv) <> 'array' OR p ? 'requiredLeases' THEN
        RAISE EXCEPTION 'log_bad_request';
    END IF;
    -- The ack.
    IF jsonb_typeof(v_ack) <> 'object' OR v_ack ->> 'type' <> 'ack' THEN
        RAISE EXCEPTION 'log_bad_operation';
    END IF;
    IF jsonb_typeof(v_ack -> 'transactionId') IS DISTINCT FROM 'string'
       OR NOT queen.log_name_ok_v1(v_ack ->> 'transactionId') THEN
        RAISE EXCEPTION 'log_bad_transaction_id';
    END IF;
    IF jsonb_typeof(v_ack -> 'partitionId') IS DISTINCT FROM 'string'
       OR NOT queen.log_uuid_ok_v1(v_ack ->> 'partitionId') THEN
        RAISE EXCEPTION 'log_bad_partition_id';
    END IF;
    v_grp := CASE WHEN jsonb_typeof(v_ack -> 'consumerGroup') IS NULL
                       OR jsonb_typeof(v_ack -> 'consumerGroup') = 'null' THEN '__QUEUE_MODE__'
                  WHEN jsonb_typeof(v_ack -> 'consumerGroup') = 'string' THEN v_ack ->> 'consumerGroup' END;
    IF NOT queen.log_name_ok_v1(v_grp) THEN
        RAISE EXCEPTION 'log_bad_group';
    END IF;
    IF jsonb_typeof(v_ack -> 'leaseId') IS NOT NULL AND jsonb_typeof(v_ack -> 'leaseId') <> 'null'
       AND (jsonb_typeof(v_ack -> 'leaseId') <> 'string' OR NOT queen.log_uuid_ok_v1(v_ack ->> 'leaseId')) THEN
        RAISE EXCEPTION 'log_bad_lease_id';
    END IF;
    IF jsonb_typeof(v_ack -> 'status') IS NOT NULL AND jsonb_typeof(v_ack -> 'status') <> 'null'
       AND NOT (jsonb_typeof(v_ack -> 'status') = 'string' AND (v_ack ->> 'status') IN ('completed', 'failed')) THEN
        RAISE EXCEPTION 'log_bad_status';
    END IF;
    IF v_ack ->> 'status' = 'failed' THEN
        RAISE EXCEPTION 'a failed ack is not what this function measures';
    END IF;
    v_pid := (v_ack ->> 'partitionId')::uuid;
    v_lease := (v_ack ->> 'leaseId')::uuid;
    v_txid := v_ack ->> 'transactionId';
    -- The push item.
    IF jsonb_typeof(v_ops -> 1 -> 'items') <> 'array' OR jsonb_typeof(v_item) <> 'object' THEN
        RAISE EXCEPTION 'log_bad_request';
    END IF;
    IF jsonb_typeof(v_item -> 'queue') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(v_item ->> 'queue') THEN
        RAISE EXCEPTION 'log_bad_queue';
    END IF;
    IF jsonb_typeof(v_item -> 'partition') IS DISTINCT FROM 'null' AND v_item ? 'partition'
       AND (jsonb_typeof(v_item -> 'partition') <> 'string' OR NOT queen.log_name_ok_v1(v_item ->> 'partition')) THEN
        RAISE EXCEPTION 'log_bad_partition';
    END IF;
    IF NOT v_item ? 'payload' THEN
        RAISE EXCEPTION 'log_bad_payload';
    END IF;
    IF v_item ? 'transactionId' AND jsonb_typeof(v_item -> 'transactionId') <> 'null'
       AND (jsonb_typeof(v_item -> 'transactionId') <> 'string'
            OR NOT queen.log_name_ok_v1(v_item ->> 'transactionId')) THEN
        RAISE EXCEPTION 'log_bad_transaction_id';
    END IF;
    IF v_item ? 'traceId' AND jsonb_typeof(v_item -> 'traceId') <> 'null'
       AND (jsonb_typeof(v_item -> 'traceId') <> 'string'
            OR ((v_item ->> 'traceId') <> '' AND NOT queen.log_uuid_ok_v1(v_item ->> 'traceId'))) THEN
        RAISE EXCEPTION 'log_bad_trace_id';
    END IF;
    -- The marker: kv_apply_v1's fast check.
    IF NOT (v_op ->> 'op' = 'putIfAbsent' AND queen._kv_put_ok_v1(v_op)) THEN
        RAISE EXCEPTION 'kv_bad_request';
    END IF;

    -- The ack's tenant, before any lock.
    PERFORM 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
    WHERE lp.id = v_pid AND q.tenant_id = v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'log_ack_rejected';
    END IF;
    -- The marker.
    INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at, created_at, updated_at)
    VALUES (v_tenant, v_op ->> 'ns', v_op ->> 'key', v_op -> 'value', nextval('queen.kv_version_seq'),
            now() + ((v_op -> 'ttlSeconds')::numeric::bigint * interval '1 second'), now(), now())
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE
       SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
           created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
     WHERE NOT queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
    RETURNING jsonb_build_object('type', 'kv', 'index', 2, 'opIndex', 0, 'op', 'put', 'applied', true,
                                 'key', k.key, 'value', k.value, 'version', k.version) INTO v_kvres;
    IF v_kvres IS NULL THEN
        RAISE EXCEPTION 'kv_precondition_failed';
    END IF;
    -- The push: partition lock, dedup probe and append, offset.
    SELECT lp.id, lp.last_offset, q.dedup_window_seconds INTO v_part, v_last, v_win
    FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
    WHERE q.tenant_id = v_tenant AND q.name = v_item ->> 'queue'
      AND lp.name = COALESCE(v_item ->> 'partition', 'Default')
    FOR NO KEY UPDATE OF lp;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition to create';
    END IF;
    v_msg := gen_random_uuid();
    v_trace := NULLIF(v_item ->> 'traceId', '')::uuid;
    v_txn := CASE WHEN jsonb_typeof(v_item -> 'transactionId') = 'string' THEN v_item ->> 'transactionId'
                  ELSE v_msg::text END;
    INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at, trace_id)
    SELECT v_part, v_last + 1, v_msg, v_txn, v_item -> 'payload', now(), v_trace
    WHERE jsonb_typeof(v_item -> 'transactionId') IS DISTINCT FROM 'string'
       OR NOT EXISTS (SELECT 1 FROM queen.log_messages m
                      WHERE m.partition_id = v_part AND m.transaction_id = v_txn
                        AND m.created_at > now() - make_interval(secs => v_win));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'log_duplicate';
    END IF;
    UPDATE queen.log_partitions SET last_offset = v_last + 1, last_push_at = now() WHERE id = v_part;
    -- The ack: cursor lock, the message it names, the verdict, the cursor.
    SELECT c.* INTO v_c FROM queen.log_consumers c
    WHERE c.partition_id = v_pid AND c.consumer_group = v_grp
      AND (SELECT q.tenant_id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
           WHERE p.id = c.partition_id) = v_tenant
    FOR UPDATE OF c;
    SELECT p.id AS part, p.name AS pname, q.name AS qname, q.retry_limit, m.msg_offset INTO r
    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = v_tenant
    LEFT JOIN LATERAL queen._log_ack_target_v1(p.id, v_grp, v_txid, v_c.committed_offset) AS m ON true
    WHERE p.id = v_pid;
    IF r.part IS NULL THEN v_err := 'partition_not_found';
    ELSIF v_c.partition_id IS NULL THEN v_err := 'not_delivered';
    ELSIF r.msg_offset IS NULL THEN v_err := 'message_not_found';
    ELSIF v_lease IS NOT NULL AND v_c.lease_id IS DISTINCT FROM v_lease THEN v_err := 'lease_mismatch';
    ELSIF v_lease IS NOT NULL AND v_c.lease_expires_at <= now() THEN v_err := 'lease_expired';
    ELSIF r.msg_offset <= v_c.committed_offset THEN v_noop := true;
    ELSIF v_lease IS NOT NULL AND r.msg_offset > v_c.batch_end THEN v_err := 'outside_lease';
    ELSE
        v_released := v_c.lease_id IS NOT NULL AND r.msg_offset >= v_c.batch_end;
        v_c.committed_offset := r.msg_offset;
        IF v_c.fail_offset <= r.msg_offset THEN
            v_c.fail_offset := 0; v_c.fail_count := 0;
        END IF;
    END IF;
    IF v_err IS NOT NULL THEN
        RAISE EXCEPTION 'log_ack_rejected: %', v_err;
    END IF;
    IF v_released THEN
        v_c.lease_id := NULL; v_c.lease_expires_at := NULL;
    END IF;
    IF NOT v_noop THEN
        UPDATE queen.log_consumers
        SET committed_offset = v_c.committed_offset, lease_id = v_c.lease_id, lease_expires_at = v_c.lease_expires_at,
            fail_offset = v_c.fail_offset, fail_count = v_c.fail_count
        WHERE partition_id = v_pid AND consumer_group = v_grp;
    END IF;

    RETURN jsonb_build_object('transactionId', gen_random_uuid(), 'success', true, 'results', jsonb_build_array(
        jsonb_build_object('type', 'ack', 'index', 0, 'opIndex', 0, 'transactionId', v_txid, 'success', true,
                           'error', NULL, 'queueName', r.qname, 'partitionName', r.pname,
                           'leaseReleased', v_released, 'dlq', false, 'noop', v_noop),
        jsonb_build_object('type', 'push', 'index', 1, 'opIndex', 1, 'itemIndex', 0, 'message_id', v_msg,
                           'transaction_id', v_txn, 'queueName', v_item ->> 'queue', 'partition_id', v_part,
                           'trace_id', v_trace, 'status', 'queued'),
        v_kvres));
END
$$;
