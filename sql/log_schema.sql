-- log_schema.sql: the tables of the message log, and the helpers every
-- log function shares (name check, timestamp rendering, and the argument
-- checks that raise the same refusal wherever a tenant or a name comes in).
--
-- Owns: queen.queues, queen.log_partitions, queen.log_messages,
--       queen.log_consumers, queen.log_subscriptions, queen.log_ready,
--       queen.log_dead_letters,
--       queen.log_name_ok_v1, queen.log_iso_v1,
--       queen._log_require_tenant_v1, queen._log_require_name_v1,
--       queen._log_require_queue_v1,
--       queen._log_page_limit_v1, queen._log_page_v1,
--       queen._log_retention_seconds_v1, queen._log_partition_retry_v1,
--       queen._tenant_limit_v1, queen._log_tenant_room_v1,
--       queen.log_partition_counts, queen._log_partition_count_add_v1.
-- May call: schema.sql's schema helpers (schema.sql also creates the schema), limits.sql's
-- budgets (_input_limit_v1). Never names
-- queen.kv.
-- Applied at every boot, statement by statement: everything here is
-- CREATE TABLE IF NOT EXISTS, CREATE OR REPLACE, or one of schema.sql's helpers
-- (columns, indexes, storage options: no table lock when nothing changes),
-- and applying it twice leaves the catalog identical (the one data step,
-- the backfill of log_subscriptions and log_ready, runs once).
--
-- Lock order (log and kv alike): queen.kv -> (timers) -> advisory ->
-- queen.queues -> queen.log_partitions -> queen.log_consumers -> leaves
-- (log_messages, log_dead_letters, log_subscriptions, log_ready). Every
-- function in log_push.sql-006 takes its row locks in that order; the comments there
-- say where.
--
-- Identity: queues are per tenant (tenant_id, name); partitions per queue by
-- name; a message is (partition_id, msg_offset); a cursor is
-- (partition_id, consumer_group). Names are COLLATE "C" so every ordering (and
-- so every lock order over them) is the same on every host.
--
-- Foreign keys cascade from queue to everything under it, so deleting a queue
-- is one DELETE. Pushes lock their partition FOR NO KEY UPDATE (not FOR
-- UPDATE) so that the FOR KEY SHARE a foreign-key check takes on it (a pop
-- creating a cursor row) never waits behind a push.

