/* crypt: see crypt.h. */
#include "crypt.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX_V1 "qenc:v1:"
#define PREFIX_V2 "qenc:v2:"

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
static int gcm(bool seal, const unsigned char key[32], const unsigned char nonce[NONCE_LEN], const unsigned char *aad,
               size_t aad_len, const unsigned char *in, int len, unsigned char *out, unsigned char tag[TAG_LEN])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, ok = ctx != NULL && aad_len <= INT_MAX;
    ok = ok && (seal ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
                     : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1;
    ok = ok && (seal ? EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) : EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce)) == 1;
    ok = ok && (seal ? EVP_EncryptUpdate(ctx, NULL, &n, aad, (int)aad_len)
                     : EVP_DecryptUpdate(ctx, NULL, &n, aad, (int)aad_len)) == 1;
    ok = ok && (len == 0 || (seal ? EVP_EncryptUpdate(ctx, out, &n, in, len) : EVP_DecryptUpdate(ctx, out, &n, in, len)) == 1);
    if (ok && !seal)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1;
    ok = ok && (seal ? EVP_EncryptFinal_ex(ctx, out + len, &n) : EVP_DecryptFinal_ex(ctx, out + len, &n)) == 1;
    if (ok && seal)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -1;
}

/* The v2 authenticated data of a place: the format's name, then each field
 * as a 4-byte big-endian length and its bytes. Lengths, not separators: no
 * two places give the same bytes whatever their names hold ("a:b" + "c" is
 * not "a" + "b:c"). malloc'd, *len set; NULL on a missing field. */
static unsigned char *place_aad(const crypt_place *at, size_t *len)
{
    const char *f[] = {at->tenant, at->queue, at->partition, at->transaction_id};
    size_t n = strlen(PREFIX_V2);
    for (size_t i = 0; i < 4; i++) {
        if (f[i] == NULL || strlen(f[i]) > UINT32_MAX)
            return NULL;
        n += 4 + strlen(f[i]);
    }
    unsigned char *a = malloc(n), *w = a;
    if (a == NULL)
        return NULL;
    memcpy(w, PREFIX_V2, strlen(PREFIX_V2));
    w += strlen(PREFIX_V2);
    for (size_t i = 0; i < 4; i++) {
        uint32_t l = (uint32_t)strlen(f[i]);
        *w++ = (unsigned char)(l >> 24);
        *w++ = (unsigned char)(l >> 16);
        *w++ = (unsigned char)(l >> 8);
        *w++ = (unsigned char)l;
        memcpy(w, f[i], l);
        w += l;
    }
    *len = n;
    return a;
}

char *crypt_seal(const crypt_keyring *kr, const crypt_place *at, const char *plain, size_t len)
{
    if (kr == NULL || kr->n == 0 || at == NULL || len > (1u << 30))
        return NULL;
    unsigned char nonce[NONCE_LEN];
    size_t aad_len = 0;
    unsigned char *aad = place_aad(at, &aad_len);
    unsigned char *ct = malloc(len + TAG_LEN + 1);
    size_t b64_ct = 4 * ((len + TAG_LEN + 2) / 3), cap = strlen(PREFIX_V2) + CRYPT_KEY_ID_MAX + 64 + b64_ct + 8;
    char *out = malloc(cap);
    if (aad == NULL || ct == NULL || out == NULL || RAND_bytes(nonce, NONCE_LEN) != 1 ||
        gcm(true, kr->keys[0].key, nonce, aad, aad_len, (const unsigned char *)plain, (int)len, ct, ct + len) != 0) {
        free(aad);
        free(ct);
        free(out);
        return NULL;
    }
    int pos = snprintf(out, cap, "\"" PREFIX_V2 "%s:", kr->keys[0].id);
    pos += EVP_EncodeBlock((unsigned char *)out + pos, nonce, NONCE_LEN);
    out[pos++] = ':';
    pos += EVP_EncodeBlock((unsigned char *)out + pos, ct, (int)(len + TAG_LEN));
    out[pos++] = '"';
    out[pos] = '\0';
    free(aad);
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

const char *crypt_verdict_reason(crypt_verdict v)
{
    switch (v) {
    case CRYPT_OPENED:
        return "ok";
    case CRYPT_NO_KEY:
        return "encryption_key_missing";
    case CRYPT_UNKNOWN_KEY:
        return "encryption_key_unknown";
    case CRYPT_FAILED:
        break;
    }
    return "encryption_open_failed";
}

bool crypt_is_envelope(const char *t, size_t len)
{
    return len >= strlen(PREFIX_V2) &&
           (memcmp(t, PREFIX_V2, strlen(PREFIX_V2)) == 0 || memcmp(t, PREFIX_V1, strlen(PREFIX_V1)) == 0);
}

crypt_verdict crypt_open(const crypt_keyring *kr, const crypt_place *at, const char *t, size_t len, char **plain,
                         size_t *plain_len)
{
    *plain = NULL;
    *plain_len = 0;
    if (kr == NULL || kr->n == 0)
        return CRYPT_NO_KEY;
    if (at == NULL || at->tenant == NULL || !crypt_is_envelope(t, len))
        return CRYPT_FAILED;
    bool v2 = memcmp(t, PREFIX_V2, strlen(PREFIX_V2)) == 0;
    const char *id = t + strlen(PREFIX_V2), *end = t + len;
    const char *c1 = memchr(id, ':', (size_t)(end - id));
    const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
    if (c2 == NULL)
        return CRYPT_FAILED;
    int k = -1;
    for (int i = 0; i < kr->n; i++)
        if (strlen(kr->keys[i].id) == (size_t)(c1 - id) && memcmp(kr->keys[i].id, id, (size_t)(c1 - id)) == 0)
            k = i;
    if (k < 0)
        return CRYPT_UNKNOWN_KEY;
    size_t aad_len = 0;
    /* v1 bound the tenant only: it opens for its tenant wherever it sits,
     * which is why the caller opens only a stored message's own payload of
     * an encrypted queue (encryption.c), never a string pushed elsewhere. */
    unsigned char *aad = v2 ? place_aad(at, &aad_len) : (unsigned char *)strdup(at->tenant);
    if (aad != NULL && !v2)
        aad_len = strlen(at->tenant);
    unsigned char nonce[NONCE_LEN + 3];
    size_t ct_len = (size_t)(end - c2 - 1);
    unsigned char *ct = malloc(ct_len + 3);
    char *out = NULL;
    long nl = b64_decode(c1 + 1, (size_t)(c2 - c1 - 1), nonce, sizeof nonce);
    long cl = nl == NONCE_LEN && ct ? b64_decode(c2 + 1, ct_len, ct, ct_len + 3) : -1;
    crypt_verdict v = CRYPT_FAILED;
    if (aad != NULL && cl >= TAG_LEN && (out = malloc((size_t)cl - TAG_LEN + 1)) != NULL &&
        gcm(false, kr->keys[k].key, nonce, aad, aad_len, ct, (int)(cl - TAG_LEN), (unsigned char *)out,
            ct + cl - TAG_LEN) == 0) {
        out[cl - TAG_LEN] = '\0';
        *plain = out;
        *plain_len = (size_t)(cl - TAG_LEN);
        v = CRYPT_OPENED;
    } else {
        free(out);
    }
    free(aad);
    free(ct);
    return v;
}

bool crypt_uuid4(char out[37])
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1)
        return false;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return true;
}
