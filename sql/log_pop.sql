-- log_pop.sql: pop for a consumer group. Claims the (partition, group)
-- cursor row with FOR UPDATE SKIP LOCKED, reads from committed+1 up to the
-- batch size, records the lease (or, with autoAck, moves the cursor).
--
-- Owns: queen._log_subscription_start_v1, queen._log_pop_start_v1,
-- queen._log_subscribe_v1, queen._log_pop_partition_v1,
-- queen._log_pop_claim_v1, queen.log_pop_v1, queen.log_pop_labels_v1,
-- queen._log_pop_expired_v1.
-- May call: log_schema.sql, log_delays.sql (_log_expire_head_v1). Never names queen.kv.
-- Never waits on a lock but one: the cursor row is claimed with SKIP LOCKED;
-- the first pop of a group on a partition creates its row under a
-- try-advisory lock and a FOR KEY SHARE SKIP LOCKED on the partition (so a
-- concurrent reclaim in log_maintenance.sql cannot pull the partition away, and two first
-- pops never wait on each other's insert); the drain check's FOR SHARE is
-- SKIP LOCKED too. The one wait: a group's first contact with a queue
-- (_log_subscribe_v1) locks the queue row, once per (queue, group), behind
-- partition inserts in flight. Order: queues -> advisory -> log_partitions
-- -> log_consumers -> leaves, as the global order says (the advisory lock
-- is a try, which cannot deadlock).
-- Besides: a dead letter written here (log_delays.sql's expiry of the head, and
-- _log_pop_expired_v1 when expired leases pass retryLimit) is a leaf whose
-- foreign key takes the queue row FOR KEY SHARE under the cursor lock, as
-- log_ack.sql's failed ack does; it waits only behind the queue's FOR UPDATE (a
-- group's first contact, a queue delete), and against a queue delete's
-- cascade onto this cursor PostgreSQL's deadlock check ends one of the two
-- (40P01: the pop answers unavailable, which clients retry).

-- _log_pop_expired_v1(cursor) -> the cursor as the pop goes on with it.
-- Called by _log_pop_partition_v1 with the row it claimed (FOR UPDATE) when
-- that row's lease expired with (committed_offset, batch_end] not all acked:
-- the consumer died or stalled, which counts as one failed attempt for every
-- message of that range, as SQS counts each receive of a message not deleted
-- (a partial ack moved committed_offset, so the acked messages are out of
-- it; every message in it was in every delivery of the range, which only
-- shrinks, so one count per cursor, expired_count, is each one's exact
-- count). A message's failed attempts are expired_count plus, for the
-- message at fail_offset, its explicit failures (log_ack.sql). Past the queue's
-- retryLimit the message goes to the dead letters with reason 'failed', as
-- log_ack.sql's failed ack past the limit does, and is consumed: the whole range
-- when expired_count passes, else the head alone when its explicit failures
-- take it past. Writes the row at once (count, cursor, lease cleared), so
-- an expiry is counted exactly once even if the pop then delivers nothing.
-- Costs one primary-key read of the queue and one more write of the cursor
-- row per expired lease, and an index range over the batch only when it
-- dead-letters; a pop that finds no expired lease pays one IF. Measured
-- 2026-12-03 (2-core VM shared with other builds, --fast cluster): a pop
-- reclaiming an expired lease of 10 messages, 0.56-0.67 ms before, 0.86-1.38
-- ms with the count (noisy box). Reproduce: pgbench -n -r -t 3000 -f
-- expire.sql -f pop.sql (expire.sql: UPDATE queen.log_consumers SET
-- lease_expires_at = now() - interval '1 s' WHERE lease_id IS NOT NULL;
-- pop.sql: log_pop_v1(..., 10, 30, NULL, NULL) of a queue with 10 messages
-- and retryLimit 1000000). Locks: the dead letter's
-- insert takes the queue row FOR KEY SHARE (its foreign key), as log_ack.sql's ack
-- and log_delays.sql's expiry do under a cursor lock.
CREATE OR REPLACE FUNCTION queen._log_pop_expired_v1(p_c queen.log_consumers)
RETURNS queen.log_consumers
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n  INTEGER := p_c.expired_count + 1;
    v_q  RECORD;
    v_to BIGINT;
BEGIN
    SELECT q.id, q.tenant_id, q.name, q.retry_limit, p.name AS pname INTO v_q
    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = p_c.partition_id;
    IF v_n > v_q.retry_limit THEN
        v_to := p_c.batch_end;
    ELSIF p_c.fail_offset = p_c.committed_offset + 1 AND p_c.fail_count + v_n > v_q.retry_limit THEN
        v_to := p_c.fail_offset;
    END IF;
    IF v_to IS NOT NULL THEN
        INSERT INTO queen.log_dead_letters (tenant_id, queue_id, queue_name, partition_id,
            partition_name, consumer_group, msg_offset, message_id, transaction_id,
            payload, error, attempts, created_at, failed_at)
        SELECT v_q.tenant_id, v_q.id, v_q.name, p_c.partition_id, v_q.pname, p_c.consumer_group,
               m.msg_offset, m.id, m.transaction_id, m.payload,
               format('lease expired %s times without an ack', v_n)
                   || CASE WHEN m.msg_offset = p_c.fail_offset AND p_c.fail_count > 0
                           THEN format(', after %s failures', p_c.fail_count) ELSE '' END,
               v_n + CASE WHEN m.msg_offset = p_c.fail_offset THEN p_c.fail_count ELSE 0 END,
               m.created_at, now()
        FROM queen.log_messages m
        WHERE m.partition_id = p_c.partition_id
          AND m.msg_offset > p_c.committed_offset AND m.msg_offset <= v_to
          AND (m.for_group IS NULL OR m.for_group = p_c.consumer_group) -- a requeued dead letter (log_dlq.sql)
        ORDER BY m.msg_offset;
        p_c.committed_offset := v_to;
        IF p_c.fail_offset <= v_to THEN
            p_c.fail_offset := 0; p_c.fail_count := 0;
        END IF;
    END IF;
    -- The count belongs to the range: gone with it when nothing is left.
    p_c.expired_count := CASE WHEN p_c.committed_offset < p_c.batch_end THEN v_n ELSE 0 END;
    p_c.lease_id := NULL; p_c.lease_expires_at := NULL;
    UPDATE queen.log_consumers
    SET committed_offset = p_c.committed_offset, expired_count = p_c.expired_count,
        fail_offset = p_c.fail_offset, fail_count = p_c.fail_count,
        lease_id = NULL, lease_expires_at = NULL
    WHERE partition_id = p_c.partition_id AND consumer_group = p_c.consumer_group;
    RETURN p_c;
END
$$;

-- _log_pop_partition_v1(subscription, tenant-checked ids...) -> the pop body
-- for one partition, or NULL when its cursor is held, there is nothing to
-- deliver, or a first-pop lock is busy. Arguments are already validated by
-- log_pop_v1. p_since: the subscription's start (log_subscriptions.start_at;
-- NULL = from the beginning), which seeds the group's first cursor here.
-- plan_cache_mode = force_generic_plan: the batch read below has a LIMIT
-- taken from a parameter, which a generic plan must estimate (a tenth of the
-- rows) while a custom plan sees the number, so the plan cache judged the
-- generic plan dearer and planned that statement afresh on every pop
-- (pg_stat_statements: plans = calls, ~0.2-0.8 ms of planning per pop). Every
-- statement here is a primary-key lookup or range whose generic plan is the
-- custom one; setting the mode costs a few microseconds per call.
-- p_delay, p_max_wait: the queue's delayedProcessing and maxWaitTimeSeconds
-- (log_delays.sql): a message younger than p_delay seconds and everything after it stays
-- put; the cursor's head older than p_max_wait goes to the dead letters.
-- A claim that leaves the cursor without a lease (autoAck, or nothing to
-- deliver) and nothing past it removes the partition's ready row (log_schema.sql's
-- invariant): under the partition's FOR SHARE, taken SKIP LOCKED, so a push
-- in flight (FOR NO KEY UPDATE) keeps the row, and a push after the look
-- waits for this commit and inserts the row afresh. p_last_offset: the
-- partition's last offset as the caller read it (a hint: it only grows, so
-- a batch that ends below it left work behind, and no look is needed).
-- p_lease: the lease id the claim gives every cursor it claims in one call
-- (NULL: a fresh one; ignored with autoAck).
DROP FUNCTION IF EXISTS queen._log_pop_partition_v1(TEXT, UUID, TEXT, BOOLEAN, TEXT, INTEGER, INTEGER, BOOLEAN,
                                                    TEXT, TIMESTAMPTZ);
