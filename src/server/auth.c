/* auth: bearer tokens, roles, scopes and the token's tenant (see auth.h). */
#include "auth.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "body.h"
#include "errors.h"
#include "jwt.h"
#include "queen_runtime.h"

/* ---- failures, by reason ------------------------------------------------------- */

typedef enum failure {
    F_MISSING,
    F_BAD_SCOPE, /* 401 like the token faults: the claim is not one we can honour as written */
    F_TOKEN, /* + jwt_fault: the verifier's reasons follow */
    F_NO_ROLE = F_TOKEN + JWT_FAULT_COUNT,
    F_ROLE,
    F_SCOPE,
    F_NO_TENANT,
    F_BAD_TENANT,
    F_TENANT_HEADER,
    F_TENANT_MISMATCH,
    F_BAD_SUBJECT,
    F_COUNT,
} failure;

static const char *failure_reason(failure f)
{
    switch (f) {
    case F_MISSING:
        return "auth_missing_token";
    case F_BAD_SCOPE:
        return "token_bad_scope";
    case F_NO_ROLE:
        return "auth_no_role";
    case F_ROLE:
        return "auth_forbidden_role";
    case F_SCOPE:
        return "auth_forbidden_scope";
    case F_NO_TENANT:
        return "auth_no_tenant";
    case F_BAD_TENANT:
        return "auth_bad_tenant";
    case F_TENANT_HEADER:
        return "auth_tenant_header";
    case F_TENANT_MISMATCH:
        return "auth_tenant_mismatch";
    case F_BAD_SUBJECT:
        return "auth_bad_subject";
    default:
        return f > F_TOKEN && f < F_NO_ROLE ? jwt_fault_reason((jwt_fault)(f - F_TOKEN)) : NULL;
    }
}

static atomic_ulong failures[F_COUNT];

void auth_metrics_prometheus(FILE *out)
{
    fputs("# HELP queen_auth_failures_total Requests refused by authentication (401) or authorisation (403), by "
          "reason.\n# TYPE queen_auth_failures_total counter\n",
          out);
    for (int f = 0; f < F_COUNT; f++) {
        const char *reason = failure_reason((failure)f);
        if (reason != NULL)
            fprintf(out, "queen_auth_failures_total{reason=\"%s\"} %lu\n", reason, atomic_load(&failures[f]));
    }
}

json_t *auth_metrics_json(void)
{
    json_t *o = json_object();
    for (int f = 0; o != NULL && f < F_COUNT; f++) {
        const char *reason = failure_reason((failure)f);
        if (reason != NULL)
            json_object_set_new(o, reason, json_integer((json_int_t)atomic_load(&failures[f])));
    }
    return o;
}

/* ---- state ----------------------------------------------------------------------- */

struct auth_state {
    jwt_keyring *keys;
    jwt_rules rules;
};

bool auth_enabled(const server *srv)
{
    return srv->auth != NULL;
}

int auth_start(server *srv)
{
    const queen_config *cfg = srv->cfg;
    srv->auth = NULL;
    if (strcmp(cfg->auth, "jwt") != 0) {
        struct in_addr a;
        if (inet_pton(AF_INET, cfg->bind, &a) == 1 && (ntohl(a.s_addr) >> 24) != 127)
            log_warn("auth: QUEEN_AUTH=off on %s, which is not a loopback address: anyone who reaches port %d can "
                     "read and write every tenant's data",
                     cfg->bind, cfg->port);
        return 0;
    }
    struct auth_state *a = calloc(1, sizeof *a);
    if (a == NULL)
        return -1;
    char err[256] = "";
    a->keys = jwt_keyring_new(cfg->jwt_secret, cfg->jwt_public_keys, cfg->jwt_jwks, cfg->jwt_jwks_ca,
                              cfg->jwt_jwks_refresh_s, err, sizeof err);
    if (a->keys == NULL) {
        log_error("auth: %s", err);
        free(a);
        return -1;
    }
    jwt_keyring_set_min_refetch_s(a->keys, cfg->jwt_jwks_min_refetch_s);
    a->rules = (jwt_rules){.issuer = cfg->jwt_issuer, .audience = cfg->jwt_audience, .leeway_s = cfg->jwt_leeway_s};
    srv->auth = a;
    log_info("auth: JWT required on every route but /health and the console's files (keys:%s%s%s)", cfg->jwt_secret[0] ? " HS256 secret" : "",
             cfg->jwt_public_keys[0] ? " PEM public keys" : "", cfg->jwt_jwks[0] ? " JWKS" : "");
    return 0;
}

