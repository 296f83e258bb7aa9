/* crypt (src/engine/crypt.c): QUEEN_ENCRYPTION_KEY parsing, seal/open round
 * trips byte for byte, a payload sealed for one place (tenant, queue,
 * partition, transactionId) never opening at another (each field moved in
 * turn, and names whose bytes run together differently), altered bytes and
 * unknown key ids reported as such, no key at all reported as such, rotation
 * (sealed with an old key, opened by a ring whose first key is new), and the
 * first format (qenc:v1, the tenant alone) still opening. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypt.h"

#define HEX1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define HEX2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
#define T1 "11111111-1111-4111-8111-111111111111"
#define T2 "22222222-2222-4222-8222-222222222222"

static const crypt_place P1 = {T1, "orders", "Default", "tx-1"};

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

/* Opens a sealed token (quotes included) at place at: the verdict, and the
 * payload text in *plain (NULL unless opened). */
static crypt_verdict open_tok(const crypt_keyring *kr, const crypt_place *at, const char *tok, char **plain)
{
    size_t len = 0;
    return crypt_open(kr, at, tok + 1, strlen(tok) - 2, plain, &len);
}

static void seal_and_open(void **state)
{
    (void)state;
    crypt_keyring kr;
    char why[256];
    assert_int_equal(crypt_keyring_parse(HEX1, &kr, why, sizeof why), 0);
    const char *plain = "{\"n\": 0.1, \"big\": 12345678901234567890, \"s\": \"\\u00e9\"}";
    char *tok = crypt_seal(&kr, &P1, plain, strlen(plain));
    assert_non_null(tok);
    assert_null(strstr(tok, "12345678901234567890"));
    assert_int_equal(strncmp(tok, "\"qenc:v2:k0:", 12), 0);
    assert_true(crypt_is_envelope(tok + 1, strlen(tok) - 2));
    char *other = crypt_seal(&kr, &P1, plain, strlen(plain));
    assert_string_not_equal(tok, other); /* a fresh nonce each time */
    free(other);
    char *opened = NULL;
    assert_int_equal(open_tok(&kr, &P1, tok, &opened), CRYPT_OPENED);
    assert_string_equal(opened, plain);
    free(opened);
    /* Moved anywhere else: another tenant, queue, partition or message. */
    const crypt_place moved[] = {{T2, "orders", "Default", "tx-1"},
                                 {T1, "orders2", "Default", "tx-1"},
                                 {T1, "orders", "p2", "tx-1"},
                                 {T1, "orders", "Default", "tx-2"},
                                 {T1, "ordersDefault", "", "tx-1"}};
    for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++) {
        assert_int_equal(open_tok(&kr, &moved[i], tok, &opened), CRYPT_FAILED);
        assert_null(opened);
    }
    /* One altered byte of the ciphertext. */
    size_t n = strlen(tok);
    tok[n - 5] = tok[n - 5] == 'A' ? 'B' : 'A';
    assert_int_equal(open_tok(&kr, &P1, tok, &opened), CRYPT_FAILED);
    assert_string_equal(crypt_verdict_reason(CRYPT_FAILED), "encryption_open_failed");
    free(tok);
    /* No key at all. */
    crypt_keyring none = {0};
    tok = crypt_seal(&kr, &P1, "1", 1);
    assert_null(crypt_seal(&none, &P1, "1", 1));
    assert_int_equal(open_tok(&none, &P1, tok, &opened), CRYPT_NO_KEY);
    assert_string_equal(crypt_verdict_reason(CRYPT_NO_KEY), "encryption_key_missing");
    /* Another key under the same id: fails, as altered bytes do. */
    crypt_keyring changed;
    assert_int_equal(crypt_keyring_parse(HEX2, &changed, why, sizeof why), 0);
    assert_int_equal(open_tok(&changed, &P1, tok, &opened), CRYPT_FAILED);
    free(tok);
    /* The empty payload text still round-trips (as nothing). */
    tok = crypt_seal(&kr, &P1, "", 0);
    assert_int_equal(open_tok(&kr, &P1, tok, &opened), CRYPT_OPENED);
    assert_string_equal(opened, "");
    free(opened);
    free(tok);
    /* Not an envelope. */
    assert_false(crypt_is_envelope("qenc:v3:k0:a:b", 14));
    assert_false(crypt_is_envelope("plain", 5));
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
    char *tok = crypt_seal(&old, &P1, "42", 2), *opened = NULL;
    assert_int_equal(open_tok(&ring, &P1, tok, &opened), CRYPT_OPENED);
    assert_string_equal(opened, "42");
    free(opened);
    assert_int_equal(open_tok(&other, &P1, tok, &opened), CRYPT_UNKNOWN_KEY); /* the old key retired */
    assert_string_equal(crypt_verdict_reason(CRYPT_UNKNOWN_KEY), "encryption_key_unknown");
    char *fresh = crypt_seal(&ring, &P1, "7", 1);
    assert_int_equal(strncmp(fresh, "\"qenc:v2:new:", 13), 0);
    free(fresh);
    free(tok);
}

/* A qenc:v1 envelope as the first format made it: AES-256-GCM with the
 * tenant alone as authenticated data. Built here with OpenSSL directly. */
static char *v1_token(const unsigned char key[32], const char *tenant, const char *plain)
{
    unsigned char nonce[12], ct[256], tag[16];
    int n = 0, len = (int)strlen(plain);
    assert_int_equal(RAND_bytes(nonce, sizeof nonce), 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    assert_int_equal(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce), 1);
    assert_int_equal(EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)tenant, (int)strlen(tenant)), 1);
    assert_int_equal(EVP_EncryptUpdate(ctx, ct, &n, (const unsigned char *)plain, len), 1);
    assert_int_equal(EVP_EncryptFinal_ex(ctx, ct + len, &n), 1);
    assert_int_equal(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag), 1);
    EVP_CIPHER_CTX_free(ctx);
    memcpy(ct + len, tag, 16);
    char *out = malloc(512);
    int at = sprintf(out, "\"qenc:v1:k0:");
    at += EVP_EncodeBlock((unsigned char *)out + at, nonce, 12);
    out[at++] = ':';
    at += EVP_EncodeBlock((unsigned char *)out + at, ct, len + 16);
    strcpy(out + at, "\"");
    return out;
}

static void first_format(void **state)
{
    (void)state;
    crypt_keyring kr;
    char why[256];
    assert_int_equal(crypt_keyring_parse(HEX1, &kr, why, sizeof why), 0);
    char *tok = v1_token(kr.keys[0].key, T1, "[\"old\"]"), *opened = NULL;
    assert_true(crypt_is_envelope(tok + 1, strlen(tok) - 2));
    assert_int_equal(open_tok(&kr, &P1, tok, &opened), CRYPT_OPENED);
    assert_string_equal(opened, "[\"old\"]");
    free(opened);
    const crypt_place t2 = {T2, "orders", "Default", "tx-1"};
    assert_int_equal(open_tok(&kr, &t2, tok, &opened), CRYPT_FAILED);
    free(tok);
}

static void uuid4(void **state)
{
    (void)state;
    char a[37], b[37];
    assert_true(crypt_uuid4(a));
    assert_true(crypt_uuid4(b));
    assert_int_equal(strlen(a), 36);
    assert_string_not_equal(a, b);
    assert_int_equal(a[14], '4');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keyring_parse),
        cmocka_unit_test(seal_and_open),
        cmocka_unit_test(rotation),
        cmocka_unit_test(first_format),
        cmocka_unit_test(uuid4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