CREATE TABLE IF NOT EXISTS queen.queues (
    id                   UUID NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    tenant_id            UUID NOT NULL,
    name                 TEXT COLLATE "C" NOT NULL,
    -- leaseTime: 60 when a push creates the queue, 300 when configure does.
    lease_time           INTEGER NOT NULL DEFAULT 60 CHECK (lease_time >= 1),
    retry_limit          INTEGER NOT NULL DEFAULT 3 CHECK (retry_limit >= 0),
    dedup_window_seconds INTEGER NOT NULL DEFAULT 3600 CHECK (dedup_window_seconds >= 0),
    -- 0 = keep consumed messages forever.
    retention_seconds    INTEGER NOT NULL DEFAULT 0 CHECK (retention_seconds >= 0),
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
-- Columns added after the table first shipped (schema.sql's _schema_add_column_v1,
-- so a database created by an older broker gains them at the next boot).
-- namespace, task: the labels configure sets (the reference broker's
-- create() sends them beside the queue); NULL = no label, '' is never
-- stored. GET /api/v1/pop?namespace=&task= selects queues by them.
SELECT queen._schema_add_column_v1('queen.queues', 'namespace', 'TEXT');
SELECT queen._schema_add_column_v1('queen.queues', 'task', 'TEXT');
-- completedRetentionSeconds: the reference broker's name for what
-- retention_seconds does here (drop consumed messages older than it). Both
-- are kept as given, so configure echoes each; maintenance (log_maintenance.sql) uses the
-- smaller of the two that are set (_log_retention_seconds_v1).
SELECT queen._schema_add_column_v1('queen.queues', 'completed_retention_seconds',
    'INTEGER NOT NULL DEFAULT 0 CHECK (completed_retention_seconds >= 0)');
-- The options configure accepts and echoes but does not act on yet (delays,
-- encryption, eviction, ...: log_queues.sql's _log_queue_option_specs_v1 says which),
-- as given: {name: value}. A name absent here takes its default.
SELECT queen._schema_add_column_v1('queen.queues', 'stored_options', $$JSONB NOT NULL DEFAULT '{}'::jsonb$$);

-- One row per (queue, partition name). Its row lock (FOR NO KEY UPDATE)
-- serialises the pushes to the partition and so allocates offsets: last_offset
-- is the offset of the newest message, bumped once per push call.
-- Updated by every push (last_offset, last_push_at, neither indexed: HOT).
CREATE TABLE IF NOT EXISTS queen.log_partitions (
    id           UUID NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    queue_id     UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name         TEXT COLLATE "C" NOT NULL,
    last_offset  BIGINT NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_push_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
);
-- Storage, by analogy with queen.kv's counters (kv.sql), not
-- measured: one row rewritten by every push. fillfactor 70 leaves room on the
-- page for HOT updates; scale_factor 0 + threshold 500 vacuums a small,
-- hot table on dead-tuple count instead of on a fraction of its size.
-- Measured 2026-11-30 (2-core dev VM, fsync off), question "do the per-push
-- updates stay HOT?": 8 partitions, 2 clients pushing one message and popping
-- with autoAck for 20 s: 100.0% HOT (49165 of 49178) at fillfactor 70, and
-- 100.0% (27929 of 27929) at fillfactor 100 too. So at this size the 70 is
-- not what keeps it HOT (page pruning is); it stays by analogy for tables
-- whose partitions share pages with many others. Reproduce:
--   pgbench -n -c 2 -T 20 -f push.sql -f pop.sql, then n_tup_upd and
--   n_tup_hot_upd from pg_stat_user_tables (push.sql: log_push_v1 of one item
--   to partition 'p' || random(0,7); pop.sql: log_pop_v1(..., 10, NULL, true, NULL)).
SELECT queen._schema_set_options_v1('queen.log_partitions',
    ARRAY['fillfactor=70', 'autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=500']);

-- The log. Inserted by push, read by pop, deleted only by retention (log_maintenance.sql) and
-- by the cascade of a queue or partition delete. Never updated.
CREATE TABLE IF NOT EXISTS queen.log_messages (
    partition_id   UUID NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
    msg_offset     BIGINT NOT NULL,
    id             UUID NOT NULL DEFAULT gen_random_uuid(),
    transaction_id TEXT COLLATE "C" NOT NULL,
    payload        JSONB NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, msg_offset)
);
-- The dedup probe (push) and the ack lookup (transactionId -> offset).
SELECT queen._schema_create_index_v1('idx_log_messages_txn',
    'CREATE INDEX idx_log_messages_txn ON queen.log_messages (partition_id, transaction_id)');
-- Storage, a rule rather than a tuning number: a partition empties
-- (retention) and refills by design, and heap truncation at the end of a
-- vacuum takes ACCESS EXCLUSIVE, which would stall every pop of every
-- partition for its duration (the same reason queen.kv carries
-- vacuum_truncate = off).
-- Observed 2026-12-02 in the 30-minute soak (bench/SOAK.md: 2-core VM shared
-- with other builds, durable cluster, 17.6 pushes of 10 messages/s and as
-- many consumed, one queue with 120 s retention, one never consumed): heap
-- 0.90 -> 85.31 MiB and indexes 0.82 -> 85.33 MiB, 12 autovacuums (median
-- 1.18 s, max 4.01 s), at most 30000 dead tuples, and no lock wait logged on
-- the table (every wait over 100 ms was NOTIFY's commit lock).
-- Reproduce: make soak.
SELECT queen._schema_set_options_v1('queen.log_messages', ARRAY['vacuum_truncate=off']);
-- The traceId a push gave (a uuid, as the reference broker stores it); NULL
-- when the push gave none. Returned by push and pop.
SELECT queen._schema_add_column_v1('queen.log_messages', 'trace_id', 'UUID');

-- One cursor per (partition, consumer group).
--   committed_offset  every offset <= it is consumed by the group.
--   batch_end         last offset of the newest leased batch; while
--                     committed_offset < batch_end and the lease is gone, the
--                     range (committed_offset, batch_end] is redelivered.
--   delivery_attempt  deliveries of that range (1 = first).
--   lease_id/expires  the one live lease of the pair; claimable again when
--                     NULL or expired.
--   fail_offset/count failures counted against the queue's retryLimit for the
--                     message at fail_offset.
--   expired_count     leases of the range (committed_offset, batch_end] that
--                     expired without an ack: one failed attempt for every
--                     message in it (log_pop.sql's _log_pop_expired_v1; 0 when a pop
--                     delivers a new batch).
--   claimed_at        last pop: a queue-level pop prefers the least recent.
-- The row lock is the claim: pop takes it with FOR UPDATE SKIP LOCKED.
CREATE TABLE IF NOT EXISTS queen.log_consumers (
    partition_id     UUID NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
    consumer_group   TEXT COLLATE "C" NOT NULL,
    committed_offset BIGINT NOT NULL DEFAULT 0,
    batch_end        BIGINT NOT NULL DEFAULT 0,
    delivery_attempt INTEGER NOT NULL DEFAULT 0,
    lease_id         UUID,
    lease_expires_at TIMESTAMPTZ,
    fail_offset      BIGINT NOT NULL DEFAULT 0,
    fail_count       INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    claimed_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
);
-- expired_count (above): added after the table first shipped.
SELECT queen._schema_add_column_v1('queen.log_consumers', 'expired_count', 'INTEGER NOT NULL DEFAULT 0');
-- Lease extension and requiredLeases find the cursors of a lease by its id
-- alone. It makes the pop and the releasing ack non-HOT (lease_id changes);
-- the other acks (cursor moves inside a live lease) stay HOT. Not unique: a
-- pop that claims several partitions (log_pop.sql, partitions=N) gives every cursor
-- it claims the same lease id, which renews as one. The unique index of
-- that name, made by older brokers, is dropped once (a boot that finds it
-- gone takes no lock).
SELECT queen._schema_create_index_v1('idx_log_consumers_lease_id',
    'CREATE INDEX idx_log_consumers_lease_id ON queen.log_consumers (lease_id) WHERE lease_id IS NOT NULL');
DO $$ BEGIN
    IF to_regclass('queen.idx_log_consumers_lease') IS NOT NULL THEN
        DROP INDEX queen.idx_log_consumers_lease;
    END IF;
END $$;
-- Storage, first chosen by analogy with queen.kv (kv.sql): every pop and
-- every ack rewrites the row. fillfactor 70 keeps room
-- for HOT updates, and vacuum is triggered by dead-tuple count (threshold
-- 500), not by a fraction of a table that stays small while it churns.
-- Measured 2026-11-30 (2-core dev VM, fsync off), question "are leased pops
-- and acks HOT?": NO. 2 clients, one pushing, one doing pop (batch 10, with
-- lease) + ack of the batch's last message, 15 s at 1661 tps: 0 of 18940
-- updates HOT, 18940 dead tuples, 8 live rows in 528 KiB of heap and 424 KiB
-- of the lease index (then unique), because that index covers lease_id and every
-- pop and releasing ack changes it (autoAck pops, lease_id NULL -> NULL:
-- 100% HOT). The index serves lease extension and requiredLeases (lookup by
-- lease id alone); dropping it trades a scan per extension for HOT pops.
-- Reproduce: pgbench -n -c 2 -T 15 -f push.sql
-- -f popack.sql (popack.sql: log_ack_v1 of the last message of a
-- log_pop_v1(..., 'g2', 10, NULL, false, NULL) body), then pg_stat_user_tables.
-- Measured 2026-12-02 (the 30-minute soak, bench/SOAK.md: 2-core VM shared
-- with other builds, durable cluster), question "do those non-HOT pops and
-- acks bloat the cursors enough to drop the lease index?": no. 2 consumers,
-- each a leased pop of up to 10 and one transaction acking the batch, 17.5
-- batches/s for 1800 s over 8 partitions: HOT ratio 0.816 of the table's
-- updates, at most 3377 dead tuples, 30 autovacuums (median 0.02 s, max
-- 0.23 s), the table and its indexes 0.09 -> 0.28 MiB. The index stays; with
-- fillfactor 70 and threshold 500 the cursors' churn is vacuumed at every
-- naptime for a few hundredths of a second. Reproduce: make soak.
SELECT queen._schema_set_options_v1('queen.log_consumers',
    ARRAY['fillfactor=70', 'autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=500']);

-- One row per (queue, consumer group) that has ever popped the queue (or
-- been sought on it): the group's subscription. start_at is where a group
-- new to the queue starts (mode 'new' or subscriptionFrom; NULL = from the
-- beginning), fixed at its first contact, so every partition's first cursor
-- is seeded from it without looking at the group's other cursors. Created
-- once per (queue, group) by log_pop.sql's _log_subscribe_v1, which also seeds the
-- group's ready rows; deleted with the group (log_groups.sql) or the queue (cascade).
CREATE TABLE IF NOT EXISTS queen.log_subscriptions (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id       UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group TEXT COLLATE "C" NOT NULL,
    start_at       TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (queue_id, consumer_group)
);

-- The partitions that may hold work for a subscription: a queue-level pop
-- walks these (by partition id, from a per-session position: log_pop.sql), never
-- every partition of the queue, so its cost does not grow with partitions
-- that are drained. Invariant: a partition with a message past the group's
-- cursor has a row. Kept by whoever makes work appear, in the same
-- transaction as the work: a push or requeue that bumps last_offset inserts
-- the row for every subscription of the queue (log_push.sql, log_dlq.sql, under the
-- partition's FOR NO KEY UPDATE); a seek inserts its group's (log_groups.sql). Removed
-- by the pop that finds the partition drained for the group, under the
-- partition's FOR SHARE (so no push can commit between its look and its
-- delete: log_pop.sql). A row without work costs one visit and is removed then.
-- No foreign keys: a key-share lock per inserted row, on the subscription
-- (one row that every push of the queue would lock: a MultiXact per
-- concurrent push) and on the partition (a group's first contact inserts a
-- row per partition: one lock written on each). Rows are deleted with
-- their subscription (log_groups.sql), queue (log_queues.sql) or partition (log_maintenance.sql); a row whose
-- partition is gone anyway is dropped by the pop that meets it.
CREATE TABLE IF NOT EXISTS queen.log_ready (
    subscription_id BIGINT NOT NULL,
    partition_id    UUID NOT NULL,
    PRIMARY KEY (subscription_id, partition_id)
);
-- The primary key is the table's one index: every reader names the
-- subscription (log_maintenance.sql's reclaim finds a partition's rows through its queue's
-- subscriptions). A second index on partition_id alone, made by older
-- brokers, is dropped once (a boot that finds it gone takes no lock): it
-- offered the pop's walk an ordered scan of every subscription's rows, which
-- a generic plan made while the table held one subscription took, and which
-- then read the dead rows of deleted queues on every step (bench/RESULTS.md,
-- 2026-12-04: 0.17x at 10,000 partitions).
DO $$ BEGIN
    IF to_regclass('queen.idx_log_ready_partition') IS NOT NULL THEN
        DROP INDEX queen.idx_log_ready_partition;
    END IF;
END $$;
-- Inserted and deleted as partitions fill and drain: vacuumed on dead-tuple
-- count, like the cursors.
SELECT queen._schema_set_options_v1('queen.log_ready',
    ARRAY['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=500']);

-- A database whose cursors predate the two tables above gets their rows
-- once: a subscription per (queue, group) with cursors, from the beginning
-- (a group that started 'new' pinned a cursor on every partition it had
-- then, so only partitions made since lack one, and their messages all
-- follow its start), and a ready row per cursor behind its partition's last
-- offset or partition without the group's cursor. Runs only while
-- log_subscriptions is empty and cursors exist (boots take turns on the
-- schema lock), so later boots pay one probe.
INSERT INTO queen.log_subscriptions (queue_id, consumer_group, start_at, created_at)
SELECT p.queue_id, c.consumer_group, NULL, min(c.created_at)
FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
WHERE NOT EXISTS (SELECT 1 FROM queen.log_subscriptions)
GROUP BY p.queue_id, c.consumer_group
ON CONFLICT (queue_id, consumer_group) DO NOTHING;
INSERT INTO queen.log_ready (subscription_id, partition_id)
SELECT s.id, p.id
FROM queen.log_subscriptions s
JOIN queen.log_partitions p ON p.queue_id = s.queue_id
LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = s.consumer_group
WHERE p.last_offset > COALESCE(c.committed_offset, 0)
  AND NOT EXISTS (SELECT 1 FROM queen.log_ready)
ON CONFLICT DO NOTHING;

-- Messages that failed past the queue's retryLimit. Names are copied so a
-- dead letter outlives its partition (log_maintenance.sql may reclaim an idle partition);
-- it dies with its queue.
CREATE TABLE IF NOT EXISTS queen.log_dead_letters (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      UUID NOT NULL,
    queue_id       UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    queue_name     TEXT COLLATE "C" NOT NULL,
    partition_id   UUID NOT NULL,
    partition_name TEXT COLLATE "C" NOT NULL,
    consumer_group TEXT COLLATE "C" NOT NULL,
    msg_offset     BIGINT NOT NULL,
    message_id     UUID NOT NULL,
    transaction_id TEXT COLLATE "C" NOT NULL,
    payload        JSONB NOT NULL,
    error          TEXT,
    attempts       INTEGER NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    failed_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- The cascade of a queue delete finds its dead letters through this.
SELECT queen._schema_create_index_v1('idx_log_dead_letters_queue',
    'CREATE INDEX idx_log_dead_letters_queue ON queen.log_dead_letters (queue_id)');

-- log_name_ok_v1(name) -> true when name is usable as a queue, partition or
-- consumer-group name: a non-NULL string of 1..255 bytes with no control
-- character. Total (NULL -> false), never raises.
CREATE OR REPLACE FUNCTION queen.log_name_ok_v1(p_name TEXT)
RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT p_name IS NOT NULL
       AND octet_length(p_name) BETWEEN 1 AND 255
       AND p_name !~ '[[:cntrl:]]'
$$;

-- log_uuid_ok_v1(text) -> true when text is a uuid in its 36-character
-- form, 8-4-4-4-12 hex digits of either case (what every uuid field of the
-- log accepts; the uuid type alone would also take braces and hyphen-less
-- forms). Total (NULL -> false), never raises. Every hex digit maps to '0'
-- and the result must be the template: one pass over the text, where the
-- equivalent regular expression cost 2-3 times as much per call (it runs
-- several times in every transaction bundle).
CREATE OR REPLACE FUNCTION queen.log_uuid_ok_v1(p_text TEXT)
RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT COALESCE(translate(p_text, '0123456789abcdefABCDEF', '0000000000000000000000')
                    = '00000000-0000-0000-0000-000000000000', false)
$$;

-- _log_require_tenant_v1(tenant) -> void. Raises 22023 log_bad_tenant
-- (DETAIL 'the tenant argument is NULL') when tenant is NULL; the first
-- check of the log functions that take a tenant argument, so the refusal is
-- one text everywhere (log_pop_v1 writes it out: see there why). Reads
-- nothing (IMMUTABLE; raising is allowed); not STRICT, since NULL is the
-- very case it is for.
CREATE OR REPLACE FUNCTION queen._log_require_tenant_v1(p_tenant UUID)
RETURNS VOID
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION 'log_bad_tenant' USING ERRCODE = '22023',
            DETAIL = 'the tenant argument is NULL';
    END IF;
END
$$;

-- _log_require_name_v1(value, code, what) -> void. Raises 22023 with
-- message code (log_bad_queue, ...) and DETAIL '<what> must be 1..255 bytes
-- without control characters' unless log_name_ok_v1(value). NULL is refused
-- like any bad name (an optional name is checked only when given).
-- IMMUTABLE, not STRICT, as above.
CREATE OR REPLACE FUNCTION queen._log_require_name_v1(p_value TEXT, p_code TEXT, p_what TEXT)
RETURNS VOID
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    IF NOT queen.log_name_ok_v1(p_value) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = p_code,
            DETAIL = p_what || ' must be 1..255 bytes without control characters';
    END IF;
END
$$;

-- _log_require_queue_v1(tenant, queue) -> the id of the tenant's queue of
-- that name. Raises 22023 log_no_such_queue (DETAIL 'no such queue') when
-- there is none: the refusal of every call that acts on an existing queue
-- (log_groups.sql's seek, log_resources.sql's detail, partitions and clear). Reads only, takes no
-- lock (the caller locks what it changes, in the order of the header).
CREATE OR REPLACE FUNCTION queen._log_require_queue_v1(p_tenant UUID, p_queue TEXT)
RETURNS UUID
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_qid UUID;
BEGIN
    SELECT id INTO v_qid FROM queen.queues WHERE tenant_id = p_tenant AND name = p_queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'log_no_such_queue' USING ERRCODE = '22023', DETAIL = 'no such queue';
    END IF;
    RETURN v_qid;
END
$$;

-- _log_partition_retry_v1(try) -> try + 1. The retry count of a call whose
-- partition locks found a row gone (deleted in between by log_maintenance.sql's reclaim or a
-- queue delete): at the third raises 40001 log_partition_vanished, which a
-- client retries. Shared by push (log_push.sql) and requeue (log_dlq.sql). IMMUTABLE, as above.
CREATE OR REPLACE FUNCTION queen._log_partition_retry_v1(p_try INTEGER)
RETURNS INTEGER
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    IF p_try + 1 >= 3 THEN
        RAISE EXCEPTION 'log_partition_vanished' USING ERRCODE = '40001',
            DETAIL = 'a partition was deleted concurrently three times in a row; retry the call';
    END IF;
    RETURN p_try + 1;
END
$$;

-- The keyset listings (log_dlq.sql dead letters, log_browse.sql messages, log_traces.sql traces) page the
-- same way: limit rows (NULL = pageDefault, 1..pageMax: limits.sql) whose cursor is past after, and
-- a nextAfter naming the last row of a full page. These two hold that rule.

-- _log_page_limit_v1(limit, after, after_what) -> the page size (limit, or
-- pageDefault when NULL: limits.sql). Raises 22023 log_bad_limit (not
-- 1..pageMax) and then log_bad_after (after < 0; DETAIL 'after must be <after_what> >= 0'); a NULL
-- after is the first page. IMMUTABLE, not STRICT, as above.
CREATE OR REPLACE FUNCTION queen._log_page_limit_v1(p_limit INTEGER, p_after BIGINT, p_after_what TEXT)
RETURNS INTEGER
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit INTEGER := COALESCE(p_limit, queen._input_limit_v1('pageDefault'));
BEGIN
    IF v_limit NOT BETWEEN 1 AND queen._input_limit_v1('pageMax') THEN
        RAISE EXCEPTION 'log_bad_limit' USING ERRCODE = '22023',
            DETAIL = format('limit must be 1..%s, got %s', queen._input_limit_v1('pageMax'), v_limit);
    END IF;
    IF p_after < 0 THEN
        RAISE EXCEPTION 'log_bad_after' USING ERRCODE = '22023',
            DETAIL = format('after must be %s >= 0', p_after_what);
    END IF;
    RETURN v_limit;
END
$$;

-- _log_page_v1(key, rows, limit, cursor) -> {<key>: rows, nextAfter}. rows:
-- the page, a JSON array in cursor order of at most limit rows. nextAfter is
-- the member cursor of its last row when the page is full (the caller's
-- after for the next page; a full last page costs one empty read), else null.
CREATE OR REPLACE FUNCTION queen._log_page_v1(p_key TEXT, p_rows JSONB, p_limit INTEGER, p_cursor TEXT)
RETURNS JSONB
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(p_key, p_rows, 'nextAfter',
                              CASE WHEN jsonb_array_length(p_rows) = p_limit THEN p_rows -> -1 -> p_cursor END)
$$;

-- _log_retention_seconds_v1(retention, completed) -> the age in seconds past
-- which a consumed message of the queue is dropped; 0 = keep. The smaller of
-- the two that are > 0: in the reference broker retentionSeconds drops any
-- message older than it and completedRetentionSeconds a consumed one, so a
-- consumed message goes at whichever comes first. (Dropping UNconsumed
-- messages at retentionSeconds is not done here yet.) NULL counts as 0.
CREATE OR REPLACE FUNCTION queen._log_retention_seconds_v1(p_retention INTEGER, p_completed INTEGER)
RETURNS INTEGER
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT CASE WHEN COALESCE(p_retention, 0) <= 0 THEN GREATEST(COALESCE(p_completed, 0), 0)
                WHEN COALESCE(p_completed, 0) <= 0 THEN p_retention
                ELSE LEAST(p_retention, p_completed) END
$$;

-- log_iso_v1(ts) -> ts as UTC ISO-8601 with microseconds and Z
-- ('2025-01-02T03:04:05.000001Z'); NULL -> NULL. STABLE because to_char is.
CREATE OR REPLACE FUNCTION queen.log_iso_v1(p_ts TIMESTAMPTZ)
RETURNS TEXT
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- ---- Per-tenant limits -----------------------------------------------------
-- _tenant_limit_v1(name, default) -> bigint: the per-tenant limit the
-- session carries as the setting queen.<name> (the broker and libqueen put
-- QUEEN_MAX_QUEUES_PER_TENANT and its kin in every connection's startup
-- packet: docs/settings.md), or default when the session has none (a
-- caller of the SQL API on its own connection gets the documented default).
-- 0 or less: no limit. STABLE: a setting does not change within a statement.
CREATE OR REPLACE FUNCTION queen._tenant_limit_v1(p_name TEXT, p_default BIGINT)
RETURNS BIGINT
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
    SELECT COALESCE(NULLIF(current_setting('queen.' || p_name, true), '')::bigint, p_default)
$$;

-- How many partitions each tenant has, as deltas: every statement that
-- creates or deletes partitions (log_push.sql push, log_dlq.sql requeue, log_maintenance.sql reclaim, log_queues.sql
-- queue delete) appends (tenant, +n / -n) in its own transaction, so the sum
-- of a tenant's rows is its count in any snapshot. Appends, not one counter
-- row per tenant: a counter would be one row every creating push of the
-- tenant locks until its commit. A tenant's rows are folded into one when
-- they pass 64 (_log_partition_count_add_v1), so the sum reads a few rows,
-- where counting the partitions scanned them all. Measured 2026-12-03
-- (2-core VM, --fast cluster, psql \timing, one tenant, 100,000
-- partitions): the check 15-21 ms -> 0.3-0.5 ms, a push creating a
-- partition 17-23 ms -> 3-5 ms (first call of a session excepted).
CREATE TABLE IF NOT EXISTS queen.log_partition_counts (
    tenant_id  UUID NOT NULL,
    partitions BIGINT NOT NULL
);
SELECT queen._schema_create_index_v1('idx_log_partition_counts_tenant',
    'CREATE INDEX idx_log_partition_counts_tenant ON queen.log_partition_counts (tenant_id)');
-- A database whose partitions predate the table gets its rows once (runs
-- only while the table is empty; a fold always leaves a row behind).
INSERT INTO queen.log_partition_counts (tenant_id, partitions)
SELECT q.tenant_id, count(*)
FROM queen.queues q JOIN queen.log_partitions lp ON lp.queue_id = q.id
WHERE NOT EXISTS (SELECT 1 FROM queen.log_partition_counts)
GROUP BY q.tenant_id;

-- _log_partition_count_add_v1(tenant, n) -> void: records that the calling
-- transaction created (n > 0) or deleted (n < 0) n of the tenant's
-- partitions. Past 64 rows for the tenant, folds them into one: the rows it
-- can lock at once (SKIP LOCKED: never waits on another fold), deleted and
-- summed in one statement, so any snapshot still sums to the same count.
CREATE OR REPLACE FUNCTION queen._log_partition_count_add_v1(p_tenant UUID, p_n BIGINT)
RETURNS VOID
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
BEGIN
    IF p_tenant IS NULL OR COALESCE(p_n, 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO queen.log_partition_counts (tenant_id, partitions) VALUES (p_tenant, p_n);
    IF (SELECT count(*) FROM (SELECT 1 FROM queen.log_partition_counts
                              WHERE tenant_id = p_tenant LIMIT 65) AS r) > 64 THEN
        WITH folded AS (
            DELETE FROM queen.log_partition_counts
            WHERE ctid = ANY (ARRAY(SELECT ctid FROM queen.log_partition_counts
                                    WHERE tenant_id = p_tenant FOR UPDATE SKIP LOCKED))
            RETURNING partitions)
        INSERT INTO queen.log_partition_counts (tenant_id, partitions)
        SELECT p_tenant, sum(partitions) FROM folded HAVING count(*) > 0;
    END IF;
END
$$;

-- _log_tenant_room_v1(tenant, new_queues, new_partitions) -> void: raises
-- 54000 tenant_queue_limit / tenant_partition_limit when creating that many
-- more would take the tenant past max_queues_per_tenant (default 10000) /
-- max_partitions_per_tenant (default 1000000). Called only by a caller that
-- is about to create (a push naming a missing pair, configure of a missing
-- queue): the counts are read without a lock, so the hot path (every pair
-- exists) never pays for them, and a concurrent creation for the same
-- tenant may pass a limit by what the creators add meanwhile (at most their
-- own batches; docs/api.md, "Per-tenant limits", states it). Queues are counted (at most the queue
-- limit of index entries); partitions are summed from log_partition_counts
-- (a few rows, whatever the tenant holds).
CREATE OR REPLACE FUNCTION queen._log_tenant_room_v1(p_tenant UUID, p_new_queues BIGINT, p_new_partitions BIGINT)
RETURNS VOID
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit BIGINT;
    v_have  BIGINT;
BEGIN
    IF COALESCE(p_new_queues, 0) > 0 THEN
        v_limit := queen._tenant_limit_v1('max_queues_per_tenant', 10000);
        IF v_limit > 0 THEN
            SELECT count(*) INTO v_have FROM queen.queues q WHERE q.tenant_id = p_tenant;
            IF v_have + p_new_queues > v_limit THEN
                RAISE EXCEPTION 'tenant_queue_limit' USING ERRCODE = '54000',
                    DETAIL = format('the tenant has %s queues; %s more would pass its limit of %s '
                                    '(QUEEN_MAX_QUEUES_PER_TENANT); nothing was written', v_have, p_new_queues, v_limit);
            END IF;
        END IF;
    END IF;
    IF COALESCE(p_new_partitions, 0) > 0 THEN
        v_limit := queen._tenant_limit_v1('max_partitions_per_tenant', 1000000);
        IF v_limit > 0 THEN
            SELECT COALESCE(sum(c.partitions), 0) INTO v_have
            FROM queen.log_partition_counts c WHERE c.tenant_id = p_tenant;
            IF v_have + p_new_partitions > v_limit THEN
                RAISE EXCEPTION 'tenant_partition_limit' USING ERRCODE = '54000',
                    DETAIL = format('the tenant has %s partitions; %s more would pass its limit of %s '
                                    '(QUEEN_MAX_PARTITIONS_PER_TENANT); nothing was written', v_have,
                                    p_new_partitions, v_limit);
            END IF;
        END IF;
    END IF;
END
$$;
