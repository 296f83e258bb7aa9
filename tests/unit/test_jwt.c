/* The JWT verifier (src/server/jwt.c) against tokens minted here for every
 * algorithm (tests/support/jwtmint.c): each verifies with its key and with
 * no other; exp, nbf (with the leeway), iss and aud; a tampered payload;
 * alg none; algorithm confusion (HS256 signed with the RSA public key as the
 * secret); unknown algorithms and crit; a JWKS rotation picked up by kid;
 * and malformed tokens of every shape, which are refused, never a crash.
 * Also: every route of the table has an authorisation policy. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "jwt.h"
#include "jwtmint.h"

static const char SECRET[] = "unit-test-secret-0123456789abcdef";
static char dir[64];
static char rsa_pem[128], ed_pem[128], jwks_path[128];
static EVP_PKEY *rsa, *rsa_other, *ec, *ec_other, *ed;
static time_t NOW;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void write_jwks(EVP_PKEY *key, const char *kid)
{
    char *jwk = mint_jwk(key, kid), *doc = NULL;
    assert_true(asprintf(&doc, "{\"keys\":[%s]}", jwk) > 0);
    write_text(jwks_path, doc);
    free(jwk);
    free(doc);
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/queen-jwt-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(rsa_pem, sizeof rsa_pem, "%s/rsa.pem", dir);
    snprintf(ed_pem, sizeof ed_pem, "%s/ed.pem", dir);
    snprintf(jwks_path, sizeof jwks_path, "%s/jwks.json", dir);
    rsa = mint_keygen("RSA");
    rsa_other = mint_keygen("RSA");
    ec = mint_keygen("EC");
    ec_other = mint_keygen("EC");
    ed = mint_keygen("ED25519");
    mint_write_public_pem(rsa, rsa_pem);
    mint_write_public_pem(ed, ed_pem);
    write_jwks(ec, "ec-1");
    NOW = time(NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(rsa_other);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(ec_other);
    EVP_PKEY_free(ed);
    unlink(rsa_pem);
    unlink(ed_pem);
    unlink(jwks_path);
    rmdir(dir);
    return 0;
}

static jwt_keyring *keyring(void)
{
    char pems[300], err[256];
    snprintf(pems, sizeof pems, "%s,%s", rsa_pem, ed_pem);
    jwt_keyring *kr = jwt_keyring_new(SECRET, pems, jwks_path, "", 300, err, sizeof err);
    if (kr == NULL)
        fail_msg("keyring: %s", err);
    return kr;
}

static jwt_fault verify(jwt_keyring *kr, const char *token, const jwt_rules *rules, time_t now)
{
    json_t *claims = NULL;
    jwt_fault f = jwt_verify(kr, token, strlen(token), rules, now, &claims);
    if (f == JWT_OK) {
        assert_non_null(claims);
        json_decref(claims);
    } else {
        assert_null(claims);
    }
    return f;
}

static char *payload(long exp_offset)
{
    char *p = NULL;
    assert_true(asprintf(&p, "{\"sub\":\"svc\",\"role\":\"write\",\"exp\":%lld}", (long long)(NOW + exp_offset)) > 0);
    return p;
}

static void every_algorithm_verifies_with_its_key(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    char *p = payload(600);
    char *hs = mint_jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", p, SECRET, strlen(SECRET), NULL);
    char *rs = mint_jwt("{\"alg\":\"RS256\"}", p, NULL, 0, rsa);
    char *es = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"ec-1\"}", p, NULL, 0, ec);
    char *ed25519 = mint_jwt("{\"alg\":\"EdDSA\"}", p, NULL, 0, ed);
    assert_int_equal(verify(kr, hs, NULL, NOW), JWT_OK);
    assert_int_equal(verify(kr, rs, NULL, NOW), JWT_OK);
    assert_int_equal(verify(kr, es, NULL, NOW), JWT_OK);
    assert_int_equal(verify(kr, ed25519, NULL, NOW), JWT_OK);
    json_t *claims = NULL;
    assert_int_equal(jwt_verify(kr, rs, strlen(rs), NULL, NOW, &claims), JWT_OK);
    assert_string_equal(json_string_value(json_object_get(claims, "sub")), "svc");
    json_decref(claims);
    free(hs);
    free(rs);
    free(es);
    free(ed25519);
    free(p);
    jwt_keyring_free(kr);
}

static void a_token_signed_with_another_key_is_refused(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    char *p = payload(600);
    char *hs = mint_jwt("{\"alg\":\"HS256\"}", p, "another-secret", 14, NULL);
    char *rs = mint_jwt("{\"alg\":\"RS256\"}", p, NULL, 0, rsa_other);
    char *es = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"ec-1\"}", p, NULL, 0, ec_other);
    assert_int_equal(verify(kr, hs, NULL, NOW), JWT_BAD_SIGNATURE);
    assert_int_equal(verify(kr, rs, NULL, NOW), JWT_BAD_SIGNATURE);
    assert_int_equal(verify(kr, es, NULL, NOW), JWT_BAD_SIGNATURE);
    free(hs);
    free(rs);
    free(es);
    free(p);
    jwt_keyring_free(kr);
}

static void a_tampered_payload_is_refused(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    char *p = payload(600);
    char *rs = mint_jwt("{\"alg\":\"RS256\"}", p, NULL, 0, rsa);
    /* The same header and signature around a payload that says admin. */
    const char *claims = "{\"sub\":\"svc\",\"role\":\"admin\"}";
    char *admin = mint_b64url(claims, strlen(claims));
    char *dot1 = strchr(rs, '.'), *dot2 = strchr(dot1 + 1, '.');
    char *forged = NULL;
    assert_true(asprintf(&forged, "%.*s.%s%s", (int)(dot1 - rs), rs, admin, dot2) > 0);
    assert_int_equal(verify(kr, forged, NULL, NOW), JWT_BAD_SIGNATURE);
    /* One flipped signature character. */
    char *last = rs + strlen(rs) - 2;
    *last = *last == 'A' ? 'B' : 'A';
    assert_int_equal(verify(kr, rs, NULL, NOW), JWT_BAD_SIGNATURE);
    free(forged);
    free(admin);
    free(rs);
    free(p);
    jwt_keyring_free(kr);
}

