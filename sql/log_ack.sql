-- log_ack.sql: ack, the cursor advance: an ack names a message by its
-- transactionId in a partition and moves that group's cursor past it
-- (completed), or counts a failed attempt (failed; past retryLimit the
-- message goes to the dead letters). The check and apply are shared by the
-- transaction wire (log_transaction_wire.sql) and the stream cycle
-- (streams.sql).
--
-- Owns: the type queen._log_ack_in_v1, queen._log_ack_check_one_v1, queen._log_ack_target_v1,
--       queen._log_ack_apply_v1, queen.log_ack_v1.
-- May call: schema.sql (_schema_create_type_v1), log_schema.sql. Never names
-- queen.kv.
-- Lock order (log_schema.sql): queen.log_consumers (ascending partition,
-- group) -> leaves (log_dead_letters, whose insert takes the queue row FOR
-- KEY SHARE by its foreign key). Takes no kv lock.

-- _log_ack_in_v1: one ack once checked, as _log_ack_apply_v1 takes it:
-- i (its position among the call's acks: its result's slot), txid, pid, grp
-- (its own consumer group or the batch's), lease (NULL: none named, not
-- checked), status (completed|failed), error (the text a failed ack carries).
-- A composite, not a JSON object: the check builds it and the apply reads it
-- field by field, with no keys to sort or look up on either side.
SELECT queen._schema_create_type_v1('_log_ack_in_v1',
    'CREATE TYPE queen._log_ack_in_v1 AS (i INTEGER, txid TEXT, pid UUID, grp TEXT, lease UUID,
                                          status TEXT, error TEXT)');

-- _log_ack_check_one_v1(ack, group, where, i) -> the ack as _log_ack_in_v1
-- with that i. group: the batch-level consumer group (the ack's own wins;
-- NULL = '__QUEUE_MODE__'). where and i name the ack in a refusal's DETAIL
-- ('<where>[<i>].partitionId ...'). Raises 22023: log_bad_request (not an
-- object), log_bad_transaction_id, log_bad_partition_id (not a uuid),
-- log_bad_group, log_bad_lease_id (not a uuid), log_bad_status
-- (completed|failed).
CREATE OR REPLACE FUNCTION queen._log_ack_check_one_v1(p_ack JSONB, p_group TEXT, p_where TEXT, p_i INTEGER)
RETURNS queen._log_ack_in_v1
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_grp  TEXT;
    v_st   TEXT;
BEGIN
    IF jsonb_typeof(p_ack) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = format('%s[%s] must be an object', p_where, p_i);
    END IF;
    IF jsonb_typeof(p_ack -> 'transactionId') IS DISTINCT FROM 'string'
       OR NOT queen.log_name_ok_v1(p_ack ->> 'transactionId') THEN
        RAISE EXCEPTION 'log_bad_transaction_id' USING ERRCODE = '22023',
            DETAIL = format('%s[%s].transactionId must be a string of 1..255 bytes', p_where, p_i);
    END IF;
    IF jsonb_typeof(p_ack -> 'partitionId') IS DISTINCT FROM 'string'
       OR NOT queen.log_uuid_ok_v1(p_ack ->> 'partitionId') THEN
        RAISE EXCEPTION 'log_bad_partition_id' USING ERRCODE = '22023',
            DETAIL = format('%s[%s].partitionId must be a uuid string', p_where, p_i);
    END IF;
    IF jsonb_typeof(p_ack -> 'consumerGroup') IS NULL OR jsonb_typeof(p_ack -> 'consumerGroup') = 'null' THEN
        v_grp := COALESCE(p_group, '__QUEUE_MODE__');
    ELSIF jsonb_typeof(p_ack -> 'consumerGroup') = 'string' THEN
        v_grp := p_ack ->> 'consumerGroup';
    END IF;
    IF NOT queen.log_name_ok_v1(v_grp) THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
            DETAIL = format('%s[%s].consumerGroup must be a string of 1..255 bytes', p_where, p_i);
    END IF;
    IF jsonb_typeof(p_ack -> 'leaseId') IS NOT NULL AND jsonb_typeof(p_ack -> 'leaseId') <> 'null'
       AND (jsonb_typeof(p_ack -> 'leaseId') <> 'string' OR NOT queen.log_uuid_ok_v1(p_ack ->> 'leaseId')) THEN
        RAISE EXCEPTION 'log_bad_lease_id' USING ERRCODE = '22023',
            DETAIL = format('%s[%s].leaseId must be a uuid string', p_where, p_i);
    END IF;
    IF jsonb_typeof(p_ack -> 'status') IS NULL OR jsonb_typeof(p_ack -> 'status') = 'null' THEN
        v_st := 'completed';
    ELSIF jsonb_typeof(p_ack -> 'status') = 'string' AND (p_ack ->> 'status') IN ('completed', 'failed') THEN
        v_st := p_ack ->> 'status';
    ELSE
        RAISE EXCEPTION 'log_bad_status' USING ERRCODE = '22023',
            DETAIL = format('%s[%s].status must be completed or failed', p_where, p_i);
    END IF;
    RETURN ROW(p_i, p_ack ->> 'transactionId', (p_ack ->> 'partitionId')::uuid, v_grp,
               (p_ack ->> 'leaseId')::uuid, v_st,
               CASE jsonb_typeof(p_ack -> 'error') WHEN 'string' THEN p_ack ->> 'error'
                                                   WHEN 'null' THEN NULL
                                                   ELSE (p_ack -> 'error')::text END)::queen._log_ack_in_v1;
