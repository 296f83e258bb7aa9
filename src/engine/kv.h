/* kv: the key/value calls of libqueen. The functions themselves are public
 * (queen_kv_* in queen.h); this header carries what the rest of the engine
 * needs to report on them. */
#ifndef QUEEN_KV_H
#define QUEEN_KV_H

#include "engine.h"

/* Names of the KV_OP_* and KV_OUT_* slots of queen_counters, as they appear
 * in queen_stats_json ("putIfAbsent", "notApplied", ...). */
extern const char *const kv_op_names[KV_OP_N];
extern const char *const kv_outcome_names[KV_OUT_N];

#endif
