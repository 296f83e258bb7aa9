/* routes_ops: operational routes (/health). Parse, call one engine
 * function, render. */
#include "routes.h"

#include <jansson.h>

#include "errors.h"

void route_health(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    char version[128];
    queen_error err = {0};
    if (queen_health(srv->engine, version, sizeof version, &err) == 0) {
        http_json(res, 200, json_pack("{s:s, s:s, s:s, s:s}", "status", "healthy", "database", "connected",
                                      "version", QUEEN_VERSION, "postgres", version));
        return;
    }
    http_json(res, 503, json_pack("{s:s, s:s, s:s, s:s}", "status", "unhealthy", "database", "disconnected",
                                  "version", QUEEN_VERSION, "error", err.detail));
    res->retry_after = 1;
}
