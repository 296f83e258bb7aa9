/* Authentication and authorisation over HTTP (QUEEN_AUTH=jwt, docs/auth.md): a real broker with an HS256 secret, RSA and Ed25519
 * PEM keys and a JWKS file holding a P-256 key, every token minted here.
 * /health is open and every other route is 401 without a token; bad tokens
 * of every shape are 401 with WWW-Authenticate and the envelope; roles and
 * scopes are refused per route family; two tenants never see each other's
 * keys or messages; the token's sub comes back as the producer of what it
 * pushed (push and transaction); and neither the secret nor any token ever
 * reaches the log, /metrics or an error body, while
 * queen_auth_failures_total counts the refusals by reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "http.h"
#include "http_fixture.h"
#include "jwtmint.h"
#include "pgtest.h"
#include "testutil.h"
#include "wire.h"

static const char SECRET[] = "integration-secret-7f3a9c1e5b2d";
static test_broker B;
static char dir[64], rsa_pem[128], ed_pem[128], jwks_path[128];
static char TA[37], TB[37];
static EVP_PKEY *rsa, *ec, *ed;
static char *env_strings[4];

/* Every token sent, to look for in the log and /metrics at the end. */
#define MAX_SENT 1024
static char *sent[MAX_SENT];
static size_t nsent;

/* Kept (and freed at teardown) whatever the count: a token past the table
 * would be neither looked for nor freed. */
static char *remember(char *token)
{
    if (nsent == MAX_SENT)
        fail_msg("more than %d tokens: raise MAX_SENT", MAX_SENT);
    sent[nsent++] = token;
    return token;
}

/* An HS256 token: role (NULL: none), tenant (NULL: no claim), sub, scope
 * (NULL: none), exp offset from now. Remembered (freed at teardown). */
static const char *tok_full(const char *role, const char *tenant, const char *sub, const char *scope, long exp_in)
{
    json_t *p = json_object();
    if (role)
        json_object_set_new(p, "role", json_string(role));
    if (tenant)
        json_object_set_new(p, "tenant", json_string(tenant));
    if (sub)
        json_object_set_new(p, "sub", json_string(sub));
    if (scope)
        json_object_set_new(p, "scope", json_string(scope));
    json_object_set_new(p, "exp", json_integer((json_int_t)time(NULL) + exp_in));
    char *payload = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    char *t = mint_jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload, SECRET, strlen(SECRET), NULL);
    free(payload);
    return remember(t);
}

static const char *tok(const char *role, const char *tenant)
{
    return tok_full(role, tenant, "svc", NULL, 600);
}

static http_reply call(const char *token, const char *method, const char *path, const char *body)
{
    char *auth = token ? fmt("Authorization: Bearer %s", token) : NULL;
    const char *headers[] = {auth, NULL};
    http_reply r = broker_http(&B, method, path, body, token ? headers : NULL);
    free(auth);
    return r;
}

