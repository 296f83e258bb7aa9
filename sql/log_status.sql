-- log_status.sql: the dashboard's status reads as the reference broker's
-- clients name them (its queue list with counts, one queue's partitions,
-- messages pushed per time bucket), the database's own statistics for the
-- operator, and moving one message to the dead letters by hand.
--
-- Owns: queen._log_partition_offsets_v1, queen.log_status_queues_v1,
--       queen.log_status_queue_v1, queen.log_status_analytics_v1,
--       queen.log_message_dlq_v1, queen.system_pg_stats_v1.
-- May call: log_schema.sql, log_pop.sql (_log_subscription_start_v1), log_queues.sql (_log_queue_options_v1), log_browse.sql (_log_partition_names_v1,
-- log_message_delete_v1). Never names the kv table.
--
-- Counts here come from offsets, never from counting messages: a
-- partition's stored messages are (first stored offset .. last_offset], the
-- first found by one probe of the primary key, and a cursor splits them.
-- So a status read costs two index probes per partition whatever the
-- backlog (the probe's EXPLAIN: Limit -> Index Scan using log_messages_pkey,
-- Index Cond partition_id, one row read). Measured 2026-12-04 (2-core VM
-- shared with other builds, --fast cluster, psql \timing, one queue of one
-- partition holding 500,001 unconsumed messages, warm): log_queues_v1
-- (counts every message) 222 ms, log_status_queues_v1 6.5 ms (16 ms on the
-- session's first call), log_status_queue_v1 4.1 ms;
-- log_status_analytics_v1 12 ms over the last minute and 1005 ms over 24 h
-- with all 500,000 messages inside (it reads what it counts, see below).
-- Reproduce: insert the rows with generate_series into log_messages of a
-- pushed partition, set its last_offset, ANALYZE, time the calls.
-- The price of counting by offsets: a message deleted one by one (DELETE
-- /api/v1/messages/..., a move to the dead letters) or a requeued dead
-- letter meant for another group still counts until every cursor passes it. Message states are queue mode's, as
-- log_queues_v1 counts them.
--
-- Lock order (log_schema.sql): log_message_dlq_v1 takes the queue row FOR KEY SHARE
-- (every dead-letter write takes it; a group's first contact with the
-- queue, which locks it FOR UPDATE, waits), then the partition FOR UPDATE,
-- then its cursors FOR UPDATE (ascending group), then writes leaves
-- (log_dead_letters, log_messages). The partition's FOR UPDATE is what makes
-- the group list final: a group's first pop of the partition creates its
-- cursor under FOR KEY SHARE SKIP LOCKED (log_pop.sql), so while the move holds it
-- that pop skips the partition, and one already in flight is waited for and
-- its cursor then seen (and its lease refused). It waits behind pushes in
-- flight on the partition; no pop ever waits on it (log_pop.sql takes partitions
-- SKIP LOCKED).

-- _log_partition_offsets_v1(partition, last_offset) -> (total, pending,
-- processing, completed, oldest, newest): the partition's stored messages
-- for queue mode ('__QUEUE_MODE__') from offsets: total = stored (first
-- stored .. last_offset), processing = those in a live lease's batch,
-- pending = the rest above the cursor, completed = at or below it; oldest
-- and newest = created_at of the first and last stored. Two primary-key
-- probes and one cursor lookup.
CREATE OR REPLACE FUNCTION queen._log_partition_offsets_v1(p_partition_id UUID, p_last BIGINT,
    OUT total BIGINT, OUT pending BIGINT, OUT processing BIGINT, OUT completed BIGINT,
    OUT oldest TIMESTAMPTZ, OUT newest TIMESTAMPTZ)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    v_first BIGINT;
    v_base  BIGINT;
    v_c     RECORD;
BEGIN
    SELECT m.msg_offset, m.created_at INTO v_first, oldest
    FROM queen.log_messages m WHERE m.partition_id = p_partition_id ORDER BY m.msg_offset LIMIT 1;
    IF v_first IS NULL THEN
        total := 0; pending := 0; processing := 0; completed := 0;
        RETURN;
    END IF;
    SELECT m.created_at INTO newest
    FROM queen.log_messages m WHERE m.partition_id = p_partition_id ORDER BY m.msg_offset DESC LIMIT 1;
    SELECT c.committed_offset, c.batch_end, c.lease_expires_at > now() AS live INTO v_c
    FROM queen.log_consumers c WHERE c.partition_id = p_partition_id AND c.consumer_group = '__QUEUE_MODE__';
    total := GREATEST(p_last - v_first + 1, 0);
    v_base := LEAST(GREATEST(COALESCE(v_c.committed_offset, 0), v_first - 1), p_last);
    processing := CASE WHEN COALESCE(v_c.live, false)
                       THEN GREATEST(LEAST(v_c.batch_end, p_last) - v_base, 0) ELSE 0 END;
    pending := p_last - v_base - processing;
    completed := total - pending - processing;
END
$$;

-- log_status_queues_v1(tenant, namespace, task, limit, offset) -> {queues:
-- [{id, name, namespace, task, createdAt, partitions, messages: {total,
-- pending, processing}}], pagination: {limit, offset}}: the tenant's queues
-- (with that namespace / task when given), newest first, limit (1..1000,
-- NULL = 100) from offset (>= 0, NULL = 0). Counts as the header says.
-- Reads only. Raises 22023: log_bad_tenant, log_bad_limit, log_bad_offset.
CREATE OR REPLACE FUNCTION queen.log_status_queues_v1(p_tenant UUID, p_namespace TEXT, p_task TEXT,
                                                      p_limit INTEGER, p_offset INTEGER)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit  INTEGER := COALESCE(p_limit, queen._input_limit_v1('pageDefault'));
    v_offset INTEGER := COALESCE(p_offset, 0);
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF v_limit < 1 OR v_limit > queen._input_limit_v1('pageMax') THEN
        RAISE EXCEPTION 'log_bad_limit' USING ERRCODE = '22023',
            DETAIL = format('limit must be 1..%s', queen._input_limit_v1('pageMax'));
    END IF;
    IF v_offset < 0 THEN
        RAISE EXCEPTION 'log_bad_offset' USING ERRCODE = '22023', DETAIL = 'offset must be >= 0';
    END IF;
    RETURN jsonb_build_object('queues', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
                   'createdAt', queen.log_iso_v1(q.created_at), 'partitions', s.partitions,
                   'messages', jsonb_build_object('total', s.total, 'pending', s.pending,
                                                  'processing', s.processing))
               ORDER BY q.created_at DESC, q.name)
        FROM (SELECT * FROM queen.queues q
              WHERE q.tenant_id = p_tenant
                AND (p_namespace IS NULL OR q.namespace = p_namespace)
                AND (p_task IS NULL OR q.task = p_task)
              ORDER BY q.created_at DESC, q.name
              LIMIT v_limit OFFSET v_offset) AS q
        CROSS JOIN LATERAL (
            SELECT count(p.id) AS partitions, COALESCE(sum(o.total), 0) AS total,
                   COALESCE(sum(o.pending), 0) AS pending, COALESCE(sum(o.processing), 0) AS processing
            FROM queen.log_partitions p
            CROSS JOIN LATERAL queen._log_partition_offsets_v1(p.id, p.last_offset) AS o
            WHERE p.queue_id = q.id) AS s), '[]'),
        'pagination', jsonb_build_object('limit', v_limit, 'offset', v_offset));
