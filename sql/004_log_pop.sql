-- 004_log_pop.sql: pop for a consumer group. Claims the (partition, group)
-- cursor row with FOR UPDATE SKIP LOCKED, reads from committed+1 up to the
-- batch size, records the lease (or, with autoAck, moves the cursor).
--
-- Owns: queen._log_subscription_start_v1, queen._log_pop_start_v1,
-- queen._log_pop_partition_v1, queen._log_pop_claim_v1, queen.log_pop_v1,
-- queen.log_pop_labels_v1.
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
-- p_since: where the group's subscription starts on this queue (its first pop,
-- or its subscriptionFrom); mode 'new' seeds the cursor from it.
-- plan_cache_mode = force_generic_plan: the batch read below has a LIMIT
-- taken from a parameter, which a generic plan must estimate (a tenth of the
-- rows) while a custom plan sees the number, so the plan cache judged the
-- generic plan dearer and planned that statement afresh on every pop
-- (pg_stat_statements: plans = calls, ~0.2-0.8 ms of planning per pop). Every
-- statement here is a primary-key lookup or range whose generic plan is the
-- custom one; setting the mode costs a few microseconds per call.
-- p_delay, p_max_wait: the queue's delayedProcessing and maxWaitTimeSeconds
-- (031): a message younger than p_delay seconds and everything after it stays
-- put; the cursor's head older than p_max_wait goes to the dead letters.
DROP FUNCTION IF EXISTS queen._log_pop_partition_v1(TEXT, UUID, TEXT, BOOLEAN, TEXT, INTEGER, INTEGER, BOOLEAN,
                                                    TEXT, TIMESTAMPTZ);
