/* logging: one line per event on stderr, with a UTC timestamp and a level.
 * Thread-safe (one write(2) per line). Keys and values never go here. */
#ifndef QUEEN_LOGGING_H
#define QUEEN_LOGGING_H

/* queen_log and log_error(...) etc. are the HTTP edge's too:
 * queen_runtime.h; queen_log_set_level is queen.h's. */
#include "queen_runtime.h"

#endif
