-- tests/sql/024_kv.sql: pgTAP for sql/024_kv.sql.
--
-- Self-contained: every row lives under a tenant drawn at random for this
-- run, inside one transaction that is rolled back, so the file passes when
-- run twice and beside other test files. Time is moved with p_now (T0 =
-- 2030-01-01 00:00:00Z), never by sleeping.
-- Test ids in descriptions: "S" structure, "N" names, "H" helpers, "R<n>"
-- kv_apply_v1 rule n (the "-- R<n>:" headings below), "SH" result shapes, "C" console reads.
BEGIN;
SELECT plan(261);

SELECT set_config('t024.tenant', gen_random_uuid()::text, true);

-- kv(ops, at, wire): one kv_apply_v1 call for this run's tenant.
CREATE FUNCTION pg_temp.kv(p_ops text, p_at text DEFAULT '2030-01-01 00:00:00+00', p_wire boolean DEFAULT false)
RETURNS jsonb LANGUAGE sql VOLATILE AS $$
    SELECT queen.kv_apply_v1(p_ops::jsonb, current_setting('t024.tenant')::uuid, p_at::timestamptz, p_wire)
$$;
-- kv1(op, at): a one-op call, its single result element.
CREATE FUNCTION pg_temp.kv1(p_op text, p_at text DEFAULT '2030-01-01 00:00:00+00')
RETURNS jsonb LANGUAGE sql VOLATILE AS $$ SELECT pg_temp.kv('[' || p_op || ']', p_at) -> 0 $$;
-- kv_err(ops, at, wire): {state, message, detail} of the error a call raises
-- (NULL when it does not raise). The subtransaction here is the test's, not
-- the function's.
CREATE FUNCTION pg_temp.kv_err(p_ops text, p_at text DEFAULT '2030-01-01 00:00:00+00', p_wire boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE s text; m text; d text;
BEGIN
    PERFORM pg_temp.kv(p_ops, p_at, p_wire);
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    RETURN jsonb_build_object('state', s, 'message', m, 'detail', d);
END $$;
-- row(ns, key): the physical row, expired or not.
CREATE FUNCTION pg_temp.row(p_ns text, p_key text) RETURNS queen.kv LANGUAGE sql STABLE AS $$
    SELECT * FROM queen.kv WHERE tenant_id = current_setting('t024.tenant')::uuid AND namespace = p_ns AND key = p_key
$$;

-- ===================================================================
-- S: structure (§1)
-- ===================================================================
SELECT has_table('queen', 'kv', 'S1 queen.kv exists');
SELECT results_eq(
    $$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod), a.attnotnull, COALESCE(c.collname::text, '') COLLATE "default", a.attgenerated::text
      FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation AND a.attcollation <> 0
      WHERE a.attrelid = 'queen.kv'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum$$,
    $$VALUES ('tenant_id', 'uuid', true, '', ''), ('namespace', 'text', true, 'C', ''), ('key', 'text', true, 'C', ''),
             ('value', 'jsonb', true, '', ''), ('version', 'bigint', true, '', ''),
             ('expires_at', 'timestamp with time zone', false, '', ''), ('shard', 'smallint', true, '', 's'),
             ('created_at', 'timestamp with time zone', true, '', ''), ('updated_at', 'timestamp with time zone', true, '', '')$$,
    'S2 columns, types, NOT NULL, COLLATE "C" on namespace and key, shard generated STORED');
SELECT is(pg_get_expr(d.adbin, d.adrelid), '((hashtextextended(key, (0)::bigint) & (63)::bigint))::smallint',
          'S3 shard = hashtextextended(key, 0) & 63')
FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
WHERE d.adrelid = 'queen.kv'::regclass AND a.attname = 'shard';
SELECT col_default_is('queen', 'kv', 'tenant_id', '00000000-0000-0000-0000-000000000001'::text, 'S4 default tenant');
SELECT col_is_pk('queen', 'kv', ARRAY['tenant_id', 'namespace', 'key'], 'S5 primary key (tenant_id, namespace, key)');
SELECT indexes_are('queen', 'kv', ARRAY['kv_pkey', 'idx_kv_shard_expires'], 'S6 exactly one secondary index');
SELECT is(pg_get_indexdef('queen.idx_kv_shard_expires'::regclass),
          'CREATE INDEX idx_kv_shard_expires ON queen.kv USING btree (shard, expires_at) WHERE (expires_at IS NOT NULL)',
          'S7 idx_kv_shard_expires is partial on (shard, expires_at)');
SELECT ok((SELECT reloptions FROM pg_class WHERE oid = 'queen.kv'::regclass)
          @> ARRAY['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=500',
                   'autovacuum_vacuum_cost_delay=0', 'vacuum_truncate=false', 'fillfactor=70'],
          'S8 storage settings (reloptions)');
SELECT results_eq($$SELECT format_type(seqtypid, NULL), seqcache FROM pg_sequence WHERE seqrelid = 'queen.kv_version_seq'::regclass$$,
                  $$VALUES ('bigint', 1000::bigint)$$, 'S9 kv_version_seq is bigint with CACHE 1000');
SELECT results_eq($$SELECT privilege_type::text FROM aclexplode((SELECT relacl FROM pg_class WHERE oid = 'queen.kv_version_seq'::regclass))
                    WHERE grantee = 0 ORDER BY 1$$,
                  $$VALUES ('USAGE')$$, 'S10 PUBLIC has USAGE on the sequence, never SELECT');
SELECT results_eq($$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                    WHERE a.attrelid = 'queen.kv_quota'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1$$,
                  $$VALUES ('enabled', 'boolean'), ('max_bytes', 'bigint'), ('max_reads_per_sec', 'bigint'), ('max_rows', 'bigint'),
                           ('max_writes_per_sec', 'bigint'), ('tenant_id', 'uuid'), ('updated_at', 'timestamp with time zone')$$,
                  'S11 kv_quota columns');
SELECT results_eq($$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                    WHERE a.attrelid = 'queen.kv_usage'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1$$,
                  $$VALUES ('computed_at', 'timestamp with time zone'), ('kv_bytes', 'bigint'), ('kv_rows', 'bigint'),
                           ('sampled', 'boolean'), ('tenant_id', 'uuid')$$,
                  'S12 kv_usage columns');
SELECT col_is_pk('queen', 'kv_quota', 'tenant_id', 'S13 kv_quota keyed by tenant alone');
SELECT col_is_pk('queen', 'kv_usage', 'tenant_id', 'S14 kv_usage keyed by tenant alone');
SELECT col_default_is('queen', 'kv_quota', 'enabled', 'true', 'S15 quota enabled defaults to true');
SELECT results_eq(
    $$SELECT p.proname::text COLLATE "default", p.provolatile::text, p.proisstrict, p.proparallel::text, l.lanname::text COLLATE "default"
      FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
      WHERE p.pronamespace = 'queen'::regnamespace
        AND p.proname IN ('kv_live_v1', 'kv_ver_v1', 'kv_num_v1', 'kv_prefix_end_v1', 'kv_check_names_v1', 'kv_ts_v1', 'kv_op_fields_v1')
      ORDER BY 1$$,
    $$VALUES ('kv_check_names_v1', 'i', false, 's', 'plpgsql'), ('kv_live_v1', 'i', false, 's', 'sql'),
             ('kv_num_v1', 'i', false, 's', 'sql'), ('kv_op_fields_v1', 'i', false, 's', 'sql'), ('kv_prefix_end_v1', 'i', false, 's', 'sql'),
             ('kv_ts_v1', 's', false, 's', 'sql'), ('kv_ver_v1', 'i', false, 's', 'sql')$$,
    'S16 helpers: IMMUTABLE (kv_ts_v1 STABLE), never STRICT, PARALLEL SAFE, language');
SELECT function_returns('queen', 'kv_apply_v1', ARRAY['jsonb', 'uuid', 'timestamp with time zone', 'boolean'], 'jsonb',
                        'S17 kv_apply_v1(jsonb, uuid, timestamptz, boolean) returns jsonb');
SELECT results_eq($$SELECT provolatile::text, proisstrict, proparallel::text FROM pg_proc
                    WHERE oid = 'queen.kv_apply_v1(jsonb,uuid,timestamptz,boolean)'::regprocedure$$,
                  $$VALUES ('v', false, 'u')$$, 'S18 kv_apply_v1 VOLATILE, not STRICT, PARALLEL UNSAFE');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = 'queen'::regnamespace
                      AND proname IN ('kv_apply_v1', 'kv_page_v1') AND prosrc ~ 'kv_(quota|usage)'),
          'S19 no write path names kv_quota or kv_usage');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc WHERE oid = 'queen.kv_apply_v1(jsonb,uuid,timestamptz,boolean)'::regprocedure
                      AND prosrc ~* '(savepoint|exception\s+when)'),
          'S20 kv_apply_v1 has no savepoint and no EXCEPTION block');
