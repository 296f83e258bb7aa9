-- log_queues.sql: queue configuration (the options configure accepts,
-- their checks and effective values), the tenant's queue list with counts,
-- queue deletion, and which queue a partition or lease id belongs to (the
-- broker's scope check).
--
-- Owns: queen.log_queues_of_v1, queen._log_queue_option_specs_v1,
--       queen._log_queue_option_check_v1, queen._log_queue_options_v1,
--       queen.log_configure_v1, queen._log_partition_mode_counts_v1, queen.log_queues_v1,
--       queen.log_queue_delete_v1.
-- May call: log_schema.sql. Never names queen.kv.
-- Lock order (log_schema.sql): queen.queues (one row: FOR NO KEY UPDATE to
-- configure, FOR UPDATE to delete) -> what a queue delete cascades to. The
-- reads (log_queues_v1, log_queues_of_v1) take no lock.

-- log_queues_of_v1(tenant, refs) -> [queue name | null, ...], one per ref,
-- in order. refs: [{"partitionId": id} | {"leaseId": id}], the ids an ack,
-- a trace or a lease extension names, as the client sent them (any JSON).
-- null: not a uuid, unknown, or another tenant's; the broker's scope check
-- (src/server/auth.c) refuses all three alike, so a narrowed token learns
-- nothing of the queues it may not see. Reads only, no lock, run before the
-- call it guards: a partition never moves to another queue (its id is
-- gen_random_uuid's, for its life) and a lease id is minted per pop, so the
-- answer still holds when that call runs. Raises 22023: log_bad_tenant,
-- log_bad_request (refs not an array).
CREATE OR REPLACE FUNCTION queen.log_queues_of_v1(p_tenant UUID, p_refs JSONB)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p_refs) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'refs must be an array';
    END IF;
    -- CASE, not a cast in the WHERE: a ref that is not a uuid is never cast.
    RETURN (
        SELECT COALESCE(jsonb_agg(to_jsonb(q.name) ORDER BY r.i), '[]')
        FROM jsonb_array_elements(p_refs) WITH ORDINALITY AS r(ref, i)
        LEFT JOIN LATERAL (
            SELECT qu.name FROM queen.log_partitions lp JOIN queen.queues qu ON qu.id = lp.queue_id
            WHERE jsonb_typeof(r.ref -> 'partitionId') = 'string'
              AND lp.id = CASE WHEN queen.log_uuid_ok_v1(r.ref ->> 'partitionId')
                               THEN (r.ref ->> 'partitionId')::uuid END
              AND qu.tenant_id = p_tenant
            UNION ALL
            -- A lease shared by the partitions of several queues (a pop by
            -- labels, log_pop.sql) names no one queue: null, so a narrowed token
            -- cannot renew or ack into queues beside its own.
            SELECT min(qu.name) FROM queen.log_consumers c
            JOIN queen.log_partitions lp ON lp.id = c.partition_id
            JOIN queen.queues qu ON qu.id = lp.queue_id
            WHERE jsonb_typeof(r.ref -> 'leaseId') = 'string'
              AND c.lease_id = CASE WHEN queen.log_uuid_ok_v1(r.ref ->> 'leaseId')
                                    THEN (r.ref ->> 'leaseId')::uuid END
              AND qu.tenant_id = p_tenant
            HAVING count(DISTINCT qu.id) = 1
            LIMIT 1) q ON true);
END
$$;


-- _log_queue_option_specs_v1() -> one row per option name configure accepts,
-- in the order of the reference broker's echo (ord):
--   name    as on the wire (camelCase).
--   kind    integer (a JSON number with no fraction, in lo..hi), boolean,
--           sink (a string of 0..64 of A-Z a-z 0-9 . _ -) or label (a
--           string of 0..255 bytes without control characters; '' clears).
--   dflt    the value a queue configure creates has, and what null resets
--           the option to.
--   effect  honoured: acted on here (a column of queen.queues);
--           stored:   accepted, type-checked, stored in stored_options and
--                     echoed, but not acted on until its feature lands;
--           acted:    kept in stored_options like stored, and acted on
--                     (delayedProcessing, maxWaitTimeSeconds: pop, log_delays.sql;
--                     encryptionEnabled: the engine, log_encryption.sql);
--           label:    namespace / task, echoed beside the options.
-- The names are the reference broker's configure options (its
-- configure_queue_v1; the JS and Python clients' create() send nine of them
-- by default). A name not here is refused (a typo must not pass silently).
-- Ranges: the reference takes any int4 and checks almost nothing; here a
-- count or a duration is >= 0, leaseTime >= 1, and minPopWaitTime and the
-- sink hold keep the reference's own bounds (refused, not clamped).
-- dead-lettering after retryLimit is always on here: deadLetterQueue and
-- dlqAfterMaxRetries default to true (what happens) and false is stored
-- only. IMMUTABLE: a change here is a change of the contract.
CREATE OR REPLACE FUNCTION queen._log_queue_option_specs_v1()
RETURNS TABLE (ord INTEGER, name TEXT, kind TEXT, lo BIGINT, hi BIGINT, dflt JSONB, effect TEXT)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    VALUES
        (1,  'priority',                    'integer', -2147483648::bigint, 2147483647::bigint, '0'::jsonb, 'stored'),
        (2,  'leaseTime',                   'integer', 1,        2147483647, '300',    'honoured'),
        (3,  'retryLimit',                  'integer', 0,        2147483647, '3',      'honoured'),
        (4,  'retryDelay',                  'integer', 0,        2147483647, '1000',   'stored'),
        (5,  'maxSize',                     'integer', 0,        2147483647, '0',      'stored'),
        (6,  'ttl',                         'integer', 0,        2147483647, '3600',   'stored'),
        (7,  'deadLetterQueue',             'boolean', NULL,     NULL,       'true',   'stored'),
        (8,  'dlqAfterMaxRetries',          'boolean', NULL,     NULL,       'true',   'stored'),
        (9,  'delayedProcessing',           'integer', 0,        2147483647, '0',      'acted'),
        (10, 'windowBuffer',                'integer', 0,        2147483647, '0',      'acted'),
        (11, 'retentionSeconds',            'integer', 0,        2147483647, '0',      'honoured'),
        (12, 'completedRetentionSeconds',   'integer', 0,        2147483647, '0',      'honoured'),
        (13, 'retentionEnabled',            'boolean', NULL,     NULL,       'false',  'stored'),
        (14, 'encryptionEnabled',           'boolean', NULL,     NULL,       'false',  'acted'),
        (15, 'maxWaitTimeSeconds',          'integer', 0,        2147483647, '0',      'acted'),
        (16, 'minPopWaitTime',              'integer', 0,        60000,      '0',      'stored'),
        (17, 'dedupWindowSeconds',          'integer', 0,        2147483647, '3600',   'honoured'),
        (18, 'retentionSinkHold',           'sink',    NULL,     NULL,       '""',     'stored'),
        (19, 'retentionSinkHoldMaxSeconds', 'integer', 60,       31536000,   '604800', 'stored'),
        (20, 'namespace',                   'label',   NULL,     NULL,       'null',   'label'),
        (21, 'task',                        'label',   NULL,     NULL,       'null',   'label')
