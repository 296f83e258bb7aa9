/* Acknowledged writes survive faults: writer threads increment their own
 * counter and create unique keys (putIfAbsent) through the broker while
 * the broker is killed with SIGKILL and PostgreSQL is stopped in immediate
 * mode, each started again. Every write answered 200/applied is counted as
 * acknowledged; one that got no answer (or a 5xx) as unknown. At the end,
 * read from the database directly:
 *   - every acknowledged key exists with its value (none lost);
 *   - each counter is at least its acknowledged increments (none lost) and
 *     at most those plus its unknown ones (no effect doubled).
 * The database commits synchronously (campaign_durable_database): what
 * PostgreSQL acknowledged, it must keep across its own crash.
 *
 * Sizing: FAULT_SECONDS (default 4; the faults cycle until it passes),
 * FAULT_WRITERS (4). */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "campaign.h"
#include "pgtest.h"
#include "testutil.h"

#define MAX_WRITERS 16
#define MAX_KEYS 200000


typedef struct writer {
    campaign_writer cw;
    atomic_bool *stop;
} writer;

/* Writes until stopped; a call that never reached the broker waits for it
 * to answer again and is made again. */
static void *writer_run(void *arg)
{
    writer *w = arg;
    void *curl = NULL;
    while (!atomic_load(w->stop) && campaign_writer_has_room(&w->cw)) {
        bool acked;
        if (campaign_write_next(&w->cw, &curl, RIG.broker.base, &acked) == CALL_NOT_SENT || !acked)
            campaign_wait_healthy(&curl, RIG.broker.base, 60000);
    }
    campaign_http_done(&curl);
    return NULL;
}

static long long acked_total(writer *w, int n)
{
    long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += atomic_load(&w[i].cw.acked);
    return sum;
}

static void acknowledged_writes_survive_broker_kills_and_database_crashes(void **state)
{
    (void)state;
    int writers = (int)campaign_env_long("FAULT_WRITERS", 4);
    long seconds = campaign_env_long("FAULT_SECONDS", 4);
    if (writers < 1 || writers > MAX_WRITERS)
        fail_msg("FAULT_WRITERS 1..%d", MAX_WRITERS);
    char *ns = pgtest_unique("faults");
    atomic_bool stop = false;
    writer w[MAX_WRITERS];
    pthread_t th[MAX_WRITERS];
    for (int i = 0; i < writers; i++) {
        w[i] = (writer){.cw = {.id = i, .ns = ns, .max_keys = MAX_KEYS, .key_state = calloc(MAX_KEYS, 1)},
                        .stop = &stop};
        pthread_create(&th[i], NULL, writer_run, &w[i]);
    }
    long long kills = 0, crashes = 0, until = now_ms() + seconds * 1000;
    do {
        /* each fault lands on writers that are making progress */
        long long before = acked_total(w, writers);
        WAIT_UNTIL(acked_total(w, writers) >= before + 50, 60000, "writers made no progress before a fault");
        if ((kills + crashes) % 2 == 0) {
            assert_true(campaign_broker_restart_hard(&RIG.broker, RIG.db_url, RIG.env));
            kills++;
        } else {
            assert_true(campaign_pg_crash());
            crashes++;
            assert_true(campaign_pg_up());
        }
    } while (now_ms() < until || crashes == 0);
    long long before = acked_total(w, writers);
    WAIT_UNTIL(acked_total(w, writers) >= before + 50, 60000, "writers made no progress after the last fault");
    atomic_store(&stop, true);
    for (int i = 0; i < writers; i++)
        pthread_join(th[i], NULL);

    PGconn *conn = PQconnectdb(RIG.db_url);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    long long acked = 0, unknown = 0, lost = 0, doubled = 0;
    for (int i = 0; i < writers; i++) {
        campaign_check_writer(conn, &w[i].cw, &acked, &unknown, &lost, &doubled);
        free(w[i].cw.key_state);
    }
    PQfinish(conn);
    campaign_figure("faults.writes_acknowledged", acked);
    campaign_figure("faults.writes_unknown", unknown);
    campaign_figure("faults.writes_lost", lost);
    campaign_figure("faults.effects_doubled", doubled);
    campaign_figure("faults.broker_kills", kills);
    campaign_figure("faults.pg_crashes", crashes);
    free(ns);
    assert_int_equal(lost, 0);
    assert_int_equal(doubled, 0);
}

CAMPAIGN_MAIN("faults", acknowledged_writes_survive_broker_kills_and_database_crashes)
