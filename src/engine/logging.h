/* logging: one line per event on stderr, with a UTC timestamp and a level.
 * Thread-safe (one write(2) per line). Keys and values never go here. */
#ifndef QUEEN_LOGGING_H
#define QUEEN_LOGGING_H

#include "queen.h"

void queen_log_set_level(queen_log_level level);
bool queen_log_enabled(queen_log_level level);
void queen_log(queen_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) queen_log(QUEEN_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) queen_log(QUEEN_LOG_WARN, __VA_ARGS__)
#define log_info(...) queen_log(QUEEN_LOG_INFO, __VA_ARGS__)
#define log_debug(...) queen_log(QUEEN_LOG_DEBUG, __VA_ARGS__)

#endif
