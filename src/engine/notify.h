/* notify: the LISTEN connection and the long-poll waiters.
 *
 * One thread owns one dedicated connection (never from the pool) that
 * LISTENs on queen_push, and a set of waiters keyed by "<tenant>:<queue>"
 * (queue NULL: a key every push of the tenant fires, for a pop by labels).
 * A NOTIFY whose payload is that key fires the waiters of the key; the same
 * thread fires waiters whose time is up. A lost connection is reopened, and
 * then every waiter is fired as woken (pushes may have gone unheard while it
 * was down, so everyone re-checks). Callbacks run on the notifier thread
 * with no engine lock held. */
#ifndef QUEEN_NOTIFY_H
#define QUEEN_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "queen.h"

typedef struct queen_notifier queen_notifier;

/* The channel and the re-check cadence. A waiter is also fired (woken =
 * true) every NOTIFY_RECHECK_MS: a message can become available with no push
 * (an expired or released lease), and the HTTP edge registers only after its
 * pop came back empty, so a push landing in between would otherwise be
 * heard by nobody until the timeout. One wasted pop per waiter per second
 * bounds both. */
#define NOTIFY_CHANNEL "queen_push"
#define NOTIFY_RECHECK_MS 1000

/* Starts the thread; the connection is made by the thread (a database that
 * is down at open is retried, not an error). NULL only when the thread or
 * memory cannot be had (err says which). */
queen_notifier *notifier_start(const char *conninfo, char *err, size_t errlen);

/* Stops accepting waiters, fires every pending one (woken = false), and
 * joins the thread. Idempotent. Caller-owned waiters stay valid. */
void notifier_shutdown(queen_notifier *n);

/* Frees what shutdown left (call after shutdown, once no caller can touch a
 * waiter). NULL is allowed. */
void notifier_free(queen_notifier *n);

/* Registers a one-shot waiter (see queen_wait_for_push). recheck: also fire
 * woken every NOTIFY_RECHECK_MS before the timeout. The returned waiter is
 * owned by the notifier, freed after its callback returned. NULL when the
 * notifier is shutting down or memory is short: nothing will fire. */
queen_waiter *notifier_add(queen_notifier *n, const char *tenant, const char *queue, int timeout_ms, bool recheck,
                           queen_wake_fn fn, void *ctx);

/* A waiter. Public code sees only the opaque queen_waiter; the engine places
 * one on its own stack for queen_pop's wait. Fields are the notifier's,
 * guarded by its mutex. */
#define NOTIFY_KEY_MAX 300 /* 36 (tenant) + 1 + 255 (queue) + NUL, rounded */
struct queen_waiter {
    struct queen_waiter *next, *prev; /* bucket list */
    size_t heap_i;                    /* position in the deadline heap */
    long long deadline;               /* monotonic ms: fire woken = false */
    long long recheck_at;             /* monotonic ms: fire woken = true (LLONG_MAX: never) */
    unsigned bucket;
    char key[NOTIFY_KEY_MAX];         /* "<tenant lower-case>:<queue>" */
    queen_wake_fn fn;
    void *ctx;
    bool linked;                      /* in a bucket and the heap: not fired yet */
    bool owned;                       /* caller memory: never freed here */
    bool done;                        /* owned only: the callback has returned */
    bool woken;                       /* the verdict handed to fn */
};

/* The same, for a waiter the caller owns (queen_pop's wait): w is
 * caller memory that stays valid until notifier_finish(n, w) returned.
 * Returns false (w unused) when shutting down or the key is too long. */
bool notifier_add_owned(queen_notifier *n, queen_waiter *w, const char *tenant, const char *queue, int timeout_ms,
                        queen_wake_fn fn, void *ctx);
/* Cancels w if it has not fired, or waits until its callback has returned.
 * After this the notifier never touches w again. */
void notifier_finish(queen_notifier *n, queen_waiter *w);

/* Hands the notifier the notifications a committed push owes: tenant and
 * what log_push_v1 or log_transaction_wire_v1 returned (the queues with a
 * queued message are notified, as log_notify_pushed_v1 says). The notifier
 * thread sends everything handed over since its last statement as one
 * statement on its own connection, asynchronously: the caller's request does
 * not wait, no pool connection is taken, and a burst of pushes to a queue
 * costs one notification. Statements leave at most one per few ms under
 * load, so another broker hears of a push up to that much later; this
 * notifier's own waiters of the queues are woken on its next turn, before
 * the NOTIFY could arrive. Call it only after the push committed (a
 * notification must not arrive before the message is visible). false when
 * it was dropped (shutting down, or 16 MiB of announcements already wait): waiters then find the message at their next re-check. */
bool notifier_announce(queen_notifier *n, const char *tenant, const char *results);

/* Pending waiters now, and whether the LISTEN connection is up. */
size_t notifier_waiting(queen_notifier *n);
bool notifier_connected(queen_notifier *n);
unsigned long notifier_reconnects(queen_notifier *n);
unsigned long notifier_notifies(queen_notifier *n);
/* Announcements handed over, statements that carried them, and those dropped. */
unsigned long notifier_announced(queen_notifier *n);
unsigned long notifier_announce_statements(queen_notifier *n);
unsigned long notifier_announce_dropped(queen_notifier *n);
/* Waiters of this notifier woken from its own announcements (not by the
 * NOTIFY's round trip through PostgreSQL). */
unsigned long notifier_local_wakes(queen_notifier *n);

/* Splits a queen_push payload "<tenant>:<queue>" into its parts (tenant is
 * always 36 characters). Returns false when the payload is not of that
 * shape. Pure; for tests. */
bool notify_split_payload(const char *payload, char tenant[37], const char **queue);

#endif
