-- log_traces.sql: trace events a consumer records against a message
-- (its partitionId and transactionId, as every popped message carries
-- them): a name and a JSON value, looked up by message or by name, and kept
-- for a bounded time (the sweeper's log_trace_retention_step_v1).
--
-- Owns: queen.log_traces, queen.log_trace_usage, queen._log_trace_forget_v1
--       (its trigger), queen._log_trace_row_v1, queen.log_trace_add_v1,
--       queen.log_traces_by_message_v1, queen.log_traces_by_name_v1,
--       queen.log_trace_names_v1, queen.log_trace_retention_step_v1.
-- May call: schema.sql's schema helpers, log_schema.sql. Never names the kv table.
-- A trace is not part of the message: it outlives neither its tenant's
-- queue (cascade) nor the retention, and recording one takes no lock a push,
-- pop or ack waits on (an insert into a leaf; the partition is only read).
-- Budget: each tenant's stored traces (rows, and bytes of data as JSON text)
-- are counted in log_trace_usage, one row per tenant: an add counts itself in
-- and is refused past max_traces_per_tenant / max_trace_bytes_per_tenant
-- (log_schema.sql's _tenant_limit_v1), every delete (retention, a queue's cascade)
-- counts its rows out by a statement trigger. The tenant's usage row is the
-- last lock an add takes (after its insert, whose foreign key check takes
-- the queue's key share), so a queue delete, which locks the queue first and
-- the usage row in its cascade, never waits on an add in a cycle; two adds
-- of one tenant queue on that row for the moment of their commit.

CREATE TABLE IF NOT EXISTS queen.log_traces (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      UUID NOT NULL,
    queue_id       UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    partition_id   UUID NOT NULL,
    transaction_id TEXT COLLATE "C" NOT NULL,
    trace_name     TEXT COLLATE "C" NOT NULL,
    data           JSONB,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
SELECT queen._schema_create_index_v1('idx_log_traces_message',
    'CREATE INDEX idx_log_traces_message ON queen.log_traces (partition_id, transaction_id, id)');
SELECT queen._schema_create_index_v1('idx_log_traces_name',
    'CREATE INDEX idx_log_traces_name ON queen.log_traces (tenant_id, trace_name, id)');
SELECT queen._schema_create_index_v1('idx_log_traces_created',
    'CREATE INDEX idx_log_traces_created ON queen.log_traces (created_at)');
SELECT queen._schema_create_index_v1('idx_log_traces_queue',
    'CREATE INDEX idx_log_traces_queue ON queen.log_traces (queue_id)');

CREATE TABLE IF NOT EXISTS queen.log_trace_usage (
    tenant_id UUID PRIMARY KEY,
    traces    BIGINT NOT NULL DEFAULT 0,
    bytes     BIGINT NOT NULL DEFAULT 0
);
SELECT queen._schema_add_column_v1('queen.log_traces', 'data_bytes', 'INTEGER NOT NULL DEFAULT 0');

-- The trigger of every delete from log_traces: the deleted rows counted out
-- of their tenants' usage, tenants in uuid order (two sweepers' steps lock
-- the usage rows in one order).
CREATE OR REPLACE FUNCTION queen._log_trace_forget_v1()
RETURNS TRIGGER
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE queen.log_trace_usage u
    SET traces = GREATEST(u.traces - g.n, 0), bytes = GREATEST(u.bytes - g.b, 0)
    FROM (SELECT o.tenant_id, count(*) AS n, COALESCE(sum(o.data_bytes), 0) AS b
          FROM gone o GROUP BY o.tenant_id ORDER BY o.tenant_id) AS g
    WHERE u.tenant_id = g.tenant_id;
    RETURN NULL;
END
$$;
SELECT queen._schema_create_v1(
    EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'log_traces_forget'
                                      AND tgrelid = 'queen.log_traces'::regclass),
    'CREATE TRIGGER log_traces_forget AFTER DELETE ON queen.log_traces REFERENCING OLD TABLE AS gone '
    'FOR EACH STATEMENT EXECUTE FUNCTION queen._log_trace_forget_v1()');

CREATE OR REPLACE FUNCTION queen._log_trace_row_v1(t queen.log_traces, p_queue TEXT, p_partition TEXT)
RETURNS JSONB
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object('id', t.id, 'traceName', t.trace_name, 'transactionId', t.transaction_id,
                              'partitionId', t.partition_id, 'queue', p_queue, 'partition', p_partition,
                              'data', t.data, 'createdAt', queen.log_iso_v1(t.created_at))
$$;

-- log_trace_add_v1(tenant, partition_id, transaction_id, name, data) ->
-- {recorded: true, id, createdAt}. The partition must be the tenant's
-- (the message need not still be stored: a consumer may trace after its
-- ack and retention). data: any JSON value, NULL allowed, at most 64 KiB.
-- Raises 22023: log_bad_tenant, log_bad_partition_id (not a partition of
-- this tenant), log_bad_transaction_id, log_bad_trace_name (1..255 bytes,
-- no control character); 22001 log_trace_too_large; 54000 tenant_trace_limit
-- when the tenant's stored traces would pass max_traces_per_tenant (default
-- 100000) or max_trace_bytes_per_tenant (default 256 MiB), nothing recorded.
CREATE OR REPLACE FUNCTION queen.log_trace_add_v1(p_tenant UUID, p_partition_id UUID, p_txn TEXT, p_name TEXT,
                                                  p_data JSONB)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_qid   UUID;
    v_id    BIGINT;
    v_at    TIMESTAMPTZ;
    v_bytes INTEGER := COALESCE(octet_length(p_data::text), 0);
    v_rows  BIGINT;
    v_total BIGINT;
    v_max_r BIGINT := queen._tenant_limit_v1('max_traces_per_tenant', 100000);
    v_max_b BIGINT := queen._tenant_limit_v1('max_trace_bytes_per_tenant', 268435456);
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    PERFORM queen._log_require_name_v1(p_name, 'log_bad_trace_name', 'traceName');
    IF v_bytes > 65536 THEN
        RAISE EXCEPTION 'log_trace_too_large' USING ERRCODE = '22001',
            DETAIL = 'data must be at most 64 KiB of JSON';
    END IF;
    SELECT q.id INTO v_qid FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = p_partition_id AND q.tenant_id = p_tenant;
    IF v_qid IS NULL THEN
        RAISE EXCEPTION 'log_bad_partition_id' USING ERRCODE = '22023',
            DETAIL = 'partitionId names no partition of this tenant';
    END IF;
    INSERT INTO queen.log_traces (tenant_id, queue_id, partition_id, transaction_id, trace_name, data, data_bytes)
    VALUES (p_tenant, v_qid, p_partition_id, p_txn, p_name, p_data, v_bytes)
    RETURNING id, created_at INTO v_id, v_at;
    -- Counted in after the insert (the lock order above); a refusal rolls
    -- both back.
    INSERT INTO queen.log_trace_usage AS u (tenant_id, traces, bytes) VALUES (p_tenant, 1, v_bytes)
    ON CONFLICT (tenant_id) DO UPDATE SET traces = u.traces + 1, bytes = u.bytes + EXCLUDED.bytes
    RETURNING u.traces, u.bytes INTO v_rows, v_total;
    IF (v_max_r > 0 AND v_rows > v_max_r) OR (v_max_b > 0 AND v_total > v_max_b) THEN
        RAISE EXCEPTION 'tenant_trace_limit' USING ERRCODE = '54000',
            DETAIL = format('the tenant stores %s traces of %s bytes; this one would pass its limit of %s traces '
                            'or %s bytes (QUEEN_MAX_TRACES_PER_TENANT, QUEEN_MAX_TRACE_BYTES_PER_TENANT) until '
                            'retention removes older ones; nothing was recorded',
                            v_rows - 1, v_total - v_bytes, v_max_r, v_max_b);
    END IF;
    RETURN jsonb_build_object('recorded', true, 'id', v_id, 'createdAt', queen.log_iso_v1(v_at));