SELECT is((pg_temp.kv1('{"op":"get","ns":"t024-nowhere","key":"k"}'))->'found', 'false'::jsonb,
          'S21 an unknown namespace reads empty, not an error');
SELECT is(pg_temp.kv('[{"op":"get","ns":"t024-a","key":"b"}]'), '[{"index":0,"op":"get","found":false,"key":"b"}]'::jsonb,
          'S22 the done-when call: a get of an absent key');

-- ===================================================================
-- N: names (§2)
-- ===================================================================
SELECT throws_ok($$SELECT queen.kv_check_names_v1('Abc', 'k')$$, '22023', 'kv_bad_namespace', 'N1 upper case namespace');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('', 'k')$$, '22023', 'kv_bad_namespace', 'N2 empty namespace');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('-ab', 'k')$$, '22023', 'kv_bad_namespace', 'N3 namespace starting with -');
SELECT throws_ok($$SELECT queen.kv_check_names_v1(repeat('a', 65), 'k')$$, '22023', 'kv_bad_namespace', 'N4 65-char namespace');
SELECT throws_ok($$SELECT queen.kv_check_names_v1(E'ab\n', 'k')$$, '22023', 'kv_bad_namespace', 'N5 trailing newline');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('a/b', 'k')$$, '22023', 'kv_bad_namespace', 'N6 slash in namespace');
SELECT throws_ok($$SELECT queen.kv_check_names_v1(NULL, 'k')$$, '22023', 'kv_bad_namespace', 'N7 NULL namespace raises');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('ns', '')$$, '22023', 'kv_bad_key', 'N8 empty key');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('ns', NULL)$$, '22023', 'kv_bad_key', 'N9 NULL key raises');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('ns', repeat('k', 513))$$, '22001', 'kv_key_too_large', 'N10 513-byte key');
SELECT throws_ok($$SELECT queen.kv_check_names_v1('ns', repeat(chr(8364), 171))$$, '22001', 'kv_key_too_large',
                 'N11 the limit is bytes: 171 x U+20AC = 513 bytes');
SELECT lives_ok($$SELECT queen.kv_check_names_v1(repeat('a', 64), repeat('k', 512))$$, 'N12 64-char namespace, 512-byte key');
SELECT lives_ok($$SELECT queen.kv_check_names_v1('0a.b_c-d', 'any key / with % and _')$$, 'N13 digits . _ - allowed');
SELECT is((pg_temp.kv_err('[{"op":"get","ns":"Secret-Name","key":"k"}]'))->>'message', 'kv_bad_namespace',
          'N14 the message is the opaque code only');
SELECT ok((pg_temp.kv_err('[{"op":"get","ns":"Secret-Name","key":"k"}]'))->>'detail' LIKE '%Secret-Name%',
          'N15 the name goes in DETAIL');

-- ===================================================================
-- H: pure helpers (§3)
-- ===================================================================
SELECT is(queen.kv_live_v1(NULL, '2030-01-01'), true, 'H1 live: forever key');
SELECT is(queen.kv_live_v1('2030-01-01', '2030-01-01'), false, 'H2 live: expires_at = now is dead (same boundary as the sweeper)');
SELECT is(queen.kv_live_v1('2030-01-02', '2030-01-01'), true, 'H3 live: future expiry');
SELECT is(queen.kv_ver_v1(NULL, NULL, '2030-01-01'), 0::bigint, 'H4 ver: absent row is 0, not NULL');
SELECT is(queen.kv_ver_v1(7, NULL, '2030-01-01'), 7::bigint, 'H5 ver: live forever row');
SELECT is(queen.kv_ver_v1(7, '2029-12-31', '2030-01-01'), 0::bigint, 'H6 ver: expired row is 0');
SELECT is(queen.kv_ver_v1(7, '2030-01-01', NULL), 0::bigint, 'H7 ver: total even on a NULL now');
SELECT is(queen.kv_num_v1(NULL, NULL, '2030-01-01'), 0::numeric, 'H8 num: absent row is 0');
SELECT is(queen.kv_num_v1('"12"', NULL, '2030-01-01'), 0::numeric, 'H9 num: a string is 0, no raise');
SELECT is(queen.kv_num_v1('{"a":1}', NULL, '2030-01-01'), 0::numeric, 'H10 num: an object is 0');
SELECT is(queen.kv_num_v1('null', NULL, '2030-01-01'), 0::numeric, 'H11 num: JSON null is 0');
SELECT is(queen.kv_num_v1('3.5', NULL, '2030-01-01'), 3.5::numeric, 'H12 num: a live number');
SELECT is(queen.kv_num_v1('3.5', '2029-01-01', '2030-01-01'), 0::numeric, 'H13 num: an expired number is 0');
SELECT is(queen.kv_prefix_end_v1(''), NULL, 'H14 prefix_end of empty is NULL (no upper bound)');
SELECT is(queen.kv_prefix_end_v1(NULL), NULL, 'H15 prefix_end of NULL is NULL');
SELECT is(queen.kv_prefix_end_v1('ab'), 'ac', 'H16 prefix_end(ab) = ac');
SELECT is(queen.kv_prefix_end_v1('a' || chr(55295)), 'a' || chr(57344), 'H17 U+D7FF jumps over the surrogates to U+E000');
SELECT is(queen.kv_prefix_end_v1('a' || chr(1114111) || chr(1114111)), 'b', 'H18 trailing U+10FFFF backtracks');
SELECT is(queen.kv_prefix_end_v1(chr(1114111)), NULL, 'H19 only U+10FFFF: no upper bound, no raise');
SELECT ok(('a' || chr(1114111) || 'zzz') COLLATE "C" < queen.kv_prefix_end_v1('a') COLLATE "C"
          AND ('a' || chr(1114111)) COLLATE "C" < 'b' COLLATE "C", 'H20 the bound is above every text with the prefix (byte order)');
SELECT is(queen.kv_ts_v1('2030-01-02 03:04:05.000006+02'), '2030-01-02T01:04:05.000006Z', 'H21 timestamps: UTC, microseconds, Z');

-- ===================================================================
-- R1: every shape error, its SQLSTATE, and nothing written
-- ===================================================================
SELECT throws_ok($$SELECT pg_temp.kv('{"op":"get"}')$$, '22023', 'kv_bad_request', 'R1.1 ops not an array');
SELECT throws_ok($$SELECT pg_temp.kv('[1]')$$, '22023', 'kv_bad_request', 'R1.2 op not an object');
SELECT throws_ok($$SELECT pg_temp.kv('[{"ns":"t024-a","key":"k"}]')$$, '22023', 'kv_bad_request', 'R1.3 op without "op"');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"upsert","ns":"t024-a","key":"k"}]')$$, '22023', 'kv_unknown_op', 'R1.4 unknown op');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttl":10}]')$$, '22023', 'kv_bad_request',
                 'R1.5 unknown field (a typo of ttlSeconds) refused');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":"k","value":1}]')$$, '22023', 'kv_bad_request',
                 'R1.6 a field of another op refused');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","forever":true}]')$$, '22023', 'kv_bad_request',
                 'R1.7 put without value');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"forever":true,"required":"yes"}]')$$,
                 '22023', 'kv_bad_request', 'R1.8 required not a boolean');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"forever":1}]')$$, '22023', 'kv_bad_request',
                 'R1.9 forever not a boolean');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-a","key":"k","forever":true}]')$$, '22023', 'kv_bad_request',
                 'R1.10 incr without delta');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-a","key":"k","delta":"1","forever":true}]')$$, '22023', 'kv_bad_request',
                 'R1.11 incr with a string delta');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-a","key":"k","delta":1,"min":5,"max":4,"forever":true}]')$$,
                 '22023', 'kv_bad_request', 'R1.12 incr with min > max');
