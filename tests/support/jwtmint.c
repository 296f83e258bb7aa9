/* jwtmint: test keys and tokens (see jwtmint.h). */
#include "jwtmint.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "jwtmint: %s failed\n", what);
    abort();
}

EVP_PKEY *mint_keygen(const char *type)
{
    EVP_PKEY *k = strcmp(type, "RSA") == 0  ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
                  : strcmp(type, "EC") == 0 ? EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")
                                            : EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (k == NULL)
        die("keygen");
    return k;
}

char *mint_b64url(const void *data, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *p = data;
    char *out = malloc(len / 3 * 4 + 5);
    if (out == NULL)
        die("malloc");
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        out[o++] = abc[v >> 18];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = abc[(v >> 6) & 63];
        out[o++] = abc[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned)p[i] << 16;
        out[o++] = abc[v >> 18];
        out[o++] = abc[(v >> 12) & 63];
    } else if (len - i == 2) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;
        out[o++] = abc[v >> 18];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = abc[(v >> 6) & 63];
    }
    out[o] = '\0';
    return out;
}

/* DER ECDSA signature -> the r||s JWS carries. */
static size_t ecdsa_raw(const unsigned char *der, size_t der_len, unsigned char out[64])
{
    const unsigned char *p = der;
    ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (s == NULL)
        die("d2i_ECDSA_SIG");
    const BIGNUM *r = NULL, *ss = NULL;
    ECDSA_SIG_get0(s, &r, &ss);
    if (BN_bn2binpad(r, out, 32) != 32 || BN_bn2binpad(ss, out + 32, 32) != 32)
        die("BN_bn2binpad");
    ECDSA_SIG_free(s);
    return 64;
}

char *mint_jwt(const char *header_json, const char *payload_json, const void *secret, size_t secret_len,
               EVP_PKEY *key)
{
    char *h = mint_b64url(header_json, strlen(header_json)), *p = mint_b64url(payload_json, strlen(payload_json));
    size_t in_len = strlen(h) + 1 + strlen(p);
    char *input = malloc(in_len + 1);
    if (input == NULL)
        die("malloc");
    snprintf(input, in_len + 1, "%s.%s", h, p);
    unsigned char sig[1024];
    size_t sig_len = sizeof sig;
    if (key == NULL) {
        unsigned n = 0;
        if (HMAC(EVP_sha256(), secret, (int)secret_len, (const unsigned char *)input, in_len, sig, &n) == NULL)
            die("HMAC");
        sig_len = n;
    } else {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        const EVP_MD *md = EVP_PKEY_is_a(key, "ED25519") ? NULL : EVP_sha256();
        if (ctx == NULL || EVP_DigestSignInit(ctx, NULL, md, NULL, key) != 1 ||
            EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)input, in_len) != 1)
            die("EVP_DigestSign");
        EVP_MD_CTX_free(ctx);
        if (EVP_PKEY_is_a(key, "EC")) {
            unsigned char raw[64];
            sig_len = ecdsa_raw(sig, sig_len, raw);
            memcpy(sig, raw, 64);
        }
    }
    char *s = mint_b64url(sig, sig_len);
    char *out = malloc(in_len + 2 + strlen(s));
    if (out == NULL)
        die("malloc");
    sprintf(out, "%s.%s", input, s);
    free(h);
    free(p);
    free(input);
    free(s);
    return out;
}

void mint_write_public_pem(EVP_PKEY *key, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || PEM_write_PUBKEY(f, key) != 1)
        die("PEM_write_PUBKEY");
    fclose(f);
}

static char *bn_b64(EVP_PKEY *key, const char *param)
{
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param(key, param, &bn) != 1)
        die("EVP_PKEY_get_bn_param");
    unsigned char buf[1024];
    int n = BN_bn2bin(bn, buf);
    BN_free(bn);
    return mint_b64url(buf, (size_t)n);
}

char *mint_jwk(EVP_PKEY *key, const char *kid)
{
    char *out = NULL;
    if (EVP_PKEY_is_a(key, "RSA")) {
        char *n = bn_b64(key, OSSL_PKEY_PARAM_RSA_N), *e = bn_b64(key, OSSL_PKEY_PARAM_RSA_E);
        if (asprintf(&out, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\"%s\",\"e\":\"%s\"}",
                     kid, n, e) < 0)
            die("asprintf");
        free(n);
        free(e);
    } else if (EVP_PKEY_is_a(key, "EC")) {
        unsigned char point[65];
        size_t len = 0;
        if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len) != 1 || len != 65)
            die("EC public point");
        char *x = mint_b64url(point + 1, 32), *y = mint_b64url(point + 33, 32);
        if (asprintf(&out, "{\"kty\":\"EC\",\"kid\":\"%s\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}", kid, x, y) < 0)
            die("asprintf");
        free(x);
        free(y);
    } else {
        unsigned char raw[32];
        size_t len = sizeof raw;
        if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1)
            die("raw public key");
        char *x = mint_b64url(raw, len);
        if (asprintf(&out, "{\"kty\":\"OKP\",\"kid\":\"%s\",\"crv\":\"Ed25519\",\"x\":\"%s\"}", kid, x) < 0)
            die("asprintf");
        free(x);
    }
    return out;
}
