-- log_dlq.sql: the dead letters as an operator sees them: list (a
-- keyset cursor over their ids), requeue (back to their partition, for their
-- consumer group only, with the attempt count reset), delete.
--
-- Owns: queen.log_dead_letters.reason, queen.log_messages.for_group,
--       queen._log_dlq_row_v1, queen.log_dlq_list_v1,
--       queen.log_dlq_requeue_v1, queen.log_dlq_delete_v1.
-- May call: schema.sql's schema helpers, log_schema.sql. Never names the kv table.
-- Lock order (log_schema.sql): queen.queues is only read; log_partitions (ascending id,
-- FOR NO KEY UPDATE, as a push) -> leaves (log_dead_letters, log_messages,
-- log_ready: a requeue makes work, so it keeps log_schema.sql's ready rows as a push does).
--
-- Exactly once: a requeue locks the partitions first, then DELETEs the dead
-- letters it picked and appends one message per row it deleted. Two requeues
-- of the same dead letter serialise on the partition lock; the second one's
-- DELETE finds the row gone and appends nothing.

-- failed: past retryLimit (log_ack.sql's ack); expired: unconsumed past the queue's
-- maxWaitTimeSeconds (the maintenance step, log_delays.sql); moved: an operator moved it
-- (log_status.sql's log_message_dlq_v1).
SELECT queen._schema_add_column_v1('queen.log_dead_letters', 'reason', $$TEXT NOT NULL DEFAULT 'failed'$$);
-- The listing's keyset: a tenant's dead letters in id order.
SELECT queen._schema_create_index_v1('idx_log_dead_letters_tenant',
    'CREATE INDEX idx_log_dead_letters_tenant ON queen.log_dead_letters (tenant_id, id)');
-- A requeued message is delivered only to the consumer group it died in
-- (the other groups consumed it already): NULL = every group. Pop (log_pop.sql) and
-- the ack lookup (log_ack.sql) skip a message meant for another group.
SELECT queen._schema_add_column_v1('queen.log_messages', 'for_group', 'TEXT COLLATE "C"');

-- _log_dlq_row_v1(dead letter) -> its JSON as every route renders it.
CREATE OR REPLACE FUNCTION queen._log_dlq_row_v1(d queen.log_dead_letters)
RETURNS JSONB
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'id', d.id, 'messageId', d.message_id, 'transactionId', d.transaction_id,
        'queue', d.queue_name, 'partition', d.partition_name, 'partitionId', d.partition_id,
        'consumerGroup', d.consumer_group, 'offset', d.msg_offset, 'data', d.payload,
        'errorMessage', d.error, 'retryCount', d.attempts, 'reason', d.reason,
        'createdAt', queen.log_iso_v1(d.created_at), 'failedAt', queen.log_iso_v1(d.failed_at))
$$;

-- log_dlq_list_v1(tenant, queue, partition, group, limit, after) ->
-- {messages: [dead letter...], nextAfter, total}: the tenant's dead letters
-- with id > after (NULL = 0), oldest first, at most limit (NULL = 100),
-- filtered by queue, partition and consumer group when given. nextAfter is
-- the last id when the page is full (pass it as after for the next page),
-- else null. total: how many dead letters match the filters on every page
-- (what the reference clients read); it counts them: one scan of the
-- tenant's dead letters (idx_log_dead_letters_tenant) per call. Reads only. Raises 22023: log_bad_tenant, log_bad_queue,
-- log_bad_partition, log_bad_group, log_bad_limit (1..1000),
-- log_bad_after (< 0).
CREATE OR REPLACE FUNCTION queen.log_dlq_list_v1(p_tenant UUID, p_queue TEXT, p_partition TEXT, p_group TEXT,
                                                 p_limit INTEGER, p_after BIGINT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit INTEGER;
    v_rows  JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_queue IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    END IF;
    IF p_partition IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_partition, 'log_bad_partition', 'partition');
    END IF;
    IF p_group IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_group, 'log_bad_group', 'consumerGroup');
    END IF;
    v_limit := queen._log_page_limit_v1(p_limit, p_after, 'a dead-letter id');
    SELECT COALESCE(jsonb_agg(queen._log_dlq_row_v1(d) ORDER BY d.id), '[]')
    INTO v_rows
    FROM (SELECT * FROM queen.log_dead_letters dl
          WHERE dl.tenant_id = p_tenant AND dl.id > COALESCE(p_after, 0)
            AND (p_queue IS NULL OR dl.queue_name = p_queue)
            AND (p_partition IS NULL OR dl.partition_name = p_partition)
            AND (p_group IS NULL OR dl.consumer_group = p_group)
          ORDER BY dl.id
          LIMIT v_limit) AS d;
    RETURN queen._log_page_v1('messages', v_rows, v_limit, 'id') || jsonb_build_object('total', (
        SELECT count(*) FROM queen.log_dead_letters dl
        WHERE dl.tenant_id = p_tenant
          AND (p_queue IS NULL OR dl.queue_name = p_queue)
          AND (p_partition IS NULL OR dl.partition_name = p_partition)
          AND (p_group IS NULL OR dl.consumer_group = p_group)));
END
$$;

-- log_dlq_requeue_v1(tenant, queue, ids, max) -> {queue, requeued, remaining,
-- messages: [{id, messageId, transactionId, partition, partitionId,
-- consumerGroup, offset}]}.
-- Appends each picked dead letter of the queue to its partition (recreated
-- if it was reclaimed meanwhile) as a new message with the same
-- transactionId and payload, for its consumer group only, and deletes the
-- dead letter: the group's next pop delivers it as deliveryAttempt 1, and
-- its failures count against retryLimit afresh. ids: a JSON array of
-- dead-letter ids (those of other queues or tenants are ignored), or NULL
-- for every dead letter of the queue, oldest first, at most max (NULL =
-- 1000) per call; remaining: how many dead letters the queue has left. Exactly
-- once under concurrency (header). Wakes the queue's waiting pops.
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_ids (not an array of
-- 1..1000 positive integers), log_bad_limit (max not 1..10000);
-- 40001 log_partition_vanished (reclaimed three times in a row: retry).
CREATE OR REPLACE FUNCTION queen.log_dlq_requeue_v1(p_tenant UUID, p_queue TEXT, p_ids JSONB, p_max INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_max     INTEGER := COALESCE(p_max, 1000);
    v_created BIGINT;
    v_ids     BIGINT[];
    v_qid     UUID;
    v_pick    BIGINT[];
    v_names   TEXT[];
    v_locked  INTEGER;
    v_try     INTEGER := 0;
    v_parts   JSONB;
    v_out     JSONB[] := '{}';
    v_next    BIGINT;
    v_msg     UUID;
    v_gone    JSONB;
    r         RECORD;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    IF p_ids IS NOT NULL AND (jsonb_typeof(p_ids) <> 'array'
           OR jsonb_array_length(p_ids) NOT BETWEEN 1 AND 1000
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_ids) e
                      WHERE jsonb_typeof(e) <> 'number' OR e::numeric <> trunc(e::numeric)
                         OR e::numeric NOT BETWEEN 1 AND 9223372036854775807)) THEN
        RAISE EXCEPTION 'log_bad_ids' USING ERRCODE = '22023',
            DETAIL = 'ids must be an array of 1..1000 dead-letter ids (positive integers)';
    END IF;
    IF v_max NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'log_bad_limit' USING ERRCODE = '22023',
            DETAIL = format('max must be 1..10000, got %s', v_max);
    END IF;
    SELECT array_agg(e::bigint) INTO v_ids FROM jsonb_array_elements_text(p_ids) e;

    SELECT id INTO v_qid FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('queue', p_queue, 'requeued', 0, 'remaining', 0, 'messages', '[]'::jsonb);
    END IF;

    -- The candidates, read without a lock (a leaf may not be locked before
    -- the partitions); the DELETE below decides which are still there.
    SELECT array_agg(d.id ORDER BY d.id), array_agg(DISTINCT d.partition_name)
    INTO v_pick, v_names
    FROM (SELECT dl.id, dl.partition_name FROM queen.log_dead_letters dl
          WHERE dl.queue_id = v_qid AND (v_ids IS NULL OR dl.id = ANY (v_ids))
          ORDER BY dl.id LIMIT v_max) AS d;
    IF v_pick IS NULL THEN
        RETURN jsonb_build_object('queue', p_queue, 'requeued', 0, 'messages', '[]'::jsonb,
            'remaining', (SELECT count(*) FROM queen.log_dead_letters dl WHERE dl.queue_id = v_qid));
    END IF;

    LOOP
        INSERT INTO queen.log_partitions (queue_id, name)
        SELECT v_qid, n FROM unnest(v_names) AS n ORDER BY n
        ON CONFLICT (queue_id, name) DO NOTHING;
        GET DIAGNOSTICS v_created = ROW_COUNT;
        PERFORM queen._log_partition_count_add_v1(p_tenant, v_created); -- log_schema.sql's per-tenant count
        SELECT COALESCE(jsonb_object_agg(l.name, jsonb_build_object('id', l.id, 'next', l.last_offset)), '{}'),
               count(*)
        INTO v_parts, v_locked
        FROM (SELECT lp.id, lp.name, lp.last_offset FROM queen.log_partitions lp
              WHERE lp.queue_id = v_qid AND lp.name = ANY (v_names)
              ORDER BY lp.id
              FOR NO KEY UPDATE) AS l;
        EXIT WHEN v_locked = array_length(v_names, 1);
        v_try := queen._log_partition_retry_v1(v_try);
    END LOOP;

    WITH gone AS (DELETE FROM queen.log_dead_letters WHERE id = ANY (v_pick) RETURNING *)
    SELECT jsonb_agg(to_jsonb(g) ORDER BY g.id) INTO v_gone FROM gone g;
    FOR r IN
        SELECT * FROM jsonb_to_recordset(COALESCE(v_gone, '[]')) AS x(id BIGINT, partition_name TEXT,
            consumer_group TEXT, transaction_id TEXT, payload JSONB)
        ORDER BY x.id
    LOOP
        v_next := (v_parts #>> ARRAY[r.partition_name, 'next'])::bigint + 1;
        v_msg := gen_random_uuid();
        INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at, for_group)
        VALUES ((v_parts #>> ARRAY[r.partition_name, 'id'])::uuid, v_next, v_msg, r.transaction_id, r.payload,
                now(), r.consumer_group);
        v_parts := jsonb_set(v_parts, ARRAY[r.partition_name, 'next'], to_jsonb(v_next));
        v_parts := jsonb_set(v_parts, ARRAY[r.partition_name, 'dirty'], 'true');
        v_out := array_append(v_out, jsonb_build_object(
            'id', r.id, 'messageId', v_msg, 'transactionId', r.transaction_id,
            'partition', r.partition_name, 'partitionId', v_parts #> ARRAY[r.partition_name, 'id'],
            'consumerGroup', r.consumer_group, 'offset', v_next));
    END LOOP;

    -- The bumps, and each bumped partition's ready row for every group
    -- subscribed to the queue (log_schema.sql's invariant), under the partition locks.
    WITH bumped AS (
        UPDATE queen.log_partitions lp
        SET last_offset = (d.v ->> 'next')::bigint, last_push_at = now()
        FROM jsonb_each(v_parts) AS d(k, v)
        WHERE d.v ? 'dirty' AND lp.id = (d.v ->> 'id')::uuid
        RETURNING lp.id)
    INSERT INTO queen.log_ready (subscription_id, partition_id)
    SELECT s.id, b.id FROM bumped b JOIN queen.log_subscriptions s ON s.queue_id = v_qid
    ORDER BY s.id, b.id
    ON CONFLICT DO NOTHING;
    IF array_length(v_out, 1) > 0 THEN
        PERFORM pg_notify('queen_push', p_tenant::text || ':' || p_queue);
    END IF;

    RETURN jsonb_build_object(
        'queue', p_queue,
        'requeued', COALESCE(array_length(v_out, 1), 0),
        'remaining', (SELECT count(*) FROM queen.log_dead_letters dl WHERE dl.queue_id = v_qid),
        'messages', to_jsonb(v_out));
END
$$;

-- log_dlq_delete_v1(tenant, id, queue) -> {deleted}. Deletes the tenant's
-- dead letter id, or (id NULL) every dead letter of queue. Raises 22023:
-- log_bad_tenant, log_bad_request (neither or both given), log_bad_queue,
-- log_bad_ids (id < 1).
CREATE OR REPLACE FUNCTION queen.log_dlq_delete_v1(p_tenant UUID, p_id BIGINT, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_n INTEGER;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF (p_id IS NULL) = (p_queue IS NULL) THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'give a dead-letter id or a queue, not both';
    END IF;
    IF p_id IS NOT NULL AND p_id < 1 THEN
        RAISE EXCEPTION 'log_bad_ids' USING ERRCODE = '22023', DETAIL = 'a dead-letter id is a positive integer';
    END IF;
    IF p_queue IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    END IF;
    DELETE FROM queen.log_dead_letters
    WHERE tenant_id = p_tenant AND (p_id IS NULL OR id = p_id) AND (p_queue IS NULL OR queue_name = p_queue);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('deleted', v_n);
END
$$;
