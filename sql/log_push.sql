-- log_push.sql: push. Creates queues and partitions on first use, dedups
-- per (queue, partition, transactionId) within the queue's window under the
-- partition row lock, appends to the log, and wakes long-polling pops.
--
-- Owns: queen._log_push_problem_v1, queen._log_push_check_v1,
-- queen._log_push_apply_v1, queen.log_push_v1, queen.log_push_group_v1,
-- queen.log_notify_announce_v1, queen.log_notify_pushed_v1.
-- May call: log_schema.sql (tables, log_name_ok_v1, _log_require_tenant_v1,
-- _log_partition_retry_v1). Never names queen.kv; takes no kv lock (the wire
-- in log_transaction_wire.sql calls kv first, then this).
-- Locks, in the global order: queen.queues (insert of a missing queue only),
-- queen.log_partitions (FOR NO KEY UPDATE, ascending id), then leaves
-- (log_messages inserts, and log_ready: a bumped partition gets a ready row
-- for every subscription of its queue, log_schema.sql's invariant, under that lock).
-- NOTIFY: pg_notify('queen_push', '<tenant uuid>:<queue name>') once per queue
-- that received a message; delivered at commit only. A caller that sets
-- queen.notify = 'after_commit' (transaction-local) gets no NOTIFY inside its
-- transaction and sends it afterwards with log_notify_pushed_v1, in a
-- transaction of its own: PostgreSQL holds one database-wide lock from a
-- notifying transaction's pre-commit until its commit record is flushed, so
-- every push that notified waited for the previous one's WAL flush (no group
-- commit). Measured 2026-12-02 (2-core VM, durable cluster, pgbench -M
-- prepared, one-item log_push_v1 over 16 partitions, c=32, 5 s): 124 tps with
-- the NOTIFY in the push, 600 without; the broker defers it (src/engine/log.c,
-- wire.c) and its notifier thread sends the deferred halves of every push
-- committed meanwhile as one statement on its own connection (notify.c): a
-- transaction per push cost ~360 us of machine CPU at c=8 (pgbench, the
-- push plus a log_notify_pushed_v1 transaction vs the push alone:
-- 937 -> 1,296 us per push, 1,849 -> 1,359 pushes/s).

-- _log_push_problem_v1(items, where) -> text[]: the first refusal of a push
-- items array, as ARRAY[sqlstate, message, detail], or NULL when it may be
-- applied; the rules of _log_push_check_v1, which raises what this returns.
-- Returned, not raised, so a group of pushes (log_push_group_v1) can refuse
-- one member and apply the others without a subtransaction per member.
-- where prefixes the DETAIL ('items' or 'operations[2].items'). 22023:
-- log_bad_request (not an array, item not an object), log_bad_queue,
-- log_bad_partition, log_bad_payload (absent; JSON null is a payload),
-- log_bad_transaction_id, log_bad_trace_id (present, not null and not "",
-- and not a uuid string).
CREATE OR REPLACE FUNCTION queen._log_push_problem_v1(p_items JSONB, p_where TEXT)
RETURNS TEXT[]
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_item JSONB;
    v_i    INTEGER;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' THEN
        RETURN ARRAY['22023', 'log_bad_request', format('%s must be an array', p_where)];
    END IF;
    -- (Index loops over jsonb arrays: a FOR over SELECT opens a query and a
    -- cursor per loop, a plain index loop runs expressions only.)
    FOR v_i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        v_item := p_items -> v_i;
        IF jsonb_typeof(v_item) <> 'object' THEN
            RETURN ARRAY['22023', 'log_bad_request', format('%s[%s] must be an object', p_where, v_i)];
        END IF;
        IF jsonb_typeof(v_item -> 'queue') IS DISTINCT FROM 'string'
           OR NOT queen.log_name_ok_v1(v_item ->> 'queue') THEN
            RETURN ARRAY['22023', 'log_bad_queue',
                format('%s[%s].queue must be a string of 1..255 bytes without control characters', p_where, v_i)];
        END IF;
        IF jsonb_typeof(v_item -> 'partition') IS DISTINCT FROM 'null'
           AND v_item ? 'partition'
           AND (jsonb_typeof(v_item -> 'partition') <> 'string'
                OR NOT queen.log_name_ok_v1(v_item ->> 'partition')) THEN
            RETURN ARRAY['22023', 'log_bad_partition',
                format('%s[%s].partition must be a string of 1..255 bytes without control characters', p_where, v_i)];
        END IF;
        IF NOT v_item ? 'payload' THEN
            RETURN ARRAY['22023', 'log_bad_payload', format('%s[%s].payload is missing', p_where, v_i)];
        END IF;
        IF v_item ? 'transactionId' AND jsonb_typeof(v_item -> 'transactionId') <> 'null'
           AND (jsonb_typeof(v_item -> 'transactionId') <> 'string'
                OR NOT queen.log_name_ok_v1(v_item ->> 'transactionId')) THEN
            RETURN ARRAY['22023', 'log_bad_transaction_id',
                format('%s[%s].transactionId must be a string of 1..255 bytes without control characters', p_where, v_i)];
        END IF;
        IF v_item ? 'traceId' AND jsonb_typeof(v_item -> 'traceId') <> 'null'
           AND (jsonb_typeof(v_item -> 'traceId') <> 'string'
                OR ((v_item ->> 'traceId') <> ''
                    AND NOT queen.log_uuid_ok_v1(v_item ->> 'traceId'))) THEN
            RETURN ARRAY['22023', 'log_bad_trace_id', format('%s[%s].traceId must be a uuid string', p_where, v_i)];
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- _log_push_check_v1(items, where) -> void. Validates a push items array
-- before anything is written: raises (as its SQLSTATE, message and detail)
-- the refusal _log_push_problem_v1 returns.
CREATE OR REPLACE FUNCTION queen._log_push_check_v1(p_items JSONB, p_where TEXT)
RETURNS VOID
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_problem TEXT[] := queen._log_push_problem_v1(p_items, p_where);
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_problem[1], MESSAGE = v_problem[2], DETAIL = v_problem[3];
    END IF;