void auth_stop(server *srv)
{
    if (srv->auth == NULL)
        return;
    jwt_keyring_free(srv->auth->keys);
    free(srv->auth);
    srv->auth = NULL;
}

/* ---- refusals ----------------------------------------------------------------------- */

static bool refuse(http_response *res, const route *r, failure f, const char *detail)
{
    atomic_fetch_add(&failures[f], 1);
    bool unauthenticated = f < F_NO_ROLE;
    http_refuse(res, r->family, unauthenticated ? QUEEN_ERR_UNAUTHORIZED : QUEEN_ERR_FORBIDDEN, failure_reason(f),
                detail);
    /* RFC 6750 3: the challenge names what was wrong, never the token. */
    res->www_authenticate = f == F_MISSING        ? "Bearer realm=\"queen\""
                            : unauthenticated     ? "Bearer realm=\"queen\", error=\"invalid_token\""
                            : f == F_ROLE || f == F_SCOPE ? "Bearer realm=\"queen\", error=\"insufficient_scope\""
                                                          : NULL;
    return true;
}

static const char *fault_detail(jwt_fault f)
{
    switch (f) {
    case JWT_UNSUPPORTED_ALG:
        return "the token's alg is not one of HS256, RS256, ES256, EdDSA (or it has crit extensions)";
    case JWT_NO_KEY:
        return "no configured key can verify this token (its alg or kid names none)";
    case JWT_BAD_SIGNATURE:
        return "the token's signature does not verify";
    case JWT_EXPIRED:
        return "the token has expired (exp)";
    case JWT_NOT_YET_VALID:
        return "the token is not valid yet (nbf)";
    case JWT_BAD_ISSUER:
        return "the token's iss is not the configured issuer";
    case JWT_BAD_AUDIENCE:
        return "the token's aud does not name the configured audience";
    default:
        return "the bearer token is not a JWT: three base64url parts of JSON objects, at most 8192 bytes";
    }
}

/* ---- roles and scopes --------------------------------------------------------------- */

static auth_role role_named(const char *s)
{
    if (s == NULL)
        return ROLE_NONE;
    if (strcmp(s, "operator") == 0)
        return ROLE_OPERATOR;
    if (strcmp(s, "admin") == 0)
        return ROLE_ADMIN;
    if (strcmp(s, "write") == 0)
        return ROLE_WRITE;
    if (strcmp(s, "read") == 0)
        return ROLE_READ;
    return ROLE_NONE;
}

/* The highest role the token names: "role" as a string or an array of them
 * ("roles" too); names we do not know grant nothing. */
static auth_role token_role(json_t *claims)
{
    auth_role best = ROLE_NONE;
    static const char *const names[] = {"role", "roles"};
    for (size_t n = 0; n < 2; n++) {
        json_t *v = json_object_get(claims, names[n]);
        if (json_is_string(v) && role_named(json_string_value(v)) > best)
            best = role_named(json_string_value(v));
        size_t i;
        json_t *one;
        json_array_foreach(v, i, one)
        {
            if (role_named(json_string_value(one)) > best)
                best = role_named(json_string_value(one));
        }
    }
    return best;
}

/* One scope: family "kv" or "queue", a pattern (a trailing '*' makes it a
 * prefix; "*" alone is everything) and read or write (write covers read).
 * A kv pattern is matched against "namespace/key". */
