/* libFuzzer: the raw-JSON scanner (rawjson.c) and the kv guards
 * (kv_guard_ops) over arbitrary bytes, for both the route's and the
 * transaction's limits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kvguard.h"
#include "rawjson.h"

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
    rawjson_span s = {text, size};
    for (int in_wire = 0; in_wire < 2; in_wire++) {
        kv_limits lim = kv_limits_from(&cfg, in_wire);
        kv_demand d;
        queen_error err;
        memset(&err, 0, sizeof err);
        kv_guard_ops(s, &lim, &d, &err);
    }
    rawjson_span v;
    rawjson_member(s, "operations", &v);
    rawjson_array_count(s);
    free(text);
    return 0;
}
