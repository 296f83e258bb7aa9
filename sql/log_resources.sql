-- log_resources.sql: the read-mostly resources an admin client and the
-- console show: the tenant's overview (queues, messages by state, push
-- rate), namespaces and tasks, one queue's detail and its partitions, the
-- tenant's partitions by depth, and clearing a queue's messages.
--
-- Owns: queen.log_overview_v1, queen.log_labels_v1, queen.log_queue_detail_v1,
--       queen.log_queue_partitions_v1, queen.log_partitions_v1,
--       queen.log_queue_clear_v1.
-- May call: log_schema.sql, log_queues.sql (_log_queue_options_v1, _log_partition_mode_counts_v1), log_dlq.sql. Never names the kv table.
-- Message states here are queue mode's (as log_queues_v1 counts them).

-- log_overview_v1(tenant) -> {queues, partitions, consumerGroups,
-- messages: {total, pending, processing, deadLetters}, pushedLastMinute}.
-- pushedLastMinute counts messages created in the last 60 s (a rate per
-- minute). Reads only. Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.log_overview_v1(p_tenant UUID)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_q JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    v_q := queen.log_queues_v1(p_tenant) -> 'queues';
    RETURN jsonb_build_object(
        'queues', jsonb_array_length(v_q),
        'partitions', (SELECT COALESCE(sum((e ->> 'partitions')::bigint), 0) FROM jsonb_array_elements(v_q) e),
        'consumerGroups', (SELECT count(DISTINCT c.consumer_group) FROM queen.log_consumers c
                           JOIN queen.log_partitions p ON p.id = c.partition_id
                           JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = p_tenant),
        'messages', jsonb_build_object(
            'total', (SELECT COALESCE(sum((e #>> '{messages,total}')::bigint), 0) FROM jsonb_array_elements(v_q) e),
            'pending', (SELECT COALESCE(sum((e #>> '{messages,pending}')::bigint), 0) FROM jsonb_array_elements(v_q) e),
            'processing', (SELECT COALESCE(sum((e #>> '{messages,processing}')::bigint), 0) FROM jsonb_array_elements(v_q) e),
            'deadLetters', (SELECT count(*) FROM queen.log_dead_letters d WHERE d.tenant_id = p_tenant)),
        'pushedLastMinute', (SELECT count(*) FROM queen.queues q
                             JOIN queen.log_partitions p ON p.queue_id = q.id
                             JOIN queen.log_messages m ON m.partition_id = p.id
                             WHERE q.tenant_id = p_tenant AND p.last_push_at > now() - interval '60 seconds'
                               AND m.created_at > now() - interval '60 seconds'));
END
$$;

-- log_labels_v1(tenant, kind) -> {namespaces | tasks: [{name, queues}]} for
-- kind 'namespace' or 'task': each label in byte order with how many of the
-- tenant's queues carry it. Raises 22023 log_bad_tenant, log_bad_request.
CREATE OR REPLACE FUNCTION queen.log_labels_v1(p_tenant UUID, p_kind TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_kind IS NULL OR p_kind NOT IN ('namespace', 'task') THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'kind must be namespace or task';
    END IF;
    RETURN jsonb_build_object(CASE p_kind WHEN 'namespace' THEN 'namespaces' ELSE 'tasks' END, COALESCE((
        SELECT jsonb_agg(jsonb_build_object('name', l.name, 'queues', l.n) ORDER BY l.name)
        FROM (SELECT CASE p_kind WHEN 'namespace' THEN q.namespace ELSE q.task END COLLATE "C" AS name, count(*) AS n
              FROM queen.queues q WHERE q.tenant_id = p_tenant
              GROUP BY 1) AS l
        WHERE l.name IS NOT NULL), '[]'));
END
$$;

-- log_queue_detail_v1(tenant, queue) -> {name, queueId, namespace, task,
-- createdAt, updatedAt, options, partitions, messages: {total, pending,
-- processing}, deadLetters, consumerGroups}. Reads only. Raises 22023:
-- log_bad_tenant, log_bad_queue, log_no_such_queue.
CREATE OR REPLACE FUNCTION queen.log_queue_detail_v1(p_tenant UUID, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_qid UUID;
    v_q   queen.queues%ROWTYPE;
    v_row JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    v_qid := queen._log_require_queue_v1(p_tenant, p_queue);
    SELECT * INTO v_q FROM queen.queues WHERE id = v_qid;
    SELECT e INTO v_row FROM jsonb_array_elements(queen.log_queues_v1(p_tenant) -> 'queues') e
    WHERE e ->> 'name' = p_queue;
    RETURN jsonb_build_object(
        'name', v_q.name, 'queueId', v_q.id, 'namespace', v_q.namespace, 'task', v_q.task,
        'createdAt', queen.log_iso_v1(v_q.created_at), 'updatedAt', queen.log_iso_v1(v_q.updated_at),
        'options', queen._log_queue_options_v1(v_q),
        'partitions', COALESCE(v_row -> 'partitions', '0'), 'messages', v_row -> 'messages',
        'deadLetters', (SELECT count(*) FROM queen.log_dead_letters d WHERE d.queue_id = v_q.id),
        'consumerGroups', (SELECT count(DISTINCT c.consumer_group) FROM queen.log_consumers c
                           JOIN queen.log_partitions p ON p.id = c.partition_id WHERE p.queue_id = v_q.id));
END
$$;

-- log_queue_partitions_v1(tenant, queue) -> {queue, partitions: [{name,
-- partitionId, headOffset, messages, createdAt, lastPushAt}]} in name
-- order. Reads only. Raises 22023: log_bad_tenant, log_bad_queue,
-- log_no_such_queue.
CREATE OR REPLACE FUNCTION queen.log_queue_partitions_v1(p_tenant UUID, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_qid UUID;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    v_qid := queen._log_require_queue_v1(p_tenant, p_queue);
    RETURN jsonb_build_object('queue', p_queue, 'partitions', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'name', p.name, 'partitionId', p.id, 'headOffset', p.last_offset,
                   'messages', (SELECT count(*) FROM queen.log_messages m WHERE m.partition_id = p.id),
                   'createdAt', queen.log_iso_v1(p.created_at), 'lastPushAt', queen.log_iso_v1(p.last_push_at))
               ORDER BY p.name)
        FROM queen.log_partitions p WHERE p.queue_id = v_qid), '[]'));
END
$$;

-- log_queue_clear_v1(tenant, queue) -> {queue, deleted}: deletes every
-- stored message of the queue (cursors, offsets, options and dead letters
-- stay; the next push continues the offsets). Refused while a live lease
-- holds part of it (55000 log_message_leased; nothing deleted). Lock order:
-- the queue's cursors (FOR UPDATE, ascending) before the messages. Raises
-- 22023: log_bad_tenant, log_bad_queue, log_no_such_queue.
CREATE OR REPLACE FUNCTION queen.log_queue_clear_v1(p_tenant UUID, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_qid  UUID;
    v_held TEXT;
    v_n    BIGINT;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    v_qid := queen._log_require_queue_v1(p_tenant, p_queue);
    PERFORM 1 FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
    WHERE p.queue_id = v_qid ORDER BY c.partition_id, c.consumer_group FOR UPDATE OF c;
    SELECT p.name || '/' || c.consumer_group INTO v_held
    FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
    WHERE p.queue_id = v_qid AND c.lease_expires_at > now() AND c.batch_end > c.committed_offset
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'log_message_leased' USING ERRCODE = '55000',
            DETAIL = format('%s holds a live lease; clear after it ends', v_held);
    END IF;
    DELETE FROM queen.log_messages m USING queen.log_partitions p
    WHERE p.id = m.partition_id AND p.queue_id = v_qid;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('queue', p_queue, 'deleted', v_n);
END
$$;

-- log_partitions_v1(tenant, queue, min_depth, limit) -> {partitions: [{id,
-- name, queue, namespace, task, createdAt, lastPushAt, headOffset, depth,
-- processing, total}]}: the tenant's partitions (of queue when given) with
-- at least min_depth (NULL = 0) pending messages, deepest first (then queue
-- and name), at most limit (NULL = 100, 1..1000). Counts are queue mode's
-- (_log_partition_mode_counts_v1; depth is its pending). It counts every
-- partition of the tenant (or queue) before it keeps the deepest: a
-- dashboard read, not a hot path. Reads only. Raises 22023: log_bad_tenant,
-- log_bad_queue, log_bad_limit, log_bad_depth (< 0).
CREATE OR REPLACE FUNCTION queen.log_partitions_v1(p_tenant UUID, p_queue TEXT, p_min_depth BIGINT, p_limit INTEGER)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit INTEGER;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_queue IS NOT NULL THEN
        PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    END IF;
    IF p_min_depth < 0 THEN
        RAISE EXCEPTION 'log_bad_depth' USING ERRCODE = '22023', DETAIL = 'minDepth must be at least 0';
    END IF;
    v_limit := queen._log_page_limit_v1(p_limit, NULL, 'a partition');
    RETURN jsonb_build_object('partitions', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'id', r.id, 'name', r.name, 'queue', r.queue, 'namespace', r.namespace, 'task', r.task,
                   'createdAt', queen.log_iso_v1(r.created_at), 'lastPushAt', queen.log_iso_v1(r.last_push_at),
                   'headOffset', r.last_offset, 'depth', r.pending, 'processing', r.processing, 'total', r.total)
               ORDER BY r.pending DESC, r.queue, r.name)
        FROM (SELECT p.id, p.name, q.name AS queue, q.namespace, q.task, p.created_at, p.last_push_at,
                     p.last_offset, pm.total, pm.pending, pm.processing
              FROM queen.queues q
              JOIN queen.log_partitions p ON p.queue_id = q.id
              CROSS JOIN LATERAL queen._log_partition_mode_counts_v1(p.id) AS pm
              WHERE q.tenant_id = p_tenant AND (p_queue IS NULL OR q.name = p_queue)
                AND pm.pending >= COALESCE(p_min_depth, 0)
              ORDER BY pm.pending DESC, q.name, p.name
              LIMIT v_limit) AS r), '[]'));
END
$$;