/* Must answer status; with a refusal, the envelope's reason too. */
static void expect(const char *token, const char *method, const char *path, const char *body, long status,
                   const char *reason)
{
    http_reply r = call(token, method, path, body);
    if (r.status != status)
        fail_msg("%s %s: %ld, wanted %ld: %s", method, path, r.status, status, r.body);
    if (reason != NULL) {
        json_t *j = json_of(&r);
        if (jstr(j, "reason") == NULL || strcmp(jstr(j, "reason"), reason) != 0)
            fail_msg("%s %s: reason %s, wanted %s", method, path, r.body, reason);
        json_decref(j);
        char *challenge = http_reply_header(&r, "WWW-Authenticate");
        if (status == 401 && (challenge == NULL || strncmp(challenge, "Bearer", 6) != 0))
            fail_msg("%s %s: a 401 without WWW-Authenticate: Bearer", method, path);
        free(challenge);
        if (token != NULL && strstr(r.body, token) != NULL)
            fail_msg("%s %s: the error body quotes the token", method, path);
    }
    http_reply_free(&r);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        abort();
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    wire_uuid4(TA);
    wire_uuid4(TB);
    strcpy(dir, "/tmp/queen-auth-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(rsa_pem, sizeof rsa_pem, "%s/rsa.pem", dir);
    snprintf(ed_pem, sizeof ed_pem, "%s/ed.pem", dir);
    snprintf(jwks_path, sizeof jwks_path, "%s/jwks.json", dir);
    rsa = mint_keygen("RSA");
    ec = mint_keygen("EC");
    ed = mint_keygen("ED25519");
    mint_write_public_pem(rsa, rsa_pem);
    mint_write_public_pem(ed, ed_pem);
    char *jwk = mint_jwk(ec, "ec-1");
    char *doc = fmt("{\"keys\":[%s]}", jwk);
    write_text(jwks_path, doc);
    free(jwk);
    free(doc);
    env_strings[0] = fmt("QUEEN_JWT_SECRET=%s", SECRET);
    env_strings[1] = fmt("QUEEN_JWT_PUBLIC_KEYS=%s,%s", rsa_pem, ed_pem);
    env_strings[2] = fmt("QUEEN_JWT_JWKS=%s", jwks_path);
    const char *env[] = {"QUEEN_AUTH=jwt", env_strings[0], env_strings[1], env_strings[2],
                         "QUEEN_LOG_LEVEL=debug", "QUEEN_ACCESS_LOG=1", NULL};
    /* The tenants' kv grant: with tokens, tenancy is on, so kv calls need an
     * enabled kv_quota row as with header tenancy (test_http_tenant_limits). */
    char why[256];
    PGconn *db = pgtest_connect_quiet(why, sizeof why);
    if (db == NULL)
        return -1;
    for (int i = 0; i < 2; i++) {
        const char *p[] = {i == 0 ? TA : TB};
        PQclear(pgtest_exec(db, "INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ($1::uuid, true)", 1, p));
    }
    PQfinish(db);
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    broker_stop(&B);
    for (size_t i = 0; i < nsent; i++)
        free(sent[i]);
    for (size_t i = 0; i < 3; i++)
        free(env_strings[i]);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(ed);
    unlink(rsa_pem);
    unlink(ed_pem);
    unlink(jwks_path);
    rmdir(dir);
    return 0;
}

/* A concrete path for a route pattern: each capture becomes a name. */
static char *concrete(const char *pattern)
{
    char *out = malloc(strlen(pattern) * 2 + 8), *o = out;
    for (const char *p = pattern; *p;) {
        if (*p == ':' || *p == '*') {
            while (*p && *p != '/')
                p++;
            o += sprintf(o, "x1");
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* What needs no token: /health and the console's files (the page asks the
 * operator for a token and sends it with the API calls it makes). */
static bool open_route(const char *pattern)
{
    static const char *const open[] = {"/health", "/", "/console/", "/console/*file"};
    for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
        if (strcmp(pattern, open[i]) == 0)
            return true;
    return false;
}

static void health_is_open_and_every_other_route_needs_a_token(void **state)
{
    (void)state;
    for (size_t i = 0; i < http_route_count; i++) {
        bool open = open_route(http_routes[i].pattern);
        /* An open route's capture is a file it serves. */
        char *path = strcmp(http_routes[i].pattern, "/console/*file") == 0 ? strdup("/console/app.js")
                                                                             : concrete(http_routes[i].pattern);
        expect(NULL, http_routes[i].method, path, strcmp(http_routes[i].method, "POST") == 0 ? "{}" : NULL,
               open ? 200 : 401, open ? NULL : "auth_missing_token");
        free(path);
    }
}

static void bad_tokens_are_401_never_a_crash(void **state)
{
    (void)state;
    const char *path = "/api/v1/resources/queues";
    char *p = fmt("{\"role\":\"admin\",\"tenant\":\"%s\",\"exp\":%lld}", TA, (long long)time(NULL) + 600);
    char *expired = fmt("{\"role\":\"admin\",\"tenant\":\"%s\",\"exp\":%lld}", TA, (long long)time(NULL) - 3600);
    char *early = fmt("{\"role\":\"admin\",\"tenant\":\"%s\",\"nbf\":%lld}", TA, (long long)time(NULL) + 3600);
    FILE *f = fopen(rsa_pem, "r");
    char pem[4096];
    size_t pem_len = fread(pem, 1, sizeof pem, f);
    fclose(f);
    char *pb = mint_b64url(p, strlen(p));
    struct {
        char *token;
        const char *reason;
    } cases[] = {
        {remember(mint_jwt("{\"alg\":\"HS256\"}", expired, SECRET, strlen(SECRET), NULL)), "token_expired"},
        {remember(mint_jwt("{\"alg\":\"HS256\"}", early, SECRET, strlen(SECRET), NULL)), "token_not_yet_valid"},
        {remember(mint_jwt("{\"alg\":\"HS256\"}", p, "wrong-secret", 12, NULL)), "token_bad_signature"},
        {remember(mint_jwt("{\"alg\":\"HS256\"}", p, pem, pem_len, NULL)), "token_bad_signature"},
        {remember(mint_jwt("{\"alg\":\"RS256\"}", p, NULL, 0, ec)), "token_bad_signature"},
        {remember(fmt("eyJhbGciOiJub25lIn0.%s.", pb)), "token_unsupported_alg"},
        {remember(mint_jwt("{\"alg\":\"HS512\"}", p, SECRET, strlen(SECRET), NULL)), "token_unsupported_alg"},
        {remember(mint_jwt("{\"alg\":\"ES256\",\"kid\":\"nobody\"}", p, NULL, 0, ec)), "token_unknown_key"},
        {remember(mint_jwt("{\"alg\":\"HS256\"}", "not json", SECRET, strlen(SECRET), NULL)), "token_malformed"},
        {remember(fmt("!!!not-base64!!!.%s.abc", pb)), "token_malformed"},
        {remember(fmt("%s", "a.b")), "token_malformed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect(cases[i].token, "GET", path, NULL, 401, cases[i].reason);
    /* A tampered payload: the admin token's signature on a payload naming B. */
    char *good = remember(mint_jwt("{\"alg\":\"HS256\"}", p, SECRET, strlen(SECRET), NULL));
    expect(good, "GET", path, NULL, 200, NULL);
    char *other = fmt("{\"role\":\"admin\",\"tenant\":\"%s\",\"exp\":%lld}", TB, (long long)time(NULL) + 600);
    char *ob = mint_b64url(other, strlen(other));
    char *d1 = strchr(good, '.'), *d2 = strchr(d1 + 1, '.');
    char *tampered = remember(fmt("%.*s.%s%s", (int)(d1 - good), good, ob, d2));
    expect(tampered, "GET", path, NULL, 401, "token_bad_signature");
    /* Empty, another scheme, two Authorization headers. */
    const char *shapes[][2] = {{"Authorization: Bearer ", NULL},
                               {"Authorization: Basic dXNlcjpwYXNz", NULL},
                               {"Authorization: Bearer", NULL}};
    for (size_t i = 0; i < 3; i++) {
        http_reply r = broker_http(&B, "GET", path, NULL, shapes[i]);
        http_expect(&r, 401, "unauthorized", "token_malformed");
        http_reply_free(&r);
    }
    char *twice = fmt("Authorization: Bearer %s", good);
    const char *two[] = {twice, twice, NULL};
    http_reply r = broker_http(&B, "GET", path, NULL, two);
    http_expect(&r, 401, "unauthorized", "token_malformed");
    http_reply_free(&r);
    free(twice);
    /* Large tokens: 7 KB of garbage is a 401; 100 KB passes the 32 KiB
     * head the edge reads (431). Never 2xx, and the broker stays up. */
    char *big = malloc(100 * 1024 + 1);
    memset(big, 'A', 100 * 1024);
    big[100 * 1024] = '\0';
    big[7000] = '\0';
    expect(big, "GET", path, NULL, 401, "token_malformed");
    big[7000] = 'A';
    http_reply huge = call(big, "GET", path, NULL);
    assert_true(huge.status == 401 || huge.status == 431);
    http_reply_free(&huge);
    free(big);
    expect(NULL, "GET", "/health", NULL, 200, NULL);
    free(p);
    free(expired);
    free(early);
    free(pb);
    free(other);
    free(ob);
}

/* Seeded byte mutations of a valid token: each changed token is a 401 (or,
 * when the bytes were not changed after all, still the 200), and the broker
 * stays up. */
static void mutated_tokens_are_401(void **state)
{
    (void)state;
    const char *good = tok("read", TA);
    size_t len = strlen(good);
    unsigned seed = 14;
    for (int i = 0; i < 200; i++) {
        char *t = strdup(good);
        for (int k = 0, n = 1 + (int)(rand_r(&seed) % 3); k < n; k++) {
            /* printable bytes only: a header cannot carry the rest */
            t[rand_r(&seed) % len] = (char)(33 + rand_r(&seed) % 94);
        }
        http_reply r = call(t, "GET", "/api/v1/resources/queues", NULL);
        long want = strcmp(t, good) == 0 ? 200 : 401;
        if (r.status != want)
            fail_msg("mutation %d: %ld, wanted %ld: %s", i, r.status, want, r.body);
        http_reply_free(&r);
        remember(t);
    }
    expect(NULL, "GET", "/health", NULL, 200, NULL);
}

static void every_algorithm_is_accepted_over_http(void **state)
{
    (void)state;
    char *p = fmt("{\"role\":\"read\",\"tenant\":\"%s\",\"exp\":%lld}", TA, (long long)time(NULL) + 600);
    expect(remember(mint_jwt("{\"alg\":\"RS256\"}", p, NULL, 0, rsa)), "GET", "/api/v1/resources/queues", NULL, 200,
           NULL);
    expect(remember(mint_jwt("{\"alg\":\"ES256\",\"kid\":\"ec-1\"}", p, NULL, 0, ec)), "GET",
           "/api/v1/resources/queues", NULL, 200, NULL);
    expect(remember(mint_jwt("{\"alg\":\"EdDSA\"}", p, NULL, 0, ed)), "GET", "/api/v1/resources/queues", NULL, 200,
           NULL);
    expect(tok("read", TA), "GET", "/api/v1/resources/queues", NULL, 200, NULL);
    free(p);
}

static void roles_are_enforced_on_every_route_family(void **state)
{
    (void)state;
    const char *rd = tok("read", TA), *wr = tok("write", TA), *ad = tok("admin", TA), *none = tok(NULL, TA);
    expect(none, "GET", "/api/v1/resources/queues", NULL, 403, "auth_no_role");
    expect(tok("superuser", TA), "GET", "/api/v1/resources/queues", NULL, 403, "auth_no_role");
    /* KV */
    expect(wr, "PUT", "/api/v1/kv/roles/k", "{\"value\":1,\"forever\":true}", 200, NULL);
    expect(rd, "GET", "/api/v1/kv/roles/k", NULL, 200, NULL);
    expect(rd, "PUT", "/api/v1/kv/roles/k", "{\"value\":2,\"forever\":true}", 403, "auth_forbidden_role");
    expect(rd, "DELETE", "/api/v1/kv/roles/k", NULL, 403, "auth_forbidden_role");
    expect(rd, "POST", "/api/v1/kv", "{\"operations\":[{\"op\":\"get\",\"ns\":\"roles\",\"key\":\"k\"}]}", 200, NULL);
    expect(rd, "POST", "/api/v1/kv",
           "{\"operations\":[{\"op\":\"get\",\"ns\":\"roles\",\"key\":\"k\"},{\"op\":\"incr\",\"ns\":\"roles\","
           "\"key\":\"n\",\"delta\":1,\"forever\":true}]}",
           403, "auth_forbidden_role");
    expect(rd, "GET", "/api/v1/resources/kv/namespaces", NULL, 200, NULL);
    expect(rd, "POST", "/api/v1/resources/kv/list", "{\"namespace\":\"roles\"}", 200, NULL);
    /* messages */
    expect(rd, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"roles-q\",\"payload\":1}]}", 403,
           "auth_forbidden_role");
    expect(wr, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"roles-q\",\"payload\":1}]}", 201, NULL);
    expect(rd, "GET", "/api/v1/pop/queue/roles-q?autoAck=true", NULL, 200, NULL);
    expect(wr, "POST", "/api/v1/configure", "{\"queue\":\"roles-q\"}", 403, "auth_forbidden_role");
    expect(ad, "POST", "/api/v1/configure", "{\"queue\":\"roles-q\"}", 200, NULL);
    expect(wr, "DELETE", "/api/v1/resources/queues/roles-q", NULL, 403, "auth_forbidden_role");
    expect(rd, "POST", "/api/v1/transaction",
           "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"roles-q\",\"payload\":2}]}]}", 403,
           "auth_forbidden_role");
    expect(wr, "POST", "/api/v1/transaction",
           "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"roles-q\",\"payload\":2}]}]}", 200, NULL);
    expect(ad, "DELETE", "/api/v1/resources/queues/roles-q", NULL, 200, NULL);
    /* ops: the broker's, not a tenant's (broker_wide_calls_need_the_operator) */
    expect(wr, "GET", "/metrics", NULL, 403, "auth_forbidden_role");
    expect(wr, "GET", "/metrics/prometheus", NULL, 403, "auth_forbidden_role");
    expect(tok("operator", NULL), "GET", "/metrics", NULL, 200, NULL);
}

static void scopes_narrow_a_token_by_prefix(void **state)
{
    (void)state;
    const char *t = tok_full("write", TA, "scoped", "openid kv:app/*:write queue:orders:read", 600);
    const char *w = tok("write", TA);
    expect(t, "PUT", "/api/v1/kv/app/user/1", "{\"value\":1,\"forever\":true}", 200, NULL);
    expect(t, "GET", "/api/v1/kv/app/user/1", NULL, 200, NULL);
    expect(t, "PUT", "/api/v1/kv/other/user/1", "{\"value\":1,\"forever\":true}", 403, "auth_forbidden_scope");
    expect(t, "GET", "/api/v1/kv/other/user/1", NULL, 403, "auth_forbidden_scope");
    expect(t, "POST", "/api/v1/kv",
           "{\"operations\":[{\"op\":\"get\",\"ns\":\"app\",\"key\":\"a\"},{\"op\":\"getMany\",\"ns\":\"other\","
           "\"keys\":[\"a\"]}]}",
           403, "auth_forbidden_scope");
    expect(t, "POST", "/api/v1/kv", "{\"operations\":[{\"op\":\"getPrefix\",\"ns\":\"app\",\"prefix\":\"user/\"}]}",
           200, NULL);
    expect(t, "GET", "/api/v1/resources/kv/namespaces", NULL, 403, "auth_forbidden_scope");
    expect(t, "POST", "/api/v1/resources/kv/list", "{\"namespace\":\"app\"}", 200, NULL);
    expect(t, "POST", "/api/v1/resources/kv/list", "{\"namespace\":\"other\"}", 403, "auth_forbidden_scope");
    /* queue:orders:read: pop orders, never push to it, nothing else */
    expect(w, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"orders\",\"payload\":1}]}", 201, NULL);
    expect(t, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"orders\",\"payload\":1}]}", 403,
           "auth_forbidden_scope");
    expect(t, "GET", "/api/v1/pop/queue/orders?autoAck=true", NULL, 200, NULL);
    expect(t, "GET", "/api/v1/pop/queue/payments", NULL, 403, "auth_forbidden_scope");
    expect(t, "GET", "/api/v1/resources/queues", NULL, 403, "auth_forbidden_scope");
    expect(t, "POST", "/api/v1/transaction",
           "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"orders\",\"payload\":2}]}]}", 403,
           "auth_forbidden_scope");
    expect(t, "POST", "/api/v1/transaction",
           "{\"kv\":[{\"op\":\"put\",\"ns\":\"app\",\"key\":\"t\",\"value\":1,\"forever\":true}]}", 200, NULL);
    /* a scope never raises the role */
    const char *r = tok_full("read", TA, "scoped", "kv:*:write", 600);
    expect(r, "PUT", "/api/v1/kv/app/x", "{\"value\":1,\"forever\":true}", 403, "auth_forbidden_role");
}

static void two_tenants_never_see_each_other(void **state)
{
    (void)state;
    const char *a = tok("write", TA), *b = tok("write", TB);
    expect(a, "PUT", "/api/v1/kv/iso/k", "{\"value\":\"a's\",\"forever\":true}", 200, NULL);
    http_reply r = call(b, "GET", "/api/v1/kv/iso/k", NULL);
    assert_int_equal(r.status, 200);
    json_t *j = json_of(&r);
    assert_false(jtrue(j, "found"));
    json_decref(j);
    http_reply_free(&r);
    r = call(a, "GET", "/api/v1/kv/iso/k", NULL);
    j = json_of(&r);
    assert_true(jtrue(j, "found"));
    json_decref(j);
    http_reply_free(&r);
    expect(a, "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"iso-q\",\"payload\":1}]}", 201, NULL);
    expect(b, "GET", "/api/v1/pop/queue/iso-q?autoAck=true", NULL, 204, NULL);
    expect(a, "GET", "/api/v1/pop/queue/iso-q?autoAck=true", NULL, 200, NULL);
    /* the token names the tenant: no claim, a bad claim, or a header trying to pick one are 403 */
    expect(tok("write", NULL), "GET", "/api/v1/kv/iso/k", NULL, 403, "auth_no_tenant");
    expect(tok("write", "not-a-uuid"), "GET", "/api/v1/kv/iso/k", NULL, 403, "auth_bad_tenant");
    expect(tok("write", ""), "GET", "/api/v1/kv/iso/k", NULL, 403, "auth_bad_tenant");
    char *authz = fmt("Authorization: Bearer %s", b), *pick = fmt("x-queen-tenant: %s", TA);
    const char *headers[] = {authz, pick, NULL};
    r = broker_http(&B, "GET", "/api/v1/kv/iso/k", NULL, headers);
    http_expect(&r, 403, "forbidden", "auth_tenant_header");
    http_reply_free(&r);
    free(authz);
    free(pick);
}

static const char *first_producer(json_t *pop)
{
    return jstr(json_array_get(json_object_get(pop, "messages"), 0), "producer");
}

static void the_producer_is_the_token_sub(void **state)
{
    (void)state;
    const char *alice = tok_full("write", TA, "alice@example", NULL, 600);
    const char *bob = tok_full("write", TA, "bob", NULL, 600);
    expect(alice, "POST", "/api/v1/push",
           "{\"items\":[{\"queue\":\"prod-q\",\"payload\":1,\"producer\":\"forged\"}]}", 201, NULL);
    http_reply r = call(bob, "GET", "/api/v1/pop/queue/prod-q?autoAck=true", NULL);
    assert_int_equal(r.status, 200);
    json_t *j = json_of(&r);
    assert_non_null(first_producer(j));
    assert_string_equal(first_producer(j), "alice@example");
    json_decref(j);
    http_reply_free(&r);
    expect(bob, "POST", "/api/v1/transaction",
           "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"prod-q\",\"payload\":2}]}]}", 200, NULL);
    r = call(alice, "GET", "/api/v1/pop/queue/prod-q?autoAck=true", NULL);
    assert_int_equal(r.status, 200);
    j = json_of(&r);
    assert_string_equal(first_producer(j), "bob");
    json_decref(j);
    http_reply_free(&r);
}

/* The first result's member of a push's answer (an array of results). */
static char *pushed(const char *token, const char *queue, const char *txn, const char *member)
{
    char *body = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1,\"transactionId\":\"%s\"}]}", queue, txn);
    http_reply r = call(token, "POST", "/api/v1/push", body);
    free(body);
    if (r.status != 201)
        fail_msg("push to %s: %ld %s", queue, r.status, r.body);
    json_t *j = json_of(&r);
    const char *v = jstr(json_array_get(j, 0), member);
    if (v == NULL)
        fail_msg("push to %s: no %s in %s", queue, member, r.body);
    char *out = strdup(v);
    json_decref(j);
    http_reply_free(&r);
    return out;
}

/* A 403 auth_forbidden_scope that names no queue the token may not see. */
static void refused_unnamed(const char *token, const char *method, const char *path, const char *body,
                            const char *hidden)
{
    http_reply r = call(token, method, path, body);
    if (r.status != 403 || strstr(r.body, "auth_forbidden_scope") == NULL)
        fail_msg("%s %s %s: %ld %s, wanted 403 auth_forbidden_scope", method, path, body ? body : "", r.status,
                 r.body);
    if (strstr(r.body, hidden) != NULL)
        fail_msg("%s %s: the refusal names the queue %s: %s", method, path, hidden, r.body);
    http_reply_free(&r);
}

/* The stream routes (issue 39): a query reads its source and writes its
 * sink. Registering needs read on source_queue and write on sink_queue; a
 * cycle is judged on the queue of its partition_id (read) and on every
 * push_items queue (write); a state read on the queue of its partition_id.
 * A refused cycle writes nothing. */
static void a_stream_needs_read_on_its_source_and_write_on_its_sinks(void **state)
{
    (void)state;
    const char *w = tok("write", TA);
    const char *t = tok_full("write", TA, "s1", "queue:st-src:read queue:st-out:write", 600);
    char *pid = pushed(w, "st-src", "a1", "partition_id");
    char *other = pushed(w, "st-secret", "b1", "partition_id");

    expect(t, "POST", "/streams/v1/queries",
           "{\"name\":\"st\",\"source_queue\":\"st-src\",\"sink_queue\":\"st-out\",\"config_hash\":\"h\"}", 200,
           NULL);
    expect(t, "POST", "/streams/v1/queries",
           "{\"name\":\"st2\",\"source_queue\":\"st-src\",\"sink_queue\":\"st-secret\",\"config_hash\":\"h\"}",
           403, "auth_forbidden_scope");
    expect(t, "POST", "/streams/v1/queries", "{\"name\":\"st3\",\"source_queue\":\"st-secret\",\"config_hash\":\"h\"}",
           403, "auth_forbidden_scope");
    http_reply r = call(t, "POST", "/streams/v1/queries",
                        "{\"name\":\"st\",\"source_queue\":\"st-src\",\"sink_queue\":\"st-out\",\"config_hash\":\"h\"}");
    json_t *j = json_of(&r);
    char *qid = strdup(jstr(j, "query_id"));
    json_decref(j);
    http_reply_free(&r);

    char *to_secret = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"push_items\":[{\"queue\":\"st-secret\","
                          "\"payload\":1}]}",
                          qid, pid);
    /* the sink is named by the body, as a push names it: the refusal may say so */
    expect(t, "POST", "/streams/v1/cycle", to_secret, 403, "auth_forbidden_scope");
    char *from_secret = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\"}", qid, other);
    refused_unnamed(t, "POST", "/streams/v1/cycle", from_secret, "st-secret");
    refused_unnamed(t, "POST", "/streams/v1/state/get", from_secret, "st-secret");
    char *own = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\",\"push_items\":[{\"queue\":\"st-out\","
                    "\"payload\":1}]}",
                    qid, pid);
    expect(t, "POST", "/streams/v1/cycle", own, 200, NULL);
    char *get = fmt("{\"query_id\":\"%s\",\"partition_id\":\"%s\"}", qid, pid);
    expect(t, "POST", "/streams/v1/state/get", get, 200, NULL);
    /* a read token may not write a sink */
    const char *rd = tok_full("read", TA, "s1", "queue:st-src:read queue:st-out:write", 600);
    expect(rd, "POST", "/streams/v1/cycle", own, 403, "auth_forbidden_role");
    /* nothing reached the secret queue */
    expect(w, "GET", "/api/v1/pop/queue/st-secret?batch=10&autoAck=true", NULL, 200, NULL);
    expect(w, "GET", "/api/v1/pop/queue/st-secret", NULL, 204, NULL);
    free(pid);
    free(other);
    free(qid);
    free(to_secret);
    free(from_secret);
    free(own);
    free(get);
}

/* Issue 34, finding 1: a token scoped to one queue settled (acked,
 * dead-lettered, extended, traced) another queue of its tenant by naming
 * its partition, with no lease. Each call is judged on the queue its
 * partition or lease belongs to; an unknown partition gets the same
 * answer as a forbidden one; nothing is written when refused. */
static void a_queue_scope_settles_only_its_own_queue(void **state)
{
    (void)state;
    const char *w = tok("write", TA);
    const char *t = tok_full("write", TA, "f1", "queue:f1-orders:read", 600);
    const char *rd = tok_full("read", TA, "f1", "queue:f1-orders:read", 600);
    char *ps = pushed(w, "f1-secret", "s1", "partition_id");
    free(pushed(w, "f1-secret", "s2", "partition_id"));
    char *po = pushed(w, "f1-orders", "o1", "partition_id");
    char unknown[37];
    wire_uuid4(unknown);

    char *ack = fmt("{\"transactionId\":\"s1\",\"partitionId\":\"%s\"}", ps);
    refused_unnamed(t, "POST", "/api/v1/ack", ack, "f1-secret");
    char *failed = fmt("{\"transactionId\":\"s1\",\"partitionId\":\"%s\",\"status\":\"failed\"}", ps);
    refused_unnamed(t, "POST", "/api/v1/ack", failed, "f1-secret");
    char *nowhere = fmt("{\"transactionId\":\"s1\",\"partitionId\":\"%s\"}", unknown);
    refused_unnamed(t, "POST", "/api/v1/ack", nowhere, "f1-secret");
    char *batch = fmt("{\"acknowledgments\":[{\"transactionId\":\"o1\",\"partitionId\":\"%s\"},"
                      "{\"transactionId\":\"s2\",\"partitionId\":\"%s\"}]}",
                      po, ps);
    refused_unnamed(t, "POST", "/api/v1/ack/batch", batch, "f1-secret");
    char *txn = fmt("{\"operations\":[{\"type\":\"ack\",\"transactionId\":\"s1\",\"partitionId\":\"%s\","
                    "\"status\":\"failed\"}]}",
                    ps);
    refused_unnamed(t, "POST", "/api/v1/transaction", txn, "f1-secret");
    char *trace = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"s1\",\"traceName\":\"f1\"}", ps);
    refused_unnamed(t, "POST", "/api/v1/traces", trace, "f1-secret");
    /* finding 9: recording a trace is a write */
    char *own_trace = fmt("{\"partitionId\":\"%s\",\"transactionId\":\"o1\",\"traceName\":\"f1\"}", po);
    expect(rd, "POST", "/api/v1/traces", own_trace, 403, "auth_forbidden_role");
    expect(t, "POST", "/api/v1/traces", own_trace, 201, NULL);

    /* Nothing was settled: both secrets are still there to pop, and the
     * lease that pop holds cannot be extended by the scoped token. */
    http_reply r = call(w, "GET", "/api/v1/pop/queue/f1-secret?batch=10", NULL);
    assert_int_equal(r.status, 200);
    json_t *j = json_of(&r);
    assert_int_equal(json_array_size(json_object_get(j, "messages")), 2);
    char *ext = fmt("/api/v1/lease/%s/extend", jstr(j, "leaseId"));
    char *lease_txn = fmt("{\"operations\":[],\"requiredLeases\":[\"%s\"]}", jstr(j, "leaseId"));
    json_decref(j);
    http_reply_free(&r);
    refused_unnamed(t, "POST", ext, "{\"seconds\":60}", "f1-secret");
    refused_unnamed(t, "POST", "/api/v1/transaction", lease_txn, "f1-secret");
    expect(w, "POST", ext, "{\"seconds\":60}", 200, NULL);

    /* Its own queue: acked without a lease, a lease extended. */
    char *own = fmt("{\"transactionId\":\"o1\",\"partitionId\":\"%s\"}", po);
    expect(t, "POST", "/api/v1/ack", own, 200, NULL);
    free(pushed(w, "f1-orders", "o2", "partition_id"));
    r = call(t, "GET", "/api/v1/pop/queue/f1-orders", NULL);
    assert_int_equal(r.status, 200);
    j = json_of(&r);
    char *own_ext = fmt("/api/v1/lease/%s/extend", jstr(j, "leaseId"));
    json_decref(j);
    http_reply_free(&r);
    expect(t, "POST", own_ext, "{\"seconds\":60}", 200, NULL);
    /* a scope over every queue needs no lookup; no scope at all, none either */
    expect(tok_full("read", TA, "f1", "queue:*:read", 600), "POST", "/api/v1/ack", nowhere, 200, NULL);
    char *stale = fmt("{\"transactionId\":\"s1\",\"partitionId\":\"%s\",\"leaseId\":\"%s\"}", ps, unknown);
    expect(tok("read", TA), "POST", "/api/v1/ack", stale, 200, NULL);
    free(ps);
    free(po);
    free(ack);
    free(failed);
    free(nowhere);
    free(batch);
    free(txn);
    free(trace);
    free(own_trace);
    free(ext);
    free(lease_txn);
    free(own);
    free(own_ext);
    free(stale);
}

