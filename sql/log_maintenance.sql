-- log_maintenance.sql: the log's housekeeping, called by the broker's
-- sweeper loop: reclaim idle, empty partitions; drop consumed messages past
-- the queue's retentionSeconds / completedRetentionSeconds.
--
-- Owns: queen.log_partition_dead_v1, queen.log_partition_reclaim_step_v1,
--       queen.log_retention_step_v1.
-- May call: log_schema.sql. Must NEVER name queen.kv or anything else created after this
-- file: log_partition_dead_v1 is LANGUAGE sql, so PostgreSQL resolves its
-- tables when this file is applied, and at boot kv.sql has not run yet. A
-- leg naming queen.kv fails the boot; that is the mechanical check that the
-- kv never vetoes (or slows) a partition reclaim (lock order: log_schema.sql).
-- Tested by tests/integration/test_log_file_order.c.
-- Locks: log_partitions (FOR UPDATE SKIP LOCKED) -> log_consumers (SKIP
-- LOCKED) -> leaves, as the global order says. Never waits on a lock.

-- log_partition_dead_v1(partition_id, now, idle_seconds) -> true when the
-- partition exists, has had no push for idle_seconds, holds no message, and
-- no cursor holds a live lease on it: reclaimable. Total: NULL arguments or
-- an unknown partition -> false. Reads only.
CREATE OR REPLACE FUNCTION queen.log_partition_dead_v1(
    p_partition_id UUID, p_now TIMESTAMPTZ, p_idle_seconds INTEGER)
RETURNS BOOLEAN
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT EXISTS (
        SELECT 1
        FROM queen.log_partitions p
        WHERE p.id = p_partition_id
          AND p.last_push_at <= p_now - make_interval(secs => p_idle_seconds)
          AND NOT EXISTS (SELECT 1 FROM queen.log_messages m WHERE m.partition_id = p.id)
          AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c
                          WHERE c.partition_id = p.id
                            AND c.lease_id IS NOT NULL AND c.lease_expires_at > p_now)
          -- (no leg on the kv table here: it would fail the boot, see the header)
    )
$$;

