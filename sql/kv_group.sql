-- kv_group.sql: several one-op kv writes of different callers committed
-- in one transaction (the broker's group commit, src/engine/kv.c).
--
-- Owns: queen.kv_apply_group_v1, queen.kv_lock_writes_v1.
-- May call: queen.kv_apply_v1 (kv.sql) and nothing else; every rule of a write
-- is kv_apply_v1's, applied to each member exactly as a call of its own.
-- Must never: catch a member's error. A member that raises fails the whole
-- statement, so nothing of the group commits, and the broker then runs
-- every member alone for its own verdict. That is what keeps a group
-- indistinguishable from separate calls without a subtransaction per member
-- (which would overflow the subxid cache, as kv.sql's header says).
--
-- Re-applied at every boot: CREATE OR REPLACE FUNCTION only.

-- kv_apply_group_v1(calls, tenants) -> TABLE (n, result)
--
-- Contract: calls is a JSON array of kv_apply_v1 op arrays, each exactly
-- one write op (put, putIfAbsent, delete, incr); tenants a JSON array of
-- tenant uuid strings of the same length. Each member i (0-based) is
-- kv_apply_v1(calls[i], tenants[i], now(), false); one row per member, n = i,
-- result = that call's result as text, in n order. Anything else in calls
-- raises 22023 kv_bad_request (DETAIL says which member) before any write.
--
-- Why it is written the way it is:
--   - Members are applied in ascending (tenant, ns, key COLLATE "C",
--     arrival): each member locks one key, so the group takes its row locks
--     in the same global order as a single kv_apply_v1 call (kv.sql: ascending
--     (ns, key) inside one tenant), and two groups, or a group and a call,
--     cannot wait on each other in a cycle. Several ops in one member would
--     break that (its own keys are taken together, out of the group's
--     order), hence exactly one op each. Two members on one key run in
--     arrival order, one after the other, as two calls would.
--   - A member that waits on a row lock longer than lock_timeout (set on
--     the function: 100 ms) fails the group with 55P03, and the members
--     then run alone: a write stuck behind another transaction's lock
--     (a long bundle holding the key) must not hold back the writes that
--     happened to queue beside it. 100 ms is far above a wait for another
--     group's commit (a few ms), so contention on hot keys does not turn
--     into retries.
--   - All members share the transaction's now(): a group starts after every
--     member's request arrived and each member is answered after it
--     commits, so that instant lies within every member's request.
-- VOLATILE (writes), PARALLEL UNSAFE, CALLED ON NULL INPUT (NULLs raise).
CREATE OR REPLACE FUNCTION queen.kv_apply_group_v1(p_calls JSONB, p_tenants JSONB)
RETURNS TABLE (n INTEGER, result TEXT)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET lock_timeout = '100ms'
AS $$
DECLARE
    v_n     INTEGER;
    v_i     INTEGER;
    v_res   TEXT[];
    v_bad   INTEGER;
    v_order INTEGER[];
BEGIN
    IF jsonb_typeof(p_calls) IS DISTINCT FROM 'array' OR jsonb_typeof(p_tenants) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_calls) <> jsonb_array_length(p_tenants) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = 'calls and tenants must be arrays of one length';
    END IF;
    v_n := jsonb_array_length(p_calls);
    IF v_n = 0 THEN
        RETURN;
    END IF;
    -- The check and the apply order in one pass over the calls.
    -- (CASE, not OR: jsonb_array_length raises on anything but an array.)
    SELECT min(c.o - 1) FILTER (WHERE NOT CASE WHEN jsonb_typeof(c.ops) IS DISTINCT FROM 'array' THEN false
                   ELSE jsonb_array_length(c.ops) = 1
                        AND COALESCE((c.ops -> 0 ->> 'op') IN ('put', 'putIfAbsent', 'delete', 'incr'), false)
                        AND jsonb_typeof(c.ops -> 0 -> 'ns') IS NOT DISTINCT FROM 'string'
                        AND jsonb_typeof(c.ops -> 0 -> 'key') IS NOT DISTINCT FROM 'string' END),
           array_agg((c.o - 1)::integer ORDER BY t.tenant::uuid, (c.ops -> 0 ->> 'ns') COLLATE "C",
                                                 (c.ops -> 0 ->> 'key') COLLATE "C", c.o)
    INTO v_bad, v_order
    FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS c(ops, o)
    JOIN jsonb_array_elements_text(p_tenants) WITH ORDINALITY AS t(tenant, o) USING (o);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = format('call %s is not one write op with a namespace and a key', v_bad);
    END IF;

    v_res := array_fill(NULL::text, ARRAY[v_n]);
    FOREACH v_i IN ARRAY v_order LOOP
        v_res[v_i + 1] := queen.kv_apply_v1(p_calls -> v_i, (p_tenants ->> v_i)::uuid, now(), false)::text;
    END LOOP;

    RETURN QUERY SELECT (r.o - 1)::integer, r.res FROM unnest(v_res) WITH ORDINALITY AS r(res, o) ORDER BY r.o;
END
$$;

-- kv_lock_writes_v1(calls, tenants) -> integer: locks (FOR UPDATE) the rows
-- that exist among those the write ops (put, putIfAbsent, delete, incr) of
-- several calls name, in the kv's global lock order, ascending (tenant,
-- namespace, key COLLATE "C"), and returns how many it locked. calls is a
-- JSON array of kv op arrays, tenants a JSON array of tenant uuid strings of
-- the same length (call i is tenants[i]'s). Anything that is not a write op
-- with a string ns and key is skipped, never refused: the calls are judged
-- by kv_apply_v1 when they run. For a group of transaction bundles (log_wire_group.sql):
-- run one after another, a later bundle's kv writes would come after an
-- earlier one's log locks, against log_schema.sql's order (kv before log); the rows
-- taken here first keep the order for every row that exists. A row created
-- by a call (a new key) cannot be locked before it exists; the group's
-- lock_timeout bounds a cycle through one.
CREATE OR REPLACE FUNCTION queen.kv_lock_writes_v1(p_calls JSONB, p_tenants JSONB)
RETURNS INTEGER
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_n INTEGER;
BEGIN
    -- A lateral lookup per key over the sorted keys: the nested loop keeps
    -- the outer order, so the locks are taken in it.
    SELECT count(*)::integer INTO v_n
    FROM (SELECT DISTINCT (p_tenants ->> (c.o::integer - 1))::uuid AS t, (e ->> 'ns') COLLATE "C" AS ns,
                 (e ->> 'key') COLLATE "C" AS k
          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_calls) = 'array' THEN p_calls ELSE '[]' END)
               WITH ORDINALITY AS c(ops, o)
          CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c.ops) = 'array' THEN c.ops
                                                       ELSE '[]' END) AS e
          WHERE e ->> 'op' IN ('put', 'putIfAbsent', 'delete', 'incr')
            AND jsonb_typeof(e -> 'ns') = 'string' AND jsonb_typeof(e -> 'key') = 'string'
          ORDER BY 1, 2, 3) AS s
    CROSS JOIN LATERAL (SELECT 1 FROM queen.kv kv
                        WHERE kv.tenant_id = s.t AND kv.namespace = s.ns AND kv.key = s.k
                        FOR UPDATE) AS x;
    RETURN v_n;
END
$$;
