-- schema.sql: owns the queen schema itself and the helpers through which
-- the later files change a table that may already exist or create a type.
--
-- Every later file (the log_* files, the kv* files, ...) creates its objects inside
-- this schema and names them schema-qualified, so the schema must exist
-- before any of them runs. Re-applied at every boot: IF NOT EXISTS keeps the
-- schema's OID, so applying twice leaves the catalog identical.
-- Must never: create tables or grants (those belong to the file that owns
-- the object).
--
-- Why the helpers: every broker re-applies the schema when it boots, into a
-- database that is serving traffic. PostgreSQL takes a statement's table lock
-- before it looks whether there is anything to do: ADD COLUMN IF NOT EXISTS
-- asks for ACCESS EXCLUSIVE and CREATE INDEX IF NOT EXISTS for SHARE even
-- when the column or index is there, and ALTER TABLE SET (...) invalidates
-- every cached plan on the table in every backend. A boot during a long
-- write then waited for it, and every request behind the boot's lock request
-- waited too (up to QUEEN_SCHEMA_LOCK_TIMEOUT_MS, once per statement). The
-- helpers read the catalog first and issue the DDL only when it changes
-- something, so re-applying a current schema takes no table lock.
CREATE SCHEMA IF NOT EXISTS queen;

-- _schema_add_column_v1(table, column, definition) -> true when it added the
-- column. definition is the rest of an ADD COLUMN clause (type, default,
-- constraints). An existing column is left as it is, whatever its definition.
CREATE OR REPLACE FUNCTION queen._schema_add_column_v1(p_table REGCLASS, p_column NAME, p_definition TEXT)
RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
               WHERE a.attrelid = p_table AND a.attname = p_column AND NOT a.attisdropped) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS %I %s', p_table, p_column, p_definition);
    RETURN true;
END
$$;

-- _schema_create_v1(exists, definition) -> true when it ran definition, a
-- CREATE statement, which it runs only when exists (the caller's catalog
-- lookup for the object) is false.
CREATE OR REPLACE FUNCTION queen._schema_create_v1(p_exists BOOLEAN, p_definition TEXT)
RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
BEGIN
    IF p_exists THEN
        RETURN false;
    END IF;
    EXECUTE p_definition;
    RETURN true;
END
$$;

-- _schema_create_index_v1(index, definition) -> true when it created the
-- index. index is the index's name in schema queen; definition the whole
-- CREATE INDEX statement. An existing index of that name is left as it is.
CREATE OR REPLACE FUNCTION queen._schema_create_index_v1(p_index NAME, p_definition TEXT)
RETURNS BOOLEAN
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT queen._schema_create_v1(to_regclass(format('queen.%I', p_index)) IS NOT NULL, p_definition) $$;

-- _schema_set_options_v1(table, options) -> true when it changed them.
-- options: storage parameters as PostgreSQL lists them in
-- pg_class.reloptions ('fillfactor=70'); the table gets them unless it
-- already holds every one, spelled the same. Other options stay.
CREATE OR REPLACE FUNCTION queen._schema_set_options_v1(p_table REGCLASS, p_options TEXT[])
RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
BEGIN
    IF (SELECT COALESCE(c.reloptions, '{}') @> p_options FROM pg_catalog.pg_class c WHERE c.oid = p_table) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE %s SET (%s)', p_table, array_to_string(p_options, ', '));
    RETURN true;
END
$$;

-- _schema_create_type_v1(type, definition) -> true when it created the type.
-- type is the type's name in schema queen; definition the whole CREATE TYPE
-- statement (CREATE TYPE has no IF NOT EXISTS). An existing type of that
-- name is left as it is: a type whose shape changes gets a new name.
CREATE OR REPLACE FUNCTION queen._schema_create_type_v1(p_type NAME, p_definition TEXT)
RETURNS BOOLEAN
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
AS $$ SELECT queen._schema_create_v1(to_regtype(format('queen.%I', p_type)) IS NOT NULL, p_definition) $$;
