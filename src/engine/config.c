/* config: the one table of settings, and the parsers it drives.
 * Never calls getenv() outside this file for a QUEEN_* setting. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef enum setting_type { SET_STRING, SET_INT, SET_BOOL, SET_LOG_LEVEL } setting_type;

typedef struct setting {
    const char *env;      /* QUEEN_PORT */
    const char *flag;     /* port (as --port) */
    setting_type type;
    size_t offset;        /* into queen_config */
    const char *fallback; /* default, as text: parsed by the same code as input */
    long min, max;        /* SET_INT bounds, inclusive */
    const char *doc;
} setting;

#define AT(field) offsetof(queen_config, field)

/* TLS 1.2 suites: ECDHE or DHE key exchange (forward secrecy) with AES-GCM
 * or ChaCha20-Poly1305 (AEAD) only. */
#define TLS_DEFAULT_CIPHERS                                                                                        \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"                     \
    "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                       \
    "DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256"
#define TLS_DEFAULT_CIPHERSUITES "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"

static const setting settings[] = {
    {"QUEEN_PG_URL", "pg-url", SET_STRING, AT(pg_url), "", 0, 0,
     "PostgreSQL connection (libpq conninfo or URI). Empty: libpq's PG* environment."},
    {"QUEEN_BIND", "bind", SET_STRING, AT(bind), "127.0.0.1", 0, 0,
     "Address the HTTP server listens on."},
    {"QUEEN_PORT", "port", SET_INT, AT(port), "6632", 1, 65535,
     "TCP port the HTTP server listens on."},
    {"QUEEN_LOG_LEVEL", "log-level", SET_LOG_LEVEL, AT(log_level), "info", 0, 0,
     "error, warn, info or debug."},
    {"QUEEN_DEV_DIR", "dev-dir", SET_STRING, AT(dev_dir), ".queen", 0, 0,
     "Where `queen dev` keeps its private PostgreSQL cluster."},
    {"QUEEN_DEV_PG_PORT", "dev-pg-port", SET_INT, AT(dev_pg_port), "54329", 1, 65535,
     "Port of the private PostgreSQL that `queen dev` runs on 127.0.0.1."},
    {"QUEEN_SCHEMA_LOCK_WAIT_MS", "schema-lock-wait-ms", SET_INT, AT(schema_lock_wait_ms), "120000", 100, 3600000,
     "How long schema boot waits for another broker's boot to finish."},
    {"QUEEN_SCHEMA_LOCK_TIMEOUT_MS", "schema-lock-timeout-ms", SET_INT, AT(schema_lock_timeout_ms), "2000", 10, 600000,
     "lock_timeout of each schema statement; a timed-out statement is retried."},
    {"QUEEN_SCHEMA_RETRIES", "schema-retries", SET_INT, AT(schema_retries), "5", 0, 100,
     "Retries of a schema statement that hit lock_timeout, a deadlock or a serialization failure."},
    {"QUEEN_PG_POOL", "pg-pool", SET_INT, AT(pg_pool), "0", 0, 1000,
     "Database connections serving requests, shared out among the event loops (embedded: the library's pool). "
     "The broker opens three more for background work (the sweeper and the quota refresh share two; one "
     "listens for pushes). 0: four per CPU core, at least 8. Measured on 2 cores (bench/RESULTS.md): 8 against "
     "4 gave one-op puts at c=8 6,364-6,513 against 5,920-6,059 requests/s and the same at c=32 (queued one-op "
     "writes commit in groups either way); 16 or 32 gave puts 10-20% more at c=32 before writes were grouped, "
     "but fewer gets and mixed ops."},
    {"QUEEN_STMT_TIMEOUT_MS", "stmt-timeout-ms", SET_INT, AT(stmt_timeout_ms), "30000", 100, 3600000,
     "statement_timeout of every broker connection; the server cancels a slower statement. Held to four fifths "
     "of QUEEN_REQUEST_DEADLINE_MS when that is lower, so the server's cancel comes first."},
    {"QUEEN_PG_ACQUIRE_TIMEOUT_MS", "pg-acquire-timeout-ms", SET_INT, AT(pg_acquire_timeout_ms), "5000", 1, 600000,
     "How long a request waits for a free database connection before answering 503."},
    {"QUEEN_REQUEST_DEADLINE_MS", "request-deadline-ms", SET_INT, AT(request_deadline_ms), "10000", 100, 3600000,
     "Longest a request's database work may take, from its first statement (all its statements share it; "
     "embedded, each call's statement). Past it a statement not yet sent fails 503 db_unavailable (nothing "
     "was written: any call may be retried). For one sent, a tenth of it before, the server is asked to "
     "cancel it: a server that runs rolls it back at once (503 db_unavailable, the connection kept); one that "
     "does not answer by the deadline has the connection dropped and replaced, and the call fails 504 "
     "db_outcome_unknown (it may have committed: repeat only what is safe to repeat). "
     "Keepalives cannot see a stopped or frozen server and statement_timeout is enforced by that server, so "
     "without it a request waits as long as the server does. statement_timeout is held below it (8000 at the "
     "default), so a server that answers cancels a slow statement itself first, with a known outcome."},
    {"QUEEN_HTTP_THREADS", "http-threads", SET_INT, AT(http_threads), "0", 0, 1024,
     "HTTP event loops, one thread each: a loop serves its connections' requests and their database calls "
     "without blocking on either, so a few loops serve any number of connections. 0: one per CPU core."},
    {"QUEEN_PG_PIPELINE_DEPTH", "pg-pipeline-depth", SET_INT, AT(pg_pipeline_depth), "1", 1, 64,
     "Statements one database connection carries at once (libpq pipeline mode, each statement its own "
     "transaction): past 1, a connection takes the next statement before the last one's answer is back. "
     "Statements spread over idle connections first."},
    {"QUEEN_PG_WRITE_GROUP_WAIT_MS", "pg-write-group-wait-ms", SET_INT, AT(pg_write_group_wait_ms), "20", 0, 60000,
     "How long a one-op kv write waits for its event loop's write group in flight (a push: for the broker's "
     "push group in flight, whichever loop sent it; the loops take turns), "
     "even with a connection free: whatever waited then commits as the next group, one transaction and one WAL flush. Past the wait "
     "it goes on any free connection, so a write stuck on a row lock holds the others back this long at "
     "most. 0: no waiting, a write goes on the first free connection."},
    {"QUEEN_MAX_BODY_BYTES", "max-body-bytes", SET_INT, AT(max_body_bytes), "20971520", 1024, 1073741824,
     "Largest request body accepted; larger is 413. 20 MiB: the largest call the kv guards admit (256 ops of "
     "64 KiB values, with keys and JSON about 16.3 MiB) plus headroom; push batches beyond it should be split."},
    {"QUEEN_MAX_CONNECTIONS", "max-connections", SET_INT, AT(max_connections), "16384", 1, 1000000,
     "Open HTTP connections served at once. Past it a new connection's request is answered 503 with "
     "Retry-After: 1 and the connection closed (up to an eighth more plus 16 are accepted to say so; beyond "
     "those, connections wait in the listen backlog). 16384: room for 10,000 idle keep-alive connections "
     "with active clients and probes beside them; an idle connection costs the broker about 2.5 KiB (measured: "
     "10,000 added 24 MiB of RSS, bench/edge.sh), so a full cap is about 40 MiB. The broker raises its open-file limit to "
     "the hard limit at start and lowers this cap, with a warning, when that limit is too low for it."},
    {"QUEEN_REQUEST_READ_TIMEOUT_MS", "request-read-timeout-ms", SET_INT, AT(request_read_timeout_ms), "30000",
     100, 3600000,
     "Longest time from a request's first byte to its last (headers and body), however steadily the client "
     "trickles bytes; past it the request is answered 408 and the connection closed. Checked every tenth of "
     "the shorter of this and QUEEN_IDLE_TIMEOUT_MS (at most every second). 30000: a body of "
     "QUEEN_MAX_BODY_BYTES needs about 6 Mbit/s, far below a broker's clients' links, and a slow sender "
     "holds a connection no longer."},
    {"QUEEN_RESPONSE_WRITE_TIMEOUT_MS", "response-write-timeout-ms", SET_INT, AT(response_write_timeout_ms),
     "30000", 100, 3600000,
     "Longest time an answer may take to be written once it is ready; past it the connection is cut and the "
     "answer's memory returned (a client that stops reading holds nothing longer). 30000: a 20 MiB answer "
     "needs about 6 Mbit/s."},
    {"QUEEN_MAX_INFLIGHT_ANSWER_BYTES", "max-inflight-answer-bytes", SET_INT, AT(max_inflight_answer_bytes),
     "33554432", 1048576, 2147483647,
     "Answer bytes held at once for connections still writing them (an answer is held from its rendering until "
     "its last byte is written or its connection cut). An answer of more than 16 KiB that would pass it is "
     "answered 503 answer_budget_exhausted with Retry-After instead (one is always admitted when no other is "
     "held), so clients that stop reading cannot hold more than this. 32 MiB: 300 clients that never read a "
     "4 MB answer leave the broker's memory this much larger at most, and one answer of up to "
     "QUEEN_MAX_BODY_BYTES still goes out."},
    {"QUEEN_IDLE_TIMEOUT_MS", "idle-timeout-ms", SET_INT, AT(idle_timeout_ms), "65000", 100, 3600000,
     "A keep-alive connection with no request in progress is closed after this long. 65000: above the 60 s "
     "idle timeout of common load balancers and proxies, so they close first and never send a request on a "
     "connection the broker is closing."},
    {"QUEEN_DRAIN_QUIET_MS", "drain-quiet-ms", SET_INT, AT(drain_quiet_ms), "300", 0, 60000,
     "At SIGTERM, once no request is in flight, how long open keep-alive connections are still served "
     "before they are closed (at once when none is open). A request a client sent on an idle connection "
     "just before the close is answered, with Connection: close, instead of cut off unanswered."},
    {"QUEEN_MAX_POLL_TIMEOUT_MS", "max-poll-timeout-ms", SET_INT, AT(max_poll_timeout_ms), "300000", 1000,
     86400000,
     "Longest wait of a long poll (GET /api/v1/pop...?wait=true): a larger timeout is served as this one (it "
     "answers 204 then; clients poll again). The broker sees that a waiting client went away only when the "
     "poll ends, so this bounds how long such a poll holds its connection and its place among the waiters."},
    /* ---- per-tenant limits (abuse by one tenant's tokens) ---- */
    {"QUEEN_MAX_LONG_POLLS_PER_TENANT", "max-long-polls-per-tenant", SET_INT, AT(max_long_polls_per_tenant), "0", 0,
     1000000,
     "Long polls one tenant may have waiting at once on this broker; past it a long poll is answered at once 429 "
     "tenant_long_poll_limit with Retry-After: 1, so one tenant cannot hold every connection. 0: a quarter of "
     "QUEEN_MAX_CONNECTIONS (4096 at its default)."},
    {"QUEEN_MAX_QUEUES_PER_TENANT", "max-queues-per-tenant", SET_INT, AT(max_queues_per_tenant), "10000", 0,
     2147483647,
     "Queues one tenant may have; a push or configure that would create one more is 403 tenant_queue_limit and "
     "writes nothing. Counted only when a queue is about to be created. 0: no limit."},
    {"QUEEN_MAX_PARTITIONS_PER_TENANT", "max-partitions-per-tenant", SET_INT, AT(max_partitions_per_tenant), "1000000",
     0, 2147483647,
     "Partitions one tenant may have over all its queues; a push that would create more is 403 "
     "tenant_partition_limit and writes nothing. Counted only when a partition is about to be created. 0: no limit."},
    {"QUEEN_MAX_TRACES_PER_TENANT", "max-traces-per-tenant", SET_INT, AT(max_traces_per_tenant), "100000", 0,
     2147483647,
     "Trace events one tenant may have stored (they are kept QUEEN_TRACE_RETENTION_SECONDS); one more is 403 "
     "tenant_trace_limit, nothing recorded. 0: no limit."},
    {"QUEEN_MAX_TRACE_BYTES_PER_TENANT", "max-trace-bytes-per-tenant", SET_INT, AT(max_trace_bytes_per_tenant),
     "268435456", 0, 2147483647,
     "Bytes of trace data (as JSON text) one tenant may have stored; a trace that would pass it is 403 "
     "tenant_trace_limit, nothing recorded. 256 MiB: 4,096 traces of the largest size (64 KiB). 0: no limit."},
    {"QUEEN_MAX_INFLIGHT_BODY_BYTES", "max-inflight-body-bytes", SET_INT, AT(max_inflight_body_bytes),
     "268435456", 1024, 2147483647,
     "Body bytes buffered across all requests at once, plus 256 bytes per JSON value of each body being parsed "
     "(its tree); a body that would pass it is 503 with Retry-After (413 if it alone would). 256 MiB: a dozen "
     "largest bodies at once, a bounded share of a broker's memory."},
    {"QUEEN_MAX_BODY_VALUES", "max-body-values", SET_INT, AT(max_body_values), "500000", 16, 100000000,
     "JSON values (scalars, strings, member names, arrays, objects) one body may hold, counted before it is "
     "parsed; more is 413 body_too_many_values. A parsed value takes up to 256 bytes, 10-80 times its text: "
     "500000 keeps one body's tree under 128 MB. A 1 MB JSON document is about 100000 values, a 256-op kv "
     "call's own structure under 10000; larger push batches should be split."},
    {"QUEEN_MAX_BODY_DEPTH", "max-body-depth", SET_INT, AT(max_body_depth), "128", 2, 2048,
     "Deepest nesting of arrays and objects in a body; deeper is 400 body_too_deep. Parsers recurse once per "
     "level (jansson stops at 2048); 128 is far past real documents."},
    {"QUEEN_SWEEPER", "sweeper", SET_BOOL, AT(sweeper), "1", 0, 0,
     "Run the expiry sweeper and partition maintenance in this process (safe with many brokers)."},
    {"QUEEN_KV_EXPIRE_EVERY_MS", "kv-expire-every-ms", SET_INT, AT(kv_expire_every_ms), "1000", 10, 3600000,
     "Sweeper cadence: one pass over all 64 shards this often. Soak 2026-12-02: 250 did not clear a 1M-key expiry "
     "burst sooner (a pass then lasts seconds); see sql/kv_sweeper.sql."},
    {"QUEEN_KV_EXPIRE_BATCH", "kv-expire-batch", SET_INT, AT(kv_expire_batch), "1000", 1, 1000000,
     "Rows deleted per kv_expire_step_v1 call. Soak 2026-12-02: 10000 did not delete a 1M-key expiry burst "
     "faster; see sql/kv_sweeper.sql."},
    {"QUEEN_KV_EXPIRE_MAX_ROWS", "kv-expire-max-rows", SET_INT, AT(kv_expire_max_rows), "100000", 1, 100000000,
     "Most rows one sweeper pass deletes before yielding to the next cadence."},
    {"QUEEN_PARTITION_IDLE_SECONDS", "partition-idle-seconds", SET_INT, AT(partition_idle_seconds), "3600", 1,
     31536000, "An empty partition idle this long (no lease, no message) is reclaimed."},
    {"QUEEN_TRACE_RETENTION_SECONDS", "trace-retention-seconds", SET_INT, AT(trace_retention_seconds), "604800", 60,
     315360000, "Trace events (POST /api/v1/traces) older than this are deleted by the sweeper."},
    {"QUEEN_RETENTION_INTERVAL_MS", "retention-interval-ms", SET_INT, AT(retention_interval_ms), "10000", 100,
     86400000,
     "How often the sweeper runs queue maintenance: retention (retentionSeconds), idle-partition reclaim, "
     "maxWaitTimeSeconds expiry and trace retention. Queen MQ's RETENTION_INTERVAL."},
    {"QUEEN_TENANCY_HEADER", "tenancy-header", SET_BOOL, AT(tenancy_header), "0", 0, 0,
     "Read the tenant from the x-queen-tenant header. Needs QUEEN_TRUSTED_PROXY=1."},
    {"QUEEN_TRUSTED_PROXY", "trusted-proxy", SET_BOOL, AT(trusted_proxy), "0", 0, 0,
     "Declares that a proxy in front sets x-queen-tenant and strips clients' own."},
    {"QUEEN_KV_MAX_OPS_PER_CALL", "kv-max-ops-per-call", SET_INT, AT(kv_max_ops_per_call), "256", 1, 256,
     "Edge guard: kv ops per call (SQL refuses more than 256 anyway)."},
    {"QUEEN_KV_MAX_KEYS_PER_CALL", "kv-max-keys-per-call", SET_INT, AT(kv_max_keys_per_call), "1024", 1, 4096,
     "Edge guard: keys summed over a call's ops."},
    {"QUEEN_KV_MAX_VALUE_BYTES", "kv-max-value-bytes", SET_INT, AT(kv_max_value_bytes), "65536", 1, 65536,
     "Edge guard: bytes of one value's raw JSON."},
    {"QUEEN_KV_MAX_KEY_BYTES", "kv-max-key-bytes", SET_INT, AT(kv_max_key_bytes), "512", 1, 512,
     "Edge guard: bytes of one key."},
    {"QUEEN_KV_QUOTA_REFRESH_MS", "kv-quota-refresh-ms", SET_INT, AT(kv_quota_refresh_ms), "5000", 10, 3600000,
     "How often each broker re-reads kv quota and usage for the tenants it saw (quota is soft by this much)."},
    {"QUEEN_ACCESS_LOG", "access-log", SET_BOOL, AT(access_log), "1", 0, 0,
     "One line per request: method, route pattern, status, duration."},
    {"QUEEN_SLOW_REQUEST_MS", "slow-request-ms", SET_INT, AT(slow_request_ms), "1000", 0, 3600000,
     "A request answered this many ms or more after it arrived is logged at warn (method, route pattern, status, "
     "duration), access log or not; a long poll that waited for a push is not. 0: off."},
    {"QUEEN_AUTH", "auth", SET_STRING, AT(auth), "off", 0, 0,
     "off: no authentication (a warning at start when QUEEN_BIND is not loopback). jwt: every route but /health "
     "and the console's files needs Authorization: Bearer <JWT> (docs/auth.md)."},
    {"QUEEN_JWT_SECRET", "jwt-secret", SET_STRING, AT(jwt_secret), "", 0, 0,
     "HS256 shared secret (its bytes as given). Never logged."},
    {"QUEEN_JWT_PUBLIC_KEYS", "jwt-public-keys", SET_STRING, AT(jwt_public_keys), "", 0, 0,
     "Comma-separated PEM public key files (RSA of 2048 bits or more for RS256, P-256 for ES256, Ed25519 for "
     "EdDSA)."},
    {"QUEEN_JWT_JWKS", "jwt-jwks", SET_STRING, AT(jwt_jwks), "", 0, 0,
     "A JWKS: a file path or an https:// URL, re-read every QUEEN_JWT_JWKS_REFRESH_S and when a token names an "
     "unknown kid (at most every QUEEN_JWT_JWKS_MIN_REFETCH_S), on a thread of its own: a token whose key is not "
     "loaded yet is refused at once, never held while the set is fetched."},
    {"QUEEN_JWT_JWKS_CA", "jwt-jwks-ca", SET_STRING, AT(jwt_jwks_ca), "", 0, 0,
     "CA bundle (PEM) that the JWKS URL's certificate is checked against. Empty: the system's."},
    {"QUEEN_JWT_JWKS_REFRESH_S", "jwt-jwks-refresh-s", SET_INT, AT(jwt_jwks_refresh_s), "300", 10, 86400,
     "Age at which the JWKS is fetched again."},
    {"QUEEN_JWT_JWKS_MIN_REFETCH_S", "jwt-jwks-min-refetch-s", SET_INT, AT(jwt_jwks_min_refetch_s), "10", 1, 86400,
     "Fewest seconds between two JWKS fetches that tokens ask for (an unknown kid, a stale or missing set), so "
     "a stream of tokens naming made-up kids costs the issuer one fetch per interval."},
    {"QUEEN_JWT_ISSUER", "jwt-issuer", SET_STRING, AT(jwt_issuer), "", 0, 0,
     "Required iss claim. Empty: not checked."},
    {"QUEEN_JWT_AUDIENCE", "jwt-audience", SET_STRING, AT(jwt_audience), "", 0, 0,
     "Required aud claim (a string, or one element of an array). Empty: not checked."},
    {"QUEEN_JWT_LEEWAY_S", "jwt-leeway-s", SET_INT, AT(jwt_leeway_s), "30", 0, 600,
     "Clock skew allowed when checking exp and nbf."},
    {"QUEEN_JWT_TENANT_CLAIM", "jwt-tenant-claim", SET_STRING, AT(jwt_tenant_claim), "tenant", 0, 0,
     "The claim holding the token's tenant (a canonical uuid)."},
    {"QUEEN_JWT_DEFAULT_TENANT", "jwt-default-tenant", SET_BOOL, AT(jwt_default_tenant), "0", 0, 0,
     "A token without the tenant claim acts as the default tenant. Off: such a token is 403 auth_no_tenant."},
    {"QUEEN_TLS_CERT", "tls-cert", SET_STRING, AT(tls_cert), "", 0, 0,
     "PEM certificate (chain) file. With QUEEN_TLS_KEY the listener serves HTTPS only."},
    {"QUEEN_TLS_KEY", "tls-key", SET_STRING, AT(tls_key), "", 0, 0,
     "PEM private key file of QUEEN_TLS_CERT."},
    /* TLS 1.0/1.1, static-RSA key exchange (no forward secrecy) and CBC
     * suites are left out of the defaults; a deployment that must serve old
     * clients says so here. */
    {"QUEEN_TLS_MIN_VERSION", "tls-min-version", SET_STRING, AT(tls_min_version), "1.2", 0, 0,
     "Oldest TLS version the HTTPS listener accepts: 1.2 or 1.3 (TLS 1.0 and 1.1 are never offered)."},
    {"QUEEN_TLS_CIPHERS", "tls-ciphers", SET_STRING, AT(tls_ciphers), TLS_DEFAULT_CIPHERS, 0, 0,
     "TLS 1.2 suites of the HTTPS listener, in OpenSSL's cipher-list syntax (openssl ciphers). The default: "
     "ECDHE or DHE key exchange with AES-GCM or ChaCha20-Poly1305 only, no static-RSA or CBC suites. A list "
     "OpenSSL finds no suite in stops the broker. Replaces QUEEN_TLS_PRIORITIES (a GnuTLS string) of earlier "
     "versions, which now stops the broker with a message."},
    {"QUEEN_TLS_CIPHERSUITES", "tls-ciphersuites", SET_STRING, AT(tls_ciphersuites), TLS_DEFAULT_CIPHERSUITES, 0,
     0, "TLS 1.3 suites of the HTTPS listener (OpenSSL's -ciphersuites syntax; all are AEAD and forward-secret)."},
    /* Browsers (src/server/origin.h): what a page of another origin, or one
     * whose name was re-pointed at the broker, may not do. */
    {"QUEEN_ALLOWED_ORIGINS", "allowed-origins", SET_STRING, AT(allowed_origins), "", 0, 0,
     "Comma-separated origins (scheme://host[:port]) whose browser pages may call the broker besides its own "
     "(the scheme, Host and port a request names), e.g. the public origin of a proxy in front. * allows every "
     "origin. A request whose Origin is none of these is 403 origin_not_allowed."},
    {"QUEEN_ALLOWED_HOSTS", "allowed-hosts", SET_STRING, AT(allowed_hosts), "", 0, 0,
     "With QUEEN_AUTH=off, comma-separated names (host or host:port) the Host header may name besides an IP "
     "address, localhost and QUEEN_BIND; any other is 403 host_not_allowed (a page whose name was re-pointed at "
     "the broker). * allows every name. Not checked with QUEEN_AUTH=jwt."},
    {"QUEEN_ENCRYPTION_KEY", "encryption-key", SET_STRING, AT(encryption_key), "", 0, 0,
     "Payload encryption key for queues with encryptionEnabled (AES-256-GCM): 64 hex digits, or ID:HEX,ID:HEX,... "
     "where the first seals and every one opens (key rotation). Every broker of the database needs it. Never "
     "logged."},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static const setting *find_setting(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strcmp(settings[i].env, name) == 0 || strcmp(settings[i].flag, name) == 0)
            return &settings[i];
    return NULL;
}

