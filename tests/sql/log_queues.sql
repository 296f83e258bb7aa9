-- tests/sql/log_queues.sql: queue configuration (sql/log_queues.sql:
-- log_configure_v1 and its option table, the labels in log_queues_v1): every
-- option name the reference broker's configure takes, the bodies its JS and
-- Python clients send, merge / replace / null, the labels, and every refusal
-- (with nothing written). Own tenant; rolled back.
BEGIN;
SELECT plan(68);
SELECT gen_random_uuid() AS t \gset

-- configure(queue, options [, namespace, task, mode]) for tenant :t, as jsonb.
CREATE FUNCTION pg_temp.conf(p_t uuid, p_q text, p_o jsonb, p_ns text DEFAULT NULL, p_task text DEFAULT NULL,
                             p_mode text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$ SELECT queen.log_configure_v1(p_t, p_q, p_o, p_ns, p_task, p_mode) $$;
CREATE FUNCTION pg_temp.row(p_t uuid, p_q text) RETURNS queen.queues LANGUAGE sql AS $$
    SELECT * FROM queen.queues WHERE tenant_id = p_t AND name = p_q $$;
CREATE FUNCTION pg_temp.listed(p_t uuid, p_q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT q FROM jsonb_array_elements(queen.log_queues_v1(p_t) -> 'queues') q WHERE q ->> 'name' = p_q $$;

-- ---------------------------------------------------------------- the function and its table
SELECT has_function('queen', 'log_configure_v1', ARRAY['uuid', 'text', 'jsonb', 'text', 'text', 'text'],
                    'log_configure_v1(tenant, queue, options, namespace, task, mode)');
SELECT hasnt_function('queen', 'log_configure_v1', ARRAY['uuid', 'text', 'jsonb'],
                      'the three-argument form is gone (a three-argument call would be ambiguous)');
SELECT volatility_is('queen', 'log_configure_v1', ARRAY['uuid', 'text', 'jsonb', 'text', 'text', 'text'], 'volatile',
                     'log_configure_v1 is VOLATILE');
SELECT volatility_is('queen', '_log_queue_option_specs_v1', ARRAY[]::text[], 'immutable',
                     'the option table is IMMUTABLE (a change is a change of the contract)');
SELECT is((SELECT array_agg(name ORDER BY name) FROM queen._log_queue_option_specs_v1() WHERE effect <> 'label'),
          ARRAY['completedRetentionSeconds', 'deadLetterQueue', 'dedupWindowSeconds', 'delayedProcessing',
                'dlqAfterMaxRetries', 'encryptionEnabled', 'leaseTime', 'maxSize', 'maxWaitTimeSeconds',
                'minPopWaitTime', 'priority', 'retentionEnabled', 'retentionSeconds', 'retentionSinkHold',
                'retentionSinkHoldMaxSeconds', 'retryDelay', 'retryLimit', 'ttl', 'windowBuffer'],
          'the 19 options of the reference broker''s configure_queue_v1 (its API.md documents 13 of them)');
SELECT is((SELECT array_agg(name ORDER BY ord) FROM queen._log_queue_option_specs_v1() WHERE effect = 'honoured'),
          ARRAY['leaseTime', 'retryLimit', 'retentionSeconds', 'completedRetentionSeconds', 'dedupWindowSeconds'],
          'five are acted on here');
SELECT is((SELECT array_agg(name ORDER BY ord) FROM queen._log_queue_option_specs_v1() WHERE effect = 'label'),
          ARRAY['namespace', 'task'], 'namespace and task are labels, also accepted inside options');

-- ---------------------------------------------------------------- JS create(): QUEUE_DEFAULTS, labels null
-- client-js QueueBuilder.create() without config(): options = QUEUE_DEFAULTS.
CREATE TEMP TABLE js1 AS SELECT pg_temp.conf(:'t', 'c_js', '{"leaseTime":300,"retryLimit":3,"priority":0,
    "delayedProcessing":0,"windowBuffer":0,"maxSize":0,"retentionSeconds":0,"completedRetentionSeconds":0,
    "encryptionEnabled":false}') AS r;
SELECT is((SELECT r -> 'configured' FROM js1), 'true', 'JS create(): configured');
SELECT is((SELECT r ->> 'queue' FROM js1), 'c_js', 'JS create(): the queue');
SELECT is((SELECT r ->> 'queueId' FROM js1), (pg_temp.row(:'t', 'c_js')).id::text, 'JS create(): queueId');
SELECT is((SELECT r -> 'namespace' FROM js1), 'null', 'no label: namespace null');
SELECT is((SELECT r -> 'options' FROM js1),
          '{"priority":0,"leaseTime":300,"retryLimit":3,"retryDelay":1000,"maxSize":0,"ttl":3600,
            "deadLetterQueue":true,"dlqAfterMaxRetries":true,"delayedProcessing":0,"windowBuffer":0,
            "retentionSeconds":0,"completedRetentionSeconds":0,"retentionEnabled":false,"encryptionEnabled":false,
            "maxWaitTimeSeconds":0,"minPopWaitTime":0,"dedupWindowSeconds":3600,"retentionSinkHold":"",
            "retentionSinkHoldMaxSeconds":604800}'::jsonb,
          'the echo: every option, effective (the ones not sent at their defaults)');
SELECT is((SELECT r -> 'storedOnly' FROM js1),
          '["priority","retryDelay","maxSize","ttl","deadLetterQueue","dlqAfterMaxRetries",
            "retentionEnabled","minPopWaitTime",
            "retentionSinkHold","retentionSinkHoldMaxSeconds"]'::jsonb,
          'storedOnly: the names stored and echoed but not acted on yet');
