/* crypt: payload encryption at rest (docs/api.md, Payload encryption): AES-256-GCM
 * through OpenSSL 3's EVP, a fresh 12-byte nonce per message, the key's id in
 * the envelope so keys can rotate, and the message's place as additional
 * authenticated data: tenant, queue, partition and transactionId. A sealed
 * payload opens only where it was sealed for; copied into another queue,
 * partition, message or tenant it fails to open (and the caller says so).
 *
 * A sealed payload is stored as one JSON string,
 *   "qenc:v2:<key id>:<base64 nonce>:<base64 ciphertext + 16-byte tag>",
 * in place of the payload; opening it gives back the payload's JSON text
 * byte for byte. "qenc:v1:" envelopes (the first format: the tenant alone
 * as authenticated data) still open, for what is already stored; nothing
 * seals them any more. Knows nothing of queues or SQL: which strings are a stored
 * message's own payload of an encrypted queue is the caller's decision
 * (encryption.c). */
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

/* Where a payload belongs: its additional authenticated data. tenant is
 * the canonical uuid text; the others are the decoded names as stored
 * (partition "Default" when the push named none). */
typedef struct crypt_place {
    const char *tenant, *queue, *partition, *transaction_id;
} crypt_place;

/* The sealed JSON string token (quotes included, "qenc:v2:...") of
 * plain[0..len) for place at; malloc'd, NULL on failure (no key, or OpenSSL
 * failed). */
char *crypt_seal(const crypt_keyring *kr, const crypt_place *at, const char *plain, size_t len);

/* What opening an envelope gave. */
typedef enum crypt_verdict {
    CRYPT_OPENED = 0,
    CRYPT_NO_KEY,      /* this process has no key at all */
    CRYPT_UNKNOWN_KEY, /* the envelope's key id is not in the ring (retired, or another ring) */
    CRYPT_FAILED,      /* malformed, altered, moved to another place, or another key under the same id */
} crypt_verdict;

/* The reason id a verdict other than CRYPT_OPENED is reported as:
 * encryption_key_missing, encryption_key_unknown, encryption_open_failed. */
const char *crypt_verdict_reason(crypt_verdict v);

/* Whether the string token's text t[0..len) (between the quotes) is an
 * envelope of any version ("qenc:v1:" or "qenc:v2:"). */
bool crypt_is_envelope(const char *t, size_t len);

/* Opens the envelope t[0..len) (between the quotes) for place at: the
 * payload's JSON text in *plain (malloc'd, *plain_len bytes) and
 * CRYPT_OPENED, or another verdict and *plain NULL. A v1 envelope is
 * checked against at->tenant only. */
crypt_verdict crypt_open(const crypt_keyring *kr, const crypt_place *at, const char *t, size_t len, char **plain,
                         size_t *plain_len);

/* A random (version 4) uuid's text, from OpenSSL's generator; false when it
 * failed. */
bool crypt_uuid4(char out[37]);

#endif
