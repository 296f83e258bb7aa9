/* libFuzzer: path matching (http_match against every route shape) and
 * percent-decoding (http_percent_decode), and the tenant canonicaliser
 * (queen_tenant_canonical), on arbitrary text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "queen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const patterns[] = {"/api/v1/kv/:ns/*key", "/api/v1/kv", "/api/v1/pop/queue/:queue/partition/:partition",
                                           "/api/v1/resources/kv/list", "/health"};
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        char *params[HTTP_MAX_PARAMS];
        size_t lens[HTTP_MAX_PARAMS], n = 0;
        /* captures are allocated on 1 and on -1 (the caller http.c frees both) */
        if (http_match(patterns[i], text, params, lens, &n) != 0)
            http_free_params(params, n);
    }
    size_t out_len;
    free(http_percent_decode(text, size, &out_len));
    char tenant[QUEEN_TENANT_LEN + 1];
    queen_tenant_canonical(text, tenant);
    free(text);
    return 0;
}
