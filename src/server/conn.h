/* conn: the HTTP edge's connection guard. Counts open connections against
 * QUEEN_MAX_CONNECTIONS (past it a request is answered 503 and the
 * connection closed, instead of waiting unseen in the listen backlog), and
 * runs a watchdog thread that enforces two deadlines libmicrohttpd cannot:
 * QUEEN_REQUEST_READ_TIMEOUT_MS from a request's first byte to its last
 * (MHD's own timeout restarts on every byte, so a trickling sender never
 * meets it) and QUEEN_IDLE_TIMEOUT_MS for a keep-alive connection with no
 * request in progress. Logs (at most one line per kind per 10 s, with a
 * count) and counts (metrics) what it refuses and cuts. */
#ifndef QUEEN_CONN_H
#define QUEEN_CONN_H

#include <stdbool.h>

#include <microhttpd.h>

#include "http.h"

/* Raises the open-file soft limit to the hard limit (logged) and returns the
 * limit now in force. */
long conn_raise_fd_limit(void);

/* Sizes the guard from srv->cfg and the open-file limit nofile, and starts
 * the watchdog. Returns the connection limit to give MHD (the cap plus the
 * headroom to answer the excess), 0 on failure (logged). */
unsigned conn_guard_start(server *srv, long nofile);
/* Stops the watchdog (before MHD_stop_daemon); conn_guard_free after it. */
void conn_guard_stop(server *srv);
void conn_guard_free(server *srv);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the server. */
void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode code);

/* A request's request line arrived (the URI log callback): its read
 * deadline runs from here, or from earlier when the watchdog saw its first
 * bytes sooner. */
void conn_request_reading(struct MHD_Connection *c);
/* True when this connection was opened past the cap: its request gets the
 * 503 (counted and logged here) and the connection closes. */
bool conn_over_cap(server *srv, struct MHD_Connection *c);
/* The whole request is in: no deadline until it completes. False when the
 * watchdog already cut it (the answer must not be sent). */
bool conn_request_handling(struct MHD_Connection *c);
/* The watchdog cut this request: stop reading it. */
bool conn_cut(struct MHD_Connection *c);
/* The request completed: the connection is idle (keep-alive) again. */
void conn_request_done(struct MHD_Connection *c);

typedef struct conn_figures {
    long long open;           /* connections open now, over-cap ones included */
    long long cap;            /* QUEEN_MAX_CONNECTIONS in force (lowered to fit the fd limit) */
    long long refused;        /* requests answered 503 for arriving past the cap */
    long long read_timeouts;  /* requests cut at QUEEN_REQUEST_READ_TIMEOUT_MS */
    long long idle_closed;    /* idle keep-alive connections closed at QUEEN_IDLE_TIMEOUT_MS */
} conn_figures;

void conn_figures_get(const server *srv, conn_figures *out);

#endif