#define MAX_SCOPES 32
typedef struct scope {
    bool kv;
    char pattern[256];
    access_level access;
} scope;

typedef struct scopes {
    bool narrowed; /* the token carries at least one kv: or queue: scope */
    size_t n;
    scope s[MAX_SCOPES];
} scopes;

static bool word_is(const char *text, size_t len, const char *word)
{
    return len == strlen(word) && strncasecmp(text, word, len) == 0;
}

/* One entry of the scope claim; false when it is ours but does not parse.
 * Ours is decided loosely and parsed strictly: an entry whose family (the
 * text before its first ':', or all of it, blanks around it ignored) is kv
 * or queue in any case is ours, and must then be exactly
 * kv:<pattern>:<read|write> or queue:<pattern>:<read|write>, lower case, no
 * blank or control byte anywhere, the pattern not empty. "Queue:orders:read"
 * or " queue:orders:read" was meant as a narrowing; ignoring it would leave
 * the token its whole role, so the token is refused instead (never
 * widened). Everything else (openid, profile, read:messages, a URL) is
 * another service's scope: ignored, as RFC 8693 lets a claim carry scopes
 * for many audiences. Control bytes are refused in any entry, ours or not:
 * RFC 6749 3.3 allows none, and a tab would hide a scope of ours from the
 * space split. */
static bool scope_add(scopes *sc, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            return false;
    const char *colon = memchr(text, ':', len);
    const char *fam = text, *fam_end = colon ? colon : text + len;
    while (fam < fam_end && *fam == ' ')
        fam++;
    while (fam_end > fam && fam_end[-1] == ' ')
        fam_end--;
    bool kv = word_is(fam, (size_t)(fam_end - fam), "kv"), queue = word_is(fam, (size_t)(fam_end - fam), "queue");
    if (!kv && !queue)
        return true; /* another service's scope: not ours */
    sc->narrowed = true;
    if (memchr(text, ' ', len) != NULL || strncmp(text, kv ? "kv:" : "queue:", kv ? 3 : 6) != 0)
        return false;
    const char *start = text + (kv ? 3 : 6), *end = text + len, *last = NULL;
    for (const char *p = start; p < end; p++)
        if (*p == ':')
            last = p;
    if (last == NULL || last == start || (size_t)(last - start) >= sizeof sc->s[0].pattern)
        return false;
    access_level a;
    if (word_is(last + 1, (size_t)(end - last - 1), "read") && strncmp(last + 1, "read", 4) == 0)
        a = ACCESS_READ;
    else if (word_is(last + 1, (size_t)(end - last - 1), "write") && strncmp(last + 1, "write", 5) == 0)
        a = ACCESS_WRITE;
    else
        return false;
    if (sc->n == MAX_SCOPES)
        return true; /* narrowed further, never widened */
    scope *s = &sc->s[sc->n++];
    memset(s, 0, sizeof *s);
    s->kv = kv;
    s->access = a;
    memcpy(s->pattern, start, (size_t)(last - start));
    return true;
}

/* "scope" as a space-separated string (RFC 8693) or "scope"/"scopes" as an
 * array of strings. false when an entry of ours does not parse or the claim
 * is of another JSON type (a claim we cannot read could be a narrowing). */
static bool token_scopes(json_t *claims, scopes *sc)
{
    memset(sc, 0, sizeof *sc);
    static const char *const names[] = {"scope", "scopes"};
    for (size_t n = 0; n < 2; n++) {
        json_t *v = json_object_get(claims, names[n]);
        if (v == NULL || json_is_null(v))
            continue;
        if (json_is_string(v)) {
            const char *s = json_string_value(v), *end = s + json_string_length(v);
            while (s < end) {
                const char *sp = memchr(s, ' ', (size_t)(end - s));
                size_t len = sp ? (size_t)(sp - s) : (size_t)(end - s);
                if (len > 0 && !scope_add(sc, s, len))
                    return false;
                s += len;
                while (s < end && *s == ' ')
                    s++;
            }
            continue;
        }
        if (!json_is_array(v))
            return false;
        size_t i;
        json_t *one;
        json_array_foreach(v, i, one)
        {
            if (!json_is_string(one) || !scope_add(sc, json_string_value(one), json_string_length(one)))
                return false;
        }
    }
    return true;
}

