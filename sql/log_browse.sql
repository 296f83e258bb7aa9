-- log_browse.sql: browsing the log: a partition's messages with their
-- state for a consumer group, the messages of a transactionId, and deleting
-- them (refused while a live lease covers one).
--
-- Owns: queen._log_msg_state_v1, queen._log_msg_row_v1,
--       queen.log_messages_list_v1, queen.log_message_get_v1,
--       queen.log_message_delete_v1, queen._log_partition_names_v1,
--       queen.log_message_at_v1, queen.log_message_delete_at_v1,
--       queen.log_message_retry_v1 (a message named by partitionId and
--       transactionId, as the reference clients name it).
-- May call: log_schema.sql, log_dlq.sql (log_dead_letters.reason, log_messages.for_group,
-- log_dlq_requeue_v1).
-- Never names the kv table.
-- Lock order (log_schema.sql): a delete locks the partition's cursors (log_consumers,
-- ascending group) before the message (a leaf), so no pop can lease it
-- between the check and the delete.

-- _log_msg_state_v1(partition, offset, for_group, group) -> the message's
-- state for the group: dead (a dead letter of the group), consumed (at or
-- below its cursor, or a requeued copy meant for another group), leased (in
-- the batch of a live lease), else pending.
CREATE OR REPLACE FUNCTION queen._log_msg_state_v1(p_partition_id UUID, p_offset BIGINT, p_for_group TEXT,
                                                   p_group TEXT)
RETURNS TEXT
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM queen.log_dead_letters d
                     WHERE d.partition_id = p_partition_id AND d.consumer_group = p_group AND d.msg_offset = p_offset)
            THEN 'dead'
        WHEN p_for_group IS NOT NULL AND p_for_group <> p_group THEN 'consumed'
        WHEN c.committed_offset >= p_offset THEN 'consumed'
        WHEN c.lease_expires_at > now() AND c.batch_end >= p_offset THEN 'leased'
        ELSE 'pending' END
    FROM (SELECT 1) AS one
    LEFT JOIN queen.log_consumers c ON c.partition_id = p_partition_id AND c.consumer_group = p_group
$$;

-- _log_msg_row_v1(message, queue, partition, group) -> its JSON.
CREATE OR REPLACE FUNCTION queen._log_msg_row_v1(m queen.log_messages, p_queue TEXT, p_partition TEXT, p_group TEXT)
RETURNS JSONB
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'id', m.id, 'transactionId', m.transaction_id, 'queue', p_queue, 'partition', p_partition,
        'partitionId', m.partition_id, 'offset', m.msg_offset, 'data', m.payload, 'traceId', m.trace_id,
        'producer', m.producer, 'createdAt', queen.log_iso_v1(m.created_at), 'consumerGroup', p_group,
        'state', queen._log_msg_state_v1(m.partition_id, m.msg_offset, m.for_group, p_group))
$$;