$$;

-- _log_queue_option_check_v1(name, value) -> void. Raises 22023
-- log_bad_options (DETAIL names the option and what it takes) unless name is
-- one of _log_queue_option_specs_v1 and value fits its kind; JSON null is
-- always accepted (it resets the option to its default). Reads nothing.
CREATE OR REPLACE FUNCTION queen._log_queue_option_check_v1(p_name TEXT, p_value JSONB)
RETURNS VOID
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    s RECORD;
BEGIN
    SELECT * INTO s FROM queen._log_queue_option_specs_v1() o WHERE o.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
            DETAIL = CASE WHEN p_name = 'replace'
                          THEN 'unknown option replace (to replace the whole configuration send "mode":"replace" beside "options")'
                          ELSE format('unknown option %s', p_name) END;
    END IF;
    IF p_value IS NULL OR jsonb_typeof(p_value) = 'null' THEN
        RETURN;
    END IF;
    IF s.kind = 'integer' THEN
        IF jsonb_typeof(p_value) <> 'number' OR p_value::numeric <> trunc(p_value::numeric)
           OR p_value::numeric NOT BETWEEN s.lo AND s.hi THEN
            RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
                DETAIL = format('option %s must be an integer in %s..%s', p_name, s.lo, s.hi);
        END IF;
    ELSIF s.kind = 'boolean' THEN
        IF jsonb_typeof(p_value) <> 'boolean' THEN
            RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
                DETAIL = format('option %s must be true or false', p_name);
        END IF;
    ELSIF s.kind = 'sink' THEN
        IF jsonb_typeof(p_value) <> 'string' OR (p_value #>> '{}') !~ '^[A-Za-z0-9._-]{0,64}$' THEN
            RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
                DETAIL = format('option %s must be a string of 0..64 characters from A-Z a-z 0-9 . _ -', p_name);
        END IF;
    ELSE -- label
        IF jsonb_typeof(p_value) <> 'string'
           OR ((p_value #>> '{}') <> '' AND NOT queen.log_name_ok_v1(p_value #>> '{}')) THEN
            RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
                DETAIL = format('option %s must be a string of 0..255 bytes without control characters', p_name);
        END IF;
    END IF;
END
$$;

-- _log_queue_options_v1(queue row) -> the queue's effective options, every
-- name of _log_queue_option_specs_v1 but the labels: the honoured ones from
-- their columns, the stored ones from stored_options over their defaults.
CREATE OR REPLACE FUNCTION queen._log_queue_options_v1(p_q queen.queues)
RETURNS JSONB
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_object_agg(s.name, s.dflt) || p_q.stored_options
           || jsonb_build_object('leaseTime', p_q.lease_time, 'retryLimit', p_q.retry_limit,
                                 'dedupWindowSeconds', p_q.dedup_window_seconds,
                                 'retentionSeconds', p_q.retention_seconds,
                                 'completedRetentionSeconds', p_q.completed_retention_seconds)
    FROM queen._log_queue_option_specs_v1() s
    WHERE s.effect <> 'label'
$$;

-- log_configure_v1(tenant, queue, options, namespace, task, mode) ->
-- {configured: true, queue, queueId, namespace, task, options: {every option
-- name: its effective value}, storedOnly: [names stored and echoed but not
-- acted on yet]}.
--   options    {name: value} over _log_queue_option_specs_v1 (NULL = {}).
--              A value of null resets that option to its default.
--   namespace, task: the request's top-level labels. NULL or '' keeps the
--              queue's label (as the reference broker folds in only a
--              non-empty one); options.namespace / options.task, when
--              present, win ('' or null there clears the label).
--   mode       NULL or 'merge': an option not given keeps its stored value;
--              'replace': an option not given goes back to its default, and
--              so do the labels.
-- Creates the queue (with the defaults: leaseTime 300, not the 60 a push
-- creates with) or updates it under its row lock, so concurrent
-- reconfigurations merge one after the other. The merge and replace rules
-- are the reference broker's (1.6.0).
-- Raises 22023: log_bad_tenant, log_bad_queue, log_bad_request (mode, or a
-- top-level label that is not 1..255 bytes without control characters),
-- log_bad_options (not an object, unknown name, value of the wrong kind or
-- out of range: _log_queue_option_check_v1). Nothing is written then.
-- Lock: the queen.queues row only, FOR NO KEY UPDATE (a push creating a
-- partition of the queue is not held up).
-- The three-argument form this replaces: gone, or a three-argument call
-- would match both (PostgreSQL: "function is not unique"). The new form takes
-- every call the old one did (the added arguments default to NULL), so a
-- broker still on the old one keeps working. A no-op once dropped.
DROP FUNCTION IF EXISTS queen.log_configure_v1(UUID, TEXT, JSONB);
CREATE OR REPLACE FUNCTION queen.log_configure_v1(p_tenant UUID, p_queue TEXT, p_options JSONB,
                                                  p_namespace TEXT DEFAULT NULL, p_task TEXT DEFAULT NULL,
                                                  p_mode TEXT DEFAULT NULL)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_opts   JSONB := COALESCE(p_options, '{}');
    v_k      TEXT;
    v_v      JSONB;
    v_effect TEXT;
    v_dflt   JSONB;
    v_q      queen.queues%ROWTYPE;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    IF p_mode IS NOT NULL AND p_mode NOT IN ('merge', 'replace') THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'mode must be merge or replace';
    END IF;
    IF p_namespace <> '' THEN
        PERFORM queen._log_require_name_v1(p_namespace, 'log_bad_request', 'namespace');
    END IF;
    IF p_task <> '' THEN
        PERFORM queen._log_require_name_v1(p_task, 'log_bad_request', 'task');
    END IF;
    IF jsonb_typeof(v_opts) <> 'object' THEN
        RAISE EXCEPTION 'log_bad_options' USING ERRCODE = '22023',
            DETAIL = 'options must be an object';
    END IF;
    FOR v_k, v_v IN SELECT key, value FROM jsonb_each(v_opts) ORDER BY key LOOP
        PERFORM queen._log_queue_option_check_v1(v_k, v_v);
    END LOOP;

    -- The row, created with configure's defaults or locked as it is, so a
    -- concurrent configure merges onto this one's result, not onto what it
    -- read before. A row being inserted by another transaction makes the
    -- INSERT wait for it; one deleted between the two statements sends us
    -- round again. FOR NO KEY UPDATE, the lock the UPDATE below takes anyway:
    -- it leaves the FOR KEY SHARE of a push creating a partition (its foreign
    -- key check) free to proceed.
    IF NOT EXISTS (SELECT 1 FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue) THEN
        -- A new queue counts against the tenant's limit (log_schema.sql); reconfiguring
        -- an existing one never does.
        PERFORM queen._log_tenant_room_v1(p_tenant, 1, 0);
    END IF;
    LOOP
        INSERT INTO queen.queues (tenant_id, name, lease_time) VALUES (p_tenant, p_queue, 300)
        ON CONFLICT (tenant_id, name) DO NOTHING
        RETURNING * INTO v_q;
        EXIT WHEN FOUND;
        SELECT * INTO v_q FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue FOR NO KEY UPDATE;
        EXIT WHEN FOUND;
    END LOOP;

    -- Apply each option (all known: checked above). replace = every name not
    -- given is given as null, i.e. back to its default.
    FOR v_k, v_v, v_effect, v_dflt IN
        SELECT e.key, e.value, s.effect, s.dflt
        FROM jsonb_each(CASE WHEN p_mode = 'replace'
                             THEN (SELECT jsonb_object_agg(s2.name, 'null'::jsonb)
                                   FROM queen._log_queue_option_specs_v1() s2) || v_opts
                             ELSE v_opts END) e
        JOIN queen._log_queue_option_specs_v1() s ON s.name = e.key
    LOOP
        IF v_effect IN ('stored', 'acted') THEN
            v_q.stored_options := CASE WHEN jsonb_typeof(v_v) = 'null' THEN v_q.stored_options - v_k
                                       ELSE v_q.stored_options || jsonb_build_object(v_k, v_v) END;
        END IF;
        IF jsonb_typeof(v_v) = 'null' THEN
            v_v := v_dflt;
        END IF;
        CASE v_k
            WHEN 'leaseTime' THEN v_q.lease_time := v_v::integer;
            WHEN 'retryLimit' THEN v_q.retry_limit := v_v::integer;
            WHEN 'dedupWindowSeconds' THEN v_q.dedup_window_seconds := v_v::integer;
            WHEN 'retentionSeconds' THEN v_q.retention_seconds := v_v::integer;
            WHEN 'completedRetentionSeconds' THEN v_q.completed_retention_seconds := v_v::integer;
            WHEN 'namespace' THEN v_q.namespace := NULLIF(v_v #>> '{}', '');
            WHEN 'task' THEN v_q.task := NULLIF(v_v #>> '{}', '');
            ELSE NULL;
        END CASE;
    END LOOP;
    -- The top-level labels, unless the options name them.
    IF p_namespace <> '' AND NOT v_opts ? 'namespace' THEN
        v_q.namespace := p_namespace;
    END IF;
    IF p_task <> '' AND NOT v_opts ? 'task' THEN
        v_q.task := p_task;
    END IF;

    UPDATE queen.queues
    SET lease_time = v_q.lease_time, retry_limit = v_q.retry_limit,
        dedup_window_seconds = v_q.dedup_window_seconds, retention_seconds = v_q.retention_seconds,
        completed_retention_seconds = v_q.completed_retention_seconds,
        stored_options = v_q.stored_options, namespace = v_q.namespace, task = v_q.task,
        updated_at = now()
    WHERE id = v_q.id
    RETURNING * INTO v_q;

    RETURN jsonb_build_object(
        'configured', true, 'queue', v_q.name, 'queueId', v_q.id,
        'namespace', v_q.namespace, 'task', v_q.task,
        'options', queen._log_queue_options_v1(v_q),
        'storedOnly', (SELECT jsonb_agg(s.name ORDER BY s.ord) FROM queen._log_queue_option_specs_v1() s
                       WHERE s.effect = 'stored'));
END
$$;

-- _log_partition_mode_counts_v1(partition) -> (total, pending, processing):
-- the partition's messages counted for the queue-mode group
-- '__QUEUE_MODE__': total = stored messages; processing = messages in a live
-- lease's batch; pending = the rest above the cursor. One place for the rule
-- every per-queue and per-partition count shows (log_queues_v1, log_resources.sql).
CREATE OR REPLACE FUNCTION queen._log_partition_mode_counts_v1(p_partition_id UUID, OUT total BIGINT,
                                                               OUT pending BIGINT, OUT processing BIGINT)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT count(*),
           count(*) FILTER (WHERE m.msg_offset > COALESCE(c.committed_offset, 0)
                              AND NOT COALESCE(c.lease_expires_at > now() AND m.msg_offset <= c.batch_end, false)),
           count(*) FILTER (WHERE m.msg_offset > COALESCE(c.committed_offset, 0)
                              AND COALESCE(c.lease_expires_at > now() AND m.msg_offset <= c.batch_end, false))
    FROM queen.log_messages m
    LEFT JOIN queen.log_consumers c ON c.partition_id = p_partition_id AND c.consumer_group = '__QUEUE_MODE__'
    WHERE m.partition_id = p_partition_id
$$;

-- log_queues_v1(tenant) -> {queues: [{name, namespace, task, partitions,
-- messages: {total, pending, processing}}]} in byte order of name
-- (namespace, task: the labels, null when none). Counts for the queue-mode
-- group (_log_partition_mode_counts_v1). Reads only.
-- Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.log_queues_v1(p_tenant UUID)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    RETURN jsonb_build_object('queues', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'name', s.name, 'namespace', s.namespace, 'task', s.task, 'partitions', s.partitions,
                   'messages', jsonb_build_object('total', s.total, 'pending', s.pending,
                                                  'processing', s.processing))
               ORDER BY s.name)
        FROM (SELECT q.name, q.namespace, q.task,
                     count(p.id) AS partitions,
                     COALESCE(sum(pm.total), 0) AS total,
                     COALESCE(sum(pm.pending), 0) AS pending,
                     COALESCE(sum(pm.processing), 0) AS processing
              FROM queen.queues q
              LEFT JOIN queen.log_partitions p ON p.queue_id = q.id
              LEFT JOIN LATERAL queen._log_partition_mode_counts_v1(p.id) AS pm ON true
              WHERE q.tenant_id = p_tenant
              GROUP BY q.id, q.name) AS s), '[]'));
