/* queenctl: the command-line client (docs/man/queenctl.1). Global options
 * and the environment pick the broker; each subcommand lives in its own
 * file and returns the exit code. */
#include "ctl.h"
#include "jdoc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: queenctl [--url URL]... [--token TOKEN] [--tenant UUID] [--json] [--timeout MS] [--retries N]\n"
    "                COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  health                          the broker and its database answer\n"
    "  kv get|put|incr|del|ls ...      key/value state (queenctl kv --help)\n"
    "  push QUEUE [--partition P]      one message per line of stdin (JSON)\n"
    "  pop QUEUE [--group G] [--wait]  lease messages and print them\n"
    "  consume QUEUE -- CMD [ARG]...   each message to CMD's stdin, ack on exit 0\n"
    "  queues                          the queues and their message counts\n"
    "  configure QUEUE [OPTIONS_JSON]  create a queue or change its options\n"
    "  ack [TID PID LEASE]             settle messages (the one named, else pop's lines on stdin)\n"
    "  lease extend LEASE_ID           keep a lease (--seconds N)\n"
    "  dlq ls|requeue|del QUEUE ...    the queue's dead letters\n"
    "  tx FILE.json                    one transaction bundle ('-': stdin)\n"
    "\n"
    "The broker: --url (repeat it, or give a comma-separated list, for failover), else QUEEN_URL,\n"
    "else http://127.0.0.1:6632. --token or QUEEN_TOKEN: a bearer token. --tenant or QUEEN_TENANT.\n"
    "Output: a table on a terminal, JSON lines otherwise or with --json.\n"
    "Exit: 0 ok, 1 a negative answer (not found, not applied, empty, rolled back), 2 usage,\n"
    "3 refused by the broker (4xx), 4 unavailable (no answer, 5xx, rate limited).\n"
    "'queenctl COMMAND --help' describes each command.\n";

int ctl_usage_error(const char *usage, const char *fmt, ...)
{
    va_list ap;
    fputs("queenctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage);
    return CTL_USAGE;
}

int ctl_parse(int argc, char **argv, const ctl_opt *spec, const char **pos, int maxpos, int *npos, char ***rest,
              int *nrest, const char *usage)
{
    *npos = 0;
    if (rest != NULL) {
        *rest = NULL;
        *nrest = 0;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (rest == NULL) {
                ctl_usage_error(usage, "unexpected '--'");
                return -1;
            }
            *rest = argv + i + 1;
            *nrest = argc - i - 1;
            return 0;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t nl = eq != NULL ? (size_t)(eq - name) : strlen(name);
            const ctl_opt *o = spec;
            while (o != NULL && o->name != NULL && !(strlen(o->name) == nl && strncmp(o->name, name, nl) == 0))
                o++;
            if (o == NULL || o->name == NULL) {
                ctl_usage_error(usage, "unknown option %s", a);
                return -1;
            }
            if (o->arg != NULL) {
                if (eq != NULL)
                    *o->arg = eq + 1;
                else if (i + 1 < argc)
                    *o->arg = argv[++i];
                else {
                    ctl_usage_error(usage, "%s needs a value", a);
                    return -1;
                }
            } else {
                if (eq != NULL) {
                    ctl_usage_error(usage, "%.*s takes no value", (int)(eq - a), a);
                    return -1;
                }
                *o->flag = true;
            }
            continue;
        }
        if (*npos >= maxpos) {
            ctl_usage_error(usage, "unexpected argument '%s'", a);
            return -1;
        }
        pos[(*npos)++] = a;
    }
    return 0;
}

