-- log_producer.sql: who pushed a message (docs/auth.md).
--
-- Owns: queen.log_messages.producer.
-- May call: schema.sql (_schema_add_column_v1) and pg_catalog.
--
-- The broker verifies a token's sub and runs the push (or the transaction
-- bundle) after set_config('queen.producer', sub, true) in the same
-- statement (a group of pushes, log_push.sql's log_push_group_v1, sets it before
-- each member's apply); the column's default reads that transaction-local
-- setting (at each insert), so
-- every insert into the log (log_push_v1, the transaction wire) stamps it
-- without another argument, and a producer is never something a body can
-- say. Without a verified token (QUEEN_AUTH=off, the embedded library's
-- queen_push) the setting is unset or '' and the column NULL. pop returns it
-- as "producer" (log_pop.sql).
--
-- Re-applied at every boot: schema.sql's _schema_add_column_v1 leaves an existing
-- column, its default included, as it is, so a second apply changes nothing.

SELECT queen._schema_add_column_v1('queen.log_messages', 'producer',
    $$TEXT DEFAULT NULLIF(current_setting('queen.producer', true), '')$$);
