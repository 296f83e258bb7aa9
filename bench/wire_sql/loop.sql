-- bench/wire_sql/loop.sql: what one consumer does, in SQL, :iters times, each
-- iteration its own transactions (COMMIT after the pop and after the wire, as
-- the broker does): pop a batch of :per from queue wsql_in, then ONE
-- log_transaction_wire_v1 with, per message, ack + push to wsql_out (same
-- partition name) + putIfAbsent marker "done:<id>" (1 h TTL). :per = 1 is
-- the one-message bundle, :per = 10 the 10 acks + 10 pushes + 10 markers one.
-- With -v fn=statements the bundle goes to public.wire_sql_statements_only
-- (statements_only.sql) instead: the same statements without the rules;
-- with -v fn=inline to public.wire_sql_rules_inline (rules_inline.sql): the
-- rules in one function, nothing passed between functions; with -v fn=both
-- the wire and the statements take turns, with -v fn=all all three, so
-- they see the same machine.
-- psql -v iters=2000 -v per=1 [-v fn=statements] -f loop.sql (psql does not
-- expand variables inside the DO body, so they pass through settings)
\if :{?fn}
\else
\set fn wire
\endif
SELECT set_config('wsql.iters', :'iters', false), set_config('wsql.per', :'per', false),
       set_config('wsql.fn', :'fn', false) \gset
DO $loop$
DECLARE
    v_pop jsonb; v_ops jsonb; v_kv jsonb; v_bundle jsonb; v_res jsonb;
BEGIN
    FOR i IN 1 .. current_setting('wsql.iters')::integer LOOP
        v_pop := queen.log_pop_v1('00000000-0000-0000-0000-0000000000be'::uuid, 'wsql_in', NULL, NULL, current_setting('wsql.per')::integer, 60, false, NULL);
        COMMIT;
        CONTINUE WHEN v_pop IS NULL;
        SELECT jsonb_agg(o ORDER BY n, k), jsonb_agg(jsonb_build_object('op', 'putIfAbsent', 'ns', 'wire', 'key', 'done:' || (m ->> 'id'),
                                                          'value', 1, 'ttlSeconds', 3600) ORDER BY n) FILTER (WHERE k = 0)
          INTO v_ops, v_kv
          FROM jsonb_array_elements(v_pop -> 'messages') WITH ORDINALITY AS t(m, n),
               LATERAL (VALUES
                   (0, jsonb_build_object('type', 'ack', 'transactionId', m -> 'transactionId',
                                          'partitionId', m -> 'partitionId', 'leaseId', m -> 'leaseId')),
                   (1, jsonb_build_object('type', 'push', 'items', jsonb_build_array(jsonb_build_object(
                          'queue', 'wsql_out', 'partition', m -> 'partition',
                          'payload', jsonb_build_object('src', m -> 'id'),
                          'transactionId', 'out-' || (m ->> 'id')))))
               ) AS x(k, o);
        v_bundle := jsonb_build_object('tenant', '00000000-0000-0000-0000-0000000000be', 'operations', v_ops, 'kv', v_kv);
        -- As the broker does: the pushes' NOTIFY deferred past the commit
        -- (its notifier sends them for many transactions at once).
        PERFORM set_config('queen.notify', 'after_commit', true);
        IF current_setting('wsql.fn') = 'statements' OR (current_setting('wsql.fn') = 'both' AND i % 2 = 0)
           OR (current_setting('wsql.fn') = 'all' AND i % 3 = 1) THEN
            v_res := public.wire_sql_statements_only(v_bundle);
        ELSIF current_setting('wsql.fn') = 'inline' OR (current_setting('wsql.fn') = 'all' AND i % 3 = 2) THEN
            v_res := public.wire_sql_rules_inline(v_bundle);
        ELSE
            -- (the wire takes the tenant as an argument; the two bench
            -- functions above read it from the bundle)
            v_res := queen.log_transaction_wire_v1((v_bundle ->> 'tenant')::uuid, v_bundle - 'tenant');
        END IF;
        IF NOT (v_res -> 'success')::boolean THEN
            RAISE EXCEPTION 'wire failed: %', v_res;
        END IF;
        COMMIT;
    END LOOP;
END
$loop$;
