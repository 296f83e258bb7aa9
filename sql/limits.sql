-- limits.sql: every fixed budget of Queen's input, named once.
--
-- Owns: queen.input_limits_v1, queen._input_limit_v1.
-- May call: nothing.
--
-- The checks that enforce a budget (kv.sql, log_schema.sql) read it through
-- _input_limit_v1('<name>'), never as a literal of their own. libqueen reads
-- the same object out of the SQL it carries when it first needs it
-- (src/engine/input_limits.c), so its early guards refuse with the numbers SQL
-- enforces: there is no second copy to drift. A budget changes here and
-- nowhere else.
--
-- The names:
--   kvMaxOps, kvMaxKeys        ops per kv_apply_v1 call, keys summed over its
--                              ops (getMany its keys, getPrefix its clamped
--                              limit, others one)
--   wireMaxKvOps, wireMaxKvKeys  the same inside a transaction bundle
--   kvMaxKeyBytes              a key's bytes (octet_length)
--   kvMaxNsChars               a namespace's characters
--   pageDefault, pageMax       a page of rows: getPrefix and the log's keyset
--                              listings (dead letters, messages, traces)
--   kvDetailMaxBytes           the 23514 DETAIL of a lost required op (a value
--                              past it is omitted and reported by its size)

-- input_limits_v1() -> {name: integer}. IMMUTABLE: the budgets are part of
-- the schema's version, not data.
CREATE OR REPLACE FUNCTION queen.input_limits_v1()
RETURNS JSONB
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '{"kvMaxOps": 256, "kvMaxKeys": 4096, "wireMaxKvOps": 64, "wireMaxKvKeys": 256,
               "kvMaxKeyBytes": 512, "kvMaxNsChars": 64, "pageDefault": 100, "pageMax": 1000,
               "kvDetailMaxBytes": 4096}'::jsonb $$;

-- _input_limit_v1(name) -> the budget. LANGUAGE sql and IMMUTABLE: it
-- inlines into the check that calls it and folds to a constant when that is
-- planned, so reading a budget by name costs nothing at run time. An unknown
-- name would read as NULL (no limit): tests/unit/test_limits.c finds every
-- name the embedded SQL passes here and fails on one that is not published.
CREATE OR REPLACE FUNCTION queen._input_limit_v1(p_name TEXT)
RETURNS INTEGER
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT (queen.input_limits_v1() ->> p_name)::integer $$;