END
$$;

-- _log_ack_target_v1(partition, group, transactionId, committed) -> the
-- message an ack names: transactionId -> offset, the oldest not yet consumed,
-- else the newest (an ack at or below the cursor is then a no-op). A message
-- requeued for one group (log_dlq.sql's for_group) is that group's alone. LANGUAGE
-- sql and STABLE, so both of _log_ack_apply_v1's row queries inline it.
-- for_group is added by log_dlq.sql, which applies after this file: the body is
-- checked when it first runs, not here (a LANGUAGE sql body is otherwise
-- checked at creation).
SET check_function_bodies = off;
CREATE OR REPLACE FUNCTION queen._log_ack_target_v1(p_part UUID, p_grp TEXT, p_txid TEXT, p_committed BIGINT)
RETURNS TABLE (msg_offset BIGINT, id UUID, payload JSONB, created_at TIMESTAMPTZ)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT mm.msg_offset, mm.id, mm.payload, mm.created_at
    FROM queen.log_messages mm
    WHERE mm.partition_id = p_part AND mm.transaction_id = p_txid COLLATE "C"
      AND (mm.for_group IS NULL OR mm.for_group = p_grp COLLATE "C")
    ORDER BY (mm.msg_offset > p_committed) DESC,
             CASE WHEN mm.msg_offset > p_committed THEN mm.msg_offset ELSE -mm.msg_offset END
    LIMIT 1
$$;
RESET check_function_bodies;

-- _log_ack_apply_v1(tenant, acks, required_leases) -> jsonb[] of
-- {index, transactionId, success, error, queueName, partitionName,
-- leaseReleased, dlq, noop} (the names null when the partition is not this
-- tenant's or does not exist), aligned
-- with acks (checked by _log_ack_check_one_v1; index = its i).
-- Locks the cursor rows of every ack and every required lease, ascending
-- (partition, group), then checks the required leases (55000
-- log_ack_rejected when one is not live for this tenant), then applies the
-- acks in ascending (partition, group, offset). Only cursor rows are written
-- (plus a dead letter past retryLimit). Semantics: docs/sql-log.md (Ack).
-- Raises XX000 log_result_misaligned if a result slot stayed empty.
-- enable_seqscan off: every statement here reads cursors, partitions and
-- messages by key, and a session keeps the generic plan it made first. Made
-- while log_consumers was one page, the cursor's UPDATE by key was a
-- sequential scan, and stayed one as the cursors grew: an ack read every
-- cursor of the database (1,000,000 rows read for 3,000 acks at 3,000
-- partitions, bench/RESULTS.md, 2026-12-04). Hash and merge joins stay
-- allowed, as in _log_push_apply_v1 (log_push.sql): the acks of one call
-- join each other.
-- The form that took the acks as a JSON array: replaced by this one (the
-- same name, the acks as _log_ack_in_v1[]). A no-op once dropped.
DROP FUNCTION IF EXISTS queen._log_ack_apply_v1(UUID, JSONB, JSONB);
CREATE OR REPLACE FUNCTION queen._log_ack_apply_v1(p_tenant UUID, p_acks queen._log_ack_in_v1[], p_leases JSONB)
RETURNS JSONB[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET enable_seqscan = off
AS $$
DECLARE
    r          RECORD;
    v_rows     REFCURSOR;
    v_c        queen.log_consumers%ROWTYPE;
    v_res      JSONB[] := '{}';
    v_n        INTEGER := COALESCE(array_length(p_acks, 1), 0);
    v_err      TEXT;
    v_noop     BOOLEAN;
    v_released BOOLEAN;
    v_dlq      BOOLEAN;
    v_count    INTEGER;
    v_tries    INTEGER;   -- v_count and the batch's expired leases
    v_block_p  UUID;
    v_block_g  TEXT;
    v_block_o  BIGINT;
    v_k        INTEGER;
    v_lease    TEXT;
    v_key      RECORD;
    v_one      queen._log_ack_in_v1;
    v_dirty    BOOLEAN := false;  -- v_c moved since it was read; not yet written back
    v_more     BOOLEAN;
    v_lone     BOOLEAN := false;  -- the one-ack path: r was read by SELECT INTO, no cursor
    v_lone_seen BOOLEAN := false;
BEGIN
    IF v_n = 1 AND COALESCE(p_leases, '[]') = '[]' THEN
        -- One ack and no required lease, the consumer's usual transaction:
        -- one key, so the lock is one lookup, and the row is read by plain
        -- lookups. The general path's key set, sort and lateral plan below
        -- cost more to start in each transaction than to run for one row.
        -- The locking read is also the row the decision below reads (it
        -- sees the latest committed version), so it is not read twice. A
        -- SELECT INTO costs less to start than a cursor.
        v_one := p_acks[1];
        SELECT c.* INTO v_c FROM queen.log_consumers c
        WHERE c.partition_id = v_one.pid AND c.consumer_group = v_one.grp
          AND (SELECT q.tenant_id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
               WHERE p.id = c.partition_id) = p_tenant
        FOR UPDATE OF c;
        v_lone := true;
        SELECT v_one.i AS i, v_one.txid AS txid, v_one.pid AS pid, v_one.grp AS grp, v_one.lease AS lease,
               v_one.status AS status, v_one.error AS error,
               p.id AS part, p.name AS pname, q.id AS qid, q.name AS qname, q.retry_limit,
               m.msg_offset, m.id AS mid, m.payload, m.created_at AS mcreated
        INTO r
        FROM (SELECT) AS one
        LEFT JOIN (queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant)
               ON p.id = v_one.pid
        LEFT JOIN LATERAL queen._log_ack_target_v1(p.id, v_one.grp, v_one.txid, v_c.committed_offset) AS m ON true;
    ELSE
        -- The cursor locks, in ascending (partition, group). Only rows of
        -- this tenant; an ack naming another tenant's partition locks
        -- nothing. Keys first (primary-key and lease-index lookups), then
        -- one lock per key in order, so no plan can scan the table or lock
        -- out of order.
        FOR v_key IN
            SELECT k.pid, k.grp
            FROM (SELECT a.pid, a.grp COLLATE "C" AS grp
                  FROM unnest(p_acks) AS a
                  UNION
                  SELECT lc.partition_id, lc.consumer_group
                  FROM jsonb_array_elements(COALESCE(p_leases, '[]')) AS l
                  JOIN queen.log_consumers lc ON lc.lease_id = (l #>> '{}')::uuid) AS k
            -- The tenant of each key by primary-key lookups (a subplan per
            -- key): as a join, the generic plan (which guesses 100 keys)
            -- hashed the whole of log_partitions and queues on every ack.
            WHERE (SELECT q.tenant_id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                   WHERE p.id = k.pid) = p_tenant
            ORDER BY k.pid, k.grp
        LOOP
            PERFORM 1 FROM queen.log_consumers
            WHERE partition_id = v_key.pid AND consumer_group = v_key.grp
            FOR UPDATE;
        END LOOP;

        -- Required leases: live, of this tenant, and now held until commit.
        FOR v_k IN 0 .. jsonb_array_length(COALESCE(p_leases, '[]')) - 1 LOOP
            v_lease := p_leases -> v_k #>> '{}';
            PERFORM 1
            FROM queen.log_consumers c
            JOIN queen.log_partitions p ON p.id = c.partition_id
            JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
            WHERE c.lease_id = v_lease::uuid AND c.lease_expires_at > now();
            IF NOT FOUND THEN
                RAISE EXCEPTION 'log_ack_rejected' USING ERRCODE = '55000',
                    DETAIL = jsonb_build_object('requiredLeaseIndex', v_k, 'leaseId', v_lease,
                                                'error', 'lease_not_live')::text;
            END IF;
        END LOOP;

        OPEN v_rows FOR
            SELECT a.i, a.txid, a.pid, a.grp, a.lease, a.status, a.error,
                   p.id AS part, p.name AS pname, p.qid, p.qname, p.retry_limit,
                   m.msg_offset, m.id AS mid, m.payload, m.created_at AS mcreated
            FROM unnest(p_acks) AS a
            -- Partition (of this tenant) and cursor by primary-key lookups
            -- per ack: OFFSET 0 keeps each a nested lookup, where as plain
            -- joins the generic plan (which guesses 100 acks) hashed the
            -- whole of log_partitions, queues and log_consumers on every call.
            LEFT JOIN LATERAL (
                SELECT p.id, p.name, q.id AS qid, q.name AS qname, q.retry_limit
                FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
                WHERE p.id = a.pid
                OFFSET 0) AS p ON true
            LEFT JOIN LATERAL (
                SELECT c.committed_offset
                FROM queen.log_consumers c
                WHERE c.partition_id = p.id AND c.consumer_group = a.grp COLLATE "C"
                OFFSET 0) AS c ON true
            LEFT JOIN LATERAL queen._log_ack_target_v1(p.id, a.grp, a.txid, c.committed_offset) AS m ON true
            ORDER BY a.pid, a.grp COLLATE "C", m.msg_offset NULLS FIRST, a.i;
    END IF;

    -- The cursor row: read once per key (rows come ordered by key) and then
    -- kept in v_c as the acks of that key move it; written back once, when
    -- the key changes or after the last ack. Only this call writes it (it
    -- holds the row lock), so what v_c keeps is what the row holds.
    LOOP
        IF v_lone THEN
            -- r holds the one ack; the second round writes it back and ends.
            v_more := NOT v_lone_seen;
            v_lone_seen := true;
        ELSE
            FETCH v_rows INTO r;
            v_more := FOUND;
        END IF;
        IF v_dirty AND (NOT v_more OR v_c.partition_id IS DISTINCT FROM r.part
                        OR v_c.consumer_group IS DISTINCT FROM r.grp COLLATE "C") THEN
            UPDATE queen.log_consumers
            SET committed_offset = v_c.committed_offset, lease_id = v_c.lease_id,
                lease_expires_at = v_c.lease_expires_at, fail_offset = v_c.fail_offset,
                fail_count = v_c.fail_count
            WHERE partition_id = v_c.partition_id AND consumer_group = v_c.consumer_group;
            v_dirty := false;
        END IF;
        EXIT WHEN NOT v_more;
        v_err := NULL; v_noop := false; v_released := false; v_dlq := false;

        IF r.part IS NOT NULL AND (v_c.partition_id IS DISTINCT FROM r.part
                                   OR v_c.consumer_group IS DISTINCT FROM r.grp COLLATE "C") THEN
            SELECT * INTO v_c FROM queen.log_consumers
            WHERE partition_id = r.part AND consumer_group = r.grp COLLATE "C";
        END IF;

        IF r.part IS NULL THEN
            v_err := 'partition_not_found';
        ELSIF v_c.partition_id IS NULL THEN
            v_err := 'not_delivered';
        ELSIF r.msg_offset IS NULL THEN
            v_err := 'message_not_found';
        ELSIF r.lease IS NOT NULL AND v_c.lease_id IS DISTINCT FROM r.lease THEN
            v_err := 'lease_mismatch';
        ELSIF r.lease IS NOT NULL AND v_c.lease_expires_at <= now() THEN
            v_err := 'lease_expired';
        ELSIF r.msg_offset <= v_c.committed_offset THEN
            v_noop := true;
        ELSIF r.lease IS NOT NULL AND r.msg_offset > v_c.batch_end THEN
            v_err := 'outside_lease';
        ELSIF v_block_p = r.part AND v_block_g = r.grp AND r.msg_offset > v_block_o THEN
            v_err := 'after_failed';
        ELSIF r.status = 'completed' THEN
            -- Through this message; the lease ends with its batch; a retry
            -- count of a message now behind the cursor is forgotten.
            v_released := v_c.lease_id IS NOT NULL AND r.msg_offset >= v_c.batch_end;
            v_c.committed_offset := r.msg_offset;
            IF v_c.fail_offset <= r.msg_offset THEN
                v_c.fail_offset := 0; v_c.fail_count := 0;
            END IF;
        ELSE
            -- failed: one unit of retryLimit for this message, which also
            -- counts the leases of its batch that expired (log_pop.sql's
            -- _log_pop_expired_v1; only a message inside the batch has them).
            v_count := CASE WHEN v_c.fail_offset = r.msg_offset THEN v_c.fail_count + 1 ELSE 1 END;
            v_tries := v_count + CASE WHEN r.msg_offset <= v_c.batch_end THEN v_c.expired_count ELSE 0 END;
            IF v_tries > r.retry_limit THEN
                -- Past the limit: dead-lettered and consumed.
                v_dlq := true;
                INSERT INTO queen.log_dead_letters (tenant_id, queue_id, queue_name, partition_id,
                    partition_name, consumer_group, msg_offset, message_id, transaction_id,
                    payload, error, attempts, created_at, failed_at)
                VALUES (p_tenant, r.qid, r.qname, r.part, r.pname, r.grp, r.msg_offset, r.mid,
                    r.txid, r.payload, r.error, v_tries, r.mcreated, now());
                v_released := v_c.lease_id IS NOT NULL AND r.msg_offset >= v_c.batch_end;
                v_c.committed_offset := r.msg_offset;
                v_c.fail_offset := 0; v_c.fail_count := 0;
            ELSE
                -- Redelivered from this message on: the cursor stops before
                -- it and the lease ends now.
                v_released := v_c.lease_id IS NOT NULL;
                v_c.committed_offset := GREATEST(v_c.committed_offset, r.msg_offset - 1);
                v_c.lease_id := NULL; v_c.lease_expires_at := NULL;
                v_c.fail_offset := r.msg_offset; v_c.fail_count := v_count;
                v_block_p := r.part; v_block_g := r.grp; v_block_o := r.msg_offset;
            END IF;
        END IF;
        IF v_released THEN
            v_c.lease_id := NULL; v_c.lease_expires_at := NULL;
        END IF;
        v_dirty := v_dirty OR (v_err IS NULL AND NOT v_noop);

        v_res[r.i + 1] := jsonb_build_object(
            'index', r.i, 'transactionId', r.txid, 'success', v_err IS NULL,
            'error', v_err, 'queueName', r.qname, 'partitionName', r.pname,
            'leaseReleased', v_released, 'dlq', v_dlq, 'noop', v_noop);
    END LOOP;
    IF NOT v_lone THEN
        CLOSE v_rows;
    END IF;

    IF COALESCE(array_length(v_res, 1), 0) <> v_n OR array_position(v_res, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'log_result_misaligned' USING ERRCODE = 'XX000',
            DETAIL = format('%s acks, %s results', v_n, COALESCE(array_length(v_res, 1), 0));
    END IF;
    RETURN v_res;
END
$$;

-- log_ack_v1(tenant, acks, group) -> jsonb array in input order:
-- [{index, transactionId, success, error, queueName, partitionName,
--   leaseReleased, dlq, noop}].
-- acks: [{transactionId, partitionId, consumerGroup?, leaseId?,
-- status? = completed|failed, error?}]; group: batch-level consumer group
-- (NULL = '__QUEUE_MODE__'). A refused ack is success:false with an error
-- code, never a raise. Raises 22023: log_bad_tenant, log_bad_group (the
-- batch-level group), log_bad_request (acks not an array) and the refusals
-- of _log_ack_check_one_v1, the first ack's first.
CREATE OR REPLACE FUNCTION queen.log_ack_v1(p_tenant UUID, p_acks JSONB, p_group TEXT)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_acks queen._log_ack_in_v1[] := '{}';
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p_group IS NOT NULL AND NOT queen.log_name_ok_v1(p_group) THEN
        RAISE EXCEPTION 'log_bad_group' USING ERRCODE = '22023',
            DETAIL = 'consumerGroup must be a string of 1..255 bytes';
    END IF;
    IF p_acks IS NULL OR jsonb_typeof(p_acks) <> 'array' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'acknowledgments must be an array';
    END IF;
    -- (Index loops over jsonb arrays: a FOR over SELECT opens a query and a
    -- cursor per loop, a plain index loop runs expressions only.)
    FOR v_i IN 0 .. jsonb_array_length(p_acks) - 1 LOOP
        v_acks[v_i + 1] := queen._log_ack_check_one_v1(p_acks -> v_i, p_group, 'acknowledgments', v_i);
    END LOOP;
    RETURN to_jsonb(queen._log_ack_apply_v1(p_tenant, v_acks, '[]'));
END
$$;

-- The array form of the ack check, replaced by _log_ack_check_one_v1 (its
-- callers loop over the acks themselves). A no-op once dropped.
DROP FUNCTION IF EXISTS queen._log_ack_check_v1(JSONB, TEXT, TEXT);
