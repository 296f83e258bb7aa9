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

/* queen.h: the opaque handle (new, free, set, get, from_env, resolve).
 * queen_runtime.h: the layout, defaults and clear on a caller's struct,
 * --flags, the cross-setting rules, the session settings, --help and the
 * markdown table (the broker's too). */
#include "queen_runtime.h"

#endif
