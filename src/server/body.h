/* body: strict parsing of request bodies and typed reads of their members,
 * shared by every route. A refusal renders the error and returns NULL/false,
 * so a handler just returns (the "...OrReply" habit). */
#ifndef QUEEN_BODY_H
#define QUEEN_BODY_H

#include <stdbool.h>

#include <jansson.h>

#include "http.h"
#include "queen_runtime.h"

/* Duplicate keys are refused (PostgreSQL's jsonb would keep the last one
 * silently). Integers decode as reals so a legal 2^64 in a payload does not
 * fail here (values travel raw, see rawjson.h; integer fields are read with
 * body_int). NULs are allowed so a NUL in a key is refused by name, not as
 * "bad JSON". Invalid UTF-8 is refused by jansson. */
#define BODY_JSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL)

/* The raw body text. */
rawjson_span body_span(const http_request *req);

/* Whether the body is empty or only whitespace. */
bool body_blank(const http_request *req);

/* Parses the body. An empty body is json_null() when allow_empty, else a
 * 400. Malformed JSON: 400 bad_body with line and column; NULL returned. */
json_t *body_parse(const http_request *req, http_response *res, bool allow_empty);

/* Whether jansson, reading text with BODY_JSON_FLAGS, surely accepts it:
 * one pass that allocates nothing, over a subset of JSON it can judge alone.
 * false means "not sure", never "invalid": strings with escaped surrogates
 * or \u0000 or any escape in an object key, numbers with an exponent or
 * past 300 characters (overflow is jansson's to judge), nesting past 32,
 * objects past 64 keys in flight, and anything malformed are left to
 * jansson, which gives the verdict and its line and column. tests/fuzz/
 * fuzz_body.c holds it to that: whatever it accepts, jansson accepts. */
bool body_surely_json(const char *text, size_t len);

/* The body checked as body_parse would check it, without building a tree
 * when body_surely_json can vouch for it (a route that reads the body raw).
 * false with res filled (the same 400s as body_parse). */
bool body_check(const http_request *req, http_response *res, bool allow_empty);

/* The first member of obj whose name is not in allowed (NULL-terminated),
 * or NULL when every member is allowed. */
const char *body_unknown_field(const json_t *obj, const char *const *allowed);

/* A string member as a C string: NULL when absent or JSON null. Present but
 * not a string, or holding a NUL byte: refuses (400 with reason) and sets
 * *bad. */
const char *body_string(const json_t *obj, const char *name, http_response *res, http_family fam, bool *bad);

/* An integral number in [min, max]. false when v is not one. */
bool body_int(const json_t *v, long long min, long long max, long long *out);

/* prefix + the span's bytes + suffix as a new NUL-terminated string (caller
 * frees); NULL on allocation failure. span_dup is span_wrap("", s, ""). */
char *span_wrap(const char *prefix, rawjson_span s, const char *suffix);
char *span_dup(rawjson_span s);

#endif
