/* queenctl tx: one transaction bundle from a file, committed or rolled back whole. */
#include "ctl.h"
#include "jdoc.h"

#include <stdlib.h>
#include <string.h>

static const char TX_USAGE[] =
    "usage: queenctl tx FILE.json\n"
    "  Sends the bundle {\"operations\":[...], \"requiredLeases\":[...], \"kv\":[...]} in FILE ('-': stdin)\n"
    "  as one transaction. Prints the result; exit 1 when it rolled back (the reason is printed).\n";

int cmd_tx(ctl *x, int argc, char **argv)
{
    const char *pos[1];
    int npos;
    int p = ctl_parse(argc, argv, NULL, pos, 1, &npos, NULL, NULL, TX_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 1)
        return ctl_usage_error(TX_USAGE, "tx needs FILE");
    FILE *f = strcmp(pos[0], "-") == 0 ? stdin : fopen(pos[0], "rb");
    if (f == NULL)
        return ctl_usage_error(TX_USAGE, "cannot open %s", pos[0]);
    char *bundle = ctl_read_all(f, NULL);
    if (f != stdin)
        fclose(f);
    if (bundle == NULL)
        return ctl_usage_error(TX_USAGE, "cannot read %s", pos[0]);
    char *result = NULL;
    queen_client_error err;
    int rc = queen_client_transaction(x->client, x->tenant, bundle, &result, &err);
    free(bundle);
    if (rc != 0)
        return ctl_fail("tx", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    bool success = jd_true(r, "success");
    if (!x->table) {
        ctl_json_line(stdout, result);
    } else if (success) {
        const jd *results = jd_get(r, "results");
        ctl_table *t = ctl_table_new(5, (const char *[]){"INDEX", "TYPE", "OP_INDEX", "OUTCOME", "DETAIL"});
        for (size_t i = 0; results != NULL && i < results->n; i++) {
            const jd *e = results->items[i];
            char *idx = jd_text(jd_get(e, "index")), *op = jd_text(jd_get(e, "opIndex"));
            const char *type = jd_str(e, "type");
            const char *outcome = jd_str(e, "status"); /* push */
            char *detail = NULL;
            if (type != NULL && strcmp(type, "kv") == 0) {
                outcome = jd_get(e, "applied") != NULL ? (jd_true(e, "applied") ? "applied" : "not applied")
                                                       : jd_true(e, "found") ? "found" : "-";
                detail = jd_text(jd_get(e, "value"));
            } else if (type != NULL && strcmp(type, "ack") == 0) {
                outcome = jd_true(e, "success") ? "acked" : "not acked";
                detail = jd_str(e, "error") != NULL ? strdup(jd_str(e, "error")) : NULL;
            } else {
                detail = jd_str(e, "transaction_id") != NULL ? strdup(jd_str(e, "transaction_id")) : NULL;
            }
            ctl_table_row(t, (const char *[]){idx, type, op, outcome, detail});
            free(idx);
            free(op);
            free(detail);
        }
        ctl_table_print(t, stdout);
    } else {
        char *detail = jd_text(jd_get(r, "detail"));
        printf("rolled back: %s", jd_str(r, "reason") != NULL ? jd_str(r, "reason") : "?");
        if (jd_get(r, "failedIndex") != NULL)
            printf(" (op %lld lost: %s)", jd_int(r, "failedIndex", -1),
                   jd_str(r, "kvReason") != NULL ? jd_str(r, "kvReason") : "?");
        if (detail != NULL)
            printf(" %s", detail);
        printf("\n");
        free(detail);
    }
    jd_free(r);
    free(result);
    return success ? CTL_OK : CTL_NEGATIVE;
}
