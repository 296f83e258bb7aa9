/* http: the HTTP edge's plumbing on libmicrohttpd. Accumulates bodies under
 * the cap, matches the static route table, calls one handler, sends what it
 * rendered, writes the access log line. Knows no SQL. */
#ifndef QUEEN_HTTP_H
#define QUEEN_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "queen.h"

#define HTTP_MAX_PARAMS 4

typedef struct server server;

typedef struct http_request {
    const char *method;
    const char *path;            /* raw, still percent-encoded */
    bool has_query;              /* any ?... present */
    const char *body;            /* NUL-terminated; may hold NULs before body_len */
    size_t body_len;
    const char *params[HTTP_MAX_PARAMS]; /* path captures, percent-decoded once */
    size_t nparams;
    const char *tenant;          /* canonical lower-case uuid */
    struct MHD_Connection *mhd;
} http_request;

typedef struct http_response {
    unsigned status;
    char *body;                  /* malloc'd (taken by http.c), or NULL for none */
    const char *content_type;    /* default application/json */
    char etag[48];               /* sent as ETag when non-empty */
    int retry_after;             /* seconds; sent when > 0 */
} http_response;

typedef void (*route_handler)(server *srv, const http_request *req, http_response *res);

typedef struct route {
    const char *method;
    const char *pattern;         /* ":name" captures one segment, "*name" the rest */
    route_handler handler;
} route;

struct server {
    queen *engine;
    const queen_config *cfg;
    struct MHD_Daemon *daemon;
};

/* Starts the daemon on cfg->bind:cfg->port. Returns 0 or -1 (logged). */
int http_start(server *srv);
/* Stops accepting, lets in-flight requests finish, then stops the daemon. */
void http_stop(server *srv);

/* Route matching, exposed for unit tests: 1 on match with captures decoded
 * into params (malloc'd; free with http_free_params), else 0. */
int http_match(const char *pattern, const char *path, char **params, size_t *nparams);
void http_free_params(char **params, size_t nparams);

/* Decodes %XX exactly once into a new string; NULL on a bad escape or an
 * encoded NUL (a key can never hold one). */
char *http_percent_decode(const char *s, size_t len);

/* The one route table (routes.c). */
extern const route http_routes[];
extern const size_t http_route_count;

#endif