SELECT throws_ok($$SELECT queen.kv_apply_v1('[]', NULL, NULL, false)$$, '22023', 'kv_bad_request', 'R1.13 NULL tenant');
SELECT throws_ok($$SELECT queen.kv_apply_v1('[]', gen_random_uuid(), NULL, NULL)$$, '22023', 'kv_bad_request', 'R1.14 NULL p_in_wire');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":5,"key":"k"}]')$$, '22023', 'kv_bad_namespace', 'R1.15 ns not a string');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":5}]')$$, '22023', 'kv_bad_key', 'R1.16 key not a string');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a"}]')$$, '22023', 'kv_bad_key', 'R1.17 missing key');
SELECT throws_ok(format($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":"%s"}]')$$, repeat('k', 513)),
                 '22001', 'kv_key_too_large', 'R1.18 key too large');
SELECT throws_ok(format($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":"%s","forever":true}]')$$, repeat('v', 65535)),
                 '22001', 'kv_value_too_large', 'R1.19 value of 65537 bytes of JSON text');
SELECT lives_ok(format($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"big","value":"%s","forever":true}]')$$, repeat('v', 65534)),
                'R1.20 value of exactly 65536 bytes is accepted');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1}]')$$, '22023', 'kv_expiry_not_specified',
                 'R1.21 no expiry');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttlSeconds":5,"forever":true}]')$$,
                 '22023', 'kv_expiry_not_specified', 'R1.22 both expiries');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"forever":false}]')$$,
                 '22023', 'kv_expiry_not_specified', 'R1.23 forever:false alone is no expiry');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-a","key":"k","delta":1}]')$$, '22023', 'kv_expiry_not_specified',
                 'R1.24 incr without expiry');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttlSeconds":0}]')$$, '22023', 'kv_bad_ttl', 'R1.25 ttl 0');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttlSeconds":1.5}]')$$, '22023', 'kv_bad_ttl', 'R1.26 fractional ttl');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttlSeconds":"10"}]')$$, '22023', 'kv_bad_ttl', 'R1.27 string ttl');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"ttlSeconds":2147483648}]')$$, '22023', 'kv_bad_ttl', 'R1.28 ttl over 2^31-1');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"k","value":1,"forever":true,"expect":-1}]')$$, '22023', 'kv_bad_expect', 'R1.29 negative expect');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"delete","ns":"t024-a","key":"k","expect":"3"}]')$$, '22023', 'kv_bad_expect', 'R1.30 string expect');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"putIfAbsent","ns":"t024-a","key":"k","value":1,"forever":true,"expect":3}]')$$,
                 '22023', 'kv_bad_expect', 'R1.31 putIfAbsent with expect other than 0');
SELECT lives_ok($$SELECT pg_temp.kv('[{"op":"putIfAbsent","ns":"t024-a","key":"pia0","value":1,"forever":true,"expect":0}]')$$,
                'R1.32 putIfAbsent with expect 0 is allowed');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-a","key":"k","delta":1,"forever":true,"expect":0}]')$$,
                 '22023', 'kv_bad_expect', 'R1.33 incr takes no expect');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-a"}]')$$, '22023', 'kv_prefix_required', 'R1.34 getPrefix without prefix');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-a","prefix":""}]')$$, '22023', 'kv_prefix_required', 'R1.35 empty prefix');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-a","prefix":"a"}]', '2030-01-01', true)$$,
                 '22023', 'kv_get_prefix_not_allowed_in_transaction', 'R1.36 getPrefix refused in the wire');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":"k","tenant":"x"}]')$$, '22023', 'kv_tenant_not_an_input', 'R1.37 tenant field');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":"k","tenantId":"x"}]')$$, '22023', 'kv_tenant_not_an_input', 'R1.38 tenantId field');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"get","ns":"t024-a","key":"k","_tenant":"x"}]')$$, '22023', 'kv_tenant_not_an_input', 'R1.39 _tenant field');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"d","value":1,"forever":true},{"op":"delete","ns":"t024-a","key":"d"}]')$$,
                 '22023', 'kv_duplicate_key_in_call', 'R1.40 one key written twice in a call');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getMany","ns":"t024-a","keys":["a",1]}]')$$, '22023', 'kv_bad_key', 'R1.41 getMany key not a string');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getMany","ns":"t024-a","keys":"a"}]')$$, '22023', 'kv_bad_request', 'R1.42 getMany keys not an array');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-a","prefix":"a","limit":"5"}]')$$, '22023', 'kv_bad_request', 'R1.43 limit not a number');
-- A refused call writes nothing, even the ops before the bad one.
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"w1","value":1,"forever":true},
                                       {"op":"put","ns":"t024-a","key":"w2","value":1,"ttlSeconds":-3}]')$$,
                 '22023', 'kv_bad_ttl', 'R1.44 a call with one bad op is refused');
SELECT ok(pg_temp.row('t024-a', 'w1') IS NULL, 'R1.45 ... and wrote nothing');
SELECT is(pg_temp.kv('[]'), '[]'::jsonb, 'R1.46 an empty call returns []');

-- ===================================================================
-- R2/R3: reads exempt from the duplicate rule
-- ===================================================================
SELECT is(jsonb_array_length(pg_temp.kv('[{"op":"put","ns":"t024-a","key":"rw","value":1,"forever":true},
                                          {"op":"get","ns":"t024-a","key":"rw"},
                                          {"op":"getMany","ns":"t024-a","keys":["rw","rw"]}]')), 3,
          'R3.1 reads of a key written in the same call are allowed');
SELECT lives_ok($$SELECT pg_temp.kv('[{"op":"put","ns":"t024-a","key":"same","value":1,"forever":true},
                                      {"op":"put","ns":"t024-b","key":"same","value":1,"forever":true}]')$$,
                'R3.2 the same key in two namespaces is two keys');

-- ===================================================================
-- R4: apply order (phase, ns, key COLLATE "C", ordinal), results by index
-- ===================================================================
CREATE TEMP TABLE t024_order ON COMMIT DROP AS
SELECT pg_temp.kv('[{"op":"put","ns":"t024-o","key":"z","value":1,"forever":true},
                    {"op":"put","ns":"t024-o","key":"é","value":1,"forever":true},
                    {"op":"put","ns":"t024-o","key":"a","value":1,"forever":true},
                    {"op":"put","ns":"t024-o","key":"B","value":1,"forever":true},
                    {"op":"put","ns":"t024-b","key":"zz","value":1,"forever":true}]') AS r;
SELECT is((SELECT array_agg(e->>'index' ORDER BY o) FROM t024_order, jsonb_array_elements(r) WITH ORDINALITY AS x(e, o)),
          ARRAY['0', '1', '2', '3', '4'], 'R4.1 results aligned by input index');
SELECT is((SELECT array_agg(e->>'key' ORDER BY (e->>'version')::bigint) FROM t024_order, jsonb_array_elements(r) AS e),
          ARRAY['zz', 'B', 'a', 'z', 'é'],
          'R4.2 applied in (ns, key) byte order: t024-b before t024-o, B < a < z < é (versions drawn in apply order)');
SELECT is(pg_temp.kv('[{"op":"getMany","ns":"t024-o","keys":["new"]},
                      {"op":"put","ns":"t024-o","key":"new","value":"mine","forever":true}]') #> '{0,rows,0,value}',
          '"mine"'::jsonb, 'R4.3 getMany (phase 1) sees the call''s own write');
SELECT is(pg_temp.kv('[{"op":"get","ns":"t024-o","key":"n2"},
                      {"op":"put","ns":"t024-o","key":"n2","value":1,"forever":true}]') #> '{0,found}',
          'false'::jsonb, 'R4.4 a get before a put of the same key (input order) does not see it');
SELECT is(pg_temp.kv('[{"op":"put","ns":"t024-o","key":"n3","value":1,"forever":true},
                      {"op":"get","ns":"t024-o","key":"n3"}]') #> '{1,found}',
          'true'::jsonb, 'R4.5 a get after a put of the same key (input order) sees it');

-- ===================================================================
-- R5: budgets (HTTP vs wire)
-- ===================================================================
SELECT lives_ok(format('SELECT pg_temp.kv(%L)', (SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 't024-b', 'key', 'k' || g)) FROM generate_series(1, 256) g)),
                'R5.1 256 ops over HTTP');
SELECT throws_ok(format('SELECT pg_temp.kv(%L)', (SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 't024-b', 'key', 'k' || g)) FROM generate_series(1, 257) g)),
                 '22023', 'kv_too_many_ops', 'R5.2 257 ops over HTTP');
SELECT lives_ok(format('SELECT pg_temp.kv(%L, %L, true)', (SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 't024-b', 'key', 'k' || g)) FROM generate_series(1, 64) g), '2030-01-01'),
                'R5.3 64 ops in the wire');
SELECT throws_ok(format('SELECT pg_temp.kv(%L, %L, true)', (SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 't024-b', 'key', 'k' || g)) FROM generate_series(1, 65) g), '2030-01-01'),
                 '22023', 'kv_too_many_ops', 'R5.4 65 ops in the wire');