END
$$;

-- log_queue_delete_v1(tenant, queue) -> {deleted: true, queue, existed}.
-- Deletes the queue and, by cascade, its partitions, messages, cursors and
-- dead letters; waits for in-flight pushes/acks on it. Raises 22023
-- log_bad_tenant, log_bad_queue.
CREATE OR REPLACE FUNCTION queen.log_queue_delete_v1(p_tenant UUID, p_queue TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_n    INTEGER;
    v_subs BIGINT[];
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_queue, 'log_bad_queue', 'queue');
    -- The queue row first: its lock waits out the pushes still creating a
    -- partition in it (their key-share), so the count below is every
    -- partition the cascade deletes (log_schema.sql's per-tenant count).
    PERFORM 1 FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue FOR UPDATE;
    SELECT array_agg(s.id) INTO v_subs
    FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
    WHERE q.tenant_id = p_tenant AND q.name = p_queue;
    PERFORM queen._log_partition_count_add_v1(p_tenant, -(
        SELECT count(*) FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
        WHERE q.tenant_id = p_tenant AND q.name = p_queue));
    DELETE FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- The ready rows of its subscriptions (no foreign key: log_schema.sql), after the
    -- cascade has waited out the pushes that could still insert one.
    DELETE FROM queen.log_ready WHERE subscription_id = ANY (v_subs);
    RETURN jsonb_build_object('deleted', true, 'queue', p_queue, 'existed', v_n > 0);
END
$$;

