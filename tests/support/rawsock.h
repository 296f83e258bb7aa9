/* rawsock: plain TCP to the broker, for the tests that must send what no
 * HTTP client library would (framing faults, trickled bytes, declared but
 * unsent bodies) and watch exactly what comes back and when the server
 * closes. Helpers fail the running test on a setup error. */
#ifndef QUEEN_RAWSOCK_H
#define QUEEN_RAWSOCK_H

#include <stdbool.h>
#include <stddef.h>

/* A connected socket to 127.0.0.1:port. */
int raw_connect(int port);

/* Sends all of buf; false when the server stopped taking it (it may close
 * before reading a refused request whole). */
bool raw_send(int fd, const char *buf, size_t len);

/* Reads until the server closes or timeout_ms pass: what arrived (malloc'd,
 * NUL-terminated, at most max_len bytes), *closed when the server closed. */
char *raw_read_until_closed(int fd, int timeout_ms, size_t max_len, bool *closed);

#endif
