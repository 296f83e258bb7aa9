-- log_groups.sql: consumer groups as an operator sees them: per queue
-- and partition the committed offset, the lag in messages and in seconds
-- (the age of the oldest unconsumed message), the lease holder and its
-- expiry; a lagging view; seek (to the beginning, the end or an instant);
-- delete; moving a group's subscription start.
--
-- Owns: queen._log_group_rows_v1, queen.log_groups_v1,
--       queen.log_group_seek_v1, queen.log_group_delete_v1,
--       queen.log_group_subscription_v1.
-- May call: log_schema.sql, log_pop.sql (_log_subscribe_v1: a seek subscribes the group, and
-- leaves every partition of the queue a ready row for it). Never names the
-- kv table.
-- Lock order (log_schema.sql): queues (a first contact's, in _log_subscribe_v1) ->
-- log_partitions is only read (FOR KEY SHARE when a seek
-- creates a cursor row) -> log_consumers (ascending partition id, FOR
-- UPDATE). A pop holds a cursor row only for its statement, so the wait is
-- short; a live lease is never overridden: a seek or delete that finds one
-- is refused (55000 log_group_leased), so a consumer holding a batch never
-- sees its cursor move under it, and the operator retries after the lease.

-- _log_group_rows_v1(tenant, group, queue) -> one row per cursor of the
-- tenant (NULL group / queue: all), with its lag. lag_messages counts the
-- offsets between the cursor and the partition's head (offsets are dense:
-- one per push; a requeued copy for another group counts too); lag_seconds
-- is the age of the first message past the cursor, 0 when there is none.
CREATE OR REPLACE FUNCTION queen._log_group_rows_v1(p_tenant UUID, p_group TEXT, p_queue TEXT)
RETURNS TABLE (consumer_group TEXT, queue TEXT, partition TEXT, partition_id UUID, committed BIGINT,
               head BIGINT, lag_messages BIGINT, lag_seconds BIGINT, lease_id UUID, lease_expires TIMESTAMPTZ)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT c.consumer_group, q.name, p.name, p.id, c.committed_offset, p.last_offset,
           GREATEST(p.last_offset - c.committed_offset, 0),
           COALESCE((SELECT floor(extract(epoch FROM now() - m.created_at))::bigint
                     FROM queen.log_messages m
                     WHERE m.partition_id = p.id AND m.msg_offset > c.committed_offset
                     ORDER BY m.msg_offset LIMIT 1), 0),
           CASE WHEN c.lease_expires_at > now() THEN c.lease_id END,
           CASE WHEN c.lease_expires_at > now() THEN c.lease_expires_at END
    FROM queen.queues q
    JOIN queen.log_partitions p ON p.queue_id = q.id
    JOIN queen.log_consumers c ON c.partition_id = p.id
    WHERE q.tenant_id = p_tenant
      AND (p_group IS NULL OR c.consumer_group = p_group)
      AND (p_queue IS NULL OR q.name = p_queue)
$$;