DROP FUNCTION IF EXISTS queen._log_pop_partition_v1(TEXT, UUID, TEXT, BOOLEAN, TEXT, INTEGER, INTEGER, BOOLEAN,
                                                    TEXT, TIMESTAMPTZ, INTEGER, INTEGER);
DROP FUNCTION IF EXISTS queen._log_pop_partition_v1(BIGINT, TEXT, UUID, TEXT, BOOLEAN, TEXT, INTEGER, INTEGER,
                                                    BOOLEAN, TIMESTAMPTZ, INTEGER, INTEGER);
DROP FUNCTION IF EXISTS queen._log_pop_partition_v1(BIGINT, TEXT, UUID, TEXT, BOOLEAN, BIGINT, TEXT, INTEGER, INTEGER,
                                                    BOOLEAN, TIMESTAMPTZ, INTEGER, INTEGER);
CREATE OR REPLACE FUNCTION queen._log_pop_partition_v1(
    p_sub BIGINT, p_queue TEXT, p_partition_id UUID, p_partition TEXT, p_has_row BOOLEAN, p_last_offset BIGINT,
    p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER, p_auto_ack BOOLEAN,
    p_since TIMESTAMPTZ, p_delay INTEGER, p_max_wait INTEGER, p_lease UUID DEFAULT NULL)
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
    v_done     BIGINT;
    v_fresh    BOOLEAN := false;
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
        IF p_since IS NOT NULL THEN
            -- Start after every message pushed before the subscription began.
            SELECT COALESCE(max(m.msg_offset), 0) INTO v_seed
            FROM queen.log_messages m
            WHERE m.partition_id = p_partition_id AND m.created_at < p_since;
        ELSE
            v_seed := 0;
        END IF;
        IF p_max_wait > 0 THEN
            -- The head's expiry below works on the stored cursor.
            INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end, created_at)
            VALUES (p_partition_id, p_group, v_seed, v_seed, LEAST(COALESCE(p_since, now()), now()))
            ON CONFLICT (partition_id, consumer_group) DO NOTHING;
        ELSE
            -- The cursor is written once, at the end, as this pop leaves it:
            -- a first pop of a partition (one message per partition, say)
            -- pays one INSERT instead of an INSERT, a claim and an UPDATE.
            v_fresh := true;
            v_c.committed_offset := v_seed;
            v_c.batch_end := v_seed;
            v_c.delivery_attempt := 0;
        END IF;
    END IF;

    IF NOT v_fresh THEN
        -- The claim: one live lease per (partition, group); an expired lease
        -- is claimable again. Never waits.
        SELECT * INTO v_c
        FROM queen.log_consumers
        WHERE partition_id = p_partition_id AND consumer_group = p_group
          AND (lease_id IS NULL OR lease_expires_at <= now())
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        -- A lease still on the row here has expired (the claim's condition)
        -- with part of its batch unacked: count it before redelivering.
        IF v_c.lease_id IS NOT NULL AND v_c.committed_offset < v_c.batch_end THEN
            v_c := queen._log_pop_expired_v1(v_c);
        END IF;
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
    v_lease := CASE WHEN p_auto_ack THEN NULL ELSE COALESCE(p_lease, gen_random_uuid()) END;
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
            AND (for_group IS NULL OR for_group = p_group) -- a requeued dead letter (log_dlq.sql)
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

    IF v_fresh THEN
        -- The new cursor as this pop leaves it (seeded, when nothing was
        -- delivered). A cursor made meanwhile by another path (a seek, the
        -- expiry step) wins: this pop then delivers nothing.
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end,
                                         delivery_attempt, lease_id, lease_expires_at, created_at, claimed_at)
        VALUES (p_partition_id, p_group,
                CASE WHEN p_auto_ack AND v_last IS NOT NULL THEN v_last ELSE v_c.committed_offset END,
                COALESCE(v_last, v_c.batch_end),
                CASE WHEN v_last IS NULL THEN 0 ELSE v_attempt END,
                CASE WHEN v_last IS NULL THEN NULL ELSE v_lease END,
                CASE WHEN v_last IS NULL OR p_auto_ack THEN NULL
                     ELSE now() + make_interval(secs => p_lease_seconds) END,
                LEAST(COALESCE(p_since, now()), now()), now())
        ON CONFLICT (partition_id, consumer_group) DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;

    IF v_last IS NULL OR p_auto_ack THEN
        -- Where the cursor stands once this commits, with no lease on it.
        v_done := COALESCE(v_last, v_c.committed_offset);
        -- Drained? Not when the batch ended below the hint; else the look
        -- that counts, under the lock a push must wait for.
        IF v_done >= p_last_offset THEN
            PERFORM 1 FROM queen.log_partitions WHERE id = p_partition_id FOR SHARE SKIP LOCKED;
            IF FOUND THEN
                -- A fresh statement, so it sees every push committed before the lock.
                DELETE FROM queen.log_ready
                WHERE subscription_id = p_sub AND partition_id = p_partition_id
                  AND NOT EXISTS (SELECT 1 FROM queen.log_messages m
                                  WHERE m.partition_id = p_partition_id AND m.msg_offset > v_done);
            END IF;
        END IF;
    END IF;
    IF v_last IS NULL THEN
        RETURN NULL;
    END IF;

    IF NOT v_fresh THEN
        UPDATE queen.log_consumers
        SET lease_id         = v_lease,
            lease_expires_at = CASE WHEN p_auto_ack THEN NULL
                                    ELSE now() + make_interval(secs => p_lease_seconds) END,
            batch_end        = v_last,
            committed_offset = CASE WHEN p_auto_ack THEN v_last ELSE committed_offset END,
            delivery_attempt = v_attempt,
            expired_count    = CASE WHEN v_attempt = 1 THEN 0 ELSE expired_count END, -- a new batch
            claimed_at       = now()
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
    END IF;

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

