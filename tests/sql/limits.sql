-- tests/sql/limits.sql: every budget sql/limits.sql publishes is enforced
-- at exactly that value: the checks read it (queen._input_limit_v1) rather
-- than keep a number of their own, so a changed budget moves them all. At
-- each budget a call passes and one past it is refused with its reason.
-- Own tenant; rolled back.
BEGIN;
SELECT plan(23);
SELECT gen_random_uuid() AS t \gset
SELECT (queen.input_limits_v1() ->> 'kvMaxOps')::int AS max_ops,
       (queen.input_limits_v1() ->> 'kvMaxKeys')::int AS max_keys,
       (queen.input_limits_v1() ->> 'wireMaxKvOps')::int AS wire_ops,
       (queen.input_limits_v1() ->> 'wireMaxKvKeys')::int AS wire_keys,
       (queen.input_limits_v1() ->> 'kvMaxKeyBytes')::int AS key_bytes,
       (queen.input_limits_v1() ->> 'kvMaxNsChars')::int AS ns_chars,
       (queen.input_limits_v1() ->> 'pageDefault')::int AS page_default,
       (queen.input_limits_v1() ->> 'pageMax')::int AS page_max \gset

SELECT volatility_is('queen', 'input_limits_v1', ARRAY[]::text[], 'immutable', 'the budgets are IMMUTABLE (folded when planned)');

-- n get ops, and one getMany of n keys.
CREATE FUNCTION pg_temp.gets(n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 'lim', 'key', 'k' || i)) FROM generate_series(1, n) i $$;
CREATE FUNCTION pg_temp.get_many(n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(jsonb_build_object('op', 'getMany', 'ns', 'lim',
                                                'keys', (SELECT jsonb_agg('k' || i) FROM generate_series(1, n) i))) $$;

SELECT lives_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), false)$$, pg_temp.gets(:max_ops), :'t'),
                'kvMaxOps ops in a call');
SELECT throws_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), false)$$, pg_temp.gets(:max_ops + 1), :'t'),
                 '22023', 'kv_too_many_ops', 'one op past kvMaxOps');
SELECT lives_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), true)$$, pg_temp.gets(:wire_ops), :'t'),
                'wireMaxKvOps ops in a bundle');
SELECT throws_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), true)$$, pg_temp.gets(:wire_ops + 1), :'t'),
                 '22023', 'kv_too_many_ops', 'one op past wireMaxKvOps in a bundle');
SELECT lives_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), false)$$, pg_temp.get_many(:max_keys), :'t'),
                'kvMaxKeys keys in a call');
SELECT throws_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), false)$$, pg_temp.get_many(:max_keys + 1), :'t'),
                 '22023', 'kv_too_many_keys', 'one key past kvMaxKeys');
SELECT lives_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), true)$$, pg_temp.get_many(:wire_keys), :'t'),
                'wireMaxKvKeys keys in a bundle');
SELECT throws_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), true)$$, pg_temp.get_many(:wire_keys + 1), :'t'),
                 '22023', 'kv_too_many_keys', 'one key past wireMaxKvKeys in a bundle');

-- Names: the checker and the kv_apply_v1 path.
SELECT lives_ok(format($$SELECT queen.kv_check_names_v1('lim', %L)$$, repeat('k', :key_bytes)), 'a key of kvMaxKeyBytes');
SELECT throws_ok(format($$SELECT queen.kv_check_names_v1('lim', %L)$$, repeat('k', :key_bytes + 1)),
                 '22001', 'kv_key_too_large', 'a key one byte past kvMaxKeyBytes');
SELECT ok(queen.kv_names_ok_v1('lim', repeat('k', :key_bytes)) AND NOT queen.kv_names_ok_v1('lim', repeat('k', :key_bytes + 1)),
          'kv_names_ok_v1 ends at kvMaxKeyBytes');
SELECT lives_ok(format($$SELECT queen.kv_check_names_v1(%L, 'k')$$, repeat('n', :ns_chars)), 'a namespace of kvMaxNsChars');
SELECT throws_ok(format($$SELECT queen.kv_check_names_v1(%L, 'k')$$, repeat('n', :ns_chars + 1)),
                 '22023', 'kv_bad_namespace', 'a namespace one character past kvMaxNsChars');
SELECT ok(queen.kv_names_ok_v1(repeat('n', :ns_chars), 'k') AND NOT queen.kv_names_ok_v1(repeat('n', :ns_chars + 1), 'k'),
          'kv_names_ok_v1 ends at kvMaxNsChars');
SELECT throws_ok(format($$SELECT queen.kv_apply_v1(%L, %L, now(), false)$$,
                        jsonb_build_array(jsonb_build_object('op', 'put', 'ns', 'lim', 'key', repeat('k', :key_bytes + 1),
                                                             'value', 1, 'forever', true)), :'t'),
                 '22001', 'kv_key_too_large', 'a put of a key past kvMaxKeyBytes');

-- Pages: getPrefix clamps to pageMax and defaults to pageDefault; the log's
-- listings refuse past pageMax and default to pageDefault.
INSERT INTO queen.kv (tenant_id, namespace, key, value, version)
SELECT :'t', 'lim', 'p/' || lpad(i::text, 6, '0'), '1', nextval('queen.kv_version_seq')
FROM generate_series(1, :page_max + 1) i;
SELECT is(jsonb_array_length(queen.kv_apply_v1(jsonb_build_array(jsonb_build_object('op', 'getPrefix', 'ns', 'lim',
              'prefix', 'p/', 'limit', :page_max + 1000)), :'t', now(), false) -> 0 -> 'rows'),
          :page_max, 'getPrefix past pageMax reads pageMax rows');
SELECT is(jsonb_array_length(queen.kv_apply_v1(jsonb_build_array(jsonb_build_object('op', 'getPrefix', 'ns', 'lim',
              'prefix', 'p/')), :'t', now(), false) -> 0 -> 'rows'),
          :page_default, 'getPrefix without a limit reads pageDefault rows');
SELECT is(queen._log_page_limit_v1(NULL, NULL, 'x'), :page_default, 'a listing without a limit pages pageDefault');
SELECT is(queen._log_page_limit_v1(:page_max, NULL, 'x'), :page_max, 'a listing may page pageMax');
SELECT throws_ok(format($$SELECT queen._log_page_limit_v1(%s, NULL, 'x')$$, :page_max + 1), '22023', 'log_bad_limit',
                 'a listing past pageMax is refused');
SELECT lives_ok(format($$SELECT queen.log_status_queues_v1(%L, NULL, NULL, %s, 0)$$, :'t', :page_max),
                'the status listing pages pageMax');
SELECT throws_ok(format($$SELECT queen.log_status_queues_v1(%L, NULL, NULL, %s, 0)$$, :'t', :page_max + 1),
                 '22023', 'log_bad_limit', 'the status listing past pageMax is refused');

SELECT * FROM finish();
ROLLBACK;
