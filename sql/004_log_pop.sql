-- 004_log_pop.sql: pop for a consumer group. Claims the (partition, group)
-- cursor row with FOR UPDATE SKIP LOCKED, reads from committed+1 up to the
-- batch size, records the lease (or, with autoAck, moves the cursor).
--
-- Owns: queen._log_pop_partition_v1, queen.log_pop_v1.
-- May call: 001. Never names queen.kv.
-- Never waits on a lock: the cursor row is claimed with SKIP LOCKED; the
-- first pop of a group on a partition creates its row under a try-advisory
-- lock and a FOR KEY SHARE SKIP LOCKED on the partition (so a concurrent
-- reclaim in 006 cannot pull the partition away, and two first pops never
-- wait on each other's insert). Order: advisory -> log_partitions ->
-- log_consumers, as the global order says.

-- _log_pop_partition_v1(tenant-checked ids...) -> the pop body for one
-- partition, or NULL when its cursor is held, there is nothing to deliver, or
-- a first-pop lock is busy. Arguments are already validated by log_pop_v1.
-- p_since: the instant the group first popped this queue (seed of mode 'new').
CREATE OR REPLACE FUNCTION queen._log_pop_partition_v1(
    p_queue TEXT, p_partition_id UUID, p_partition TEXT, p_has_row BOOLEAN,
    p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER, p_auto_ack BOOLEAN,
    p_mode TEXT, p_since TIMESTAMPTZ)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_c        queen.log_consumers%ROWTYPE;
    v_redo     BOOLEAN;
    v_attempt  INTEGER;
    v_last     BIGINT;
    v_lease    UUID;
    v_msgs     JSONB;
    v_seed     BIGINT;
BEGIN
    IF NOT p_has_row THEN
        -- Advisory class 0x51554c43 ('QULC': queen log consumer) keyed by the
        -- pair; a collision only makes this pop skip the partition once.
        IF NOT pg_try_advisory_xact_lock(1364544579,
                   hashtext(p_partition_id::text || chr(31) || p_group)) THEN
            RETURN NULL;
        END IF;
        PERFORM 1 FROM queen.log_partitions WHERE id = p_partition_id
            FOR KEY SHARE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF p_mode = 'new' THEN
            -- Start after every message pushed before the group's first pop.
            SELECT COALESCE(max(m.msg_offset), 0) INTO v_seed
            FROM queen.log_messages m
            WHERE m.partition_id = p_partition_id AND m.created_at < p_since;
        ELSE
            v_seed := 0;
        END IF;
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end, created_at)
        VALUES (p_partition_id, p_group, v_seed, v_seed, LEAST(p_since, now()))
        ON CONFLICT (partition_id, consumer_group) DO NOTHING;
    END IF;

    -- The claim: one live lease per (partition, group); an expired lease is
    -- claimable again. Never waits.
    SELECT * INTO v_c
    FROM queen.log_consumers
    WHERE partition_id = p_partition_id AND consumer_group = p_group
      AND (lease_id IS NULL OR lease_expires_at <= now())
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    -- A lease that ended without its batch acked redelivers that batch.
    v_redo := v_c.committed_offset < v_c.batch_end;
    v_lease := CASE WHEN p_auto_ack THEN NULL ELSE gen_random_uuid() END;
    v_attempt := CASE WHEN v_redo THEN v_c.delivery_attempt + 1 ELSE 1 END;

    SELECT max(m.msg_offset),
           jsonb_agg(jsonb_build_object(
               'id', m.id,
               'transactionId', m.transaction_id,
               'data', m.payload,
               'createdAt', queen.log_iso_v1(m.created_at),
               'partitionId', p_partition_id,
               'partition', p_partition,
               'leaseId', v_lease,
               'consumerGroup', p_group,
               'deliveryAttempt', v_attempt) ORDER BY m.msg_offset)
    INTO v_last, v_msgs
    FROM (SELECT * FROM queen.log_messages
          WHERE partition_id = p_partition_id
            AND msg_offset > v_c.committed_offset
            AND (NOT v_redo OR msg_offset <= v_c.batch_end)
          ORDER BY msg_offset
          LIMIT p_batch) AS m;

    IF v_last IS NULL AND v_redo THEN
        -- The redelivery range is gone (a deleted message): deliver fresh.
        v_attempt := 1;
        SELECT max(m.msg_offset),
               jsonb_agg(jsonb_build_object(
                   'id', m.id, 'transactionId', m.transaction_id, 'data', m.payload,
                   'createdAt', queen.log_iso_v1(m.created_at),
                   'partitionId', p_partition_id, 'partition', p_partition,
                   'leaseId', v_lease, 'consumerGroup', p_group,
                   'deliveryAttempt', 1) ORDER BY m.msg_offset)
        INTO v_last, v_msgs
        FROM (SELECT * FROM queen.log_messages
              WHERE partition_id = p_partition_id AND msg_offset > v_c.committed_offset
              ORDER BY msg_offset LIMIT p_batch) AS m;
    END IF;
    IF v_last IS NULL THEN
        RETURN NULL;
    END IF;

    UPDATE queen.log_consumers
    SET lease_id         = v_lease,
        lease_expires_at = CASE WHEN p_auto_ack THEN NULL
                                ELSE now() + make_interval(secs => p_lease_seconds) END,
        batch_end        = v_last,
        committed_offset = CASE WHEN p_auto_ack THEN v_last ELSE committed_offset END,
        delivery_attempt = v_attempt,
        claimed_at       = now()
    WHERE partition_id = p_partition_id AND consumer_group = p_group;

    RETURN jsonb_build_object(
        'success', true,
        'queue', p_queue,
        'partition', p_partition,
        'partitionId', p_partition_id,
        'leaseId', v_lease,
        'consumerGroup', p_group,
        'messages', v_msgs);