/* Whether scope pattern p covers the resource name (as_prefix: the name is
 * itself a prefix, e.g. a getPrefix, so only a prefix pattern that it
 * extends covers it). */
static bool pattern_covers(const char *p, const char *name, size_t len, bool as_prefix)
{
    size_t plen = strlen(p);
    if (plen > 0 && p[plen - 1] == '*')
        return len >= plen - 1 && memcmp(name, p, plen - 1) == 0;
    return !as_prefix && len == plen && memcmp(name, p, len) == 0;
}

/* Whether some scope of the token gives access a on the name. */
static bool scopes_cover(const scopes *sc, bool kv, const char *name, size_t len, bool as_prefix, access_level a)
{
    for (size_t i = 0; i < sc->n; i++) {
        const scope *s = &sc->s[i];
        if (s->kv == kv && s->access >= a && pattern_covers(s->pattern, name, len, as_prefix))
            return true;
    }
    return false;
}

typedef struct judge {
    const scopes *sc;
    auth_role role;
    auth_role needed; /* the highest access the request asked for */
    bool denied;      /* a resource no scope covers */
    char what[160];   /* the first one denied, for the detail */
    json_t *refs;     /* partitions and leases whose queue the database must name (auth_settle_refused) */
} judge;

static void need(judge *j, bool kv, const char *name, size_t len, bool as_prefix, access_level a)
{
    if ((auth_role)a > j->needed)
        j->needed = (auth_role)a;
    if (!j->sc->narrowed || j->denied)
        return;
    if (scopes_cover(j->sc, kv, name, len, as_prefix, a))
        return;
    j->denied = true;
    snprintf(j->what, sizeof j->what, "%s %s '%.*s%s'", a == ACCESS_WRITE ? "write" : "read",
             kv ? "kv" : "queue", (int)(len > 100 ? 100 : len), name, as_prefix ? "*" : "");
}

/* "ns/key" for a kv scope check; len 0 when either is not a clean string. */
static size_t kv_name(char *buf, size_t cap, const char *ns, size_t ns_len, const char *key, size_t key_len)
{
    if (ns == NULL || key == NULL || memchr(ns, '\0', ns_len) || memchr(key, '\0', key_len) ||
        ns_len + key_len + 2 > cap)
        return 0;
    memcpy(buf, ns, ns_len);
    buf[ns_len] = '/';
    memcpy(buf + ns_len + 1, key, key_len);
    buf[ns_len + 1 + key_len] = '\0';
    return ns_len + 1 + key_len;
}

static const char *str_member(json_t *o, const char *name, size_t *len)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_string(v))
        return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

#define KV_NAME_MAX 1200

static void need_kv(judge *j, json_t *op, access_level a)
{
    size_t ns_len = 0, len = 0;
    const char *ns = str_member(op, "ns", &ns_len);
    char name[KV_NAME_MAX];
    const char *key = str_member(op, "key", &len);
    if (key != NULL) {
        size_t n = kv_name(name, sizeof name, ns, ns_len, key, len);
        need(j, true, name, n, false, a);
    }
    json_t *keys = json_object_get(op, "keys");
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        size_t n = json_is_string(k) ? kv_name(name, sizeof name, ns, ns_len, json_string_value(k),
                                               json_string_length(k))
                                     : 0;
        need(j, true, name, n, false, a);
    }
    const char *prefix = str_member(op, "prefix", &len);
    if (prefix != NULL || (key == NULL && keys == NULL)) {
        /* A prefix read, or an op that names no key (refused later by the
         * guards): the whole prefix, or the whole namespace. */
        size_t n = kv_name(name, sizeof name, ns, ns_len, prefix ? prefix : "", prefix ? len : 0);
        need(j, true, name, n, true, a);
    }
}

