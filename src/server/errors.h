/* errors: the one function that renders every HTTP error body
 * {"error","reason","detail"}, and the category -> status table. */
#ifndef QUEEN_ERRORS_H
#define QUEEN_ERRORS_H

#include "http.h"

/* Renders {"error":code,"reason":reason,"detail":detail} with status. */
void http_error(http_response *res, unsigned status, const char *code, const char *reason, const char *detail);

/* Renders an engine error: status and code from the category table; 503s
 * carry Retry-After: 1. */
void http_engine_error(http_response *res, const queen_error *err);

/* Renders a JSON value (jansson) as the body. Takes the reference. */
struct json_t;
void http_json(http_response *res, unsigned status, struct json_t *value);

#endif
