/* longpoll: the long polls' waits (longpoll.c), and what http.c and the
 * poll code ask of each other. The API routes use is http.h's http_poll_*. */
#ifndef QUEEN_LONGPOLL_H
#define QUEEN_LONGPOLL_H

#include <stdbool.h>

#include "http.h"

/* http.c's: the request's poll (NULL until its first arm), and one more
 * suspension counted (the access log does not call a poll slow). */
http_poll **http_request_poll(const http_request *req);
void http_request_waited(const http_request *req);

/* Whether the request, dispatched again, must answer now: the broker stops,
 * or its waiter timed out. */
bool longpoll_answer_now(server *srv, http_poll *p);
/* The request ended (answered, or its client left): its wait closes, it
 * leaves the suspended list, and the request's reference goes. */
void longpoll_end(server *srv, http_poll *p);
/* At stop: every suspended poll is handed back to its loop to answer now.
 * Returns how many. */
int longpoll_resume_all(server *srv);
/* After the loops ended: the per-tenant counts left (none unless a request
 * outlived the drain). */
void longpoll_free_tenants(server *srv);

#endif