static access_level kv_op_access(json_t *op)
{
    const char *kind = json_string_value(json_object_get(op, "op"));
    if (kind != NULL && (strcmp(kind, "get") == 0 || strcmp(kind, "getMany") == 0 || strcmp(kind, "getPrefix") == 0))
        return ACCESS_READ;
    return ACCESS_WRITE; /* put, incr, delete, ... and anything unknown */
}

static void need_kv_ops(judge *j, json_t *ops)
{
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op)
    {
        need_kv(j, op, kv_op_access(op));
    }
}

static void need_queue_items(judge *j, json_t *items)
{
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        size_t len = 0;
        const char *q = str_member(item, "queue", &len);
        need(j, false, q ? q : "", q && !memchr(q, '\0', len) ? len : 0, false, ACCESS_WRITE);
    }
}

/* An ack, a trace, a lease extension names a partition or a lease, not a
 * queue, and leaseId is optional on an ack: which queue it touches only the
 * database knows. For a token narrowed by queue scopes each such id is kept
 * (kind "partitionId" or "leaseId", the value as sent, whatever its JSON
 * type) and judged on the request's fiber before its handler runs
 * (auth_settle_refused): read on the queue it resolves to. A token whose
 * scopes cover every queue, or that has none, needs no lookup. */
static void need_ref(judge *j, const char *kind, json_t *id)
{
    if ((auth_role)ACCESS_READ > j->needed)
        j->needed = (auth_role)ACCESS_READ;
    if (!j->sc->narrowed || scopes_cover(j->sc, false, "", 0, true, ACCESS_READ))
        return;
    if ((j->refs == NULL && (j->refs = json_array()) == NULL) ||
        json_array_append_new(j->refs, json_pack("{s:O?}", kind, id)) != 0) {
        j->denied = true; /* out of memory: refused, never waved through */
        snprintf(j->what, sizeof j->what, "an unchecked %s", kind);
    }
}

static void need_acks(judge *j, json_t *acks)
{
    if (!json_is_array(acks)) { /* refused by its handler; judged all the same, never waved through */
        need_ref(j, "partitionId", NULL);
        return;
    }
    size_t i;
    json_t *ack;
    json_array_foreach(acks, i, ack)
    {
        need_ref(j, "partitionId", json_object_get(ack, "partitionId"));
    }
}

/* Walks what the request names. A body that does not parse names nothing:
 * its handler refuses it (400) before doing anything. */
