-- log_wire_group.sql: several transaction-wire bundles of different
-- callers committed as ONE transaction, each bundle its own subtransaction
-- (the broker's group commit for POST /api/v1/transaction, src/engine/wire.c).
--
-- Owns: queen._log_wire_verdict_v1, queen.log_transaction_wire_group_v1.
-- May call: log_transaction_wire.sql (log_transaction_wire_v1: every rule of a bundle is that
-- function's, applied to each member exactly as a call of its own), log_schema.sql
-- (tables, log_uuid_ok_v1), kv_group.sql (kv_lock_writes_v1: the kv rows, locked in
-- kv's order; this file never names the kv table).
-- Lock order (log_schema.sql and log_transaction_wire.sql's): queen.kv rows (ascending tenant, namespace,
-- key COLLATE "C") -> queen.log_partitions (FOR NO KEY UPDATE, ascending id)
-- -> queen.log_consumers (FOR UPDATE, ascending (partition, group)), all of
-- the whole group taken first, then each member in arrival order, whose own
-- locks are then already held but for rows it creates (a new kv key, queue
-- or partition) and leaves (messages, ready rows, dead letters).
-- Cost: one statement, one transaction and one WAL flush for the group; per
-- member one subtransaction (a few us) plus the single call's own cost.
--
-- Re-applied at every boot: CREATE OR REPLACE FUNCTION only.

-- _log_wire_verdict_v1(sqlstate) -> true when a member's error is that
-- bundle's own answer (what its call alone would have answered, whatever ran
-- beside it): a refused shape (class 22), a duplicate push or a lost kv
-- precondition (23), a limit (54), a rejected ack or an encrypted queue
-- without a key (55000). Everything else (40001 a partition vanished, 40P01,
-- 55P03 a lock waited past the group's lock_timeout, 57014 cancel, 53 out of
-- resources, XX internal) may come from sharing a transaction, so it fails
-- the whole group and every member then runs alone for its own verdict.
CREATE OR REPLACE FUNCTION queen._log_wire_verdict_v1(p_state TEXT)
RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT left(p_state, 2) IN ('22', '23', '54') OR p_state = '55000'
$$;

-- log_transaction_wire_group_v1(bundles, tenants, producers, defer_notify)
--   -> TABLE (n, result, err_state, err_message, err_detail)
--
-- Contract: bundles, tenants and producers are JSON arrays of one length;
-- member i (0-based) is log_transaction_wire_v1(tenants[i], bundles[i])
-- run with queen.producer = producers[i] (a string; null or "" for none:
-- log_producer.sql), in its own subtransaction. One row per member, n = i, in n
-- order: result = what that call returns, as text, and the err_* columns
-- NULL; or, when the call raised an error that is its own verdict
-- (_log_wire_verdict_v1), result NULL and err_state, err_message, err_detail
-- as that call raised them: nothing of that member is written and the
-- others are. defer_notify true: every member's NOTIFY is deferred as
-- queen.notify = 'after_commit' does (the caller sends them after commit).
-- Raises 22023 log_bad_request (not three arrays of one length) and any
-- error that is not a verdict (see above): nothing of the group commits and
-- the broker runs every member alone.
--
-- Why it is written the way it is:
--   - Members apply in arrival order, so messages of one partition take
--     their offsets in the order their bundles were made and answered, and a
--     member sees the effects of the members before it (a second ack of one
--     message is a noop, a second push of one transactionId a duplicate), as
--     a later call sees an earlier one's.
--   - A member's failure: its subtransaction rolls back, which undoes what
--     it wrote and releases the locks it took inside it (row locks it took,
--     rows it inserted, queues and partitions it created). The locks taken
--     below, before any member, belong to the group's top transaction and
--     stay until the group commits: the members after it still find their
--     rows locked in the global order, and the database they see is one in
--     which the failed member never ran, as if it had run alone and failed.
--     So the others' results are exactly what they would be without it.
--   - Lock order. Alone, a bundle locks kv rows, then partitions, then
--     cursors. Run one after another, member 2's kv and partition locks
--     would come after member 1's cursor locks: against the global order, so
--     two groups (or a group and a bundle alone) could wait on each other in
--     a cycle. Hence the existing rows every member will lock are locked
--     first, for the whole group, in the global order; what a member then
--     takes on its own is what cannot be locked before it exists (a kv key
--     or partition it creates). A cycle through such a row, or a guess here
--     that missed (the pre-locks read the bundles loosely: an odd bundle is
--     the single call's to refuse), ends at the lock_timeout (100 ms, as
--     log_push.sql's and kv_group.sql's groups), well before deadlock_timeout (1 s), so it is
--     a 55P03 that reruns the members alone, never a 40P01.
--   - Subtransactions are cheap but the server caches at most 64 of a
--     transaction's subtransaction ids; the broker sends at most 32 members
--     (src/engine/wire.c), and no function a member calls opens another.
--   - jit off: the locking statements' estimates (100 rows per JSON array,
--     nested) pass jit_above_cost; compiling them costs more than the group.
-- VOLATILE (writes), PARALLEL UNSAFE, CALLED ON NULL INPUT (NULLs raise).
CREATE OR REPLACE FUNCTION queen.log_transaction_wire_group_v1(p_bundles JSONB, p_tenants JSONB, p_producers JSONB,
                                                               p_defer_notify BOOLEAN)
RETURNS TABLE (n INTEGER, result TEXT, err_state TEXT, err_message TEXT, err_detail TEXT)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET lock_timeout = '100ms'
SET jit = off
AS $$
DECLARE
    v_n      INTEGER;
    v_i      INTEGER;
    v_void   TEXT;
    v_res    TEXT[];
    v_state  TEXT[];
    v_msg    TEXT[];
    v_det    TEXT[];
    v_st     TEXT;
    v_mg     TEXT;
    v_dt     TEXT;
    v_saved  TEXT := current_setting('queen.producer', true);
BEGIN
    IF jsonb_typeof(p_bundles) IS DISTINCT FROM 'array' OR jsonb_typeof(p_tenants) IS DISTINCT FROM 'array'
       OR jsonb_typeof(p_producers) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_tenants) <> jsonb_array_length(p_bundles)
       OR jsonb_array_length(p_producers) <> jsonb_array_length(p_bundles) THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'bundles, tenants and producers must be arrays of one length';
    END IF;
    v_n := jsonb_array_length(p_bundles);
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF p_defer_notify THEN
        v_void := set_config('queen.notify', 'after_commit', true);
    END IF;
    v_res := array_fill(NULL::text, ARRAY[v_n]);
    v_state := v_res;
    v_msg := v_res;
    v_det := v_res;

    -- 1. kv rows that members write and that exist (kv_group.sql owns their order).
    PERFORM queen.kv_lock_writes_v1(
        (SELECT jsonb_agg(CASE WHEN jsonb_typeof(m.b -> 'kv') = 'array' THEN m.b -> 'kv' ELSE '[]' END ORDER BY m.o)
         FROM jsonb_array_elements(p_bundles) WITH ORDINALITY AS m(b, o)),
        p_tenants);

    -- 2. Partitions that members push to and that exist, ascending id.
    PERFORM 1
    FROM (SELECT DISTINCT x.id
          FROM (SELECT DISTINCT (p_tenants ->> (m.o::integer - 1))::uuid AS t, (e ->> 'queue') COLLATE "C" AS qn,
                       COALESCE(e ->> 'partition', 'Default') COLLATE "C" AS pn
                FROM jsonb_array_elements(p_bundles) WITH ORDINALITY AS m(b, o)
                CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.b -> 'operations') = 'array'
                                                             THEN m.b -> 'operations' ELSE '[]' END) AS op
                CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN op ->> 'type' = 'push'
                                                              AND jsonb_typeof(op -> 'items') = 'array'
                                                             THEN op -> 'items' ELSE '[]' END) AS e
                WHERE jsonb_typeof(e -> 'queue') = 'string') AS s
          CROSS JOIN LATERAL (SELECT lp.id
                              FROM queen.queues q
                              JOIN queen.log_partitions lp ON lp.queue_id = q.id AND lp.name = s.pn
                              WHERE q.tenant_id = s.t AND q.name = s.qn
                              OFFSET 0) AS x
          ORDER BY 1) AS s
    CROSS JOIN LATERAL (SELECT 1 FROM queen.log_partitions lp WHERE lp.id = s.id FOR NO KEY UPDATE) AS x;

    -- 3. Cursors that members ack or whose leases they require, of each
    --    member's tenant, ascending (partition, group).
    PERFORM 1
    FROM (SELECT DISTINCT k.pid, k.grp
          FROM (SELECT (p_tenants ->> (m.o::integer - 1))::uuid AS t,
                       -- (CASE: a cast is never evaluated before its guard)
                       CASE WHEN queen.log_uuid_ok_v1(op ->> 'partitionId') THEN (op ->> 'partitionId')::uuid END
                           AS pid,
                       COALESCE(op ->> 'consumerGroup', '__QUEUE_MODE__') COLLATE "C" AS grp
                FROM jsonb_array_elements(p_bundles) WITH ORDINALITY AS m(b, o)
                CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.b -> 'operations') = 'array'
                                                             THEN m.b -> 'operations' ELSE '[]' END) AS op
                WHERE op ->> 'type' = 'ack' AND jsonb_typeof(op -> 'partitionId') = 'string'
                UNION ALL
                SELECT (p_tenants ->> (m.o::integer - 1))::uuid, lc.partition_id, lc.consumer_group
                FROM jsonb_array_elements(p_bundles) WITH ORDINALITY AS m(b, o)
                CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.b -> 'requiredLeases') = 'array'
                                                             THEN m.b -> 'requiredLeases' ELSE '[]' END) AS l
                JOIN queen.log_consumers lc
                  ON lc.lease_id = CASE WHEN jsonb_typeof(l) = 'string' AND queen.log_uuid_ok_v1(l #>> '{}')
                                        THEN (l #>> '{}')::uuid END) AS k
          WHERE k.pid IS NOT NULL
            AND (SELECT q.tenant_id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                 WHERE p.id = k.pid) = k.t
          ORDER BY 1, 2) AS s
    CROSS JOIN LATERAL (SELECT 1 FROM queen.log_consumers c
                        WHERE c.partition_id = s.pid AND c.consumer_group = s.grp
                        FOR UPDATE) AS x;

    -- 4. Each member alone, in its own subtransaction.
    FOR v_i IN 1 .. v_n LOOP
        v_void := set_config('queen.producer', COALESCE(p_producers ->> (v_i - 1), ''), true);
        BEGIN
            v_res[v_i] := queen.log_transaction_wire_v1((p_tenants ->> (v_i - 1))::uuid,
                                                        p_bundles -> (v_i - 1))::text;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_st = RETURNED_SQLSTATE, v_mg = MESSAGE_TEXT, v_dt = PG_EXCEPTION_DETAIL;
            IF NOT queen._log_wire_verdict_v1(v_st) THEN
                RAISE;
            END IF;
            v_state[v_i] := v_st;
            v_msg[v_i] := v_mg;
            v_det[v_i] := NULLIF(v_dt, '');
        END;
    END LOOP;
    v_void := set_config('queen.producer', COALESCE(v_saved, ''), true);

    RETURN QUERY SELECT (r.o - 1)::integer, r.res, r.st, r.mg, r.dt
                 FROM unnest(v_res, v_state, v_msg, v_det) WITH ORDINALITY AS r(res, st, mg, dt, o) ORDER BY r.o;
END
$$;