END
$$;

-- log_status_queue_v1(tenant, queue) -> {queue: {id, name, namespace, task,
-- priority, createdAt, config: {leaseTime, retryLimit, retryDelay, ttl,
-- maxQueueSize, deadLetterQueue}}, partitions: [{id, name, createdAt,
-- messages: {total, pending, processing, completed, failed, deadLetter},
-- stats (the same), cursor: {totalConsumed, batchesConsumed}, lastActivity,
-- oldestMessage, newestMessage}], totals: {messages: {...}, and the same
-- flat}}, or JSON null when the tenant has no such queue. failed is 0 (a
-- failed message here is pending again or a dead letter); deadLetter counts
-- the partition's dead letters of every group (one scan of the queue's,
-- idx_log_dead_letters_queue); totalConsumed sums the groups' committed
-- offsets; batchesConsumed is not counted here (null); lastActivity is the
-- last pop of any group. Reads only. Raises 22023: log_bad_tenant,
-- log_bad_queue.
CREATE OR REPLACE FUNCTION queen.log_status_queue_v1(p_tenant UUID, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_q     queen.queues;
    v_opts  JSONB;
    v_parts JSONB;
    v_tot   JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    SELECT * INTO v_q FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = p_queue;
    IF NOT FOUND THEN
        RETURN 'null';
    END IF;
    v_opts := queen._log_queue_options_v1(v_q);
    WITH dl AS (SELECT d.partition_id, count(*) AS n FROM queen.log_dead_letters d
                WHERE d.queue_id = v_q.id GROUP BY d.partition_id),
    parts AS (
        SELECT p.id, p.name, p.created_at, o.*, COALESCE(dl.n, 0) AS dead,
               cur.consumed, cur.last_pop
        FROM queen.log_partitions p
        CROSS JOIN LATERAL queen._log_partition_offsets_v1(p.id, p.last_offset) AS o
        LEFT JOIN dl ON dl.partition_id = p.id
        CROSS JOIN LATERAL (SELECT COALESCE(sum(c.committed_offset), 0) AS consumed, max(c.claimed_at) AS last_pop
                            FROM queen.log_consumers c WHERE c.partition_id = p.id) AS cur
        WHERE p.queue_id = v_q.id),
    counted AS (
        SELECT parts.*, jsonb_build_object('total', total, 'pending', pending, 'processing', processing,
                                           'completed', completed, 'failed', 0, 'deadLetter', dead) AS msgs
        FROM parts)
    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'id', c.id, 'name', c.name, 'createdAt', queen.log_iso_v1(c.created_at),
               'messages', c.msgs, 'stats', c.msgs,
               'cursor', jsonb_build_object('totalConsumed', c.consumed, 'batchesConsumed', NULL),
               'lastActivity', queen.log_iso_v1(c.last_pop), 'oldestMessage', queen.log_iso_v1(c.oldest),
               'newestMessage', queen.log_iso_v1(c.newest)) ORDER BY c.name), '[]'),
           jsonb_build_object('total', COALESCE(sum(c.total), 0), 'pending', COALESCE(sum(c.pending), 0),
                              'processing', COALESCE(sum(c.processing), 0),
                              'completed', COALESCE(sum(c.completed), 0), 'failed', 0,
                              'deadLetter', COALESCE(sum(c.dead), 0))
    INTO v_parts, v_tot
    FROM counted c;
    RETURN jsonb_build_object(
        'queue', jsonb_build_object(
            'id', v_q.id, 'name', v_q.name, 'namespace', v_q.namespace, 'task', v_q.task,
            'priority', v_opts -> 'priority', 'createdAt', queen.log_iso_v1(v_q.created_at),
            'config', jsonb_build_object('leaseTime', v_q.lease_time, 'retryLimit', v_q.retry_limit,
                                         'retryDelay', v_opts -> 'retryDelay', 'ttl', v_opts -> 'ttl',
                                         'maxQueueSize', v_opts -> 'maxSize',
                                         'deadLetterQueue', v_opts -> 'deadLetterQueue')),
        'partitions', v_parts,
        'totals', jsonb_build_object('messages', v_tot) || v_tot);
