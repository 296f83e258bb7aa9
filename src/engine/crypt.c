/* crypt: see crypt.h. */
#include "crypt.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX "qenc:v1:"

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool parse_hex_key(const char *s, size_t len, unsigned char out[32])
{
    if (len != 64)
        return false;
    for (size_t i = 0; i < 32; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static bool id_ok(const char *s, size_t len)
{
    if (len == 0 || len > CRYPT_KEY_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int crypt_keyring_parse(const char *spec, crypt_keyring *kr, char *why, size_t why_len)
{
    memset(kr, 0, sizeof *kr);
    if (spec == NULL || spec[0] == '\0')
        return 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        if (kr->n == CRYPT_MAX_KEYS) {
            snprintf(why, why_len, "QUEEN_ENCRYPTION_KEY holds more than %d keys", CRYPT_MAX_KEYS);
            return -1;
        }
        const char *hex = colon ? colon + 1 : p;
        size_t hex_len = colon ? len - (size_t)(colon + 1 - p) : len;
        if (colon == NULL && (kr->n > 0 || end != NULL)) {
            snprintf(why, why_len, "QUEEN_ENCRYPTION_KEY: with several keys each is ID:HEX");
            return -1;
        }
        if (colon != NULL && !id_ok(p, (size_t)(colon - p))) {
            snprintf(why, why_len, "QUEEN_ENCRYPTION_KEY: key %d's id must be 1..32 of A-Z a-z 0-9 _ -", kr->n + 1);
            return -1;
        }
        if (!parse_hex_key(hex, hex_len, kr->keys[kr->n].key)) {
            snprintf(why, why_len, "QUEEN_ENCRYPTION_KEY: key %d must be 64 hex digits (32 bytes)", kr->n + 1);
            memset(kr, 0, sizeof *kr);
            return -1;
        }
        if (colon)
            memcpy(kr->keys[kr->n].id, p, (size_t)(colon - p));
        else
            memcpy(kr->keys[kr->n].id, "k0", 3);
        for (int i = 0; i < kr->n; i++)
            if (strcmp(kr->keys[i].id, kr->keys[kr->n].id) == 0) {
                snprintf(why, why_len, "QUEEN_ENCRYPTION_KEY: key id %s appears twice", kr->keys[i].id);
                memset(kr, 0, sizeof *kr);
                return -1;
            }
        kr->n++;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

void crypt_keyring_clear(crypt_keyring *kr)
{
    OPENSSL_cleanse(kr, sizeof *kr);
}

/* GCM one way or the other; 0 or -1. out receives len bytes; tag in/out. */
static int gcm(bool seal, const unsigned char key[32], const unsigned char nonce[NONCE_LEN], const char *aad,
               const unsigned char *in, int len, unsigned char *out, unsigned char tag[TAG_LEN])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, ok = ctx != NULL;
    ok = ok && (seal ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
                     : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1;
    ok = ok && (seal ? EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) : EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce)) == 1;
    ok = ok && (seal ? EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad))
                     : EVP_DecryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad))) == 1;
    ok = ok && (len == 0 || (seal ? EVP_EncryptUpdate(ctx, out, &n, in, len) : EVP_DecryptUpdate(ctx, out, &n, in, len)) == 1);
    if (ok && !seal)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1;
    ok = ok && (seal ? EVP_EncryptFinal_ex(ctx, out + len, &n) : EVP_DecryptFinal_ex(ctx, out + len, &n)) == 1;
    if (ok && seal)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -1;
}

char *crypt_seal(const crypt_keyring *kr, const char *tenant, const char *plain, size_t len)
{
    if (kr == NULL || kr->n == 0 || len > (1u << 30))
        return NULL;
    unsigned char nonce[NONCE_LEN];
    unsigned char *ct = malloc(len + TAG_LEN + 1);
    size_t b64_ct = 4 * ((len + TAG_LEN + 2) / 3), cap = strlen(PREFIX) + CRYPT_KEY_ID_MAX + 64 + b64_ct + 8;
    char *out = malloc(cap);
    if (ct == NULL || out == NULL || RAND_bytes(nonce, NONCE_LEN) != 1 ||
        gcm(true, kr->keys[0].key, nonce, tenant, (const unsigned char *)plain, (int)len, ct, ct + len) != 0) {
        free(ct);
        free(out);
        return NULL;
    }
    int at = snprintf(out, cap, "\"" PREFIX "%s:", kr->keys[0].id);
    at += EVP_EncodeBlock((unsigned char *)out + at, nonce, NONCE_LEN);
    out[at++] = ':';
    at += EVP_EncodeBlock((unsigned char *)out + at, ct, (int)(len + TAG_LEN));
    out[at++] = '"';
    out[at] = '\0';
    free(ct);
    return out;
}

