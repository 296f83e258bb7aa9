/* queenctl kv: get, put, incr, del, ls. Values are JSON text, sent and
 * printed byte for byte. */
#include "ctl.h"
#include "jdoc.h"

#include <stdlib.h>
#include <string.h>

static const char KV_USAGE[] =
    "usage: queenctl kv get NS KEY\n"
    "       queenctl kv put NS KEY [VALUE] (--ttl SECONDS | --forever) [--expect VERSION] [--required]\n"
    "                                      [--if-absent]\n"
    "       queenctl kv incr NS KEY [DELTA] (--ttl SECONDS | --forever) [--min N] [--max N] [--required]\n"
    "       queenctl kv del NS KEY [--expect VERSION] [--required]\n"
    "       queenctl kv ls NS[/PREFIX] [--limit N] [--keys-only]\n"
    "  VALUE is JSON text (a string is \"quoted\"); without it, put reads the value from stdin.\n"
    "  get prints the value (exit 1 when there is none); with --json, the whole result.\n"
    "  --expect VERSION: only while the key holds that version (0: absent); --required makes a\n"
    "  lost condition a refusal (exit 3) instead of a result that was not applied (exit 1).\n"
    "  ls lists every key under the prefix, page after page (--limit: the first N only).\n";

/* A write's element: a row on a terminal, the element as a JSON line otherwise. */
static int show_write(ctl *x, const char *ns, const char *result)
{
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    bool applied = jd_true(r, "applied");
    if (x->table) {
        const jd *v = jd_get(r, "value"), *ver = jd_get(r, "version");
        char *value = jd_text(v), *version = jd_text(ver);
        ctl_table *t = ctl_table_new(6, (const char *[]){"NS", "KEY", "APPLIED", "REASON", "VERSION", "VALUE"});
        ctl_table_row(t, (const char *[]){ns, jd_str(r, "key"), applied ? "yes" : "no", jd_str(r, "reason"), version,
                                          value});
        ctl_table_print(t, stdout);
        free(value);
        free(version);
    } else {
        ctl_json_line(stdout, result);
    }
    jd_free(r);
    return applied ? CTL_OK : CTL_NEGATIVE;
}

static int kv_get(ctl *x, const char *ns, const char *key)
{
    char *result = NULL;
    queen_client_error err;
    if (queen_client_kv_get(x->client, x->tenant, ns, key, &result, &err) != 0)
        return ctl_fail("kv get", &err);
    jd *r = jd_parse(result, strlen(result), NULL, 0);
    int rc = jd_true(r, "found") ? CTL_OK : CTL_NEGATIVE;
    const jd *v = jd_get(r, "value");
    if (rc == CTL_NEGATIVE)
        fprintf(stderr, "queenctl: kv get: %s/%s: not found\n", ns, key);
    else if (v != NULL)
        printf("%.*s\n", (int)v->rawlen, v->raw);
    jd_free(r);
    free(result);
    return rc;
}

/* --ttl / --forever into libqueen's expiry argument. Every write names its
 * expiry: neither is a usage error here, said before anything is sent, so a
 * script learns which flags it lacks without a round trip and a refusal. */
static bool expiry(const char *ttl, bool forever, long *out)
{
    if (ttl != NULL && forever) {
        ctl_usage_error(KV_USAGE, "--ttl and --forever exclude each other");
        return false;
    }
    if (forever) {
        *out = QUEEN_FOREVER;
        return true;
    }
    if (ttl == NULL) {
        ctl_usage_error(KV_USAGE, "a write needs its expiry: --ttl SECONDS or --forever");
        return false;
    }
    return ctl_long("--ttl", ttl, out);
}