static void alg_none_and_algorithm_confusion_are_refused(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    char *p = payload(600);
    char *pb = mint_b64url(p, strlen(p));
    char *none = NULL;
    assert_true(asprintf(&none, "eyJhbGciOiJub25lIn0.%s.", pb) > 0); /* {"alg":"none"}, no signature */
    assert_int_equal(verify(kr, none, NULL, NOW), JWT_UNSUPPORTED_ALG);
    free(none);
    assert_true(asprintf(&none, "eyJhbGciOiJub25lIn0.%s.AAAA", pb) > 0);
    assert_int_equal(verify(kr, none, NULL, NOW), JWT_UNSUPPORTED_ALG);
    free(none);
    /* HS256 with the RSA public key's PEM text as the HMAC secret. */
    FILE *f = fopen(rsa_pem, "r");
    char pem[4096];
    size_t n = fread(pem, 1, sizeof pem, f);
    fclose(f);
    char *confused = mint_jwt("{\"alg\":\"HS256\"}", p, pem, n, NULL);
    assert_int_equal(verify(kr, confused, NULL, NOW), JWT_BAD_SIGNATURE);
    /* and with no HS256 secret configured at all, no key can verify it */
    char err[256];
    jwt_keyring *pem_only = jwt_keyring_new("", rsa_pem, "", "", 300, err, sizeof err);
    assert_non_null(pem_only);
    assert_int_equal(verify(pem_only, confused, NULL, NOW), JWT_NO_KEY);
    /* an RS256 token is not checked against the HMAC secret either */
    char *rs_by_hmac = mint_jwt("{\"alg\":\"RS256\"}", p, SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, rs_by_hmac, NULL, NOW), JWT_BAD_SIGNATURE);
    jwt_keyring_free(pem_only);
    free(rs_by_hmac);
    free(confused);
    /* algorithms we do not take, and crit */
    char *hs384 = mint_jwt("{\"alg\":\"HS384\"}", p, SECRET, strlen(SECRET), NULL);
    char *crit = mint_jwt("{\"alg\":\"HS256\",\"crit\":[\"x\"],\"x\":1}", p, SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, hs384, NULL, NOW), JWT_UNSUPPORTED_ALG);
    assert_int_equal(verify(kr, crit, NULL, NOW), JWT_UNSUPPORTED_ALG);
    free(hs384);
    free(crit);
    free(pb);
    free(p);
    jwt_keyring_free(kr);
}

