-- bench/wire_sql/setup.sql: queue wsql_in of the bench tenant, 16 partitions,
-- :n messages round robin (psql -v n=20000), pushed 500 per call.
SELECT queen.log_push_v1('00000000-0000-0000-0000-0000000000be'::uuid,
         (SELECT jsonb_agg(jsonb_build_object('queue', 'wsql_in', 'partition', 'p' || lpad((g % 16)::text, 2, '0'),
                                              'payload', jsonb_build_object('n', g, 'pad', '0123456789abcdef0123456789abcdef'),
                                              'transactionId', 'in-' || r.run || '-' || g))
            FROM generate_series(b * 500, b * 500 + 499) g))
  FROM generate_series(0, (:n / 500) - 1) b,
       (SELECT gen_random_uuid()::text AS run) r;   -- fresh transactionIds: a refill is not a duplicate
