/* campaign: what the reliability suites (tests/linearizability,
 * tests/faults) share: HTTP calls safe on worker threads (no cmocka), a
 * broker killed with SIGKILL and started again on the same port, a crash
 * and restart of the private PostgreSQL, run lengths read from the
 * environment, and figures appended to $QUEEN_CAMPAIGN_FIGURES for
 * `make torture` (scripts/torture.sh) to report. */
#ifndef QUEEN_TEST_CAMPAIGN_H
#define QUEEN_TEST_CAMPAIGN_H

#include <stdatomic.h>
#include <stdbool.h>

#include <libpq-fe.h>

#include "broker.h"

/* What became of one call made from a worker thread. */
typedef enum campaign_outcome {
    CALL_ANSWERED,    /* an HTTP answer came back (any status) */
    CALL_NOT_SENT,    /* the connection was refused: the broker never saw it */
    CALL_NO_ANSWER,   /* sent, but no answer: it may or may not have applied */
} campaign_outcome;

/* One POST of body to base+path on a per-thread handle (created when *curl
 * is NULL; free with campaign_http_done). *status and *reply (malloc'd,
 * caller frees; NULL unless answered) describe an answer. */
campaign_outcome campaign_post(void **curl, const char *base, const char *path, const char *body, long *status,
                               char **reply);
void campaign_http_done(void **curl);

/* Polls GET /health until it answers 200, up to within_ms. */
bool campaign_wait_healthy(void **curl, const char *base, int within_ms);

/* SIGKILL the broker, reap it, start it again on the same port with the
 * same pg_url and extra environment, and wait until healthy (30 s). */
bool campaign_broker_restart_hard(test_broker *b, const char *pg_url, const char *const *extra_env);

/* pg_ctl stop -m immediate on the private cluster ($QUEEN_TEST_PG_DIR),
 * and the cluster started again (scripts/pg.sh up, which waits until it
 * accepts connections). Both return true on success. */
bool campaign_pg_crash(void);
bool campaign_pg_up(void);

/* An integer from the environment, or fallback when unset or not a number. */
long campaign_env_long(const char *name, long fallback);

/* Appends "name value" to $QUEEN_CAMPAIGN_FIGURES (when set) and prints it
 * as a TAP comment. */
void campaign_figure(const char *name, long long value);

/* CLOCK_MONOTONIC in nanoseconds. */
long long campaign_now_ns(void);


/* A new database on the private cluster (pgtest_create_database) whose
 * sessions commit synchronously: the cluster runs with
 * synchronous_commit=off for speed, under which a PostgreSQL crash may
 * forget commits it already acknowledged, which would hide what the fault
 * suites look for. Returns its conninfo (malloc'd); *dbname for the drop.
 * Fails the running test on error (main thread only). */
char *campaign_durable_database(const char *prefix, char **dbname);

/* The rig a fault-bearing suite runs on: its durable database
 * (campaign_durable_database) and a broker on it, quiet but for errors. */
typedef struct campaign_rig {
    test_broker broker;
    char *db_url, *db_name;
    const char *const *env;
} campaign_rig;
extern campaign_rig RIG;

/* A suite's main: its one test on a fresh rig (the database named after
 * prefix), torn down whatever happens: the cluster left running, the
 * broker stopped, the database dropped. Returns cmocka's verdict. */
/* Whether a POST /api/v1/kv reply says its first operation applied. */
bool campaign_applied(const char *reply);

/* One writer of the suites' write pattern: even calls add 1 to its counter
 * c<id>, odd calls putIfAbsent a new key p<id>-<n> with value n (both
 * forever, each a POST /api/v1/kv of one operation). What each answer says is
 * recorded (acknowledged: 200 with applied true; anything else that was
 * sent: unknown), so campaign_check_writer can find lost and doubled effects
 * afterwards. key_state: max_keys zeroed bytes, caller-owned. */
typedef struct campaign_writer {
    int id;
    const char *ns;
    int max_keys;
    unsigned char *key_state; /* per n: 0 never sent, 1 acknowledged, 2 unknown */
    int keys;                 /* putIfAbsent attempts so far */
    long long calls, incr_acked, incr_unknown;
    atomic_llong acked;       /* all acknowledged writes, for progress */
} campaign_writer;

/* The writer's next call, to base. CALL_NOT_SENT records nothing: the same
 * write is the next one. *acked: it was acknowledged. */
campaign_outcome campaign_write_next(campaign_writer *w, void **curl, const char *base, bool *acked);
/* Whether the writer can make another call (its keys are not used up). */
bool campaign_writer_has_room(const campaign_writer *w);

/* Reads the writer's effects back from its namespace and adds to the
 * totals: its counter against its acknowledged and unknown incrs (below the
 * acknowledged: lost; above both: doubled), and every acknowledged key present
 * with the value it was given (each missing one named). */
void campaign_check_writer(PGconn *conn, const campaign_writer *w, long long *acked, long long *unknown,
                           long long *lost, long long *doubled);

typedef void (*campaign_test_fn)(void **state);
int campaign_main(const char *prefix, const char *test_name, campaign_test_fn test);
#define CAMPAIGN_MAIN(prefix, test)                                                                           \
    int main(void)                                                                                            \
    {                                                                                                         \
        return campaign_main(prefix, #test, test);                                                            \
    }

#endif
