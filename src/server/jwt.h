/* jwt: verifies a compact JWS token (RFC 7515/7519) with OpenSSL 3 EVP and
 * returns its claims. Algorithms: HS256 (the shared secret only), RS256,
 * ES256 (P-256) and EdDSA (Ed25519), from PEM public keys and a JWKS (a file
 * or an https URL, cached and refreshed, keys chosen by kid). Each algorithm
 * is bound to one key type, so "alg":"none" and an HS256 token signed with a
 * public key as its secret are refused, never tried. Knows no HTTP. A JWKS
 * is re-fetched on the keyring's own thread, never inside jwt_verify. */
#ifndef QUEEN_JWT_H
#define QUEEN_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <jansson.h>

/* Longest token verified; a longer one is malformed without being decoded. */
#define JWT_MAX_TOKEN_BYTES 8192

typedef enum jwt_fault {
    JWT_OK,
    JWT_MALFORMED,         /* not three base64url parts of JSON objects */
    JWT_UNSUPPORTED_ALG,   /* none, HS384, PS256, ... or crit extensions */
    JWT_NO_KEY,            /* no configured key of the algorithm's type (and kid) */
    JWT_BAD_SIGNATURE,
    JWT_EXPIRED,
    JWT_NOT_YET_VALID,
    JWT_BAD_ISSUER,
    JWT_BAD_AUDIENCE,
    JWT_FAULT_COUNT,
} jwt_fault;

/* The stable id of a fault: what error bodies and the failure counter say. */
const char *jwt_fault_reason(jwt_fault f);

typedef struct jwt_rules {
    const char *issuer;   /* "" or NULL: iss not checked */
    const char *audience; /* "" or NULL: aud not checked */
    int leeway_s;         /* allowed clock skew for exp and nbf */
} jwt_rules;

typedef struct jwt_keyring jwt_keyring;

/* The keys tokens may be signed with. secret: HS256 bytes ("" for none);
 * pem_files: comma-separated paths of PEM public keys ("" for none); jwks:
 * a file path or an https:// URL ("" for none; jwks_ca a CA bundle to check
 * its certificate with, "" for the system's), fetched now and again when
 * older than refresh_s or when a token names an unknown kid (at most once
 * per JWT_JWKS_MIN_REFETCH_S, or what jwt_keyring_set_min_refetch_s says).
 * The first fetch happens here; later ones on the keyring's own thread,
 * never in jwt_verify, which goes on with the set loaded (a token whose key
 * is not there yet is JWT_NO_KEY at once). NULL with a message in err (never
 * quoting key material) when a key cannot be loaded or none is configured. */
#define JWT_JWKS_MIN_REFETCH_S 10
jwt_keyring *jwt_keyring_new(const char *secret, const char *pem_files, const char *jwks, const char *jwks_ca,
                             int refresh_s, char *err, size_t errlen);
/* Fewest seconds between two JWKS fetches that verifications ask for. */
void jwt_keyring_set_min_refetch_s(jwt_keyring *kr, int seconds);
void jwt_keyring_free(jwt_keyring *kr);

/* Verifies token (len bytes, need not be NUL-terminated) at time now.
 * JWT_OK with *claims (a new reference, a JSON object) or a fault with
 * *claims NULL. Thread-safe. */
jwt_fault jwt_verify(jwt_keyring *kr, const char *token, size_t len, const jwt_rules *rules, time_t now,
                     json_t **claims);

/* Base64url without padding (RFC 7515 section 2), strict: any other byte,
 * or a length no encoding produces, is refused. malloc'd, NULL on refusal. */
unsigned char *jwt_b64url_decode(const char *s, size_t len, size_t *out_len);

#endif
