-- tests/sql/log_producer.sql: queen.log_messages.producer (sql/log_producer.sql):
-- a push or a transaction bundle run after set_config('queen.producer', ...,
-- true) stamps its messages and pop returns it; with the setting unset or ''
-- the producer is NULL; an item cannot name its own producer; the column's
-- default is the setting's. Own tenant; rolled back.
BEGIN;
SELECT plan(7);
SELECT gen_random_uuid() AS t \gset

SELECT col_default_is('queen', 'log_messages', 'producer',
                      $$NULLIF(current_setting('queen.producer'::text, true), ''::text)$$,
                      'producer defaults to the transaction-local setting');

SELECT queen.log_push_v1(:'t', '[{"queue":"t028","payload":1,"transactionId":"none"}]') IS NOT NULL AS pushed;
SELECT set_config('queen.producer', 'alice', true);
SELECT queen.log_push_v1(:'t', '[{"queue":"t028","payload":2,"transactionId":"alice"}]') IS NOT NULL AS pushed;
SELECT queen.log_transaction_wire_v1(:'t', jsonb_build_object('operations', jsonb_build_array(
    jsonb_build_object('type', 'push', 'items', '[{"queue":"t028","payload":3,"transactionId":"wire"}]'::jsonb))))
    IS NOT NULL AS wired;
SELECT set_config('queen.producer', '', true);
SELECT queen.log_push_v1(:'t', '[{"queue":"t028","payload":4,"transactionId":"empty"}]') IS NOT NULL AS pushed;

CREATE TEMP TABLE p AS SELECT queen.log_pop_v1(:'t', 't028', NULL, NULL, 10, NULL, true, NULL) AS b;
CREATE TEMP TABLE m AS SELECT e ->> 'transactionId' AS txn, e -> 'producer' AS producer
    FROM p, jsonb_array_elements(b -> 'messages') e;
SELECT is((SELECT count(*) FROM m), 4::bigint, 'four messages popped');
SELECT is((SELECT producer FROM m WHERE txn = 'none'), 'null'::jsonb, 'no setting: producer null');
SELECT is((SELECT producer FROM m WHERE txn = 'alice'), '"alice"'::jsonb, 'push under the setting: stamped');
SELECT is((SELECT producer FROM m WHERE txn = 'wire'), '"alice"'::jsonb, 'transaction wire push: stamped');
SELECT is((SELECT producer FROM m WHERE txn = 'empty'), 'null'::jsonb, 'an empty setting: null');

-- An item's own "producer" member is never the producer.
SELECT set_config('queen.producer', 'bob', true);
SELECT queen.log_push_v1(:'t', '[{"queue":"t028","payload":5,"transactionId":"forged","producer":"mallory"}]') IS NOT NULL;
SELECT is((SELECT producer FROM queen.log_messages WHERE transaction_id = 'forged'
             AND partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
                                  WHERE q.tenant_id = :'t')),
          'bob', 'the item cannot name its producer');

SELECT * FROM finish();
ROLLBACK;
