/* errors: the one door every HTTP error body goes out through
 * ({"error","code","reason","detail"}), the one table mapping an error category to
 * a status and code per route family (generated from the error registry,
 * src/engine/reasons.txt: libqueen knows categories, never HTTP), and the
 * small renderers routes share
 * (JSON values, raw JSON text passed through from PostgreSQL). */
#ifndef QUEEN_ERRORS_H
#define QUEEN_ERRORS_H

#include <jansson.h>

#include "http.h"

/* How HTTP presents an engine category (build/gen/http_errors.c, from
 * reasons.txt by scripts/reasons.py). */
typedef struct http_error_class {
    unsigned status;
    const char *code;    /* the "code" member of the envelope */
    const char *kv_code; /* the same on the KV routes */
} http_error_class;
extern const http_error_class http_error_classes[];
extern const size_t http_error_class_count;

/* cat's row; an unknown category is presented as QUEEN_ERR_INTERNAL. */
const http_error_class *http_error_class_of(queen_error_category cat);

/* Renders {"error": detail, or reason when detail is empty (the sentence a
 * person reads), "code": code (the category), "reason": reason (the stable
 * machine id), "detail": detail} with status. */
void http_error(http_response *res, unsigned status, const char *code, const char *reason, const char *detail);

/* Renders an error of category cat for a route of family fam: status, code
 * from http_error_class_of, Retry-After from the engine's registry
 * (queen_error_class_of);
 * reason and detail as given. Used for the edge's own refusals. */
void http_refuse(http_response *res, http_family fam, queen_error_category cat, const char *reason,
                 const char *detail);

/* Renders an engine error for the route's family, with the engine's
 * Retry-After (a rate refusal's seconds until a token). On the KV routes a
 * lost required op is not an error but a 200 verdict:
 * {"ok":false,"reason":"kv_precondition","failedIndex","kvReason","version","value"}. */
void http_engine_error(http_response *res, http_family fam, const queen_error *err);

/* 400 bad_body with jansson's message, line and column in detail. */
void http_bad_body(http_response *res, const json_error_t *jerr);

/* 404 {"error":"Not Found","code":"no_such_route"}. */
void http_not_found(http_response *res);

/* Renders a JSON value (jansson) as the body. Takes the reference. */
void http_json(http_response *res, unsigned status, json_t *value);

/* Takes text (malloc'd JSON, e.g. what the engine returned) as the body. */
void http_text(http_response *res, unsigned status, char *text);

/* Body = prefix + raw + suffix (raw JSON text spliced in byte for byte).
 * Does not take raw. A failed allocation renders a 500. */
void http_wrap(http_response *res, unsigned status, const char *prefix, const char *raw, size_t raw_len,
               const char *suffix);

#endif