-- log_messages_list_v1(tenant, queue, partition, group, limit, after) ->
-- {messages: [message], nextAfter}: the partition's stored messages with
-- offset > after (NULL = 0), in offset order, at most limit (NULL = 100),
-- each with its state for the group (NULL = queue mode, '__QUEUE_MODE__').
-- partition NULL = 'Default'. nextAfter: the last offset when the page is
-- full, else null. An unknown queue or partition lists nothing. Reads only.
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_partition,
-- log_bad_group, log_bad_limit (1..1000), log_bad_after (< 0).
CREATE OR REPLACE FUNCTION queen.log_messages_list_v1(p_tenant UUID, p_queue TEXT, p_partition TEXT, p_group TEXT,
                                                      p_limit INTEGER, p_after BIGINT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_part  TEXT := COALESCE(p_partition, 'Default');
    v_group TEXT := COALESCE(p_group, '__QUEUE_MODE__');
    v_limit INTEGER;
    v_rows  JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    PERFORM queen._log_require_name_v1(v_part, 'log_bad_partition', 'partition');
    PERFORM queen._log_require_name_v1(v_group, 'log_bad_group', 'consumerGroup');
    v_limit := queen._log_page_limit_v1(p_limit, p_after, 'an offset');
    SELECT COALESCE(jsonb_agg(queen._log_msg_row_v1(m, p_queue, v_part, v_group) ORDER BY m.msg_offset), '[]')
    INTO v_rows
    FROM (SELECT lm.* FROM queen.log_messages lm
          JOIN queen.log_partitions p ON p.id = lm.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
          WHERE q.tenant_id = p_tenant AND q.name = p_queue AND p.name = v_part
            AND lm.msg_offset > COALESCE(p_after, 0)
          ORDER BY lm.msg_offset
          LIMIT v_limit) AS m;
    RETURN queen._log_page_v1('messages', v_rows, v_limit, 'offset');
END
$$;

-- log_message_get_v1(tenant, transaction_id, queue, group) -> {messages:
-- [message]}: the tenant's stored messages with that transactionId (in
-- queue when given), oldest first, each with its state for the group (NULL =
-- queue mode). Usually one; a requeued dead letter is a second. Reads only.
-- Raises 22023: log_bad_tenant, log_bad_transaction_id, log_bad_queue,
-- log_bad_group.
CREATE OR REPLACE FUNCTION queen.log_message_get_v1(p_tenant UUID, p_txn TEXT, p_queue TEXT, p_group TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_group TEXT := COALESCE(p_group, '__QUEUE_MODE__');
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    IF p_queue IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    END IF;
    PERFORM queen._log_require_name_v1(v_group, 'log_bad_group', 'consumerGroup');
    RETURN jsonb_build_object('messages', COALESCE((
        SELECT jsonb_agg(queen._log_msg_row_v1(m, q.name, p.name, v_group) ORDER BY m.created_at, q.name, p.name,
                         m.msg_offset)
        FROM queen.queues q
        JOIN queen.log_partitions p ON p.queue_id = q.id
        JOIN queen.log_messages m ON m.partition_id = p.id AND m.transaction_id = p_txn
        WHERE q.tenant_id = p_tenant AND (p_queue IS NULL OR q.name = p_queue)), '[]'));
END
$$;

-- log_message_delete_v1(tenant, queue, transaction_id, partition) ->
-- {deleted}: deletes the queue's stored messages with that transactionId
-- (in partition when given). Refused while a live lease of any group covers
-- one of them (55000 log_message_leased; nothing deleted): the consumer
-- holding it must be able to settle it. A group's cursor past a deleted
-- message is unchanged; one below it skips it.
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_transaction_id,
-- log_bad_partition.
CREATE OR REPLACE FUNCTION queen.log_message_delete_v1(p_tenant UUID, p_queue TEXT, p_txn TEXT, p_partition TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_held TEXT;
    v_n    INTEGER;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    IF p_partition IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_partition, 'log_bad_partition', 'partition');
    END IF;
    -- The cursors of the partitions holding a match, ascending.
    PERFORM 1 FROM queen.log_consumers c
    WHERE c.partition_id IN (SELECT m.partition_id FROM queen.log_messages m
                             JOIN queen.log_partitions p ON p.id = m.partition_id
                             JOIN queen.queues q ON q.id = p.queue_id
                             WHERE q.tenant_id = p_tenant AND q.name = p_queue AND m.transaction_id = p_txn
                               AND (p_partition IS NULL OR p.name = p_partition))
    ORDER BY c.partition_id, c.consumer_group
    FOR UPDATE;
    SELECT c.consumer_group INTO v_held
    FROM queen.log_messages m
    JOIN queen.log_partitions p ON p.id = m.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    JOIN queen.log_consumers c ON c.partition_id = m.partition_id
    WHERE q.tenant_id = p_tenant AND q.name = p_queue AND m.transaction_id = p_txn
      AND (p_partition IS NULL OR p.name = p_partition)
      AND c.lease_expires_at > now() AND m.msg_offset > c.committed_offset AND m.msg_offset <= c.batch_end
      AND (m.for_group IS NULL OR m.for_group = c.consumer_group)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'log_message_leased' USING ERRCODE = '55000',
            DETAIL = format('consumer group %s holds it in a live lease; delete after the lease ends', v_held);
    END IF;
    DELETE FROM queen.log_messages m
    USING queen.log_partitions p, queen.queues q
    WHERE p.id = m.partition_id AND q.id = p.queue_id
      AND q.tenant_id = p_tenant AND q.name = p_queue AND m.transaction_id = p_txn
      AND (p_partition IS NULL OR p.name = p_partition);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('deleted', v_n);
END
$$;

-- _log_partition_names_v1(tenant, partition_id) -> (queue, partition): the
-- names of the tenant's partition, both NULL when it is no partition of the
-- tenant. Raises 22023 log_bad_partition_id when partition_id is no uuid.
CREATE OR REPLACE FUNCTION queen._log_partition_names_v1(p_tenant UUID, p_partition_id TEXT,
                                                         OUT queue_name TEXT, OUT partition_name TEXT)
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF NOT COALESCE(queen.log_uuid_ok_v1(p_partition_id), false) THEN
        RAISE EXCEPTION 'log_bad_partition_id' USING ERRCODE = '22023', DETAIL = 'partitionId must be a uuid';
    END IF;
    SELECT q.name, p.name INTO queue_name, partition_name
    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = p_partition_id::uuid AND q.tenant_id = p_tenant;
END
$$;

-- log_message_at_v1(tenant, partition_id, transaction_id, group) -> the
-- message (its row as listed, with the group's errorMessage and retryCount
-- when it is the group's dead letter, else null), or JSON null when the
-- tenant's partition stores none with that transactionId. Several (a
-- requeued dead letter's copy): the oldest. Reads only.
-- Raises 22023: log_bad_tenant, log_bad_partition_id, log_bad_transaction_id,
-- log_bad_group.
CREATE OR REPLACE FUNCTION queen.log_message_at_v1(p_tenant UUID, p_partition_id TEXT, p_txn TEXT, p_group TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_group TEXT := COALESCE(p_group, '__QUEUE_MODE__');
    v_at    RECORD;
BEGIN
    v_at := queen._log_partition_names_v1(p_tenant, p_partition_id);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    PERFORM queen._log_require_name_v1(v_group, 'log_bad_group', 'consumerGroup');
    RETURN COALESCE((SELECT queen._log_msg_row_v1(m, v_at.queue_name, v_at.partition_name, v_group)
                   || jsonb_build_object('errorMessage', d.error, 'retryCount', d.attempts)
            FROM queen.log_messages m
            LEFT JOIN queen.log_dead_letters d ON d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
                                               AND d.consumer_group = v_group
            WHERE v_at.queue_name IS NOT NULL AND m.partition_id = p_partition_id::uuid AND m.transaction_id = p_txn
            ORDER BY m.msg_offset
            LIMIT 1), 'null');
END
$$;

-- log_message_delete_at_v1(tenant, partition_id, transaction_id) ->
-- {deleted, partitionId, transactionId}: log_message_delete_v1 on the
-- partition's queue and name (its lease rule: 55000 log_message_leased,
-- nothing deleted). A partition that is not the tenant's deletes nothing.
-- Raises 22023: log_bad_tenant, log_bad_partition_id, log_bad_transaction_id.
CREATE OR REPLACE FUNCTION queen.log_message_delete_at_v1(p_tenant UUID, p_partition_id TEXT, p_txn TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_at RECORD;
BEGIN
    v_at := queen._log_partition_names_v1(p_tenant, p_partition_id);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    RETURN jsonb_build_object('partitionId', p_partition_id::uuid, 'transactionId', p_txn, 'deleted',
        CASE WHEN v_at.queue_name IS NULL THEN 0
             ELSE (queen.log_message_delete_v1(p_tenant, v_at.queue_name, p_txn, v_at.partition_name)
                   ->> 'deleted')::integer END);
END
$$;

-- log_message_retry_v1(tenant, partition_id, transaction_id) -> {retried,
-- requeued, partitionId, transactionId}: the message's dead letters (of
-- every group) requeued by log_dlq_requeue_v1 (its rule: each group's next
-- pop delivers it afresh). A message that is no dead letter is already
-- delivered again after a failure: nothing to do, retried false. Finds the
-- dead letters with one scan of the tenant's (idx_log_dead_letters_tenant).
-- Raises 22023: log_bad_tenant, log_bad_partition_id, log_bad_transaction_id;
-- what log_dlq_requeue_v1 raises.
CREATE OR REPLACE FUNCTION queen.log_message_retry_v1(p_tenant UUID, p_partition_id TEXT, p_txn TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_queue TEXT;
    v_ids   JSONB;
    v_n     INTEGER := 0;
BEGIN
    PERFORM queen._log_partition_names_v1(p_tenant, p_partition_id);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    -- The queue from the dead letters themselves: they outlive a partition
    -- the sweeper reclaimed, and the requeue recreates it.
    SELECT min(d.queue_name), jsonb_agg(d.id ORDER BY d.id) INTO v_queue, v_ids
    FROM queen.log_dead_letters d
    WHERE d.tenant_id = p_tenant AND d.partition_id = p_partition_id::uuid AND d.transaction_id = p_txn;
    IF v_ids IS NOT NULL THEN
        v_n := (queen.log_dlq_requeue_v1(p_tenant, v_queue, v_ids, NULL) ->> 'requeued')::integer;
    END IF;
    RETURN jsonb_build_object('retried', v_n > 0, 'requeued', v_n, 'partitionId', p_partition_id::uuid,
                              'transactionId', p_txn);
END
$$;