/* A string setting owns its text once set; the defaults point at the table. */
static bool string_is_default(const setting *s, const char *v)
{
    return v == s->fallback;
}

static int parse_into(queen_config *cfg, const setting *s, const char *value, char *err, size_t errlen)
{
    void *field = (char *)cfg + s->offset;
    switch (s->type) {
    case SET_STRING: {
        char **slot = field;
        char *copy = strdup(value);
        if (copy == NULL) {
            snprintf(err, errlen, "%s: out of memory", s->env);
            return -1;
        }
        if (*slot != NULL && !string_is_default(s, *slot))
            free(*slot);
        *slot = copy;
        return 0;
    }
    case SET_INT: {
        char *end = NULL;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (*value == '\0' || errno != 0 || end == NULL || *end != '\0') {
            snprintf(err, errlen, "%s: '%s' is not an integer", s->env, value);
            return -1;
        }
        if (v < s->min || v > s->max) {
            snprintf(err, errlen, "%s: %ld is outside %ld..%ld", s->env, v, s->min, s->max);
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    case SET_BOOL: {
        bool v;
        if (strcmp(value, "1") == 0 || strcasecmp(value, "true") == 0 || strcasecmp(value, "on") == 0 ||
            strcasecmp(value, "yes") == 0)
            v = true;
        else if (strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0 || strcasecmp(value, "off") == 0 ||
                 strcasecmp(value, "no") == 0)
            v = false;
        else {
            snprintf(err, errlen, "%s: '%s' is not a boolean (1/0, true/false, on/off, yes/no)", s->env, value);
            return -1;
        }
        *(bool *)field = v;
        return 0;
    }
    case SET_LOG_LEVEL:
        for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
            if (strcasecmp(value, level_names[i]) == 0) {
                *(queen_log_level *)field = (queen_log_level)i;
                return 0;
            }
        }
        snprintf(err, errlen, "%s: '%s' is not one of error, warn, info, debug", s->env, value);
        return -1;
    }
    snprintf(err, errlen, "%s: unknown setting type", s->env);
    return -1;
}

void queen_config_defaults(queen_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char err[256];
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        if (s->type == SET_STRING) {
            /* Point at the table's text: no allocation for defaults. */
            *(const char **)((char *)cfg + s->offset) = s->fallback;
        } else if (parse_into(cfg, s, s->fallback, err, sizeof err) != 0) {
            /* A default that does not parse is a bug in the table. */
            fprintf(stderr, "queen: bad default: %s\n", err);
            abort();
        }
    }
}

