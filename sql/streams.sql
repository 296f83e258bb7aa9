-- streams.sql: streams, stateful processing whose state, output and input
-- advance commit in one transaction. A query is registered by name with the
-- hash of its pipeline; its operator state lives per (tenant, query, source
-- partition, key); one cycle applies state upserts/deletes, pushes the sink
-- messages and acks the source batch, all or nothing.
--
-- Owns: the tables queen.streams_queries and queen.streams_state,
--       queen._streams_key_ok_v1, queen._streams_check_target_v1,
--       queen.streams_register_v1,
--       queen.streams_state_get_v1, queen.streams_cycle_v1.
-- May call: log_schema.sql (helpers), log_push.sql (_log_push_check_v1, _log_push_apply_v1: the
-- sink push is the push, its rules are not restated here), log_ack.sql
-- (_log_ack_check_one_v1, _log_ack_apply_v1: the source ack is the ack).
--
-- The state needs no compare-and-set, unlike queen.kv: only the holder of
-- the source partition's lease writes a (query, partition) shard, and the
-- cycle refuses to commit when that lease is no longer held (the ack's lease
-- check). A cycle without an ack (a window flushed on a quiet partition)
-- holds no lease; the advisory lock on (tenant, query, partition) serialises
-- it against the shard's other cycles.
--
-- Lock order (log_schema.sql): advisory (tenant, query, partition) ->
-- queen.queues -> queen.log_partitions (the push, ascending) ->
-- queen.log_consumers (the ack) -> leaves (queen.streams_state rows, in
-- ascending key COLLATE "C"). The state rows come last: they are leaves of
-- the source partition (foreign key), and a cycle whose lease is gone fails
-- at the ack before it writes any of them.
--
-- State goes with its partition: the foreign key cascades, so a queue
-- delete, or the reclaim of an idle partition that holds no message (log_maintenance.sql),
-- drops the state of that partition, as it drops its cursors. log_maintenance.sql cannot
-- veto for it (LANGUAGE sql, applied before this file).
--
-- Errors (the engine maps them, src/engine/error.c):
--   22023 streams_bad_* / log_bad_* (push items, ack)  -> 400
--   22023 streams_query_not_found, streams_partition_not_source -> 400
--   55000 streams_config_mismatch  -> 409 (DETAIL: the sentence for people)
--   55000 streams_lease_lost       -> 409 (DETAIL names the ack's error)
-- Every RAISE names an opaque code; names and values go in DETAIL only.
--
-- Re-applied at every boot: CREATE ... IF NOT EXISTS and CREATE OR REPLACE.

CREATE TABLE IF NOT EXISTS queen.streams_queries (
    id           UUID NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    tenant_id    UUID NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    source_queue TEXT COLLATE "C" NOT NULL,
    sink_queue   TEXT COLLATE "C",
    config_hash  TEXT COLLATE "C" NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

-- tenant_id is in the key although query_id implies it: every read names
-- the tenant first, so a query id of another tenant finds nothing, by the
-- key alone. No index on updated_at: nothing reads by it.
CREATE TABLE IF NOT EXISTS queen.streams_state (
    tenant_id    UUID NOT NULL,
    query_id     UUID NOT NULL REFERENCES queen.streams_queries (id) ON DELETE CASCADE,
    partition_id UUID NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
    key          TEXT COLLATE "C" NOT NULL,
    value        JSONB NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, query_id, partition_id, key)
);
-- The cascades look rows up by partition and by query.
SELECT queen._schema_create_index_v1('idx_streams_state_partition',
    'CREATE INDEX idx_streams_state_partition ON queen.streams_state (partition_id)');
SELECT queen._schema_create_index_v1('idx_streams_state_query',
    'CREATE INDEX idx_streams_state_query ON queen.streams_state (query_id)');

-- _streams_key_ok_v1(key) -> true for a usable state key: a string of
-- 1..1024 bytes (windows name keys after their bounds and the partition key;
-- the reference's watermark is '__wm__'). Control characters are allowed:
-- the reference's reducers join parts with U+001F. Total, never raises.
CREATE OR REPLACE FUNCTION queen._streams_key_ok_v1(p_key TEXT)
RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$ SELECT p_key IS NOT NULL AND octet_length(p_key) BETWEEN 1 AND 1024 $$;

-- streams_register_v1(tenant, p) -> {success, query_id, name, config_hash,
-- fresh, reset}. p: {name, source_queue, sink_queue?, config_hash, reset?}.
-- A new name is inserted (fresh). The same name with the same hash resumes
-- (its state kept; source and sink updated). The same name with another hash
-- is refused, 55000 streams_config_mismatch, unless reset is true: then the
-- query's state is deleted and the new hash recorded (reset: true).
-- Raises 22023: log_bad_tenant, streams_bad_request (not an object),
-- streams_bad_name, log_bad_queue (source_queue, sink_queue),
-- streams_bad_config_hash, streams_bad_reset.
CREATE OR REPLACE FUNCTION queen.streams_register_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_name  TEXT;
    v_src   TEXT;
    v_sink  TEXT;
    v_hash  TEXT;
    v_reset BOOLEAN := false;
    v_q     queen.streams_queries%ROWTYPE;
    v_fresh BOOLEAN := false;
    v_did   BOOLEAN := false;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'streams_bad_request' USING ERRCODE = '22023', DETAIL = 'the body must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'name') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(p ->> 'name') THEN
        RAISE EXCEPTION 'streams_bad_name' USING ERRCODE = '22023',
            DETAIL = 'name is required: a string of 1..255 bytes without control characters';
    END IF;
    IF jsonb_typeof(p -> 'source_queue') IS DISTINCT FROM 'string' OR NOT queen.log_name_ok_v1(p ->> 'source_queue') THEN
        RAISE EXCEPTION 'log_bad_queue' USING ERRCODE = '22023',
            DETAIL = 'source_queue is required: a string of 1..255 bytes without control characters';
    END IF;
    IF jsonb_typeof(p -> 'sink_queue') = 'string' AND p ->> 'sink_queue' <> '' THEN
        IF NOT queen.log_name_ok_v1(p ->> 'sink_queue') THEN
            RAISE EXCEPTION 'log_bad_queue' USING ERRCODE = '22023',
                DETAIL = 'sink_queue must be a string of 1..255 bytes without control characters';
        END IF;
        v_sink := p ->> 'sink_queue';
    ELSIF jsonb_typeof(p -> 'sink_queue') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'log_bad_queue' USING ERRCODE = '22023', DETAIL = 'sink_queue must be a string';
    END IF;
    IF jsonb_typeof(p -> 'config_hash') IS DISTINCT FROM 'string'
       OR NOT octet_length(p ->> 'config_hash') BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'streams_bad_config_hash' USING ERRCODE = '22023',
            DETAIL = 'config_hash is required: a string of 1..255 bytes';
    END IF;
    IF jsonb_typeof(p -> 'reset') = 'boolean' THEN
        v_reset := (p -> 'reset')::boolean;
    ELSIF jsonb_typeof(p -> 'reset') IS DISTINCT FROM 'null' AND p ? 'reset' THEN
        RAISE EXCEPTION 'streams_bad_reset' USING ERRCODE = '22023', DETAIL = 'reset must be a boolean';
    END IF;
    v_name := p ->> 'name';
    v_src := p ->> 'source_queue';
    v_hash := p ->> 'config_hash';

    -- Two workers registering one name at once: one inserts, the other
    -- finds the row under its lock and judges the hash like any later one.
    INSERT INTO queen.streams_queries (tenant_id, name, source_queue, sink_queue, config_hash)
    VALUES (p_tenant, v_name, v_src, v_sink, v_hash)
    ON CONFLICT (tenant_id, name) DO NOTHING
    RETURNING * INTO v_q;
    IF FOUND THEN
        v_fresh := true;
    ELSE
        SELECT * INTO v_q FROM queen.streams_queries WHERE tenant_id = p_tenant AND name = v_name FOR UPDATE;
        IF v_q.config_hash <> v_hash COLLATE "C" THEN
            -- A changed pipeline would read state the old one wrote: refused
            -- unless the caller consents to losing that state.
            IF NOT v_reset THEN
                RAISE EXCEPTION 'streams_config_mismatch' USING ERRCODE = '55000',
                    DETAIL = format('config_hash mismatch: the operator chain of query ''%s'' changed since it was '
                                    'registered. Pass reset:true to delete its state, or use a new query name.', v_name);
            END IF;
            DELETE FROM queen.streams_state WHERE tenant_id = p_tenant AND query_id = v_q.id;
            v_did := true;
        END IF;
        UPDATE queen.streams_queries
        SET source_queue = v_src, sink_queue = v_sink, config_hash = v_hash, updated_at = now()
        WHERE id = v_q.id;
    END IF;
    RETURN jsonb_build_object('success', true, 'query_id', v_q.id, 'name', v_name, 'config_hash', v_hash,
                              'fresh', v_fresh, 'reset', v_did);
END
$$;

-- _streams_check_target_v1(p): the body is an object naming a query and a
-- partition by uuid; what a state read and a cycle both address.
-- Raises 22023 streams_bad_request, streams_bad_query_id, streams_bad_partition_id.
CREATE OR REPLACE FUNCTION queen._streams_check_target_v1(p JSONB)
RETURNS VOID
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'streams_bad_request' USING ERRCODE = '22023', DETAIL = 'the body must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'query_id') IS DISTINCT FROM 'string' OR NOT queen.log_uuid_ok_v1(p ->> 'query_id') THEN
        RAISE EXCEPTION 'streams_bad_query_id' USING ERRCODE = '22023', DETAIL = 'query_id must be a uuid string';
    END IF;
    IF jsonb_typeof(p -> 'partition_id') IS DISTINCT FROM 'string' OR NOT queen.log_uuid_ok_v1(p ->> 'partition_id') THEN
        RAISE EXCEPTION 'streams_bad_partition_id' USING ERRCODE = '22023',
            DETAIL = 'partition_id must be a uuid string';
    END IF;
END
$$;

-- streams_state_get_v1(tenant, p) -> {success: true, rows: [{key, value,
-- updated_at}]} in ascending key (COLLATE "C"). p: {query_id, partition_id,
-- keys?: [key] (empty or absent: every key), key_prefix?: text,
-- ripe_at_or_before?: epoch ms (only rows whose value.windowEnd is a number
-- at or below it)}; the filters combine with AND. A query or partition of
-- another tenant, or unknown, reads as no rows. Reads only.
-- Raises 22023: log_bad_tenant, streams_bad_request, streams_bad_query_id,
-- streams_bad_partition_id, streams_bad_key (keys, key_prefix),
-- streams_bad_ripe (ripe_at_or_before).
CREATE OR REPLACE FUNCTION queen.streams_state_get_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_keys   TEXT[];
    v_prefix TEXT;
    v_ripe   NUMERIC;
    v_rows   JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._streams_check_target_v1(p);
    IF jsonb_typeof(p -> 'keys') = 'array' THEN
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(p -> 'keys') AS k
                   WHERE jsonb_typeof(k) <> 'string' OR NOT queen._streams_key_ok_v1(k #>> '{}')) THEN
            RAISE EXCEPTION 'streams_bad_key' USING ERRCODE = '22023',
                DETAIL = 'keys must be an array of strings of 1..1024 bytes';
        END IF;
        SELECT array_agg(k) INTO v_keys FROM jsonb_array_elements_text(p -> 'keys') AS k;
    ELSIF jsonb_typeof(p -> 'keys') IS DISTINCT FROM 'null' AND p ? 'keys' THEN
        RAISE EXCEPTION 'streams_bad_key' USING ERRCODE = '22023', DETAIL = 'keys must be an array';
    END IF;
    IF jsonb_typeof(p -> 'key_prefix') = 'string' THEN
        v_prefix := NULLIF(p ->> 'key_prefix', '');
    ELSIF jsonb_typeof(p -> 'key_prefix') IS DISTINCT FROM 'null' AND p ? 'key_prefix' THEN
        RAISE EXCEPTION 'streams_bad_key' USING ERRCODE = '22023', DETAIL = 'key_prefix must be a string';
    END IF;
    IF jsonb_typeof(p -> 'ripe_at_or_before') = 'number' THEN
        v_ripe := (p ->> 'ripe_at_or_before')::numeric;
    ELSIF jsonb_typeof(p -> 'ripe_at_or_before') IS DISTINCT FROM 'null' AND p ? 'ripe_at_or_before' THEN
        RAISE EXCEPTION 'streams_bad_ripe' USING ERRCODE = '22023',
            DETAIL = 'ripe_at_or_before must be a number (epoch milliseconds)';
    END IF;

    -- A prefix is a byte range (COLLATE "C"), not LIKE: '%' and '_' in a
    -- key are plain characters.
    SELECT COALESCE(jsonb_agg(jsonb_build_object('key', s.key, 'value', s.value,
                                                 'updated_at', queen.log_iso_v1(s.updated_at)) ORDER BY s.key), '[]')
    INTO v_rows
    FROM queen.streams_state s
    WHERE s.tenant_id = p_tenant AND s.query_id = (p ->> 'query_id')::uuid
      AND s.partition_id = (p ->> 'partition_id')::uuid
      AND (v_keys IS NULL OR s.key = ANY (v_keys))
      AND (v_prefix IS NULL OR left(s.key, length(v_prefix)) = v_prefix)
      AND (v_ripe IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'
                              AND (s.value ->> 'windowEnd')::numeric <= v_ripe));
    RETURN jsonb_build_object('success', true, 'rows', v_rows);
END
$$;

-- streams_cycle_v1(tenant, p, items) -> {success: true, query_id,
-- partition_id, queueName, state_ops_applied, push_results, ack_result}.
-- p: {query_id, partition_id (the source partition), consumer_group?
--     (default '__QUEUE_MODE__'), state_ops?: [{type: upsert, key, value} |
--     {type: delete, key}], push_items?: [push item], ack?: {transactionId,
--     leaseId, status? = completed|failed, error?, count?} | null,
--     release_lease? = true}.
-- items: the push items to push instead of p.push_items (the engine's copy
-- with encrypted queues' payloads sealed), or NULL.
-- push_results: what the push answers per item (log_push.sql). ack_result:
-- {success, count (ack.count, default 1), lease_released, dlq} or null.
--
-- One transaction, in the lock order of the header: the (tenant, query,
-- partition) advisory lock, the query and its source (read), the push, the
-- ack under its lease, then the state ops in ascending key. The ack is the
-- ack (log_ack.sql): through ack.transactionId; the lease ends when that reaches the
-- end of the popped batch. release_lease true (the default) also ends it
-- when the ack stopped short, so the unprocessed tail is popped again at
-- once, in partition order; false keeps the tail leased to this worker until
-- the lease expires (a rate limiter's deny: nothing past it is acked, no
-- other worker takes the tail out of order meanwhile).
--
-- Raises (and so commits nothing): 22023 log_bad_tenant, streams_bad_request,
-- streams_bad_query_id, streams_bad_partition_id, log_bad_group,
-- streams_bad_state_op, streams_bad_key, streams_bad_ack, streams_bad_release,
-- the push check's log_bad_* (log_push.sql) and the ack check's (log_ack.sql),
-- streams_query_not_found (not this tenant's), streams_partition_not_source
-- (not a partition of the query's source queue); 55000 streams_lease_lost
-- when the ack's lease is not the live lease of the cursor (DETAIL names
-- the ack's error: lease_mismatch, lease_expired, not_delivered,
-- message_not_found, outside_lease, ...); what the push raises (log_push.sql).
CREATE OR REPLACE FUNCTION queen.streams_cycle_v1(p_tenant UUID, p JSONB, p_items JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_qid      UUID;
    v_pid      UUID;
    v_grp      TEXT := '__QUEUE_MODE__';
    v_ops      JSONB;
    v_items    JSONB;
    v_ack      JSONB;
    v_release  BOOLEAN := true;
    v_src      TEXT;
    v_qname    TEXT;
    v_one      queen._log_ack_in_v1;
    v_ares     JSONB[];
    v_pres     JSONB[];
    v_released BOOLEAN := false;
    v_count    BIGINT := 1;
    v_applied  INTEGER := 0;
    v_ackres   JSONB := 'null';
    v_op       JSONB;
    v_void     TEXT;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._streams_check_target_v1(p);
    v_qid := (p ->> 'query_id')::uuid;
    v_pid := (p ->> 'partition_id')::uuid;
    IF jsonb_typeof(p -> 'consumer_group') = 'string' AND p ->> 'consumer_group' <> '' THEN
        v_grp := p ->> 'consumer_group';
        IF NOT queen.log_name_ok_v1(v_grp) THEN
            RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
                DETAIL = 'consumer_group must be a string of 1..255 bytes';
        END IF;
    ELSIF jsonb_typeof(p -> 'consumer_group') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023', DETAIL = 'consumer_group must be a string';
    END IF;
    -- The reference's Go client sends [] for "none" and warns that null
    -- broke its server; both mean none here.
    v_ops := COALESCE(NULLIF(p -> 'state_ops', 'null'), '[]');
    IF jsonb_typeof(v_ops) <> 'array' THEN
        RAISE EXCEPTION 'streams_bad_state_op' USING ERRCODE = '22023', DETAIL = 'state_ops must be an array';
    END IF;
    FOR v_i IN 0 .. jsonb_array_length(v_ops) - 1 LOOP
        v_op := v_ops -> v_i;
        IF jsonb_typeof(v_op) IS DISTINCT FROM 'object' OR v_op ->> 'type' IS NULL
           OR v_op ->> 'type' NOT IN ('upsert', 'delete') THEN
            RAISE EXCEPTION 'streams_bad_state_op' USING ERRCODE = '22023',
                DETAIL = format('state_ops[%s] must be {type: upsert|delete, key[, value]}', v_i);
        END IF;
        IF jsonb_typeof(v_op -> 'key') IS DISTINCT FROM 'string' OR NOT queen._streams_key_ok_v1(v_op ->> 'key') THEN
            RAISE EXCEPTION 'streams_bad_key' USING ERRCODE = '22023',
                DETAIL = format('state_ops[%s].key must be a string of 1..1024 bytes', v_i);
        END IF;
    END LOOP;
    v_items := COALESCE(p_items, NULLIF(p -> 'push_items', 'null'), '[]');
    v_void := queen._log_push_check_v1(v_items, 'push_items')::text;
    v_ack := NULLIF(p -> 'ack', 'null');
    IF v_ack IS NOT NULL THEN
        -- A cycle commits only under the lease its batch was popped with:
        -- without the lease id nothing tells a late cycle from a live one.
        IF jsonb_typeof(v_ack) <> 'object' OR jsonb_typeof(v_ack -> 'leaseId') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'streams_bad_ack' USING ERRCODE = '22023',
                DETAIL = 'ack must be null or {transactionId, leaseId, status?, count?}; leaseId is required';
        END IF;
        IF jsonb_typeof(v_ack -> 'count') = 'number' THEN
            v_count := (v_ack ->> 'count')::numeric;
        ELSIF jsonb_typeof(v_ack -> 'count') IS DISTINCT FROM 'null' AND v_ack ? 'count' THEN
            RAISE EXCEPTION 'streams_bad_ack' USING ERRCODE = '22023', DETAIL = 'ack.count must be an integer';
        END IF;
        v_one := queen._log_ack_check_one_v1(
            (v_ack - 'count') || jsonb_build_object('partitionId', v_pid, 'consumerGroup', v_grp), NULL, 'ack', 0);
    END IF;
    IF jsonb_typeof(p -> 'release_lease') = 'boolean' THEN
        v_release := (p -> 'release_lease')::boolean;
    ELSIF jsonb_typeof(p -> 'release_lease') IS DISTINCT FROM 'null' AND p ? 'release_lease' THEN
        RAISE EXCEPTION 'streams_bad_release' USING ERRCODE = '22023', DETAIL = 'release_lease must be a boolean';
    END IF;

    -- 1. The shard's cycles one at a time (a flush holds no lease).
    PERFORM pg_advisory_xact_lock(hashtextextended(p_tenant::text || ':' || v_qid::text || ':' || v_pid::text, 40));

    -- 2. The query is this tenant's, and the partition one of its source's:
    --    state is only ever written for (query, source partition).
    SELECT sq.source_queue INTO v_src FROM queen.streams_queries sq WHERE sq.id = v_qid AND sq.tenant_id = p_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'streams_query_not_found' USING ERRCODE = '22023',
            DETAIL = 'query_id names no query of this tenant: register it first (POST /streams/v1/queries)';
    END IF;
    SELECT q.name INTO v_qname
    FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
    WHERE lp.id = v_pid AND q.tenant_id = p_tenant AND q.name = v_src;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'streams_partition_not_source' USING ERRCODE = '22023',
            DETAIL = format('partition_id is not a partition of the query''s source queue %s', v_src);
    END IF;

    -- 3. The sink push (log_push.sql's rules: creation, dedup, partition locks).
    IF jsonb_array_length(v_items) > 0 THEN
        v_pres := queen._log_push_apply_v1(p_tenant, v_items);
    END IF;

    -- 4. The source ack under its lease (log_ack.sql's rules). A refused ack is the
    --    lease gone (or never this batch's): the whole cycle is refused.
    IF v_ack IS NOT NULL THEN
        v_ares := queen._log_ack_apply_v1(p_tenant, ARRAY[v_one], '[]');
        IF NOT (v_ares[1] ->> 'success')::boolean THEN
            RAISE EXCEPTION 'streams_lease_lost' USING ERRCODE = '55000',
                DETAIL = format('the ack was refused (%s): lease %s no longer holds this batch of consumer '
                                'group %s; nothing of the cycle was committed', v_ares[1] ->> 'error', v_one.lease,
                                v_grp);
        END IF;
        v_released := (v_ares[1] ->> 'leaseReleased')::boolean;
        IF v_release AND NOT v_released THEN
            -- Ends the lease without acking the tail: the cursor stays where
            -- the ack put it, so the next pop starts at the tail, in order.
            -- The row is locked by the ack above.
            UPDATE queen.log_consumers SET lease_id = NULL, lease_expires_at = NULL
            WHERE partition_id = v_pid AND consumer_group = v_grp COLLATE "C" AND lease_id = v_one.lease;
            v_released := FOUND;
        END IF;
        v_ackres := jsonb_build_object('success', true, 'count', v_count, 'lease_released', v_released,
                                       'dlq', v_ares[1] -> 'dlq');
    END IF;

    -- 5. State ops, ascending key (the lock order of the leaves); within a
    --    key, in the order sent, so the last op on a key wins.
    FOR v_op IN
        SELECT o.op FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS o(op, n)
        ORDER BY (o.op ->> 'key') COLLATE "C", o.n
    LOOP
        IF v_op ->> 'type' = 'upsert' THEN
            INSERT INTO queen.streams_state (tenant_id, query_id, partition_id, key, value)
            VALUES (p_tenant, v_qid, v_pid, v_op ->> 'key', COALESCE(v_op -> 'value', 'null'))
            ON CONFLICT (tenant_id, query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = now();
        ELSE
            DELETE FROM queen.streams_state
            WHERE tenant_id = p_tenant AND query_id = v_qid AND partition_id = v_pid AND key = v_op ->> 'key';
        END IF;
        v_applied := v_applied + 1;
    END LOOP;

    RETURN jsonb_build_object('success', true, 'query_id', v_qid, 'partition_id', v_pid, 'queueName', v_qname,
                              'state_ops_applied', v_applied,
                              'push_results', COALESCE(to_jsonb(v_pres), '[]'), 'ack_result', v_ackres);
END
$$;
