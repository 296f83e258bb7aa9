/* input_limits: the input budgets, as sql/limits.sql publishes them
 * (queen.input_limits_v1). libqueen reads them out of the SQL it carries
 * instead of keeping numbers of its own: its early guards (kvguard) then
 * refuse with exactly what SQL enforces, and a budget changes in one file. */
#ifndef QUEEN_INPUT_LIMITS_H
#define QUEEN_INPUT_LIMITS_H

#include <stdbool.h>

typedef struct input_limits {
    int kv_max_ops, kv_max_keys;           /* per kv_apply_v1 call */
    int wire_max_kv_ops, wire_max_kv_keys; /* inside a transaction bundle */
    int kv_max_key_bytes, kv_max_ns_chars;
    int page_default, page_max;
    int kv_detail_max_bytes;
} input_limits;

/* The budgets of the embedded SQL, read on the first call (thread-safe).
 * Never NULL: when the embedded text does not hold every budget (a build
 * defect tests/unit/test_limits.c catches, and queen_open refuses to open
 * on) every budget is 0, so the guards refuse everything rather than guess. */
const input_limits *input_limits_get(void);
bool input_limits_ok(void);

/* Reads the budgets out of a limits.sql text: 0, or -1 when one is missing
 * or not a positive integer. */
int input_limits_parse(const char *sql_text, input_limits *out);

#endif
