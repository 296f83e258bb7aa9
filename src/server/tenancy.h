/* tenancy: the tenant of a request, from the x-queen-tenant header.
 * Pure (no MHD, no engine): the header's text in, a canonical uuid out. */
#ifndef QUEEN_TENANCY_H
#define QUEEN_TENANCY_H

#include <stddef.h>

#define TENANT_HEADER "x-queen-tenant"
#define TENANT_LEN 36

/* Parses the header value. NULL or empty (the proxy sent none) is the
 * default tenant; a canonical 8-4-4-4-12 hex uuid in any case is that tenant,
 * lower-cased; anything else (braces, no dashes, spaces, trailing bytes) is
 * refused. Writes TENANT_LEN + 1 bytes into out. Returns 0, or -1 refused. */
int tenant_parse(const char *header, char out[TENANT_LEN + 1]);

#endif
