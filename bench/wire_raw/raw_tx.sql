-- The raw floor of the transaction wire: what one message costs this
-- machine with none of the rules. Every tenth message first takes a lease
-- and reads 10 messages (the pop, its own transaction); then the consumer's
-- transaction: the cursor advance, the next message (offset bump + insert)
-- and the idempotency marker, as ONE statement (one round trip, one commit).
-- The cursor wraps at 2,000 so the pop keeps reading real rows.
\set r random(1, 10)
\if :r = 1
WITH p AS (SELECT in_part FROM public.wire_raw_parts WHERE k = :client_id % 16),
lease AS (UPDATE queen.log_consumers c SET lease_id = gen_random_uuid(), lease_expires_at = now() + interval '60 seconds',
            batch_end = c.committed_offset + 10
            FROM p WHERE c.partition_id = p.in_part AND c.consumer_group = 'wire_raw'
          RETURNING c.partition_id, c.committed_offset)
SELECT m.id, m.msg_offset, m.payload FROM lease
  JOIN LATERAL (SELECT * FROM queen.log_messages lm WHERE lm.partition_id = lease.partition_id
                  AND lm.msg_offset > lease.committed_offset ORDER BY lm.msg_offset LIMIT 10) m ON true;
\endif
WITH p AS (SELECT in_part, out_part FROM public.wire_raw_parts WHERE k = :client_id % 16),
ack AS (UPDATE queen.log_consumers c SET committed_offset = (c.committed_offset + 1) % 2000, lease_id = NULL
          FROM p WHERE c.partition_id = p.in_part AND c.consumer_group = 'wire_raw' RETURNING 1),
bump AS (UPDATE queen.log_partitions lp SET last_offset = lp.last_offset + 1, last_push_at = now()
           FROM p WHERE lp.id = p.out_part RETURNING lp.id, lp.last_offset),
msg AS (INSERT INTO queen.log_messages (partition_id, msg_offset, transaction_id, payload)
          SELECT id, last_offset, gen_random_uuid()::text, '{"i": 1}'::jsonb FROM bump RETURNING 1),
mark AS (INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at)
           VALUES ('00000000-0000-0000-0000-000000000001'::uuid, 'wire_raw', 'done:' || gen_random_uuid(),
                   'true'::jsonb, nextval('queen.kv_version_seq'), now() + interval '1 hour')
           ON CONFLICT DO NOTHING RETURNING 1)
SELECT (SELECT count(*) FROM ack), (SELECT count(*) FROM msg), (SELECT count(*) FROM mark);
