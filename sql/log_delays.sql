-- log_delays.sql: per queue delayedProcessing (a message stays invisible
-- for that many seconds after its push) and maxWaitTimeSeconds (a message a
-- consumer group has not consumed that long goes to the group's dead letters
-- with reason 'expired' instead of being delivered). Both are queue options
-- (log_queues.sql's specs, effect 'acted': kept in stored_options, read by pop).
--
-- Owns: queen._log_expire_head_v1, queen.log_expire_step_v1.
-- May call: log_schema.sql, log_dlq.sql (log_dead_letters.reason, log_messages.for_group).
-- Never names the kv table.
-- Enforced in two places: pop (log_pop.sql) hides what is delayed and expires the
-- head of the cursor it claimed before reading; the maintenance step here
-- expires the heads of cursors no pop is claiming, so a group that stopped
-- popping still sees its old messages move to the dead letters.
-- Lock order (log_schema.sql): log_consumers (the caller's lock, or FOR UPDATE SKIP
-- LOCKED here) -> leaves (log_messages read, log_dead_letters inserted).

-- _log_expire_head_v1(partition, group, cutoff, max) -> (committed: the
-- cursor's committed offset after it, expired: how many became dead letters). The caller holds the cursor row's lock. Walks the
-- messages past the cursor in offset order: a message meant for another group
-- (a requeued copy) is stepped over, one created before cutoff becomes a dead
-- letter of the group (reason expired, attempts 0), and the first other one
-- stops the walk; at most max messages. The cursor (committed offset, and
-- batch_end when below it) is moved past what was walked, so nothing is
-- expired twice. A message created exactly at cutoff is not expired.
CREATE OR REPLACE FUNCTION queen._log_expire_head_v1(p_partition_id UUID, p_group TEXT, p_cutoff TIMESTAMPTZ,
                                                     p_max INTEGER)
RETURNS TABLE (committed BIGINT, expired INTEGER)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_from BIGINT;
    v_to   BIGINT;
    v_n    INTEGER := 0;
    m      RECORD;
BEGIN
    SELECT c.committed_offset INTO v_from FROM queen.log_consumers c
    WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    v_to := v_from;
    FOR m IN
        SELECT lm.msg_offset, lm.id, lm.transaction_id, lm.payload, lm.created_at, lm.for_group
        FROM queen.log_messages lm
        WHERE lm.partition_id = p_partition_id AND lm.msg_offset > v_from
        ORDER BY lm.msg_offset
        LIMIT p_max
    LOOP
        IF m.for_group IS NOT NULL AND m.for_group <> p_group THEN
            v_to := m.msg_offset;
            CONTINUE;
        END IF;
        EXIT WHEN m.created_at >= p_cutoff;
        INSERT INTO queen.log_dead_letters (tenant_id, queue_id, queue_name, partition_id, partition_name,
            consumer_group, msg_offset, message_id, transaction_id, payload, error, attempts, created_at, reason)
        SELECT q.tenant_id, q.id, q.name, p.id, p.name, p_group, m.msg_offset, m.id, m.transaction_id, m.payload,
               NULL, 0, m.created_at, 'expired'
        FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
        WHERE p.id = p_partition_id;
        v_to := m.msg_offset;
        v_n := v_n + 1;
    END LOOP;
    IF v_n > 0 THEN
        UPDATE queen.log_consumers c
        SET committed_offset = v_to, batch_end = GREATEST(c.batch_end, v_to), fail_offset = 0, fail_count = 0
        WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    END IF;
    RETURN QUERY SELECT CASE WHEN v_n > 0 THEN v_to ELSE v_from END, v_n;
END
$$;

-- log_expire_step_v1(now, max_rows) -> {expired}. For each queue with
-- maxWaitTimeSeconds > 0, in id order: a partition that has no cursor and
-- holds a message past due gets queue mode's; then every cursor that holds
-- no live lease and that no pop is claiming (FOR UPDATE SKIP LOCKED) has its
-- head expired (_log_expire_head_v1 with cutoff now - maxWaitTimeSeconds),
-- up to max_rows messages in all. Never waits on a lock. Raises 22023
-- log_bad_request on NULL or negative arguments.
-- One queue at a time, only those with the option, and index probes only
-- (enable_seqscan, enable_hashjoin, enable_mergejoin off): as
-- log_retention_step_v1 (log_maintenance.sql) says, one statement over every
-- queue could keep a plan that reads every partition and cursor each cycle.
CREATE OR REPLACE FUNCTION queen.log_expire_step_v1(p_now TIMESTAMPTZ, p_max_rows INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    v_q     RECORD;
    r       RECORD;
    v_n     INTEGER;
    v_left  INTEGER := p_max_rows;
    v_total INTEGER := 0;
BEGIN
    IF p_now IS NULL OR p_max_rows IS NULL OR p_max_rows < 0 THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'now and max_rows >= 0 are required';
    END IF;
    FOR v_q IN
        SELECT q.id, (q.stored_options ->> 'maxWaitTimeSeconds')::integer AS max_wait
        FROM queen.queues q
        WHERE (q.stored_options ->> 'maxWaitTimeSeconds')::integer > 0
        ORDER BY q.id
    LOOP
        EXIT WHEN v_left <= 0;
        -- A partition no group ever popped has no cursor to expire from: queue
        -- mode's is made here (as its first pop would), when something is due.
        INSERT INTO queen.log_consumers (partition_id, consumer_group)
        SELECT p.id, '__QUEUE_MODE__'
        FROM queen.log_partitions p
        WHERE p.queue_id = v_q.id
          AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c WHERE c.partition_id = p.id)
          AND EXISTS (SELECT 1 FROM queen.log_messages m WHERE m.partition_id = p.id
                      AND m.created_at < p_now - make_interval(secs => v_q.max_wait))
        ORDER BY p.id
        ON CONFLICT (partition_id, consumer_group) DO NOTHING;
        FOR r IN
            SELECT c.partition_id, c.consumer_group
            FROM queen.log_partitions p
            JOIN queen.log_consumers c ON c.partition_id = p.id
            WHERE p.queue_id = v_q.id
              AND p.last_offset > c.committed_offset
              AND (c.lease_id IS NULL OR c.lease_expires_at <= p_now)
            ORDER BY c.partition_id, c.consumer_group
            FOR UPDATE OF c SKIP LOCKED
        LOOP
            EXIT WHEN v_left <= 0;
            SELECT e.expired INTO v_n
            FROM queen._log_expire_head_v1(r.partition_id, r.consumer_group,
                                           p_now - make_interval(secs => v_q.max_wait), v_left) e;
            v_total := v_total + v_n;
            v_left := v_left - v_n;
        END LOOP;
    END LOOP;
    RETURN jsonb_build_object('expired', v_total);
END
$$;
