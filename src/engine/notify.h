/* notify: the LISTEN connection and the long-poll waiters.
 *
 * One thread owns one dedicated connection (never from the pool) that
 * LISTENs on queen_push, and two kinds of waiters keyed by "<tenant>:<queue>"
 * (queue NULL: a key every push of the tenant fires, for a pop by labels):
 *
 * - pop waiters (notifier_wait_open: queen_pop's wait, the HTTP long poll)
 *   also know their consumer group and partition. They stay registered, in
 *   order of opening, from the first attempt to the answer: a push of k
 *   messages to the queue wakes the first k waiting of each (group,
 *   partition) key, each of which pops once and either leaves
 *   (notifier_wait_close) or goes back to waiting in its place
 *   (notifier_wait_again). Once a second the thread sends the distinct keys
 *   that have waiters to queen.log_poppable_v1 as ONE statement and wakes as
 *   many waiters of each key it returns as it has claimable partitions
 *   beyond the waiters of the key popping already (a push's woken waiters
 *   are going for those: one push never wakes twice its count): idle
 *   waiters cost one read-only statement per second for the whole broker,
 *   not a pop each. After woken waiters took messages, their key is checked
 *   again at once (what a batch left behind does not wait a second).
 * - plain waiters (notifier_add: queen_wait_for_push) fire once, on any push
 *   to their key, and every NOTIFY_RECHECK_MS as before.
 *
 * A NOTIFY payload '<tenant>:<queue>' chr(31) '<n>' says n messages were
 * queued; the bare '<tenant>:<queue>' (an older sender, or a push that
 * notified inside its own transaction) wakes every waiter of the queue.
 * A lost connection is reopened, and then every plain waiter is fired and
 * every pop waiter's key checked (pushes may have gone unheard); while it is
 * down, every pop waiter is woken once a tick, as plain waiters are.
 * Callbacks run on the notifier thread with no engine lock held. */
#ifndef QUEEN_NOTIFY_H
#define QUEEN_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* Separates a payload's queue from its message count (no queue name holds a
 * control character: log_name_ok_v1). */
#define NOTIFY_COUNT_SEP '\x1f'

/* Starts the thread; the connection is made by the thread (a database that
 * is down at open is retried, not an error). NULL only when the thread or
 * memory cannot be had (err says which). */
queen_notifier *notifier_start(const char *conninfo, char *err, size_t errlen);

/* Stops accepting waiters, fires every pending one (woken = false), and
 * joins the thread. Idempotent. Pop waiters stay valid until closed. */
void notifier_shutdown(queen_notifier *n);

/* Frees what shutdown left (call after shutdown, once no caller can touch a
 * waiter). NULL is allowed. */
void notifier_free(queen_notifier *n);

/* Registers a one-shot waiter (see queen_wait_for_push), also fired woken
 * NOTIFY_RECHECK_MS after registration when its timeout is later. The returned waiter is
 * owned by the notifier, freed after its callback returned. NULL when the
 * notifier is shutting down or memory is short: nothing will fire. */
queen_waiter *notifier_add(queen_notifier *n, const char *tenant, const char *queue, int timeout_ms, queen_wake_fn fn,
                           void *ctx);

/* A waiter. Public code sees only the opaque queen_waiter. Fields are the
 * notifier's, guarded by its mutex. */
#define NOTIFY_KEY_MAX 300 /* 36 (tenant) + 1 + 255 (queue) + NUL, rounded */
struct notify_key;
struct queen_waiter {
    struct queen_waiter *next, *prev; /* bucket list (plain), its key's list in order of opening (pop) */
    struct queen_waiter *fire_next;   /* the list being fired */
    struct notify_key *wk;            /* a pop waiter's key; NULL: a plain waiter */
    int state;                        /* a pop waiter's (notify.c) */
    bool firing;                      /* a pop waiter: on the fire list or in its callback */
    size_t heap_i;                    /* position in the deadline heap */
    long long deadline;               /* monotonic ms: fire woken = false */
    long long recheck_at;             /* monotonic ms: fire woken = true (LLONG_MAX: never) */
    unsigned bucket;
    char key[NOTIFY_KEY_MAX];         /* "<tenant lower-case>:<queue>" */
    queen_wake_fn fn;
    void *ctx;
    bool linked;                      /* in a bucket and the heap: not fired yet */
    bool woken;                       /* the verdict handed to fn */
};

/* Pop waiters. Opens one for a pop of (tenant, queue or, with queue NULL,
 * the labels ns/task; group NULL: queue mode; partition NULL: any) that may
 * wait timeout_ms; open it BEFORE the first attempt, so that a push that
 * commits during it still wakes it. fn(ctx, true): pop now, then call
 * notifier_wait_again (nothing found) or notifier_wait_close; fn(ctx,
 * false): the time is up or the notifier stops; close it. fn fires at most
 * once per wait, never after close returned. NULL when stopping, out of
 * memory or a name is too long. */
queen_waiter *notifier_wait_open(queen_notifier *n, const char *tenant, const char *queue, const char *ns,
                                 const char *task, const char *group, const char *partition, int timeout_ms,
                                 queen_wake_fn fn, void *ctx);
typedef enum notify_verdict {
    NOTIFY_SLEEP, /* waiting again in its place (or it never woke): fn will fire */
    NOTIFY_RETRY, /* pop again now: a wake came while it was popping and found no one else waiting */
    NOTIFY_DONE,  /* its time is up or the notifier stops: answer "nothing" and close */
} notify_verdict;
/* After an attempt that found nothing. */
notify_verdict notifier_wait_again(queen_notifier *n, queen_waiter *w);
/* Ends the wait and frees w (waits for a callback in progress to return).
 * popped: the last attempt took messages, so its key may hold more: it is
 * checked again once none of its waiters is popping. */
void notifier_wait_close(queen_notifier *n, queen_waiter *w, bool popped);

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
/* queen.log_poppable_v1 statements sent (one per tick while pop waiters
 * wait, plus the checks after woken waiters took messages), the ticks that
 * sent one, and the pop waiters their answers woke. */
unsigned long notifier_checks(queen_notifier *n);
unsigned long notifier_check_ticks(queen_notifier *n);
unsigned long notifier_check_wakes(queen_notifier *n);
/* Pop waiters woken by pushes (counts or bare payloads, local or NOTIFY). */
unsigned long notifier_push_wakes(queen_notifier *n);

/* Splits a queen_push payload "<tenant>:<queue>" into its parts (tenant is
 * always 36 characters). Returns false when the payload is not of that
 * shape. Pure; for tests. */
bool notify_split_payload(const char *payload, char tenant[37], const char **queue);
/* Cuts a trailing NOTIFY_COUNT_SEP "<n>" off payload (in place): its n, or
 * SIZE_MAX (wake all) when there is none or it does not parse. Pure. */
size_t notify_cut_count(char *payload);

#endif