END
$$;

-- log_traces_by_message_v1(tenant, partition_id, transaction_id) ->
-- {traces: [trace]} in the order recorded. Reads only. Raises 22023:
-- log_bad_tenant, log_bad_transaction_id.
CREATE OR REPLACE FUNCTION queen.log_traces_by_message_v1(p_tenant UUID, p_partition_id UUID, p_txn TEXT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_txn, 'log_bad_transaction_id', 'transactionId');
    RETURN jsonb_build_object('traces', COALESCE((
        SELECT jsonb_agg(queen._log_trace_row_v1(t, q.name, p.name) ORDER BY t.id)
        FROM queen.log_traces t
        JOIN queen.queues q ON q.id = t.queue_id
        LEFT JOIN queen.log_partitions p ON p.id = t.partition_id
        WHERE t.partition_id = p_partition_id AND t.transaction_id = p_txn AND t.tenant_id = p_tenant), '[]'));
END
$$;

-- log_traces_by_name_v1(tenant, name, limit, after) -> {traces: [trace],
-- nextAfter}: the tenant's traces of that name with id > after, oldest
-- first, at most limit (NULL = 100); nextAfter the last id of a full page.
-- Reads only. Raises 22023: log_bad_tenant, log_bad_trace_name,
-- log_bad_limit (1..1000), log_bad_after.
CREATE OR REPLACE FUNCTION queen.log_traces_by_name_v1(p_tenant UUID, p_name TEXT, p_limit INTEGER, p_after BIGINT)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit INTEGER;
    v_rows  JSONB;
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    PERFORM queen._log_require_name_v1(p_name, 'log_bad_trace_name', 'traceName');
    v_limit := queen._log_page_limit_v1(p_limit, p_after, 'a trace id');
    SELECT COALESCE(jsonb_agg(queen._log_trace_row_v1(t, q.name, p.name) ORDER BY t.id), '[]')
    INTO v_rows
    FROM (SELECT * FROM queen.log_traces lt
          WHERE lt.tenant_id = p_tenant AND lt.trace_name = p_name AND lt.id > COALESCE(p_after, 0)
          ORDER BY lt.id LIMIT v_limit) AS t
    JOIN queen.queues q ON q.id = t.queue_id
    LEFT JOIN queen.log_partitions p ON p.id = t.partition_id;
    RETURN queen._log_page_v1('traces', v_rows, v_limit, 'id');