static void judge_request(judge *j, const route *p, char *const *params, size_t nparams, const char *body,
                          size_t body_len)
{
    json_t *doc = NULL;
    if (p->resource == RES_KV_BATCH || p->resource == RES_KV_LIST || p->resource == RES_QUEUE_PUSH ||
        p->resource == RES_QUEUE_BODY || p->resource == RES_TRANSACTION || p->resource == RES_PARTITION ||
        p->resource == RES_PARTITIONS || p->resource == RES_STREAM_QUERY || p->resource == RES_STREAM_CYCLE ||
        p->resource == RES_STREAM_STATE) {
        json_error_t jerr;
        doc = body != NULL && body_len > 0 ? json_loadb(body, body_len, BODY_JSON_FLAGS, &jerr) : NULL;
    }
    char name[KV_NAME_MAX];
    size_t len = 0;
    switch (p->resource) {
    case RES_NONE:
        break;
    case RES_KV_PATH:
        if (nparams >= 2)
            need(j, true, name, kv_name(name, sizeof name, params[0], strlen(params[0]), params[1], strlen(params[1])),
                 false, p->access);
        break;
    case RES_KV_BATCH:
        need_kv_ops(j, json_is_array(doc) ? doc : json_object_get(doc, "operations"));
        break;
    case RES_KV_LIST: {
        size_t ns_len = 0;
        const char *ns = str_member(doc, "namespace", &ns_len), *prefix = str_member(doc, "prefix", &len);
        need(j, true, name, kv_name(name, sizeof name, ns, ns_len, prefix ? prefix : "", prefix ? len : 0), true,
             ACCESS_READ);
        break;
    }
    case RES_KV_ALL:
        need(j, true, "", 0, true, ACCESS_READ);
        break;
    case RES_QUEUE_PATH:
        if (nparams >= 1)
            need(j, false, params[0], strlen(params[0]), false, p->access);
        break;
    case RES_QUEUE_PATH2:
        if (nparams >= 2)
            need(j, false, params[1], strlen(params[1]), false, p->access);
        break;
    case RES_QUEUE_PUSH:
        need_queue_items(j, json_object_get(doc, "items"));
        break;
    case RES_QUEUE_BODY: {
        const char *q = str_member(doc, "queue", &len);
        need(j, false, q ? q : "", q && !memchr(q, '\0', len) ? len : 0, false, p->access);
        break;
    }
    case RES_QUEUE_ALL:
        need(j, false, "", 0, true, p->access);
        break;
    case RES_PARTITION:
        if (!json_is_object(doc))
            need_ref(j, "partitionId", NULL);
        else
            need_ref(j, "partitionId", json_object_get(doc, "partitionId"));
        break;
    case RES_PARTITIONS:
        need_acks(j, json_object_get(doc, "acknowledgments"));
        break;
    case RES_LEASE_PATH:
        if (nparams >= 1) {
            json_t *lease = json_string(params[0]); /* NULL when not UTF-8: judged as no lease */
            need_ref(j, "leaseId", lease);
            json_decref(lease);
        }
        break;
    case RES_TRANSACTION: {
        json_t *ops = json_object_get(doc, "operations");
        size_t i;
        json_t *op;
        json_array_foreach(ops, i, op)
        {
            const char *type = json_string_value(json_object_get(op, "type"));
            if (type != NULL && strcmp(type, "push") == 0)
                need_queue_items(j, json_object_get(op, "items"));
            else /* an ack, or refused by the wire */
                need_ref(j, "partitionId", json_object_get(op, "partitionId"));
        }
        need_kv_ops(j, json_object_get(doc, "kv"));
        json_t *leases = json_object_get(doc, "requiredLeases");
        if (json_is_array(leases)) {
            json_t *lease;
            json_array_foreach(leases, i, lease)
            {
                need_ref(j, "leaseId", lease);
            }
        } else if (leases != NULL && !json_is_null(leases)) {
            need_ref(j, "leaseId", NULL);
        }
        if (doc == NULL) /* refused by its handler; judged all the same */
            need_ref(j, "partitionId", NULL);
        break;
    }
    case RES_STREAM_QUERY: {
        /* A query reads its source and writes its sink. */
        const char *q = str_member(doc, "source_queue", &len);
        need(j, false, q ? q : "", q && !memchr(q, '\0', len) ? len : 0, false, ACCESS_READ);
        q = str_member(doc, "sink_queue", &len);
        if (q != NULL && len > 0)
            need(j, false, q, !memchr(q, '\0', len) ? len : 0, false, ACCESS_WRITE);
        break;
    }
    case RES_STREAM_CYCLE:
        /* The source partition's queue (read: a cycle acks it and writes
         * its state) and every sink's (write). */
        need_ref(j, "partitionId", json_is_object(doc) ? json_object_get(doc, "partition_id") : NULL);
        need_queue_items(j, json_object_get(doc, "push_items"));
        break;
    case RES_STREAM_STATE:
        /* State is kept per source partition (sql/streams.sql): read on its queue. */
        need_ref(j, "partitionId", json_is_object(doc) ? json_object_get(doc, "partition_id") : NULL);
        break;
    case RES_BROKER:
        /* Scopes name a tenant's keys and queues: a token narrowed to some
         * of them is no grant over the whole broker, whatever its role. */
        if (j->sc->narrowed && !j->denied) {
            j->denied = true;
            snprintf(j->what, sizeof j->what, "a broker-wide call");
        }
        break;
    }
    json_decref(doc);
}