/* Issue 34, finding 2: any tenant's admin (even narrowed to one kv prefix,
 * even with a tenant that is no uuid) switched the whole broker into
 * maintenance and read the broker's /metrics. Broker-wide calls need the
 * operator role and a token no scope narrows; tenant admins keep their own
 * tenant's admin routes, within their scopes. */
static void broker_wide_calls_need_the_operator(void **state)
{
    (void)state;
    const char *ad = tok("admin", TA), *odd = tok("admin", "not-a-uuid");
    const char *narrow = tok_full("admin", TA, "kv-admin", "kv:orders/*:read", 600);
    const char *op = tok("operator", NULL), *op_narrow = tok_full("operator", NULL, "op", "queue:*:write", 600);
    const char *off = "{\"enabled\":false}";
    static const char *const ops[][2] = {{"POST", "/api/v1/system/maintenance"},
                                         {"GET", "/api/v1/system/maintenance"},
                                         {"GET", "/metrics"},
                                         {"GET", "/metrics/prometheus"},
                                         {"GET", "/api/v1/analytics/system-metrics"},
                                         {"GET", "/api/v1/analytics/worker-metrics"},
                                         {"GET", "/api/v1/analytics/postgres-stats"}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const char *body = ops[i][0][0] == 'P' ? off : NULL;
        expect(ad, ops[i][0], ops[i][1], body, 403, "auth_forbidden_role");
        expect(odd, ops[i][0], ops[i][1], body, 403, "auth_forbidden_role");
        expect(narrow, ops[i][0], ops[i][1], body, 403, "auth_forbidden_role");
        expect(op_narrow, ops[i][0], ops[i][1], body, 403, "auth_forbidden_scope");
        expect(op, ops[i][0], ops[i][1], body, 200, NULL);
    }
    expect(op, "POST", "/api/v1/system/maintenance", "{\"enabled\":true}", 200, NULL);
    http_reply r = call(op, "GET", "/api/v1/system/maintenance", NULL);
    assert_non_null(strstr(r.body, "true"));
    http_reply_free(&r);
    expect(op, "POST", "/api/v1/system/maintenance", off, 200, NULL);
    /* scopes narrow admin too: nothing but its kv prefix */
    expect(narrow, "POST", "/api/v1/configure", "{\"queue\":\"f2-other\"}", 403, "auth_forbidden_scope");
    expect(narrow, "DELETE", "/api/v1/resources/queues/f2-other", NULL, 403, "auth_forbidden_scope");
    expect(narrow, "DELETE", "/api/v1/dlq?queue=f2-other", NULL, 403, "auth_forbidden_scope");
    /* a tenant's admin keeps its tenant's admin routes */
    expect(ad, "POST", "/api/v1/configure", "{\"queue\":\"f2-own\"}", 200, NULL);
    expect(ad, "DELETE", "/api/v1/resources/queues/f2-own", NULL, 200, NULL);
    expect(ad, "GET", "/api/v1/status", NULL, 200, NULL);
    /* the dashboard's status reads are the tenant's, scoped as the listings */
    expect(ad, "GET", "/api/v1/status/queues", NULL, 200, NULL);
    expect(narrow, "GET", "/api/v1/status/queues", NULL, 403, "auth_forbidden_scope");
    expect(narrow, "GET", "/api/v1/status/queues/f2-other", NULL, 403, "auth_forbidden_scope");
}

