/* rawjson: byte spans inside JSON text (the engine's one raw scanner).
 *
 * Values travel from the client to PostgreSQL byte for byte: jansson would
 * re-render numbers (0.1 becomes 0.10000000000000001, 2^64 does not parse at
 * all on the way out), and the edge's value guard measures a value as the
 * client sent it. Pure: never allocates, never validates beyond what it needs
 * to skip a value. On text that is not JSON it answers something bounded by
 * the span (never reads past it); a caller that needs validity gets it from
 * jansson or from PostgreSQL, which parses every value again. */
#ifndef QUEEN_RAWJSON_H
#define QUEEN_RAWJSON_H

/* The declarations are the HTTP edge's too: queen_runtime.h. */
#include "queen_runtime.h"

#endif
