/* libFuzzer: the transaction's pre-flight (wire_preflight) on arbitrary
 * NUL-terminated text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static queen_config cfg;
    static int ready;
    if (!ready) {
        queen_config_defaults(&cfg);
        ready = 1;
    }
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    kv_limits lim = kv_limits_from(&cfg, 1);
    wire_plan plan;
    queen_error err;
    memset(&err, 0, sizeof err);
    wire_preflight(text, &lim, &plan, &err);
    free(text);
    return 0;
}