END
$$;

-- log_trace_retention_step_v1(now, retention_seconds, max_rows) -> {deleted}:
-- deletes up to max_rows traces recorded before now - retention_seconds.
-- Raises 22023 log_bad_request on NULL or negative arguments.
CREATE OR REPLACE FUNCTION queen.log_trace_retention_step_v1(p_now TIMESTAMPTZ, p_retention_seconds INTEGER,
                                                             p_max_rows INTEGER)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_n INTEGER;
BEGIN
    IF p_now IS NULL OR p_retention_seconds IS NULL OR p_retention_seconds < 0 OR p_max_rows IS NULL
       OR p_max_rows < 0 THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023',
            DETAIL = 'now, retention_seconds >= 0 and max_rows >= 0 are required';
    END IF;
    DELETE FROM queen.log_traces t
    WHERE t.id IN (SELECT lt.id FROM queen.log_traces lt
                   WHERE lt.created_at < p_now - make_interval(secs => p_retention_seconds)
                   ORDER BY lt.created_at LIMIT p_max_rows);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('deleted', v_n);
END
$$;

-- log_trace_names_v1(tenant, limit) -> {trace_names: [{trace_name,
-- trace_count, message_count, last_seen}], total, pagination: {limit,
-- offset}} (the reference broker's shape, snake_case as it has it, offset
-- always 0): the names the tenant's stored traces
-- carry, most recently seen first, at most limit (NULL = 50, 1..1000);
-- total counts every name. It groups every stored trace of the tenant
-- (bounded by max_traces_per_tenant; idx_log_traces_name): a dashboard
-- read. Reads only. Raises 22023 log_bad_tenant, log_bad_limit.
CREATE OR REPLACE FUNCTION queen.log_trace_names_v1(p_tenant UUID, p_limit INTEGER)
RETURNS JSONB
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
AS $$
DECLARE
    v_limit INTEGER := queen._log_page_limit_v1(COALESCE(p_limit, 50), NULL, 'a trace name');
BEGIN
    PERFORM queen._log_require_tenant_v1(p_tenant);
    RETURN (
        WITH n AS (SELECT t.trace_name, count(*) AS traces,
                          count(DISTINCT (t.partition_id, t.transaction_id)) AS messages, max(t.created_at) AS last_at
                   FROM queen.log_traces t WHERE t.tenant_id = p_tenant
                   GROUP BY t.trace_name)
        SELECT jsonb_build_object(
            'trace_names', COALESCE((SELECT jsonb_agg(jsonb_build_object('trace_name', p.trace_name,
                                                                         'trace_count', p.traces,
                                                                         'message_count', p.messages,
                                                                         'last_seen', queen.log_iso_v1(p.last_at))
                                                ORDER BY p.last_at DESC, p.trace_name)
                               FROM (SELECT * FROM n ORDER BY n.last_at DESC, n.trace_name LIMIT v_limit) AS p), '[]'),
            'total', (SELECT count(*) FROM n),
            'pagination', jsonb_build_object('limit', v_limit, 'offset', 0)));
END
$$;
