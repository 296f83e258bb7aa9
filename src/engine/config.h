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

/* --flags, the cross-setting rules, the session settings, --help and the
 * markdown table are the broker's too: queen_runtime.h. */
#include "queen_runtime.h"

#endif
