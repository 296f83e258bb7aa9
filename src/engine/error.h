/* error: the one error registry of Queen. Every way an error is classified
 * or named derives from the registry file reasons.txt (our reasons ->
 * category, SQLSTATE and wire reason; category -> retryability and
 * Retry-After: queen_error_class_of in queen.h; the HTTP edge's status and
 * codes are generated from the same file into the server) and, for
 * what PostgreSQL raises on its own, error.c's SQLSTATE classes. Also the
 * constructors of a queen_error and the precondition members that both the
 * KV verdict and the transaction failure body splice in.
 * Depends on util.h, rawjson.h and reasons.h only. */
#ifndef QUEEN_ERROR_H
#define QUEEN_ERROR_H

#include <libpq-fe.h>

#include "queen.h"

/* Fills err with an engine-made error (Retry-After from the category). */
void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The one mapping of a PostgreSQL error to a queen_error. A message our SQL
 * raised (a registered reason: "kv_bad_key", "log_bad_queue") is the reason
 * and the DETAIL the detail; any other message (PostgreSQL's own text, which may quote input) goes to the
 * detail and the reason is the category's generic one, so names travel only
 * in detail. A 23514 DETAIL is parsed into err->precondition. state NULL:
 * libpq itself failed (connection lost), UNAVAILABLE. */
void queen_error_from_fields(queen_error *err, const char *state, const char *msg, const char *detail);

/* Fills err from a failed PGresult (see queen_error_from_fields). */
void queen_error_from_result(queen_error *err, const PGresult *res);

/* The category of one SQLSTATE and message (message may be NULL). */
queen_error_category error_category_of(const char *state, const char *message);

/* The transaction failure body's reason for an error the wire raised. */
const char *error_wire_reason(const queen_error *err);

#endif
