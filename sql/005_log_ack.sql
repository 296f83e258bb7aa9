-- 005_log_ack.sql: ack (cursor advance), lease extension, queue
-- configuration / listing / deletion, and the transaction wire that commits
-- kv ops, pushes and acks in ONE transaction.
--
-- Owns: the type queen._log_ack_in_v1, queen._log_ack_check_one_v1, queen._log_ack_target_v1,
--       queen._log_ack_apply_v1, queen.log_ack_v1,
--       queen.log_lease_extend_v1, queen.log_queues_of_v1, queen._log_queue_option_specs_v1,
--       queen._log_queue_option_check_v1, queen._log_queue_options_v1,
--       queen.log_configure_v1, queen._log_partition_mode_counts_v1, queen.log_queues_v1,
--       queen.log_queue_delete_v1, queen.log_transaction_wire_v1.
-- May call: 001, 003 (_log_push_check_v1, _log_push_apply_v1) and, from the
-- wire only and at run time (plpgsql resolves names when it runs, so 005 may
-- call a function that 024 creates later in the boot), queen.kv_apply_v1.
-- Lock order (001_log_schema.sql): the wire calls kv_apply_v1 before it takes
-- any log lock; after that: queen.queues -> queen.log_partitions (ascending
-- id) -> queen.log_consumers (ascending partition, group) -> leaves
-- (log_dead_letters). Nothing here takes a kv lock after a log lock.
--
-- The wire's failures (log_duplicate and log_ack_rejected with a DETAIL
-- JSON, kv_precondition_failed with kv_apply_v1's DETAIL untouched) are
-- reasons of the registry src/engine/reasons.txt, which gives each its
-- SQLSTATE and the transaction failure body's reason.

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
-- requeued for one group (029's for_group) is that group's alone. LANGUAGE
-- sql and STABLE, so both of _log_ack_apply_v1's row queries inline it.
-- for_group is added by 029, which applies after this file: the body is
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
-- The form that took the acks as a JSON array: replaced by this one (the
-- same name, the acks as _log_ack_in_v1[]). A no-op once dropped.
DROP FUNCTION IF EXISTS queen._log_ack_apply_v1(UUID, JSONB, JSONB);
CREATE OR REPLACE FUNCTION queen._log_ack_apply_v1(p_tenant UUID, p_acks queen._log_ack_in_v1[], p_leases JSONB)
RETURNS JSONB[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
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
            -- counts the leases of its batch that expired (004's
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
            -- labels, 004) names no one queue: null, so a narrowed token
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

-- log_lease_extend_v1(tenant, lease_id, seconds) ->
-- {leaseId, success, renewed, expiresAt, newExpiresAt}. Extends a live lease
-- of this tenant to now + seconds (NULL = 60). newExpiresAt = expiresAt: the
-- name the reference broker's clients read (an object, never an array:
-- Queen.renew reads result.newExpiresAt). An unknown, malformed, foreign or
-- expired lease answers success:false, renewed:false, both times null. A
-- pop that claimed several partitions gave them one lease id (004): every
-- live cursor holding it is extended, so the clients' one renew per lease id
-- keeps the whole batch. Locks those cursor rows in ascending (partition,
-- group), the order acks lock in (waits for a pop holding one, which is
-- short).
-- Raises 22023: log_bad_tenant, log_bad_seconds (1..604800).
CREATE OR REPLACE FUNCTION queen.log_lease_extend_v1(p_tenant UUID, p_lease_id TEXT, p_seconds INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_secs    INTEGER := COALESCE(p_seconds, 60);
    v_expires TIMESTAMPTZ;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF v_secs NOT BETWEEN 1 AND 604800 THEN
        RAISE EXCEPTION 'log_bad_seconds' USING ERRCODE = '22023',
            DETAIL = format('seconds must be 1..604800, got %s', v_secs);
    END IF;
    IF queen.log_uuid_ok_v1(p_lease_id) THEN
        PERFORM 1 FROM queen.log_consumers c
        JOIN queen.log_partitions p ON p.id = c.partition_id
        JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
        WHERE c.lease_id = p_lease_id::uuid
        ORDER BY c.partition_id, c.consumer_group
        FOR UPDATE OF c;
        WITH x AS (
            UPDATE queen.log_consumers c
            SET lease_expires_at = now() + make_interval(secs => v_secs)
            FROM queen.log_partitions p, queen.queues q
            WHERE c.lease_id = p_lease_id::uuid AND c.lease_expires_at > now()
              AND p.id = c.partition_id AND q.id = p.queue_id AND q.tenant_id = p_tenant
            RETURNING c.lease_expires_at)
        SELECT max(x.lease_expires_at) INTO v_expires FROM x;
    END IF;
    RETURN jsonb_build_object('leaseId', p_lease_id, 'success', v_expires IS NOT NULL,
                              'renewed', v_expires IS NOT NULL,
                              'expiresAt', queen.log_iso_v1(v_expires),
                              'newExpiresAt', queen.log_iso_v1(v_expires));
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
--                     (delayedProcessing, maxWaitTimeSeconds: pop, 031;
--                     encryptionEnabled: the engine, 035);
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
        -- A new queue counts against the tenant's limit (001); reconfiguring
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
-- every per-queue and per-partition count shows (log_queues_v1, 036).
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
    -- partition the cascade deletes (001's per-tenant count).
    PERFORM 1 FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue FOR UPDATE;
    SELECT array_agg(s.id) INTO v_subs
    FROM queen.log_subscriptions s JOIN queen.queues q ON q.id = s.queue_id
    WHERE q.tenant_id = p_tenant AND q.name = p_queue;
    PERFORM queen._log_partition_count_add_v1(p_tenant, -(
        SELECT count(*) FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
        WHERE q.tenant_id = p_tenant AND q.name = p_queue));
    DELETE FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- The ready rows of its subscriptions (no foreign key: 001), after the
    -- cascade has waited out the pushes that could still insert one.
    DELETE FROM queen.log_ready WHERE subscription_id = ANY (v_subs);
    RETURN jsonb_build_object('deleted', true, 'queue', p_queue, 'existed', v_n > 0);
END
$$;

-- log_transaction_wire_v1(p) -> {transactionId, success: true, results}
-- p: {tenant (uuid string, required), operations?: [{type: ack, ...ack} |
--     {type: push, items: [...]}], requiredLeases?: [leaseId], kv?: [kv op]}
-- (operations may be omitted when kv is present).
-- results: one element per push item and per ack in operations order
-- ({type, index (flat), opIndex, [itemIndex,] ...push/ack result}), then one
-- per kv op ({type: "kv", index (flat), opIndex (position in kv), ...kv
-- result}). One transaction, in the lock order: tenant check on acks (read
-- only), ALL kv ops in one kv_apply_v1(kv, tenant, now(), true), queue and
-- partition creation, partition locks ascending, pushes, cursor locks
-- ascending (partition, group), required leases, acks.
-- Every failure raises (and so rolls everything back); the (SQLSTATE,
-- message) table is in this file's header and docs/sql-log.md. A required kv
-- loss propagates kv_apply_v1's 23514 and DETAIL untouched.
CREATE OR REPLACE FUNCTION queen.log_transaction_wire_v1(p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_tenant UUID;
    v_ops    JSONB;
    v_kv     JSONB;
    v_leases JSONB;
    v_op     JSONB;
    v_oi     INTEGER;
    v_flat   INTEGER := 0;
    -- Push items flattened in operations order, and where each came from
    -- (integers: the result and error shapes need them, nothing else).
    v_items  JSONB[] := '{}';
    v_iflat  INTEGER[] := '{}';
    v_iop    INTEGER[] := '{}';
    v_iidx   INTEGER[] := '{}';
    -- Acks as _log_ack_check_one_v1 returns them (i = position among acks).
    v_acks   queen._log_ack_in_v1[] := '{}';
    v_ack    queen._log_ack_in_v1;
    v_aflat  INTEGER[] := '{}';
    v_aop    INTEGER[] := '{}';
    v_j      INTEGER;
    v_kvres  JSONB;
    v_pres   JSONB[];
    v_ares   JSONB[];
    v_res    JSONB[];
    v_void   TEXT;
BEGIN
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'the bundle must be a JSON object';
    END IF;
    IF jsonb_typeof(p -> 'tenant') IS DISTINCT FROM 'string' OR NOT queen.log_uuid_ok_v1(p ->> 'tenant') THEN
        RAISE EXCEPTION 'log_bad_tenant' USING ERRCODE = '22023',
            DETAIL = 'tenant must be a uuid string';
    END IF;
    v_tenant := (p ->> 'tenant')::uuid;
    IF NOT p ? 'operations' AND NOT p ? 'kv' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'operations or kv is required';
    END IF;
    v_ops := COALESCE(NULLIF(p -> 'operations', 'null'), '[]');
    v_kv := COALESCE(NULLIF(p -> 'kv', 'null'), '[]');
    v_leases := COALESCE(NULLIF(p -> 'requiredLeases', 'null'), '[]');
    IF jsonb_typeof(v_ops) <> 'array' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'operations must be an array';
    END IF;
    IF jsonb_typeof(v_kv) <> 'array' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'kv must be an array';
    END IF;
    -- No required leases (the common bundle): none of the two statements
    -- below has anything to do.
    IF v_leases <> '[]'::jsonb THEN
        IF jsonb_typeof(v_leases) <> 'array' OR EXISTS (
               SELECT 1 FROM jsonb_array_elements(v_leases) AS l
               WHERE jsonb_typeof(l) <> 'string' OR NOT queen.log_uuid_ok_v1(l #>> '{}')) THEN
            RAISE EXCEPTION 'log_bad_lease_id' USING ERRCODE = '22023',
                DETAIL = 'requiredLeases must be an array of uuid strings';
        END IF;
        SELECT COALESCE(jsonb_agg(lower(l #>> '{}')), '[]') INTO v_leases
        FROM jsonb_array_elements(v_leases) AS l;
    END IF;

    -- Shape of every operation, in order, before anything is read or written.
    -- (Index loops over jsonb arrays: a FOR over SELECT opens a query and a
    -- cursor per loop, a plain index loop runs expressions only.)
    FOR v_oi IN 0 .. jsonb_array_length(v_ops) - 1 LOOP
        v_op := v_ops -> v_oi;
        IF jsonb_typeof(v_op) <> 'object' THEN
            RAISE EXCEPTION 'log_bad_operation' USING ERRCODE = '22023',
                DETAIL = format('operations[%s] must be an object', v_oi);
        ELSIF v_op ->> 'type' = 'kv' THEN
            RAISE EXCEPTION 'log_kv_in_operations' USING ERRCODE = '22023',
                DETAIL = format('operations[%s]: kv ops go in the top-level kv array', v_oi);
        ELSIF v_op ->> 'type' = 'push' THEN
            -- An assignment, not PERFORM: an expression, not a query.
            v_void := queen._log_push_check_v1(v_op -> 'items', format('operations[%s].items', v_oi))::text;
            FOR v_j IN 0 .. jsonb_array_length(v_op -> 'items') - 1 LOOP
                v_items := array_append(v_items, v_op -> 'items' -> v_j);
                v_iflat := array_append(v_iflat, v_flat);
                v_iop := array_append(v_iop, v_oi);
                v_iidx := array_append(v_iidx, v_j);
                v_flat := v_flat + 1;
            END LOOP;
        ELSIF v_op ->> 'type' = 'ack' THEN
            v_ack := queen._log_ack_check_one_v1(v_op, NULL, format('operations[%s]', v_oi), 0);
            v_ack.i := COALESCE(array_length(v_acks, 1), 0);
            v_acks := array_append(v_acks, v_ack);
            v_aflat := array_append(v_aflat, v_flat);
            v_aop := array_append(v_aop, v_oi);
            v_flat := v_flat + 1;
        ELSE
            RAISE EXCEPTION 'log_bad_operation' USING ERRCODE = '22023',
                DETAIL = format('operations[%s].type must be ack or push', v_oi);
        END IF;
    END LOOP;

    -- 1. Tenant check on acks: read only, no lock.
    FOR v_j IN 1 .. COALESCE(array_length(v_acks, 1), 0) LOOP
        PERFORM 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
        WHERE lp.id = (v_acks[v_j]).pid AND q.tenant_id = v_tenant;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'log_ack_rejected' USING ERRCODE = '55000',
                DETAIL = jsonb_build_object('index', v_aflat[v_j], 'opIndex', v_aop[v_j],
                    'transactionId', (v_acks[v_j]).txid, 'partitionId', (v_acks[v_j]).pid,
                    'consumerGroup', (v_acks[v_j]).grp, 'error', 'partition_not_found')::text;
        END IF;
    END LOOP;

    -- Results: operations order (flat index), then kv; each slot filled as
    -- its part is applied. A result's own index is replaced by the flat one
    -- (|| keeps the right-hand value of a key both sides have).
    v_res := array_fill(NULL::jsonb, ARRAY[v_flat + jsonb_array_length(v_kv)]);

    -- 2. All kv ops, one call, before any log lock. A required loss raises
    --    23514 from inside kv_apply_v1 and is not caught here.
    IF jsonb_array_length(v_kv) > 0 THEN
        v_kvres := queen.kv_apply_v1(v_kv, v_tenant, now(), true);
        IF v_kvres IS NULL OR jsonb_typeof(v_kvres) <> 'array'
           OR jsonb_array_length(v_kvres) <> jsonb_array_length(v_kv) THEN
            RAISE EXCEPTION 'log_result_misaligned' USING ERRCODE = 'XX000',
                DETAIL = format('%s kv ops, kv_apply_v1 returned %s', jsonb_array_length(v_kv),
                                COALESCE(jsonb_typeof(v_kvres), 'NULL'));
        END IF;
        FOR v_j IN 0 .. jsonb_array_length(v_kvres) - 1 LOOP
            v_res[v_flat + v_j + 1] := (v_kvres -> v_j) || jsonb_build_object('type', 'kv', 'index', v_flat + v_j, 'opIndex', v_j);
        END LOOP;
    END IF;

    -- 3. Queue/partition creation, partition locks ascending, pushes.
    IF array_length(v_items, 1) > 0 THEN
        v_pres := queen._log_push_apply_v1(v_tenant, to_jsonb(v_items));
        FOR v_j IN 1 .. array_length(v_items, 1) LOOP
            IF v_pres[v_j] ->> 'status' = 'duplicate' THEN
                RAISE EXCEPTION 'log_duplicate' USING ERRCODE = '23505',
                    DETAIL = jsonb_build_object('index', v_iflat[v_j], 'opIndex', v_iop[v_j], 'itemIndex', v_iidx[v_j],
                        'queue', v_items[v_j] -> 'queue',
                        'partition', COALESCE(v_items[v_j] ->> 'partition', 'Default'),
                        'transactionId', v_pres[v_j] -> 'transaction_id',
                        'messageId', v_pres[v_j] -> 'message_id')::text;
            END IF;
            v_res[v_iflat[v_j] + 1] := v_pres[v_j] || jsonb_build_object('type', 'push', 'index', v_iflat[v_j],
                                                                         'opIndex', v_iop[v_j], 'itemIndex', v_iidx[v_j]);
        END LOOP;
    END IF;

    -- 4. Cursor locks ascending (partition, group), required leases, acks.
    IF array_length(v_acks, 1) > 0 OR jsonb_array_length(v_leases) > 0 THEN
        v_ares := queen._log_ack_apply_v1(v_tenant, v_acks, v_leases);
        FOR v_j IN 1 .. COALESCE(array_length(v_acks, 1), 0) LOOP
            IF NOT (v_ares[v_j] ->> 'success')::boolean THEN
                RAISE EXCEPTION 'log_ack_rejected' USING ERRCODE = '55000',
                    DETAIL = jsonb_build_object('index', v_aflat[v_j], 'opIndex', v_aop[v_j],
                        'transactionId', (v_acks[v_j]).txid, 'partitionId', (v_acks[v_j]).pid,
                        'consumerGroup', (v_acks[v_j]).grp, 'error', v_ares[v_j] -> 'error')::text;
            END IF;
            v_res[v_aflat[v_j] + 1] := v_ares[v_j] || jsonb_build_object('type', 'ack', 'index', v_aflat[v_j],
                                                                        'opIndex', v_aop[v_j]);
        END LOOP;
    END IF;

    IF array_position(v_res, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'log_result_misaligned' USING ERRCODE = 'XX000',
            DETAIL = format('result slot %s is empty', array_position(v_res, NULL) - 1);
    END IF;

    RETURN jsonb_build_object('transactionId', gen_random_uuid(), 'success', true,
                              'results', COALESCE(to_jsonb(v_res), '[]'));
END
$$;
