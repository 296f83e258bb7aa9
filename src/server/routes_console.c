/* routes_console: the web console (docs/console.md), static files served
 * from the binary at / and under /console/. Nothing here reads the database
 * or a tenant's data: the page calls the API with the operator's token like
 * any client, so these routes need no token (FAMILY_OPS, role none). */
#include "routes.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "console_assets.h"
#include "errors.h"

/* The page runs only its own files: no inline script or style, no other
 * origin, no framing (clickjacking an operator's delete button), no plugin.
 * connect-src 'self' keeps a token typed into the page from being sent
 * anywhere but this broker. */
#define CONSOLE_CSP                                                                                                    \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "                   \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* no-cache: the browser keeps the file but asks again each time with its
 * ETag (a 304 costs no body), so a new broker's console is never mixed with
 * an old one's cached modules. */
static const char *const console_headers[] = {
    "Content-Security-Policy", CONSOLE_CSP, "X-Content-Type-Options", "nosniff", "Referrer-Policy", "no-referrer",
    "X-Frame-Options", "DENY", "Cache-Control", "no-cache", NULL,
};

/* The page learns whether the broker wants a token from this marker, so it
 * asks for one before its first call instead of provoking a 401. */
#define AUTH_MARKER "__QUEEN_AUTH__"

static const char *content_type_of(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot != NULL && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

static const console_asset *asset_named(const char *name, size_t len)
{
    for (size_t i = 0; i < console_asset_count; i++)
        if (strlen(console_assets[i].name) == len && memcmp(console_assets[i].name, name, len) == 0)
            return &console_assets[i];
    return NULL;
}

/* The asset's text with the auth marker replaced by mode ("off" or "jwt"). */
static char *render(const console_asset *a, const char *mode)
{
    const char *at = strstr(a->data, AUTH_MARKER);
    size_t skip = at ? strlen(AUTH_MARKER) : 0, before = at ? (size_t)(at - a->data) : a->len;
    size_t add = at ? strlen(mode) : 0;
    char *out = malloc(a->len - skip + add + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, a->data, before);
    if (at != NULL) {
        memcpy(out + before, mode, add);
        memcpy(out + before + add, at + skip, a->len - before - skip);
    }
    out[a->len - skip + add] = '\0';
    return out;
}

static void serve(server *srv, const http_request *req, http_response *res, const console_asset *a)
{
    const char *mode = auth_enabled(srv) ? "jwt" : "off";
    /* The auth mode is part of what the index says: a tag per mode, so a
     * browser never keeps one broker's answer for another's. */
    int n = snprintf(res->etag, sizeof res->etag, "\"%.*s-%s\"", (int)strlen(a->etag) - 2, a->etag + 1, mode);
    if (n < 0 || (size_t)n >= sizeof res->etag) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_INTERNAL, "etag_too_long", "");
        return;
    }
    res->headers = console_headers;
    const char *seen = NULL;
    size_t seen_len = 0;
    if (http_header_first(req->conn, "If-None-Match", &seen, &seen_len) == 0)
        seen = NULL;
    if (seen != NULL && seen_len == strlen(res->etag) && memcmp(seen, res->etag, seen_len) == 0) {
        res->status = 304;
        return;
    }
    char *body = render(a, mode);
    if (body == NULL) {
        res->etag[0] = '\0';
        res->headers = NULL;
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_INTERNAL, "out_of_memory", "");
        return;
    }
    http_text(res, 200, body);
    res->content_type = content_type_of(a->name);
}

/* GET / and GET /console/: the page. */
void route_console_index(server *srv, const http_request *req, http_response *res)
{
    const console_asset *a = asset_named("index.html", strlen("index.html"));
    if (a == NULL)
        http_not_found(res);
    else
        serve(srv, req, res, a);
}

/* GET /console/<file>: one of the page's files; any other name is the
 * envelope's 404, like a path no route takes. */
void route_console_asset(server *srv, const http_request *req, http_response *res)
{
    const console_asset *a = asset_named(req->params[0], req->params_len[0]);
    if (a == NULL)
        http_not_found(res);
    else
        serve(srv, req, res, a);
}
