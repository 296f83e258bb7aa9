/* queenctl: what the subcommands share (docs/man/queenctl.1 is the manual). */
#ifndef QUEENCTL_CTL_H
#define QUEENCTL_CTL_H

#include "queen_client.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: what a script branches on. */
enum {
    CTL_OK = 0,
    CTL_NEGATIVE = 1,    /* a fine answer that says no: not found, not applied, empty, rolled back */
    CTL_USAGE = 2,       /* the command line is wrong */
    CTL_REFUSED = 3,     /* the broker refused the call (4xx, a KV precondition verdict) */
    CTL_UNAVAILABLE = 4, /* no answer, 5xx, or rate limited after the retries */
    CTL_OUTCOME_UNKNOWN = 5, /* 504 db_outcome_unknown: it may have been applied; a script must check */
};

typedef struct ctl {
    queen_client *client;
    const char *tenant;
    bool table; /* a person at a terminal: aligned columns; else JSON lines */
} ctl;

/* One option of a subcommand: --name, with an argument when arg is set
 * (stored in *arg), else a flag (stored in *flag). */
typedef struct ctl_opt {
    const char *name;
    const char **arg;
    bool *flag;
} ctl_opt;

/* Splits argv (after the subcommand) into options of spec and positional
 * arguments (at most maxpos, in pos); "--" ends the options and, when rest
 * is given, hands the words after it back there. --help prints usage and
 * returns 1 (the caller exits 0); a mistake prints why and returns -1. */
int ctl_parse(int argc, char **argv, const ctl_opt *spec, const char **pos, int maxpos, int *npos, char ***rest,
              int *nrest, const char *usage);

/* The broker's refusal or the client's failure on stderr; the exit code for it. */
int ctl_fail(const char *what, const queen_client_error *err);
int ctl_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A whole stream as a malloc'd string (NULL on a read error). */
char *ctl_read_all(FILE *f, size_t *len);
/* A number option; false (after saying so) when it is not one. */
bool ctl_long(const char *name, const char *text, long *out);

/* ---- output ---- */
typedef struct ctl_table ctl_table;
ctl_table *ctl_table_new(int ncols, const char *const *headers);
/* ncols cells; NULL prints as "-". Cells are copied. */
void ctl_table_row(ctl_table *t, const char *const *cells);
void ctl_table_print(ctl_table *t, FILE *out); /* and frees it */
/* One JSON text on its own line (newlines inside it are whitespace: removed). */
void ctl_json_line(FILE *out, const char *json);

/* ---- subcommands: each returns the exit code ---- */
int cmd_health(ctl *x, int argc, char **argv);
int cmd_kv(ctl *x, int argc, char **argv);
int cmd_push(ctl *x, int argc, char **argv);
int cmd_pop(ctl *x, int argc, char **argv);
int cmd_consume(ctl *x, int argc, char **argv);
int cmd_queues(ctl *x, int argc, char **argv);
int cmd_tx(ctl *x, int argc, char **argv);
int cmd_configure(ctl *x, int argc, char **argv);
int cmd_ack(ctl *x, int argc, char **argv);
int cmd_lease(ctl *x, int argc, char **argv);
int cmd_dlq(ctl *x, int argc, char **argv);

#endif
