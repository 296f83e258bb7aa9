-- 000_schema.sql: owns the queen schema itself and nothing else.
--
-- Every later file (001.. log engine, 024.. kv) creates its objects inside
-- this schema and names them schema-qualified, so the schema must exist
-- before any of them runs. Re-applied at every boot: IF NOT EXISTS keeps the
-- schema's OID, so applying twice leaves the catalog identical.
-- Must never: create tables, functions or grants (those belong to the file
-- that owns the object).
CREATE SCHEMA IF NOT EXISTS queen;
