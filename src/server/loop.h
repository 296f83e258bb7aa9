/* loop: the HTTP edge's event loops. One thread per loop, each with its own
 * libmicrohttpd daemon (driven from the loop's epoll, on its own listening
 * socket of one SO_REUSEPORT group: the kernel spreads new connections), its
 * own pipelined database connections (pipeline.h) and the fibers of its
 * requests (fiber.h): a handler runs on a fiber, and when it calls the
 * engine and the engine waits for the database, the fiber yields and the
 * loop serves other requests and results. No request waits behind another
 * request's round trip; a thread blocks only in epoll_wait. */
#ifndef QUEEN_LOOP_H
#define QUEEN_LOOP_H

#include <stdbool.h>

#include "http.h"

/* Binds the listening sockets, opens each loop's database connections and
 * daemon, and starts the threads. access/completed/etc. are http.c's
 * callbacks, handed through as MHD options. Returns 0 or -1 (logged). */
typedef struct loop_daemon_options {
    MHD_AccessHandlerCallback access;
    MHD_RequestCompletedCallback completed;
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *con);
    size_t (*unescape)(void *cls, struct MHD_Connection *c, char *s);
    MHD_NotifyConnectionCallback notify_connection;
    unsigned connection_timeout_s;
    size_t connection_memory;
    unsigned connection_limit;
    unsigned extra_flags;                 /* e.g. MHD_USE_TLS (tls.h) */
    struct MHD_OptionItem *extra_options; /* MHD_OPTION_ARRAY entries, ending with MHD_OPTION_END */
} loop_daemon_options;

int loops_start(server *srv, const loop_daemon_options *opts);

/* The loop running on this thread (NULL elsewhere). */
edge_loop *loop_current(void);

/* Wakes a loop from any thread, so its daemon serves a connection resumed
 * from outside (a long poll's waiter): libmicrohttpd's own wake-up does not
 * reach a daemon driven from an outer epoll. */
void loop_wake(edge_loop *L);

/* Stop, in two steps: quiesce (each loop stops accepting; serving goes on),
 * then finish (each loop fails what still waits for the database, lets its
 * fibers end, stops its daemon; the threads are joined). */
void loops_quiesce(server *srv);
void loops_finish(server *srv);

#endif