SELECT is((SELECT r -> 'options' FROM js1), queen._log_queue_options_v1(pg_temp.row(:'t', 'c_js')),
          'the echo is what is stored');
SELECT row_eq(format($$ SELECT lease_time, retry_limit, dedup_window_seconds, retention_seconds,
                              completed_retention_seconds, namespace, task FROM queen.queues
                       WHERE tenant_id = %L AND name = 'c_js' $$, :'t'),
              ROW(300, 3, 3600, 0, 0, NULL::text, NULL::text), 'JS create(): the columns');
SELECT is((pg_temp.row(:'t', 'c_js')).stored_options,
          '{"priority":0,"delayedProcessing":0,"windowBuffer":0,"maxSize":0,"encryptionEnabled":false}'::jsonb,
          'stored_options holds the stored-only names as given');

-- ---------------------------------------------------------------- Python config(...).create()
-- client-py QueueBuilder.config({lease_time: 60, retry_limit: 5, priority: 7, max_size: 5000,
-- encryption_enabled: True, dlq_after_max_retries: True}): QUEUE_DEFAULTS merged, camelCased.
CREATE TEMP TABLE py1 AS SELECT pg_temp.conf(:'t', 'c_py', '{"leaseTime":60,"retryLimit":5,"priority":7,
    "delayedProcessing":0,"windowBuffer":0,"maxSize":5000,"retentionSeconds":0,"completedRetentionSeconds":0,
    "encryptionEnabled":true,"dlqAfterMaxRetries":true}', 'billing', 'invoice') AS r;
SELECT ok((SELECT r -> 'options' FROM py1) @> '{"leaseTime":60,"retryLimit":5,"priority":7,"maxSize":5000,
                                              "encryptionEnabled":true,"dlqAfterMaxRetries":true}',
          'Python config().create(): what its test reads back');
SELECT row_eq(format($$ SELECT lease_time, retry_limit, namespace, task FROM queen.queues
                       WHERE tenant_id = %L AND name = 'c_py' $$, :'t'),
              ROW(60, 5, 'billing'::text, 'invoice'::text), 'leaseTime and retryLimit are acted on; the labels set');
SELECT is((SELECT jsonb_build_object('namespace', r -> 'namespace', 'task', r -> 'task') FROM py1),
          '{"namespace":"billing","task":"invoice"}'::jsonb, 'the labels echoed');

-- ---------------------------------------------------------------- the reference's own JS configureQueue test
-- (15 options; it checks res.options[key] === config[key] for each).
CREATE TEMP TABLE js2 AS SELECT '{"completedRetentionSeconds":1,"deadLetterQueue":true,"delayedProcessing":1,
    "dlqAfterMaxRetries":true,"encryptionEnabled":true,"leaseTime":30,"maxSize":1000,"maxWaitTimeSeconds":10,
    "priority":5,"retentionEnabled":false,"retentionSeconds":0,"retryDelay":1000,"retryLimit":3,"ttl":36,
    "windowBuffer":100}'::jsonb AS sent;
