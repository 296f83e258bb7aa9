/* rawjson: byte spans inside JSON text (the engine's one raw scanner).
 *
 * Values travel from the client to PostgreSQL byte for byte: jansson would
 * re-render numbers (0.1 becomes 0.10000000000000001, 2^64 does not parse at
 * all on the way out), and the edge's value guard measures a value as the
 * client sent it. Pure: never allocates, never validates beyond what it needs
 * to skip a value. On text that is not JSON it answers something bounded by
 * the span (never reads past it); a caller that needs validity gets it from
 * jansson or from PostgreSQL, which parses every value again. */
#ifndef QUEEN_RAWJSON_H
#define QUEEN_RAWJSON_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rawjson_span {
    const char *p;
    size_t len;
} rawjson_span;

/* The span without leading and trailing JSON whitespace. */
rawjson_span rawjson_trim(rawjson_span s);

/* Bytes taken by the one JSON value that starts at s.p (no leading
 * whitespace); 0 when s does not start with a complete value. */
size_t rawjson_value_len(rawjson_span s);

/* Iterates the elements of an array or the members of an object. */
typedef struct rawjson_iter {
    const char *p, *end;
    bool object, first;
} rawjson_iter;

/* Starts on the array ('[') or object ('{') that s (trimmed) holds; false
 * when s holds another kind of value. */
bool rawjson_open(rawjson_iter *it, rawjson_span s, char kind);

/* The next element (key NULL for arrays) or member (key = the raw string
 * token, quotes included). false at the end. */
bool rawjson_next(rawjson_iter *it, rawjson_span *key, rawjson_span *value);

/* Whether a raw string token (quotes included, escapes allowed) spells the
 * ASCII name. */
bool rawjson_key_is(rawjson_span key, const char *name);

/* The value of member `name` of the object s; false when absent or when s
 * is not an object. */
bool rawjson_member(rawjson_span s, const char *name, rawjson_span *value);

/* The text between the braces of the object s, trimmed ("" for {}); false
 * when s is not an object. Used to splice a body's members into an op. */
bool rawjson_object_inner(rawjson_span s, rawjson_span *inner);

/* The decoded size of a raw string token (quotes included): *bytes its
 * UTF-8 bytes once escapes are decoded, *has_nul whether it holds U+0000.
 * false when s is not a string token. */
bool rawjson_string_info(rawjson_span s, size_t *bytes, bool *has_nul);

/* The elements of the array s; -1 when s is not an array. */
long rawjson_array_count(rawjson_span s);

/* What building a tree of s would cost, counted in one pass that allocates
 * nothing: values (every scalar, string, member name and container) and the
 * deepest nesting. The pass stops once either passes its limit (the text is
 * refused then anyway), so its cost is bounded by what it admits. It does
 * not validate: malformed text is counted as far as it goes and left to the
 * parser, which refuses it. */
typedef struct rawjson_shape {
    size_t values;
    size_t depth;
} rawjson_shape;
rawjson_shape rawjson_measure(rawjson_span s, size_t max_values, size_t max_depth);

#endif
