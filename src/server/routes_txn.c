/* routes_txn: POST /api/v1/transaction, the bundle of acks, pushes and kv
 * ops that commits in one PostgreSQL transaction. The engine judges the
 * bundle (its one pre-flight, the kv quota and rate) and answers either a
 * refusal (4xx here) or the 200 body, success or failure. Never calls libpq;
 * the body goes to the engine as the client sent it (values byte for byte);
 * the tenant is the request's, never the body's. */
#include "routes.h"

#include <stdlib.h>

#include "body.h"
#include "errors.h"

void route_transaction(server *srv, const http_request *req, http_response *res)
{
    /* Checked here only for the bad_body envelope every route shares; no
     * tree is built for it (body_check). */
    if (!body_check(req, res, false))
        return;
    char *bundle = span_dup(rawjson_trim(body_span(req))), *result = NULL;
    queen_error err;
    if (bundle == NULL)
        http_refuse(res, FAMILY_LOG, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    else if (queen_transaction_as(srv->engine, req->tenant, req->producer, bundle, &result, &err) == 0)
        http_text(res, 200, result);
    else
        http_engine_error(res, FAMILY_LOG, &err);
    free(bundle);
}