END
$$;

-- log_status_analytics_v1(tenant, from, to, interval, queue, namespace,
-- task) -> {dataPoints: [{timestamp, messages}], interval, from, to}: how
-- many of the tenant's stored messages (of that queue / namespace / task
-- when given) were pushed in each UTC bucket of interval ('minute', 'hour'
-- NULL = 'hour', 'day') from the bucket holding from (NULL = to - 24 h) to
-- the one holding to (NULL = now), every bucket present; from and to are
-- ISO-8601 instants or 'now'. Consumed messages
-- past retention are gone and not counted.
-- Cost: walks each partition pushed to since from, newest offset first by
-- its primary key, and stops at the first message older than from: the
-- messages read are those pushed since from, never the older backlog. A
-- push whose transaction began before from but took the partition's lock
-- after a later one may end the walk one message early.
-- Raises 22023: log_bad_tenant, log_bad_interval, log_bad_to, log_bad_from,
-- log_bad_range (from after to, or more than 10000 buckets).
CREATE OR REPLACE FUNCTION queen.log_status_analytics_v1(p_tenant UUID, p_from TEXT, p_to TEXT,
                                                         p_interval TEXT, p_queue TEXT, p_namespace TEXT,
                                                         p_task TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_interval TEXT := COALESCE(p_interval, 'hour');
    v_to       TIMESTAMPTZ;
    v_from     TIMESTAMPTZ;
    v_width    BIGINT;
    v_first    BIGINT;
    v_n        BIGINT;
    v_counts   BIGINT[];
    v_b        BIGINT;
    v_p        RECORD;
    v_m        RECORD;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    v_width := CASE v_interval WHEN 'minute' THEN 60 WHEN 'hour' THEN 3600 WHEN 'day' THEN 86400 END;
    IF v_width IS NULL THEN
        RAISE EXCEPTION 'log_bad_interval' USING ERRCODE = '22023', DETAIL = 'interval must be minute, hour or day';
    END IF;
    -- from and to parse as subscriptionFrom does (log_pop.sql): ISO-8601 or now,
    -- never PostgreSQL's words such as 'yesterday'.
    BEGIN
        v_to := COALESCE(queen._log_subscription_start_v1(p_to), now());
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'log_bad_to' USING ERRCODE = '22023', DETAIL = 'to must be now or an ISO-8601 instant';
    END;
    BEGIN
        v_from := COALESCE(queen._log_subscription_start_v1(p_from), v_to - interval '24 hours');
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'log_bad_from' USING ERRCODE = '22023', DETAIL = 'from must be now or an ISO-8601 instant';
    END;
    v_first := floor(extract(epoch FROM v_from) / v_width)::bigint;
    v_n := floor(extract(epoch FROM v_to) / v_width)::bigint - v_first + 1;
    IF v_n < 1 OR v_n > 10000 THEN
        RAISE EXCEPTION 'log_bad_range' USING ERRCODE = '22023',
            DETAIL = format('from must not be after to, and the range must hold at most 10000 %s buckets', v_interval);
    END IF;
    v_counts := array_fill(0::bigint, ARRAY[v_n::integer]);
    FOR v_p IN SELECT p.id FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
               WHERE q.tenant_id = p_tenant AND p.last_push_at >= v_from
                 AND (p_queue IS NULL OR q.name = p_queue)
                 AND (p_namespace IS NULL OR q.namespace = p_namespace)
                 AND (p_task IS NULL OR q.task = p_task) LOOP
        FOR v_m IN SELECT m.created_at FROM queen.log_messages m WHERE m.partition_id = v_p.id
                   ORDER BY m.msg_offset DESC LOOP
            EXIT WHEN v_m.created_at < v_from;
            IF v_m.created_at <= v_to THEN
                v_b := floor(extract(epoch FROM v_m.created_at) / v_width)::bigint - v_first + 1;
                v_counts[v_b] := v_counts[v_b] + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN jsonb_build_object(
        'dataPoints', (SELECT jsonb_agg(jsonb_build_object(
                                  'timestamp', queen.log_iso_v1(to_timestamp((v_first + i - 1) * v_width)),
                                  'messages', v_counts[i]) ORDER BY i)
                       FROM generate_series(1, v_n::integer) AS i),
        'interval', v_interval, 'from', queen.log_iso_v1(v_from), 'to', queen.log_iso_v1(v_to));
END
$$;

-- log_message_dlq_v1(tenant, partition_id, transaction_id) -> {moved,
-- partitionId, transactionId, deadLetters: [{id, consumerGroup}]}, or JSON
-- null when the tenant's partition stores no message with that
-- transactionId: the operator's "move to the dead letters". Each stored
-- message of the partition with that transactionId becomes a dead letter
-- (reason 'moved', errorMessage 'moved to the dead letters by an
-- operator', retryCount the group's failures of it so far) for every group
-- subscribed to the queue that has not consumed it (its cursor below it, or
-- no cursor yet and a start not after it; a requeued copy only for its own
-- group), or for queue mode when no group has ever read the queue; then it
-- is deleted as log_message_delete_v1 deletes (a group that subscribes
-- later never sees it, as after a delete). One transaction: the dead
-- letters and the delete commit together. Refused, nothing written: 55000
-- log_message_leased while a live lease covers it (its consumer must be able
-- to settle it), 55000 log_message_consumed when every group has consumed
-- it (there is nothing to move). Raises 22023: log_bad_tenant,
-- log_bad_partition_id, log_bad_transaction_id.
CREATE OR REPLACE FUNCTION queen.log_message_dlq_v1(p_tenant UUID, p_partition_id TEXT, p_txn TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_at    RECORD;
    v_pid   UUID;
    v_qid   UUID;
    v_held  TEXT;
    v_rows  JSONB;
BEGIN
    v_at := queen._log_partition_names_v1(p_tenant, p_partition_id);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    v_pid := p_partition_id::uuid;
    SELECT q.id INTO v_qid FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND q.name = v_at.queue_name FOR KEY SHARE;
    -- The header says why FOR UPDATE: no group gains a cursor meanwhile.
    PERFORM 1 FROM queen.log_partitions p WHERE p.id = v_pid AND p.queue_id = v_qid FOR UPDATE;
    IF v_qid IS NULL OR NOT EXISTS (SELECT 1 FROM queen.log_messages m
                                    WHERE m.partition_id = v_pid AND m.transaction_id = p_txn) THEN
        RETURN 'null';
    END IF;
    PERFORM 1 FROM queen.log_consumers c WHERE c.partition_id = v_pid
    ORDER BY c.consumer_group FOR UPDATE;
    SELECT c.consumer_group INTO v_held
    FROM queen.log_messages m JOIN queen.log_consumers c ON c.partition_id = m.partition_id
    WHERE m.partition_id = v_pid AND m.transaction_id = p_txn
      AND c.lease_expires_at > now() AND m.msg_offset > c.committed_offset AND m.msg_offset <= c.batch_end
      AND (m.for_group IS NULL OR m.for_group = c.consumer_group)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'log_message_leased' USING ERRCODE = '55000',
            DETAIL = format('consumer group %s holds it in a live lease; move it after the lease ends', v_held);
    END IF;
    WITH groups AS (
        SELECT s.consumer_group AS grp, s.start_at FROM queen.log_subscriptions s WHERE s.queue_id = v_qid
        UNION ALL
        SELECT '__QUEUE_MODE__', NULL
        WHERE NOT EXISTS (SELECT 1 FROM queen.log_subscriptions s WHERE s.queue_id = v_qid)),
    due AS (
        SELECT m.*, g.grp,
               CASE WHEN c.fail_offset = m.msg_offset THEN c.fail_count ELSE 0 END + COALESCE(
                   CASE WHEN c.batch_end >= m.msg_offset THEN c.expired_count END, 0) AS tries
        FROM queen.log_messages m
        CROSS JOIN groups g
        LEFT JOIN queen.log_consumers c ON c.partition_id = m.partition_id AND c.consumer_group = g.grp
        WHERE m.partition_id = v_pid AND m.transaction_id = p_txn
          AND (m.for_group IS NULL OR m.for_group = g.grp)
          AND CASE WHEN c.partition_id IS NOT NULL THEN c.committed_offset < m.msg_offset
                   ELSE g.start_at IS NULL OR g.start_at <= m.created_at END),
    ins AS (
        INSERT INTO queen.log_dead_letters (tenant_id, queue_id, queue_name, partition_id, partition_name,
            consumer_group, msg_offset, message_id, transaction_id, payload, error, attempts, created_at,
            failed_at, reason)
        SELECT p_tenant, v_qid, v_at.queue_name, v_pid, v_at.partition_name, d.grp, d.msg_offset, d.id,
               d.transaction_id, d.payload, 'moved to the dead letters by an operator', d.tries, d.created_at,
               now(), 'moved'
        FROM due d ORDER BY d.msg_offset, d.grp
        RETURNING id, consumer_group)
    SELECT jsonb_agg(jsonb_build_object('id', ins.id, 'consumerGroup', ins.consumer_group)
                     ORDER BY ins.consumer_group, ins.id)
    INTO v_rows FROM ins;
    IF v_rows IS NULL THEN
        RAISE EXCEPTION 'log_message_consumed' USING ERRCODE = '55000',
            DETAIL = 'every consumer group of the queue has consumed it; there is nothing to move';
    END IF;
    PERFORM queen.log_message_delete_v1(p_tenant, v_at.queue_name, p_txn, v_at.partition_name);
    RETURN jsonb_build_object('moved', true, 'partitionId', v_pid, 'transactionId', p_txn,
                              'deadLetters', v_rows);
END
$$;

-- system_pg_stats_v1() -> the database's own statistics for the queen
-- schema, under the reference broker's names: {timestamp, database,
-- databaseCache, tableCache, indexCache, cacheSummary, deadTuples,
-- hotUpdates, activeQueries, autovacuumStatus, bufferConfig, bufferUsage,
-- tableSizes}. Broker-wide (every tenant's tables): the operator's. Reads
-- the pg_stat* views and catalog sizes only; bufferUsage is [] (it needs
-- the pg_buffercache extension, which is not installed). activeQueries are
-- statements running over 1 s, their text cut to 200 characters (our
-- statements carry their values as parameters, not in the text).
CREATE OR REPLACE FUNCTION queen.system_pg_stats_v1()
RETURNS JSONB
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
        'timestamp', queen.log_iso_v1(now()),
        'database', current_database(),
        'databaseCache', (SELECT jsonb_build_object('database', d.datname, 'diskReads', d.blks_read,
                                                    'cacheHits', d.blks_hit, 'cacheHitRatio',
                                                    round(d.blks_hit::numeric / NULLIF(d.blks_hit + d.blks_read, 0) * 100, 2))
                          FROM pg_stat_database d WHERE d.datname = current_database()),
        'tableCache', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                  'schema', t.schemaname, 'table', t.relname, 'diskReads', t.heap_blks_read,
                                  'cacheHits', t.heap_blks_hit, 'cacheHitRatio',
                                  round(t.heap_blks_hit::numeric / NULLIF(t.heap_blks_hit + t.heap_blks_read, 0) * 100, 2))
                              ORDER BY t.heap_blks_read DESC NULLS LAST, t.relname), '[]')
                       FROM pg_statio_user_tables t WHERE t.schemaname = 'queen'),
        'indexCache', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                  'schema', i.schemaname, 'table', i.relname, 'index', i.indexrelname,
                                  'diskReads', i.idx_blks_read, 'cacheHits', i.idx_blks_hit, 'cacheHitRatio',
                                  round(i.idx_blks_hit::numeric / NULLIF(i.idx_blks_hit + i.idx_blks_read, 0) * 100, 2))
                              ORDER BY i.idx_blks_read DESC NULLS LAST, i.indexrelname), '[]')
                       FROM (SELECT * FROM pg_statio_user_indexes WHERE schemaname = 'queen'
                             ORDER BY idx_blks_read DESC NULLS LAST, indexrelname LIMIT 20) AS i),
        'cacheSummary', (SELECT jsonb_build_object(
                             'tables', jsonb_build_object('diskReads', sum(t.heap_blks_read), 'cacheHits', sum(t.heap_blks_hit),
                                                          'hitRatio', round(sum(t.heap_blks_hit)::numeric
                                                              / NULLIF(sum(t.heap_blks_hit) + sum(t.heap_blks_read), 0) * 100, 2)),
                             'indexes', (SELECT jsonb_build_object('diskReads', sum(i.idx_blks_read),
                                                                   'cacheHits', sum(i.idx_blks_hit),
                                                                   'hitRatio', round(sum(i.idx_blks_hit)::numeric
                                                                       / NULLIF(sum(i.idx_blks_hit) + sum(i.idx_blks_read), 0) * 100, 2))
                                         FROM pg_statio_user_indexes i WHERE i.schemaname = 'queen'))
                         FROM pg_statio_user_tables t WHERE t.schemaname = 'queen'),
        'deadTuples', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                  'schema', t.schemaname, 'table', t.relname, 'deadTuples', t.n_dead_tup,
                                  'liveTuples', t.n_live_tup,
                                  'deadPercentage', round(t.n_dead_tup::numeric / NULLIF(t.n_live_tup, 0) * 100, 2),
                                  'lastVacuum', queen.log_iso_v1(t.last_vacuum),
                                  'lastAutovacuum', queen.log_iso_v1(t.last_autovacuum))
                              ORDER BY t.n_dead_tup DESC, t.relname), '[]')
                       FROM (SELECT * FROM pg_stat_user_tables WHERE schemaname = 'queen' AND n_dead_tup > 0
                             ORDER BY n_dead_tup DESC, relname LIMIT 15) AS t),
        'hotUpdates', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                  'schema', t.schemaname, 'table', t.relname, 'totalUpdates', t.n_tup_upd,
                                  'hotUpdates', t.n_tup_hot_upd,
                                  'hotUpdatePercentage', round(t.n_tup_hot_upd::numeric / NULLIF(t.n_tup_upd, 0) * 100, 2))
                              ORDER BY t.n_tup_upd DESC, t.relname), '[]')
                       FROM (SELECT * FROM pg_stat_user_tables WHERE schemaname = 'queen' AND n_tup_upd > 0
                             ORDER BY n_tup_upd DESC, relname LIMIT 15) AS t),
        'activeQueries', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                     'pid', a.pid, 'duration', extract(epoch FROM now() - a.query_start),
                                     'state', a.state, 'query', left(a.query, 200),
                                     'waitEventType', a.wait_event_type, 'waitEvent', a.wait_event)
                                 ORDER BY a.query_start), '[]')
                          FROM (SELECT * FROM pg_stat_activity
                                WHERE state <> 'idle' AND query_start < now() - interval '1 second'
                                  AND pid <> pg_backend_pid() AND datname = current_database()
                                ORDER BY query_start LIMIT 10) AS a),
        'autovacuumStatus', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                        'table', t.relname, 'lastAutovacuum', queen.log_iso_v1(t.last_autovacuum),
                                        'deadTuples', t.n_dead_tup, 'autovacuumCount', t.autovacuum_count,
                                        'autoanalyzeCount', t.autoanalyze_count)
                                    ORDER BY t.n_dead_tup DESC, t.relname), '[]')
                             FROM (SELECT * FROM pg_stat_user_tables WHERE schemaname = 'queen' AND n_dead_tup > 1000
                                   ORDER BY n_dead_tup DESC, relname LIMIT 10) AS t),
        'bufferConfig', (SELECT jsonb_build_object('sharedBuffers', s.setting,
                                                   'sharedBuffersSize', pg_size_pretty(s.setting::bigint * 8192))
                         FROM pg_settings s WHERE s.name = 'shared_buffers'),
        'bufferUsage', '[]'::jsonb,
        'tableSizes', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                                  'table', c.relname, 'totalSize', pg_size_pretty(c.total),
                                  'totalSizeBytes', c.total, 'tableSize', pg_size_pretty(c.heap),
                                  'tableSizeBytes', c.heap, 'indexSize', pg_size_pretty(c.idx),
                                  'indexSizeBytes', c.idx)
                              ORDER BY c.total DESC, c.relname), '[]')
                       FROM (SELECT r.relname, pg_total_relation_size(r.oid) AS total,
                                    pg_relation_size(r.oid) AS heap, pg_indexes_size(r.oid) AS idx
                             FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
                             WHERE n.nspname = 'queen' AND r.relkind = 'r'
                             ORDER BY 2 DESC, 1 LIMIT 20) AS c))
$$;
