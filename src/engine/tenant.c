/* tenant: see tenant.h. */
#include "tenant.h"

#include <ctype.h>
#include <string.h>

#include "error.h"

int queen_tenant_canonical(const char *tenant, char out[QUEEN_TENANT_LEN + 1])
{
    if (tenant == NULL || tenant[0] == '\0') {
        memcpy(out, QUEEN_DEFAULT_TENANT, QUEEN_TENANT_LEN + 1);
        return 0;
    }
    if (strlen(tenant) != QUEEN_TENANT_LEN)
        return -1;
    for (size_t i = 0; i < QUEEN_TENANT_LEN; i++) {
        unsigned char c = (unsigned char)tenant[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return -1;
            out[i] = '-';
        } else {
            if (!isxdigit(c))
                return -1;
            /* PostgreSQL renders uuids lower-case: one spelling per tenant,
             * or the quota table would hold two entries for one tenant. */
            out[i] = (char)tolower(c);
        }
    }
    out[QUEEN_TENANT_LEN] = '\0';
    return 0;
}

const char *engine_tenant(const char *tenant, char out[QUEEN_TENANT_LEN + 1], queen_error *err)
{
    if (queen_tenant_canonical(tenant, out) == 0)
        return out;
    queen_error_set(err, QUEEN_ERR_BAD_REQUEST, "bad_tenant",
                    "the tenant must be a uuid (8-4-4-4-12 hex digits), or empty for the default tenant");
    return NULL;
}
