/* crypt: payload encryption at rest (README.md, Payload encryption): AES-256-GCM
 * through OpenSSL 3's EVP, a fresh 12-byte nonce per message, the tenant as
 * additional authenticated data (a sealed payload opens only for the tenant
 * it was sealed for), and the key's id in the envelope so keys can rotate.
 *
 * A sealed payload is stored as one JSON string,
 *   "qenc:v1:<key id>:<base64 nonce>:<base64 ciphertext + 16-byte tag>",
 * in place of the payload; opening it gives back the payload's JSON text
 * byte for byte. Knows nothing of queues or SQL. */
#ifndef QUEEN_CRYPT_H
#define QUEEN_CRYPT_H

#include <stdbool.h>
#include <stddef.h>

#define CRYPT_MAX_KEYS 8
#define CRYPT_KEY_ID_MAX 32

typedef struct crypt_keyring {
    int n; /* 0: no key configured; keys[0] seals, every key opens */
    struct {
        char id[CRYPT_KEY_ID_MAX + 1];
        unsigned char key[32];
    } keys[CRYPT_MAX_KEYS];
} crypt_keyring;

/* QUEEN_ENCRYPTION_KEY: "" (none), 64 hex digits (one key, id "k0"), or
 * "ID:HEX[,ID:HEX...]" (the first seals; ids of 1..32 of A-Z a-z 0-9 _ -).
 * 0, or -1 with why filled (never quoting key material). */
int crypt_keyring_parse(const char *spec, crypt_keyring *kr, char *why, size_t why_len);

/* Wipes the key material. */
void crypt_keyring_clear(crypt_keyring *kr);

/* The sealed JSON string token (quotes included) of plain[0..len), for
 * tenant; malloc'd, NULL on failure (no key, or OpenSSL failed). */
char *crypt_seal(const crypt_keyring *kr, const char *tenant, const char *plain, size_t len);

/* body with every `"data": "qenc:v1:..."` that opens for tenant replaced by
 * its payload's JSON text: a new malloc'd string, or NULL when the body
 * holds none that opens (keep body as it is). A token that does not open
 * (unknown key id, wrong tenant, altered bytes) is left as it is. */
char *crypt_open_body(const crypt_keyring *kr, const char *tenant, const char *body);

#endif