END
$$;

-- log_pop_v1(tenant, queue, partition, group, batch, lease_seconds, auto_ack,
--            subscription_mode) -> the pop body
-- {success, queue, partition, partitionId, leaseId, consumerGroup,
--  messages: [{id, transactionId, data, createdAt, partitionId, partition,
--              leaseId, consumerGroup, deliveryAttempt}]}
-- or NULL when nothing is available (unknown queue/partition included).
-- NULL arguments take defaults: partition any, group '__QUEUE_MODE__',
-- batch 200, lease = queue leaseTime, auto_ack false, mode 'all'.
-- Queue-level pop tries partitions with work, least recently claimed first,
-- and returns the first it can claim. Never waits on a lock.
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_partition,
-- log_bad_group, log_bad_batch (1..10000), log_bad_lease_seconds
-- (1..604800), log_bad_subscription_mode (new|all).
CREATE OR REPLACE FUNCTION queen.log_pop_v1(
    p_tenant UUID, p_queue TEXT, p_partition TEXT, p_group TEXT, p_batch INTEGER,
    p_lease_seconds INTEGER, p_auto_ack BOOLEAN, p_subscription_mode TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_group   TEXT    := COALESCE(p_group, '__QUEUE_MODE__');
    v_batch   INTEGER := COALESCE(p_batch, 200);
    v_mode    TEXT    := COALESCE(p_subscription_mode, 'all');
    v_auto    BOOLEAN := COALESCE(p_auto_ack, false);
    v_q       queen.queues%ROWTYPE;
    v_lease_s INTEGER;
    v_since   TIMESTAMPTZ;
    v_out     JSONB;
    r         RECORD;
BEGIN
    -- The refusals of _log_require_tenant_v1 / _log_require_name_v1 (001),
    -- written out: as four plpgsql calls they made every pop 5-8 us slower
    -- (pgbench; a pop that finds no queue takes about 45 us).
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION 'log_bad_tenant' USING ERRCODE = '22023',
            DETAIL = 'the tenant argument is NULL';
    END IF;
    IF NOT queen.log_name_ok_v1(p_queue) THEN
        RAISE EXCEPTION 'log_bad_queue' USING ERRCODE = '22023',
            DETAIL = 'queue must be 1..255 bytes without control characters';
    END IF;
    IF p_partition IS NOT NULL AND NOT queen.log_name_ok_v1(p_partition) THEN
        RAISE EXCEPTION 'log_bad_partition' USING ERRCODE = '22023',
            DETAIL = 'partition must be 1..255 bytes without control characters';
    END IF;
    IF NOT queen.log_name_ok_v1(v_group) THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
            DETAIL = 'consumerGroup must be 1..255 bytes without control characters';
    END IF;
    IF v_batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'log_bad_batch' USING ERRCODE = '22023',
            DETAIL = format('batch must be 1..10000, got %s', v_batch);
    END IF;
    IF p_lease_seconds IS NOT NULL AND p_lease_seconds NOT BETWEEN 1 AND 604800 THEN
        RAISE EXCEPTION 'log_bad_lease_seconds' USING ERRCODE = '22023',
            DETAIL = format('leaseSeconds must be 1..604800, got %s', p_lease_seconds);
    END IF;
    IF v_mode NOT IN ('new', 'all') THEN
        RAISE EXCEPTION 'log_bad_subscription_mode' USING ERRCODE = '22023',
            DETAIL = 'subscriptionMode must be new or all';
    END IF;

    SELECT * INTO v_q FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_lease_s := COALESCE(p_lease_seconds, v_q.lease_time);

    -- When did this group first pop this queue? Seeds mode 'new'.
    SELECT min(c.created_at) INTO v_since
    FROM queen.log_consumers c
    JOIN queen.log_partitions p ON p.id = c.partition_id
    WHERE p.queue_id = v_q.id AND c.consumer_group = v_group;

    IF v_since IS NULL AND v_mode = 'new' THEN
        -- A new group in mode 'new': pin its start now on every partition,
        -- so messages pushed before its first message arrives still count
        -- as new. A partition whose first-pop lock is busy is seeded later
        -- from the same instant (min created_at).
        v_since := now();
        FOR r IN SELECT p.id, p.name FROM queen.log_partitions p
                 WHERE p.queue_id = v_q.id ORDER BY p.id LOOP
            IF pg_try_advisory_xact_lock(1364544579, hashtext(r.id::text || chr(31) || v_group)) THEN
                PERFORM 1 FROM queen.log_partitions WHERE id = r.id FOR KEY SHARE SKIP LOCKED;
                IF FOUND THEN
                    INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end, created_at)
                    SELECT r.id, v_group, lp.last_offset, lp.last_offset, v_since
                    FROM queen.log_partitions lp WHERE lp.id = r.id
                    ON CONFLICT (partition_id, consumer_group) DO NOTHING;
                END IF;
            END IF;
        END LOOP;
    END IF;
    v_since := COALESCE(v_since, now());

    FOR r IN
        SELECT p.id, p.name, (c.partition_id IS NOT NULL) AS has_row
        FROM queen.log_partitions p
        LEFT JOIN queen.log_consumers c
               ON c.partition_id = p.id AND c.consumer_group = v_group
        WHERE p.queue_id = v_q.id
          AND (p_partition IS NULL OR p.name = p_partition)
          AND p.last_offset > COALESCE(c.committed_offset, 0)
          AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
        ORDER BY c.claimed_at NULLS FIRST, p.id
    LOOP
        v_out := queen._log_pop_partition_v1(p_queue, r.id, r.name, r.has_row, v_group,
                                             v_batch, v_lease_s, v_auto, v_mode, v_since);
        IF v_out IS NOT NULL THEN
            RETURN v_out;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