-- log_groups_v1(tenant, group, min_lag_seconds) -> {consumerGroups: [{name,
-- lagMessages, lagSeconds, queues: [{queue, lagMessages, lagSeconds,
-- partitions: [{partition, partitionId, committedOffset, headOffset,
-- lagMessages, lagSeconds, leaseId, leaseExpiresAt}]}]}]}, groups, queues
-- and partitions in byte order; lagSeconds of a group or queue is its
-- largest, lagMessages its sum. group NULL: every group of the tenant.
-- min_lag_seconds (the lagging view): only partitions with something to
-- consume whose oldest unconsumed message is at least that old (and the
-- groups and queues holding one); NULL: every cursor. leaseId and
-- leaseExpiresAt are null unless a lease is live. Reads only.
-- Raises 22023: log_bad_tenant, log_bad_group, log_bad_seconds (< 0).
CREATE OR REPLACE FUNCTION queen.log_groups_v1(p_tenant UUID, p_group TEXT, p_min_lag_seconds INTEGER)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_group IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_group, 'log_bad_group', 'consumerGroup');
    END IF;
    IF p_min_lag_seconds < 0 THEN
        RAISE EXCEPTION 'log_bad_seconds' USING ERRCODE = '22023',
            DETAIL = format('minLagSeconds must be >= 0, got %s', p_min_lag_seconds);
    END IF;
    RETURN jsonb_build_object('consumerGroups', COALESCE((
        SELECT jsonb_agg(jsonb_build_object('name', g.consumer_group, 'lagMessages', g.lag_messages,
                                            'lagSeconds', g.lag_seconds, 'queues', g.queues)
                         ORDER BY g.consumer_group)
        FROM (SELECT qq.consumer_group, sum(qq.lag_messages) AS lag_messages, max(qq.lag_seconds) AS lag_seconds,
                     jsonb_agg(jsonb_build_object('queue', qq.queue, 'lagMessages', qq.lag_messages,
                                                  'lagSeconds', qq.lag_seconds, 'partitions', qq.partitions)
                               ORDER BY qq.queue) AS queues
              FROM (SELECT r.consumer_group, r.queue, sum(r.lag_messages) AS lag_messages,
                           max(r.lag_seconds) AS lag_seconds,
                           jsonb_agg(jsonb_build_object(
                               'partition', r.partition, 'partitionId', r.partition_id,
                               'committedOffset', r.committed, 'headOffset', r.head,
                               'lagMessages', r.lag_messages, 'lagSeconds', r.lag_seconds,
                               'leaseId', r.lease_id, 'leaseExpiresAt', queen.log_iso_v1(r.lease_expires))
                               ORDER BY r.partition) AS partitions
                    FROM queen._log_group_rows_v1(p_tenant, p_group, NULL) r
                    WHERE p_min_lag_seconds IS NULL
                       OR (r.lag_messages > 0 AND r.lag_seconds >= p_min_lag_seconds)
                    GROUP BY r.consumer_group, r.queue) AS qq
              GROUP BY qq.consumer_group) AS g), '[]'));
END
$$;

