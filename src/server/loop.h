/* loop: the HTTP edge's event loops. One thread per loop, each with its own
 * connections (conn.h, on its own listening socket of one SO_REUSEPORT
 * group: the kernel spreads new connections), its own pipelined database
 * connections (pipeline.h) and the fibers of its requests (fiber.h), all on
 * one epoll set: a handler runs on a fiber, and when it calls the engine and
 * the engine waits for the database, the fiber yields and the loop serves
 * other requests and results. No request waits behind another request's
 * round trip; a thread blocks only in epoll_wait. One turn: wait, handle the
 * ready sockets, run the fibers whose statements were answered, write the
 * answers they made, run woken long polls, check deadlines when due. */
#ifndef QUEEN_LOOP_H
#define QUEEN_LOOP_H

#include <stdbool.h>

#include "http.h"

/* Binds the listening sockets, opens each loop's database connections and
 * connection set (conn.h, serving srv->tls when set), and starts the
 * threads. Returns 0 or -1 (logged). */
int loops_start(server *srv);

/* The loop running on this thread (NULL elsewhere). */
edge_loop *loop_current(void);

/* Wakes a loop from any thread (a long poll's waiter resumed a request of
 * it, or the broker stops). */
void loop_wake(edge_loop *L);
/* The loop's list of woken long polls (http.c's, under srv->poll_lock). */
http_poll **loop_resumed(edge_loop *L);
server *loop_server(edge_loop *L);

/* Stop, in two steps: quiesce (each loop stops accepting; serving goes on),
 * then finish (each loop fails what still waits for the database, lets its
 * fibers end, writes what they answered if the socket takes it, closes its
 * connections; the threads are joined). */
void loops_quiesce(server *srv);
void loops_finish(server *srv);

#endif
