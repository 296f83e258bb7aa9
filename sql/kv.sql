-- 024_kv.sql: queen.kv, the key/value state that commits in the same
-- transaction as the message work.
--
-- Owns: the table queen.kv and its storage settings, the sequence
-- queen.kv_version_seq, the one secondary index idx_kv_shard_expires, the
-- side tables queen.kv_quota (operator configuration) and queen.kv_usage
-- (sweeper measurement), the pure helpers (kv_live_v1, kv_ver_v1, kv_num_v1,
-- kv_prefix_end_v1, kv_check_names_v1, kv_ts_v1, kv_op_fields_v1), the one write/read entry
-- point kv_apply_v1 and its internal parts (the op rule predicates
-- _kv_*_ok_v1, the checked op type _kv_op_v1, the checker _kv_check_v1 and
-- one function per op kind: _kv_get_v1, _kv_get_many_v1, _kv_get_prefix_v1,
-- _kv_put_v1, _kv_delete_v1, _kv_incr_v1, with _kv_verdict_v1), the shared
-- page reader kv_page_v1 and the console reads kv_list_v1 and
-- kv_namespaces_v1.
--
-- May call: only what it defines, plus 000's schema helpers and pg_catalog.
-- It is called by 005 (the transaction wire, plpgsql, resolved at run time),
-- by 026 (the sweeper) and
-- by the C engine, which calls these functions and never builds SQL against
-- queen.kv itself.
--
-- Must never: touch queen.kv_quota or queen.kv_usage on a write path (one
-- per-tenant row locked for a whole bundle is a throughput ceiling of one
-- bundle at a time per tenant); name a partition (a KV key is a business
-- identity; log_partition_dead_v1 in 006 is LANGUAGE sql and would fail the
-- boot if it named this table, which is the point of the file number).
--
-- Re-applied at every boot, statement by statement: everything is IF NOT
-- EXISTS, one of 000's helpers (columns, indexes, storage options: no table
-- lock when nothing changes) or CREATE OR REPLACE FUNCTION (which keeps the
-- OID), so a second apply leaves the catalog identical.
--
-- Errors: every RAISE carries an ERRCODE; the MESSAGE is an opaque code from
-- a fixed list (kv_bad_request, kv_unknown_op, ...) and any
-- namespace, key or number goes in DETAIL only, because names end up in
-- shared logs and callers must match on the code, never on prose.

-- ---------------------------------------------------------------------------
-- Storage
-- ---------------------------------------------------------------------------

-- The seed's DDL, column for column. COLLATE "C" on both name columns is
-- load-bearing twice: (1) it is the lock order, ascending (namespace, key),
-- which must not depend on a pod's lc_collate or ICU version, or two bundles
-- take overlapping rows in inverted order and deadlock on some hosts only;
-- (2) byte order is stable across machines, so prefix ranges are sargable and
-- a keyset cursor keeps its meaning across a libc upgrade.
-- shard is computed once, stored, and never recomputed by a query: 64 shards
-- forever (the sweeper's unit of work).
CREATE TABLE IF NOT EXISTS queen.kv (
    tenant_id  UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
    namespace  TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      JSONB NOT NULL,
    version    BIGINT NOT NULL,
    expires_at TIMESTAMPTZ,
    shard      SMALLINT NOT NULL
               GENERATED ALWAYS AS ((hashtextextended(key, 0) & 63)::smallint) STORED,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, namespace, key)
);

-- Storage settings. Each was first chosen by analogy with the log tables;
-- each now carries the dated block of its soak measurement (bench/SOAK.md
-- holds the tables; bench/soak_compare.sh reruns them). Test-rig figures,
-- never figures read off a production cluster.
--   autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500:
--     counters and markers churn a small hot set; a scale factor would let
--     dead tuples grow with the table instead of with the churn.
--   autovacuum_vacuum_cost_delay = 0: vacuum of a hot small set should not
--     be throttled behind the writers it cleans up after.
--     Measured 2026-12-02 (2-core VM shared with other builds, load average
--     about 27; durable cluster), question "what do these three do to dead
--     tuples and bloat at steady state, against the server defaults (scale
--     factor 0.2, threshold 50, cost delay 2 ms)?": they keep dead tuples
--     under half and the heap smaller. The soak's mixed load, 300 s each,
--     side by side, about 120k live rows: last-third mean 6226 dead tuples (max 10549),
--     5 autovacuums, heap 29.35 MiB at the end with them; 15010 (max 31982),
--     2 autovacuums, heap 33.88 MiB (15% larger) with the defaults.
--     With them autovacuum runs at every naptime (60 s: 500 dead rows take
--     this load under ten seconds), so dead tuples follow the churn of one
--     minute; the defaults wait for 20% of the table, which grows with it.
--     Their price on that starved machine: the defaults' side ran 40.4 incr/s
--     against 29.8 and wrote 3283 WAL bytes per write against 3765 (vacuum's
--     own WAL); a cost the 30-minute soak bounds: 30 autovacuums of queen.kv,
--     median 1.19 s, max 7.26 s, dead tuples at most 12186 in its last third
--     against 117386 live rows. Kept: bounded bloat is the contract, the
--     throughput gap is CPU this machine did not have.
--     Reproduce: SOAK_MINUTES=5 bench/soak_compare.sh autovacuum.
--   vacuum_truncate = off: NOT a tuning number but a correctness-of-latency
--     rule: heap truncation takes ACCESS EXCLUSIVE, which would block every
--     reader of a table that empties (sweeper) and refills by design.
--   fillfactor = 70: room on the page for HOT updates of counters (no index
--     covers value/version/updated_at, so an in-page update is HOT).
--     Measured 2026-12-02 (same machine, load average about 23), question
--     "fillfactor 70 against 100: HOT ratio and throughput for counters and
--     for puts?": it buys counters 3.4 points of HOT and nothing else. 180 s
--     side by side, one op alone: incr over 10k counters 100% HOT at 70,
--     96.6% at 100, 206.3 against 210.0 incr/s; a put with a TTL 0% HOT at
--     both (201.2 against 204.5 puts/s), because every put refreshes
--     expires_at, which idx_kv_shard_expires covers, so no TTL'd write is HOT
--     whatever the fillfactor. Mixed load, 240 s: 0.715 against 0.663 HOT,
--     37.2 against 32.1 incr/s. The heap of the same rows is 36-41% larger
--     at 70 (25.27 against 18.46 and 17.88 MiB). Kept at 70: the non-HOT 3.4% of counter
--     updates add index entries at every one, and 180 s cannot show what that
--     index growth costs over days; 100 is the candidate the next longer
--     soak should decide.
--     Reproduce: SOAK_MINUTES=3 bench/soak_compare.sh fillfactor-ops, and
--     SOAK_MINUTES=4 bench/soak_compare.sh fillfactor for the mixed load.
-- Through 000's helper, which issues the ALTER only when the options
-- differ (an unconditional one would invalidate every cached plan on
-- queen.kv in every backend at every broker boot).
SELECT queen._schema_set_options_v1('queen.kv', ARRAY['autovacuum_vacuum_scale_factor=0',
    'autovacuum_vacuum_threshold=500', 'autovacuum_vacuum_cost_delay=0', 'vacuum_truncate=false', 'fillfactor=70']);

-- The version is a token, compared for equality only, drawn from a sequence
-- rather than computed as version + 1: a key that expired, was pruned and was
-- written again must never re-issue a version some long-lived holder still
-- carries, or that holder's compare-and-set succeeds against a dead lineage.
-- CACHE 1000 makes versions non-monotonic across backends (gaps and
-- reordering are expected), which is fine for a token.
-- Measured 2026-12-02 (2-core VM shared with other builds, load average
-- about 25; durable cluster), question "does CACHE 1000 save WAL or time per
-- write against CACHE 1?": barely. The soak's mixed load, 240 s each, side by
-- side: 2640 WAL bytes and 23.75 WAL records per write call with CACHE 1000,
-- 2669 bytes and 24.10 records with CACHE 1 (+1.1%); incr 41.6/s against
-- 38.8/s, put 16.5/s against 15.3/s, a gap inside this machine's noise. Why it
-- is small: PostgreSQL logs a sequence 32 values ahead whatever its cache, so
-- CACHE 1 costs one WAL record per 32 versions, not one per write (the reason
-- this comment used to give). Kept at 1000: a backend then touches the
-- sequence's shared buffer once per 1000 versions instead of at every write,
-- and nothing measured argues for less.
-- Reproduce: SOAK_MINUTES=4 bench/soak_compare.sh seqcache (bench/SOAK.md).
CREATE SEQUENCE IF NOT EXISTS queen.kv_version_seq AS BIGINT CACHE 1000;

-- USAGE only (nextval), never SELECT: SELECT would expose last_value as a
-- global write counter across tenants. Granted to PUBLIC because no broker
-- role exists yet; when one does, grant to it instead.
REVOKE ALL ON SEQUENCE queen.kv_version_seq FROM PUBLIC;
GRANT USAGE ON SEQUENCE queen.kv_version_seq TO PUBLIC;

-- The one secondary index. Its only reader is the sweeper (026): partial, so
-- a forever key costs nothing in it; shard leads because the sweeper filters
-- by shard and then range-scans expires_at.
-- Deliberately NOT created: an index on updated_at (no reader, and it would
-- make every counter update non-HOT), and an index on value (the declared
-- read boundary is keys and prefixes, so it would serve no query).
SELECT queen._schema_create_index_v1('idx_kv_shard_expires',
    'CREATE INDEX idx_kv_shard_expires ON queen.kv (shard, expires_at) WHERE expires_at IS NOT NULL');