-- log_partition_reclaim_step_v1(now, idle_seconds, max) -> {deleted}.
-- Deletes up to max dead partitions (and, by cascade, their cursors). Picks
-- with FOR UPDATE SKIP LOCKED, skips a partition any of whose cursor rows is
-- locked (a pop in flight), and re-checks log_partition_dead_v1 under the
-- locks: a push needs the partition lock we hold, a new cursor row needs its
-- key-share lock, so nothing can make it live between the check and the
-- delete. Raises 22023 log_bad_request on NULL or negative arguments.
CREATE OR REPLACE FUNCTION queen.log_partition_reclaim_step_v1(
    p_now TIMESTAMPTZ, p_idle_seconds INTEGER, p_max INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    r         RECORD;
    v_total   INTEGER;
    v_got     INTEGER;
    v_deleted INTEGER := 0;
BEGIN
    IF p_now IS NULL OR p_idle_seconds IS NULL OR p_idle_seconds < 0
       OR p_max IS NULL OR p_max < 0 THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'now, idle_seconds >= 0 and max >= 0 are required';
    END IF;
    FOR r IN
        SELECT p.id, p.queue_id FROM queen.log_partitions p
        WHERE p.last_push_at <= p_now - make_interval(secs => p_idle_seconds)
          AND queen.log_partition_dead_v1(p.id, p_now, p_idle_seconds)
        ORDER BY p.id
        LIMIT p_max
        FOR UPDATE OF p SKIP LOCKED
    LOOP
        SELECT count(*) INTO v_total FROM queen.log_consumers WHERE partition_id = r.id;
        SELECT count(*) INTO v_got FROM (
            SELECT 1 FROM queen.log_consumers WHERE partition_id = r.id
            FOR UPDATE SKIP LOCKED) AS s;
        CONTINUE WHEN v_got < v_total;
        CONTINUE WHEN NOT queen.log_partition_dead_v1(r.id, p_now, p_idle_seconds);
        -- No foreign key (log_schema.sql); found through the queue's subscriptions, as
        -- the ready rows' only index leads with the subscription.
        DELETE FROM queen.log_ready
        WHERE subscription_id IN (SELECT s.id FROM queen.log_subscriptions s WHERE s.queue_id = r.queue_id)
          AND partition_id = r.id;
        DELETE FROM queen.log_partitions WHERE id = r.id;
        PERFORM queen._log_partition_count_add_v1(
            (SELECT q.tenant_id FROM queen.queues q WHERE q.id = r.queue_id), -1); -- log_schema.sql's per-tenant count
        v_deleted := v_deleted + 1;
    END LOOP;
    RETURN jsonb_build_object('deleted', v_deleted);
END
$$;

-- log_retention_step_v1(now, max_rows) -> {deleted}.
-- For queues with retentionSeconds or completedRetentionSeconds > 0, deletes
-- up to max_rows messages older than the smaller of the two that are set
-- (_log_retention_seconds_v1, log_schema.sql) which every consumer group of their
-- partition has consumed (offset <= the lowest cursor). A partition no group
-- has popped keeps its messages. Touches only log_messages (a leaf); takes no row lock a pop or a
-- push waits on. Raises 22023 log_bad_request on NULL or negative arguments.
-- One queue at a time, only those with a retention, in id order: a step
-- reads nothing but the queue table while no queue has one, and only the
-- partitions of those that do. Written as one statement over every queue,
-- the sweeper's cached plan (made while the tables were small) walked every
-- partition of every queue and scanned the cursor table for each; at 10,000
-- partitions and no retention anywhere it ran into the statement timeout
-- every cycle, a core taken from the pops (bench/RESULTS.md, 2026-12-04).
-- For the same reason the per-queue statement plans with index probes only
-- (enable_seqscan, enable_hashjoin, enable_mergejoin off, as pop does).
CREATE OR REPLACE FUNCTION queen.log_retention_step_v1(p_now TIMESTAMPTZ, p_max_rows INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    v_q       RECORD;
    v_n       INTEGER;
    v_deleted INTEGER := 0;
BEGIN
    IF p_now IS NULL OR p_max_rows IS NULL OR p_max_rows < 0 THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'now and max_rows >= 0 are required';
    END IF;
    FOR v_q IN
        SELECT q.id, queen._log_retention_seconds_v1(q.retention_seconds, q.completed_retention_seconds) AS secs
        FROM queen.queues q
        WHERE q.retention_seconds > 0 OR q.completed_retention_seconds > 0
        ORDER BY q.id
    LOOP
        EXIT WHEN v_deleted >= p_max_rows;
        -- The rows go by ctid, read and deleted in this one statement (one
        -- snapshot): the candidates drive the delete (a TID scan each), where
        -- a join on the key let a plan made on small statistics scan every
        -- message and probe the candidates for each. A row updated
        -- meanwhile fails the ctid recheck and waits for the next step.
        WITH cand AS (
            SELECT m.tid
            FROM queen.log_partitions p
            JOIN LATERAL (SELECT min(c.committed_offset) AS low
                          FROM queen.log_consumers c WHERE c.partition_id = p.id) AS c
              ON c.low IS NOT NULL
            JOIN LATERAL (SELECT mm.ctid AS tid
                          FROM queen.log_messages mm
                          WHERE mm.partition_id = p.id AND mm.msg_offset <= c.low
                            AND mm.created_at < p_now - make_interval(secs => v_q.secs)
                          ORDER BY mm.msg_offset
                          LIMIT p_max_rows - v_deleted) AS m ON true
            WHERE p.queue_id = v_q.id
            LIMIT p_max_rows - v_deleted)
        DELETE FROM queen.log_messages m
        USING cand
        WHERE m.ctid = cand.tid;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_deleted := v_deleted + v_n;
    END LOOP;
    RETURN jsonb_build_object('deleted', v_deleted);
END
$$;
