/* console_assets: the web console's static files (console/), compiled into
 * the binary by scripts/embed.sh (the Makefile's gen/console_files.c), so an
 * installed broker serves its console without a source tree. */
#ifndef QUEEN_CONSOLE_ASSETS_H
#define QUEEN_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct console_asset {
    const char *name; /* the file's base name: what follows /console/ */
    const char *data; /* its bytes, NUL-terminated (text files only) */
    size_t len;
    const char *etag; /* "\"<sha-256 prefix>\"": changes when the content does */
} console_asset;

extern const console_asset console_assets[];
extern const size_t console_asset_count;

#endif