/* An HS256 token of the given payload (JSON text; exp added). */
static const char *tok_payload(const char *json_members)
{
    char *p = fmt("{%s,\"exp\":%lld}", json_members, (long long)time(NULL) + 600);
    char *t = mint_jwt("{\"alg\":\"HS256\"}", p, SECRET, strlen(SECRET), NULL);
    free(p);
    return remember(t);
}

/* Issue 34, finding 10: a scope of ours that did not parse was dropped and
 * the token kept its whole role. Now the token is refused (401
 * token_bad_scope); other services' scopes stay ignored. */
static void scopes_that_do_not_parse_refuse_the_token(void **state)
{
    (void)state;
    static const char *const bad[] = {"Queue:orders:read", "KV:app/*:read", "queue:orders:READ",
                                      "queue:orders:admin", "queue::read", "queue:orders", "kv",
                                      "openid QUEUE:orders:read", "kv:app/*:read kv:app/*:writ"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect(tok_full("write", TA, "s", bad[i], 600), "GET", "/api/v1/resources/queues", NULL, 401,
               "token_bad_scope");
    char *tenant = fmt("\"role\":\"write\",\"tenant\":\"%s\"", TA);
    static const char *const claims[] = {
        "\"scope\":[\" queue:orders:read\"]",       "\"scopes\":[\"queue :orders:read\"]",
        "\"scope\":\"openid\\tqueue:orders:read\"", "\"scope\":\"queue:orders:read\\n\"",
        "\"scope\":5",                              "\"scopes\":[\"queue:orders:read\",7]",
        "\"scope\":{\"queue\":\"orders\"}"};
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        char *members = fmt("%s,%s", tenant, claims[i]);
        expect(tok_payload(members), "GET", "/api/v1/resources/queues", NULL, 401, "token_bad_scope");
        free(members);
    }
    /* other services' scopes: ignored, the token is not narrowed by them */
    expect(tok_full("write", TA, "s", "openid profile read:messages https://api.example/x", 600), "GET",
           "/api/v1/resources/queues", NULL, 200, NULL);
    char *members = fmt("%s,\"scopes\":[\"openid\",\"queue:f10:read\"]", tenant);
    const char *ok = tok_payload(members);
    expect(ok, "GET", "/api/v1/pop/queue/f10", NULL, 204, NULL);
    expect(ok, "GET", "/api/v1/resources/queues", NULL, 403, "auth_forbidden_scope");
    free(members);
    free(tenant);
}

