/* routes_system: the broker-wide switches (README.md, HTTP API > Maintenance
 * mode): read and set maintenance mode. Not tenant-scoped: the switch holds
 * for every tenant of the database. Parse, call one engine function
 * (src/engine/maintenance.c), render. */
#include "routes.h"

#include <stdlib.h>

#include "body.h"
#include "errors.h"

static void answer(http_response *res, int rc, char *text, const queen_error *err)
{
    if (rc == 0)
        http_text(res, 200, text);
    else
        http_engine_error(res, FAMILY_OPS, err);
}

/* GET /api/v1/system/maintenance */
void route_maintenance(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    char *result = NULL;
    queen_error err;
    int rc = queen_maintenance(srv->engine, &result, &err);
    answer(res, rc, result, &err);
}

/* POST /api/v1/system/maintenance {"enabled": true | false} */
void route_maintenance_set(server *srv, const http_request *req, http_response *res)
{
    static const char *const members[] = {"enabled", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    const json_t *enabled = json_object_get(body, "enabled");
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL || !json_is_boolean(enabled)) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_BAD_REQUEST, "bad_request",
                    "the body must be {\"enabled\": true} or {\"enabled\": false}");
    } else {
        char *result = NULL;
        queen_error err;
        int rc = queen_maintenance_set(srv->engine, json_is_true(enabled), &result, &err);
        answer(res, rc, result, &err);
    }
    json_decref(body);
}
