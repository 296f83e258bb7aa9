/* conn: the HTTP edge's connections, on the event loops (loop.h). Accepts,
 * reads and writes without blocking (TLS through tls.h on the same sockets),
 * parses through h1.h, and moves each connection through one state machine
 * (conn.c: conn_step), so every deadline, hang-up and shutdown is handled in
 * one place:
 *
 *   READ_HEAD --head--> READ_BODY --body--> ENGINE --answer--> WRITE --sent--> READ_HEAD (keep-alive)
 *       |                   |                  \--suspend--> POLL --wake--> (dispatched again)
 *       |                   \--refused (413, 400 framing)--> WRITE --sent--> DRAIN --> closed
 *       \--malformed (400/414/431/505), 408 at the read deadline--> WRITE --> DRAIN --> closed
 *
 * Deadlines: QUEEN_IDLE_TIMEOUT_MS in READ_HEAD before a request's first
 * byte; QUEEN_REQUEST_READ_TIMEOUT_MS from the first byte to the last (408,
 * closed); QUEEN_RESPONSE_WRITE_TIMEOUT_MS while an answer is being written
 * (a client that does not read it is cut and its answer freed). ENGINE and
 * POLL have none here: the database call and the long poll's waiter bound
 * them. Each loop checks its own connections every tick (a tenth of the
 * shortest deadline, 10 ms to 1 s): no thread of its own, no lock.
 *
 * Counts open connections against QUEEN_MAX_CONNECTIONS over all loops
 * (past it a request is answered 503 and the connection closed; past the
 * headroom a loop stops accepting and connections wait in the backlog). Logs
 * (at most one line per kind per 10 s, with a count) what it refuses and
 * cuts. */
#ifndef QUEEN_CONN_H
#define QUEEN_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "h1.h"
#include "http.h"
#include "queen_runtime.h"

typedef struct conn conn;
struct tls_ctx;

/* One loop's connections: lives in its edge_loop, used on its thread only. */
typedef struct conn_set {
    server *srv;
    edge_loop *loop;
    int epfd;
    int listen_fd;              /* -1 once quiesced */
    bool listen_paused;         /* out of epoll: the connection limit is reached */
    loop_watch listen_watch;
    struct tls_ctx *tls;        /* NULL: plain HTTP */
    conn *all;                  /* every open connection, for the deadlines */
    conn *flush;                /* connections whose answer is ready: written next turn */
    char *scratch;              /* body bytes are read here, then decoded into the request's buffer */
    long long next_tick_ms;
} conn_set;

/* Raises the open-file soft limit to the hard limit (logged) and returns the
 * limit now in force. */
long conn_raise_fd_limit(void);

/* Sizes the cap from srv->cfg and the open-file limit nofile. 0, or -1
 * (logged). */
int conn_guard_start(server *srv, long nofile);
void conn_guard_free(server *srv);

/* A loop's set, watching listen_fd on epfd. 0 or -1. */
int conn_set_open(conn_set *s, server *srv, edge_loop *loop, int epfd, int listen_fd, struct tls_ctx *tls);
/* One loop turn's edge work: answers that became ready (fibers that ended,
 * long polls woken) go out, deadlines are checked when a tick is due. */
void conn_set_run(conn_set *s, long long now_ms);
/* How long the loop may sleep for the edge's sake (ms, >= 0). */
int conn_set_wait_ms(const conn_set *s, long long now_ms);
/* Stops accepting: what waits in the backlog is taken first, then the
 * listening socket closes (a client connecting during the drain is refused
 * at once and tries elsewhere). */
void conn_set_quiesce(conn_set *s);
/* Closes every connection (a request in it ends unanswered) and the set. */
void conn_set_close(conn_set *s);

/* ---- What http.c asks of a connection ------------------------------------ */

/* The request's parsed head. */
const h1 *conn_head(const conn *c);
/* http.c's state of the request in progress, or NULL. */
void *conn_request(const conn *c);
void conn_set_request(conn *c, void *req);
/* The connection was opened past QUEEN_MAX_CONNECTIONS (counted here). */
bool conn_over_cap(server *srv, conn *c);
/* The loop the connection lives on. */
edge_loop *conn_loop(const conn *c);
/* Renders res (taking its body) as the request's answer; written when the
 * loop's stack is its own again. res->close (or a request that cannot be
 * trusted further) closes the connection after it. */
void conn_answer(conn *c, http_response *res);
/* The handler, after a wait for the database, suspended the request for a
 * long poll (from its fiber): the connection waits in POLL. */
void conn_suspended(conn *c);
/* A long poll was woken (on the connection's loop): dispatched again. */
void conn_resume(conn *c);

typedef struct conn_figures {
    long long open;           /* connections open now, over-cap ones included */
    long long cap;            /* QUEEN_MAX_CONNECTIONS in force (lowered to fit the fd limit) */
    long long refused;        /* requests answered 503 for arriving past the cap */
    long long read_timeouts;  /* requests cut at QUEEN_REQUEST_READ_TIMEOUT_MS */
    long long idle_closed;    /* idle keep-alive connections closed at QUEEN_IDLE_TIMEOUT_MS */
    long long write_timeouts; /* answers cut at QUEEN_RESPONSE_WRITE_TIMEOUT_MS */
    long long answer_bytes;   /* answer bytes held for connections now */
} conn_figures;

void conn_figures_get(const server *srv, conn_figures *out);

#endif