static void trim_newlines(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static int kv_ls(ctl *x, const char *spec, const char *limit_text, bool keys_only)
{
    char *ns = strdup(spec);
    char *slash = strchr(ns, '/');
    const char *prefix = NULL;
    if (slash != NULL) {
        *slash = '\0';
        prefix = slash + 1;
    }
    long limit = 0;
    if (limit_text != NULL && (!ctl_long("--limit", limit_text, &limit) || limit <= 0)) {
        free(ns);
        return CTL_USAGE;
    }
    ctl_table *t = x->table ? ctl_table_new(4, (const char *[]){"KEY", "VERSION", "EXPIRES", "VALUE"}) : NULL;
    char *after = NULL;
    long shown = 0;
    int rc = CTL_OK;
    for (;;) {
        char *page_text = NULL;
        queen_client_error err;
        long want = limit > 0 ? (limit - shown < 1000 ? limit - shown : 1000) : 1000;
        if (queen_client_kv_list(x->client, x->tenant, ns, prefix, after, (int)want, keys_only, false, &page_text,
                                 &err) != 0) {
            rc = ctl_fail("kv ls", &err);
            break;
        }
        jd *page = jd_parse(page_text, strlen(page_text), NULL, 0);
        const jd *rows = jd_get(page, "rows");
        for (size_t i = 0; rows != NULL && i < rows->n; i++) {
            const jd *row = rows->items[i];
            if (t != NULL) {
                char *version = jd_text(jd_get(row, "version")), *value = jd_text(jd_get(row, "value"));
                const char *exp = jd_str(row, "expiresAt");
                ctl_table_row(t, (const char *[]){jd_str(row, "key"), version, exp != NULL ? exp : "never", value});
                free(version);
                free(value);
            } else {
                char *text = jd_text(row);
                ctl_json_line(stdout, text);
                free(text);
            }
            shown++;
        }
        const char *next = jd_str(page, "nextAfter");
        bool more = jd_true(page, "truncated") && next != NULL && (limit == 0 || shown < limit);
        free(after);
        after = more ? strdup(next) : NULL;
        jd_free(page);
        free(page_text);
        if (!more)
            break;
    }
    free(after);
    ctl_table_print(t, stdout);
    free(ns);
    return rc;
}

int cmd_kv(ctl *x, int argc, char **argv)
{
    const char *ttl = NULL, *expect_text = NULL, *min_text = NULL, *max_text = NULL, *limit = NULL;
    bool forever = false, required = false, if_absent = false, keys_only = false;
    const ctl_opt spec[] = {{"ttl", &ttl, NULL},           {"forever", NULL, &forever},
                            {"expect", &expect_text, NULL}, {"required", NULL, &required},
                            {"if-absent", NULL, &if_absent}, {"min", &min_text, NULL},
                            {"max", &max_text, NULL},       {"limit", &limit, NULL},
                            {"keys-only", NULL, &keys_only}, {NULL, NULL, NULL}};
    const char *pos[4];
    int npos;
    int p = ctl_parse(argc, argv, spec, pos, 4, &npos, NULL, NULL, KV_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos < 1)
        return ctl_usage_error(KV_USAGE, "kv needs a subcommand");
    const char *sub = pos[0];
    long expect = -1;
    if (expect_text != NULL && !ctl_long("--expect", expect_text, &expect))
        return CTL_USAGE;
    if (strcmp(sub, "ls") == 0) {
        if (npos != 2)
            return ctl_usage_error(KV_USAGE, "kv ls takes NS[/PREFIX]");
        return kv_ls(x, pos[1], limit, keys_only);
    }
    if (npos < 3)
        return ctl_usage_error(KV_USAGE, "kv %s needs NS and KEY", sub);
    const char *ns = pos[1], *key = pos[2];
    char *result = NULL;
    queen_client_error err;
    if (strcmp(sub, "get") == 0) {
        if (npos != 3)
            return ctl_usage_error(KV_USAGE, "kv get takes NS KEY");
        return kv_get(x, ns, key);
    }
    if (strcmp(sub, "put") == 0) {
        long exp;
        if (!expiry(ttl, forever, &exp))
            return CTL_USAGE;
        char *value = npos == 4 ? strdup(pos[3]) : ctl_read_all(stdin, NULL);
        if (value == NULL)
            return ctl_usage_error(KV_USAGE, "could not read the value from stdin");
        trim_newlines(value);
        int rc = if_absent ? queen_client_kv_put_if_absent(x->client, x->tenant, ns, key, value, exp, required,
                                                           &result, &err)
                           : queen_client_kv_put(x->client, x->tenant, ns, key, value, exp, expect, required, &result,
                                                 &err);
        free(value);
        if (rc != 0)
            return ctl_fail("kv put", &err);
    } else if (strcmp(sub, "incr") == 0) {
        long exp;
        if (!expiry(ttl, forever, &exp))
            return CTL_USAGE;
        char *end;
        double delta = npos == 4 ? strtod(pos[3], &end) : 1;
        if (npos == 4 && (*end != '\0' || end == pos[3]))
            return ctl_usage_error(KV_USAGE, "DELTA is not a number: %s", pos[3]);
        double mn = min_text != NULL ? strtod(min_text, NULL) : 0, mx = max_text != NULL ? strtod(max_text, NULL) : 0;
        if (queen_client_kv_incr(x->client, x->tenant, ns, key, delta, min_text != NULL ? &mn : NULL,
                                 max_text != NULL ? &mx : NULL, exp, required, &result, &err) != 0)
            return ctl_fail("kv incr", &err);
    } else if (strcmp(sub, "del") == 0) {
        if (npos != 3)
            return ctl_usage_error(KV_USAGE, "kv del takes NS KEY");
        if (queen_client_kv_delete(x->client, x->tenant, ns, key, expect, required, &result, &err) != 0)
            return ctl_fail("kv del", &err);
    } else {
        return ctl_usage_error(KV_USAGE, "unknown kv subcommand %s", sub);
    }
    int rc = show_write(x, ns, result);
    free(result);
    return rc;
}