SELECT lives_ok(format('SELECT pg_temp.kv(%L)', jsonb_build_array(jsonb_build_object('op', 'getMany', 'ns', 't024-b', 'keys', (SELECT jsonb_agg('k' || g) FROM generate_series(1, 4096) g)))),
                'R5.5 4096 keys over HTTP');
SELECT throws_ok(format('SELECT pg_temp.kv(%L)', jsonb_build_array(jsonb_build_object('op', 'getMany', 'ns', 't024-b', 'keys', (SELECT jsonb_agg('k' || g) FROM generate_series(1, 4096) g)),
                                                                  jsonb_build_object('op', 'get', 'ns', 't024-b', 'key', 'x'))),
                 '22023', 'kv_too_many_keys', 'R5.6 4097 keys over HTTP (getMany counts its keys, get counts 1)');
SELECT lives_ok(format('SELECT pg_temp.kv(%L, %L, true)', jsonb_build_array(jsonb_build_object('op', 'getMany', 'ns', 't024-b', 'keys', (SELECT jsonb_agg('k' || g) FROM generate_series(1, 256) g))), '2030-01-01'),
                'R5.7 256 keys in the wire');
SELECT throws_ok(format('SELECT pg_temp.kv(%L, %L, true)', jsonb_build_array(jsonb_build_object('op', 'getMany', 'ns', 't024-b', 'keys', (SELECT jsonb_agg('k' || g) FROM generate_series(1, 257) g))), '2030-01-01'),
                 '22023', 'kv_too_many_keys', 'R5.8 257 keys in the wire');
SELECT lives_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-b","prefix":"a","limit":5000},{"op":"getPrefix","ns":"t024-b","prefix":"b","limit":5000},
                                      {"op":"getPrefix","ns":"t024-b","prefix":"c","limit":5000},{"op":"getPrefix","ns":"t024-b","prefix":"d","limit":5000}]')$$,
                'R5.9 getPrefix counts its CLAMPED limit: 4 x 1000 keys pass');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"getPrefix","ns":"t024-b","prefix":"a","limit":5000},{"op":"getPrefix","ns":"t024-b","prefix":"b","limit":5000},
                                       {"op":"getPrefix","ns":"t024-b","prefix":"c","limit":5000},{"op":"getPrefix","ns":"t024-b","prefix":"d","limit":5000},
                                       {"op":"getPrefix","ns":"t024-b","prefix":"e"}]')$$,
                 '22023', 'kv_too_many_keys', 'R5.10 ... and a fifth getPrefix (default limit 100) crosses 4096');

-- The 4 MiB read budget. 70 rows of 64000 bytes of JSON text each (4.48 MB):
-- rows are served while the bytes before them are under 4194304, so 66 rows
-- (the 66th straddles), then the call's reads are cut.
INSERT INTO queen.kv (tenant_id, namespace, key, value, version)
SELECT current_setting('t024.tenant')::uuid, 't024-big', 'k' || lpad(g::text, 2, '0'), to_jsonb(repeat('x', 63998)), nextval('queen.kv_version_seq')
FROM generate_series(1, 70) g;
CREATE TEMP TABLE t024_gm ON COMMIT DROP AS
SELECT pg_temp.kv1(jsonb_build_object('op', 'getMany', 'ns', 't024-big',
                   'keys', (SELECT jsonb_agg('k' || lpad(g::text, 2, '0') ORDER BY g DESC) FROM generate_series(1, 70) g)
                           || '["a-missing", "z-missing"]'::jsonb)::text) AS r;
SELECT is((SELECT jsonb_array_length(r->'rows') FROM t024_gm), 66, 'R5.11 getMany: rows stop after the row that straddles 4 MiB');
SELECT is((SELECT r->'truncated' FROM t024_gm), 'true'::jsonb, 'R5.12 getMany: truncated');
SELECT is((SELECT r->'missing' FROM t024_gm), '["a-missing"]'::jsonb,
          'R5.13 getMany: a key cut by the budget (z-missing) is neither a row nor missing');
SELECT is((SELECT r #>> '{rows,65,key}' FROM t024_gm), 'k66', 'R5.14 getMany: rows in key order');
CREATE TEMP TABLE t024_gp ON COMMIT DROP AS
SELECT pg_temp.kv1('{"op":"getPrefix","ns":"t024-big","prefix":"k","limit":1000}') AS r;
SELECT is((SELECT jsonb_array_length(r->'rows') FROM t024_gp), 66, 'R5.15 getPrefix: the straddling row is included, then the page stops');
SELECT is((SELECT r->'truncated' FROM t024_gp) || (SELECT r->'nextAfter' FROM t024_gp), '[true, "k66"]'::jsonb,
          'R5.16 getPrefix: truncated with nextAfter = the last row served');
SELECT is(jsonb_array_length(pg_temp.kv1('{"op":"getPrefix","ns":"t024-big","prefix":"k","limit":1000,"keysOnly":true}')->'rows'), 70,
          'R5.17 keysOnly returns no values, so spends no read budget');
SELECT is((SELECT array_agg(DISTINCT (e ? 'truncated')) FROM jsonb_array_elements(
              pg_temp.kv((SELECT jsonb_agg(jsonb_build_object('op', 'get', 'ns', 't024-big', 'key', 'k' || lpad(g::text, 2, '0'))) FROM generate_series(1, 68) g)::text)) WITH ORDINALITY AS x(e, o)
           WHERE o > 66), ARRAY[true], 'R5.18 gets share the budget: the 67th get of 64 KB is cut (truncated, not found:false)');
SELECT is(pg_temp.kv('[{"op":"get","ns":"t024-big","key":"k01"},{"op":"getMany","ns":"t024-big","keys":["k70"]},
                      {"op":"getPrefix","ns":"t024-big","prefix":"k","limit":1000}]') #> '{2,rows}' ->> 65, NULL,
          'R5.19 the budget is shared by the call: a get and a getMany leave getPrefix 64 rows');
DELETE FROM queen.kv WHERE tenant_id = current_setting('t024.tenant')::uuid AND namespace = 't024-big';

-- ===================================================================
-- R6: expiry is mandatory; put never inherits; incr's TTL is create-only
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-e","key":"p","value":1,"ttlSeconds":10}')->>'applied', 'true', 'R6.1 put with ttl');
SELECT is((pg_temp.row('t024-e', 'p')).expires_at, '2030-01-01 00:00:10+00'::timestamptz, 'R6.2 expires_at = now + ttl');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-e","key":"p","value":2,"forever":true}', '2030-01-01 00:00:05+00')->>'applied', 'true',
          'R6.3 overwrite with forever');
SELECT is((pg_temp.row('t024-e', 'p')).expires_at, NULL, 'R6.4 a put never inherits the previous expiry (now forever)');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-e","key":"p","value":3,"ttlSeconds":60}', '2030-01-01 00:00:06+00')->>'applied', 'true',
          'R6.4b overwrite a forever key with a ttl');
SELECT is((pg_temp.row('t024-e', 'p')).expires_at, '2030-01-01 00:01:06+00'::timestamptz, 'R6.5 ... the new ttl counts from the new write');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-e","key":"c","delta":1,"ttlSeconds":10}')->'value', '1'::jsonb, 'R6.6 incr creates with its ttl');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-e","key":"c","delta":1,"ttlSeconds":100}', '2030-01-01 00:00:05+00')->'value', '2'::jsonb,
          'R6.7 incr on a live counter');
SELECT is((pg_temp.row('t024-e', 'c')).expires_at, '2030-01-01 00:00:10+00'::timestamptz, 'R6.8 a live counter keeps its window');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-e","key":"c","delta":1,"forever":true}', '2030-01-01 00:00:20+00')->'value', '1'::jsonb,
          'R6.9 incr on an expired counter restarts from 0');
SELECT is((pg_temp.row('t024-e', 'c')).expires_at, NULL, 'R6.10 ... and takes the new expiry (forever)');

