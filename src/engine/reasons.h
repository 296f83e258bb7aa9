/* reasons: the tables generated from src/engine/reasons.txt by
 * scripts/reasons.py (build/gen/reasons.c): the category classes and one
 * row per reason id, sorted by id. error.c reads them; nothing restates
 * them. Depends on queen.h only. */
#ifndef QUEEN_REASONS_H
#define QUEEN_REASONS_H

#include <stdbool.h>
#include <stddef.h>

#include "queen.h"

/* Categories: one past the last queen_error_category. */
#define QUEEN_ERROR_CATEGORIES (QUEEN_ERR_OUTCOME_UNKNOWN + 1)
/* A reason only the HTTP edge gives (no_such_route, request_timeout, ...):
 * no engine category. */
#define QUEEN_REASON_EDGE_ONLY ((queen_error_category)-1)

typedef struct queen_reason_row {
    const char *id;
    const char *sqlstate; /* the one our SQL raises it with; NULL: not raised by SQL */
    queen_error_category category;
    bool retryable;
    const char *wire_reason; /* the transaction failure body's reason; NULL: the category's */
} queen_reason_row;

extern const queen_error_class queen_error_classes[QUEEN_ERROR_CATEGORIES];
extern const queen_reason_row queen_reasons[];
extern const size_t queen_reason_count;

/* The registered reason of that id, or NULL. */
const queen_reason_row *queen_reason_find(const char *id);

#endif