/* ---- the hook ----------------------------------------------------------------------- */

/* The token's tenant into tenant; NULL or the failure. */
static bool resolve_tenant(server *srv, json_t *claims, bool header_sent, char tenant[QUEEN_TENANT_LEN + 1],
                           failure *why)
{
    const queen_config *cfg = srv->cfg;
    json_t *claim = json_object_get(claims, cfg->jwt_tenant_claim);
    if (header_sent && !cfg->tenancy_header) {
        /* With tokens, the client does not pick its tenant by header: only a
         * proxy the operator declared (QUEEN_TENANCY_HEADER) may. */
        *why = F_TENANT_HEADER;
        return false;
    }
    if (claim == NULL) {
        if (header_sent) /* the trusted proxy's word, already in tenant */
            return true;
        if (!cfg->jwt_default_tenant) {
            *why = F_NO_TENANT;
            return false;
        }
        memcpy(tenant, QUEEN_DEFAULT_TENANT, QUEEN_TENANT_LEN + 1);
        return true;
    }
    char canon[QUEEN_TENANT_LEN + 1];
    const char *s = json_string_value(claim);
    if (s == NULL || s[0] == '\0' || strlen(s) != json_string_length(claim) || queen_tenant_canonical(s, canon) != 0) {
        *why = F_BAD_TENANT;
        return false;
    }
    if (header_sent && strcmp(canon, tenant) != 0) {
        *why = F_TENANT_MISMATCH;
        return false;
    }
    memcpy(tenant, canon, sizeof canon);
    return true;
}

/* A narrowed token's partitions and leases, judged on the request's fiber
 * (auth.h). */
struct auth_pending {
    json_t *refs; /* [{"partitionId" | "leaseId": id as sent}] */
    scopes sc;
};

void auth_pending_free(auth_pending *p)
{
    if (p == NULL)
        return;
    json_decref(p->refs);
    free(p);
}