/* QUEEN_PG_POOL=0: four connections per core keep every core busy while
 * some requests wait on the database; 8 is the floor for small machines. */
static int online_cpus(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

static int derived_pool_size(void)
{
    int cores = online_cpus();
    return cores * 4 > 8 ? cores * 4 : 8;
}

void queen_config_resolve(queen_config *cfg)
{
    char err[256];
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        void *field = (char *)cfg + s->offset;
        if (s->type == SET_STRING && *(char **)field == NULL) {
            *(const char **)field = s->fallback;
        } else if (s->type == SET_INT && s->min >= 1 && *(int *)field <= 0) {
            /* 0 is not a value of this setting: it means "not set". */
            if (parse_into(cfg, s, s->fallback, err, sizeof err) != 0) {
                fprintf(stderr, "queen: bad default: %s\n", err);
                abort();
            }
        }
    }
    /* The settings whose 0 is documented as derived, in dependency order. */
    if (cfg->pg_pool <= 0)
        cfg->pg_pool = derived_pool_size();
    if (cfg->http_threads <= 0)
        cfg->http_threads = online_cpus();
}

void queen_config_clear(queen_config *cfg)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        if (s->type != SET_STRING)
            continue;
        char **slot = (char **)((char *)cfg + s->offset);
        if (*slot != NULL && !string_is_default(s, *slot))
            free(*slot);
        *slot = NULL;
    }
}