-- Quota (configuration, written by an operator) and usage (measurement,
-- overwritten by the sweeper's slow sub-cadence) are two tables because they
-- have two authors: merged, "who wrote this number?" has no answer. Both are
-- keyed by tenant alone: any broker may measure any shard, so a per-shard key
-- would make brokers contend and multiply the scan; last writer wins on
-- computed_at. Columns are added one by one (000's _schema_add_column_v1) so a
-- database booted by an older build gains them.
-- No write path touches either table (see the file header).
CREATE TABLE IF NOT EXISTS queen.kv_quota (
    tenant_id UUID PRIMARY KEY
);
SELECT queen._schema_add_column_v1('queen.kv_quota', 'enabled', 'BOOLEAN NOT NULL DEFAULT true');
SELECT queen._schema_add_column_v1('queen.kv_quota', 'max_rows', 'BIGINT');
SELECT queen._schema_add_column_v1('queen.kv_quota', 'max_bytes', 'BIGINT');
SELECT queen._schema_add_column_v1('queen.kv_quota', 'max_reads_per_sec', 'BIGINT');
SELECT queen._schema_add_column_v1('queen.kv_quota', 'max_writes_per_sec', 'BIGINT');
SELECT queen._schema_add_column_v1('queen.kv_quota', 'updated_at', 'TIMESTAMPTZ NOT NULL DEFAULT now()');

CREATE TABLE IF NOT EXISTS queen.kv_usage (
    tenant_id UUID PRIMARY KEY
);
SELECT queen._schema_add_column_v1('queen.kv_usage', 'kv_rows', 'BIGINT NOT NULL DEFAULT 0');
SELECT queen._schema_add_column_v1('queen.kv_usage', 'kv_bytes', 'BIGINT NOT NULL DEFAULT 0');
SELECT queen._schema_add_column_v1('queen.kv_usage', 'sampled', 'BOOLEAN NOT NULL DEFAULT false');
SELECT queen._schema_add_column_v1('queen.kv_usage', 'computed_at', 'TIMESTAMPTZ NOT NULL DEFAULT now()');

-- ---------------------------------------------------------------------------
-- Pure helpers
--
-- All IMMUTABLE PARALLEL SAFE (kv_ts_v1 is STABLE: to_char is), none STRICT:
-- STRICT turns a total function into NULL on its most important input (an
-- absent row, a forever key), and a NULL inside a WHERE is a row that has
-- silently vanished. `now` is always a parameter, so one call of kv_apply_v1
-- uses one instant for its whole batch. LANGUAGE sql single expressions, so
-- the planner inlines them into the statements that use them.
-- ---------------------------------------------------------------------------

-- kv_live_v1(expires_at, now) -> boolean
-- The one definition of existence (the seed's exact body). Every read,
-- precondition and write routes through it; the sweeper deletes with
-- expires_at <= now, the same boundary, so an expired row is invisible from
-- the first read after its instant whether or not anything deleted it.
-- true for a forever key (expires_at NULL). Raises nothing.
CREATE OR REPLACE FUNCTION queen.kv_live_v1(TIMESTAMPTZ, TIMESTAMPTZ)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT $1 IS NULL OR $1 > $2 $$;

-- kv_ver_v1(version, expires_at, now) -> bigint
-- The effective version: the version of a present, live row, else 0. Total:
-- an absent row (version NULL) and an expired one both give 0, which is what
-- makes expect: 0 mean "must not exist" with no magic flag, and why a
-- compare-and-set against a dead lineage cannot succeed. Raises nothing.
CREATE OR REPLACE FUNCTION queen.kv_ver_v1(BIGINT, TIMESTAMPTZ, TIMESTAMPTZ)
RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT CASE WHEN $1 IS NOT NULL AND queen.kv_live_v1($2, $3) THEN $1 ELSE 0::bigint END $$;

-- kv_num_v1(value, expires_at, now) -> numeric
-- The numeric value of a live JSON number, else 0: absent, expired, string,
-- object, array, bool and JSON null all give 0. Never raises (the CASE only
-- casts a value jsonb_typeof has already called a number). incr builds on it:
-- an expired non-number counts as 0 and starts a new counter.
CREATE OR REPLACE FUNCTION queen.kv_num_v1(JSONB, TIMESTAMPTZ, TIMESTAMPTZ)
RETURNS NUMERIC LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT CASE WHEN queen.kv_live_v1($2, $3) AND jsonb_typeof($1) = 'number'
                  THEN $1::numeric ELSE 0::numeric END $$;

-- kv_prefix_end_v1(prefix) -> text
-- The smallest text above every text that starts with prefix, in byte order
-- (COLLATE "C"; UTF-8 byte order is code point order), or NULL when no such
-- text exists ('' and a prefix made only of U+10FFFF). It is the exclusive
-- upper bound that turns a prefix into an index range.
-- Trailing U+10FFFF cannot be incremented, so they are dropped (rtrim) and
-- the character before them is incremented instead; U+D7FF jumps to U+E000
-- because chr() refuses the surrogates in between. Never raises on a legal
-- key; NULL gives NULL. Assumes a UTF8 database (pg.sh and queen dev create
-- one; the boot should refuse anything else).
CREATE OR REPLACE FUNCTION queen.kv_prefix_end_v1(TEXT)
RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT CASE WHEN t = '' THEN NULL
                ELSE left(t, -1) || CASE ascii(right(t, 1))
                                        WHEN 55295 THEN chr(57344)           -- U+D7FF -> U+E000
                                        ELSE chr(ascii(right(t, 1)) + 1) END
           END COLLATE "C"
    FROM (SELECT rtrim($1, chr(1114111)) AS t) AS s                          -- drop trailing U+10FFFF
$$;

-- kv_ts_v1(ts) -> text
-- The one rendering of a timestamp in results: UTC ISO-8601 with microseconds
-- and Z, e.g. 2026-01-02T03:04:05.000006Z, independent of the session's
-- TimeZone. NULL (a forever key's expiry) gives NULL. STABLE because to_char
-- is; it is inlined, so the label costs nothing.
CREATE OR REPLACE FUNCTION queen.kv_ts_v1(TIMESTAMPTZ)
RETURNS TEXT LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

-- kv_names_ok_v1(ns, key) -> boolean
-- The name rules of kv_check_names_v1 (below) as one inlinable predicate:
-- true when kv_check_names_v1 would not raise, false (never NULL) otherwise.
-- The rules are written here once; kv_check_names_v1 raises on false and
-- sorts out which rule failed, and kv_apply_v1's one-op fast path
-- (_kv_key_names_ok_v1) tests it inline, so the common case runs no plpgsql.
-- Written as ^[a-z0-9][a-z0-9._-]*$ plus octet_length <= 64, which is the
-- same set as ^[a-z0-9][a-z0-9._-]{0,63}$ (every allowed character is one
-- byte): the bounded repetition costs the regex engine several microseconds
-- per call, and length() counts characters by walking the string.
CREATE OR REPLACE FUNCTION queen.kv_names_ok_v1(TEXT, TEXT)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(octet_length($1) <= queen._input_limit_v1('kvMaxNsChars') AND $1 COLLATE "C" ~ '^[a-z0-9][a-z0-9._-]*$'
                      AND $2 <> '' AND octet_length($2) <= queen._input_limit_v1('kvMaxKeyBytes'), false) $$;

-- kv_check_names_v1(ns, key) -> void
-- Raises, never returns false (a boolean would invite a caller to forget the
-- check). Rules:
--   ns must match ^[a-z0-9][a-z0-9._-]{0,63}$  else 22023 kv_bad_namespace.
--     Lower case only: a typo must fail, not mint a phantom namespace
--     (namespaces are registered nowhere; one exists iff a row does).
--   key non-empty                               else 22023 kv_bad_key
--   key at most 512 BYTES (octet_length)        else 22001 kv_key_too_large
-- NULL ns or key raise like any other bad name. A NUL cannot arrive
-- (PostgreSQL text cannot hold one; the HTTP edge refuses it with 400).
-- The regex runs under COLLATE "C" so [a-z] means those 26 bytes everywhere.
CREATE OR REPLACE FUNCTION queen.kv_check_names_v1(p_ns TEXT, p_key TEXT)
RETURNS VOID LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
BEGIN
    -- The rules are kv_names_ok_v1's; the tests below only pick the refusal,
    -- in the order the errors take precedence.
    IF queen.kv_names_ok_v1(p_ns, p_key) THEN
        RETURN;
    END IF;
    IF p_ns IS NULL OR length(p_ns) > queen._input_limit_v1('kvMaxNsChars') OR NOT (p_ns COLLATE "C" ~ '^[a-z0-9][a-z0-9._-]*$') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_namespace',
            DETAIL = format('namespace %s must match ^[a-z0-9][a-z0-9._-]{0,%s}$',
                            COALESCE(quote_literal(p_ns), 'NULL'), queen._input_limit_v1('kvMaxNsChars') - 1);
    END IF;
    IF p_key IS NULL OR p_key = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_key',
            DETAIL = format('key in namespace %s must be a non-empty string', p_ns);
    END IF;
    IF octet_length(p_key) > queen._input_limit_v1('kvMaxKeyBytes') THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'kv_key_too_large',
            DETAIL = format('key in namespace %s is %s bytes, the limit is %s', p_ns, octet_length(p_key),
                            queen._input_limit_v1('kvMaxKeyBytes'));
    END IF;
END
$$;

-- kv_op_fields_v1(op) -> text[]
-- The fields each op may carry; NULL for
-- an unknown op. kv_apply_v1 refuses any other field with kv_bad_request
-- and names the offenders in DETAIL from the same list, so it is written
-- once. Inlined into the caller's expression. Raises nothing.
CREATE OR REPLACE FUNCTION queen.kv_op_fields_v1(TEXT)
RETURNS TEXT[] LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT CASE $1
        WHEN 'get'         THEN ARRAY['op','ns','key']
        WHEN 'put'         THEN ARRAY['op','ns','key','value','ttlSeconds','forever','expect','required']
        WHEN 'putIfAbsent' THEN ARRAY['op','ns','key','value','ttlSeconds','forever','expect','required']
        WHEN 'delete'      THEN ARRAY['op','ns','key','expect','required']
        WHEN 'incr'        THEN ARRAY['op','ns','key','delta','min','max','ttlSeconds','forever','required']
        WHEN 'getMany'     THEN ARRAY['op','ns','keys']
        WHEN 'getPrefix'   THEN ARRAY['op','ns','prefix','after','limit','keysOnly']
    END
$$;

-- ---------------------------------------------------------------------------
-- Op rules (internal)
--
-- Each rule of an op's shape is written once, here, as an inlinable
-- LANGUAGE sql predicate that is true when the op keeps the rule and never
-- NULL. Two callers compose them: _kv_check_v1 (the checker of every call)
-- tests them one by one, in the order the refusals take precedence, and
-- raises the refusal of the first that fails; kv_apply_v1's one-op fast path
-- tests their conjunction for its op's kind (_kv_get_ok_v1, _kv_put_ok_v1,
-- _kv_incr_ok_v1) and, when it is false, leaves the op to the checker,
-- which then raises. So the fast path can never take an op the checker
-- refuses, and a rule changed here changes both.
-- Split per rule and per kind, not one CASE over all kinds: plpgsql sets up
-- (ExecInitExpr) every expression it evaluates once per transaction, at a
-- cost that grows with the expression's size (about 0.2 us per function or
-- operator in a transaction of one call), so a get must not pay for the
-- write rules. No `? 'ns'` tests: an absent field makes jsonb_typeof NULL.
-- Every cast is behind the jsonb_typeof that allows it, so none raises,
-- except _kv_incr_range_ok_v1's, which the checker tests after
-- _kv_limits_ok_v1.
-- A rule that is a sql function over a STABLE body is declared STABLE: the
-- planner does not inline an IMMUTABLE one (tests/sql/024_kv.sql X8).
-- ---------------------------------------------------------------------------

-- _kv_str_v1(j) -> text: j's text when j is a JSON string, else NULL (which
-- the name rules refuse).
CREATE OR REPLACE FUNCTION queen._kv_str_v1(JSONB)
RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT CASE WHEN jsonb_typeof($1) = 'string' THEN $1 #>> '{}' END $$;

-- _kv_fields_ok_v1(op, kind): op carries no field kv_op_fields_v1 does not
-- list for kind (false for an unknown kind).
CREATE OR REPLACE FUNCTION queen._kv_fields_ok_v1(JSONB, TEXT)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(($1 - queen.kv_op_fields_v1($2)) = '{}'::jsonb, false) $$;

-- _kv_key_names_ok_v1(op): ns and key are strings that pass kv_names_ok_v1.
-- (Not kv_names_ok_v1(_kv_str_v1(..), ..): inlining copies an argument into
-- every use of its parameter, and kv_names_ok_v1 uses each three times.)
CREATE OR REPLACE FUNCTION queen._kv_key_names_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(jsonb_typeof($1 -> 'ns') = 'string' AND jsonb_typeof($1 -> 'key') = 'string'
                      AND queen.kv_names_ok_v1($1 ->> 'ns', $1 ->> 'key'), false) $$;

-- _kv_value_fits_v1(op): value is at most 65536 bytes of JSON text.
CREATE OR REPLACE FUNCTION queen._kv_value_fits_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(octet_length(($1 -> 'value')::text) <= 65536, true) $$;

-- _kv_required_ok_v1(op): required is absent or a boolean.
CREATE OR REPLACE FUNCTION queen._kv_required_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(jsonb_typeof($1 -> 'required'), 'boolean') = 'boolean' $$;

-- _kv_expect_ok_v1(op): expect is absent or an integer 0..2^63-1, and 0 on
-- a putIfAbsent (put with expect 0; any other expect contradicts it).
CREATE OR REPLACE FUNCTION queen._kv_expect_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT COALESCE(NOT ($1 ? 'expect')
                    OR CASE WHEN jsonb_typeof($1 -> 'expect') = 'number'
                            THEN ($1 -> 'expect')::numeric BETWEEN 0 AND 9223372036854775807
                                 AND ($1 -> 'expect')::numeric = trunc(($1 -> 'expect')::numeric)
                                 AND ($1 ->> 'op' IS DISTINCT FROM 'putIfAbsent' OR ($1 -> 'expect')::numeric = 0)
                       END, false)
$$;

-- _kv_forever_ok_v1(op): forever is absent or a boolean.
CREATE OR REPLACE FUNCTION queen._kv_forever_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(jsonb_typeof($1 -> 'forever'), 'boolean') = 'boolean' $$;

-- _kv_expiry_given_v1(op): exactly one of ttlSeconds and forever:true.
-- Expiry is mandatory: a default would make "I forgot" mean "keep forever".
CREATE OR REPLACE FUNCTION queen._kv_expiry_given_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(($1 ? 'ttlSeconds') <> ($1 @> '{"forever": true}'), false) $$;

-- _kv_ttl_ok_v1(op): ttlSeconds is absent or an integer 1..2^31-1 (about
-- 68 years; longer is forever), which also keeps now + ttl inside
-- timestamptz.
CREATE OR REPLACE FUNCTION queen._kv_ttl_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT COALESCE(NOT ($1 ? 'ttlSeconds')
                    OR CASE WHEN jsonb_typeof($1 -> 'ttlSeconds') = 'number'
                            THEN ($1 -> 'ttlSeconds')::numeric BETWEEN 1 AND 2147483647
                                 AND ($1 -> 'ttlSeconds')::numeric = trunc(($1 -> 'ttlSeconds')::numeric)
                       END, false)
$$;

-- _kv_delta_ok_v1(op): incr's delta is a number.
CREATE OR REPLACE FUNCTION queen._kv_delta_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(jsonb_typeof($1 -> 'delta') = 'number', false) $$;

-- _kv_limits_ok_v1(op): incr's min and max are absent or numbers.
CREATE OR REPLACE FUNCTION queen._kv_limits_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE(jsonb_typeof($1 -> 'min'), 'number') = 'number'
             AND COALESCE(jsonb_typeof($1 -> 'max'), 'number') = 'number' $$;

-- _kv_incr_range_ok_v1(op): not min > max (nothing could ever apply). Only
-- after _kv_limits_ok_v1 (it casts min and max).
CREATE OR REPLACE FUNCTION queen._kv_incr_range_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT (($1 -> 'min')::numeric <= ($1 -> 'max')::numeric) IS NOT FALSE $$;

-- _kv_expiry_ok_v1(op): the expiry rules of put, putIfAbsent and incr:
-- forever, exactly one of the two, ttlSeconds.
CREATE OR REPLACE FUNCTION queen._kv_expiry_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT queen._kv_forever_ok_v1($1) AND queen._kv_expiry_given_v1($1) AND queen._kv_ttl_ok_v1($1) $$;

-- _kv_get_ok_v1(op) / _kv_put_ok_v1(op) / _kv_incr_ok_v1(op) -> boolean
-- The one-op fast path's test: true only when _kv_check_v1 would accept op,
-- alone in a call, as the kind its "op" field names (the caller has read
-- it). The conjunction of that kind's rules, narrowed on purpose: no expect
-- on put or putIfAbsent and no min or max on incr, whose rules would cost
-- every fast op their expression set-up (expect's alone measured 3 us of a
-- put); such an op takes the checker, like an op these refuse, which the
-- checker then refuses itself. So they can only send an op to the checker
-- too often, never let a bad one through (tests/sql/kv.sql X1).
-- _kv_put_ok_v1 serves putIfAbsent too, with put's field list, which is
-- putIfAbsent's (X3 pins it).
CREATE OR REPLACE FUNCTION queen._kv_get_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT queen._kv_fields_ok_v1($1, 'get') AND queen._kv_key_names_ok_v1($1) $$;

CREATE OR REPLACE FUNCTION queen._kv_put_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT queen._kv_fields_ok_v1($1, 'put') AND queen._kv_key_names_ok_v1($1)
           AND $1 ? 'value' AND queen._kv_value_fits_v1($1)
           AND queen._kv_required_ok_v1($1) AND NOT ($1 ? 'expect') AND queen._kv_expiry_ok_v1($1)
$$;

CREATE OR REPLACE FUNCTION queen._kv_incr_ok_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT queen._kv_fields_ok_v1($1, 'incr') AND queen._kv_key_names_ok_v1($1)
           AND queen._kv_delta_ok_v1($1) AND NOT ($1 ?| ARRAY['min', 'max'])
           AND queen._kv_required_ok_v1($1) AND queen._kv_expiry_ok_v1($1)   -- incr's fields exclude expect
$$;

-- Typed fields of an op the rules above accepted (the checker's op rows
-- and the fast path's arguments read them through these, so each is
-- written once):
--   _kv_expires_v1(op, now): now + ttlSeconds, NULL = forever.
--   _kv_expect_v1(op): 0 for putIfAbsent, else expect, NULL = unconditional.
--   _kv_required_v1(op): required:true.
-- _kv_expires_v1 is STABLE, not IMMUTABLE, because timestamptz + interval
-- is: the planner does not inline a sql function declared IMMUTABLE over a
-- STABLE body, and a sql function that is not inlined is parsed and planned
-- again in every transaction (measured: +40 us on a one-op put).
CREATE OR REPLACE FUNCTION queen._kv_expires_v1(JSONB, TIMESTAMPTZ)
RETURNS TIMESTAMPTZ LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT $2 + (($1 -> 'ttlSeconds')::numeric::bigint * interval '1 second') $$;

CREATE OR REPLACE FUNCTION queen._kv_expect_v1(JSONB)
RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT CASE WHEN $1 ->> 'op' = 'putIfAbsent' THEN 0::bigint ELSE ($1 -> 'expect')::numeric::bigint END $$;

CREATE OR REPLACE FUNCTION queen._kv_required_v1(JSONB)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT COALESCE($1 -> 'required' = 'true'::jsonb, false) $$;

-- _kv_limit_v1(op): getPrefix's limit clamped to 1..1000; NULL when absent
-- or JSON null (kv_page_v1's default, 100).
CREATE OR REPLACE FUNCTION queen._kv_limit_v1(JSONB)
RETURNS INTEGER LANGUAGE sql IMMUTABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT CASE WHEN jsonb_typeof($1 -> 'limit') = 'number'
                  THEN LEAST(GREATEST(trunc(($1 -> 'limit')::numeric), 1), queen._input_limit_v1('pageMax'))::integer END $$;

-- ---------------------------------------------------------------------------
-- kv_page_v1: the one prefix page reader (internal)
-- ---------------------------------------------------------------------------

-- kv_page_v1(tenant, ns, prefix, after, limit, keys_only, include_expired,
--            flag_expired, now, budget_bytes) -> jsonb
-- Internal: the getPrefix arm of kv_apply_v1 and the body of kv_list_v1, so
-- the prefix rule is written once. Arguments are trusted (validated by the
-- callers); the limit is clamped here anyway.
-- Result: {rows: [{key, value, version, expiresAt, updatedAt[, expired]}],
--          truncated, nextAfter, bytes}
--   - prefix predicate: key >= prefix AND key < kv_prefix_end_v1(prefix) as
--     the index driver, starts_with(key, prefix) as the semantics. Never
--     LIKE: '%' and '_' in a key are literal characters.
--   - after: exclusive keyset cursor, byte order.
--   - limit clamped to 1..1000 (NULL -> 100), never refused; LIMIT limit+1
--     decides truncated.
--   - budget: value bytes (octet_length of the jsonb text; 0 for keys_only)
--     still available to this call. A row is included while the bytes before
--     it are below the budget, so the row that straddles the budget is
--     included and the page stops after it.
--   - nextAfter: when truncated, the last included key; when the budget was
--     already spent before the first row, the incoming after (NULL = start),
--     so "call again with after = nextAfter" always resumes correctly.
--   - bytes: value bytes included (the caller charges its budget with it).
-- Dynamic SQL with USING on purpose: each call is planned with its values, so
-- "end IS NULL OR key < end" folds to a plain index bound; a cached generic
-- plan would keep the OR and scan the rest of the namespace when a prefix
-- has fewer rows than the limit.
-- STABLE (reads only; the caller's now is a parameter). Raises nothing.
CREATE OR REPLACE FUNCTION queen.kv_page_v1(
    p_tenant UUID, p_ns TEXT, p_prefix TEXT, p_after TEXT, p_limit INTEGER,
    p_keys_only BOOLEAN, p_include_expired BOOLEAN, p_flag_expired BOOLEAN,
    p_now TIMESTAMPTZ, p_budget BIGINT)
RETURNS JSONB LANGUAGE plpgsql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_limit integer := LEAST(GREATEST(COALESCE(p_limit, queen._input_limit_v1('pageDefault')), 1), queen._input_limit_v1('pageMax'));
    v_prefix text := COALESCE(p_prefix, '');
    v_rows jsonb; v_inc bigint; v_all bigint; v_bytes bigint; v_last text;
BEGIN
    EXECUTE $q$
        WITH page AS (
            SELECT kv.key, kv.value, kv.version, kv.expires_at, kv.updated_at,
                   NOT queen.kv_live_v1(kv.expires_at, $6) AS expired,
                   CASE WHEN $8 THEN 0 ELSE octet_length(kv.value::text) END AS b
            FROM queen.kv kv
            WHERE kv.tenant_id = $1 AND kv.namespace = $2
              AND kv.key >= $3 COLLATE "C"
              AND ($4::text IS NULL OR kv.key < $4 COLLATE "C")
              AND starts_with(kv.key, $3)
              AND ($5::text IS NULL OR kv.key > $5 COLLATE "C")
              AND ($9 OR queen.kv_live_v1(kv.expires_at, $6))
            ORDER BY kv.key COLLATE "C"
            LIMIT $7 + 1
        ), acc AS (
            SELECT p.*, row_number() OVER w AS rn,
                   COALESCE(sum(p.b) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
            FROM page p
            WINDOW w AS (ORDER BY p.key COLLATE "C")
        )
        SELECT COALESCE(jsonb_agg(
                   jsonb_strip_nulls(jsonb_build_object('expired', CASE WHEN $10 THEN a.expired END))
                   || jsonb_build_object('key', a.key, 'version', a.version,
                                         'expiresAt', queen.kv_ts_v1(a.expires_at),
                                         'updatedAt', queen.kv_ts_v1(a.updated_at))
                   || CASE WHEN $8 THEN '{}'::jsonb ELSE jsonb_build_object('value', a.value) END
                   ORDER BY a.key COLLATE "C") FILTER (WHERE a.rn <= $7 AND a.before < $11), '[]'::jsonb),
               count(*) FILTER (WHERE a.rn <= $7 AND a.before < $11),
               count(*),
               COALESCE(sum(a.b) FILTER (WHERE a.rn <= $7 AND a.before < $11), 0),
               max(a.key COLLATE "C") FILTER (WHERE a.rn <= $7 AND a.before < $11)
        FROM acc a
    $q$
    INTO v_rows, v_inc, v_all, v_bytes, v_last
    USING p_tenant, p_ns, v_prefix, queen.kv_prefix_end_v1(v_prefix), p_after, p_now, v_limit,
          COALESCE(p_keys_only, false), COALESCE(p_include_expired, false),
          COALESCE(p_flag_expired, false), COALESCE(p_budget, 0);

    RETURN jsonb_build_object(
        'rows', v_rows,
        'truncated', v_all > v_inc,
        'nextAfter', CASE WHEN v_all > v_inc THEN COALESCE(v_last, p_after) END,
        'bytes', v_bytes);
END
$$;

-- ---------------------------------------------------------------------------
-- The checked op, the checker and the one function per op kind (internal)
-- ---------------------------------------------------------------------------

-- queen._kv_op_v1: one op as the checker accepted it, typed. idx is its
-- position in the call (its result's slot); kind is the op as given
-- (putIfAbsent stays putIfAbsent; its expect is 0). Fields an op's kind does
-- not carry are NULL. expires_at is the call's now + ttlSeconds, NULL =
-- forever; expect NULL = unconditional; lim NULL = kv_page_v1's default.
-- A composite, not a JSON object: the apply reads it field by field with no
-- keys to look up or cast.
SELECT queen._schema_create_type_v1('_kv_op_v1',
    'CREATE TYPE queen._kv_op_v1 AS (idx INTEGER, kind TEXT, ns TEXT, key TEXT, value JSONB,
                                     expires_at TIMESTAMPTZ, expect BIGINT, required BOOLEAN,
                                     delta NUMERIC, min NUMERIC, max NUMERIC, keys JSONB,
                                     prefix TEXT, after TEXT, lim INTEGER, keys_only BOOLEAN)');

-- _kv_op_of_v1(op, idx, now) -> _kv_op_v1: the typed row of an op the rules
-- accepted (casts would raise on one they refuse).
CREATE OR REPLACE FUNCTION queen._kv_op_of_v1(JSONB, INTEGER, TIMESTAMPTZ)
RETURNS queen._kv_op_v1 LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT ROW($2, $1 ->> 'op', $1 ->> 'ns', $1 ->> 'key', $1 -> 'value',
               queen._kv_expires_v1($1, $3), queen._kv_expect_v1($1), queen._kv_required_v1($1),
               ($1 -> 'delta')::numeric, ($1 -> 'min')::numeric, ($1 -> 'max')::numeric, $1 -> 'keys',
               $1 ->> 'prefix', $1 ->> 'after', queen._kv_limit_v1($1),
               COALESCE(($1 ->> 'keysOnly')::boolean, false))::queen._kv_op_v1
$$;

-- _kv_check_v1(ops, tenant, in_wire, now) -> _kv_op_v1[]
-- The checker: validates the whole call (kv_apply_v1's shape rules, header
-- below) and returns its ops typed, in apply order: ascending (phase, ns,
-- key COLLATE "C", idx), phase 1 being getMany/getPrefix so multi-key reads
-- see the call's writes. An empty array for []. Raises every refusal
-- kv_apply_v1 documents except kv_precondition_failed and
-- kv_result_misaligned; reads and writes nothing.
-- The rules are the _kv_*_ok_v1 predicates above; the tests here only pick
-- the refusal, in the order the refusals take precedence. Statements are few
-- and op-specific: plpgsql sets up each expression it runs once per
-- transaction.
CREATE OR REPLACE FUNCTION queen._kv_check_v1(p_ops JSONB, p_tenant UUID, p_in_wire BOOLEAN, p_now TIMESTAMPTZ)
RETURNS queen._kv_op_v1[] LANGUAGE plpgsql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
DECLARE
    -- Budgets are literals, each named where it is used: 65536 value bytes
    -- (_kv_value_fits_v1), 256/64 ops and 4096/256 keys (HTTP/wire). The
    -- wire's are tighter because a wire bundle also holds queue and
    -- partition locks for its whole duration.
    v_n      integer;
    v_i      integer;
    v_op     jsonb;
    v_kind   text;
    v_keys   integer := 0;     -- keys charged to the call's key budget
    v_writes integer := 0;     -- write ops (for the duplicate check)
    v_t      text;
    v_elem   jsonb;
    v_detail text;
    v_out    queen._kv_op_v1[];
BEGIN
    IF p_tenant IS NULL OR p_in_wire IS NULL OR jsonb_typeof(p_ops) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = CASE WHEN p_tenant IS NULL THEN 'the tenant argument is required'
                          WHEN p_in_wire IS NULL THEN 'p_in_wire must be true or false'
                          ELSE 'ops must be a JSON array' END;
    END IF;
    v_n := jsonb_array_length(p_ops);
    IF v_n = 0 THEN
        RETURN '{}';
    ELSIF v_n > (CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvOps') ELSE queen._input_limit_v1('kvMaxOps') END) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_too_many_ops',
            DETAIL = format('%s ops in one call, the limit is %s', v_n, CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvOps') ELSE queen._input_limit_v1('kvMaxOps') END);
    END IF;

    FOR v_i IN 0 .. v_n - 1 LOOP
        v_op := p_ops -> v_i;
        v_kind := v_op ->> 'op';
        -- The cheap combined test first (an unknown op fails the field
        -- rule); the error path sorts out which rule failed.
        IF jsonb_typeof(v_op) IS DISTINCT FROM 'object'
           OR v_op ?| ARRAY['tenant', 'tenantId', '_tenant']
           OR NOT queen._kv_fields_ok_v1(v_op, v_kind) THEN
            IF jsonb_typeof(v_op) IS DISTINCT FROM 'object' THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                    DETAIL = format('op %s is not a JSON object', v_i);
            ELSIF v_op ?| ARRAY['tenant', 'tenantId', '_tenant'] THEN
                -- The tenant is an argument, never an input: refuse it
                -- loudly rather than ignore it, so a client that thinks it
                -- can choose learns early.
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_tenant_not_an_input',
                    DETAIL = format('op %s carries a tenant field; the tenant comes from the request', v_i);
            ELSIF jsonb_typeof(v_op -> 'op') IS DISTINCT FROM 'string' THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                    DETAIL = format('op %s has no "op" string', v_i);
            ELSIF queen.kv_op_fields_v1(v_kind) IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_unknown_op',
                    DETAIL = format('op %s: unknown op %s', v_i, quote_literal(v_kind));
            ELSIF v_kind = 'incr' AND v_op ? 'expect' THEN
                -- incr is the way out of compare-and-set loops
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_expect',
                    DETAIL = format('op %s: incr takes no expect', v_i);
            ELSE
                -- Fields not listed for the op are refused: a typo such as
                -- "ttl" must not silently mean something else.
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                    DETAIL = format('op %s (%s): unknown field(s) %s', v_i, v_kind,
                                    (SELECT string_agg(quote_ident(k), ', ')
                                     FROM jsonb_object_keys(v_op - queen.kv_op_fields_v1(v_kind)) AS k));
            END IF;
        END IF;

        -- Names: kv_check_names_v1 raises (a ns or key that is not a JSON
        -- string arrives as NULL, refused as kv_bad_namespace / kv_bad_key).
        -- An assignment, not PERFORM: an expression is cheaper than a query.
        -- getMany's keys are checked one by one below ('x' stands for "any
        -- legal key" so that its namespace is checked here).
        v_t := queen.kv_check_names_v1(
                   queen._kv_str_v1(v_op -> 'ns'),
                   CASE v_kind WHEN 'getMany' THEN 'x'
                               WHEN 'getPrefix' THEN COALESCE(NULLIF(v_op ->> 'prefix', ''), 'x')
                               ELSE queen._kv_str_v1(v_op -> 'key') END)::text;

        CASE v_kind
            WHEN 'get' THEN
                v_keys := v_keys + 1;
            WHEN 'put', 'putIfAbsent' THEN
                -- null is a legal value; an absent value is not
                IF NOT (v_op ? 'value') THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: value is required (null is a legal value, absent is not)', v_i);
                END IF;
                IF NOT queen._kv_value_fits_v1(v_op) THEN
                    RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'kv_value_too_large',
                        DETAIL = format('op %s: value is %s bytes of JSON text, the limit is 65536',
                                        v_i, octet_length((v_op -> 'value')::text));
                END IF;
                v_keys := v_keys + 1; v_writes := v_writes + 1;
            WHEN 'delete' THEN
                v_keys := v_keys + 1; v_writes := v_writes + 1;
            WHEN 'incr' THEN
                IF NOT (queen._kv_delta_ok_v1(v_op) AND queen._kv_limits_ok_v1(v_op)) THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: incr needs a numeric delta; min and max must be numbers', v_i);
                END IF;
                IF NOT queen._kv_incr_range_ok_v1(v_op) THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: min %s is above max %s', v_i, v_op -> 'min', v_op -> 'max');
                END IF;
                v_keys := v_keys + 1; v_writes := v_writes + 1;
            WHEN 'getMany' THEN
                IF jsonb_typeof(v_op -> 'keys') IS DISTINCT FROM 'array' THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: getMany needs a keys array', v_i);
                END IF;
                v_keys := v_keys + jsonb_array_length(v_op -> 'keys');
                IF v_keys > (CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvKeys') ELSE queen._input_limit_v1('kvMaxKeys') END) THEN   -- before checking thousands of names
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_too_many_keys',
                        DETAIL = format('more than %s keys in one call (at op %s)', CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvKeys') ELSE queen._input_limit_v1('kvMaxKeys') END, v_i);
                END IF;
                FOR v_elem IN SELECT e FROM jsonb_array_elements(v_op -> 'keys') AS e LOOP
                    IF jsonb_typeof(v_elem) IS DISTINCT FROM 'string' THEN
                        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_key',
                            DETAIL = format('op %s: every key of getMany must be a string', v_i);
                    END IF;
                    v_t := queen.kv_check_names_v1(v_op ->> 'ns', v_elem #>> '{}')::text;
                END LOOP;
            WHEN 'getPrefix' THEN
                IF p_in_wire THEN
                    -- an unbounded scan must not run while the wire holds
                    -- queue and partition locks
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_get_prefix_not_allowed_in_transaction',
                        DETAIL = format('op %s: getPrefix is not allowed in a transaction bundle', v_i);
                END IF;
                IF jsonb_typeof(v_op -> 'prefix') IS DISTINCT FROM 'string' OR v_op ->> 'prefix' = '' THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_prefix_required',
                        DETAIL = format('op %s: getPrefix needs a non-empty prefix string', v_i);
                END IF;
                -- after, limit, keysOnly: JSON null means "not given"
                IF jsonb_typeof(v_op -> 'after') NOT IN ('string', 'null')
                   OR jsonb_typeof(v_op -> 'keysOnly') NOT IN ('boolean', 'null')
                   OR jsonb_typeof(v_op -> 'limit') NOT IN ('number', 'null') THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: after must be a string, keysOnly a boolean, limit a number', v_i);
                END IF;
                -- the clamped limit (absent or null: the default 100)
                v_keys := v_keys + COALESCE(queen._kv_limit_v1(v_op), queen._input_limit_v1('pageDefault'));
        END CASE;

        -- Shared by the writes: required, expect, expiry.
        IF v_kind IN ('put', 'putIfAbsent', 'delete', 'incr') THEN
            IF NOT queen._kv_required_ok_v1(v_op) THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                    DETAIL = format('op %s: required must be a boolean', v_i);
            END IF;
            IF NOT queen._kv_expect_ok_v1(v_op) THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_expect',
                    DETAIL = format('op %s (%s): expect %s; it must be an integer >= 0 (0 for putIfAbsent)',
                                    v_i, v_kind, v_op -> 'expect');
            END IF;
            IF v_kind <> 'delete' THEN
                IF NOT queen._kv_forever_ok_v1(v_op) THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
                        DETAIL = format('op %s: forever must be a boolean', v_i);
                END IF;
                IF NOT queen._kv_expiry_given_v1(v_op) THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_expiry_not_specified',
                        DETAIL = format('op %s: give exactly one of ttlSeconds and forever:true', v_i);
                END IF;
                IF NOT queen._kv_ttl_ok_v1(v_op) THEN
                    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_ttl',
                        DETAIL = format('op %s: ttlSeconds %s; it must be an integer 1..2147483647', v_i, v_op -> 'ttlSeconds');
                END IF;
            END IF;
        END IF;

        IF v_keys > (CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvKeys') ELSE queen._input_limit_v1('kvMaxKeys') END) THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_too_many_keys',
                DETAIL = format('more than %s keys in one call (at op %s)', CASE WHEN p_in_wire THEN queen._input_limit_v1('wireMaxKvKeys') ELSE queen._input_limit_v1('kvMaxKeys') END, v_i);
        END IF;
    END LOOP;

    -- A key is written at most once per call: this is what makes the lock
    -- order total (two writes of one key would have no defined order).
    IF v_writes > 1 THEN
        SELECT format('namespace %s, key %s (ops %s)', e->>'ns', quote_literal(e->>'key'),
                      string_agg((o - 1)::text, ', ' ORDER BY o))
        INTO v_detail
        FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS t(e, o)
        WHERE e->>'op' IN ('put', 'putIfAbsent', 'delete', 'incr')
        GROUP BY e->>'ns', e->>'key'
        HAVING count(*) > 1
        LIMIT 1;
        IF v_detail IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_duplicate_key_in_call',
                DETAIL = v_detail;
        END IF;
    END IF;

    -- The apply order, decided here and nowhere else (the broker never
    -- pre-sorts). COLLATE "C" is spelled out because an extraction from
    -- jsonb does not inherit a column's collation.
    SELECT array_agg(queen._kv_op_of_v1(t.e, (t.o - 1)::integer, p_now)
                     ORDER BY CASE WHEN t.e->>'op' IN ('getMany', 'getPrefix') THEN 1 ELSE 0 END,
                              (t.e->>'ns') COLLATE "C",
                              (t.e->>'key') COLLATE "C",
                              t.o)
    INTO v_out
    FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS t(e, o);
    RETURN v_out;
END
$$;

-- _kv_verdict_v1(tenant, now, idx, op, ns, key, reason, cur_value, cur_version, required) -> jsonb
-- The result of a write that did not apply: {index, op, applied:false,
-- reason, key, value, version} with the current live row's value and
-- version (null/0 when there is none), or, with required, the 23514
-- kv_precondition_failed whose DETAIL is that verdict as JSON. cur_version
-- NULL means "not read yet": the row is read here, and that read is never
-- stale (see kv_apply_v1's header). reason 'version' on no live row becomes
-- 'absent'; an incr over a live non-number becomes 'type'. op is the
-- reported op (putIfAbsent reports "put"). Only a write's refusal path calls
-- it, so one plpgsql call there costs nothing on the applied path.
CREATE OR REPLACE FUNCTION queen._kv_verdict_v1(
    p_tenant UUID, p_now TIMESTAMPTZ, p_idx INTEGER, p_op TEXT, p_ns TEXT, p_key TEXT,
    p_reason TEXT, p_cur_val JSONB, p_cur_ver BIGINT, p_required BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_detail text;
BEGIN
    IF p_cur_ver IS NULL THEN
        SELECT k.value, k.version INTO p_cur_val, p_cur_ver
        FROM queen.kv AS k
        WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
          AND queen.kv_live_v1(k.expires_at, p_now);
    END IF;
    IF p_cur_ver IS NULL OR p_cur_ver = 0 THEN
        p_cur_ver := 0; p_cur_val := NULL;
        IF p_reason = 'version' THEN p_reason := 'absent'; END IF;
    ELSIF p_op = 'incr' AND jsonb_typeof(p_cur_val) <> 'number' THEN
        p_reason := 'type';
    END IF;
    IF p_required THEN
        -- Escalate: the caller reads the DETAIL, never the message. DETAIL
        -- is capped at 4096 bytes and must stay valid JSON: ns (<= 64 bytes)
        -- and key (<= 512 bytes, <= 3072 once every byte is JSON-escaped)
        -- always fit, so when the whole object is too big only the value is
        -- dropped: it becomes null, "valueOmitted": true says so and
        -- "valueBytes" how big it is (version still identifies it).
        v_detail := jsonb_build_object('index', p_idx, 'op', p_op, 'ns', p_ns, 'key', p_key,
                                       'reason', p_reason, 'version', p_cur_ver, 'value', p_cur_val)::text;
        IF octet_length(v_detail) > queen._input_limit_v1('kvDetailMaxBytes') THEN
            v_detail := jsonb_build_object('index', p_idx, 'op', p_op, 'ns', p_ns, 'key', p_key,
                                           'reason', p_reason, 'version', p_cur_ver, 'value', NULL::jsonb,
                                           'valueOmitted', true,
                                           'valueBytes', octet_length(p_cur_val::text))::text;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '23514', MESSAGE = 'kv_precondition_failed', DETAIL = v_detail;
    END IF;
    RETURN jsonb_build_object('index', p_idx, 'op', p_op, 'applied', false, 'reason', p_reason,
                              'key', p_key, 'value', p_cur_val, 'version', p_cur_ver);
END
$$;

-- _kv_get_v1(tenant, ns, key, now, idx) -> TABLE(elem, bytes)
-- get: the live row's result {index, op:"get", found:true, key, value,
-- version, expiresAt, updatedAt} and its value bytes (the read budget's
-- charge); no row when there is none (_kv_get_miss_v1 is that result).
-- LANGUAGE sql, STABLE, one SELECT: the planner inlines it into the
-- caller's statement, so a get pays no function call. _kv_get_miss_v1 is
-- STABLE because jsonb_build_object is (an IMMUTABLE one would not inline).
CREATE OR REPLACE FUNCTION queen._kv_get_v1(p_tenant UUID, p_ns TEXT, p_key TEXT, p_now TIMESTAMPTZ, p_idx INTEGER)
RETURNS TABLE (elem JSONB, bytes BIGINT) LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT jsonb_build_object('index', p_idx, 'op', 'get', 'found', true, 'key', k.key,
                              'value', k.value, 'version', k.version,
                              'expiresAt', queen.kv_ts_v1(k.expires_at),
                              'updatedAt', queen.kv_ts_v1(k.updated_at)),
           octet_length(k.value::text)::bigint
    FROM queen.kv k
    WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
      AND queen.kv_live_v1(k.expires_at, p_now)
$$;

CREATE OR REPLACE FUNCTION queen._kv_get_miss_v1(p_idx INTEGER, p_key TEXT)
RETURNS JSONB LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$ SELECT jsonb_build_object('index', p_idx, 'op', 'get', 'found', false, 'key', p_key) $$;

-- _kv_get_many_v1(tenant, ns, keys, now, idx, budget) -> TABLE(elem, bytes)
-- getMany: rows in key order, missing in input order (each key once). A
-- key is served while the value bytes before it (key order) are below
-- budget (what is left of the call's read budget): the straddling row is
-- included; keys after it are neither rows nor missing (truncated).
-- Exactly one row. Inlined like _kv_get_v1.
CREATE OR REPLACE FUNCTION queen._kv_get_many_v1(p_tenant UUID, p_ns TEXT, p_keys JSONB, p_now TIMESTAMPTZ,
                                                 p_idx INTEGER, p_budget BIGINT)
RETURNS TABLE (elem JSONB, bytes BIGINT) LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    WITH req AS (
        SELECT t.k COLLATE "C" AS k, min(t.o) AS o
        FROM jsonb_array_elements_text(p_keys) WITH ORDINALITY AS t(k, o)
        GROUP BY 1
    ), hit AS (
        SELECT r.k, r.o, kv.value, kv.version, kv.expires_at, kv.updated_at,
               kv.version IS NOT NULL AS found,
               COALESCE(octet_length(kv.value::text), 0) AS b
        FROM req r
        LEFT JOIN queen.kv kv
               ON kv.tenant_id = p_tenant AND kv.namespace = p_ns AND kv.key = r.k
              AND queen.kv_live_v1(kv.expires_at, p_now)
    ), acc AS (
        SELECT h.*, COALESCE(sum(h.b) OVER (ORDER BY h.k COLLATE "C"
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
        FROM hit h
    )
    SELECT jsonb_build_object(
               'index', p_idx, 'op', 'getMany',
               'rows', COALESCE(jsonb_agg(jsonb_build_object(
                           'key', a.k, 'value', a.value, 'version', a.version,
                           'expiresAt', queen.kv_ts_v1(a.expires_at),
                           'updatedAt', queen.kv_ts_v1(a.updated_at))
                           ORDER BY a.k COLLATE "C")
                         FILTER (WHERE a.found AND a.before < p_budget), '[]'::jsonb),
               'missing', COALESCE(jsonb_agg(to_jsonb(a.k) ORDER BY a.o)
                         FILTER (WHERE NOT a.found AND a.before < p_budget), '[]'::jsonb),
               'truncated', COALESCE(bool_or(a.before >= p_budget), false)),
           COALESCE(sum(a.b) FILTER (WHERE a.before < p_budget), 0)::bigint
    FROM acc a
$$;

-- _kv_get_prefix_v1(tenant, ns, prefix, after, limit, keys_only, now, idx, budget) -> TABLE(elem, bytes)
-- getPrefix: kv_page_v1's page as {index, op:"getPrefix", rows, truncated,
-- nextAfter} and the value bytes it charges. Exactly one row.
CREATE OR REPLACE FUNCTION queen._kv_get_prefix_v1(p_tenant UUID, p_ns TEXT, p_prefix TEXT, p_after TEXT,
                                                   p_limit INTEGER, p_keys_only BOOLEAN, p_now TIMESTAMPTZ,
                                                   p_idx INTEGER, p_budget BIGINT)
RETURNS TABLE (elem JSONB, bytes BIGINT) LANGUAGE sql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
    SELECT jsonb_build_object('index', p_idx, 'op', 'getPrefix') || (p.page - 'bytes'), (p.page ->> 'bytes')::bigint
    FROM (SELECT queen.kv_page_v1(p_tenant, p_ns, p_prefix, p_after, p_limit, p_keys_only, false, false,
                                  p_now, p_budget) AS page) AS p
$$;

-- _kv_put_v1(tenant, idx, ns, key, value, expires_at, expect, required, now) -> jsonb
-- put and putIfAbsent (expect 0): the write and its verdict, the op's whole
-- result ({index, op:"put", applied, ...}; _kv_verdict_v1 when it did not
-- apply, which raises with required). expires_at NULL = forever; expect
-- NULL = unconditional. Each write is ONE statement with its precondition
-- in its WHERE (kv_apply_v1's header says why). plpgsql, not sql: PL/pgSQL
-- keeps the statement's plan across transactions, a sql function in
-- PostgreSQL 15 plans its body again in each.
CREATE OR REPLACE FUNCTION queen._kv_put_v1(p_tenant UUID, p_idx INTEGER, p_ns TEXT, p_key TEXT, p_value JSONB,
                                            p_exp TIMESTAMPTZ, p_expect BIGINT, p_required BOOLEAN, p_now TIMESTAMPTZ)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_elem    jsonb;
    v_cur_val jsonb;
    v_cur_ver bigint;
BEGIN
    IF p_expect IS NULL THEN
        -- Unconditional upsert. A put never inherits the previous expiry;
        -- created_at survives only a live row (writing over an expired,
        -- unpruned row starts a new lineage).
        INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_tenant, p_ns, p_key, p_value, nextval('queen.kv_version_seq'), p_exp, p_now, p_now)
        ON CONFLICT (tenant_id, namespace, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
               created_at = CASE WHEN queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
                                 THEN k.created_at ELSE EXCLUDED.created_at END,
               updated_at = EXCLUDED.updated_at
        RETURNING jsonb_build_object('index', p_idx, 'op', 'put', 'applied', true,
                                     'key', p_key, 'value', p_value, 'version', k.version)
        INTO v_elem;
        RETURN v_elem;
    ELSIF p_expect = 0 THEN
        -- Must not exist. Wins over an expired, unpruned row (new lineage:
        -- created_at resets). The arm locks the row before its WHERE, so of
        -- N concurrent callers exactly one applies.
        INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_tenant, p_ns, p_key, p_value, nextval('queen.kv_version_seq'), p_exp, p_now, p_now)
        ON CONFLICT (tenant_id, namespace, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
               created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
         WHERE NOT queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
        RETURNING jsonb_build_object('index', p_idx, 'op', 'put', 'applied', true,
                                     'key', p_key, 'value', p_value, 'version', k.version)
        INTO v_elem;
        IF v_elem IS NOT NULL THEN
            RETURN v_elem;   -- the verdict's call is set up only when it is reached
        END IF;
        RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'put', p_ns, p_key, 'exists',
                                    NULL, NULL, p_required);
    END IF;
    -- expect N > 0: a pure update, never creates a row.
    UPDATE queen.kv AS k
       SET value = p_value, version = nextval('queen.kv_version_seq'), expires_at = p_exp, updated_at = p_now
     WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
       AND queen.kv_ver_v1(k.version, k.expires_at, p_now) = p_expect
    RETURNING jsonb_build_object('index', p_idx, 'op', 'put', 'applied', true,
                                 'key', p_key, 'value', p_value, 'version', k.version)
    INTO v_elem;
    IF v_elem IS NULL THEN
        -- Matched nothing: the row with version N may have been committed
        -- after the statement began (a client may expect a version not
        -- minted yet). Lock the live row; if it holds N now, the write
        -- applies here, so "not applied" never comes with the very version
        -- that was expected (found by tests/linearizability). No live row
        -- now is the verdict's state: a newer read could show a row
        -- committed since, with the very version expected.
        SELECT k.value, k.version INTO v_cur_val, v_cur_ver
        FROM queen.kv AS k
        WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
          AND queen.kv_live_v1(k.expires_at, p_now)
        FOR UPDATE;
        IF v_cur_ver IS NULL THEN
            v_cur_ver := 0;
        ELSIF v_cur_ver = p_expect THEN
            UPDATE queen.kv AS k
               SET value = p_value, version = nextval('queen.kv_version_seq'), expires_at = p_exp, updated_at = p_now
             WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
            RETURNING jsonb_build_object('index', p_idx, 'op', 'put', 'applied', true,
                                         'key', p_key, 'value', p_value, 'version', k.version)
            INTO v_elem;
            v_cur_ver := NULL; v_cur_val := NULL;
        END IF;
        IF v_elem IS NULL THEN
            RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'put', p_ns, p_key, 'version',
                                        v_cur_val, v_cur_ver, p_required);
        END IF;
    END IF;
    RETURN v_elem;
END
$$;

-- _kv_delete_v1(tenant, idx, ns, key, expect, required, now) -> jsonb
-- delete: the write and its verdict, as _kv_put_v1. An applied delete
-- reports the row it removed (null/0 for expect 0 on nothing).
CREATE OR REPLACE FUNCTION queen._kv_delete_v1(p_tenant UUID, p_idx INTEGER, p_ns TEXT, p_key TEXT,
                                               p_expect BIGINT, p_required BOOLEAN, p_now TIMESTAMPTZ)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_elem    jsonb;
    v_cur_val jsonb;
    v_cur_ver bigint;
BEGIN
    IF p_expect IS NULL THEN
        -- Only a live row can be deleted; an expired one is already absent
        -- (the sweeper reclaims its space). Not applied means absent at
        -- this statement: no second read, the verdict "absent, null, 0" is
        -- exact as of the delete.
        DELETE FROM queen.kv AS k
         WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
           AND queen.kv_live_v1(k.expires_at, p_now)
        RETURNING jsonb_build_object('index', p_idx, 'op', 'delete', 'applied', true,
                                     'key', p_key, 'value', k.value, 'version', k.version)
        INTO v_elem;
        IF v_elem IS NOT NULL THEN
            RETURN v_elem;   -- the verdict's call is set up only when it is reached
        END IF;
        RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'delete', p_ns, p_key, 'absent',
                                    NULL, 0, p_required);
    ELSIF p_expect = 0 THEN
        -- "Must not exist": succeeds on nothing. FOR UPDATE takes the live
        -- row's lock (in key order, like any write) so the verdict holds for
        -- the rest of the caller's transaction.
        SELECT k.version, k.value INTO v_cur_ver, v_cur_val
        FROM queen.kv AS k
        WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
          AND queen.kv_live_v1(k.expires_at, p_now)
        FOR UPDATE;
        IF v_cur_ver IS NULL THEN
            RETURN jsonb_build_object('index', p_idx, 'op', 'delete', 'applied', true,
                                      'key', p_key, 'value', NULL::jsonb, 'version', 0);
        END IF;
        RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'delete', p_ns, p_key, 'exists',
                                    v_cur_val, v_cur_ver, p_required);
    END IF;
    DELETE FROM queen.kv AS k
     WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
       AND queen.kv_ver_v1(k.version, k.expires_at, p_now) = p_expect
    RETURNING jsonb_build_object('index', p_idx, 'op', 'delete', 'applied', true,
                                 'key', p_key, 'value', k.value, 'version', k.version)
    INTO v_elem;
    IF v_elem IS NULL THEN
        -- As _kv_put_v1's expect N: decide under the live row's lock.
        SELECT k.value, k.version INTO v_cur_val, v_cur_ver
        FROM queen.kv AS k
        WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
          AND queen.kv_live_v1(k.expires_at, p_now)
        FOR UPDATE;
        IF v_cur_ver IS NULL THEN
            v_cur_ver := 0;
        ELSIF v_cur_ver = p_expect THEN
            DELETE FROM queen.kv AS k
             WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
            RETURNING jsonb_build_object('index', p_idx, 'op', 'delete', 'applied', true,
                                         'key', p_key, 'value', k.value, 'version', k.version)
            INTO v_elem;
            v_cur_ver := NULL; v_cur_val := NULL;
        END IF;
        IF v_elem IS NULL THEN
            RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'delete', p_ns, p_key, 'version',
                                        v_cur_val, v_cur_ver, p_required);
        END IF;
    END IF;
    RETURN v_elem;
END
$$;

-- _kv_incr_v1(tenant, idx, ns, key, delta, min, max, expires_at, required, now) -> jsonb
-- incr: the write and its verdict, as _kv_put_v1 (reason limit, or type on
-- a live non-number). The new value is computed inside the statement
-- (kv_num_v1(old) + delta), never in a variable read earlier. min/max NULL
-- = no limit; expires_at applies only when the row is created.
CREATE OR REPLACE FUNCTION queen._kv_incr_v1(p_tenant UUID, p_idx INTEGER, p_ns TEXT, p_key TEXT,
                                             p_delta NUMERIC, p_min NUMERIC, p_max NUMERIC,
                                             p_exp TIMESTAMPTZ, p_required BOOLEAN, p_now TIMESTAMPTZ)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_elem    jsonb;
    v_cur_val jsonb;
    v_cur_ver bigint;
BEGIN
    IF p_delta BETWEEN COALESCE(p_min, '-Infinity') AND COALESCE(p_max, 'Infinity') THEN   -- no limit: an infinite one
        -- The create branch is allowed (delta itself is within the limits):
        -- upsert. On a live number the arm adds delta inside the statement;
        -- a live non-number refuses (type); an expired row counts as 0 and
        -- takes the new window (TTL applies only when the row is created; a
        -- live counter keeps its window).
        INSERT INTO queen.kv AS k (tenant_id, namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_tenant, p_ns, p_key, to_jsonb(p_delta), nextval('queen.kv_version_seq'), p_exp, p_now, p_now)
        ON CONFLICT (tenant_id, namespace, key) DO UPDATE
           SET value = to_jsonb(queen.kv_num_v1(k.value, k.expires_at, EXCLUDED.updated_at) + p_delta),
               version = EXCLUDED.version,
               expires_at = CASE WHEN queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
                                 THEN k.expires_at ELSE EXCLUDED.expires_at END,
               created_at = CASE WHEN queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at)
                                 THEN k.created_at ELSE EXCLUDED.created_at END,
               updated_at = EXCLUDED.updated_at
         -- The new value (an expired row counts as 0; a live non-number is
         -- NULL, which refuses: type) within the limits, no limit being an
         -- infinite one (a JSON number is finite). One expression: this WHERE
         -- is set up at every execution, and each node costs (measured: the
         -- type test and the limits as separate ORs, 5 us of an incr).
         WHERE CASE WHEN NOT queen.kv_live_v1(k.expires_at, EXCLUDED.updated_at) THEN p_delta
                    WHEN jsonb_typeof(k.value) = 'number' THEN (k.value)::numeric + p_delta END
               BETWEEN COALESCE(p_min, '-Infinity') AND COALESCE(p_max, 'Infinity')
        RETURNING jsonb_build_object('index', p_idx, 'op', 'incr', 'applied', true,
                                     'key', p_key, 'value', k.value, 'version', k.version)
        INTO v_elem;
        IF v_elem IS NOT NULL THEN
            RETURN v_elem;   -- the verdict's call is set up only when it is reached
        END IF;
        RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'incr', p_ns, p_key, 'limit',
                                    NULL, NULL, p_required);
    END IF;
    -- delta alone crosses a limit, so the row may not be created: only a
    -- live number can move. Never saturates.
    UPDATE queen.kv AS k
       SET value = to_jsonb(queen.kv_num_v1(k.value, k.expires_at, p_now) + p_delta),
           version = nextval('queen.kv_version_seq'), updated_at = p_now
     WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
       AND queen.kv_live_v1(k.expires_at, p_now) AND jsonb_typeof(k.value) = 'number'
       AND (p_min IS NULL OR queen.kv_num_v1(k.value, k.expires_at, p_now) + p_delta >= p_min)
       AND (p_max IS NULL OR queen.kv_num_v1(k.value, k.expires_at, p_now) + p_delta <= p_max)
    RETURNING jsonb_build_object('index', p_idx, 'op', 'incr', 'applied', true,
                                 'key', p_key, 'value', k.value, 'version', k.version)
    INTO v_elem;
    IF v_elem IS NULL THEN
        -- The UPDATE found no row to move, but a concurrent create may
        -- commit before the verdict read: reporting that row with "limit"
        -- would contradict the limit (a linearizability violation
        -- tests/linearizability found). Lock what is live now and decide on
        -- it, so verdict and row are one instant.
        SELECT k.value, k.version INTO v_cur_val, v_cur_ver
        FROM queen.kv AS k
        WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
          AND queen.kv_live_v1(k.expires_at, p_now)
        FOR UPDATE;
        IF v_cur_ver IS NOT NULL AND jsonb_typeof(v_cur_val) = 'number'
           AND (p_min IS NULL OR (v_cur_val)::numeric + p_delta >= p_min)
           AND (p_max IS NULL OR (v_cur_val)::numeric + p_delta <= p_max) THEN
            UPDATE queen.kv AS k
               SET value = to_jsonb((v_cur_val)::numeric + p_delta),
                   version = nextval('queen.kv_version_seq'), updated_at = p_now
             WHERE k.tenant_id = p_tenant AND k.namespace = p_ns AND k.key = p_key
            RETURNING jsonb_build_object('index', p_idx, 'op', 'incr', 'applied', true,
                                         'key', p_key, 'value', k.value, 'version', k.version)
            INTO v_elem;
            v_cur_ver := NULL; v_cur_val := NULL;
        ELSE
            v_cur_ver := COALESCE(v_cur_ver, 0);   -- known: the verdict read is not repeated
        END IF;
        IF v_elem IS NULL THEN
            RETURN queen._kv_verdict_v1(p_tenant, p_now, p_idx, 'incr', p_ns, p_key, 'limit',
                                        v_cur_val, v_cur_ver, p_required);
        END IF;
    END IF;
    RETURN v_elem;
END
$$;

-- ---------------------------------------------------------------------------
-- kv_apply_v1: the one entry point for kv reads and writes
-- ---------------------------------------------------------------------------

-- kv_apply_v1(p_ops jsonb, p_tenant uuid, p_now timestamptz, p_in_wire boolean) -> jsonb
--
-- Arguments
--   p_ops     JSON array of ops (docs/api.md, KV), applied in one call.
--   p_tenant  the tenant; an argument, never an input field of an op.
--   p_now     the call's instant; NULL means now(). ONE instant for every op.
--   p_in_wire true inside log_transaction_wire_v1 (tighter budgets, no
--             getPrefix), false for the HTTP/embedded kv route.
--
-- Result: a JSON array aligned with p_ops by index; every element carries
-- index and op (putIfAbsent reports op "put"):
--   get        {found:true, key, value, version, expiresAt, updatedAt}
--              | {found:false, key}
--              | {truncated:true, key} when the call's read budget was
--                spent before this get (neither found nor missing, as for a
--                getMany key cut by the budget).
--   getMany    {rows:[{key,value,version,expiresAt,updatedAt}] (key order),
--               missing:[keys, input order, duplicates once], truncated}
--   getPrefix  {rows, truncated, nextAfter}
--   put/delete/incr
--              {applied:true, key, value, version}
--              | {applied:false, reason, key, value, version}
--     reason is one of exists | absent | version | limit | type; value and
--     version are those of the CURRENT live row (null/0 when there is none).
--     An applied put/incr reports the row it wrote; an applied delete reports
--     the row it removed (null/0 for a delete with expect:0 on nothing).
-- Timestamps are UTC ISO-8601 with microseconds and Z; expiresAt is null for
-- a forever key.
--
-- SQLSTATEs (MESSAGE is the opaque code, names and numbers in DETAIL):
--   22023 kv_bad_request, kv_unknown_op, kv_bad_namespace, kv_bad_key,
--         kv_expiry_not_specified, kv_bad_ttl, kv_bad_expect,
--         kv_prefix_required, kv_get_prefix_not_allowed_in_transaction,
--         kv_tenant_not_an_input, kv_duplicate_key_in_call,
--         kv_too_many_ops, kv_too_many_keys
--   22001 kv_key_too_large, kv_value_too_large
--   23514 kv_precondition_failed: an op with required:true did not apply;
--         DETAIL is JSON {index, op, ns, key, reason, version, value}.
--   XX000 kv_result_misaligned: an internal bug (a result slot was not
--         filled); never a silent null.
-- Any raise aborts the statement, so a refused call writes nothing.
--
-- Shape rules (decided here, tested in tests/sql/024_kv.sql):
--   - Every op is an object; fields not listed for its op are refused with
--     kv_bad_request (a typo such as "ttl" must not silently mean forever),
--     except tenant/tenantId/_tenant, which get kv_tenant_not_an_input, and
--     expect on incr, which gets kv_bad_expect.
--   - A field present with JSON null counts as present (and is then of the
--     wrong type), except value, where null is a legal value, and getPrefix's
--     after/limit/keysOnly, where null means "not given".
--   - ttlSeconds is an integer 1..2147483647 (about 68 years; longer is
--     forever), else kv_bad_ttl; bounding it also keeps now + ttl from
--     overflowing timestamptz.
--   - expect is an integer 0..2^63-1, else kv_bad_expect.
--   - incr with min > max is kv_bad_request (nothing could ever apply).
--   - p_tenant NULL, p_in_wire NULL or p_ops not an array: kv_bad_request.
--     An empty array returns [].
--   - Ops are validated in input order and the first bad op raises. Name
--     errors come from kv_check_names_v1, so their DETAIL carries the name
--     but not the op index; every other DETAIL starts with "op <index>".
--
-- How it is built: _kv_check_v1 validates the whole call and returns its
-- ops typed (_kv_op_v1) in apply order; the apply loop calls one function
-- per op kind, which does the op's statement and, for a write that did not
-- apply, its verdict. A one-op get, put, putIfAbsent or incr first takes a
-- fast path that tests its kind's rules (the checker's own predicates) and
-- calls the same op function, skipping the checker's statements. So each
-- write statement and each rule is written once.
--
-- Why it is written the way it is:
--   - Validate everything first, then apply. No savepoints and no EXCEPTION
--     blocks: tens of subtransactions per bundle overflow the subxid cache
--     and make every snapshot on the server slower.
--   - Apply order is ascending (phase, ns, key COLLATE "C", input ordinal),
--     decided here and nowhere else (the broker never pre-sorts): this is
--     the global lock order inside queen.kv, and COLLATE "C" is spelled out
--     because an extraction from jsonb does not inherit a column's collation.
--     Phase 1 is getMany/getPrefix so multi-key reads see the call's writes.
--   - A key is written at most once per call (kv_duplicate_key_in_call);
--     that is what makes the order total.
--   - Each write is ONE statement with its precondition in its WHERE,
--     evaluated on the newest committed version of the row. Only when it did
--     not apply does a second statement read the current live row for the
--     verdict. That read is never stale: under READ COMMITTED it takes a
--     fresh snapshot after the write statement, and on the ON CONFLICT arm
--     the row is already locked by us (the arm locks before its WHERE), so
--     it reads exactly the version that refused us. A CTE reading the row in
--     the same statement would be WRONG: its snapshot predates a concurrent
--     winner the ON CONFLICT arm has just seen (it would report "exists" with
--     no row, or "version" with the very version that was expected).
--     Under REPEATABLE READ or SERIALIZABLE a concurrent change makes the
--     write itself fail with 40001, so the read cannot disagree with it.
--   - With concurrent expect:0 writers exactly one applies: the ON CONFLICT
--     arm takes the row lock before evaluating NOT kv_live_v1(...).
--   - The version comes from queen.kv_version_seq on every write, never
--     version + 1.
--   - incr computes the new value inside the statement
--     (kv_num_v1(old) + delta), never in a variable read earlier.
-- VOLATILE (writes), PARALLEL UNSAFE, CALLED ON NULL INPUT (NULLs raise).
CREATE OR REPLACE FUNCTION queen.kv_apply_v1(p_ops JSONB, p_tenant UUID, p_now TIMESTAMPTZ, p_in_wire BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_kind      text;
    v_op        jsonb;
    v_now       timestamptz;
    v_ops       queen._kv_op_v1[];
    v_o         queen._kv_op_v1;
    v_res       jsonb[];
    v_elem      jsonb;
    v_b         bigint;
    v_read_used bigint := 0;   -- value bytes returned so far (the 4 MiB read budget)
BEGIN
    -- ---------------------------------------------------------------
    -- 0. The one-op fast path (the hot path: one HTTP op, the wire's
    --    marker). plpgsql sets up every expression it evaluates once per
    --    transaction, so a one-op call that ran the checker and the apply
    --    loop would pay for ~30 statements to do one row's work. Here: one
    --    statement picks the op, one test of its kind's rules
    --    (_kv_get_ok_v1, _kv_put_ok_v1, _kv_incr_ok_v1: the checker's own
    --    rules, narrowed) and one call of the op's function, the same the
    --    apply loop calls. An op the test refuses takes the checker and the
    --    loop (or the checker's refusal).
    -- ---------------------------------------------------------------
    -- v_kind is the first op's kind when p_ops is a one-element array (an
    -- array's element 1 is absent; `-> 0 ->> 'op'` is NULL unless element 0
    -- is an object) and the arguments are given, else NULL, which no branch
    -- takes. Each kind's test is its own expression, nested under the test
    -- of the kind: plpgsql sets up a whole condition the first time it
    -- evaluates it in a transaction, short-circuit or not.
    v_kind := CASE WHEN p_tenant IS NOT NULL AND p_in_wire IS NOT NULL AND p_ops -> 1 IS NULL
                   THEN p_ops -> 0 ->> 'op' END;
    IF v_kind = 'get' THEN
        IF queen._kv_get_ok_v1(p_ops -> 0) THEN
            -- SELECT INTO, not RETURN (SELECT ...): _kv_get_v1 is inlined,
            -- the row's query runs as one index scan with no Result node and
            -- InitPlan above it, and the miss's object is built only on a
            -- miss.
            SELECT jsonb_build_array(g.elem) INTO v_elem
            FROM queen._kv_get_v1(p_tenant, p_ops -> 0 ->> 'ns', p_ops -> 0 ->> 'key', COALESCE(p_now, now()), 0) AS g;
            IF v_elem IS NOT NULL THEN
                RETURN v_elem;
            END IF;
            RETURN jsonb_build_array(queen._kv_get_miss_v1(0, p_ops -> 0 ->> 'key'));
        END IF;
    ELSIF v_kind = 'incr' THEN
        v_op := p_ops -> 0;
        IF queen._kv_incr_ok_v1(v_op) THEN
            RETURN jsonb_build_array(queen._kv_incr_v1(
                       p_tenant, 0, v_op ->> 'ns', v_op ->> 'key', (v_op -> 'delta')::numeric, NULL, NULL,
                       queen._kv_expires_v1(v_op, COALESCE(p_now, now())), queen._kv_required_v1(v_op),
                       COALESCE(p_now, now())));
        END IF;
    ELSIF v_kind = 'put' OR v_kind = 'putIfAbsent' THEN
        v_op := p_ops -> 0;
        IF queen._kv_put_ok_v1(v_op) THEN
            RETURN jsonb_build_array(queen._kv_put_v1(
                       p_tenant, 0, v_op ->> 'ns', v_op ->> 'key', v_op -> 'value',
                       queen._kv_expires_v1(v_op, COALESCE(p_now, now())), queen._kv_expect_v1(v_op),
                       queen._kv_required_v1(v_op), COALESCE(p_now, now())));
        END IF;
    END IF;

    -- ---------------------------------------------------------------
    -- 1. Validate everything (nothing is read or written before the
    --    checker has passed the whole call); its rows come in apply order.
    -- ---------------------------------------------------------------
    v_now := COALESCE(p_now, now());
    v_ops := queen._kv_check_v1(p_ops, p_tenant, p_in_wire, v_now);
    IF cardinality(v_ops) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    v_res := array_fill(NULL::jsonb, ARRAY[cardinality(v_ops)]);

    -- ---------------------------------------------------------------
    -- 2. Apply: one op function per kind; each returns the op's result.
    -- ---------------------------------------------------------------
    FOREACH v_o IN ARRAY v_ops LOOP
        CASE v_o.kind
        WHEN 'get' THEN
            IF v_read_used >= 4194304 THEN   -- the call's 4 MiB read budget is spent
                v_elem := jsonb_build_object('index', v_o.idx, 'op', 'get', 'truncated', true, 'key', v_o.key);
            ELSE
                SELECT g.elem, g.bytes INTO v_elem, v_b
                FROM queen._kv_get_v1(p_tenant, v_o.ns, v_o.key, v_now, v_o.idx) AS g;
                IF v_elem IS NULL THEN
                    v_elem := queen._kv_get_miss_v1(v_o.idx, v_o.key);
                ELSE
                    v_read_used := v_read_used + v_b;
                END IF;
            END IF;
        WHEN 'put', 'putIfAbsent' THEN
            v_elem := queen._kv_put_v1(p_tenant, v_o.idx, v_o.ns, v_o.key, v_o.value, v_o.expires_at,
                                       v_o.expect, v_o.required, v_now);
        WHEN 'delete' THEN
            v_elem := queen._kv_delete_v1(p_tenant, v_o.idx, v_o.ns, v_o.key, v_o.expect, v_o.required, v_now);
        WHEN 'incr' THEN
            v_elem := queen._kv_incr_v1(p_tenant, v_o.idx, v_o.ns, v_o.key, v_o.delta, v_o.min, v_o.max,
                                        v_o.expires_at, v_o.required, v_now);
        WHEN 'getMany' THEN
            SELECT g.elem, g.bytes INTO v_elem, v_b
            FROM queen._kv_get_many_v1(p_tenant, v_o.ns, v_o.keys, v_now, v_o.idx, 4194304 - v_read_used) AS g;
            v_read_used := v_read_used + v_b;
        WHEN 'getPrefix' THEN
            SELECT g.elem, g.bytes INTO v_elem, v_b
            FROM queen._kv_get_prefix_v1(p_tenant, v_o.ns, v_o.prefix, v_o.after, v_o.lim, v_o.keys_only,
                                         v_now, v_o.idx, 4194304 - v_read_used) AS g;
            v_read_used := v_read_used + v_b;
        END CASE;
        v_res[v_o.idx + 1] := v_elem;
    END LOOP;

    -- Count guard: every input index must have its result. A hole is a bug
    -- in this function, reported loudly instead of as a silent null.
    IF array_position(v_res, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'kv_result_misaligned',
            DETAIL = format('no result for op %s of %s', array_position(v_res, NULL) - 1, cardinality(v_res));
    END IF;
    RETURN to_jsonb(v_res);
END
$$;

-- The fast path's former checks, replaced by the rule predicates above
-- (_kv_get_ok_v1, _kv_put_ok_v1, _kv_incr_ok_v1). Dropped after the
-- kv_apply_v1 that no longer calls them is in place. A no-op once dropped.
DROP FUNCTION IF EXISTS queen._kv_fast_get_ok_v1(JSONB);
DROP FUNCTION IF EXISTS queen._kv_fast_write_ok_v1(JSONB, TEXT[]);

-- ---------------------------------------------------------------------------
-- Console reads
-- ---------------------------------------------------------------------------

-- kv_list_v1(tenant, namespace, prefix, after, limit, keys_only, include_expired) -> jsonb
-- The getPrefix arm (kv_page_v1) with two differences: the prefix may be
-- empty or NULL (lists the whole namespace), and expired, unswept rows may be
-- included; every row carries expired: true|false.
-- Result: {rows: [{key, value, version, expiresAt, updatedAt, expired}],
--          truncated, nextAfter, bytes}; same limit clamp (1..1000, default
-- 100) and 4 MiB value-byte budget as getPrefix. Expiry is judged at now().
-- Raises 22023 kv_bad_request on a NULL tenant, kv_bad_namespace on a bad
-- namespace, kv_key_too_large on a prefix over 512 bytes.
-- STABLE (reads only), PARALLEL SAFE, CALLED ON NULL INPUT (a NULL tenant
-- must raise, not return NULL).
CREATE OR REPLACE FUNCTION queen.kv_list_v1(
    p_tenant UUID, p_namespace TEXT, p_prefix TEXT, p_after TEXT, p_limit INTEGER,
    p_keys_only BOOLEAN, p_include_expired BOOLEAN)
RETURNS JSONB LANGUAGE plpgsql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = 'the tenant argument is required';
    END IF;
    -- The name rules are written once, in kv_check_names_v1; 'x' stands for
    -- "any legal key" when the prefix is empty, so only the namespace (and a
    -- non-empty prefix's byte length) is judged.
    PERFORM queen.kv_check_names_v1(p_namespace, COALESCE(NULLIF(p_prefix, ''), 'x'));
    RETURN queen.kv_page_v1(p_tenant, p_namespace, COALESCE(p_prefix, ''), p_after, p_limit,
                            COALESCE(p_keys_only, false), COALESCE(p_include_expired, false), true,
                            now(), 4194304);
END
$$;

-- kv_namespaces_v1(tenant) -> jsonb
-- [{namespace, keys}] in byte order. Namespaces are registered nowhere: one
-- exists iff a row does, and keys counts rows including expired-unswept
-- ones (it is a console view of what occupies the table). An unknown tenant
-- gives []. Raises 22023 kv_bad_request on a NULL tenant.
-- STABLE, PARALLEL SAFE, CALLED ON NULL INPUT.
CREATE OR REPLACE FUNCTION queen.kv_namespaces_v1(p_tenant UUID)
RETURNS JSONB LANGUAGE plpgsql STABLE PARALLEL SAFE CALLED ON NULL INPUT
AS $$
DECLARE
    v_out jsonb;
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'kv_bad_request',
            DETAIL = 'the tenant argument is required';
    END IF;
    SELECT COALESCE(jsonb_agg(jsonb_build_object('namespace', n.namespace, 'keys', n.keys)
                              ORDER BY n.namespace COLLATE "C"), '[]'::jsonb)
    INTO v_out
    FROM (SELECT kv.namespace, count(*) AS keys
          FROM queen.kv kv
          WHERE kv.tenant_id = p_tenant
          GROUP BY kv.namespace) AS n;
    RETURN v_out;
END
$$;