CREATE OR REPLACE FUNCTION queen._log_pop_partition_v1(
    p_queue TEXT, p_partition_id UUID, p_partition TEXT, p_has_row BOOLEAN,
    p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER, p_auto_ack BOOLEAN,
    p_mode TEXT, p_since TIMESTAMPTZ, p_delay INTEGER DEFAULT 0, p_max_wait INTEGER DEFAULT 0)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_c        queen.log_consumers%ROWTYPE;
    v_redo     BOOLEAN;
    v_attempt  INTEGER;
    v_last     BIGINT;
    v_lease    UUID;
    v_msgs     JSONB;
    v_seed     BIGINT;
    v_stop     BIGINT := 9223372036854775807;
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
    IF p_max_wait > 0 AND NOT v_redo THEN
        SELECT e.committed INTO v_c.committed_offset
        FROM queen._log_expire_head_v1(p_partition_id, p_group, now() - make_interval(secs => p_max_wait), 1000) e;
    END IF;
    IF p_delay > 0 THEN -- the first message still delayed, and all after it, stay (FIFO)
        SELECT COALESCE(min(d.msg_offset), v_stop) INTO v_stop FROM (
            SELECT msg_offset FROM queen.log_messages
            WHERE partition_id = p_partition_id AND msg_offset > v_c.committed_offset
              AND created_at > now() - make_interval(secs => p_delay)
            ORDER BY msg_offset LIMIT 1) AS d;
    END IF;
    v_lease := CASE WHEN p_auto_ack THEN NULL ELSE gen_random_uuid() END;
    v_attempt := CASE WHEN v_redo THEN v_c.delivery_attempt + 1 ELSE 1 END;

    SELECT max(m.msg_offset),
           jsonb_agg(jsonb_build_object(
               'id', m.id,
               'transactionId', m.transaction_id,
               'traceId', m.trace_id::text,
               'producer', m.producer,
               'queue', p_queue,
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
            -- one index range either way (an OR here is a filter, not a bound)
            AND msg_offset <= CASE WHEN v_redo THEN v_c.batch_end ELSE 9223372036854775807 END
            AND (for_group IS NULL OR for_group = p_group) -- a requeued dead letter (029)
            AND msg_offset < v_stop
          ORDER BY msg_offset
          LIMIT p_batch) AS m;

    IF v_last IS NULL AND v_redo THEN
        -- The redelivery range is gone (a deleted message): deliver fresh.
        v_attempt := 1;
        SELECT max(m.msg_offset),
               jsonb_agg(jsonb_build_object(
                   'id', m.id, 'transactionId', m.transaction_id, 'traceId', m.trace_id::text,
                   'producer', m.producer, 'queue', p_queue, 'data', m.payload,
                   'createdAt', queen.log_iso_v1(m.created_at),
                   'partitionId', p_partition_id, 'partition', p_partition,
                   'leaseId', v_lease, 'consumerGroup', p_group,
                   'deliveryAttempt', 1) ORDER BY m.msg_offset)
        INTO v_last, v_msgs
        FROM (SELECT * FROM queen.log_messages
              WHERE partition_id = p_partition_id AND msg_offset > v_c.committed_offset
                AND (for_group IS NULL OR for_group = p_group) AND msg_offset < v_stop
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

-- _log_subscription_start_v1(subscriptionFrom) -> the instant a new group's
-- subscription starts: NULL for none (NULL or ''), now() for 'now', else an
-- ISO-8601 date or date-time (zone optional). Anything else raises 22023
-- log_bad_subscription_from: PostgreSQL's own timestamptz input would also
-- take words such as 'yesterday' or 'epoch', which no client means.
CREATE OR REPLACE FUNCTION queen._log_subscription_start_v1(p_from TEXT)
RETURNS TIMESTAMPTZ
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    IF p_from IS NULL OR p_from = '' THEN
        RETURN NULL;
    END IF;
    IF p_from = 'now' THEN
        RETURN now();
    END IF;
    IF p_from ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)?$' THEN
        BEGIN
            RETURN p_from::timestamptz;
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format OR invalid_time_zone_displacement_value THEN
            NULL; -- e.g. 2024-02-30: refused below
        END;
    END IF;
    RAISE EXCEPTION 'log_bad_subscription_from' USING ERRCODE = '22023',
        DETAIL = 'subscriptionFrom must be now or an ISO-8601 instant';
END
$$;

-- _log_pop_start_v1(group, batch, lease_seconds, partitions,
-- subscription_mode, subscription_from) -> the subscription start of a group
-- new to a queue: NULL for none (mode 'all'; always for '__QUEUE_MODE__'),
-- else the instant (mode 'new': subscriptionFrom, or now() for mode new or
-- new-only without one). The option refusals both pops share, in this order:
-- 22023 log_bad_group, log_bad_batch (1..10000), log_bad_lease_seconds
-- (1..604800, NULL allowed), log_bad_partitions (1..10000),
-- log_bad_subscription_from. Arguments already defaulted by the caller
-- (group '__QUEUE_MODE__', batch 200, partitions 1). Called as an
-- expression, not a query (see 003's cost note on _log_push_apply_v1).
CREATE OR REPLACE FUNCTION queen._log_pop_start_v1(p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER,
                                                   p_partitions INTEGER, p_subscription_mode TEXT,
                                                   p_subscription_from TEXT)
RETURNS TIMESTAMPTZ
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_start TIMESTAMPTZ;
BEGIN
    IF NOT queen.log_name_ok_v1(p_group) THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
            DETAIL = 'consumerGroup must be 1..255 bytes without control characters';
    END IF;
    IF p_batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'log_bad_batch' USING ERRCODE = '22023',
            DETAIL = format('batch must be 1..10000, got %s', p_batch);
    END IF;
    IF p_lease_seconds IS NOT NULL AND p_lease_seconds NOT BETWEEN 1 AND 604800 THEN
        RAISE EXCEPTION 'log_bad_lease_seconds' USING ERRCODE = '22023',
            DETAIL = format('leaseSeconds must be 1..604800, got %s', p_lease_seconds);
    END IF;
    IF p_partitions NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'log_bad_partitions' USING ERRCODE = '22023',
            DETAIL = format('partitions must be 1..10000, got %s', p_partitions);
    END IF;
    v_start := queen._log_subscription_start_v1(p_subscription_from);
    IF p_group = '__QUEUE_MODE__' THEN
        RETURN NULL;
    END IF;
    IF v_start IS NULL AND p_subscription_mode IN ('new', 'new-only') THEN
        RETURN now();
    END IF;
    RETURN v_start;
END
$$;

-- _log_pop_claim_v1(queue ids, ...) -> the pop body over the partitions of
-- those queues, or NULL. Arguments are already validated and defaulted by the
-- public functions; p_mode is 'new' or 'all', p_start the subscription start
-- of a group new to a queue (NULL: none, mode 'all').
-- Claims up to p_partitions partitions, least recently claimed first, each
-- with its own lease; p_batch caps the messages of the whole call, not of
-- each partition. The body's top-level partition/leaseId are the first
-- claim's; every message names its own queue, partitionId and leaseId.
CREATE OR REPLACE FUNCTION queen._log_pop_claim_v1(
    p_queues UUID[], p_partition TEXT, p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER,
    p_auto_ack BOOLEAN, p_mode TEXT, p_start TIMESTAMPTZ, p_partitions INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_left   INTEGER := p_batch;
    v_claims INTEGER := 0;
    v_first  JSONB;
    v_msgs   JSONB := '[]'::jsonb;
    v_out    JSONB;
    v_since  TIMESTAMPTZ;
    v_qid    UUID;
    r        RECORD;
BEGIN
    IF p_start IS NOT NULL THEN
        -- A group new to a queue with a subscription start: pin that start on
        -- every partition now, so messages pushed before its first message
        -- arrives still count as after it. A partition whose first-pop lock is
        -- busy is seeded later from the same instant (min created_at).
        FOREACH v_qid IN ARRAY p_queues LOOP
            CONTINUE WHEN EXISTS (SELECT 1 FROM queen.log_consumers c
                                  JOIN queen.log_partitions p ON p.id = c.partition_id
                                  WHERE p.queue_id = v_qid AND c.consumer_group = p_group);
            FOR r IN SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = v_qid ORDER BY p.id LOOP
                CONTINUE WHEN NOT pg_try_advisory_xact_lock(1364544579, hashtext(r.id::text || chr(31) || p_group));
                PERFORM 1 FROM queen.log_partitions WHERE id = r.id FOR KEY SHARE SKIP LOCKED;
                CONTINUE WHEN NOT FOUND;
                INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end, created_at)
                SELECT r.id, p_group, s.o, s.o, p_start
                FROM (SELECT CASE WHEN p_start >= now() THEN lp.last_offset
                                  ELSE (SELECT COALESCE(max(m.msg_offset), 0) FROM queen.log_messages m
                                        WHERE m.partition_id = r.id AND m.created_at < p_start)
                             END AS o
                      FROM queen.log_partitions lp WHERE lp.id = r.id) s
                ON CONFLICT (partition_id, consumer_group) DO NOTHING;
            END LOOP;
        END LOOP;
    END IF;

    FOR r IN
        SELECT p.id, p.name, q.id AS queue_id, q.name AS queue, q.lease_time,
               COALESCE((q.stored_options ->> 'delayedProcessing')::integer, 0) AS delay,
               COALESCE((q.stored_options ->> 'maxWaitTimeSeconds')::integer, 0) AS max_wait,
               (c.partition_id IS NOT NULL) AS has_row
        -- The partitions reached from each queue id (p_queues holds each
        -- once). The generic plan guesses ten elements for any array, and
        -- for "queue_id = ANY" over it that guess made a sequential scan of
        -- every partition of every queue look cheaper than the (queue_id,
        -- name) index on a table of a few hundred rows; this shape is an
        -- index probe per queue, but only in the generic plan (the custom
        -- plans it out-costs were planned again on every pop), hence the
        -- function's plan_cache_mode. With 752 partitions in the database,
        -- this function's own time per one-message pop 95-101 -> 59-66 us.
        FROM unnest(p_queues) AS u(qid)
        JOIN queen.log_partitions p ON p.queue_id = u.qid
        JOIN queen.queues q ON q.id = p.queue_id
        LEFT JOIN queen.log_consumers c
               ON c.partition_id = p.id AND c.consumer_group = p_group
        WHERE (p_partition IS NULL OR p.name = p_partition)
          AND p.last_offset > COALESCE(c.committed_offset, 0)
          AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
        ORDER BY c.claimed_at NULLS FIRST, p.id
    LOOP
        v_since := NULL;
        IF NOT r.has_row THEN
            -- When did this group first pop this queue? Seeds mode 'new'.
            SELECT min(c.created_at) INTO v_since
            FROM queen.log_consumers c
            JOIN queen.log_partitions p ON p.id = c.partition_id
            WHERE p.queue_id = r.queue_id AND c.consumer_group = p_group;
        END IF;
        v_out := queen._log_pop_partition_v1(r.queue, r.id, r.name, r.has_row, p_group, v_left,
                                             COALESCE(p_lease_seconds, r.lease_time), p_auto_ack, p_mode,
                                             COALESCE(v_since, p_start, now()), r.delay, r.max_wait);
        CONTINUE WHEN v_out IS NULL;
        v_first := COALESCE(v_first, v_out);
        v_msgs := v_msgs || (v_out -> 'messages');
        v_left := v_left - jsonb_array_length(v_out -> 'messages');
        v_claims := v_claims + 1;
        EXIT WHEN v_left <= 0 OR v_claims >= p_partitions;
    END LOOP;
    IF v_first IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_set(v_first, '{messages}', v_msgs);
END
$$;

-- log_pop_v1(tenant, queue, partition, group, batch, lease_seconds, auto_ack,
--            subscription_mode, subscription_from, partitions) -> the pop body
-- {success, queue, partition, partitionId, leaseId, consumerGroup,
--  messages: [{id, transactionId, traceId, producer, queue, data, createdAt, partitionId,
--              partition, leaseId, consumerGroup, deliveryAttempt}]}
-- or NULL when nothing is available (unknown queue/partition included).
-- NULL arguments take defaults: partition any, group '__QUEUE_MODE__',
-- batch 200, lease = queue leaseTime, auto_ack false, mode 'all', no
-- subscription start, 1 partition.
-- subscription_mode: 'new' (or its alias 'new-only') starts a group new to
-- the queue after what was pushed before its first pop; any other value
-- (all, from_beginning, ...) starts it at the beginning, as the reference
-- broker does. subscription_from ('now' or an ISO-8601 instant) starts a new
-- group there instead. Both apply only when the group first pops the queue,
-- and never to queue mode ('__QUEUE_MODE__' consumes the backlog).
-- A queue-level pop (partition NULL) claims up to `partitions` partitions.
-- Never waits on a lock.
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_partition,
-- log_bad_group, log_bad_batch (1..10000), log_bad_lease_seconds
-- (1..604800), log_bad_subscription_from, log_bad_partitions (1..10000).
DROP FUNCTION IF EXISTS queen.log_pop_v1(UUID, TEXT, TEXT, TEXT, INTEGER, INTEGER, BOOLEAN, TEXT);
CREATE OR REPLACE FUNCTION queen.log_pop_v1(
    p_tenant UUID, p_queue TEXT, p_partition TEXT, p_group TEXT, p_batch INTEGER,
    p_lease_seconds INTEGER, p_auto_ack BOOLEAN, p_subscription_mode TEXT,
    p_subscription_from TEXT DEFAULT NULL, p_partitions INTEGER DEFAULT NULL)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_group   TEXT    := COALESCE(p_group, '__QUEUE_MODE__');
    v_batch   INTEGER := COALESCE(p_batch, 200);
    v_parts   INTEGER := COALESCE(p_partitions, 1);
    v_start   TIMESTAMPTZ;
    v_qid     UUID;
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
    v_start := queen._log_pop_start_v1(v_group, v_batch, p_lease_seconds, v_parts, p_subscription_mode,
                                       p_subscription_from);

    SELECT id INTO v_qid FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN queen._log_pop_claim_v1(ARRAY[v_qid], p_partition, v_group, v_batch, p_lease_seconds,
                                   COALESCE(p_auto_ack, false), CASE WHEN v_start IS NULL THEN 'all' ELSE 'new' END, v_start, v_parts);
END
$$;

-- log_pop_labels_v1(tenant, namespace, task, group, batch, lease_seconds,
--                   auto_ack, subscription_mode, subscription_from, partitions)
-- -> the pop body of log_pop_v1 over every queue of the tenant whose labels
-- match (namespace and/or task; a NULL label matches any), or NULL. The
-- top-level queue is the first claim's; each message names its own queue.
-- Raises 22023 as log_pop_v1 does, and log_bad_labels (neither given, or one
-- not 1..255 bytes without control characters).
CREATE OR REPLACE FUNCTION queen.log_pop_labels_v1(
    p_tenant UUID, p_namespace TEXT, p_task TEXT, p_group TEXT, p_batch INTEGER,
    p_lease_seconds INTEGER, p_auto_ack BOOLEAN, p_subscription_mode TEXT,
    p_subscription_from TEXT, p_partitions INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_group   TEXT    := COALESCE(p_group, '__QUEUE_MODE__');
    v_batch   INTEGER := COALESCE(p_batch, 200);
    v_parts   INTEGER := COALESCE(p_partitions, 1);
    v_start   TIMESTAMPTZ;
    v_queues  UUID[];
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION 'log_bad_tenant' USING ERRCODE = '22023',
            DETAIL = 'the tenant argument is NULL';
    END IF;
    IF (p_namespace IS NULL AND p_task IS NULL)
       OR (p_namespace IS NOT NULL AND NOT queen.log_name_ok_v1(p_namespace))
       OR (p_task IS NOT NULL AND NOT queen.log_name_ok_v1(p_task)) THEN
        RAISE EXCEPTION 'log_bad_labels' USING ERRCODE = '22023',
            DETAIL = 'namespace and/or task must be given, each 1..255 bytes without control characters';
    END IF;
    v_start := queen._log_pop_start_v1(v_group, v_batch, p_lease_seconds, v_parts, p_subscription_mode,
                                       p_subscription_from);

    SELECT array_agg(q.id ORDER BY q.id) INTO v_queues
    FROM queen.queues q
    WHERE q.tenant_id = p_tenant
      AND (p_namespace IS NULL OR q.namespace = p_namespace)
      AND (p_task IS NULL OR q.task = p_task);
    IF v_queues IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN queen._log_pop_claim_v1(v_queues, NULL, v_group, v_batch, p_lease_seconds,
                                   COALESCE(p_auto_ack, false), CASE WHEN v_start IS NULL THEN 'all' ELSE 'new' END, v_start, v_parts);
END
$$;