bool auth_settle_refused(server *srv, auth_pending *p, const route *r, const char *tenant, http_response *res)
{
    char *refs = json_dumps(p->refs, JSON_COMPACT), *names = NULL;
    queen_error err;
    bool refused = false;
    if (refs == NULL) {
        refused = true;
        http_refuse(res, r->family, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    } else if (queen_queues_of(srv->engine, tenant, refs, &names, &err) != 0) {
        refused = true;
        http_engine_error(res, r->family, &err);
    } else {
        json_t *got = json_loads(names, 0, NULL);
        size_t i;
        json_t *ref;
        json_array_foreach(p->refs, i, ref)
        {
            json_t *name = json_array_get(got, i);
            if (json_is_string(name) &&
                scopes_cover(&p->sc, false, json_string_value(name), json_string_length(name), false, ACCESS_READ))
                continue;
            /* Unknown, another tenant's or outside the scopes: one answer for
             * all three, naming only what the client sent, so a token learns
             * nothing of queues it may not see. */
            const char *kind = json_object_iter_key(json_object_iter(ref));
            const char *id = json_string_value(json_object_iter_value(json_object_iter(ref)));
            char detail[256];
            snprintf(detail, sizeof detail, "the token's scopes do not allow read on the queue of %s '%.64s'",
                     kind ? kind : "partitionId", id ? id : "(not a string)");
            refused = refuse(res, r, F_SCOPE, detail);
            break;
        }
        json_decref(got);
    }
    free(refs);
    free(names);
    auth_pending_free(p);
    return refused;
}

bool auth_refused(server *srv, struct conn *c, const route *r, char *const *params, size_t nparams,
                  const char *body, size_t body_len, char tenant[QUEEN_TENANT_LEN + 1], auth_identity *who,
                  http_response *res)
{
    who->authenticated = false;
    who->subject[0] = '\0';
    who->pending = NULL;
    const route *p = r; /* the route's row says its role, resources and access (routes.c) */
    if (srv->auth == NULL || p->role == ROLE_NONE)
        return false;
    const char *value;
    size_t len;
    unsigned count = http_header_first(c, "Authorization", &value, &len);
    if (count == 0)
        return refuse(res, r, F_MISSING, "this route needs Authorization: Bearer <token>");
    if (count > 1 || len < 7 || strncasecmp(value, "Bearer ", 7) != 0)
        return refuse(res, r, F_TOKEN + JWT_MALFORMED,
                      "send exactly one Authorization header of the form: Bearer <token>");
    const char *token = value + 7;
    size_t token_len = len - 7;
    while (token_len > 0 && *token == ' ') {
        token++;
        token_len--;
    }
    json_t *claims = NULL;
    jwt_fault f = jwt_verify(srv->auth->keys, token, token_len, &srv->auth->rules, time(NULL), &claims);
    if (f != JWT_OK)
        return refuse(res, r, F_TOKEN + f, fault_detail(f));
    bool refused = false;
    json_t *sub = json_object_get(claims, "sub");
    auth_role role = token_role(claims);
    scopes sc;
    if (!token_scopes(claims, &sc)) {
        refused = refuse(res, r, F_BAD_SCOPE,
                         "the token's scope claim has an entry that looks like kv: or queue: but is not exactly "
                         "kv:<pattern>:<read|write> or queue:<pattern>:<read|write>, or is not a string or array "
                         "of strings");
    } else if (sub != NULL && (!json_is_string(sub) || json_string_length(sub) > AUTH_SUBJECT_MAX ||
                               strlen(json_string_value(sub)) != json_string_length(sub))) {
        refused = refuse(res, r, F_BAD_SUBJECT, "the token's sub must be a string of at most 256 bytes");
    } else if (role == ROLE_NONE) {
        refused = refuse(res, r, F_NO_ROLE, "the token names no role (role: read, write, admin or operator)");
    } else {
        failure why = F_COUNT;
        if (r->family != FAMILY_OPS && !resolve_tenant(srv, claims, http_header_first(c, TENANT_HEADER, NULL, NULL) > 0, tenant, &why)) {
            refused = refuse(res, r, why,
                             why == F_NO_TENANT       ? "the token has no tenant claim (QUEEN_JWT_TENANT_CLAIM)"
                             : why == F_BAD_TENANT    ? "the token's tenant claim is not a canonical uuid"
                             : why == F_TENANT_HEADER ? "x-queen-tenant is not accepted: the token names the tenant"
                                                      : "x-queen-tenant and the token's tenant differ");
        } else {
            judge j = {.sc = &sc, .role = role, .needed = p->role};
            judge_request(&j, p, params, nparams, body, body_len);
            char detail[256];
            if (role < j.needed) {
                snprintf(detail, sizeof detail, "this call needs the %s role",
                         j.needed == ROLE_OPERATOR ? "operator"
                         : j.needed == ROLE_ADMIN  ? "admin"
                         : j.needed == ROLE_WRITE  ? "write"
                                                   : "read");
                refused = refuse(res, r, F_ROLE, detail);
            } else if (j.denied) {
                snprintf(detail, sizeof detail, "the token's scopes do not allow %s", j.what);
                refused = refuse(res, r, F_SCOPE, detail);
            } else if (j.refs != NULL) {
                auth_pending *pend = malloc(sizeof *pend);
                if (pend == NULL) {
                    http_refuse(res, r->family, QUEEN_ERR_INTERNAL, "out_of_memory", "");
                    refused = true;
                } else {
                    pend->refs = j.refs;
                    j.refs = NULL;
                    pend->sc = sc;
                    who->pending = pend;
                }
            }
            json_decref(j.refs);
        }
    }
    if (!refused) {
        who->authenticated = true;
        if (json_is_string(sub))
            memcpy(who->subject, json_string_value(sub), json_string_length(sub) + 1);
    }
    json_decref(claims);
    return refused;
}
