/* routes: the one static route table. Method, pattern, handler. */
#include "routes.h"

const route http_routes[] = {
    {"GET", "/health", route_health},
};

const size_t http_route_count = sizeof http_routes / sizeof http_routes[0];
