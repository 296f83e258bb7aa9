-- bench/wire_raw/setup.sql: the partitions behind the raw wire floor
-- (raw_tx.sql). Run with -v q=QUEUE after the wire bench created QUEUE and
-- QUEUE_out (16 partitions each): maps pgbench's client_id % 16 to a pair of
-- partition ids, so each client works its own pair as a leased consumer
-- does, and gives the floor its own consumer group, so the broker's cursors
-- stay as they were.
SET client_min_messages = warning;
DROP TABLE IF EXISTS public.wire_raw_parts;
CREATE TABLE public.wire_raw_parts AS
SELECT (row_number() OVER (ORDER BY pi.name) - 1)::int AS k, pi.id AS in_part, po.id AS out_part
  FROM queen.queues qi JOIN queen.log_partitions pi ON pi.queue_id = qi.id
  JOIN queen.queues qo ON qo.name = qi.name || '_out' AND qo.tenant_id = qi.tenant_id
  JOIN queen.log_partitions po ON po.queue_id = qo.id AND po.name = pi.name
 WHERE qi.name = :'q';
ALTER TABLE public.wire_raw_parts ADD PRIMARY KEY (k);
INSERT INTO queen.log_consumers (partition_id, consumer_group)
SELECT in_part, 'wire_raw' FROM public.wire_raw_parts
ON CONFLICT DO NOTHING;
