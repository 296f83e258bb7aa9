-- bench/pgbench/plpgsql_get_fn.sql: the floor of any PL/pgSQL get. Same
-- arguments as queen.kv_apply_v1 and the same row read (the one-op get's
-- WHERE, liveness included), but no checks of the op, no result shape: it
-- returns the row's value. Beside the raw select it splits a one-op get's
-- price into what calling PL/pgSQL costs at all (this function / raw) and
-- what the contract's checks and result add (kv_apply_v1 / this function).
-- A measuring stick in schema public, never called by the broker.
CREATE OR REPLACE FUNCTION public.bench_plpgsql_get(p_ops JSONB, p_tenant UUID, p_now TIMESTAMPTZ, p_in_wire BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_value JSONB;
BEGIN
    SELECT k.value INTO v_value
    FROM queen.kv k
    WHERE k.tenant_id = p_tenant AND k.namespace = (p_ops -> 0 ->> 'ns') AND k.key = (p_ops -> 0 ->> 'key')
      AND queen.kv_live_v1(k.expires_at, COALESCE(p_now, now()));
    RETURN v_value;
END
$$;
