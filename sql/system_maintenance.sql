-- system_maintenance.sql: the maintenance switch, one row for the whole
-- database, so every broker on it reads the same answer (each re-reads it at
-- least every half second: src/engine/maintenance.c). Under maintenance the
-- brokers refuse pushes (503, Retry-After) and answer pops with nothing;
-- acks, reads and the kv keep working. Nothing is buffered: a push is
-- acknowledged only once it is committed here, maintenance or not. A second
-- switch, pop maintenance, stops deliveries alone: pops answer nothing while
-- pushes, acks and reads go on (to drain consumers before a deploy while
-- producers keep writing).
--
-- Owns: queen.system_state, queen.system_maintenance_v1,
--       queen.system_maintenance_set_v1, queen.system_pop_maintenance_set_v1.
-- May call: log_schema.sql (log_iso_v1). Never names the kv table.

CREATE TABLE IF NOT EXISTS queen.system_state (
    id                BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    maintenance       BOOLEAN NOT NULL DEFAULT false,
    maintenance_since TIMESTAMPTZ,
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO queen.system_state (id) VALUES (true) ON CONFLICT (id) DO NOTHING;
SELECT queen._schema_add_column_v1('queen.system_state', 'pop_maintenance', 'BOOLEAN NOT NULL DEFAULT false');
SELECT queen._schema_add_column_v1('queen.system_state', 'pop_maintenance_since', 'TIMESTAMPTZ');

-- system_maintenance_v1() -> {maintenance, since, popMaintenance,
-- popSince}: each since is when its switch went on (null when off). Reads
-- only.
CREATE OR REPLACE FUNCTION queen.system_maintenance_v1()
RETURNS JSONB
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object('maintenance', COALESCE(s.maintenance, false),
                              'since', queen.log_iso_v1(s.maintenance_since),
                              'popMaintenance', COALESCE(s.pop_maintenance, false),
                              'popSince', queen.log_iso_v1(s.pop_maintenance_since))
    FROM (SELECT 1) AS one LEFT JOIN queen.system_state s ON s.id
$$;

-- system_maintenance_set_v1(enabled) -> {maintenance, since, changed}.
-- Switching on again keeps the first since. Raises 22023 log_bad_request on
-- NULL.
CREATE OR REPLACE FUNCTION queen.system_maintenance_set_v1(p_enabled BOOLEAN)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_was BOOLEAN;
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'enabled must be true or false';
    END IF;
    INSERT INTO queen.system_state (id) VALUES (true) ON CONFLICT (id) DO NOTHING;
    SELECT maintenance INTO v_was FROM queen.system_state WHERE id FOR UPDATE;
    UPDATE queen.system_state
    SET maintenance = p_enabled,
        maintenance_since = CASE WHEN NOT p_enabled THEN NULL WHEN v_was THEN maintenance_since ELSE now() END,
        updated_at = now()
    WHERE id;
    RETURN queen.system_maintenance_v1() || jsonb_build_object('changed', v_was IS DISTINCT FROM p_enabled);
END
$$;

-- system_pop_maintenance_set_v1(enabled) -> system_maintenance_v1() plus
-- changed: switches pop maintenance. Switching on again keeps the first
-- popSince. Raises 22023 log_bad_request on NULL.
CREATE OR REPLACE FUNCTION queen.system_pop_maintenance_set_v1(p_enabled BOOLEAN)
RETURNS JSONB
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS $$
DECLARE
    v_was BOOLEAN;
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'log_bad_request' USING ERRCODE = '22023', DETAIL = 'enabled must be true or false';
    END IF;
    INSERT INTO queen.system_state (id) VALUES (true) ON CONFLICT (id) DO NOTHING;
    SELECT pop_maintenance INTO v_was FROM queen.system_state WHERE id FOR UPDATE;
    UPDATE queen.system_state
    SET pop_maintenance = p_enabled,
        pop_maintenance_since = CASE WHEN NOT p_enabled THEN NULL WHEN v_was THEN pop_maintenance_since ELSE now() END,
        updated_at = now()
    WHERE id;
    RETURN queen.system_maintenance_v1() || jsonb_build_object('changed', v_was IS DISTINCT FROM p_enabled);
END
$$;