-- log_group_seek_v1(tenant, group, queue, to) -> {consumerGroup, queue, to,
-- partitions: [{partition, partitionId, committedOffset}]}.
-- Moves the group's cursor on every partition of the queue: 'beginning'
-- (everything stored is delivered again), 'end' (only what is pushed after),
-- or an ISO-8601 instant (messages created at or after it are delivered
-- again, or skipped up to it). A partition the group never popped gets its
-- cursor here, so the seek holds for it too. The attempt and failure counts
-- start afresh. Refused while any of the group's cursors on the queue holds a
-- live lease (55000 log_group_leased, DETAIL names the partition): nothing
-- moves. Raises 22023: log_bad_tenant, log_bad_group, log_bad_queue,
-- log_bad_seek (to is none of the three), and 22023 log_no_such_queue.
CREATE OR REPLACE FUNCTION queen.log_group_seek_v1(p_tenant UUID, p_group TEXT, p_queue TEXT, p_to TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_qid   UUID;
    v_sub   queen.log_subscriptions;
    v_at    TIMESTAMPTZ;
    v_held  TEXT;
    v_out   JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_group, 'log_bad_group', 'consumerGroup');
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    IF p_to IS NULL OR p_to NOT IN ('beginning', 'end') THEN
        BEGIN
            v_at := queen._log_subscription_start_v1(p_to);
        EXCEPTION WHEN invalid_parameter_value THEN
            v_at := NULL;
        END;
        IF v_at IS NULL OR p_to = 'now' THEN
            RAISE EXCEPTION 'log_bad_seek' USING ERRCODE = '22023',
                DETAIL = 'to must be beginning, end or an ISO-8601 instant';
        END IF;
    END IF;
    v_qid := queen._log_require_queue_v1(p_tenant, p_queue);
    -- The group's subscription (a seek before any pop makes it, from the
    -- beginning: the seek itself says where each cursor stands).
    v_sub := queen._log_subscribe_v1(v_qid, p_group, NULL);

    -- Every partition gets a cursor row for the group (a concurrent first
    -- pop's insert wins the conflict; the lock below then takes its row).
    INSERT INTO queen.log_consumers (partition_id, consumer_group)
    SELECT p.id, p_group FROM queen.log_partitions p WHERE p.queue_id = v_qid ORDER BY p.id
    ON CONFLICT (partition_id, consumer_group) DO NOTHING;
    -- The cursor locks, ascending partition id.
    PERFORM 1 FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
    WHERE p.queue_id = v_qid AND c.consumer_group = p_group
    ORDER BY c.partition_id
    FOR UPDATE OF c;
    SELECT p.name INTO v_held
    FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
    WHERE p.queue_id = v_qid AND c.consumer_group = p_group
      AND c.lease_id IS NOT NULL AND c.lease_expires_at > now()
    ORDER BY p.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'log_group_leased' USING ERRCODE = '55000',
            DETAIL = format('partition %s holds a live lease of this group; seek after it ends', v_held);
    END IF;

    WITH moved AS (
        UPDATE queen.log_consumers c
        SET committed_offset = t.o, batch_end = t.o, delivery_attempt = 0,
            lease_id = NULL, lease_expires_at = NULL, fail_offset = 0, fail_count = 0
        FROM (SELECT p.id, p.name,
                     CASE WHEN p_to = 'beginning' THEN 0
                          WHEN p_to = 'end' THEN p.last_offset
                          ELSE COALESCE((SELECT max(m.msg_offset) FROM queen.log_messages m
                                         WHERE m.partition_id = p.id AND m.created_at < v_at),
                                        (SELECT min(m.msg_offset) - 1 FROM queen.log_messages m
                                         WHERE m.partition_id = p.id), p.last_offset) END AS o
              FROM queen.log_partitions p WHERE p.queue_id = v_qid) AS t
        WHERE c.partition_id = t.id AND c.consumer_group = p_group
        RETURNING t.name, t.id, t.o)
    SELECT COALESCE(jsonb_agg(jsonb_build_object('partition', name, 'partitionId', id, 'committedOffset', o)
                              ORDER BY name), '[]')
    INTO v_out FROM moved;
    -- A cursor moved back has work again: every partition of the queue gets
    -- the group's ready row (log_schema.sql's invariant; one without work is removed
    -- by the first pop that finds it drained).
    INSERT INTO queen.log_ready (subscription_id, partition_id)
    SELECT v_sub.id, p.id FROM queen.log_partitions p WHERE p.queue_id = v_qid AND p.last_offset > 0
    ORDER BY p.id
    ON CONFLICT DO NOTHING;
    PERFORM pg_notify('queen_push', p_tenant::text || ':' || p_queue);
    RETURN jsonb_build_object('consumerGroup', p_group, 'queue', p_queue, 'to', p_to, 'partitions', v_out);
END
$$;