static void exp_nbf_iss_and_aud_are_checked(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    jwt_rules leeway = {.leeway_s = 30};
    char *expired = payload(-60), *in_leeway = payload(-10);
    char *t1 = mint_jwt("{\"alg\":\"HS256\"}", expired, SECRET, strlen(SECRET), NULL);
    char *t2 = mint_jwt("{\"alg\":\"HS256\"}", in_leeway, SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, t1, &leeway, NOW), JWT_EXPIRED);
    assert_int_equal(verify(kr, t2, &leeway, NOW), JWT_OK);
    assert_int_equal(verify(kr, t2, NULL, NOW), JWT_EXPIRED); /* no leeway */
    free(t1);
    free(t2);
    char *nbf = NULL;
    assert_true(asprintf(&nbf, "{\"role\":\"read\",\"nbf\":%lld}", (long long)NOW + 120) > 0);
    t1 = mint_jwt("{\"alg\":\"HS256\"}", nbf, SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, t1, &leeway, NOW), JWT_NOT_YET_VALID);
    assert_int_equal(verify(kr, t1, &leeway, NOW + 100), JWT_OK); /* within the leeway of nbf */
    free(t1);
    free(nbf);
    t1 = mint_jwt("{\"alg\":\"HS256\"}", "{\"exp\":\"tomorrow\"}", SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, t1, NULL, NOW), JWT_MALFORMED);
    free(t1);
    jwt_rules who = {.issuer = "https://issuer.test", .audience = "queen"};
    char *good = mint_jwt("{\"alg\":\"HS256\"}", "{\"iss\":\"https://issuer.test\",\"aud\":[\"x\",\"queen\"]}", SECRET,
                          strlen(SECRET), NULL);
    char *bad_iss = mint_jwt("{\"alg\":\"HS256\"}", "{\"iss\":\"https://evil.test\",\"aud\":\"queen\"}", SECRET,
                             strlen(SECRET), NULL);
    char *bad_aud = mint_jwt("{\"alg\":\"HS256\"}", "{\"iss\":\"https://issuer.test\",\"aud\":\"other\"}", SECRET,
                             strlen(SECRET), NULL);
    char *no_aud = mint_jwt("{\"alg\":\"HS256\"}", "{\"iss\":\"https://issuer.test\"}", SECRET, strlen(SECRET), NULL);
    assert_int_equal(verify(kr, good, &who, NOW), JWT_OK);
    assert_int_equal(verify(kr, bad_iss, &who, NOW), JWT_BAD_ISSUER);
    assert_int_equal(verify(kr, bad_aud, &who, NOW), JWT_BAD_AUDIENCE);
    assert_int_equal(verify(kr, no_aud, &who, NOW), JWT_BAD_AUDIENCE);
    assert_int_equal(verify(kr, bad_aud, NULL, NOW), JWT_OK); /* not configured: not checked */
    free(good);
    free(bad_iss);
    free(bad_aud);
    free(no_aud);
    free(expired);
    free(in_leeway);
    jwt_keyring_free(kr);
}

/* Whether token verifies at now within ms of asking (the refresher's fetch
 * lands meanwhile), polled every 5 ms. */
static bool verified_within(jwt_keyring *kr, const char *token, time_t now, int ms)
{
    for (int waited = 0;; waited += 5) {
        if (verify(kr, token, NULL, now) == JWT_OK)
            return true;
        if (waited >= ms)
            return false;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void a_jwks_rotation_is_picked_up_by_kid(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring(); /* loaded the JWKS holding ec-1 */
    char *p = payload(100000);
    char *old = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"ec-1\"}", p, NULL, 0, ec);
    char *fresh = mint_jwt("{\"alg\":\"ES256\",\"kid\":\"ec-2\"}", p, NULL, 0, ec_other);
    assert_int_equal(verify(kr, old, NULL, NOW), JWT_OK);
    assert_int_equal(verify(kr, fresh, NULL, NOW), JWT_NO_KEY);
    /* The issuer rotates: the set now holds ec-2 only. Within the refetch
     * interval the old set stays; past it, the unknown kid fetches again. */
    write_jwks(ec_other, "ec-2");
    assert_int_equal(verify(kr, fresh, NULL, NOW + 1), JWT_NO_KEY);
    /* The fetch runs on the keyring's thread: the token that asked for it is
     * refused at once, and a later one finds the new set. */
    assert_int_equal(verify(kr, fresh, NULL, NOW + JWT_JWKS_MIN_REFETCH_S + 1), JWT_NO_KEY);
    assert_true(verified_within(kr, fresh, NOW + JWT_JWKS_MIN_REFETCH_S + 1, 10000));
    assert_int_equal(verify(kr, old, NULL, NOW + JWT_JWKS_MIN_REFETCH_S + 1), JWT_NO_KEY);
    /* An EdDSA JWK works the same way. */
    write_jwks(ed, "ed-1");
    char *edt = mint_jwt("{\"alg\":\"EdDSA\",\"kid\":\"ed-1\"}", p, NULL, 0, ed);
    assert_true(verified_within(kr, edt, NOW + 2 * JWT_JWKS_MIN_REFETCH_S + 2, 10000));
    write_jwks(ec, "ec-1");
    free(edt);
    free(old);
    free(fresh);
    free(p);
    jwt_keyring_free(kr);
}

static void malformed_tokens_are_refused_never_a_crash(void **state)
{
    (void)state;
    jwt_keyring *kr = keyring();
    char *p = payload(600);
    char *good = mint_jwt("{\"alg\":\"HS256\"}", p, SECRET, strlen(SECRET), NULL);
    char *big = malloc(100 * 1024 + 1);
    memset(big, 'a', 100 * 1024);
    big[100 * 1024] = '\0';
    big[10] = '.';
    big[20] = '.';
    char *not_json = mint_jwt("{\"alg\":\"HS256\"}", "not json", SECRET, strlen(SECRET), NULL);
    char *array_header = mint_jwt("[1,2]", p, SECRET, strlen(SECRET), NULL);
    char *payload_array = mint_jwt("{\"alg\":\"HS256\"}", "[\"role\"]", SECRET, strlen(SECRET), NULL);
    char *dup = mint_jwt("{\"alg\":\"HS256\",\"alg\":\"none\"}", p, SECRET, strlen(SECRET), NULL);
    char *kid_number = mint_jwt("{\"alg\":\"HS256\",\"kid\":5}", p, SECRET, strlen(SECRET), NULL);
    const char *shapes[] = {"", ".", "..", "a.b", "a.b.c.d", "!!!.###.$$$", "eyJhbGciOiJIUzI1NiJ9..",
                            "eyJhbGciOiJIUzI1NiJ9.e30.a", big, not_json, array_header, payload_array, dup,
                            kid_number};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        jwt_fault f = verify(kr, shapes[i], NULL, NOW);
        if (f != JWT_MALFORMED)
            fail_msg("shape %zu: %s", i, jwt_fault_reason(f));
    }
    /* A good token cut at every length. */
    assert_int_equal(verify(kr, good, NULL, NOW), JWT_OK);
    for (size_t n = 0; n < strlen(good); n++) {
        json_t *claims = NULL;
        assert_int_not_equal(jwt_verify(kr, good, n, NULL, NOW, &claims), JWT_OK);
        assert_null(claims);
    }
    free(good);
    free(big);
    free(not_json);
    free(array_header);
    free(payload_array);
    free(dup);
    free(kid_number);
    free(p);
    jwt_keyring_free(kr);
}