queen_config *queen_config_new(void)
{
    queen_config *cfg = malloc(sizeof *cfg);
    if (cfg != NULL)
        queen_config_defaults(cfg);
    return cfg;
}

void queen_config_free(queen_config *cfg)
{
    if (cfg == NULL)
        return;
    queen_config_clear(cfg);
    free(cfg);
}

/* The field of setting name when it has type (SET_INT also takes a log
 * level: both read as an int), else NULL. */
static const void *typed_field(const queen_config *cfg, const char *name, setting_type type)
{
    const setting *s = cfg != NULL && name != NULL ? find_setting(name) : NULL;
    if (s == NULL || !(s->type == type || (type == SET_INT && s->type == SET_LOG_LEVEL)))
        return NULL;
    return (const char *)cfg + s->offset;
}

int queen_config_get_int(const queen_config *cfg, const char *name, int *out)
{
    const setting *s = cfg != NULL && name != NULL ? find_setting(name) : NULL;
    const void *f = typed_field(cfg, name, SET_INT);
    if (f == NULL)
        return -1;
    *out = s->type == SET_LOG_LEVEL ? (int)*(const queen_log_level *)f : *(const int *)f;
    return 0;
}

int queen_config_get_bool(const queen_config *cfg, const char *name, bool *out)
{
    const void *f = typed_field(cfg, name, SET_BOOL);
    if (f == NULL)
        return -1;
    *out = *(const bool *)f;
    return 0;
}