-- ===================================================================
-- R7: an expired row is never returned and never counts as existing
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-x","key":"k","value":"old","ttlSeconds":10}')->>'applied', 'true', 'R7.1 setup');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-x","key":"k"}', '2030-01-01 00:00:09.999999+00')->'found', 'true'::jsonb, 'R7.2 live just before its instant');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-x","key":"k"}', '2030-01-01 00:00:10+00')->'found', 'false'::jsonb, 'R7.3 get: gone at its instant');
SELECT is(pg_temp.kv1('{"op":"getMany","ns":"t024-x","keys":["k"]}', '2030-01-01 00:00:10+00')->'missing', '["k"]'::jsonb, 'R7.4 getMany: missing');
SELECT is(pg_temp.kv1('{"op":"getPrefix","ns":"t024-x","prefix":"k"}', '2030-01-01 00:00:10+00')->'rows', '[]'::jsonb, 'R7.5 getPrefix: no rows');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-x","key":"k"}', '2030-01-01 00:00:10+00')->>'reason', 'absent', 'R7.6 delete: absent');
SELECT is(pg_temp.kv1(format('{"op":"put","ns":"t024-x","key":"k","value":1,"forever":true,"expect":%s}', (pg_temp.row('t024-x', 'k')).version),
                      '2030-01-01 00:00:10+00')->>'reason', 'absent', 'R7.7 expect: its old version no longer matches (absent)');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-x","key":"k","expect":0}', '2030-01-01 00:00:10+00')->'applied', 'true'::jsonb,
          'R7.8 delete expect:0 on an expired row succeeds');

-- ===================================================================
-- R8: expect
-- ===================================================================
CREATE TEMP TABLE t024_v ON COMMIT DROP AS
SELECT (pg_temp.kv1('{"op":"put","ns":"t024-c","key":"k","value":"v1","forever":true}')->>'version')::bigint AS v1;
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"k","value":"v2","forever":true,"expect":0}'),
          jsonb_build_object('index', 0, 'op', 'put', 'applied', false, 'reason', 'exists', 'key', 'k', 'value', 'v1', 'version', (SELECT v1 FROM t024_v)),
          'R8.1 expect 0 on a live row: exists, with the current value and version');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-c","key":"k","value":"v2","forever":true}'),
          jsonb_build_object('index', 0, 'op', 'put', 'applied', false, 'reason', 'exists', 'key', 'k', 'value', 'v1', 'version', (SELECT v1 FROM t024_v)),
          'R8.2 putIfAbsent loser: reports op put, the winner''s value and version');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"k","value":"v2","forever":true,"expect":1}') - 'index',
          jsonb_build_object('op', 'put', 'applied', false, 'reason', 'version', 'key', 'k', 'value', 'v1', 'version', (SELECT v1 FROM t024_v)),
          'R8.3 expect N mismatch: reason version, current value and version');
SELECT is(pg_temp.kv1(format('{"op":"put","ns":"t024-c","key":"k","value":"v2","forever":true,"expect":%s}', (SELECT v1 FROM t024_v)))->>'applied',
          'true', 'R8.4 expect N match applies');
SELECT isnt((pg_temp.row('t024-c', 'k')).version, (SELECT v1 FROM t024_v), 'R8.5 ... with a new version');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"nx","value":1,"forever":true,"expect":12345}') - 'index',
          '{"op":"put","applied":false,"reason":"absent","key":"nx","value":null,"version":0}'::jsonb,
          'R8.6 expect N > 0 on an absent key: absent, value null, version 0');
SELECT ok(pg_temp.row('t024-c', 'nx') IS NULL, 'R8.7 expect N > 0 never creates a row');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"u","value":1,"forever":true}')->>'applied', 'true', 'R8.8 no expect: creates');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"u","value":2,"forever":true}')->'value', '2'::jsonb, 'R8.9 no expect: overwrites');
-- expect 0 beats an expired, unpruned row and starts a new lineage.
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"r","value":"first","ttlSeconds":5}')->>'applied', 'true', 'R8.10 setup: a row with ttl 5');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-c","key":"r","value":"second","forever":true}', '2030-01-01 01:00:00+00')->>'applied',
          'true', 'R8.11 putIfAbsent wins over an expired, unpruned row');
SELECT is((pg_temp.row('t024-c', 'r')).created_at, '2030-01-01 01:00:00+00'::timestamptz, 'R8.12 created_at resets on resurrection');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-c","key":"r","value":"third","forever":true}', '2030-01-01 02:00:00+00')->>'applied', 'true', 'R8.13 overwrite a live row');
SELECT is((pg_temp.row('t024-c', 'r')).created_at, '2030-01-01 01:00:00+00'::timestamptz, 'R8.14 created_at survives an update of a live row');
SELECT is((pg_temp.row('t024-c', 'r')).updated_at, '2030-01-01 02:00:00+00'::timestamptz, 'R8.15 updated_at is the call''s instant');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-c","key":"r","expect":0}') - 'index',
          jsonb_build_object('op', 'delete', 'applied', false, 'reason', 'exists', 'key', 'r', 'value', 'third', 'version', (pg_temp.row('t024-c', 'r')).version),
          'R8.16 delete expect:0 on a live row: exists');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-c","key":"r","expect":1}')->>'reason', 'version', 'R8.17 delete expect N mismatch: version');
SELECT is(pg_temp.kv1(format('{"op":"delete","ns":"t024-c","key":"r","expect":%s}', (pg_temp.row('t024-c', 'r')).version))->>'applied', 'true',
          'R8.18 delete expect N match');
SELECT ok(pg_temp.row('t024-c', 'r') IS NULL, 'R8.19 ... deletes');

-- ===================================================================
-- R9: a lost precondition is a verdict; required escalates with 23514
-- ===================================================================
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"putIfAbsent","ns":"t024-c","key":"k","value":1,"forever":true,"required":true}]')$$,
                 '23514', 'kv_precondition_failed', 'R9.1 required:true escalates');
CREATE TEMP TABLE t024_e ON COMMIT DROP AS
SELECT pg_temp.kv_err('[{"op":"put","ns":"t024-c","key":"nk","value":1,"forever":true},
                        {"op":"putIfAbsent","ns":"t024-c","key":"k","value":1,"forever":true,"required":true}]') AS e;
SELECT is((SELECT (e->>'detail')::jsonb FROM t024_e),
          jsonb_build_object('index', 1, 'op', 'put', 'ns', 't024-c', 'key', 'k', 'reason', 'exists',
                             'version', (pg_temp.row('t024-c', 'k')).version, 'value', 'v2'),
          'R9.2 DETAIL is JSON {index, op, ns, key, reason, version, value}');
SELECT ok(pg_temp.row('t024-c', 'nk') IS NULL, 'R9.3 the whole call rolled back (the applied op before it too)');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-c","key":"k","value":1,"forever":true,"required":false}')->>'applied', 'false',
          'R9.4 required:false is a verdict');
SELECT is(pg_temp.kv1(format('{"op":"put","ns":"t024-c","key":"huge","value":"%s","forever":true}', repeat('h', 60000)))->>'applied', 'true',
          'R9.5 setup: a 60 KB value');
CREATE TEMP TABLE t024_e2 ON COMMIT DROP AS
SELECT pg_temp.kv_err('[{"op":"putIfAbsent","ns":"t024-c","key":"huge","value":1,"forever":true,"required":true}]') AS e;
SELECT cmp_ok((SELECT octet_length(e->>'detail') FROM t024_e2), '<=', 4096, 'R9.6 DETAIL capped at 4096 bytes');
SELECT is((SELECT (e->>'detail')::jsonb - 'version' - 'valueBytes' FROM t024_e2),
          '{"index":0,"op":"put","ns":"t024-c","key":"huge","reason":"exists","value":null,"valueOmitted":true}'::jsonb,
          'R9.7 ... still valid JSON: the value is dropped and valueOmitted says so');
SELECT is((SELECT ((e->>'detail')::jsonb->>'valueBytes')::int FROM t024_e2),
          (SELECT octet_length(value::text) FROM queen.kv WHERE namespace = 't024-c' AND key = 'huge'),
          'R9.7b ... and valueBytes says how big the dropped value is');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"incr","ns":"t024-c","key":"k","delta":1,"forever":true,"required":true}]')$$,
                 '23514', 'kv_precondition_failed', 'R9.8 incr type failure escalates too');
SELECT throws_ok($$SELECT pg_temp.kv('[{"op":"delete","ns":"t024-c","key":"absent-key","required":true}]')$$,
                 '23514', 'kv_precondition_failed', 'R9.9 delete of an absent key with required escalates');

-- ===================================================================
-- R10: incr
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"n","delta":95,"forever":true}')->'value', '95'::jsonb, 'R10.1 incr creates with delta');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"n","delta":10,"max":100,"forever":true}') - 'index' - 'version',
          '{"op":"incr","applied":false,"reason":"limit","key":"n","value":95}'::jsonb, 'R10.2 max is never saturated: limit, current value');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"n","delta":5,"max":100,"forever":true}')->'value', '100'::jsonb, 'R10.3 reaching max exactly applies');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"n","delta":-101,"min":0,"forever":true}')->>'reason', 'limit', 'R10.4 min is never saturated');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"n","delta":-10,"min":0,"max":200,"forever":true}')->'value', '90'::jsonb,
          'R10.5 a delta outside the limits still moves a live counter that stays inside');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"g","delta":-1,"min":0,"forever":true}') - 'index' - 'version',
          '{"op":"incr","applied":false,"reason":"limit","key":"g","value":null}'::jsonb, 'R10.6 the create branch is gated (delta below min)');
