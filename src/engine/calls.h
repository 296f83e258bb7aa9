/* calls: the engine's plain SQL calls as one table, and the one caller.
 *
 * Most public calls of queen.h are the same few steps: judge and canonicalise
 * the tenant (it is $1), enter the handle (engine_enter), run one prepared
 * statement of one SQL function, copy its one text column, leave, and for
 * the calls answering stored messages open their sealed payloads. Each such
 * call is a row here (its statement's name and text, its arguments' kinds,
 * whether it takes the tenant, what its answer needs) and its public function
 * is one engine_call. Calls with more to do (push, pop, kv, the transaction
 * wire, streams' cycle, maintenance) keep their own code.
 *
 * Argument kinds (one letter per parameter after the tenant, in order):
 *   s  text, NULL is SQL NULL                        ENGINE_S(text)
 *   j  JSON text, NULL is SQL NULL (SQL casts it)    ENGINE_S(text)
 *   z  integer, 0 is SQL NULL ("the SQL default")    ENGINE_N(n)
 *   p  integer, only > 0 is sent, else SQL NULL      ENGINE_N(n)
 *   n  integer, only >= 0 is sent, else SQL NULL     ENGINE_N(n)
 *   i  integer, always sent                          ENGINE_N(n)
 *   b  boolean: "true" for non-zero, else "false"    ENGINE_N(flag)
 * The caller checks on every call that the arguments given match the row
 * (count and text or number), so a row and its function cannot drift apart
 * silently; tests/unit/test_engine_pure.c checks each row's kinds against
 * the $N its SQL text uses. */
#ifndef QUEEN_CALLS_H
#define QUEEN_CALLS_H

#include "queen.h"

typedef enum engine_call_id {
    /* resources (sql/log_resources.sql) */
    CALL_OVERVIEW,
    CALL_LABELS,
    CALL_QUEUE_DETAIL,
    CALL_QUEUE_PARTITIONS,
    CALL_QUEUE_CLEAR,
    CALL_PARTITIONS,
    /* status (sql/log_status.sql) and the database's figures */
    CALL_STATUS_QUEUES,
    CALL_STATUS_QUEUE,
    CALL_STATUS_ANALYTICS,
    CALL_MESSAGE_DLQ,
    CALL_PG_STATS,
    /* consumer groups */
    CALL_GROUPS,
    CALL_GROUP_SEEK,
    CALL_GROUP_DELETE,
    CALL_GROUP_SUBSCRIPTION,
    /* traces */
    CALL_TRACE_ADD,
    CALL_TRACES_BY_MESSAGE,
    CALL_TRACES_BY_NAME,
    CALL_TRACE_NAMES,
    /* dead letters */
    CALL_DLQ_LIST,
    CALL_DLQ_REQUEUE,
    CALL_DLQ_DELETE,
    /* browsing the log (sql/log_browse.sql) */
    CALL_MESSAGES_LIST,
    CALL_MESSAGE_GET,
    CALL_MESSAGE_DELETE,
    CALL_MESSAGE_AT,
    CALL_MESSAGE_DELETE_AT,
    CALL_MESSAGE_RETRY,
    /* streams (sql/streams.sql) */
    CALL_STREAMS_REGISTER,
    CALL_STREAMS_STATE_GET,
    /* stream windows, the older window API (sql/stream_windows.sql) */
    CALL_STREAM_WINDOW_DEFINE,
    CALL_STREAM_WINDOW_POLL,
    CALL_STREAM_WINDOW_ACK,
    CALL_STREAM_WINDOW_RENEW,
    CALL_STREAM_WINDOW_SEEK,
    CALL_STREAM_WINDOW_LIST,
    CALL_STREAM_WINDOW_STATS,
    CALL_STREAM_WINDOW_GET,
    CALL_STREAM_WINDOW_CONSUMERS,
    CALL_STREAM_WINDOW_DELETE,
    /* the log's plain calls (sql/log_*.sql) */
    CALL_ACK,
    CALL_LEASE_EXTEND,
    CALL_QUEUES_OF,
    CALL_CONFIGURE,
    CALL_QUEUES,
    CALL_QUEUE_DELETE,
    /* kv's console reads (sql/kv.sql, kv_quota.sql) */
    CALL_KV_LIST,
    CALL_KV_NAMESPACES,
    CALL_KV_QUOTA,
    ENGINE_CALL_COUNT
} engine_call_id;

/* $1 is the caller's tenant, judged (QUEEN_ERR_BAD_REQUEST bad_tenant) and
 * canonical; without it the call is the database's, not a tenant's. */
#define ENGINE_CALL_TENANT 1u
/* The function answers a body or raises: an SQL NULL answer is
 * QUEEN_ERR_INTERNAL log_result_misaligned. Without it NULL is an answer. */
#define ENGINE_CALL_BODY 2u
/* The answer carries stored messages: their sealed payloads are opened
 * for the tenant (engine_open_answer). */
#define ENGINE_CALL_OPEN 4u

typedef struct engine_call_row {
    const char *name; /* the prepared statement's name (connections keep the pointer) */
    const char *sql;
    const char *args; /* kinds, above */
    unsigned flags;
} engine_call_row;

extern const engine_call_row engine_calls[ENGINE_CALL_COUNT];

/* One argument: text (ENGINE_S) or a number (ENGINE_N); the row's kind
 * says which it must be and how it is sent. */
typedef struct engine_arg {
    char is; /* 's' or 'n' */
    const char *s;
    long long n;
} engine_arg;
#define ENGINE_S(text) {.is = 's', .s = (text)}
#define ENGINE_N(number) {.is = 'n', .n = (number)}
/* The arguments of a call and their count, for engine_call: ENGINE_ARGS(ENGINE_S(queue), ENGINE_N(limit)). */
#define ENGINE_ARGS(...)                                                                                               \
    (const engine_arg[]){__VA_ARGS__}, (int)(sizeof((const engine_arg[]){__VA_ARGS__}) / sizeof(engine_arg))
#define ENGINE_NO_ARGS NULL, 0

/* Runs row id with args (nargs of them, as the row's kinds say): *out is
 * the answer (malloc'd; NULL on failure, or the SQL NULL of a call without
 * ENGINE_CALL_BODY). 0, or -1 with err filled. Arguments that do not match
 * the row are QUEEN_ERR_INTERNAL (a bug here, never the caller's input). */
int engine_call(queen *q, engine_call_id id, const char *tenant, const engine_arg *args, int nargs, char **out,
                queen_error *err);

#endif
