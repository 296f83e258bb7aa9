/* log: the message calls of libqueen. The functions are public (queen_push,
 * queen_pop, queen_ack, ... in queen.h); this header holds the defaults the
 * engine applies before SQL sees a request. */
#ifndef QUEEN_LOG_H
#define QUEEN_LOG_H

#include "queen.h"

/* A waiting pop with timeout_ms 0 waits this long (the HTTP API default). */
#define QUEEN_POP_DEFAULT_TIMEOUT_MS 30000

#endif
