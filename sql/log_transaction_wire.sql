-- log_transaction_wire.sql: the transaction wire, which commits kv ops,
-- pushes and acks of one bundle in ONE transaction.
--
-- Owns: queen.log_transaction_wire_v1.
-- May call: log_schema.sql, log_push.sql (_log_push_check_v1,
-- _log_push_apply_v1), log_ack.sql (_log_ack_check_one_v1, _log_ack_apply_v1)
-- and, at run time (plpgsql resolves names when it runs, so this file may call
-- a function that kv.sql creates later in the boot), queen.kv_apply_v1.
-- Lock order (log_schema.sql): the wire calls kv_apply_v1 before it takes
-- any log lock; after that: queen.queues -> queen.log_partitions (ascending
-- id) -> queen.log_consumers (ascending partition, group) -> leaves
-- (log_dead_letters). Nothing here takes a kv lock after a log lock.
--
-- The wire's failures (log_duplicate and log_ack_rejected with a DETAIL
-- JSON, kv_precondition_failed with kv_apply_v1's DETAIL untouched) are
-- reasons of the registry src/engine/reasons.txt, which gives each its
-- SQLSTATE and the transaction failure body's reason.

-- log_transaction_wire_v1(tenant, p) -> {transactionId, success: true, results}
-- tenant: the caller's, an argument as in every log function (NULL raises
-- log_bad_tenant). p: {operations?: [{type: ack, ...ack} |
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
-- The form that read the tenant from p's "tenant" member: replaced by this
-- one, which takes it as its first argument. Dropped, so an upgraded
-- database keeps no second form a caller could still reach. A no-op once
-- dropped.
DROP FUNCTION IF EXISTS queen.log_transaction_wire_v1(JSONB);
CREATE OR REPLACE FUNCTION queen.log_transaction_wire_v1(p_tenant UUID, p JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
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
    PERFORM queen._log_require_tenant_v1(p_tenant);
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'the bundle must be a JSON object';
    END IF;
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
        WHERE lp.id = (v_acks[v_j]).pid AND q.tenant_id = p_tenant;
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
        v_kvres := queen.kv_apply_v1(v_kv, p_tenant, now(), true);
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
        v_pres := queen._log_push_apply_v1(p_tenant, to_jsonb(v_items));
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
        v_ares := queen._log_ack_apply_v1(p_tenant, v_acks, v_leases);
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
