-- bench/wire_sql/statements_only.sql: the one-message bundle's statements
-- (ack + push + putIfAbsent marker), exactly those log_transaction_wire_v1
-- runs for it, run from one PL/pgSQL function with none of the rules around
-- them: no shape checks, no decisions, no result assembly. What this costs
-- per call is the floor of any PL/pgSQL wire that runs these statements;
-- what log_transaction_wire_v1 costs above it is its rules. Takes loop.sql's
-- bundle ({tenant, operations: [ack, push of one item], kv: [marker]}); it
-- lives in schema public, beside the bench's other helpers, never in queen.
-- run.sh creates it and runs it after the wire when PER is 1.
CREATE OR REPLACE FUNCTION public.wire_sql_statements_only(p JSONB) RETURNS JSONB
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant UUID := (p ->> 'tenant')::uuid;
    v_ack JSONB := p -> 'operations' -> 0;
    v_item JSONB := p -> 'operations' -> 1 -> 'items' -> 0;
    v_kv JSONB := p -> 'kv' -> 0;
    v_pid UUID := (v_ack ->> 'partitionId')::uuid;
    v_kvres JSONB;
    v_part UUID; v_last BIGINT; v_win INTEGER;
    v_c queen.log_consumers%ROWTYPE;
    r RECORD;
BEGIN
    PERFORM 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
     WHERE lp.id = v_pid AND q.tenant_id = v_tenant;
    INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at, created_at, updated_at)
    VALUES (v_tenant, v_kv ->> 'ns', v_kv ->> 'key', v_kv -> 'value', nextval('queen.kv_version_seq'),
            now() + ((v_kv -> 'ttlSeconds')::numeric::bigint * interval '1 second'), now(), now())
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE
       SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
           created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
     WHERE NOT queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
    RETURNING jsonb_build_array(jsonb_build_object('ok', true, 'key', k.key, 'value', k.value, 'version', k.version)) INTO v_kvres;
    SELECT lp.id, lp.last_offset, q.dedup_window_seconds INTO v_part, v_last, v_win
      FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
     WHERE q.tenant_id = v_tenant AND q.name = v_item ->> 'queue' AND lp.name = v_item ->> 'partition'
       FOR NO KEY UPDATE OF lp;
    INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at, trace_id)
    SELECT v_part, v_last + 1, gen_random_uuid(), v_item ->> 'transactionId', v_item -> 'payload', now(), NULL
     WHERE NOT EXISTS (SELECT 1 FROM queen.log_messages m WHERE m.partition_id = v_part
                         AND m.transaction_id = v_item ->> 'transactionId'
                         AND m.created_at > now() - make_interval(secs => v_win));
    UPDATE queen.log_partitions SET last_offset = v_last + 1, last_push_at = now() WHERE id = v_part;
    SELECT c.* INTO v_c FROM queen.log_consumers c
     WHERE c.partition_id = v_pid AND c.consumer_group = '__QUEUE_MODE__'
       AND (SELECT q.tenant_id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE p.id = c.partition_id) = v_tenant
       FOR UPDATE OF c;
    SELECT p.id AS part, p.name AS pname, q.id AS qid, q.name AS qname, q.retry_limit,
           m.msg_offset, m.id AS mid, m.payload, m.created_at AS mcreated INTO r
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = v_tenant
      LEFT JOIN LATERAL queen._log_ack_target_v1(p.id, '__QUEUE_MODE__', v_ack ->> 'transactionId', v_c.committed_offset) AS m ON true
     WHERE p.id = v_pid;
    UPDATE queen.log_consumers SET committed_offset = r.msg_offset, lease_id = NULL, lease_expires_at = NULL,
           fail_offset = 0, fail_count = 0
     WHERE partition_id = v_pid AND consumer_group = '__QUEUE_MODE__';
    RETURN jsonb_build_object('success', true, 'kv', v_kvres);
END
$$;
