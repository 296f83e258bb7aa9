/* routes: every handler of the HTTP edge, one prototype per route. */
#ifndef QUEEN_ROUTES_H
#define QUEEN_ROUTES_H

#include "http.h"

void route_health(server *srv, const http_request *req, http_response *res);

#endif