END
$$;

-- _log_push_apply_v1(tenant, items) -> jsonb[] of
-- {index, message_id, transaction_id, queueName, partition_id, trace_id,
-- status} in item order. items must have passed _log_push_check_v1. Status is
-- 'queued' or 'duplicate' (message_id and trace_id of the message already in
-- the window). trace_id is the item's traceId (uuid text), null without one
-- ("" counts as none). Creates
-- missing queues (leaseTime 60) and partitions, locks every partition it
-- writes FOR NO KEY UPDATE in ascending id, decides dedup under that lock,
-- bumps last_offset once per partition, notifies 'queen_push'.
-- Cost: every statement a PL/pgSQL call runs pays its executor start-up
-- (plan-cache check, relation locks, a node tree built, aggregates'
-- transition code compiled) in every transaction; for a one-message push
-- that start-up, not the rows touched, was most of the time. A call whose
-- items all name one (queue, partition) that exists (nearly every push)
-- therefore takes its lock with one plain lookup, and a one-item call bumps
-- with one plain UPDATE (several items bump in their append statement); the
-- general path (several pairs, or one to create) counts, creates and locks
-- with the statements below. Measured 2026-12-02 (2-core VM,
-- durable, pgbench -M prepared, one-item pushes over 16 partitions):
-- 382 -> 258 us per call at c=1 (track_functions), 1,851-2,223 -> 2,673-2,690
-- calls/s at c=8.
-- Raises 40001 log_partition_vanished when a partition keeps being deleted
-- under it (log_maintenance.sql reclaim or a queue delete racing): retryable; 55000
-- encryption_key_missing for an unsealed payload into an encrypted queue.
-- enable_seqscan off (for the calls made from here too): every table read
-- of a push is a key lookup or an index range, and a plan cached while
-- log_partitions was small checked a new pair, or found the pairs to lock,
-- with a sequential scan of the table; at 100,000 partitions a push creating
-- 500 of them ran into the statement timeout (bench/RESULTS.md, 2026-12-04).
-- Hash joins stay: the statement of several items joins its own rows with
-- them (with them off, pushes of 100 cost twice the database CPU).
CREATE OR REPLACE FUNCTION queen._log_push_apply_v1(p_tenant UUID, p_items JSONB)
RETURNS JSONB[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET enable_seqscan = off
AS $$
DECLARE
    v_pairs   INTEGER;
    v_locked  INTEGER;
    v_try     INTEGER := 0;
    v_parts   JSONB;    -- {"<queue>\u001f<partition>": {"id","next","window","qid","enc"}}
    v_part    JSONB;
    v_item    JSONB;
    v_txn     TEXT;
    v_msg     UUID;
    v_dup     UUID;
    v_dup_tr  UUID;
    v_trace   UUID;
    v_next    BIGINT;
    v_out     JSONB[] := '{}';
    v_notified INTEGER;  -- queues notified (unused: the statement needs a target)
    v_queue   TEXT;      -- the one (queue, partition) every item names, if so
    v_pname   TEXT;
    v_single  BOOLEAN := true;
    -- The one pair's partition, its last offset (moved as messages go in)
    -- and dedup window, when every item names one pair: plain variables in
    -- the statements, not lookups in v_parts (built only for the set-based
    -- statement of several items).
    v_pid     UUID;
    v_qid     UUID;
    v_last    BIGINT;
    v_window  INTEGER;
    v_bumped  BOOLEAN := false;
    v_enc     BOOLEAN := false; -- some item's queue has encryptionEnabled (log_encryption.sql)
    v_created BIGINT;
    v_defer   BOOLEAN := current_setting('queen.notify', true) IS NOT DISTINCT FROM 'after_commit';
BEGIN
    IF jsonb_array_length(p_items) = 0 THEN
        RETURN v_out;
    END IF;

    -- One pair named by every item (expressions only, no query), and that
    -- partition's lock by one lookup when it exists.
    v_queue := p_items -> 0 ->> 'queue';
    v_pname := COALESCE(p_items -> 0 ->> 'partition', 'Default');
    FOR v_i IN 1 .. jsonb_array_length(p_items) - 1 LOOP
        IF (p_items -> v_i ->> 'queue') <> v_queue
           OR COALESCE(p_items -> v_i ->> 'partition', 'Default') <> v_pname THEN
            v_single := false;
            EXIT;
        END IF;
    END LOOP;
    IF v_single THEN
        SELECT lp.id, lp.last_offset, q.dedup_window_seconds, q.id,
               COALESCE((q.stored_options -> 'encryptionEnabled') = 'true'::jsonb, false)
        INTO v_pid, v_last, v_window, v_qid, v_enc
        FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
        WHERE q.tenant_id = p_tenant AND q.name = v_queue AND lp.name = v_pname
        FOR NO KEY UPDATE OF lp;
        IF NOT FOUND THEN
            v_single := false; -- to be created: the general path
        END IF;
    END IF;

    IF NOT v_single THEN
        -- How many (queue, partition) pairs the items name, and how many of them
        -- exist already: read only, no lock. When all exist (every push after
        -- the first to a partition) the two creating INSERTs are skipped: they
        -- were two statements of the hot path that found nothing to do.
        -- (A lookup per pair, OFFSET 0: as plain joins the generic plan, which
        -- guesses 100 pairs, hashed the whole of log_partitions on every push.)
        SELECT count(*), count(x.id) INTO v_pairs, v_locked
        FROM (SELECT DISTINCT (e ->> 'queue') COLLATE "C" AS qn,
                     COALESCE(e ->> 'partition', 'Default') COLLATE "C" AS pn
              FROM jsonb_array_elements(p_items) AS e) AS s
        LEFT JOIN LATERAL (SELECT lp.id
                           FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id AND lp.name = s.pn
                           WHERE q.tenant_id = p_tenant AND q.name = s.qn
                           OFFSET 0) AS x ON true;

        IF v_locked < v_pairs THEN
            -- Something is to be created: the tenant's queue and partition
            -- limits (log_schema.sql), counted only now, never on a push to existing
            -- pairs. Raised before any insert: a refused push writes nothing.
            PERFORM queen._log_tenant_room_v1(p_tenant,
                (SELECT count(*) FROM (SELECT DISTINCT (e ->> 'queue') COLLATE "C" AS qn
                                       FROM jsonb_array_elements(p_items) AS e) AS s
                 WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = s.qn)),
                v_pairs - v_locked);
        END IF;
        LOOP
            IF v_locked < v_pairs THEN
                -- Queues first (lock order), in name order; an existing queue is
                -- only looked up, never locked.
                INSERT INTO queen.queues (tenant_id, name)
                SELECT p_tenant, s.q
                FROM (SELECT DISTINCT (e ->> 'queue') COLLATE "C" AS q
                      FROM jsonb_array_elements(p_items) AS e) AS s
                WHERE NOT EXISTS (SELECT 1 FROM queen.queues q
                                  WHERE q.tenant_id = p_tenant AND q.name = s.q)
                ORDER BY s.q
                ON CONFLICT (tenant_id, name) DO NOTHING;

                INSERT INTO queen.log_partitions (queue_id, name)
                SELECT q.id, s.p
                FROM (SELECT DISTINCT (e ->> 'queue') COLLATE "C" AS qn,
                             COALESCE(e ->> 'partition', 'Default') COLLATE "C" AS p
                      FROM jsonb_array_elements(p_items) AS e) AS s
                JOIN queen.queues q ON q.tenant_id = p_tenant AND q.name = s.qn
                WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions lp
                                  WHERE lp.queue_id = q.id AND lp.name = s.p)
                ORDER BY q.id, s.p
                ON CONFLICT (queue_id, name) DO NOTHING;
                GET DIAGNOSTICS v_created = ROW_COUNT;
                PERFORM queen._log_partition_count_add_v1(p_tenant, v_created); -- log_schema.sql's per-tenant count
            END IF;

            -- The partition locks, ascending id: they serialise pushes to a
            -- partition and make the dedup decision and the offsets exact.
            SELECT COALESCE(jsonb_object_agg(l.k, jsonb_build_object(
                       'id', l.id, 'next', l.last_offset, 'window', l.w, 'qid', l.qid,
                       'enc', l.enc)), '{}'),
                   count(*), COALESCE(bool_or(l.enc), false)
            INTO v_parts, v_locked, v_enc
            FROM (SELECT lp.id, lp.last_offset, q.dedup_window_seconds AS w, q.id AS qid,
                         COALESCE((q.stored_options -> 'encryptionEnabled') = 'true'::jsonb, false) AS enc,
                         q.name || chr(31) || lp.name AS k
                  FROM (SELECT DISTINCT (e ->> 'queue') COLLATE "C" AS qn,
                               COALESCE(e ->> 'partition', 'Default') COLLATE "C" AS pn
                        FROM jsonb_array_elements(p_items) AS e) AS s
                  JOIN queen.queues q ON q.tenant_id = p_tenant AND q.name = s.qn
                  JOIN queen.log_partitions lp ON lp.queue_id = q.id AND lp.name = s.pn
                  ORDER BY lp.id
                  FOR NO KEY UPDATE OF lp) AS l;

            EXIT WHEN v_locked = v_pairs;
            v_try := queen._log_partition_retry_v1(v_try);
        END LOOP;
        IF v_pairs = 1 THEN
            -- The one pair, created and locked just now.
            v_single := true;
            v_part := v_parts -> (v_queue || chr(31) || v_pname);
            v_pid := (v_part ->> 'id')::uuid;
            v_last := (v_part ->> 'next')::bigint;
            v_window := (v_part ->> 'window')::integer;
            v_qid := (v_part ->> 'qid')::uuid;
        END IF;
    ELSIF jsonb_array_length(p_items) > 1 THEN
        -- Several items to one existing pair: the set-based statement below
        -- reads the pair from v_parts.
        v_parts := jsonb_build_object(v_queue || chr(31) || v_pname, jsonb_build_object(
                       'id', v_pid, 'next', v_last, 'window', v_window, 'qid', v_qid));
    END IF;

    -- An encrypted queue stores only sealed payloads: the engine seals them
    -- before SQL sees them (log_encryption.sql), so an unsealed one here came from a broker
    -- (or a direct caller) without the payload key. Refused, nothing stored,
    -- rather than kept in plaintext; the check is in the push itself so a
    -- broker without a key pays no statement to find out (a sealed string is
    -- "qenc:..."; one that does not open is the reader's error, never ours to
    -- judge here). 55000, retryable on a broker that has the key (503).
    IF v_enc AND EXISTS (
           SELECT 1 FROM jsonb_array_elements(p_items) AS e
           WHERE COALESCE((v_parts -> ((e ->> 'queue') || chr(31) || COALESCE(e ->> 'partition', 'Default'))
                           ->> 'enc')::boolean, true)
             AND NOT (jsonb_typeof(e -> 'payload') = 'string' AND starts_with(e ->> 'payload', 'qenc:'))) THEN
        RAISE EXCEPTION 'encryption_key_missing' USING ERRCODE = '55000',
            DETAIL = 'a queue among the items has encryptionEnabled and its payloads arrived unsealed: the broker '
                     'has no payload key (QUEEN_ENCRYPTION_KEY); nothing was stored';
    END IF;

    IF jsonb_array_length(p_items) = 1 THEN
        -- One item: a probe-and-insert statement and its result. (The
        -- statement below does the same for any number of items, but its
        -- window functions cost more to start than this costs to run.)
        -- (One item is one pair: v_pid, v_last and v_window are set.)
        v_item := p_items -> 0;
        v_msg  := gen_random_uuid();
        v_trace := NULLIF(v_item ->> 'traceId', '')::uuid;
        v_txn  := CASE WHEN jsonb_typeof(v_item -> 'transactionId') = 'string'
                       THEN v_item ->> 'transactionId' ELSE v_msg::text END;
        v_next := v_last + 1;
        -- Exact dedup inside the window and the append, in one statement,
        -- under the partition lock: the row goes in unless a message of the
        -- window already holds its transactionId (the probe also sees the
        -- rows this very call inserted, created_at = now()). A generated
        -- transactionId (the new message id) is never probed.
        INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at,
                                        trace_id)
        SELECT v_pid, v_next, v_msg, v_txn, v_item -> 'payload', now(), v_trace
        WHERE jsonb_typeof(v_item -> 'transactionId') IS DISTINCT FROM 'string'
           OR NOT EXISTS (SELECT 1 FROM queen.log_messages m
                          WHERE m.partition_id = v_pid
                            AND m.transaction_id = v_txn
                            AND m.created_at > now() - make_interval(secs => v_window));
        IF NOT FOUND THEN
            -- A duplicate: name the newest message of the window holding it.
            SELECT m.id, m.trace_id INTO v_dup, v_dup_tr
            FROM queen.log_messages m
            WHERE m.partition_id = v_pid
              AND m.transaction_id = v_txn
              AND m.created_at > now() - make_interval(secs => v_window)
            ORDER BY m.msg_offset DESC
            LIMIT 1;
            IF v_dup IS NULL THEN
                -- Its holder was deleted between the two statements (retention
                -- does not take the partition lock): the window no longer holds
                -- the transactionId, so the message goes in.
                INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at,
                                                trace_id)
                VALUES (v_pid, v_next, v_msg, v_txn, v_item -> 'payload', now(), v_trace);
            END IF;
        END IF;
        IF v_dup IS NULL THEN
            v_last := v_next;
            v_bumped := true;
            v_out := ARRAY[jsonb_build_object(
                'index', 0, 'message_id', v_msg, 'transaction_id', v_txn,
                'queueName', v_queue, 'partition_id', v_pid,
                'trace_id', v_trace, 'status', 'queued')];
        ELSE
            v_out := ARRAY[jsonb_build_object(
                'index', 0, 'message_id', v_dup, 'transaction_id', v_txn,
                'queueName', v_queue, 'partition_id', v_pid,
                'trace_id', v_dup_tr, 'status', 'duplicate')];
        END IF;
    ELSE
        -- Several items: ONE statement decides and appends them all, where a
        -- statement per item paid an executor start-up per item (a push of
        -- 100 took ~100 us per message against ~35 for the bare insert).
        -- The same rule as the loop above, item by item in item order: a
        -- named item (a transactionId of its own) is a duplicate when the
        -- dedup window already holds its transactionId: the newest such
        -- message of the partition, else the first item of this call that
        -- names it (an item inserted by this call is in the window unless the
        -- window is 0, which dedups nothing); every other item goes in at
        -- the partition's next offset.
        WITH item AS (
            SELECT (o.i - 1)::integer AS i, o.e,
                   (o.e ->> 'queue') || chr(31) || COALESCE(o.e ->> 'partition', 'Default') AS k,
                   jsonb_typeof(o.e -> 'transactionId') = 'string' AS named,
                   gen_random_uuid() AS msg, NULLIF(o.e ->> 'traceId', '')::uuid AS trace
            FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, i)
        ), placed AS (
            SELECT item.*, (v_parts -> item.k ->> 'id')::uuid AS pid,
                   (v_parts -> item.k ->> 'next')::bigint AS base,
                   (v_parts -> item.k ->> 'window')::integer AS win,
                   CASE WHEN item.named THEN item.e ->> 'transactionId' ELSE item.msg::text END AS txn
            FROM item
        ), probed AS (
            SELECT placed.*, h.id AS h_id, h.trace_id AS h_trace,
                   first_value(placed.i) OVER (PARTITION BY placed.pid, placed.txn ORDER BY placed.i) AS first_i
            FROM placed
            LEFT JOIN LATERAL (
                SELECT m.id, m.trace_id FROM queen.log_messages m
                WHERE placed.named AND m.partition_id = placed.pid AND m.transaction_id = placed.txn
                  AND m.created_at > now() - make_interval(secs => placed.win)
                ORDER BY m.msg_offset DESC
                LIMIT 1) AS h ON true
        ), decided AS (
            SELECT probed.*,
                   h_id IS NULL AND (first_i = i OR NOT named OR win <= 0) AS fresh
            FROM probed
        ), numbered AS (
            SELECT decided.*,
                   CASE WHEN fresh THEN base + row_number() OVER (PARTITION BY pid, fresh ORDER BY i) END AS off
            FROM decided
        ), appended AS (
            INSERT INTO queen.log_messages (partition_id, msg_offset, id, transaction_id, payload, created_at,
                                            trace_id)
            SELECT pid, off, msg, txn, e -> 'payload', now(), trace FROM numbered WHERE fresh
            RETURNING 1
        ), bumped AS (
            -- Each partition that took a message: its offset, and its ready
            -- row for every group subscribed to the queue (log_schema.sql's
            -- invariant), in this statement too: a statement of their own
            -- paid another executor start-up and a JSON map of the offsets.
            UPDATE queen.log_partitions lp
            SET last_offset = t.last, last_push_at = now()
            FROM (SELECT pid, max(off) AS last FROM numbered WHERE fresh GROUP BY pid) AS t
            WHERE lp.id = t.pid
            RETURNING lp.id, lp.queue_id
        ), ready AS (
            INSERT INTO queen.log_ready (subscription_id, partition_id)
            SELECT s.id, b.id FROM bumped b JOIN queen.log_subscriptions s ON s.queue_id = b.queue_id
            ORDER BY s.id, b.id
            ON CONFLICT DO NOTHING
        )
        SELECT (SELECT array_agg(jsonb_build_object(
                           'index', n.i,
                           'message_id', CASE WHEN n.fresh THEN n.msg WHEN n.h_id IS NOT NULL THEN n.h_id
                                              ELSE f.msg END,
                           'transaction_id', n.txn, 'queueName', n.e ->> 'queue', 'partition_id', n.pid,
                           'trace_id', CASE WHEN n.fresh THEN n.trace WHEN n.h_id IS NOT NULL THEN n.h_trace
                                            ELSE f.trace END,
                           'status', CASE WHEN n.fresh THEN 'queued' ELSE 'duplicate' END) ORDER BY n.i)
                FROM numbered n LEFT JOIN numbered f ON NOT n.fresh AND n.h_id IS NULL AND f.i = n.first_i),
               -- One notification per queue that received a message, unless
               -- deferred (the caller sends them after its commit).
               (SELECT count(pg_notify('queen_push', p_tenant::text || ':' || q.queue))
                FROM (SELECT DISTINCT n.e ->> 'queue' AS queue FROM numbered n WHERE n.fresh) AS q
                WHERE NOT v_defer)
        INTO v_out, v_notified;
    END IF;

    IF v_bumped THEN
        -- The one item's partition: its offset, its ready row for every
        -- group subscribed to the queue and its notification, unless
        -- deferred, in one statement.
        WITH bumped AS (
            UPDATE queen.log_partitions
            SET last_offset = v_last, last_push_at = now()
            WHERE id = v_pid
            RETURNING id)
        INSERT INTO queen.log_ready (subscription_id, partition_id)
        SELECT s.id, b.id FROM bumped b JOIN queen.log_subscriptions s ON s.queue_id = v_qid
        ON CONFLICT DO NOTHING;
        IF NOT v_defer THEN
            PERFORM pg_notify('queen_push', p_tenant::text || ':' || v_queue);
        END IF;
    END IF;

    RETURN v_out;
