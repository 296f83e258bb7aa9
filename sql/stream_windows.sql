-- stream_windows.sql: stream windows, the older window API of the
-- reference broker (/api/v1/stream/*): a stream is defined by name over
-- source queues; it is cut into tumbling time windows of its messages'
-- created_at, per key (a partition name, or '__GLOBAL__' for a stream that is
-- not partitioned); each (stream, consumer group, key) is handed out one
-- window at a time under a lease and advances when the window is acked.
--
-- Owns: the tables queen.stream_windows and queen.stream_window_cursors,
--       queen._stream_window_ms_v1, queen._stream_window_find_v1,
--       queen._stream_window_align_v1, queen._stream_window_id_v1,
--       queen._stream_window_lease_v1,
--       queen.stream_window_define_v1, queen.stream_window_poll_v1,
--       queen.stream_window_ack_v1, queen.stream_window_renew_v1,
--       queen.stream_window_seek_v1, queen._stream_window_json_v1,
--       queen.stream_window_list_v1, queen.stream_window_stats_v1,
--       queen.stream_window_get_v1, queen.stream_window_consumers_v1,
--       queen.stream_window_delete_v1.
-- May call: log_schema.sql (helpers; reads queen.queues, queen.log_partitions,
-- queen.log_messages, never writes them).
--
-- The rules:
--   A window is [start, start + duration) with start a multiple of the
--   duration since the epoch. A key's next window is the one holding its
--   first message at or after the end of the last window its group acked
--   (the first message ever, before any ack): empty windows are skipped.
--   It is ready when the stream's watermark is at or past its end plus the
--   grace period. The watermark is the newest push time of each source
--   queue (its partitions' last_push_at), the oldest of those over the
--   source queues that have a partition: a late queue holds the stream back.
--   One live lease per (stream, group, key) at a time, on its next window:
--   the cursor row's lock (FOR UPDATE SKIP LOCKED, the lease re-checked
--   under it) makes the claim, so two polls never hold one window; a lease
--   past its expiry is free again.
--   An ack with success moves the cursor past the window; without, or an
--   expired lease, hands the same window out again.
--
-- Messages are read by partition (the log's key) and filtered by
-- created_at: there is no index on created_at, so a poll reads each
-- candidate key's partitions; fine for the windows this API is used for,
-- not for partitions of millions of messages.
--
-- Lock order (log_schema.sql): queen.stream_windows (define, seek: the
-- row) -> queen.stream_window_cursors (ascending key within a call). Nothing
-- of the log is locked; the log's rows are only read.
--
-- Errors (the engine maps them, src/engine/error.c):
--   22023 stream_window_bad_* , log_bad_group, streams_window_not_found -> 400
--   55000 streams_window_lease_lost -> 409 (the lease is unknown, expired,
--         or holds another window)
-- Every RAISE names an opaque code; names and values go in DETAIL only.
--
-- Re-applied at every boot: CREATE ... IF NOT EXISTS and CREATE OR REPLACE.

CREATE TABLE IF NOT EXISTS queen.stream_windows (
    id            UUID NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    tenant_id     UUID NOT NULL,
    name          TEXT COLLATE "C" NOT NULL,
    namespace     TEXT COLLATE "C" NOT NULL DEFAULT '',
    source_queues TEXT[] COLLATE "C" NOT NULL,
    partitioned   BOOLEAN NOT NULL DEFAULT false,
    window_type   TEXT NOT NULL DEFAULT 'tumbling',
    duration_ms   BIGINT NOT NULL CHECK (duration_ms >= 1),
    grace_ms      BIGINT NOT NULL CHECK (grace_ms >= 0),
    lease_ms      BIGINT NOT NULL CHECK (lease_ms >= 1),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

-- One row per (stream, group, key), made by the first poll that sees the
-- key. last_end: the end of the last window acked (NULL: none yet);
-- lease_*: the window handed out now, and until when.
CREATE TABLE IF NOT EXISTS queen.stream_window_cursors (
    stream_id        UUID NOT NULL REFERENCES queen.stream_windows (id) ON DELETE CASCADE,
    consumer_group   TEXT COLLATE "C" NOT NULL,
    key              TEXT COLLATE "C" NOT NULL,
    last_end         TIMESTAMPTZ,
    lease_id         UUID,
    lease_start      TIMESTAMPTZ,
    lease_end        TIMESTAMPTZ,
    lease_expires_at TIMESTAMPTZ,
    windows_consumed BIGINT NOT NULL DEFAULT 0,
    last_consumed_at TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (stream_id, consumer_group, key)
);
-- ack and renew find a window by its lease id alone.
SELECT queen._schema_create_index_v1('idx_stream_window_cursors_lease',
    'CREATE INDEX idx_stream_window_cursors_lease ON queen.stream_window_cursors (lease_id) WHERE lease_id IS NOT NULL');

-- _stream_window_ms_v1(p, field, default, min) -> the field of p as a whole
-- number of milliseconds in [min, 1 year], or default when absent or null.
-- Raises 22023 streams_window_bad_config.
CREATE OR REPLACE FUNCTION queen._stream_window_ms_v1(p JSONB, p_field TEXT, p_default BIGINT, p_min BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v NUMERIC;
BEGIN
    IF jsonb_typeof(p -> p_field) IS NULL OR jsonb_typeof(p -> p_field) = 'null' THEN
        RETURN p_default;
    END IF;
    IF jsonb_typeof(p -> p_field) = 'number' THEN
        v := (p ->> p_field)::numeric;
    END IF;
    IF v IS NULL OR v <> trunc(v) OR v < p_min OR v > 31536000000 THEN
        RAISE EXCEPTION 'streams_window_bad_config' USING ERRCODE = '22023',
            DETAIL = format('%s must be a whole number of milliseconds from %s to 31536000000', p_field, p_min);
    END IF;
    RETURN v::bigint;
END
$$;

-- _stream_window_align_v1(t, duration_ms) -> the start of the window
-- holding t: the multiple of the duration since the epoch at or before it.
CREATE OR REPLACE FUNCTION queen._stream_window_align_v1(p_t TIMESTAMPTZ, p_ms BIGINT)
RETURNS TIMESTAMPTZ
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT to_timestamp((floor(floor(extract(epoch FROM p_t) * 1000) / p_ms) * p_ms) / 1000.0)
$$;

-- _stream_window_id_v1(stream, key, start, end) -> the window's id: opaque
-- text, the same for the same window at every delivery.
CREATE OR REPLACE FUNCTION queen._stream_window_id_v1(p_stream UUID, p_key TEXT, p_start TIMESTAMPTZ, p_end TIMESTAMPTZ)
RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT format('%s:%s:%s:%s', p_stream, floor(extract(epoch FROM p_start) * 1000)::bigint,
                  floor(extract(epoch FROM p_end) * 1000)::bigint, p_key)
$$;

-- _stream_window_find_v1(tenant, p) -> the stream named by p.streamName
-- and p.consumerGroup checked. Raises 22023 streams_window_bad_request,
-- streams_window_bad_name, log_bad_group, streams_window_not_found.
CREATE OR REPLACE FUNCTION queen._stream_window_find_v1(p_tenant UUID, p JSONB)
RETURNS queen.stream_windows
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_s queen.stream_windows%ROWTYPE;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'streams_window_bad_request' USING ERRCODE = '22023', DETAIL = 'the body must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'streamName') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(p ->> 'streamName') THEN
        RAISE EXCEPTION 'streams_window_bad_name' USING ERRCODE = '22023',
            DETAIL = 'streamName is required: a string of 1..255 bytes without control characters';
    END IF;
    IF jsonb_typeof(p -> 'consumerGroup') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(p ->> 'consumerGroup') THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
            DETAIL = 'consumerGroup is required: a string of 1..255 bytes without control characters';
    END IF;
    SELECT * INTO v_s FROM queen.stream_windows WHERE tenant_id = p_tenant AND name = p ->> 'streamName';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'streams_window_not_found' USING ERRCODE = '22023',
            DETAIL = format('no stream named %s: define it first (POST /api/v1/stream/define)', p ->> 'streamName');
    END IF;
    RETURN v_s;
END
$$;

-- stream_window_define_v1(tenant, p) -> {success, streamId, name, created}.
-- p: {name, namespace?, source_queue_names: [queue, ...] (1..64),
-- partitioned? = false, window_type? = 'tumbling' (the only one),
-- window_duration_ms? = 60000, window_grace_period_ms? = 30000,
-- window_lease_timeout_ms? = 30000}. A name defined again takes the new
-- definition; its groups keep their place. The queues need not exist yet.
-- Raises 22023: log_bad_tenant, streams_window_bad_request,
-- streams_window_bad_name, streams_window_bad_sources,
-- streams_window_bad_config.
CREATE OR REPLACE FUNCTION queen.stream_window_define_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_ns      TEXT := '';
    v_src     TEXT[];
    v_part    BOOLEAN := false;
    v_dur     BIGINT;
    v_grace   BIGINT;
    v_lease   BIGINT;
    v_id      UUID;
    v_created BOOLEAN;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'streams_window_bad_request' USING ERRCODE = '22023', DETAIL = 'the body must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'name') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(p ->> 'name') THEN
        RAISE EXCEPTION 'streams_window_bad_name' USING ERRCODE = '22023',
            DETAIL = 'name is required: a string of 1..255 bytes without control characters';
    END IF;
    IF jsonb_typeof(p -> 'namespace') = 'string' THEN
        IF octet_length(p ->> 'namespace') > 255 THEN
            RAISE EXCEPTION 'streams_window_bad_config' USING ERRCODE = '22023',
                DETAIL = 'namespace must be a string of at most 255 bytes';
        END IF;
        v_ns := p ->> 'namespace';
    ELSIF jsonb_typeof(p -> 'namespace') IS DISTINCT FROM 'null' AND p ? 'namespace' THEN
        RAISE EXCEPTION 'streams_window_bad_config' USING ERRCODE = '22023', DETAIL = 'namespace must be a string';
    END IF;
    IF jsonb_typeof(p -> 'source_queue_names') IS DISTINCT FROM 'array'
       OR jsonb_array_length(p -> 'source_queue_names') NOT BETWEEN 1 AND 64
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p -> 'source_queue_names') AS e
                  WHERE jsonb_typeof(e) <> 'string' OR NOT queen.log_name_ok_v1(e #>> '{}')) THEN
        RAISE EXCEPTION 'streams_window_bad_sources' USING ERRCODE = '22023',
            DETAIL = 'source_queue_names is required: an array of 1..64 queue names';
    END IF;
    SELECT array_agg(DISTINCT e ORDER BY e) INTO v_src FROM jsonb_array_elements_text(p -> 'source_queue_names') AS e;
    IF jsonb_typeof(p -> 'partitioned') = 'boolean' THEN
        v_part := (p -> 'partitioned')::boolean;
    ELSIF jsonb_typeof(p -> 'partitioned') IS DISTINCT FROM 'null' AND p ? 'partitioned' THEN
        RAISE EXCEPTION 'streams_window_bad_config' USING ERRCODE = '22023', DETAIL = 'partitioned must be a boolean';
    END IF;
    IF p ? 'window_type' AND jsonb_typeof(p -> 'window_type') <> 'null'
       AND (p -> 'window_type') IS DISTINCT FROM '"tumbling"'::jsonb THEN
        RAISE EXCEPTION 'streams_window_bad_config' USING ERRCODE = '22023',
            DETAIL = 'window_type must be "tumbling" (the only window type)';
    END IF;
    v_dur := queen._stream_window_ms_v1(p, 'window_duration_ms', 60000, 1);
    v_grace := queen._stream_window_ms_v1(p, 'window_grace_period_ms', 30000, 0);
    v_lease := queen._stream_window_ms_v1(p, 'window_lease_timeout_ms', 30000, 1);

    INSERT INTO queen.stream_windows AS s (tenant_id, name, namespace, source_queues, partitioned, duration_ms,
                                           grace_ms, lease_ms)
    VALUES (p_tenant, p ->> 'name', v_ns, v_src, v_part, v_dur, v_grace, v_lease)
    ON CONFLICT (tenant_id, name) DO UPDATE
    SET namespace = EXCLUDED.namespace, source_queues = EXCLUDED.source_queues, partitioned = EXCLUDED.partitioned,
        duration_ms = EXCLUDED.duration_ms, grace_ms = EXCLUDED.grace_ms, lease_ms = EXCLUDED.lease_ms,
        updated_at = now()
    RETURNING s.id, (s.xmax = 0) INTO v_id, v_created;
    RETURN jsonb_build_object('success', true, 'streamId', v_id, 'name', p ->> 'name', 'created', v_created);
END
$$;

-- stream_window_poll_v1(tenant, p) -> {window: {id, leaseId, key, start,
-- end, leaseExpiresAt, messages: [{id, transactionId, queue, partition,
-- payload, created_at}]}} or {window: null} when no window is ready and
-- free. p: {streamName, consumerGroup, timeout?}: the wait is the caller's
-- (the route re-polls on pushes until timeout). Keys are tried by how far
-- behind they are (the oldest acked end first), then by key.
-- Raises 22023: log_bad_tenant, streams_window_bad_request,
-- streams_window_bad_name, log_bad_group, streams_window_not_found.
CREATE OR REPLACE FUNCTION queen.stream_window_poll_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_s     queen.stream_windows%ROWTYPE;
    v_grp   TEXT;
    v_wm    TIMESTAMPTZ;
    v_parts UUID[];
    v_c     RECORD;
    v_first TIMESTAMPTZ;
    v_start TIMESTAMPTZ;
    v_end   TIMESTAMPTZ;
    v_lease UUID;
    v_exp   TIMESTAMPTZ;
    v_msgs  JSONB;
BEGIN
    v_s := queen._stream_window_find_v1(p_tenant, p);
    v_grp := p ->> 'consumerGroup';

    -- The watermark: no source partition yet, nothing is ready.
    SELECT min(newest) INTO v_wm
    FROM (SELECT max(lp.last_push_at) AS newest
          FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
          WHERE q.tenant_id = p_tenant AND q.name = ANY (v_s.source_queues)
          GROUP BY q.id) w;
    IF v_wm IS NULL THEN
        RETURN jsonb_build_object('window', NULL);
    END IF;

    -- A cursor for every key seen for the first time.
    INSERT INTO queen.stream_window_cursors (stream_id, consumer_group, key)
    SELECT DISTINCT v_s.id, v_grp, CASE WHEN v_s.partitioned THEN lp.name ELSE '__GLOBAL__' END
    FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
    WHERE q.tenant_id = p_tenant AND q.name = ANY (v_s.source_queues)
    ORDER BY 3
    ON CONFLICT DO NOTHING;

    -- The free keys are read without a lock, and only the one whose window
    -- is ready is claimed (below): concurrent polls of a group then take
    -- different keys instead of skipping every key another poll looked at.
    FOR v_c IN
        SELECT c.key, c.last_end FROM queen.stream_window_cursors c
        WHERE c.stream_id = v_s.id AND c.consumer_group = v_grp
          AND (c.lease_id IS NULL OR c.lease_expires_at <= clock_timestamp())
        ORDER BY c.last_end NULLS FIRST, c.key
    LOOP
        SELECT array_agg(lp.id) INTO v_parts
        FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
        WHERE q.tenant_id = p_tenant AND q.name = ANY (v_s.source_queues)
          AND (NOT v_s.partitioned OR lp.name = v_c.key);
        SELECT min(m.created_at) INTO v_first
        FROM queen.log_messages m
        WHERE m.partition_id = ANY (v_parts) AND (v_c.last_end IS NULL OR m.created_at >= v_c.last_end);
        CONTINUE WHEN v_first IS NULL;
        v_start := queen._stream_window_align_v1(v_first, v_s.duration_ms);
        v_end := v_start + make_interval(secs => v_s.duration_ms / 1000.0);
        CONTINUE WHEN v_end + make_interval(secs => v_s.grace_ms / 1000.0) > v_wm;
        -- The claim: still free and where it was read (a poll or an ack that
        -- committed since is seen here, on the row's newest version); one
        -- another poll is claiming now is skipped, not waited for.
        PERFORM 1 FROM queen.stream_window_cursors c
        WHERE c.stream_id = v_s.id AND c.consumer_group = v_grp AND c.key = v_c.key
          AND (c.lease_id IS NULL OR c.lease_expires_at <= clock_timestamp())
          AND c.last_end IS NOT DISTINCT FROM v_c.last_end
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;

        v_lease := gen_random_uuid();
        v_exp := clock_timestamp() + make_interval(secs => v_s.lease_ms / 1000.0);
        UPDATE queen.stream_window_cursors
        SET lease_id = v_lease, lease_start = v_start, lease_end = v_end, lease_expires_at = v_exp
        WHERE stream_id = v_s.id AND consumer_group = v_grp AND key = v_c.key;

        -- A redefined duration can leave last_end inside a window: what is
        -- before it was acked already.
        SELECT COALESCE(jsonb_agg(jsonb_build_object('id', m.id, 'transactionId', m.transaction_id,
                                                     'queue', q.name, 'partition', lp.name,
                                                     'payload', m.payload, 'created_at', queen.log_iso_v1(m.created_at))
                                  ORDER BY m.created_at, q.name, lp.name, m.msg_offset), '[]')
        INTO v_msgs
        FROM queen.log_messages m
        JOIN queen.log_partitions lp ON lp.id = m.partition_id
        JOIN queen.queues q ON q.id = lp.queue_id
        WHERE m.partition_id = ANY (v_parts) AND m.created_at >= v_start AND m.created_at < v_end
          AND (v_c.last_end IS NULL OR m.created_at >= v_c.last_end);

        RETURN jsonb_build_object('window', jsonb_build_object(
            'id', queen._stream_window_id_v1(v_s.id, v_c.key, v_start, v_end),
            'leaseId', v_lease, 'key', v_c.key,
            'start', queen.log_iso_v1(v_start), 'end', queen.log_iso_v1(v_end),
            'leaseExpiresAt', queen.log_iso_v1(v_exp), 'messages', v_msgs));
    END LOOP;
    RETURN jsonb_build_object('window', NULL);
END
$$;

-- _stream_window_lease_v1(tenant, p) -> the cursor holding the live lease
-- p.leaseId, locked. Raises 22023 streams_window_bad_request,
-- streams_window_bad_lease; 55000 streams_window_lease_lost when no live lease
-- of this tenant has that id.
CREATE OR REPLACE FUNCTION queen._stream_window_lease_v1(p_tenant UUID, p JSONB)
RETURNS queen.stream_window_cursors
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_c queen.stream_window_cursors%ROWTYPE;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'streams_window_bad_request' USING ERRCODE = '22023', DETAIL = 'the body must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'leaseId') IS DISTINCT FROM 'string' OR NOT queen.log_uuid_ok_v1(p ->> 'leaseId') THEN
        RAISE EXCEPTION 'streams_window_bad_lease' USING ERRCODE = '22023', DETAIL = 'leaseId must be a uuid string';
    END IF;
    SELECT c.* INTO v_c
    FROM queen.stream_window_cursors c JOIN queen.stream_windows s ON s.id = c.stream_id
    WHERE c.lease_id = (p ->> 'leaseId')::uuid AND s.tenant_id = p_tenant
    FOR UPDATE OF c;
    IF NOT FOUND OR v_c.lease_expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION 'streams_window_lease_lost' USING ERRCODE = '55000',
            DETAIL = format('lease %s holds no window now: it expired (the window is handed out again), was '
                            'acked, or never existed', p ->> 'leaseId');
    END IF;
    RETURN v_c;
END
$$;

-- stream_window_ack_v1(tenant, p) -> {success: true, windowId, acked}.
-- p: {windowId?, leaseId, success? = true}. success true moves the group's
-- cursor of the key past the window; false releases the lease, and the same
-- window is handed out again. Either ends the lease.
-- Raises 22023: log_bad_tenant, streams_window_bad_request,
-- streams_window_bad_lease, streams_window_bad_window_id,
-- streams_window_bad_success; 55000 streams_window_lease_lost (also when
-- windowId names another window than the lease holds).
CREATE OR REPLACE FUNCTION queen.stream_window_ack_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_ok  BOOLEAN := true;
    v_c   queen.stream_window_cursors%ROWTYPE;
    v_wid TEXT;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) = 'object' THEN
        IF jsonb_typeof(p -> 'success') = 'boolean' THEN
            v_ok := (p -> 'success')::boolean;
        ELSIF jsonb_typeof(p -> 'success') IS DISTINCT FROM 'null' AND p ? 'success' THEN
            RAISE EXCEPTION 'streams_window_bad_success' USING ERRCODE = '22023', DETAIL = 'success must be a boolean';
        END IF;
        IF jsonb_typeof(p -> 'windowId') NOT IN ('string', 'null') THEN
            RAISE EXCEPTION 'streams_window_bad_window_id' USING ERRCODE = '22023',
                DETAIL = 'windowId must be the id of the window polled';
        END IF;
    END IF;
    v_c := queen._stream_window_lease_v1(p_tenant, p);
    v_wid := queen._stream_window_id_v1(v_c.stream_id, v_c.key, v_c.lease_start, v_c.lease_end);
    IF jsonb_typeof(p -> 'windowId') = 'string' AND p ->> 'windowId' <> v_wid THEN
        RAISE EXCEPTION 'streams_window_lease_lost' USING ERRCODE = '55000',
            DETAIL = format('lease %s holds window %s, not %s', p ->> 'leaseId', v_wid, p ->> 'windowId');
    END IF;
    UPDATE queen.stream_window_cursors
    SET last_end = CASE WHEN v_ok THEN v_c.lease_end ELSE last_end END,
        windows_consumed = windows_consumed + CASE WHEN v_ok THEN 1 ELSE 0 END,
        last_consumed_at = CASE WHEN v_ok THEN now() ELSE last_consumed_at END,
        lease_id = NULL, lease_start = NULL, lease_end = NULL, lease_expires_at = NULL
    WHERE stream_id = v_c.stream_id AND consumer_group = v_c.consumer_group AND key = v_c.key;
    RETURN jsonb_build_object('success', true, 'windowId', v_wid, 'acked', v_ok);
END
$$;

-- stream_window_renew_v1(tenant, p) -> {success: true, leaseId,
-- leaseExpiresAt}. p: {leaseId, extend_ms? (default: the stream's lease
-- timeout)}: the live lease then expires extend_ms from now.
-- Raises 22023: log_bad_tenant, streams_window_bad_request,
-- streams_window_bad_lease, streams_window_bad_config (extend_ms); 55000
-- streams_window_lease_lost.
CREATE OR REPLACE FUNCTION queen.stream_window_renew_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_ms  BIGINT;
    v_c   queen.stream_window_cursors%ROWTYPE;
    v_exp TIMESTAMPTZ;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) = 'object' THEN
        v_ms := queen._stream_window_ms_v1(p, 'extend_ms', NULL, 1);
    END IF;
    v_c := queen._stream_window_lease_v1(p_tenant, p);
    IF v_ms IS NULL THEN
        SELECT lease_ms INTO v_ms FROM queen.stream_windows WHERE id = v_c.stream_id;
    END IF;
    v_exp := clock_timestamp() + make_interval(secs => v_ms / 1000.0);
    UPDATE queen.stream_window_cursors SET lease_expires_at = v_exp
    WHERE stream_id = v_c.stream_id AND consumer_group = v_c.consumer_group AND key = v_c.key;
    RETURN jsonb_build_object('success', true, 'leaseId', v_c.lease_id, 'leaseExpiresAt', queen.log_iso_v1(v_exp));
END
$$;

-- stream_window_seek_v1(tenant, p) -> {success: true, streamName,
-- consumerGroup, timestamp, keys}. p: {streamName, consumerGroup,
-- timestamp (ISO 8601)}: every key of the group, and every key the stream
-- has now, starts again at the window holding timestamp (timestamp in the
-- answer: that window's start); leases of the group end (their acks are
-- refused). keys: how many cursors were set.
-- Raises 22023: log_bad_tenant, streams_window_bad_request,
-- streams_window_bad_name, log_bad_group, streams_window_not_found,
-- streams_window_bad_timestamp.
CREATE OR REPLACE FUNCTION queen.stream_window_seek_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_s  queen.stream_windows%ROWTYPE;
    v_ts TIMESTAMPTZ;
    v_n  BIGINT;
BEGIN
    v_s := queen._stream_window_find_v1(p_tenant, p);
    IF jsonb_typeof(p -> 'timestamp') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'streams_window_bad_timestamp' USING ERRCODE = '22023',
            DETAIL = 'timestamp is required: an ISO 8601 time';
    END IF;
    BEGIN
        v_ts := (p ->> 'timestamp')::timestamptz;
    EXCEPTION WHEN OTHERS THEN
        v_ts := NULL;
    END;
    IF v_ts IS NULL OR NOT isfinite(v_ts) THEN
        RAISE EXCEPTION 'streams_window_bad_timestamp' USING ERRCODE = '22023',
            DETAIL = 'timestamp must be an ISO 8601 time';
    END IF;
    v_ts := queen._stream_window_align_v1(v_ts, v_s.duration_ms);
    -- The stream's row first (the lock order), so two seeks of one stream
    -- take the cursors one after the other.
    PERFORM 1 FROM queen.stream_windows WHERE id = v_s.id FOR UPDATE;
    WITH k AS (
        SELECT key FROM queen.stream_window_cursors WHERE stream_id = v_s.id AND consumer_group = p ->> 'consumerGroup'
        UNION
        SELECT CASE WHEN v_s.partitioned THEN lp.name ELSE '__GLOBAL__' END
        FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
        WHERE q.tenant_id = p_tenant AND q.name = ANY (v_s.source_queues)
    ), up AS (
        INSERT INTO queen.stream_window_cursors AS c (stream_id, consumer_group, key, last_end)
        SELECT v_s.id, p ->> 'consumerGroup', k.key, v_ts FROM k ORDER BY k.key
        ON CONFLICT (stream_id, consumer_group, key) DO UPDATE
        SET last_end = EXCLUDED.last_end, windows_consumed = 0, lease_id = NULL, lease_start = NULL,
            lease_end = NULL, lease_expires_at = NULL
        RETURNING 1
    )
    SELECT count(*) INTO v_n FROM up;
    RETURN jsonb_build_object('success', true, 'streamName', v_s.name, 'consumerGroup', p ->> 'consumerGroup',
                              'timestamp', queen.log_iso_v1(v_ts), 'keys', v_n);
END
$$;

-- ---- Reads and delete (the /api/v1/resources/streams routes) -------------

-- _stream_window_json_v1(stream) -> the stream as the resource routes show
-- it, without the counts.
CREATE OR REPLACE FUNCTION queen._stream_window_json_v1(s queen.stream_windows)
RETURNS JSONB
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object('id', s.id, 'name', s.name, 'namespace', s.namespace, 'partitioned', s.partitioned,
                              'windowType', s.window_type, 'windowDurationMs', s.duration_ms,
                              'windowGracePeriodMs', s.grace_ms, 'windowLeaseTimeoutMs', s.lease_ms,
                              'sourceQueues', to_jsonb(s.source_queues),
                              'createdAt', queen.log_iso_v1(s.created_at), 'updatedAt', queen.log_iso_v1(s.updated_at))
$$;

-- stream_window_list_v1(tenant) -> {streams: [stream + {activeLeases,
-- consumerGroups}]} by name. Reads only. Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.stream_window_list_v1(p_tenant UUID)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    RETURN jsonb_build_object('streams', COALESCE((
        SELECT jsonb_agg(queen._stream_window_json_v1(s) || jsonb_build_object(
                   'activeLeases', (SELECT count(*) FROM queen.stream_window_cursors c
                                    WHERE c.stream_id = s.id AND c.lease_expires_at > clock_timestamp()),
                   'consumerGroups', (SELECT count(DISTINCT c.consumer_group) FROM queen.stream_window_cursors c
                                      WHERE c.stream_id = s.id)) ORDER BY s.name)
        FROM queen.stream_windows s WHERE s.tenant_id = p_tenant), '[]'));
END
$$;

-- stream_window_stats_v1(tenant) -> {totalStreams, activeLeases}. Reads
-- only. Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.stream_window_stats_v1(p_tenant UUID)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    RETURN jsonb_build_object(
        'totalStreams', (SELECT count(*) FROM queen.stream_windows WHERE tenant_id = p_tenant),
        'activeLeases', (SELECT count(*) FROM queen.stream_window_cursors c JOIN queen.stream_windows s
                         ON s.id = c.stream_id
                         WHERE s.tenant_id = p_tenant AND c.lease_expires_at > clock_timestamp()));
END
$$;

-- stream_window_get_v1(tenant, name) -> the stream, or JSON null when the
-- tenant has none of that name (the route answers 404). Reads only.
-- Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.stream_window_get_v1(p_tenant UUID, p_name TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    RETURN COALESCE((SELECT queen._stream_window_json_v1(s) FROM queen.stream_windows s
                     WHERE s.tenant_id = p_tenant AND s.name = p_name), 'null');
END
$$;

-- stream_window_consumers_v1(tenant, name) -> {consumers: [{consumerGroup,
-- streamKey, lastAckedWindowEnd, totalWindowsConsumed, lastConsumedAt,
-- leaseExpiresAt}]} by group and key, or JSON null (no such stream).
-- Reads only. Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.stream_window_consumers_v1(p_tenant UUID, p_name TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_id UUID;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    SELECT id INTO v_id FROM queen.stream_windows WHERE tenant_id = p_tenant AND name = p_name;
    IF NOT FOUND THEN
        RETURN 'null';
    END IF;
    RETURN jsonb_build_object('consumers', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'consumerGroup', c.consumer_group, 'streamKey', c.key,
                   'lastAckedWindowEnd', queen.log_iso_v1(c.last_end), 'totalWindowsConsumed', c.windows_consumed,
                   'lastConsumedAt', queen.log_iso_v1(c.last_consumed_at),
                   'leaseExpiresAt', CASE WHEN c.lease_expires_at > clock_timestamp()
                                          THEN queen.log_iso_v1(c.lease_expires_at) END)
               ORDER BY c.consumer_group, c.key)
        FROM queen.stream_window_cursors c WHERE c.stream_id = v_id), '[]'));
END
$$;

-- stream_window_delete_v1(tenant, name) -> {success: true, name}, or JSON
-- null (no such stream). The groups' places and leases go with it.
-- Raises 22023 log_bad_tenant.
CREATE OR REPLACE FUNCTION queen.stream_window_delete_v1(p_tenant UUID, p_name TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    DELETE FROM queen.stream_windows WHERE tenant_id = p_tenant AND name = p_name;
    IF NOT FOUND THEN
        RETURN 'null';
    END IF;
    RETURN jsonb_build_object('success', true, 'name', p_name);
END
$$;
