/* Payload encryption through libqueen (no HTTP): a handle with
 * cfg.encryption_key seals a queue's payloads (the row holds no plaintext)
 * and opens them on queen_pop; a handle without a key refuses
 * encryptionEnabled (log_encryption_key_missing), refuses a push into an
 * encrypted queue (encryption_key_missing, retry later, nothing stored: it
 * fails closed) and pops what it cannot open as an error; a malformed key is
 * refused by queen_open. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"
#include "testutil.h"
#include "wire.h"

static void sealed(void **state)
{
    (void)state;
    queen_config cfg;
    char why[256];
    engine_config(&cfg, pgtest_url(), 2);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_ENCRYPTION_KEY", "abc", why, sizeof why), 0);
    queen_error e = {0};
    assert_null(queen_open(&cfg, &e));
    assert_string_equal(e.reason, "bad_config");
    assert_null(strstr(e.detail, "abc")); /* never quotes key material */
    queen_config_clear(&cfg);

    engine_config(&cfg, pgtest_url(), 2);
    assert_int_equal(queen_config_set(&cfg, "QUEEN_ENCRYPTION_KEY",
                                      "ring:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", why,
                                      sizeof why),
                     0);
    queen *q = engine_open_config(&cfg);
    queen *plain = engine_open(2);
    char tenant[37];
    wire_uuid4(tenant);
    char *queue = pgtest_unique("q-enc-");
    char *out = NULL;
    assert_int_equal(queen_configure(plain, tenant, queue, "{\"encryptionEnabled\":true}", &out, &e), -1);
    assert_string_equal(e.reason, "log_encryption_key_missing");
    must(queen_configure(q, tenant, queue, "{\"encryptionEnabled\":true}", &out, &e), &e);
    free(out);
    char *items = fmt("[{\"queue\":\"%s\",\"payload\":[\"hidden\",1e3]}]", queue);
    must(queen_push(q, tenant, items, &out, &e), &e);
    free(out);

    PGconn *c = pgtest_connect();
    const char *p[] = {queue};
    char *row = pgtest_scalar(c,
                              "SELECT m.payload::text FROM queen.log_messages m JOIN queen.log_partitions lp ON "
                              "lp.id = m.partition_id JOIN queen.queues qq ON qq.id = lp.queue_id WHERE qq.name = $1",
                              1, p);
    PQfinish(c);
    assert_null(strstr(row, "hidden"));
    assert_non_null(strstr(row, "qenc:v2:ring:"));
    free(row);

    /* Without the key: the push is refused and stores nothing. */
    char *items2 = fmt("[{\"queue\":\"%s\",\"payload\":\"in-the-clear\"}]", queue);
    assert_int_equal(queen_push(plain, tenant, items2, &out, &e), -1);
    assert_string_equal(e.reason, "encryption_key_missing");
    assert_int_equal(e.category, QUEEN_ERR_UNAVAILABLE);
    assert_null(out);
    c = pgtest_connect();
    assert_int_equal(pgtest_int(c,
                                "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions lp ON "
                                "lp.id = m.partition_id JOIN queen.queues qq ON qq.id = lp.queue_id WHERE qq.name = $1",
                                1, p),
                     1);
    PQfinish(c);
    free(items2);

    /* Without the key a pop delivers it as an error, counted; with it, opened. */
    queen_pop_options o = {.queue = queue, .auto_ack = false, .lease_seconds = 1};
    queen_stats st;
    must(queen_pop(plain, tenant, &o, &out, &e), &e);
    assert_null(strstr(out, "qenc:"));
    assert_non_null(strstr(out, "\"encryptionError\": \"encryption_key_missing\""));
    assert_int_equal(queen_stats_get(plain, &st), 0);
    assert_int_equal(st.pops.open_failures, 1);
    free(out);
    /* The lease runs out; the message comes back to a handle with the key. */
    o.auto_ack = true;
    o.wait = true;
    o.timeout_ms = 10000;
    must(queen_pop(q, tenant, &o, &out, &e), &e);
    assert_non_null(strstr(out, "[\"hidden\",1e3]"));
    free(out);
    free(items);
    free(queue);
    queen_close(plain);
    queen_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sealed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