END
$$;

-- log_push_v1(tenant, items) -> jsonb array, request order:
-- [{index, message_id, transaction_id, queueName, partition_id, trace_id,
--   status: queued|duplicate}].
-- items: [{queue, partition? = "Default", payload, transactionId?, traceId?}];
-- the transactionId defaults to the new message id; traceId (a uuid) is
-- stored with the message, none is NULL (nothing is generated). One transaction: every item
-- lands or (on a raise) none. Raises 22023 log_bad_tenant (NULL tenant) and
-- the refusals of _log_push_check_v1; 40001 log_partition_vanished.
CREATE OR REPLACE FUNCTION queen.log_push_v1(p_tenant UUID, p_items JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_void TEXT;
BEGIN
    -- Assignments, not PERFORM: an expression, evaluated without the
    -- executor start-up a query pays (see _log_push_apply_v1's cost note).
    v_void := queen._log_require_tenant_v1(p_tenant)::text;
    v_void := queen._log_push_check_v1(p_items, 'items')::text;
    RETURN to_jsonb(queen._log_push_apply_v1(p_tenant, p_items));
END
$$;

-- log_push_group_v1(tenants, items, producers, defer_notify)
--   -> TABLE (n, result, err_state, err_message, err_detail)
--
-- Contract: several pushes of different callers in one transaction, one
-- commit and one WAL flush (the broker's group commit, src/engine/log.c).
-- tenants, items and producers are JSON arrays of one length; member i
-- (0-based) is log_push_v1(tenants[i], items[i]) run with queen.producer =
-- producers[i] (a string; null or "" for none: log_producer.sql). One row per member,
-- n = i, in n order: result = what that call returns, as text, and the
-- err_* columns NULL; or, when its items are refused (_log_push_problem_v1),
-- result NULL and err_state, err_message, err_detail as that call would
-- have raised them: nothing of that member is written and the others are.
-- defer_notify true: every member's NOTIFY is deferred as queen.notify =
-- 'after_commit' does (the caller sends them after the commit); false: as
-- the caller's own setting says. Raises 22023 log_bad_request (not three
-- arrays of one length), log_bad_tenant (a NULL tenant), 22P02 (a tenant
-- that is not a uuid) and whatever an apply raises (40001
-- log_partition_vanished, 55P03 below): nothing of the group commits, and
-- the broker then runs every member alone for its own verdict.
--
-- Why it is written the way it is:
--   - Messages of one partition go in in member (arrival) order, so they
--     take their offsets in the order their requests were made and are
--     answered, and a member's dedup sees the messages of the members before
--     it, as a later call sees an earlier one's. Messages of different
--     partitions have no order between them.
--   - Members of one tenant and producer are batched: ONE
--     _log_push_apply_v1 call over the batch's items concatenated, in member
--     order, its results split back per member (index renumbered). One call
--     over several items decides exactly as one call per item in item order
--     (the same statuses, offsets and named duplicates: the both_ways test of
--     tests/sql/log_push.sql), and a batch pays the apply's statement start-ups once,
--     not once per member: they are most of a one-message push's cost in the
--     database (see _log_push_apply_v1). A tenant's batch ends at a member of
--     another producer (the producer is one setting per call), which starts
--     the next; batches apply in the order they began, so each partition's
--     messages stay in member order. Batching per partition instead (each
--     one-partition batch on the single-pair path) was no faster: measured
--     2026-12-03 through the broker (c=32, one-message pushes over 16
--     partitions, durable, 2-core machine at load 7-11 from other work, the
--     two alternated 5 s at a time): per tenant ahead in 6 of 7 pairs,
--     1,204-3,346 requests/s against 512-2,622 per partition.
--   - With more than one batch, every partition the group names that exists
--     is locked first, in ascending id: the group takes its locks in the
--     global order however its batches interleave, so two groups, or a group
--     and a call, cannot wait on each other in a cycle. A partition the group
--     creates (first use only) is the exception: a cycle through it ends at
--     the lock_timeout below. One batch locks as any push does.
--   - lock_timeout 100 ms (as kv_group.sql's group): a group stuck behind another
--     transaction's partition lock fails (55P03) and its members run alone,
--     rather than holding every member back; a wait for another group's
--     commit is a few ms.
--   - jit off: the locking statement's estimate (100 rows per JSON array,
--     squared) passes jit_above_cost, and compiling it took ~30 ms of a
--     group that runs in one.
--   - Refusals are found before anything is written (returned, not raised),
--     so a refused member costs no subtransaction and fails no other.
--   - The producer is set per apply (transaction-local, read by the column
--     default) and restored when the group is done.
-- VOLATILE (writes), PARALLEL UNSAFE, CALLED ON NULL INPUT (NULLs raise).
CREATE OR REPLACE FUNCTION queen.log_push_group_v1(p_tenants JSONB, p_items JSONB, p_producers JSONB,
                                                   p_defer_notify BOOLEAN)
RETURNS TABLE (n INTEGER, result TEXT, err_state TEXT, err_message TEXT, err_detail TEXT)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET lock_timeout = '100ms'
SET jit = off
AS $$
DECLARE
    v_n       INTEGER;
    v_i       INTEGER;
    v_j       INTEGER;
    v_x       INTEGER;
    v_b       INTEGER;
    v_cnt     INTEGER;
    v_off     INTEGER;
    v_void    TEXT;
    v_problem TEXT[];
    v_its     JSONB;
    v_key     TEXT;
    v_tenant  UUID[];
    v_prod    TEXT[];
    v_res     TEXT[];
    v_state   TEXT[];
    v_msg     TEXT[];
    v_det     TEXT[];
    v_ok      BOOLEAN[];
    v_next    INTEGER[]; -- the next member of the same batch
    v_first   INTEGER[] := '{}'; -- per batch, in the order batches began: its first and last member
    v_last    INTEGER[] := '{}';
    v_nb      INTEGER := 0;
    v_open    JSONB := '{}';     -- each tenant's open batch: {"<tenant>": batch}
    v_items   JSONB;
    v_out     JSONB[];
    v_one     JSONB[];
    v_saved   TEXT := current_setting('queen.producer', true);
BEGIN
    IF jsonb_typeof(p_tenants) IS DISTINCT FROM 'array' OR jsonb_typeof(p_items) IS DISTINCT FROM 'array'
       OR jsonb_typeof(p_producers) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_items) <> jsonb_array_length(p_tenants)
       OR jsonb_array_length(p_producers) <> jsonb_array_length(p_tenants) THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'tenants, items and producers must be arrays of one length';
    END IF;
    v_n := jsonb_array_length(p_items);
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF p_defer_notify THEN
        v_void := set_config('queen.notify', 'after_commit', true);
    END IF;
    -- The common group, one-message pushes of one tenant and one producer
    -- with nothing refused: one check over every item, one apply, and the
    -- results handed back in one statement, without the member loops below
    -- (their expressions were a fifth of such a group's time). It decides
    -- what the loops decide: the same one batch, the same items in member
    -- order. The conditions are jsonpath expressions (no query); anything
    -- else, a refused member among them, goes member by member below.
    -- (strict: lax mode would look inside each member and compare across
    -- types as unknown.)
    IF NOT jsonb_path_exists(p_items, 'strict $[*] ? (@.type() != "array" || @.size() != 1)')
       AND NOT jsonb_path_exists(p_tenants, 'strict $[*] ? (@.type() != "string" || @ != $t)',
                                 jsonb_build_object('t', p_tenants -> 0))
       AND NOT jsonb_path_exists(p_producers,
                                 'strict $[*] ? ((@.type() != "string" && @.type() != "null") || @ != $p)',
                                 jsonb_build_object('p', p_producers -> 0)) THEN
        v_items := jsonb_path_query_array(p_items, 'strict $[*][0]');
        IF queen._log_push_problem_v1(v_items, 'items') IS NULL THEN
            -- (The tenant is a string here, so never NULL: a bad uuid raises 22P02 in the cast.)
            v_void := set_config('queen.producer', COALESCE(p_producers ->> 0, ''), true);
            v_out := queen._log_push_apply_v1((p_tenants ->> 0)::uuid, v_items);
            v_void := set_config('queen.producer', COALESCE(v_saved, ''), true);
            RETURN QUERY SELECT (r.o - 1)::integer, jsonb_build_array(r.v || '{"index": 0}')::text,
                                NULL::text, NULL::text, NULL::text
                         FROM unnest(v_out) WITH ORDINALITY AS r(v, o) ORDER BY r.o;
            RETURN;
        END IF;
    END IF;

    v_res := array_fill(NULL::text, ARRAY[v_n]);
    v_state := v_res;
    v_msg := v_res;
    v_det := v_res;
    v_prod := v_res;
    v_tenant := array_fill(NULL::uuid, ARRAY[v_n]);
    v_ok := array_fill(false, ARRAY[v_n]);
    v_next := array_fill(NULL::integer, ARRAY[v_n]);

    -- Every member judged, and put in its batch, before anything is written.
    -- (Expressions only, no query: see _log_push_apply_v1's cost note.)
    FOR v_i IN 1 .. v_n LOOP
        v_tenant[v_i] := (p_tenants ->> (v_i - 1))::uuid;
        v_void := queen._log_require_tenant_v1(v_tenant[v_i])::text;
        v_prod[v_i] := COALESCE(p_producers ->> (v_i - 1), '');
        v_its := p_items -> (v_i - 1);
        v_problem := queen._log_push_problem_v1(v_its, 'items');
        IF v_problem IS NOT NULL THEN
            v_state[v_i] := v_problem[1];
            v_msg[v_i] := v_problem[2];
            v_det[v_i] := v_problem[3];
            CONTINUE;
        END IF;
        IF jsonb_array_length(v_its) = 0 THEN
            v_res[v_i] := '[]';
            CONTINUE;
        END IF;
        v_ok[v_i] := true;
        v_key := v_tenant[v_i]::text;
        v_b := (v_open ->> v_key)::integer;
        IF v_b IS NOT NULL AND v_prod[v_first[v_b]] = v_prod[v_i] THEN
            v_next[v_last[v_b]] := v_i;
            v_last[v_b] := v_i;
        ELSE
            v_nb := v_nb + 1;
            v_first[v_nb] := v_i;
            v_last[v_nb] := v_i;
            v_open := v_open || jsonb_build_object(v_key, v_nb);
        END IF;
    END LOOP;

    IF v_nb > 1 THEN
        -- The existing partitions of every batch, locked in the global order
        -- first. (A lookup per pair, OFFSET 0: see _log_push_apply_v1.)
        PERFORM 1 FROM queen.log_partitions lp
        WHERE lp.id = ANY (ARRAY(
            SELECT x.id
            FROM (SELECT DISTINCT v_tenant[m.o::integer] AS t, (e ->> 'queue') COLLATE "C" AS qn,
                         COALESCE(e ->> 'partition', 'Default') COLLATE "C" AS pn
                  FROM jsonb_array_elements(p_items) WITH ORDINALITY AS m(its, o)
                  CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN v_ok[m.o::integer] THEN m.its
                                                               ELSE '[]' END) AS e) AS s
            CROSS JOIN LATERAL (SELECT lp2.id
                                FROM queen.queues q
                                JOIN queen.log_partitions lp2 ON lp2.queue_id = q.id AND lp2.name = s.pn
                                WHERE q.tenant_id = s.t AND q.name = s.qn
                                OFFSET 0) AS x))
        ORDER BY lp.id
        FOR NO KEY UPDATE;
    END IF;

    FOR v_b IN 1 .. v_nb LOOP
        v_i := v_first[v_b];
        v_void := set_config('queen.producer', v_prod[v_i], true);
        IF v_next[v_i] IS NULL THEN
            v_res[v_i] := to_jsonb(queen._log_push_apply_v1(v_tenant[v_i], p_items -> (v_i - 1)))::text;
            CONTINUE;
        END IF;
        v_items := '[]';
        v_j := v_i;
        WHILE v_j IS NOT NULL LOOP
            v_items := v_items || (p_items -> (v_j - 1));
            v_j := v_next[v_j];
        END LOOP;
        v_out := queen._log_push_apply_v1(v_tenant[v_i], v_items);
        v_off := 0;
        v_j := v_i;
        WHILE v_j IS NOT NULL LOOP
            v_cnt := jsonb_array_length(p_items -> (v_j - 1));
            v_one := '{}';
            FOR v_x IN 1 .. v_cnt LOOP
                v_one := array_append(v_one, v_out[v_off + v_x] || jsonb_build_object('index', v_x - 1));
            END LOOP;
            v_res[v_j] := to_jsonb(v_one)::text;
            v_off := v_off + v_cnt;
            v_j := v_next[v_j];
        END LOOP;
    END LOOP;
    IF v_nb > 0 THEN
        v_void := set_config('queen.producer', COALESCE(v_saved, ''), true);
    END IF;

    RETURN QUERY SELECT (r.o - 1)::integer, r.res, r.st, r.mg, r.dt
                 FROM unnest(v_res, v_state, v_msg, v_det) WITH ORDINALITY AS r(res, st, mg, dt, o) ORDER BY r.o;
END
$$;

-- log_notify_announce_v1(batch) -> integer: the deferred half of pushes'
-- NOTIFY (see the top of this file), for any number of them at once. batch:
-- [{"t": tenant, "r": results}, ...], results as log_push_v1 returned it (an
-- array) or as log_transaction_wire_v1 did (an object whose results hold the
-- pushes as type 'push'). One pg_notify per (tenant, queue) that received a
-- message (status 'queued'), however many elements name it; an element with
-- no tenant notifies nothing. Returns the count. Run it in its own
-- transaction after the pushes committed; the broker's notifier does, with
-- synchronous_commit off (a notification is never durable anyway, and the
-- lock it takes is held until that transaction's commit is flushed), once
-- for every push committed since its previous statement: one set-based
-- statement, where one function call per push cost the notifier's backend
-- ~370 us per message under the wire benchmark (bench/RESULTS.md).
-- Its payload is '<tenant>:<queue>' chr(31) '<messages>': how many messages
-- the batch queued for the queue (an element may stand for n of them: "n"), so that a listener wakes that many waiters
-- of each consumer group rather than all of them (src/engine/notify.c). A
-- queue name holds no control character, so the count parses from the end;
-- a listener also takes the bare '<tenant>:<queue>' (log_push_v1's own
-- NOTIFY, an older broker's) as "some": wake every waiter of the queue.
CREATE OR REPLACE FUNCTION queen.log_notify_announce_v1(p_batch JSONB)
RETURNS INTEGER
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    -- plpgsql, not sql: its one query is planned once per session, where a
    -- LANGUAGE sql body that cannot be inlined is planned again on every call.
    RETURN (SELECT count(pg_notify('queen_push', s.channel_key || chr(31) || s.n))::integer
    FROM (SELECT (b ->> 't')::uuid::text || ':' || (e ->> 'queueName') AS channel_key,
                 -- an element's n: the messages it stands for (the broker folds a push's per queue)
                 sum(CASE WHEN jsonb_typeof(e -> 'n') = 'number' AND (e ->> 'n')::numeric >= 1
                          THEN LEAST((e ->> 'n')::numeric, 1000000000)::bigint ELSE 1 END) AS n
          FROM jsonb_array_elements(CASE jsonb_typeof(p_batch) WHEN 'array' THEN p_batch ELSE '[]' END) AS b
          CROSS JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof(b -> 'r')
                                                      WHEN 'object' THEN COALESCE(b -> 'r' -> 'results', '[]')
                                                      WHEN 'array' THEN b -> 'r'
                                                      ELSE '[]' END) AS e
          WHERE jsonb_typeof(b -> 't') = 'string'
            AND e ->> 'status' = 'queued' AND COALESCE(e ->> 'type', 'push') = 'push'
            AND e ->> 'queueName' IS NOT NULL
          GROUP BY 1) AS s);
END
$$;

-- log_notify_pushed_v1(tenant, results) -> integer: the same for one push.
CREATE OR REPLACE FUNCTION queen.log_notify_pushed_v1(p_tenant UUID, p_results JSONB)
RETURNS INTEGER
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$
    SELECT queen.log_notify_announce_v1(jsonb_build_array(jsonb_build_object('t', p_tenant, 'r', p_results)));
$$;
