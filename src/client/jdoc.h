/* jdoc: a JSON reader that keeps every value's text as it arrived.
 *
 * The client carries results faithfully: a number is never converted (0.1
 * and 12345678901234567890 must come back as those bytes), so each node
 * points at its raw span of the source text; strings are also decoded for
 * the client's own use (ids, names). Read-only after parse. */
#ifndef QUEEN_CLIENT_JDOC_H
#define QUEEN_CLIENT_JDOC_H

#include <stdbool.h>
#include <stddef.h>

typedef enum jd_type { JD_NULL, JD_BOOL, JD_NUMBER, JD_STRING, JD_ARRAY, JD_OBJECT } jd_type;

typedef struct jd {
    jd_type type;
    const char *raw; /* the value's text in the source (not NUL-terminated) */
    size_t rawlen;
    bool boolean;    /* JD_BOOL */
    char *str;       /* JD_STRING: decoded, NUL-terminated (may hold NULs: strlen stops early) */
    size_t strlen;
    size_t n;        /* JD_ARRAY / JD_OBJECT: members */
    struct jd **items;
    char **keys;     /* JD_OBJECT: decoded member names */
    char *owned;     /* root only: the copy of the source the spans point into */
} jd;

/* Parses exactly one JSON value (surrounding whitespace allowed). NULL on
 * bad JSON or out of memory, with a message in err when given. */
jd *jd_parse(const char *text, size_t len, char *err, size_t errlen);
void jd_free(jd *root);

/* Member of an object (the last one of that name), element of an array;
 * NULL when absent or of another type. */
const jd *jd_get(const jd *obj, const char *key);
const jd *jd_at(const jd *arr, size_t i);
/* RFC 6901 pointer ("" is v itself); NULL when it names nothing. */
const jd *jd_pointer(const jd *v, const char *ptr);
/* The decoded string of member key, or NULL when absent or not a string. */
const char *jd_str(const jd *obj, const char *key);
/* Member key as a bool (false when absent or not a boolean). */
bool jd_true(const jd *obj, const char *key);
/* Member key as a long long when it is an integer number that fits; def otherwise. */
long long jd_int(const jd *obj, const char *key, long long def);
/* A malloc'd copy of v's raw text. */
char *jd_text(const jd *v);

/* Exact decimal equality of two JSON number texts (1 == 1.0 == 10e-1),
 * without converting through a binary type. */
bool jd_number_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
