/* routes_ops: operational routes (/health, /metrics, /metrics/prometheus).
 * Parse, call one engine function, render. Never calls libpq. */
#include "routes.h"

#include <jansson.h>
#include <string.h>

#include "errors.h"
#include "metrics.h"

void route_health(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    queen_error err;
    /* Anyone who reaches the port may ask: the database's exact version
     * (which advisories apply) is logged at start, not served here. */
    if (queen_health(srv->engine, NULL, 0, &err) == 0) {
        http_json(res, 200, json_pack("{s:s, s:s, s:s}", "status", "healthy", "database", "connected", "version",
                                      QUEEN_VERSION));
        return;
    }
    http_json(res, 503, json_pack("{s:s, s:s, s:s, s:s}", "status", "unhealthy", "database", "disconnected",
                                  "version", QUEEN_VERSION, "error", err.detail));
    res->retry_after = 1;
}

void route_metrics_json(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    http_text(res, 200, metrics_json(srv));
    if (res->body == NULL)
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_INTERNAL, "out_of_memory", "");
}

void route_metrics_prometheus(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    http_text(res, 200, metrics_prometheus(srv));
    if (res->body == NULL)
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
