-- bench/kv_sql/get_parts.sql: a one-op get taken apart, to say where its
-- price over the bare read goes. Same arguments as queen.kv_apply_v1; each
-- is kv_apply_v1's one-op get with a part left out:
--   kv_sql_get_result  the read and the result object, no checks of the op;
--   kv_sql_get_checks  the kind pick and the op's checks, then the read,
--                      returning the bare value.
-- With bench/pgbench/plpgsql_get_fn.sql (the read alone) and kv_apply_v1
-- itself, bench/kv_sql/cpu.sh prices each part. Measuring sticks in schema
-- public, never called by the broker; they accept ops kv_apply_v1 refuses.
CREATE OR REPLACE FUNCTION public.kv_sql_get_result(p_ops JSONB, p_tenant UUID, p_now TIMESTAMPTZ, p_in_wire BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_elem JSONB;
BEGIN
    SELECT jsonb_build_array(jsonb_build_object('index', 0, 'op', 'get', 'found', true, 'key', k.key,
                                                'value', k.value, 'version', k.version,
                                                'expiresAt', queen.kv_ts_v1(k.expires_at),
                                                'updatedAt', queen.kv_ts_v1(k.updated_at)))
    INTO v_elem
    FROM queen.kv k
    WHERE k.tenant_id = p_tenant AND k.namespace = (p_ops -> 0 ->> 'ns') AND k.key = (p_ops -> 0 ->> 'key')
      AND queen.kv_live_v1(k.expires_at, COALESCE(p_now, now()));
    IF v_elem IS NOT NULL THEN
        RETURN v_elem;
    END IF;
    RETURN jsonb_build_array(jsonb_build_object('index', 0, 'op', 'get', 'found', false, 'key', p_ops -> 0 ->> 'key'));
END
$$;

CREATE OR REPLACE FUNCTION public.kv_sql_get_checks(p_ops JSONB, p_tenant UUID, p_now TIMESTAMPTZ, p_in_wire BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_kind  TEXT;
    v_value JSONB;
BEGIN
    v_kind := CASE WHEN p_tenant IS NOT NULL AND p_in_wire IS NOT NULL AND p_ops -> 1 IS NULL
                   THEN p_ops -> 0 ->> 'op' END;
    IF v_kind = 'get' THEN
        IF queen._kv_get_ok_v1(p_ops -> 0) THEN
            SELECT k.value INTO v_value
            FROM queen.kv k
            WHERE k.tenant_id = p_tenant AND k.namespace = (p_ops -> 0 ->> 'ns') AND k.key = (p_ops -> 0 ->> 'key')
              AND queen.kv_live_v1(k.expires_at, COALESCE(p_now, now()));
            RETURN v_value;
        END IF;
    END IF;
    RAISE EXCEPTION 'kv_sql_get_checks: not a one-op get';
END
$$;