/* Base64 text [s, s+len) decoded into out (cap bytes); its length or -1. */
static long b64_decode(const char *s, size_t len, unsigned char *out, size_t cap)
{
    if (len == 0 || len % 4 != 0 || len / 4 * 3 > cap)
        return -1;
    int n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
    if (n < 0)
        return -1;
    size_t pad = (s[len - 1] == '=') + (s[len - 2] == '=');
    return (long)((size_t)n - pad);
}

/* Opens the token text between the quotes (t, len: "qenc:v1:..."); the
 * payload (malloc'd, *out_len) or NULL. */
static char *open_token(const crypt_keyring *kr, const char *tenant, const char *t, size_t len, size_t *out_len)
{
    const char *id = t + strlen(PREFIX), *end = t + len;
    const char *c1 = memchr(id, ':', (size_t)(end - id));
    const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
    if (c2 == NULL)
        return NULL;
    int k = -1;
    for (int i = 0; i < kr->n; i++)
        if (strlen(kr->keys[i].id) == (size_t)(c1 - id) && memcmp(kr->keys[i].id, id, (size_t)(c1 - id)) == 0)
            k = i;
    unsigned char nonce[NONCE_LEN + 3];
    size_t ct_len = (size_t)(end - c2 - 1);
    unsigned char *ct = malloc(ct_len + 3);
    char *plain = NULL;
    long nl = k < 0 ? -1 : b64_decode(c1 + 1, (size_t)(c2 - c1 - 1), nonce, sizeof nonce);
    long cl = nl == NONCE_LEN && ct ? b64_decode(c2 + 1, ct_len, ct, ct_len + 3) : -1;
    if (cl >= TAG_LEN && (plain = malloc((size_t)cl - TAG_LEN + 1)) != NULL &&
        gcm(false, kr->keys[k].key, nonce, tenant, ct, (int)(cl - TAG_LEN), (unsigned char *)plain,
            ct + cl - TAG_LEN) == 0) {
        plain[cl - TAG_LEN] = '\0';
        *out_len = (size_t)(cl - TAG_LEN);
    } else {
        free(plain);
        plain = NULL;
    }
    free(ct);
    return plain;
}

char *crypt_open_body(const crypt_keyring *kr, const char *tenant, const char *body)
{
    static const char needle[] = "\"data\": \"" PREFIX;
    if (kr == NULL || kr->n == 0 || body == NULL || strstr(body, needle) == NULL)
        return NULL;
    size_t cap = strlen(body) + 1, used = 0;
    char *out = malloc(cap);
    bool opened = false;
    const char *p = body, *hit;
    while (out != NULL && (hit = strstr(p, needle)) != NULL) {
        const char *tok = hit + strlen("\"data\": \""); /* after the opening quote */
        const char *close = strchr(tok, '"');
        size_t plen = 0;
        char *plain = close ? open_token(kr, tenant, tok, (size_t)(close - tok), &plen) : NULL;
        const char *upto = plain ? tok - 1 : (close ? close + 1 : tok);
        size_t keep = (size_t)(upto - p);
        size_t need = used + keep + (plain ? plen : 0) + strlen(upto) + 1;
        if (need > cap) {
            char *grown = realloc(out, need);
            if (grown == NULL) {
                free(out);
                free(plain);
                return NULL;
            }
            out = grown;
            cap = need;
        }
        memcpy(out + used, p, keep);
        used += keep;
        if (plain) {
            memcpy(out + used, plain, plen);
            used += plen;
            opened = true;
            p = close + 1;
        } else {
            p = upto;
        }
        free(plain);
    }
    if (out == NULL)
        return NULL;
    if (!opened) {
        free(out);
        return NULL;
    }
    size_t rest = strlen(p);
    if (used + rest + 1 > cap) {
        char *grown = realloc(out, used + rest + 1);
        if (grown == NULL) {
            free(out);
            return NULL;
        }
        out = grown;
    }
    memcpy(out + used, p, rest + 1);
    return out;
}
