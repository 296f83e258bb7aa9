/* args: query-string arguments of the queue routes, each judged the same way
 * everywhere: absent leaves *out alone; present but malformed answers 400
 * (FAMILY_LOG's vocabulary) with the reason given and returns false. */
#ifndef QUEEN_ARGS_H
#define QUEEN_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"

/* An integer in [min, max]. */
bool arg_int(const http_request *req, const char *name, long long min, long long max, long long *out,
             http_response *res, const char *reason);
/* true/1 or false/0. */
bool arg_bool(const http_request *req, const char *name, bool *out, http_response *res);
/* Text (percent-decoded) into buf; *out points into buf. */
bool arg_str(const http_request *req, const char *name, char *buf, size_t len, const char **out, http_response *res,
             const char *reason);

#endif
