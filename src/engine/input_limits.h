/* input_limits: every fixed budget of Queen's input, named once. SQL enforces
 * the same numbers (it is the floor); the engine refuses early with SQL's
 * own reasons. tests/unit/test_limits.c compares each with the literal in
 * the SQL that libqueen carries, so the two cannot drift apart. The
 * configurable edge guards (QUEEN_KV_MAX_*) are clamped to these. */
#ifndef QUEEN_INPUT_LIMITS_H
#define QUEEN_INPUT_LIMITS_H

/* kv_apply_v1 (sql/kv.sql): ops per call and keys summed over a call's
 * ops (getMany its keys, getPrefix its clamped limit, others one), outside
 * a transaction and inside one. */
#define QUEEN_KV_MAX_OPS 256
#define QUEEN_KV_MAX_KEYS 4096
#define QUEEN_WIRE_MAX_KV_OPS 64
#define QUEEN_WIRE_MAX_KV_KEYS 256

/* A key's bytes (octet_length) and a namespace's characters. */
#define QUEEN_KV_MAX_KEY_BYTES 512
#define QUEEN_KV_MAX_NS_CHARS 64

/* getPrefix's page: default and clamp. */
#define QUEEN_KV_PAGE_DEFAULT 100
#define QUEEN_KV_PAGE_MAX 1000

/* The 23514 DETAIL of a lost required op, at most (a value past it is
 * omitted by SQL and reported with its size). */
#define QUEEN_KV_DETAIL_MAX_BYTES 4096

#endif