/* Last: after every refusal above. */
static void secrets_never_reach_the_log_or_metrics(void **state)
{
    (void)state;
    http_reply m = call(tok("operator", NULL), "GET", "/metrics/prometheus", NULL);
    assert_int_equal(m.status, 200);
    static const char *const counted[] = {"auth_missing_token", "token_expired", "token_bad_signature",
                                          "token_unsupported_alg", "token_malformed", "auth_forbidden_role",
                                          "auth_forbidden_scope", "auth_no_tenant", "token_bad_scope"};
    for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++) {
        char *line = fmt("queen_auth_failures_total{reason=\"%s\"} ", counted[i]);
        char *at = strstr(m.body, line);
        if (at == NULL || atol(at + strlen(line)) < 1)
            fail_msg("%s not counted in /metrics/prometheus", counted[i]);
        free(line);
    }
    http_reply mj = call(tok("operator", NULL), "GET", "/metrics", NULL);
    assert_int_equal(mj.status, 200);
    assert_non_null(strstr(mj.body, "\"token_expired\""));
    assert_int_equal(broker_stop(&B), 0);
    char *log = read_file(B.log);
    assert_non_null(strstr(log, "http GET /api/v1/resources/queues 401")); /* the access log was on */
    const char *bodies[] = {log, m.body, mj.body};
    for (size_t k = 0; k < 3; k++) {
        if (strstr(bodies[k], SECRET) != NULL)
            fail_msg("the secret is in %s", k == 0 ? B.log : "/metrics");
        for (size_t i = 0; i < nsent; i++) {
            /* A token's signature part is what makes it a credential. */
            const char *sig = strrchr(sent[i], '.');
            if (sig != NULL && strlen(sig) > 16 && strstr(bodies[k], sig) != NULL)
                fail_msg("token %zu is in %s", i, k == 0 ? B.log : "/metrics");
        }
    }
    free(log);
    http_reply_free(&m);
    http_reply_free(&mj);
    /* restart for teardown's stop */
    const char *env[] = {"QUEEN_AUTH=jwt", env_strings[0], NULL};
    assert_true(broker_start(&B, env));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(health_is_open_and_every_other_route_needs_a_token),
        cmocka_unit_test(bad_tokens_are_401_never_a_crash),
        cmocka_unit_test(mutated_tokens_are_401),
        cmocka_unit_test(every_algorithm_is_accepted_over_http),
        cmocka_unit_test(roles_are_enforced_on_every_route_family),
        cmocka_unit_test(scopes_narrow_a_token_by_prefix),
        cmocka_unit_test(two_tenants_never_see_each_other),
        cmocka_unit_test(the_producer_is_the_token_sub),
        cmocka_unit_test(a_queue_scope_settles_only_its_own_queue),
        cmocka_unit_test(a_stream_needs_read_on_its_source_and_write_on_its_sinks),
        cmocka_unit_test(broker_wide_calls_need_the_operator),
        cmocka_unit_test(scopes_that_do_not_parse_refuse_the_token),
        cmocka_unit_test(secrets_never_reach_the_log_or_metrics),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