-- _log_subscribe_v1(queue id, group, start) -> the group's subscription to
-- the queue, made at its first contact: start_at = start (NULL: from the
-- beginning), and a ready row (log_schema.sql) for every partition that may hold work
-- for it, so the group's pops find them without a scan. Later contacts read
-- the row and change nothing (the start of the first contact stays).
-- The first contact locks the queue row FOR UPDATE, which a partition's
-- insert (its foreign-key check takes FOR KEY SHARE) waits for: no partition
-- can appear unseen between this seeding and its commit, and the pushes that
-- create partitions afterwards see the subscription. Of the partitions that
-- exist, with a start only those pushed to since it, or locked by a push in
-- flight (which may not see the subscription), get a row; the rest are held
-- FOR SHARE until commit, so their next push sees it. A row for a
-- partition that log_maintenance.sql's reclaim deletes meanwhile is dropped by the walk.
-- Lock order: queues -> log_partitions -> leaves; the caller holds no
-- partition or cursor lock yet (log_schema.sql).
CREATE OR REPLACE FUNCTION queen._log_subscribe_v1(p_qid UUID, p_group TEXT, p_start TIMESTAMPTZ)
RETURNS queen.log_subscriptions
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_s queen.log_subscriptions%ROWTYPE;
BEGIN
    SELECT * INTO v_s FROM queen.log_subscriptions WHERE queue_id = p_qid AND consumer_group = p_group;
    IF FOUND THEN
        RETURN v_s;
    END IF;
    PERFORM 1 FROM queen.queues WHERE id = p_qid FOR UPDATE;
    INSERT INTO queen.log_subscriptions (queue_id, consumer_group, start_at)
    VALUES (p_qid, p_group, p_start)
    ON CONFLICT (queue_id, consumer_group) DO NOTHING
    RETURNING * INTO v_s;
    IF NOT FOUND THEN
        -- A concurrent first contact committed it while this one waited.
        SELECT * INTO v_s FROM queen.log_subscriptions WHERE queue_id = p_qid AND consumer_group = p_group;
        RETURN v_s;
    END IF;
    IF p_start >= now() THEN
        -- Starting now: what the partitions hold already is behind the group,
        -- whatever its timestamp (a push earlier in this very transaction
        -- has created_at = now()), so each gets its cursor at its last
        -- offset here; partitions made later are seeded from start_at.
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset, batch_end, created_at)
        SELECT p.id, p_group, p.last_offset, p.last_offset, p_start
        FROM queen.log_partitions p
        WHERE p.queue_id = p_qid
          AND EXISTS (SELECT 1 FROM queen.log_partitions k WHERE k.id = p.id FOR KEY SHARE SKIP LOCKED)
        ORDER BY p.id
        ON CONFLICT (partition_id, consumer_group) DO NOTHING;
    END IF;
    INSERT INTO queen.log_ready (subscription_id, partition_id)
    SELECT v_s.id, p.id
    FROM queen.log_partitions p
    WHERE p.queue_id = p_qid AND p.last_offset > 0
      AND (p_start IS NULL OR p.last_push_at >= p_start
           OR NOT EXISTS (SELECT 1 FROM queen.log_partitions x WHERE x.id = p.id FOR SHARE SKIP LOCKED))
    ORDER BY p.id
    ON CONFLICT DO NOTHING;
    RETURN v_s;
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
-- expression, not a query (see log_push.sql's cost note on _log_push_apply_v1).
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
-- public functions; p_start is the subscription start of a group new to a
-- queue (NULL: from the beginning).
-- Claims up to p_partitions partitions under ONE lease id (each cursor
-- holds it, with its own expiry from its queue's leaseTime), as the
-- reference broker's clients expect: they renew once per lease id, and a
-- log_lease.sql extension by that id moves every cursor holding it; acks still check
-- it per partition. p_batch caps the messages of the whole call, not of
-- each partition. The body's top-level partition is the first claim's;
-- every message names its own queue, partitionId and the leaseId.
-- windowBuffer (a queue option, as the reference broker reads it): a
-- partition pushed to within the last windowBuffer seconds is stepped over
-- (its ready row stays), so a burst of pushes is delivered as one batch
-- once the partition has been quiet that long. Like delayedProcessing it is
-- not seen by log_waiting.sql: such a partition's waiter re-checks once per tick.
-- The candidates are the group's ready rows (log_schema.sql), walked in partition-id
-- order from where this session's previous pop stopped (the setting
-- queen.pop_hand; a new session starts at a random id) and around: the cost
-- of a pop is the rows it visits, not the partitions of the queue, drained
-- ones cost nothing, concurrent consumers start at different places instead
-- of all colliding on the same first rows, and one session serves every
-- partition with work in turn (a partition waits at most one round of the
-- ready rows per session). A row whose cursor holds a live lease is stepped
-- over. A pop whose walk met a partition it could not take (another pop
-- had it, or took its last message first) leaves a random hand: consumers
-- that start near each other otherwise walk in a convoy, each failing on
-- the candidate the one ahead is taking (4.9 steps a pop at 10,000
-- partitions, 10 consumers, against 1.04 with the jump: bench/RESULTS.md,
-- 2026-12-04). A session that never collides keeps its round; one that
-- does starts a new round at a uniformly random place, so the bound on a
-- partition's wait becomes an expectation (the skew scenario of
-- bench/run.sh measures the longest wait).
-- enable_seqscan, enable_hashjoin, enable_mergejoin off (for the calls made
-- from here too: log_pop.sql's partition step, log_delays.sql's head expiry): every statement
-- of a pop is a key lookup or an index range, and a generic plan is cached
-- per session until its tables' statistics change. Made while the cursors
-- or partitions were few (a fresh table, or one vacuumed just after a queue
-- was deleted), the walk's plan read every cursor with a Seq Scan into a
-- hash join, and kept doing so on each step as the table grew to the
-- partitions it drained: 130-150 buffers per step and 0.2-0.4x at 10,000
-- partitions (bench/RESULTS.md, 2026-12-04). With these off the only plans
-- left are index probes in nested loops, whatever the statistics say.
DROP FUNCTION IF EXISTS queen._log_pop_claim_v1(UUID[], TEXT, TEXT, INTEGER, INTEGER, BOOLEAN, TEXT, TIMESTAMPTZ,
                                                INTEGER);