int ctl_fail(const char *what, const queen_client_error *e)
{
    if (e->status == 200 && strcmp(e->code, "kv_precondition") == 0) {
        /* clients/API.md's one wording of a lost precondition, then the live row. */
        fprintf(stderr, "queenctl: %s: kv precondition failed at op %d: %s (live version %lld, value %s)\n", what,
                e->precondition.index, e->precondition.reason, e->precondition.version,
                e->precondition.value_omitted ? "(too large to carry)" : e->precondition.value);
        return CTL_REFUSED;
    }
    if (e->status == 0)
        fprintf(stderr, "queenctl: %s: %s: %s\n", what, e->code, e->detail);
    else
        fprintf(stderr, "queenctl: %s: %d %s (%s)%s%s\n", what, e->status, e->code, e->reason,
                e->detail[0] ? ": " : "", e->detail);
    /* Apart from 4: "unavailable" is safe to run again, this may have been
     * applied already. */
    if (e->category == QUEEN_ERR_OUTCOME_UNKNOWN)
        return CTL_OUTCOME_UNKNOWN;
    /* By kind: what the client refused itself (bad_argument) is a refusal, not an outage. */
    const char *kind = queen_client_error_kind(e);
    if (strcmp(kind, "transport") == 0 || strcmp(kind, "unavailable") == 0 || strcmp(kind, "rate_limited") == 0 ||
        strcmp(kind, "server") == 0 || e->status == 408)
        return CTL_UNAVAILABLE;
    return CTL_REFUSED;
}