SELECT is((SELECT count(*)::int FROM (SELECT sent, pg_temp.conf(:'t', 'c_js2', sent) AS r FROM js2) x, jsonb_each(x.sent) e
           WHERE x.r -> 'options' -> e.key IS DISTINCT FROM e.value), 0,
          'every option sent comes back with the value sent');
SELECT is((pg_temp.row(:'t', 'c_js2')).completed_retention_seconds, 1, 'completedRetentionSeconds is a column');

-- ---------------------------------------------------------------- merge, null, replace
SELECT ok(pg_temp.conf(:'t', 'c_py', '{"maxSize":10}') -> 'options'
          @> '{"maxSize":10,"leaseTime":60,"retryLimit":5,"priority":7,"encryptionEnabled":true}',
          'merge: an option not given keeps its stored value');
SELECT is(pg_temp.conf(:'t', 'c_py', '{}') -> 'namespace', '"billing"', 'merge: the labels kept when not given');
SELECT is(pg_temp.conf(:'t', 'c_py', '{}', '', '') ->> 'task', 'invoice', 'a top-level "" keeps the label too');
SELECT ok(pg_temp.conf(:'t', 'c_py', '{"priority":null,"leaseTime":null}') -> 'options' @> '{"priority":0,"leaseTime":300}',
          'null resets an option to its default');
SELECT ok(NOT (pg_temp.row(:'t', 'c_py')).stored_options ? 'priority', 'a reset stored option leaves stored_options');
SELECT ok(pg_temp.conf(:'t', 'c_py', '{"retryLimit":9}', NULL, NULL, 'merge') -> 'options' @> '{"maxSize":10,"retryLimit":9}',
          'mode merge is the default');
CREATE TEMP TABLE rep AS SELECT pg_temp.conf(:'t', 'c_py', '{"windowBuffer":2}', NULL, NULL, 'replace') AS r;
SELECT is((SELECT r -> 'options' FROM rep) - 'windowBuffer',
          (SELECT r -> 'options' FROM js1) - 'windowBuffer', 'replace: everything not given back to its default');
SELECT is((SELECT r -> 'options' -> 'windowBuffer' FROM rep), '2', 'replace: what is given applies');
SELECT is((SELECT r -> 'namespace' FROM rep), 'null', 'replace: the labels cleared too');
SELECT is((pg_temp.row(:'t', 'c_py')).stored_options, '{"windowBuffer":2}'::jsonb, 'replace: stored_options rewritten');
SELECT is(pg_temp.conf(:'t', 'c_py', '{}', 'ns', NULL, 'replace') - 'options' - 'storedOnly' - 'queueId',
          '{"configured":true,"queue":"c_py","namespace":"ns","task":null}'::jsonb,
          'replace with a top-level label: that label set, the other cleared');
SELECT is(pg_temp.conf(:'t', 'c_py', '{"namespace":null}', 'ns2', NULL, 'replace') -> 'namespace', 'null',
          'replace: options.namespace still wins over the top-level one');

-- A queue a push created (leaseTime 60) keeps what configure does not give.
SELECT queen.log_push_v1(:'t', '[{"queue":"c_push","payload":1}]') IS NOT NULL AS pushed;
SELECT is(pg_temp.conf(:'t', 'c_push', '{"priority":1}') -> 'options' -> 'leaseTime', '60',
          'configure on a pushed queue: leaseTime stays 60');
SELECT is(pg_temp.conf(:'t', 'c_push', '{}', NULL, NULL, 'replace') -> 'options' -> 'leaseTime', '300',
          'replace on it: leaseTime 300, configure''s default');

-- ---------------------------------------------------------------- labels
SELECT is(pg_temp.conf(:'t', 'c_lab', '{}', 'ns1', 't1') ->> 'namespace', 'ns1', 'top-level labels set');
SELECT is(pg_temp.listed(:'t', 'c_lab'),
          '{"name":"c_lab","namespace":"ns1","task":"t1","partitions":0,"messages":{"total":0,"pending":0,"processing":0}}'::jsonb,
          'the queue listing shows the labels');
SELECT is(pg_temp.listed(:'t', 'c_js') -> 'task', 'null', 'the listing: no label is null');
SELECT is(pg_temp.conf(:'t', 'c_lab', '{"namespace":"ns2"}', 'ns3') ->> 'namespace', 'ns2',
          'options.namespace wins over the top-level one');
