-- log_waiting.sql: what waiting long polls could pop now, for the whole
-- broker in one statement.
--
-- Owns: queen.log_poppable_v1.
-- May call: log_schema.sql (tables). Never names queen.kv. Read-only: takes no row lock
-- and writes nothing, so it never waits on a pop, a push or an ack.
--
-- Why it exists: the broker's notifier re-checks its waiting pops once a
-- second (a message can become available without a push: a lease that
-- expired or was released, a push whose notification was lost). It used to
-- run one full pop per waiter per second: 1,000 waiters cost ~990 pops/s and
-- 5,000 saturated the database. It now sends the distinct keys its waiters
-- wait on to this function once per tick and wakes waiters only of the keys
-- returned (src/engine/notify.c).

-- log_poppable_v1(keys) -> (key_index, ready) for each key a pop could take
-- something from now; keys with nothing are not returned.
-- keys: [{"t": tenant uuid, "q": queue, "g": consumer group, "p": partition}, ...]
--   g absent or null: queue mode ('__QUEUE_MODE__'); p absent or null: any
--   partition of the queue. A pop by labels names no queue: {"t", "ns", "task",
--   "g"} (a label absent or null matches any; one of them is given).
-- key_index: the key's position in keys (0-based). ready: how many partitions
--   a pop could claim now (a queue-level pop claims one partition at a time,
--   so waking more waiters than this only makes empty pops).
-- The candidate rule MUST stay the one of log_pop.sql's _log_pop_claim_v1: a
-- partition whose last_offset is past the group's committed offset (no cursor
-- yet: past 0) and whose cursor holds no live lease. Where it looks follows
-- the pop too: a group subscribed to the queue (log_schema.sql's log_subscriptions) is
-- checked over its ready rows only, so an idle check costs the partitions
-- that may hold work, not every partition of the queue (the ready rows are
-- a superset of the partitions with work: log_schema.sql's invariant; a stale one fails
-- the offset test here and is removed by the next pop). A group new to the
-- queue (no subscription yet) counts every partition with a message, as the
-- pop's first contact would (a pop in mode 'new' then pins its cursors and
-- may find nothing: one empty pop, after which the subscription exists and
-- this rule agrees). Not seen here, as the pop's candidate search does not
-- see them either: a delayedProcessing queue's messages still too young (or a
-- windowBuffer queue's partition pushed to too recently), a
-- dead letter requeued for another group (for_group); such a key is
-- reported ready and its waiter pops nothing, once per tick. Whoever
-- changes the pop's candidate rule changes this body to match; the
-- interface (keys in, indexes and counts out) stays.
-- Measured: see bench/RESULTS.md, "Waiting long polls".
CREATE OR REPLACE FUNCTION queen.log_poppable_v1(p_keys JSONB)
RETURNS TABLE (key_index INTEGER, ready INTEGER)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    -- plpgsql, not sql: its query is planned once per session (see log_push.sql's
    -- log_notify_announce_v1); the notifier calls it once a second.
    RETURN QUERY
    WITH k AS (
        SELECT (o - 1)::integer AS i,
               (e ->> 't')::uuid AS tenant,
               e ->> 'q' AS queue,
               e ->> 'ns' AS ns,
               e ->> 'task' AS task,
               COALESCE(e ->> 'g', '__QUEUE_MODE__') AS grp,
               e ->> 'p' AS part
        FROM jsonb_array_elements(CASE jsonb_typeof(p_keys) WHEN 'array' THEN p_keys ELSE '[]' END)
             WITH ORDINALITY AS x(e, o)
        WHERE jsonb_typeof(e -> 't') = 'string'
    ), kq AS (
        -- A named queue: one (tenant_id, name) index probe per key.
        SELECT k.i, k.grp, k.part, q.id AS qid
        FROM k JOIN queen.queues q ON q.tenant_id = k.tenant AND q.name = k.queue
        WHERE k.queue IS NOT NULL
        UNION ALL
        -- By labels: the tenant's queues whose labels match.
        SELECT k.i, k.grp, NULL, q.id
        FROM k JOIN queen.queues q ON q.tenant_id = k.tenant
        WHERE k.queue IS NULL AND (k.ns IS NOT NULL OR k.task IS NOT NULL)
          AND (k.ns IS NULL OR q.namespace = k.ns) AND (k.task IS NULL OR q.task = k.task)
    )
    SELECT kq.i, count(*)::integer
    FROM kq
    LEFT JOIN queen.log_subscriptions s ON s.queue_id = kq.qid AND s.consumer_group = kq.grp
    CROSS JOIN LATERAL (
        -- Subscribed: the group's ready rows (one index range).
        SELECT p.id, p.last_offset
        FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
        WHERE s.id IS NOT NULL AND r.subscription_id = s.id AND p.queue_id = kq.qid
          AND (kq.part IS NULL OR p.name = kq.part)
        UNION ALL
        -- Not yet subscribed: every partition of the queue.
        SELECT p.id, p.last_offset
        FROM queen.log_partitions p
        WHERE s.id IS NULL AND p.queue_id = kq.qid AND (kq.part IS NULL OR p.name = kq.part)
    ) p
    LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = kq.grp
    WHERE p.last_offset > COALESCE(c.committed_offset, 0)
      AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
    GROUP BY kq.i;
END
$$;