char *ctl_read_all(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    while (s != NULL) {
        if (n + 1 >= cap) {
            char *g = realloc(s, cap * 2);
            if (g == NULL) {
                free(s);
                return NULL;
            }
            s = g;
            cap *= 2;
        }
        size_t r = fread(s + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    if (s == NULL || ferror(f)) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    if (len != NULL)
        *len = n;
    return s;
}

bool ctl_long(const char *name, const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') {
        fprintf(stderr, "queenctl: %s: not an integer: %s\n", name, text);
        return false;
    }
    *out = v;
    return true;
}

static const char HEALTH_USAGE[] = "usage: queenctl health\n"
                                   "  Asks the broker whether it and its database answer (GET /health).\n";

int cmd_health(ctl *x, int argc, char **argv)
{
    const char *pos[1];
    int npos;
    int p = ctl_parse(argc, argv, NULL, pos, 0, &npos, NULL, NULL, HEALTH_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    char version[64];
    queen_client_error err;
    if (queen_client_health(x->client, version, sizeof version, &err) != 0)
        return ctl_fail("health", &err);
    if (x->table) {
        ctl_table *t = ctl_table_new(2, (const char *[]){"STATUS", "VERSION"});
        ctl_table_row(t, (const char *[]){"healthy", version});
        ctl_table_print(t, stdout);
    } else {
        printf("{\"status\":\"healthy\",\"version\":\"%s\"}\n", version);
    }
    return CTL_OK;
}

/* The URL list: repeated --url and comma-separated lists, in order. */
static int add_urls(char ***urls, size_t *n, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (copy == NULL)
        return -1;
    for (char *u = strtok_r(copy, ",", &save); u != NULL; u = strtok_r(NULL, ",", &save)) {
        while (*u == ' ')
            u++;
        if (*u == '\0')
            continue;
        char **g = realloc(*urls, (*n + 1) * sizeof *g);
        if (g == NULL) {
            free(copy);
            return -1;
        }
        *urls = g;
        (*urls)[(*n)++] = strdup(u);
    }
    free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    char **urls = NULL;
    size_t nurls = 0;
    const char *token = getenv("QUEEN_TOKEN"), *tenant = getenv("QUEEN_TENANT");
    long timeout_ms = 0, retries = -1;
    bool json = false;
    /* Global options may stand anywhere before a "--" (after it: the
     * consumer's command); the rest, in order, is the command line. */
    char **kept = calloc((size_t)argc + 1, sizeof *kept);
    int nkept = 0;
    bool after_dashes = false;
    if (kept == NULL)
        return CTL_UNAVAILABLE;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        const char *val = k + 1 < argc ? argv[k + 1] : NULL;
        bool takes_value = strcmp(a, "--url") == 0 || strcmp(a, "--token") == 0 || strcmp(a, "--tenant") == 0 ||
                           strcmp(a, "--timeout") == 0 || strcmp(a, "--retries") == 0;
        if (after_dashes || (!takes_value && strcmp(a, "--json") != 0 && strcmp(a, "--version") != 0)) {
            after_dashes = after_dashes || strcmp(a, "--") == 0;
            kept[nkept++] = argv[k];
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        }
        if (strcmp(a, "--version") == 0) {
            printf("queenctl %s\n", QUEEN_CLIENT_VERSION);
            free(kept);
            return CTL_OK;
        }
        if (val == NULL) {
            free(kept);
            return ctl_usage_error(USAGE, "%s needs a value", a);
        }
        k++;
        bool ok = true;
        if (strcmp(a, "--url") == 0)
            add_urls(&urls, &nurls, val);
        else if (strcmp(a, "--token") == 0)
            token = val;
        else if (strcmp(a, "--tenant") == 0)
            tenant = val;
        else if (strcmp(a, "--timeout") == 0)
            ok = ctl_long("--timeout", val, &timeout_ms);
        else
            ok = ctl_long("--retries", val, &retries);
        if (!ok) {
            free(kept);
            return CTL_USAGE;
        }
    }
    argc = nkept;
    argv = kept;
    int i = 0;
    if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
        fputs(USAGE, stdout);
        free(kept);
        return CTL_OK;
    }
    if (i >= argc) {
        free(kept);
        return ctl_usage_error(USAGE, "no command");
    }
    const char *cmd = argv[i++];
    if (strcmp(cmd, "help") == 0) {
        fputs(USAGE, stdout);
        free(kept);
        return CTL_OK;
    }
    if (nurls == 0)
        add_urls(&urls, &nurls, getenv("QUEEN_URL") != NULL && getenv("QUEEN_URL")[0] ? getenv("QUEEN_URL")
                                                                                         : "http://127.0.0.1:6632");
    queen_client_options o;
    queen_client_options_defaults(&o);
    o.urls = (const char *const *)urls;
    o.nurls = nurls;
    o.token = token;
    if (timeout_ms > 0)
        o.timeout_ms = (int)timeout_ms;
    if (retries >= 0)
        o.max_attempts = (int)retries + 1;
    queen_client_error err;
    ctl x = {.tenant = tenant != NULL && tenant[0] ? tenant : NULL, .table = !json && isatty(STDOUT_FILENO)};
    x.client = queen_client_open(&o, &err);
    int rc;
    if (x.client == NULL) {
        rc = ctl_fail("open", &err);
    } else {
        int sargc = argc - i;
        char **sargv = argv + i;
        if (strcmp(cmd, "health") == 0)
            rc = cmd_health(&x, sargc, sargv);
        else if (strcmp(cmd, "kv") == 0)
            rc = cmd_kv(&x, sargc, sargv);
        else if (strcmp(cmd, "push") == 0)
            rc = cmd_push(&x, sargc, sargv);
        else if (strcmp(cmd, "pop") == 0)
            rc = cmd_pop(&x, sargc, sargv);
        else if (strcmp(cmd, "consume") == 0)
            rc = cmd_consume(&x, sargc, sargv);
        else if (strcmp(cmd, "queues") == 0)
            rc = cmd_queues(&x, sargc, sargv);
        else if (strcmp(cmd, "tx") == 0)
            rc = cmd_tx(&x, sargc, sargv);
        else if (strcmp(cmd, "configure") == 0)
            rc = cmd_configure(&x, sargc, sargv);
        else if (strcmp(cmd, "ack") == 0)
            rc = cmd_ack(&x, sargc, sargv);
        else if (strcmp(cmd, "lease") == 0)
            rc = cmd_lease(&x, sargc, sargv);
        else if (strcmp(cmd, "dlq") == 0)
            rc = cmd_dlq(&x, sargc, sargv);
        else
            rc = ctl_usage_error(USAGE, "unknown command %s", cmd);
    }
    queen_client_close(x.client);
    for (size_t k = 0; k < nurls; k++)
        free(urls[k]);
    free(urls);
    free(kept);
    return rc;
}