SELECT is(pg_temp.conf(:'t', 'c_lab', '{"namespace":""}') -> 'namespace', 'null', 'options.namespace "" clears');
SELECT is(pg_temp.conf(:'t', 'c_lab', '{"task":null}') -> 'task', 'null', 'options.task null clears');
SELECT is((SELECT count(*)::int FROM queen.queues WHERE tenant_id = :'t' AND (namespace = '' OR task = '')), 0,
          'no label is NULL, never ''''');
SELECT is(pg_temp.conf(:'t', 'c_lab', '{}', repeat('é', 127)) ->> 'namespace', repeat('é', 127), '254 bytes of label');

-- ---------------------------------------------------------------- retention: completedRetentionSeconds
SELECT is(queen._log_retention_seconds_v1(0, 0), 0, 'neither set: keep');
SELECT is(queen._log_retention_seconds_v1(60, 0), 60, 'retentionSeconds alone');
SELECT is(queen._log_retention_seconds_v1(0, 30), 30, 'completedRetentionSeconds alone');
SELECT is(queen._log_retention_seconds_v1(60, 30), 30, 'both: the smaller (a consumed message goes at the first)');
SELECT is(queen._log_retention_seconds_v1(NULL, NULL), 0, 'NULL counts as 0');

-- ---------------------------------------------------------------- refusals
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"leaseTIme":1}') $$, :'t'), '22023', 'log_bad_options',
                 'a typo is refused (the reference would ignore it)');
SELECT throws_like(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"maxSize":1,"zzz":1}') $$, :'t'), '%log_bad_options%',
                   'one unknown name among known ones refuses the call');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"replace":true}') $$, :'t'), '22023', 'log_bad_options',
                 'replace is not an option (mode is)');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"maxSize":-1}') $$, :'t'), '22023', 'log_bad_options',
                 'maxSize -1');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"delayedProcessing":1.5}') $$, :'t'), '22023',
                 'log_bad_options', 'delayedProcessing 1.5');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"priority":"5"}') $$, :'t'), '22023', 'log_bad_options',
                 'priority "5"');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"windowBuffer":2147483648}') $$, :'t'), '22023',
                 'log_bad_options', 'windowBuffer past int4');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"minPopWaitTime":60001}') $$, :'t'), '22023',
                 'log_bad_options', 'minPopWaitTime past 60000 (refused, where the reference clamps)');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"retentionSinkHoldMaxSeconds":59}') $$, :'t'), '22023',
                 'log_bad_options', 'retentionSinkHoldMaxSeconds below 60');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"encryptionEnabled":1}') $$, :'t'), '22023',
                 'log_bad_options', 'encryptionEnabled 1');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"deadLetterQueue":"true"}') $$, :'t'), '22023',
                 'log_bad_options', 'deadLetterQueue "true"');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"retentionSinkHold":"s3:x"}') $$, :'t'), '22023',
                 'log_bad_options', 'retentionSinkHold with a colon');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{"namespace":7}') $$, :'t'), '22023', 'log_bad_options',
                 'options.namespace 7');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{}', repeat('a', 256)) $$, :'t'), '22023',
                 'log_bad_request', 'a 256-byte namespace');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{}', NULL, E'a\tb') $$, :'t'), '22023', 'log_bad_request',
                 'a task with a control character');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '{}', NULL, NULL, 'patch') $$, :'t'), '22023',
                 'log_bad_request', 'mode patch');
SELECT throws_ok(format($$ SELECT pg_temp.conf(%L, 'c_bad', '"x"') $$, :'t'), '22023', 'log_bad_options',
                 'options a string');
SELECT is((SELECT count(*)::int FROM queen.queues WHERE tenant_id = :'t' AND name = 'c_bad'), 0,
          'no refusal created the queue');
SELECT is((pg_temp.row(:'t', 'c_js')).stored_options ? 'zzz', false, 'and none touched another');
SELECT lives_ok(format($$ SELECT pg_temp.conf(%L, 'c_ok', '{"priority":-5,"retentionSinkHold":"lake-1","ttl":null}') $$, :'t'),
                'a negative priority, a sink name and a null are fine');

SELECT * FROM finish();
ROLLBACK;