static void base64url_is_strict(void **state)
{
    (void)state;
    size_t n = 0;
    unsigned char *v = jwt_b64url_decode("aGk", 3, &n);
    assert_non_null(v);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "hi", 2);
    free(v);
    assert_null(jwt_b64url_decode("aGk=", 4, &n)); /* padding */
    assert_null(jwt_b64url_decode("aGl", 3, &n));  /* non-zero leftover bits */
    assert_null(jwt_b64url_decode("a+/b", 4, &n)); /* base64, not base64url */
    assert_null(jwt_b64url_decode("a", 1, &n));
}

static void a_keyring_needs_a_loadable_key(void **state)
{
    (void)state;
    char err[256];
    assert_null(jwt_keyring_new("", "", "", "", 300, err, sizeof err));
    assert_non_null(strstr(err, "QUEEN_JWT_SECRET"));
    assert_null(jwt_keyring_new("", "/nonexistent.pem", "", "", 300, err, sizeof err));
    assert_null(jwt_keyring_new("", "", "/nonexistent.json", "", 300, err, sizeof err));
    /* A secret never appears in what the keyring says. */
    assert_null(jwt_keyring_new("topsecret", "/nonexistent.pem", "", "", 300, err, sizeof err));
    assert_null(strstr(err, "topsecret"));
}

/* Only /health and the console's files are open: every other row of the
 * route table names a role (its role, resources and access live in the
 * one table, routes.c, that authorisation reads). */
static void only_health_and_the_console_are_open(void **state)
{
    (void)state;
    for (size_t i = 0; i < http_route_count; i++) {
        const char *p = http_routes[i].pattern;
        bool open = strcmp(p, "/health") == 0 || strcmp(p, "/") == 0 || strcmp(p, "/console/") == 0 ||
                    strcmp(p, "/console/*file") == 0;
        if ((http_routes[i].role == ROLE_NONE) != open)
            fail_msg("%s %s: role %d", http_routes[i].method, p, (int)http_routes[i].role);
        if (http_routes[i].role != ROLE_NONE && http_routes[i].resource == RES_NONE &&
            strcmp(p, "/api/v1/status") != 0 && strcmp(p, "/api/v1/stats/refresh") != 0)
            fail_msg("%s %s needs a role but names no resource", http_routes[i].method, p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_algorithm_verifies_with_its_key),
        cmocka_unit_test(a_token_signed_with_another_key_is_refused),
        cmocka_unit_test(a_tampered_payload_is_refused),
        cmocka_unit_test(alg_none_and_algorithm_confusion_are_refused),
        cmocka_unit_test(exp_nbf_iss_and_aud_are_checked),
        cmocka_unit_test(a_jwks_rotation_is_picked_up_by_kid),
        cmocka_unit_test(malformed_tokens_are_refused_never_a_crash),
        cmocka_unit_test(base64url_is_strict),
        cmocka_unit_test(a_keyring_needs_a_loadable_key),
        cmocka_unit_test(only_health_and_the_console_are_open),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