CREATE OR REPLACE FUNCTION queen._log_pop_claim_v1(
    p_queues UUID[], p_partition TEXT, p_group TEXT, p_batch INTEGER, p_lease_seconds INTEGER,
    p_auto_ack BOOLEAN, p_start TIMESTAMPTZ, p_partitions INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    v_n       INTEGER := cardinality(p_queues);
    -- Per queue, from one lookup each: its subscription and settings.
    v_subs    BIGINT[];
    v_starts  TIMESTAMPTZ[];
    v_names   TEXT[];
    v_leases  INTEGER[];
    v_delays  INTEGER[];
    v_waits   INTEGER[];
    v_left    INTEGER := p_batch;
    v_claims  INTEGER := 0;
    v_first   JSONB;
    v_msgs    JSONB := '[]'::jsonb;
    v_out     JSONB;
    v_q       RECORD;
    v_s       queen.log_subscriptions;
    v_from    INTEGER;
    v_i       INTEGER;
    v_hand    UUID;
    v_pos     UUID;
    v_wrapped BOOLEAN;
    v_batch   UUID[];   -- the walk's next ready rows, in order
    v_bi      INTEGER;
    v_pid     UUID;
    v_pname   TEXT;
    v_has_row BOOLEAN;
    v_lastoff BIGINT;
    v_leased  BOOLEAN;
    v_windows INTEGER[];
    v_pushed  TIMESTAMPTZ;
    v_collided BOOLEAN := false; -- a candidate of the walk was taken by another pop
    v_void    TEXT;
    v_lease   UUID := CASE WHEN p_auto_ack THEN NULL ELSE gen_random_uuid() END;
BEGIN
    -- Every queue's subscription before any claim: a first contact locks its
    -- queue row, which must come before partition and cursor locks (log_schema.sql).
    FOR v_i IN 1 .. v_n LOOP
        SELECT q.name, q.lease_time,
               COALESCE((q.stored_options ->> 'delayedProcessing')::integer, 0) AS delay,
               COALESCE((q.stored_options ->> 'maxWaitTimeSeconds')::integer, 0) AS max_wait,
               COALESCE((q.stored_options ->> 'windowBuffer')::integer, 0) AS win,
               s.id AS sub, s.start_at
        INTO v_q
        FROM queen.queues q
        LEFT JOIN queen.log_subscriptions s ON s.queue_id = q.id AND s.consumer_group = p_group
        WHERE q.id = p_queues[v_i];
        IF v_q.sub IS NULL THEN
            v_s := queen._log_subscribe_v1(p_queues[v_i], p_group, p_start);
            v_q.sub := v_s.id;
            v_q.start_at := v_s.start_at;
        END IF;
        v_subs[v_i] := v_q.sub;
        v_starts[v_i] := v_q.start_at;
        v_names[v_i] := v_q.name;
        v_leases[v_i] := COALESCE(p_lease_seconds, v_q.lease_time);
        v_delays[v_i] := v_q.delay;
        v_waits[v_i] := v_q.max_wait;
        v_windows[v_i] := v_q.win;
    END LOOP;
    v_hand := COALESCE(NULLIF(current_setting('queen.pop_hand', true), '')::uuid, gen_random_uuid());
    v_pos := v_hand;
    -- Several queues (a label pop): start at a random one, so none is
    -- served only when those before it are empty.
    v_from := CASE WHEN v_n > 1 THEN floor(random() * v_n)::integer ELSE 0 END;

    FOR v_k IN 0 .. v_n - 1 LOOP
        v_i := (v_from + v_k) % v_n + 1;
        IF p_partition IS NOT NULL THEN
            -- One named partition: no walk.
            SELECT p.id, p.name, (c.partition_id IS NOT NULL), p.last_offset, p.last_push_at
            INTO v_pid, v_pname, v_has_row, v_lastoff, v_pushed
            FROM queen.log_partitions p
            LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
            WHERE p.queue_id = p_queues[v_i] AND p.name = p_partition;
            CONTINUE WHEN NOT FOUND;
            CONTINUE WHEN v_windows[v_i] > 0 AND v_pushed > now() - make_interval(secs => v_windows[v_i]);
            v_out := queen._log_pop_partition_v1(v_subs[v_i], v_names[v_i], v_pid, v_pname, v_has_row, v_lastoff,
                                                 p_group, v_left, v_leases[v_i], p_auto_ack, v_starts[v_i],
                                                 v_delays[v_i], v_waits[v_i], v_lease);
            CONTINUE WHEN v_out IS NULL;
            v_first := COALESCE(v_first, v_out);
            v_msgs := v_msgs || (v_out -> 'messages');
            v_left := v_left - jsonb_array_length(v_out -> 'messages');
            v_claims := v_claims + 1;
            EXIT WHEN v_left <= 0 OR v_claims >= p_partitions;
            CONTINUE;
        END IF;

        -- The walk: (hand, end], then [start, hand]. Each step moves v_pos
        -- strictly forward, so it ends.
        v_pos := v_hand;
        v_wrapped := false;
        v_batch := '{}';
        v_bi := 1;
        LOOP
            IF v_bi > cardinality(v_batch) THEN
                -- The next ready rows, ids only, 8 at a time: one index range
                -- per 8 steps. A range starts where the previous pops of
                -- every consumer deleted their rows, and those entries stay
                -- in the index (each costing a heap visit) until no running
                -- pop can see them; a range per step crossed them again at
                -- every step (328 buffers a step at 10,000 partitions, 10
                -- consumers: bench/RESULTS.md, 2026-12-04). A row taken
                -- since it was read costs its step a look, as a claimed one
                -- always did.
                v_batch := ARRAY(SELECT r.partition_id FROM queen.log_ready r
                                 WHERE r.subscription_id = v_subs[v_i] AND r.partition_id > v_pos
                                 ORDER BY r.partition_id
                                 LIMIT 8);
                v_bi := 1;
                IF cardinality(v_batch) = 0 THEN
                    EXIT WHEN v_wrapped;
                    v_wrapped := true;
                    v_pos := '00000000-0000-0000-0000-000000000000';
                    CONTINUE;
                END IF;
            END IF;
            v_pid := v_batch[v_bi];
            v_bi := v_bi + 1;
            EXIT WHEN v_wrapped AND v_pid > v_hand;
            -- Its partition and the group's cursor, by key (no partition: every
            -- target NULL, v_pname included).
            SELECT p.name, (c.partition_id IS NOT NULL), p.last_offset,
                   COALESCE(c.lease_id IS NOT NULL AND c.lease_expires_at > now(), false), p.last_push_at
            INTO v_pname, v_has_row, v_lastoff, v_leased, v_pushed
            FROM queen.log_partitions p
            LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
            WHERE p.id = v_pid;
            v_pos := v_pid;
            IF v_pname IS NULL THEN -- its partition was deleted (log_schema.sql: no foreign key)
                DELETE FROM queen.log_ready WHERE subscription_id = v_subs[v_i] AND partition_id = v_pid;
                CONTINUE;
            END IF;
            CONTINUE WHEN v_leased; -- its lease ends by an ack or by expiry
            CONTINUE WHEN v_windows[v_i] > 0 AND v_pushed > now() - make_interval(secs => v_windows[v_i]);
            v_out := queen._log_pop_partition_v1(v_subs[v_i], v_names[v_i], v_pid, v_pname, v_has_row, v_lastoff,
                                                 p_group, v_left, v_leases[v_i], p_auto_ack, v_starts[v_i],
                                                 v_delays[v_i], v_waits[v_i], v_lease);
            IF v_out IS NULL THEN
                v_collided := true;
                CONTINUE;
            END IF;
            v_first := COALESCE(v_first, v_out);
            v_msgs := v_msgs || (v_out -> 'messages');
            v_left := v_left - jsonb_array_length(v_out -> 'messages');
            v_claims := v_claims + 1;
            EXIT WHEN v_left <= 0 OR v_claims >= p_partitions;
        END LOOP;
        EXIT WHEN v_left <= 0 OR v_claims >= p_partitions;
    END LOOP;
    IF p_partition IS NULL THEN
        -- An assignment, not PERFORM: an expression skips the executor
        -- start-up a query pays (20 us a pop as a PERFORM, pg_stat_statements).
        v_void := set_config('queen.pop_hand', CASE WHEN v_collided THEN gen_random_uuid() ELSE v_pos END::text,
                             false);
    END IF;
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
-- Never waits on a lock except at a group's first contact with the queue
-- (_log_subscribe_v1).
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
    -- The refusals of _log_require_tenant_v1 / _log_require_name_v1 (log_schema.sql),
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
                                   COALESCE(p_auto_ack, false), v_start, v_parts);
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
                                   COALESCE(p_auto_ack, false), v_start, v_parts);
END
$$;