SELECT ok(pg_temp.row('t024-i', 'g') IS NULL, 'R10.7 ... and creates nothing');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"g","delta":5,"max":3,"forever":true}')->>'reason', 'limit', 'R10.8 gated above max too');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-i","key":"s","value":"text","ttlSeconds":10}')->>'applied', 'true', 'R10.9 setup: a string');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"s","delta":1,"forever":true}') - 'index' - 'version',
          '{"op":"incr","applied":false,"reason":"type","key":"s","value":"text"}'::jsonb, 'R10.10 a live non-number: type, current value');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"s","delta":1,"forever":true}', '2030-01-01 00:00:10+00')->'value', '1'::jsonb,
          'R10.11 an expired non-number counts as 0');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"f","delta":1.5,"forever":true}')->'value', '1.5'::jsonb, 'R10.12 fractional delta');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"f","delta":-0.5,"forever":true}')->'value', '1.0'::jsonb, 'R10.13 numeric arithmetic, no float drift');
SELECT ok(pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"f","delta":1,"forever":true}')->>'version'
          <> pg_temp.kv1('{"op":"incr","ns":"t024-i","key":"f","delta":1,"forever":true}')->>'version', 'R10.14 every incr draws a version');

-- ===================================================================
-- R11: versions come from the sequence; a re-created key never re-issues one
-- ===================================================================
CREATE TEMP TABLE t024_rv ON COMMIT DROP AS
SELECT (pg_temp.kv1('{"op":"put","ns":"t024-v","key":"k","value":1,"forever":true}')->>'version')::bigint AS v1;
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-v","key":"k"}')->>'applied', 'true', 'R11.1 delete');
SELECT isnt((pg_temp.kv1('{"op":"put","ns":"t024-v","key":"k","value":1,"forever":true}')->>'version')::bigint, (SELECT v1 FROM t024_rv),
            'R11.2 a re-created key gets a new version');
SELECT is(pg_temp.kv1(format('{"op":"put","ns":"t024-v","key":"k","value":1,"forever":true,"expect":%s}', (SELECT v1 FROM t024_rv)))->>'reason',
          'version', 'R11.3 a compare-and-set against the dead lineage fails');
SELECT isnt(pg_temp.kv1('{"op":"put","ns":"t024-v","key":"k","value":1,"forever":true}')->'version',
            pg_temp.kv1('{"op":"put","ns":"t024-v","key":"k","value":1,"forever":true}')->'version', 'R11.4 the same value written twice: two versions');

-- ===================================================================
-- SH: result shapes
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-s","key":"nul","value":null,"forever":true}')->'value', 'null'::jsonb, 'SH1 null is a legal value');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-s","key":"nul"}') - 'version',
          '{"index":0,"op":"get","found":true,"key":"nul","value":null,"expiresAt":null,"updatedAt":"2030-01-01T00:00:00.000000Z"}'::jsonb,
          'SH2 get found: value null is not found:false; expiresAt null for forever');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-s","key":"none"}'), '{"index":0,"op":"get","found":false,"key":"none"}'::jsonb, 'SH3 get not found');
SET LOCAL TimeZone = 'Asia/Tokyo';
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-s","key":"t","value":1,"ttlSeconds":90}', '2030-01-01 09:00:00.5+09') IS NOT NULL, true, 'SH4 setup');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-s","key":"t"}', '2030-01-01 00:00:01+00') - 'index' - 'op' - 'found' - 'key' - 'value' - 'version',
          '{"expiresAt":"2030-01-01T00:01:30.500000Z","updatedAt":"2030-01-01T00:00:00.500000Z"}'::jsonb,
          'SH5 timestamps are UTC with Z whatever the session TimeZone');
RESET TimeZone;
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-s","key":"none"}') - 'index',
          '{"op":"delete","applied":false,"reason":"absent","key":"none","value":null,"version":0}'::jsonb, 'SH6 delete of an absent key');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-s","key":"none","expect":0}') - 'index',
          '{"op":"delete","applied":true,"key":"none","value":null,"version":0}'::jsonb, 'SH7 delete expect:0 on an absent key succeeds');
SELECT is(pg_temp.kv1('{"op":"delete","ns":"t024-s","key":"nul"}') - 'index' - 'version',
          '{"op":"delete","applied":true,"key":"nul","value":null}'::jsonb, 'SH8 delete applied reports the row it removed');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-s","key":"pia","value":[1],"forever":true}') - 'version',
          '{"index":0,"op":"put","applied":true,"key":"pia","value":[1]}'::jsonb, 'SH9 putIfAbsent winner reports op put');
SELECT is(pg_temp.kv('[{"op":"put","ns":"t024-m","key":"b","value":2,"forever":true},{"op":"put","ns":"t024-m","key":"a","value":1,"forever":true}]')
          #>> '{1,index}', '1', 'SH10 setup');
SELECT is(pg_temp.kv1('{"op":"getMany","ns":"t024-m","keys":["zz","b","x","a","zz"]}') #- '{rows,0,version}' #- '{rows,1,version}',
          '{"index":0,"op":"getMany","rows":[{"key":"a","value":1,"expiresAt":null,"updatedAt":"2030-01-01T00:00:00.000000Z"},
                                             {"key":"b","value":2,"expiresAt":null,"updatedAt":"2030-01-01T00:00:00.000000Z"}],
            "missing":["zz","x"],"truncated":false}'::jsonb,
          'SH11 getMany: rows in key order, missing in input order, each key once');
SELECT is(pg_temp.kv1('{"op":"getMany","ns":"t024-m","keys":[]}'), '{"index":0,"op":"getMany","rows":[],"missing":[],"truncated":false}'::jsonb,
          'SH12 getMany of no keys');

-- getPrefix: byte order, literal % and _, keyset paging, clamp.
SELECT is(jsonb_array_length(pg_temp.kv((SELECT jsonb_agg(jsonb_build_object('op', 'put', 'ns', 't024-p', 'key', k, 'value', 1, 'forever', true))
                                          FROM unnest(ARRAY['p%x', 'p_x', 'pax', 'pbx', 'pB', 'pé', 'q', 'p']) AS k)::text)), 8, 'SH13 setup');
