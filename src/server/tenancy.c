/* tenancy: x-queen-tenant -> canonical tenant uuid (see tenancy.h). Never
 * reads a body: the tenant is an argument of every engine call, and the only
 * place it comes from is this header, set by a trusted proxy. */
#include "tenancy.h"

#include <ctype.h>
#include <string.h>

#include "queen.h"

int tenant_parse(const char *header, char out[TENANT_LEN + 1])
{
    if (header == NULL || header[0] == '\0') {
        memcpy(out, QUEEN_DEFAULT_TENANT, TENANT_LEN + 1);
        return 0;
    }
    if (strlen(header) != TENANT_LEN)
        return -1;
    for (size_t i = 0; i < TENANT_LEN; i++) {
        unsigned char c = (unsigned char)header[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return -1;
            out[i] = '-';
        } else {
            if (!isxdigit(c))
                return -1;
            out[i] = (char)tolower(c);
        }
    }
    out[TENANT_LEN] = '\0';
    return 0;
}
