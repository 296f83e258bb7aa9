/* config: every setting of the broker and the embedded library, in one table.
 *
 * The table (config.c) is the only place a setting is named: environment
 * parsing, --flags, --help and docs/settings.md's table all come from it. A value
 * that does not parse is an error naming the setting, never a silent default. */
#ifndef QUEEN_CONFIG_H
#define QUEEN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "queen.h"

/* Fills cfg with every default. Strings point at static storage until
 * overwritten by queen_config_set(), which allocates; queen_config_free()
 * releases what was allocated. */
void queen_config_defaults(queen_config *cfg);
void queen_config_free(queen_config *cfg);

/* Sets one setting by its environment name (QUEEN_PORT) or flag name
 * (port). Returns 0, or -1 with a message naming the setting in err. */
int queen_config_set(queen_config *cfg, const char *name, const char *value, char *err, size_t errlen);

/* Reads every QUEEN_* variable of the table from the environment. */
int queen_config_from_env(queen_config *cfg, char *err, size_t errlen);

/* Parses --name=value / --name value flags from argv (after the subcommand).
 * Returns the number of arguments consumed, or -1 with err set. */
int queen_config_from_args(queen_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Cross-setting rules (tenancy needs a trusted proxy, ...). Give it a
 * resolved config (queen_config_resolve): the rules compare derived values. */
int queen_config_validate(const queen_config *cfg, char *err, size_t errlen);

/* The per-tenant limits SQL enforces, as the options of a connection's
 * startup packet ("-c queen.max_queues_per_tenant=N ..."): every broker
 * and libqueen connection carries them as session settings, read by
 * sql/log_schema.sql's _tenant_limit_v1, so no SQL signature changes for them. */
void queen_config_session_settings(const queen_config *cfg, char *out, size_t n);

/* --help text, and docs/settings.md's markdown table, both from the table. */
void queen_config_print_help(FILE *out);
void queen_config_print_markdown(FILE *out);

#endif
