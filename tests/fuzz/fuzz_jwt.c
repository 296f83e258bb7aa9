/* libFuzzer: the bearer token verifier (jwt_verify) and its base64url
 * decoder on arbitrary bytes: every input is refused or verified, never a
 * crash, a leak or an out-of-bounds read (the input is not NUL-terminated).
 * The keyring holds an HS256 secret, so inputs reach the claim checks when
 * the fuzzer finds a signature (it will not; the seeds carry valid ones). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static jwt_keyring *kr;
    if (kr == NULL) {
        char err[256];
        kr = jwt_keyring_new("fuzz-secret", "", "", "", 300, err, sizeof err);
        if (kr == NULL)
            abort();
    }
    /* A copy of exactly size bytes: reads past the end are caught. */
    char *token = malloc(size ? size : 1);
    memcpy(token, data, size);
    json_t *claims = NULL;
    jwt_rules rules = {.issuer = "iss", .audience = "aud", .leeway_s = 30};
    jwt_fault f = jwt_verify(kr, token, size, &rules, 1700000000, &claims);
    if ((f == JWT_OK) != (claims != NULL))
        abort();
    json_decref(claims);
    size_t n = 0;
    free(jwt_b64url_decode(token, size, &n));
    free(token);
    return 0;
}
