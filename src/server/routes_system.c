/* routes_system: the broker-wide switches (docs/api.md, Maintenance
 * mode): read and set maintenance mode, and pop maintenance (the reference
 * clients' /maintenance/pop, answered in their shape). Not tenant-scoped: the switch holds
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

/* The body {"enabled": true | false} of both switches: 1 or 0, or -1 with
 * res answered. */
static int enabled_of(const http_request *req, http_response *res)
{
    static const char *const members[] = {"enabled", NULL};
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return -1;
    const json_t *enabled = json_object_get(body, "enabled");
    int on = json_is_true(enabled) ? 1 : 0;
    if (!json_is_object(body) || body_unknown_field(body, members) != NULL || !json_is_boolean(enabled)) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_BAD_REQUEST, "bad_request",
                    "the body must be {\"enabled\": true} or {\"enabled\": false}");
        on = -1;
    }
    json_decref(body);
    return on;
}

/* POST /api/v1/system/maintenance {"enabled": true | false} */
void route_maintenance_set(server *srv, const http_request *req, http_response *res)
{
    int on = enabled_of(req, res);
    if (on < 0)
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_maintenance_set(srv->engine, on == 1, &result, &err);
    answer(res, rc, result, &err);
}

/* The pop switch as the reference clients read it: {"popMaintenanceMode",
 * "since", and "changed" after a set}, from the engine's answer. */
static void answer_pop(http_response *res, int rc, char *text, const queen_error *err)
{
    json_t *v = rc == 0 ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (rc != 0) {
        http_engine_error(res, FAMILY_OPS, err);
    } else if (v == NULL) {
        http_refuse(res, FAMILY_OPS, QUEEN_ERR_INTERNAL, "internal_error", "the maintenance answer did not parse");
    } else {
        json_t *changed = json_object_get(v, "changed");
        json_t *out = json_pack("{s:O?, s:O?}", "popMaintenanceMode", json_object_get(v, "popMaintenance"), "since",
                                json_object_get(v, "popSince"));
        if (out != NULL && changed != NULL)
            json_object_set(out, "changed", changed);
        http_json(res, 200, out);
    }
    json_decref(v);
}

/* GET /api/v1/system/maintenance/pop */
void route_pop_maintenance(server *srv, const http_request *req, http_response *res)
{
    (void)req;
    char *result = NULL;
    queen_error err;
    int rc = queen_maintenance(srv->engine, &result, &err);
    answer_pop(res, rc, result, &err);
}

/* POST /api/v1/system/maintenance/pop {"enabled": true | false} */
void route_pop_maintenance_set(server *srv, const http_request *req, http_response *res)
{
    int on = enabled_of(req, res);
    if (on < 0)
        return;
    char *result = NULL;
    queen_error err;
    int rc = queen_pop_maintenance_set(srv->engine, on == 1, &result, &err);
    answer_pop(res, rc, result, &err);
}