int queen_config_get_string(const queen_config *cfg, const char *name, const char **out)
{
    const void *f = typed_field(cfg, name, SET_STRING);
    if (f == NULL)
        return -1;
    *out = *(const char *const *)f;
    return 0;
}

int queen_config_set(queen_config *cfg, const char *name, const char *value, char *err, size_t errlen)
{
    const setting *s = find_setting(name);
    if (s == NULL) {
        snprintf(err, errlen, "unknown setting '%s'", name);
        return -1;
    }
    return parse_into(cfg, s, value, err, errlen);
}

int queen_config_from_env(queen_config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = getenv(settings[i].env);
        if (v != NULL && parse_into(cfg, &settings[i], v, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int queen_config_from_args(queen_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
    int i = 0;
    while (i < argc) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            snprintf(err, errlen, "unexpected argument '%s'", arg);
            return -1;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        char flag[64];
        const char *value;
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len >= sizeof flag) {
            snprintf(err, errlen, "unknown flag '%s'", arg);
            return -1;
        }
        memcpy(flag, name, len);
        flag[len] = '\0';
        const setting *s = find_setting(flag);
        if (s == NULL || strcmp(s->flag, flag) != 0) {
            snprintf(err, errlen, "unknown flag '--%s' (see --help)", flag);
            return -1;
        }
        if (eq != NULL) {
            value = eq + 1;
            i += 1;
        } else if (i + 1 < argc) {
            value = argv[i + 1];
            i += 2;
        } else {
            snprintf(err, errlen, "flag '--%s' needs a value", flag);
            return -1;
        }
        if (parse_into(cfg, s, value, err, errlen) != 0)
            return -1;
    }
    return i;
}

int queen_config_validate(const queen_config *cfg, char *err, size_t errlen)
{
    if (cfg->tenancy_header && !cfg->trusted_proxy) {
        /* Without a proxy that owns the header, any client could name any
         * tenant: refuse to start rather than trust it. */
        snprintf(err, errlen, "QUEEN_TENANCY_HEADER=1 needs QUEEN_TRUSTED_PROXY=1 (a proxy that sets the header)");
        return -1;
    }
    if (cfg->max_body_bytes > cfg->max_inflight_body_bytes) {
        /* Such a body could never be admitted: retrying would not help. */
        snprintf(err, errlen, "QUEEN_MAX_BODY_BYTES (%d) must not exceed QUEEN_MAX_INFLIGHT_BODY_BYTES (%d)",
                 cfg->max_body_bytes, cfg->max_inflight_body_bytes);
        return -1;
    }
    if (cfg->http_threads > cfg->max_connections) {
        /* The limit is split among the threads: each needs one at least. */
        snprintf(err, errlen, "QUEEN_HTTP_THREADS (%d) must not exceed QUEEN_MAX_CONNECTIONS (%d)",
                 cfg->http_threads, cfg->max_connections);
        return -1;
    }
    if (cfg->auth == NULL || (strcmp(cfg->auth, "off") != 0 && strcmp(cfg->auth, "jwt") != 0)) {
        snprintf(err, errlen, "QUEEN_AUTH: '%s' is not off or jwt", cfg->auth ? cfg->auth : "");
        return -1;
    }
    if (cfg->tls_min_version == NULL ||
        (strcmp(cfg->tls_min_version, "1.2") != 0 && strcmp(cfg->tls_min_version, "1.3") != 0)) {
        snprintf(err, errlen, "QUEEN_TLS_MIN_VERSION: '%s' is not 1.2 or 1.3",
                 cfg->tls_min_version ? cfg->tls_min_version : "");
        return -1;
    }
    if (getenv("QUEEN_TLS_PRIORITIES") != NULL) {
        /* A GnuTLS string no longer means anything: ignoring it would serve
         * other suites than the operator chose. */
        snprintf(err, errlen,
                 "QUEEN_TLS_PRIORITIES (a GnuTLS priority string) is gone: set QUEEN_TLS_MIN_VERSION, "
                 "QUEEN_TLS_CIPHERS and QUEEN_TLS_CIPHERSUITES (OpenSSL syntax) instead");
        return -1;
    }
    if ((cfg->tls_cert == NULL || cfg->tls_cert[0] == '\0') != (cfg->tls_key == NULL || cfg->tls_key[0] == '\0')) {
        /* Half a TLS setup must not silently serve plain HTTP. */
        snprintf(err, errlen, "QUEEN_TLS_CERT and QUEEN_TLS_KEY go together: set both or neither");
        return -1;
    }
    if (cfg->bind == NULL || cfg->bind[0] == '\0') {
        snprintf(err, errlen, "QUEEN_BIND: must not be empty");
        return -1;
    }
    return 0;
}

static void default_text(const setting *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->fallback[0] ? s->fallback : "(empty)");
}

void queen_config_print_help(FILE *out)
{
    fprintf(out, "Settings (environment variable, or --flag; flags win):\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        char def[256];
        default_text(&settings[i], def, sizeof def);
        fprintf(out, "  --%-26s %s\n      %s (default %s)\n", settings[i].flag, settings[i].env, settings[i].doc, def);
    }
}

void queen_config_print_markdown(FILE *out)
{
    fprintf(out, "| variable | flag | default | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        char def[256];
        default_text(&settings[i], def, sizeof def);
        fprintf(out, "| `%s` | `--%s` | `%s` | %s |\n", settings[i].env, settings[i].flag, def, settings[i].doc);
    }
}

void queen_config_session_settings(const queen_config *cfg, char *out, size_t n)
{
    snprintf(out, n,
             "-c queen.max_queues_per_tenant=%d -c queen.max_partitions_per_tenant=%d "
             "-c queen.max_traces_per_tenant=%d -c queen.max_trace_bytes_per_tenant=%d",
             cfg->max_queues_per_tenant, cfg->max_partitions_per_tenant, cfg->max_traces_per_tenant,
             cfg->max_trace_bytes_per_tenant);
}
