/* util: the engine's bottom layer: the clock and one-line messages. Depends
 * on nothing of Queen's. */
#ifndef QUEEN_UTIL_H
#define QUEEN_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Milliseconds on the monotonic clock (a wall-clock step never moves it). */
long long engine_now_ms(void);

/* Makes a libpq message one line: inner newlines and tabs become spaces,
 * trailing whitespace goes (log lines and error details stay single). */
void engine_one_line(char *s);

/* Appends [p, p+len) to a growing NUL-terminated buffer (*buf may start
 * NULL with *used and *cap 0); false when it cannot grow. */
bool engine_buf_append(char **buf, size_t *used, size_t *cap, const char *p, size_t len);

#endif
