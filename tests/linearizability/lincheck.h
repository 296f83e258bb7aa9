/* lincheck: a linearizability checker for histories of kv ops on a few
 * keys. A history is split by key (ops on different keys commute), and each
 * key's sub-history is searched Wing-Gong style (Lowe's list-and-stack form)
 * against a sequential model of one key: exists, value, version. Visited
 * (linearized set, model state) pairs are memoised, so a few hundred ops per
 * key with a handful of clients check in milliseconds.
 *
 * Values are integers (puts write integers, incr adds integers). Versions
 * are tokens the server draws: the model learns them from answers. A write
 * whose answer never came (LIN_PENDING) may have applied at any instant
 * after its invocation, or never; its version is then unknown until a later
 * answer reports one. */
#ifndef QUEEN_LINCHECK_H
#define QUEEN_LINCHECK_H

#include <stdbool.h>
#include <stddef.h>

#define LIN_PENDING (-1LL) /* complete time of an op whose answer never came */
#define LIN_NO_EXPECT (-1LL)

typedef enum lin_kind { LIN_GET, LIN_PUT, LIN_PUT_IF_ABSENT, LIN_INCR, LIN_DELETE } lin_kind;

typedef struct lin_op {
    int key;                    /* which hot key: histories are partitioned by it */
    int client;
    lin_kind kind;
    long long invoke_ns;        /* monotonic, taken before the request was sent */
    long long complete_ns;      /* monotonic, after the answer; LIN_PENDING when none */
    /* arguments */
    long long value;            /* put / putIfAbsent: the value written */
    long long expect;           /* put / delete: LIN_NO_EXPECT, 0 (must not exist) or a version */
    long long delta;            /* incr */
    bool has_min, has_max;
    long long min, max;
    /* the answer, when complete */
    bool ok;                    /* get: found; writes: applied */
    long long res_value;        /* get / applied put,incr: the value; delete: the removed value;
                                   not applied: the current value (0 when none) */
    long long res_version;      /* same rows' version; 0 when there is no live row */
} lin_op;

typedef enum lin_verdict { LIN_OK, LIN_VIOLATION, LIN_GAVE_UP } lin_verdict;

typedef struct lin_report {
    size_t keys;                /* sub-histories checked */
    size_t ops;                 /* ops checked (pending ones included) */
    size_t pending;
    long long steps;            /* search steps over all keys */
    int bad_key;                /* the first key that failed, or -1 */
    char why[512];              /* what could not be linearized */
} lin_report;

/* Checks one history of n ops (any order, any keys). step_budget bounds the
 * search per key (0: 50 million steps); past it the verdict is LIN_GAVE_UP,
 * which a test must treat as a failure of its sizing, never as a pass. */
lin_verdict lin_check(const lin_op *ops, size_t n, long long step_budget, lin_report *rep);

/* A one-line description of op, for failure messages. */
void lin_describe(const lin_op *op, char *out, size_t len);

#endif