-- log_group_delete_v1(tenant, group, queue) -> {consumerGroup, deleted}:
-- deletes the group's cursors (on queue only, or on every queue when NULL),
-- so its next pop starts it anew (its subscription mode applies again).
-- Refused while one of them holds a live lease (55000 log_group_leased).
-- Raises 22023: log_bad_tenant, log_bad_group, log_bad_queue.
CREATE OR REPLACE FUNCTION queen.log_group_delete_v1(p_tenant UUID, p_group TEXT, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_held TEXT;
    v_n    INTEGER;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_group, 'log_bad_group', 'consumerGroup');
    IF p_queue IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    END IF;
    PERFORM 1 FROM queen.log_consumers c
    JOIN queen.log_partitions p ON p.id = c.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE q.tenant_id = p_tenant AND c.consumer_group = p_group AND (p_queue IS NULL OR q.name = p_queue)
    ORDER BY c.partition_id
    FOR UPDATE OF c;
    SELECT q.name || '/' || p.name INTO v_held
    FROM queen.log_consumers c
    JOIN queen.log_partitions p ON p.id = c.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE q.tenant_id = p_tenant AND c.consumer_group = p_group AND (p_queue IS NULL OR q.name = p_queue)
      AND c.lease_id IS NOT NULL AND c.lease_expires_at > now()
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'log_group_leased' USING ERRCODE = '55000',
            DETAIL = format('%s holds a live lease of this group; delete after it ends', v_held);
    END IF;
    DELETE FROM queen.log_consumers c
    USING queen.log_partitions p, queen.queues q
    WHERE p.id = c.partition_id AND q.id = p.queue_id
      AND q.tenant_id = p_tenant AND c.consumer_group = p_group AND (p_queue IS NULL OR q.name = p_queue);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- The group's subscriptions and their ready rows go too: its next pop is
    -- a first contact again.
    WITH gone AS (
        DELETE FROM queen.log_subscriptions s USING queen.queues q
        WHERE q.id = s.queue_id AND q.tenant_id = p_tenant AND s.consumer_group = p_group
          AND (p_queue IS NULL OR q.name = p_queue)
        RETURNING s.id)
    DELETE FROM queen.log_ready r USING gone g WHERE r.subscription_id = g.id;
    RETURN jsonb_build_object('consumerGroup', p_group, 'deleted', v_n);
END
$$;

-- log_group_subscription_v1(tenant, group, from) -> {consumerGroup,
-- subscriptionTimestamp, queues}: moves the start of the group's
-- subscription on every queue of the tenant it has one on (queues: how
-- many) to from (an ISO-8601 instant or 'now', as subscriptionFrom takes).
-- The start seeds the group's first cursor on a partition it has not read
-- yet; the cursors it has stay where they are (a seek moves those). Each
-- moved subscription gets a ready row for every partition that holds a
-- message (log_pop.sql's walk drops the ones without work at its first visit), so a
-- start moved earlier finds the partitions the old one had skipped.
-- Lock order (log_schema.sql): leaves only: the subscriptions (ascending id, FOR
-- UPDATE), then the ready rows; partitions are read, not locked.
-- Raises 22023: log_bad_tenant, log_bad_group, log_bad_subscription_from
-- (none, or not an instant).
CREATE OR REPLACE FUNCTION queen.log_group_subscription_v1(p_tenant UUID, p_group TEXT, p_from TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_at   TIMESTAMPTZ;
    v_subs BIGINT[];
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_group, 'log_bad_group', 'consumerGroup');
    v_at := queen._log_subscription_start_v1(p_from);
    IF v_at IS NULL THEN
        RAISE EXCEPTION 'log_bad_subscription_from' USING ERRCODE = '22023',
            DETAIL = 'subscriptionTimestamp must be an ISO-8601 instant or now';
    END IF;
    SELECT array_agg(l.id ORDER BY l.id) INTO v_subs
    FROM (SELECT s.id FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
          WHERE q.tenant_id = p_tenant AND s.consumer_group = p_group
          ORDER BY s.id FOR UPDATE OF s) AS l;
    UPDATE queen.log_subscriptions SET start_at = v_at WHERE id = ANY (v_subs);
    INSERT INTO queen.log_ready (subscription_id, partition_id)
    SELECT s.id, p.id
    FROM queen.log_subscriptions s JOIN queen.log_partitions p ON p.queue_id = s.queue_id
    WHERE s.id = ANY (v_subs) AND p.last_offset > 0
    ORDER BY s.id, p.id
    ON CONFLICT DO NOTHING;
    RETURN jsonb_build_object('consumerGroup', p_group, 'subscriptionTimestamp', queen.log_iso_v1(v_at),
                              'queues', COALESCE(cardinality(v_subs), 0));
END
$$;
