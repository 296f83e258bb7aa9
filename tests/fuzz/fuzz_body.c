/* libFuzzer: request body parsing (body.c) on arbitrary bytes, NULs
 * included, as a kv route and as a log route would read them; and the
 * one-pass judge held to its promise: what body_surely_json vouches for,
 * jansson accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    for (int fam = FAMILY_LOG; fam <= FAMILY_KV; fam++) {
        http_request req = {.method = "POST", .path = "/api/v1/kv", .pattern = "/api/v1/kv",
                            .family = (http_family)fam, .body = text, .body_len = size};
        http_response res = {0};
        body_blank(&req);
        if (body_surely_json(text, size)) {
            json_t *v = json_loadb(text, size, BODY_JSON_FLAGS, NULL);
            if (v == NULL)
                abort(); /* vouched for text jansson refuses */
            json_decref(v);
        }
        http_response r0 = {0};
        body_check(&req, &r0, fam == FAMILY_KV);
        free(r0.body);
        json_t *j = body_parse(&req, &res, fam == FAMILY_KV);
        if (json_is_object(j)) {
            static const char *const allowed[] = {"operations", "kv", NULL};
            bool bad = false;
            body_unknown_field(j, allowed);
            http_response r2 = {0};
            body_string(j, "ns", &r2, (http_family)fam, &bad);
            free(r2.body);
        }
        json_decref(j);
        free(res.body);
    }
    free(text);
    return 0;
}