SELECT is((SELECT array_agg(r->>'key') FROM jsonb_array_elements(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p"}')->'rows') AS r),
          ARRAY['p', 'p%x', 'pB', 'p_x', 'pax', 'pbx', 'pé'], 'SH14 getPrefix: byte order (% < B < _ < a < é), prefix itself included, q excluded');
SELECT is((SELECT array_agg(r->>'key') FROM jsonb_array_elements(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p%"}')->'rows') AS r),
          ARRAY['p%x'], 'SH15 % in a prefix is literal');
SELECT is((SELECT array_agg(r->>'key') FROM jsonb_array_elements(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p_"}')->'rows') AS r),
          ARRAY['p_x'], 'SH16 _ in a prefix is literal');
SELECT is(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":2}') - 'rows',
          '{"index":0,"op":"getPrefix","truncated":true,"nextAfter":"p%x"}'::jsonb, 'SH17 page 1: truncated, nextAfter');
SELECT is((SELECT array_agg(r->>'key') FROM jsonb_array_elements(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":2,"after":"p%x"}')->'rows') AS r),
          ARRAY['pB', 'p_x'], 'SH18 page 2: after is an exclusive keyset cursor');
SELECT is(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":3,"after":"p_x"}') - 'rows',
          '{"index":0,"op":"getPrefix","truncated":false,"nextAfter":null}'::jsonb, 'SH19 last page: not truncated, nextAfter null');
SELECT is(jsonb_array_length(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":0}')->'rows'), 1, 'SH20 limit 0 is clamped to 1');
SELECT is(jsonb_array_length(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":-5}')->'rows'), 1, 'SH21 negative limit is clamped to 1');
SELECT is(jsonb_array_length(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"p","limit":1e9}')->'rows'), 7, 'SH22 a huge limit is clamped, not refused');
SELECT is(pg_temp.kv1('{"op":"getPrefix","ns":"t024-p","prefix":"pa","keysOnly":true}') #- '{rows,0,version}',
          '{"index":0,"op":"getPrefix","rows":[{"key":"pax","expiresAt":null,"updatedAt":"2030-01-01T00:00:00.000000Z"}],"truncated":false,"nextAfter":null}'::jsonb,
          'SH23 keysOnly rows carry no value');
SELECT is(pg_temp.kv1(format('{"op":"put","ns":"t024-p","key":"%s","value":1,"forever":true}', 'z' || chr(1114111)))->>'applied', 'true', 'SH24 setup');
SELECT is(pg_temp.kv1(format('{"op":"getPrefix","ns":"t024-p","prefix":"%s"}', 'z' || chr(1114111))) #>> '{rows,0,key}', 'z' || chr(1114111),
          'SH25 a prefix ending in U+10FFFF works');

-- ===================================================================
-- C: console reads (§5)
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-l","key":"gone","value":1,"ttlSeconds":1}', '2000-01-01 00:00:00+00')->>'applied', 'true',
          'C1 setup: an expired row (written in 2000)');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-l","key":"live","value":2,"forever":true}')->>'applied', 'true', 'C2 setup: a live row');
SELECT is((SELECT array_agg(r->>'key') FROM jsonb_array_elements(queen.kv_list_v1(current_setting('t024.tenant')::uuid, 't024-l', '', NULL, NULL, false, false)->'rows') AS r),
          ARRAY['live'], 'C3 kv_list_v1: empty prefix lists the namespace, expired rows hidden by default');
SELECT is((SELECT jsonb_agg(jsonb_build_object('k', r->'key', 'e', r->'expired')) FROM jsonb_array_elements(
              queen.kv_list_v1(current_setting('t024.tenant')::uuid, 't024-l', NULL, NULL, NULL, false, true)->'rows') AS r),
          '[{"k":"gone","e":true},{"k":"live","e":false}]'::jsonb, 'C4 kv_list_v1: include_expired flags them');
SELECT is(queen.kv_list_v1(current_setting('t024.tenant')::uuid, 't024-l', 'li', NULL, 5, true, false) - 'rows',
          '{"truncated":false,"nextAfter":null,"bytes":0}'::jsonb, 'C5 kv_list_v1 result: truncated, nextAfter, bytes');
SELECT throws_ok($$SELECT queen.kv_list_v1(NULL, 't024-l', '', NULL, NULL, false, false)$$, '22023', 'kv_bad_request', 'C6 kv_list_v1 raises on a NULL tenant');
SELECT throws_ok($$SELECT queen.kv_list_v1(gen_random_uuid(), 'BAD', '', NULL, NULL, false, false)$$, '22023', 'kv_bad_namespace', 'C7 kv_list_v1 checks the namespace');
SELECT is((SELECT jsonb_agg(e) FROM jsonb_array_elements(queen.kv_namespaces_v1(current_setting('t024.tenant')::uuid)) AS e
           WHERE e->>'namespace' IN ('t024-l', 't024-m', 't024-b')),
          '[{"namespace":"t024-b","keys":2},{"namespace":"t024-l","keys":2},{"namespace":"t024-m","keys":2}]'::jsonb,
          'C8 kv_namespaces_v1: byte order, counts include expired-unswept rows');
SELECT is(queen.kv_namespaces_v1(gen_random_uuid()), '[]'::jsonb, 'C9 an unknown tenant has no namespaces');
SELECT throws_ok($$SELECT queen.kv_namespaces_v1(NULL)$$, '22023', 'kv_bad_request', 'C10 kv_namespaces_v1 raises on a NULL tenant');

-- ===================================================================
-- F: the one-op fast path gives what the general path gives. A two-op
-- call always takes the general path, so each fast one-op answer is
-- compared with the same op's element of a two-op call (beside a get of
-- another key); versions are tokens, so applied writes compare without them.
-- ===================================================================
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-f","key":"a","value":{"x":[1,"y"]},"ttlSeconds":60}') - 'version',
          (pg_temp.kv('[{"op":"put","ns":"t024-f","key":"a","value":{"x":[1,"y"]},"ttlSeconds":60},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0) - 'version',
          'F1 put (ttl): the fast answer is the general one');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-f","key":"a"}'),
          pg_temp.kv('[{"op":"get","ns":"t024-f","key":"a"},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0,
          'F2 get of a live row: the fast answer is the general one');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-f","key":"nope"}'),
          pg_temp.kv('[{"op":"get","ns":"t024-f","key":"nope"},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0,
          'F3 get of an absent key: same');
SELECT is(pg_temp.kv1('{"op":"get","ns":"t024-f","key":"a"}', '2030-01-01 00:01:00+00'),
          '{"index":0,"op":"get","found":false,"key":"a"}'::jsonb, 'F4 fast get: a row past its ttl is not found');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-f","key":"p","value":1,"forever":true}') - 'version',
          '{"index":0,"op":"put","applied":true,"key":"p","value":1}'::jsonb, 'F5 fast putIfAbsent on an absent key applies');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-f","key":"p","value":2,"forever":true}'),
          pg_temp.kv('[{"op":"putIfAbsent","ns":"t024-f","key":"p","value":2,"forever":true},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0,
          'F6 putIfAbsent on a live row: the verdict (exists, current value and version) is the general one');
SELECT is(pg_temp.kv1('{"op":"putIfAbsent","ns":"t024-f","key":"p","value":2,"forever":true}') ->> 'reason', 'exists',
          'F7 ... and it says exists');
SELECT is(pg_temp.kv_err('[{"op":"putIfAbsent","ns":"t024-f","key":"p","value":2,"forever":true,"required":true}]'),
          pg_temp.kv_err('[{"op":"putIfAbsent","ns":"t024-f","key":"p","value":2,"forever":true,"required":true},{"op":"get","ns":"t024-f","key":"zz"}]'),
          'F8 required putIfAbsent that lost: the same 23514 and DETAIL as the general path');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-f","key":"n","delta":2.5,"ttlSeconds":30}') - 'version',
          '{"index":0,"op":"incr","applied":true,"key":"n","value":2.5}'::jsonb, 'F9 fast incr creates the counter at delta');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-f","key":"n","delta":1,"forever":true}') - 'version',
          ((pg_temp.kv('[{"op":"incr","ns":"t024-f","key":"m","delta":3.5,"forever":true},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0) - 'version' - 'key')
          || '{"key":"n"}', 'F10 fast incr adds to a live counter (2.5 + 1), as the general path creates 3.5');
SELECT is((pg_temp.row('t024-f', 'n')).expires_at, '2030-01-01 00:00:30+00'::timestamptz,
          'F11 fast incr keeps a live counter''s window (forever on the second call did not apply)');
SELECT is(pg_temp.kv1('{"op":"put","ns":"t024-f","key":"s","value":"text","forever":true}') ->> 'applied', 'true', 'F12 setup: a string value');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-f","key":"s","delta":1,"forever":true}'),
          pg_temp.kv('[{"op":"incr","ns":"t024-f","key":"s","delta":1,"forever":true},{"op":"get","ns":"t024-f","key":"zz"}]') -> 0,
          'F13 incr of a live non-number: the verdict (type) is the general one');
SELECT is(pg_temp.kv1('{"op":"incr","ns":"t024-f","key":"s","delta":1,"forever":true}') ->> 'reason', 'type', 'F14 ... and it says type');
SELECT is(pg_temp.kv_err('[{"op":"get","ns":1,"key":"k"}]') ->> 'message', 'kv_bad_namespace', 'F15 a namespace that is not a string is refused');
SELECT is(pg_temp.kv_err('[{"op":"put","ns":"t024-f","key":"k","value":1,"forever":true,"required":"yes"}]') ->> 'message', 'kv_bad_request',
          'F16 required that is not a boolean is refused');
SELECT is(pg_temp.kv_err('[{"op":"incr","ns":"t024-f","key":"k","delta":"1","forever":true}]') ->> 'message', 'kv_bad_request',
          'F17 a string delta is refused');
SELECT is(pg_temp.kv_err('[{"op":"put","ns":"t024-f","key":"k","value":1,"ttlSeconds":2147483647}]'), NULL,
          'F18 ttlSeconds 2^31-1 is accepted');
SELECT is(pg_temp.kv_err('[{"op":"get","ns":"t024-f","key":"k","keys":[]}]') ->> 'message', 'kv_bad_request', 'F19 a get with a getMany field is refused');
SELECT is(pg_temp.kv_err('[{"op":"putIfAbsent","ns":"t024-f","key":"k","value":1,"forever":true,"expect":0}]'), NULL,
          'F20 putIfAbsent with expect 0 (the general path) is accepted');
SELECT is((SELECT array_agg(queen.kv_names_ok_v1(n, k) ORDER BY o)
           FROM (VALUES (1, 'a', 'k'), (2, repeat('a', 64), repeat('k', 512)), (3, repeat('a', 65), 'k'), (4, 'A', 'k'),
                        (5, '-a', 'k'), (6, 'a', ''), (7, 'a', repeat('é', 257)), (8, NULL, 'k'), (9, 'a', NULL),
                        (10, E'a\n', 'k')) AS t(o, n, k)),
          ARRAY[true, true, false, false, false, false, false, false, false, false],
          'F21 kv_names_ok_v1: the rules of kv_check_names_v1 as a predicate (never NULL)');

-- ===================================================================
-- X: the split. kv_apply_v1 = the checker (_kv_check_v1, typed op rows)
-- + one function per op kind, called by the apply loop and the one-op fast
-- path alike; the fast path's test per kind is the conjunction of the
-- checker's own rule predicates.
-- ===================================================================
-- check_ok(op): does the checker accept op alone (as an HTTP call)?
CREATE FUNCTION pg_temp.check_ok(p_op jsonb) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM queen._kv_check_v1(jsonb_build_array(p_op), current_setting('t024.tenant')::uuid, false, now());
    RETURN true;
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END $$;
CREATE TEMP TABLE x_ops (o int, op jsonb) ON COMMIT DROP;
INSERT INTO x_ops VALUES
    (1, '{"op":"get","ns":"a","key":"k"}'), (2, '{"op":"get","ns":"A","key":"k"}'), (3, '{"op":"get","ns":"a","key":""}'),
    (4, '{"op":"get","ns":"a","key":"k","x":1}'), (5, '{"op":"get","ns":"a","key":1}'),
    (6, '{"op":"put","ns":"a","key":"k","value":1,"forever":true}'), (7, '{"op":"put","ns":"a","key":"k","value":null,"ttlSeconds":5}'),
    (8, '{"op":"put","ns":"a","key":"k","value":1}'), (9, '{"op":"put","ns":"a","key":"k","forever":true}'),
    (10, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":0}'), (11, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":1.5}'),
    (12, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":2147483648}'), (13, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":"5"}'),
    (14, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":5,"forever":true}'), (15, '{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":5,"forever":false}'),
    (16, '{"op":"put","ns":"a","key":"k","value":1,"forever":"yes"}'), (17, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":3}'),
    (18, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":-1}'), (19, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":1.5}'),
    (20, '{"op":"putIfAbsent","ns":"a","key":"k","value":1,"forever":true,"expect":0}'), (21, '{"op":"putIfAbsent","ns":"a","key":"k","value":1,"forever":true,"expect":2}'),
    (22, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"required":true}'), (23, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"required":null}'),
    (24, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"tenant":"x"}'), (25, '{"op":"put","ns":"a","key":"k","value":1,"ttl":5}'),
    (26, '{"op":"incr","ns":"a","key":"k","delta":1,"forever":true}'), (27, '{"op":"incr","ns":"a","key":"k","delta":1,"min":0,"max":9,"ttlSeconds":9}'),
    (28, '{"op":"incr","ns":"a","key":"k","delta":1,"min":5,"max":4,"forever":true}'), (29, '{"op":"incr","ns":"a","key":"k","delta":1,"min":"0","forever":true}'),
    (30, '{"op":"incr","ns":"a","key":"k","delta":1,"max":null,"forever":true}'), (31, '{"op":"incr","ns":"a","key":"k","delta":1,"forever":true,"expect":1}'),
    (32, '{"op":"incr","ns":"a","key":"k","forever":true}'), (33, '{"op":"incr","ns":"a","key":"k","delta":1,"ttlSeconds":-3}'),
    (34, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":9223372036854775807}'),
    (35, '{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":9223372036854775808}');
INSERT INTO x_ops SELECT 36, jsonb_build_object('op', 'put', 'ns', 'a', 'key', 'k', 'forever', true, 'value', repeat('v', 65534));
INSERT INTO x_ops SELECT 37, jsonb_build_object('op', 'put', 'ns', 'a', 'key', 'k', 'forever', true, 'value', repeat('v', 65535));
SELECT is((SELECT array_agg(o ORDER BY o) FROM x_ops
           WHERE CASE op ->> 'op' WHEN 'get' THEN queen._kv_get_ok_v1(op)
                                  WHEN 'incr' THEN queen._kv_incr_ok_v1(op)
                                  ELSE queen._kv_put_ok_v1(op) END
                 IS DISTINCT FROM (pg_temp.check_ok(op) AND NOT op ?| ARRAY['expect', 'min', 'max'])), NULL,
          'X1 the fast path''s test of each kind accepts what the checker accepts, less expect, min and max');
SELECT is((SELECT array_agg(o ORDER BY o) FROM x_ops WHERE pg_temp.check_ok(op)),
          ARRAY[1, 6, 7, 15, 17, 20, 22, 26, 27, 34, 36],
          'X2 ... on a sample where most ops break one rule each');
SELECT is(queen.kv_op_fields_v1('put'), queen.kv_op_fields_v1('putIfAbsent'),
          'X3 putIfAbsent takes put''s fields (_kv_put_ok_v1 tests both with put''s list)');
SELECT is((SELECT array_agg(format('%s:%s:%s', x.idx, x.kind, x.key) ORDER BY n)
           FROM unnest(queen._kv_check_v1(
                   '[{"op":"getMany","ns":"a","keys":["b"]},{"op":"put","ns":"b","key":"a","value":1,"forever":true},
                     {"op":"get","ns":"a","key":"z"},{"op":"delete","ns":"a","key":"b"},{"op":"getPrefix","ns":"a","prefix":"p"}]',
                   gen_random_uuid(), false, now())) WITH ORDINALITY AS x(idx, kind, ns, key, value, expires_at, expect, required,
                                                                       delta, min, max, keys, prefix, after, lim, keys_only, n)),
          ARRAY['3:delete:b', '2:get:z', '1:put:a', '0:getMany:', '4:getPrefix:'],
          'X4 the checker returns the ops in apply order: (phase, ns, key, index)');
SELECT is((SELECT row(x.expires_at, x.expect, x.required, x.value)::text
           FROM unnest(queen._kv_check_v1('[{"op":"putIfAbsent","ns":"a","key":"k","value":{"v":1},"ttlSeconds":90,"required":true}]',
                                          gen_random_uuid(), false, '2030-01-01 00:00:00+00')) AS x),
          row('2030-01-01 00:01:30+00'::timestamptz, 0::bigint, true, '{"v":1}'::jsonb)::text,
          'X5 a checked op is typed: expiry = now + ttl, putIfAbsent expects 0, required, value');
SELECT is(queen._kv_check_v1('[]', gen_random_uuid(), true, now()), '{}'::queen._kv_op_v1[], 'X6 the checker gives [] for []');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = 'queen'::regnamespace AND proname LIKE '\_kv\_%'
                      AND prosrc ~* '(kv_(quota|usage)|savepoint|exception\s+when)'),
          'X7 no op function or checker names kv_quota or kv_usage, or has a savepoint or EXCEPTION block');
-- plan_of(sql): the generic plan's text, to see what the planner inlined.
CREATE FUNCTION pg_temp.plan_of(p_sql text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE r text; t text := '';
BEGIN
    EXECUTE 'PREPARE x_plan(jsonb, timestamptz, uuid) AS ' || p_sql;
    SET LOCAL plan_cache_mode = force_generic_plan;
    FOR r IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) EXECUTE x_plan(''{}'', now(), gen_random_uuid())' LOOP t := t || r || E'\n'; END LOOP;
    DEALLOCATE x_plan;
    RETURN t;
END $$;
SELECT unalike(pg_temp.plan_of($q$SELECT queen._kv_get_ok_v1($1), queen._kv_put_ok_v1($1), queen._kv_incr_ok_v1($1),
                                        queen._kv_expires_v1($1, $2), queen._kv_expect_v1($1), queen._kv_required_v1($1),
                                        queen._kv_get_miss_v1(0, $1 ->> 'key'), queen._kv_op_of_v1($1, 0, $2)$q$),
              '%queen._kv_%(%', 'X8 the fast path''s rule and field helpers are inlined (a sql function that is not is planned again in every transaction)');
SELECT unalike(pg_temp.plan_of($q$SELECT g.elem FROM queen._kv_get_v1($3, $1 ->> 'ns', $1 ->> 'key', $2, 0) AS g$q$),
              '%queen._kv_get_v1%', 'X9 the get reads through _kv_get_v1 inlined: one index scan');

SELECT * FROM finish();
ROLLBACK;
