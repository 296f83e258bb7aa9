/* engine: the queen handle shared by every engine capability (kv, log, wire,
 * sweeper). Private to src/engine; applications see only queen.h. */
#ifndef QUEEN_ENGINE_H
#define QUEEN_ENGINE_H

#include "pool.h"
#include "queen.h"

struct queen {
    queen_config cfg; /* strings owned by this copy */
    queen_pool *pool;
};

/* Fills err from a failed PGresult (SQLSTATE class -> category). */
void queen_error_from_result(queen_error *err, const PGresult *res);
/* Fills err with an engine-made error. */
void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Acquires a pooled connection or fills err (UNAVAILABLE). */
queen_pool_conn *queen_acquire(queen *q, queen_error *err);

#endif
