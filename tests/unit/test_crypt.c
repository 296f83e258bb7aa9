/* crypt (src/engine/crypt.c): QUEEN_ENCRYPTION_KEY parsing, seal/open round
 * trips byte for byte, a payload sealed for one tenant never opening for
 * another, altered bytes and unknown key ids left sealed, rotation (sealed
 * with an old key, opened by a ring whose first key is new), and the body
 * scanner opening every "data" of a pop body and nothing else. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypt.h"

#define HEX1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define HEX2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
#define T1 "11111111-1111-4111-8111-111111111111"
#define T2 "22222222-2222-4222-8222-222222222222"

static void keyring_parse(void **state)
{
    (void)state;
    crypt_keyring kr;
    char why[256];
    assert_int_equal(crypt_keyring_parse("", &kr, why, sizeof why), 0);
    assert_int_equal(kr.n, 0);
    assert_int_equal(crypt_keyring_parse(HEX1, &kr, why, sizeof why), 0);
    assert_int_equal(kr.n, 1);
    assert_string_equal(kr.keys[0].id, "k0");
    assert_int_equal(crypt_keyring_parse("new:" HEX2 ",old:" HEX1, &kr, why, sizeof why), 0);
    assert_int_equal(kr.n, 2);
    assert_string_equal(kr.keys[0].id, "new");
    assert_int_equal(crypt_keyring_parse("abc", &kr, why, sizeof why), -1);
    assert_null(strstr(why, "abc")); /* never quotes key material */
    assert_int_equal(crypt_keyring_parse(HEX1 ",k2:" HEX2, &kr, why, sizeof why), -1);
    assert_int_equal(crypt_keyring_parse("a:" HEX1 ",a:" HEX2, &kr, why, sizeof why), -1);
    assert_int_equal(crypt_keyring_parse("b@d:" HEX1, &kr, why, sizeof why), -1);
    assert_int_equal(crypt_keyring_parse("k:" HEX1 "0", &kr, why, sizeof why), -1);
    assert_int_equal(kr.n, 0);
}

/* "{...,"data": <token>,...}" around a sealed token, then opened. */
static char *open_data(const crypt_keyring *kr, const char *tenant, const char *token)
{
    char *body = malloc(strlen(token) + 64);
    sprintf(body, "{\"id\": 1, \"data\": %s, \"queue\": \"q\"}", token);
    char *opened = crypt_open_body(kr, tenant, body);
    free(body);
    return opened;
}

static void seal_and_open(void **state)
{
    (void)state;
    crypt_keyring kr;
    char why[256];
    assert_int_equal(crypt_keyring_parse(HEX1, &kr, why, sizeof why), 0);
    const char *plain = "{\"n\": 0.1, \"big\": 12345678901234567890, \"s\": \"\\u00e9\"}";
    char *tok = crypt_seal(&kr, T1, plain, strlen(plain));
    assert_non_null(tok);
    assert_null(strstr(tok, "12345678901234567890"));
    assert_int_equal(strncmp(tok, "\"qenc:v1:k0:", 12), 0);
    char *other = crypt_seal(&kr, T1, plain, strlen(plain));
    assert_string_not_equal(tok, other); /* a fresh nonce each time */
    free(other);
    char *opened = open_data(&kr, T1, tok);
    assert_non_null(opened);
    char want[256];
    sprintf(want, "{\"id\": 1, \"data\": %s, \"queue\": \"q\"}", plain);
    assert_string_equal(opened, want);
    free(opened);
    /* Another tenant: stays sealed. */
    assert_null(open_data(&kr, T2, tok));
    /* One altered byte of the ciphertext: stays sealed. */
    size_t n = strlen(tok);
    tok[n - 5] = tok[n - 5] == 'A' ? 'B' : 'A';
    assert_null(open_data(&kr, T1, tok));
    free(tok);
    /* The empty payload text still round-trips (as nothing). */
    tok = crypt_seal(&kr, T1, "", 0);
    opened = open_data(&kr, T1, tok);
    assert_string_equal(opened, "{\"id\": 1, \"data\": , \"queue\": \"q\"}");
    free(opened);
    free(tok);
    crypt_keyring_clear(&kr);
    assert_int_equal(kr.n, 0);
}

static void rotation(void **state)
{
    (void)state;
    crypt_keyring old, ring, other;
    char why[256];
    assert_int_equal(crypt_keyring_parse("old:" HEX1, &old, why, sizeof why), 0);
    assert_int_equal(crypt_keyring_parse("new:" HEX2 ",old:" HEX1, &ring, why, sizeof why), 0);
    assert_int_equal(crypt_keyring_parse("new:" HEX2, &other, why, sizeof why), 0);
    char *tok = crypt_seal(&old, T1, "42", 2);
    char *opened = open_data(&ring, T1, tok);
    assert_non_null(opened);
    assert_non_null(strstr(opened, "\"data\": 42,"));
    free(opened);
    assert_null(open_data(&other, T1, tok)); /* the old key retired: unknown id */
    char *fresh = crypt_seal(&ring, T1, "7", 1);
    assert_int_equal(strncmp(fresh, "\"qenc:v1:new:", 13), 0);
    free(fresh);
    free(tok);
}

static void body_scanner(void **state)
{
    (void)state;
    crypt_keyring kr;
    char why[256];
    assert_int_equal(crypt_keyring_parse(HEX1, &kr, why, sizeof why), 0);
    char *a = crypt_seal(&kr, T1, "[1]", 3), *b = crypt_seal(&kr, T1, "\"x\"", 3);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"messages\": [{\"data\": %s, \"n\": 1}, {\"data\": \"plain\"}, {\"data\": %s}], \"note\": %s}", a, b, a);
    char *opened = crypt_open_body(&kr, T1, body);
    char want[1024];
    snprintf(want, sizeof want, "{\"messages\": [{\"data\": [1], \"n\": 1}, {\"data\": \"plain\"}, {\"data\": \"x\"}], \"note\": %s}",
             a);
    assert_string_equal(opened, want); /* only "data" members are opened */
    free(opened);
    assert_null(crypt_open_body(&kr, T1, "{\"data\": \"plain\"}"));
    crypt_keyring none = {0};
    assert_null(crypt_open_body(&none, T1, body));
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keyring_parse),
        cmocka_unit_test(seal_and_open),
        cmocka_unit_test(rotation),
        cmocka_unit_test(body_scanner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
