/* fiber: cooperative user-space contexts on one thread.
 *
 * The HTTP edge runs each request's handler on a fiber, so that when the
 * handler waits for the database the thread goes back to its event loop and
 * serves other requests instead of blocking. A fiber runs only on the thread
 * that started it; it switches only where it calls fiber_yield (the
 * database executor's wait), so code between two database calls runs as it
 * would on a thread of its own. Nothing may hold a lock across a yield: a
 * second fiber of the same thread taking that lock would wait forever. */
#ifndef QUEEN_FIBER_H
#define QUEEN_FIBER_H

/* The declarations are the HTTP edge's too: queen_runtime.h. */
#include "queen_runtime.h"

#endif
