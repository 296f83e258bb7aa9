/* jwtmint: makes keys and signed JWTs for the tests (OpenSSL EVP), so every
 * token a test sends is minted by the test: any algorithm, any header, any
 * payload, signed right or wrong. Failures abort the test program. */
#ifndef QUEEN_TEST_JWTMINT_H
#define QUEEN_TEST_JWTMINT_H

#include <stddef.h>

#include <openssl/evp.h>

/* A fresh key: "RSA" (2048 bits), "EC" (P-256) or "ED25519". */
EVP_PKEY *mint_keygen(const char *type);

/* base64url without padding, malloc'd. */
char *mint_b64url(const void *data, size_t len);

/* header.payload.signature, malloc'd. The signature is HMAC-SHA256 with
 * secret (secret_len bytes) when key is NULL, else the key's: RSA PKCS#1
 * v1.5 SHA-256, ECDSA P-256 SHA-256 as r||s, or Ed25519. header_json and
 * payload_json go in as given (any text, valid or not). */
char *mint_jwt(const char *header_json, const char *payload_json, const void *secret, size_t secret_len,
               EVP_PKEY *key);

/* The public half as a PEM file at path. */
void mint_write_public_pem(EVP_PKEY *key, const char *path);

/* The public half as a JWK object (JSON text, malloc'd) with kid. */
char *mint_jwk(EVP_PKEY *key, const char *kid);

#endif
