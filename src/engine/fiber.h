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

#include <stdbool.h>
#include <stddef.h>

typedef struct fiber fiber;
typedef void (*fiber_fn)(void *arg);

/* A fiber that will run fn(arg) when first resumed, or NULL (no memory).
 * Stacks are reused: fiber_free keeps a few for the next fiber_new. */
fiber *fiber_new(fiber_fn fn, void *arg);
void fiber_free(fiber *f);

/* Switches from the thread's own stack to f until it yields or returns.
 * Returns true when fn has returned (f may be freed then). */
bool fiber_resume(fiber *f);

/* From inside a fiber: back to whoever resumed it. */
void fiber_yield(void);

/* The fiber running on this thread, or NULL on the thread's own stack. */
fiber *fiber_current(void);

/* One deadline for all the database work of the fiber (a request's
 * handler run): 0 until set; its user (the database executor, pipeline.c)
 * sets it at the fiber's first statement and holds every later one to it. */
long long fiber_deadline_ms(const fiber *f);
void fiber_set_deadline_ms(fiber *f, long long deadline_ms);

/* Frees the stacks this thread keeps for reuse (at thread exit). */
void fiber_release_cache(void);

#endif
