/* Queue creation as the reference broker's clients do it, over a real broker:
 * POST /api/v1/configure with the exact bodies the JS client (client-js
 * client-v2, QueueBuilder.create) and the Python client (client-py
 * queue_builder.create) send, then what each reads back.
 *
 * What they send: {"queue", "namespace", "task", "options"}, namespace and
 * task null unless .namespace()/.task() were called; options are the
 * clients' QUEUE_DEFAULTS (leaseTime 300, retryLimit 3, priority 0,
 * delayedProcessing 0, windowBuffer 0, maxSize 0, retentionSeconds 0,
 * completedRetentionSeconds 0, encryptionEnabled false) when config() was not
 * called, else {...QUEUE_DEFAULTS, ...config} (Python: snake_case keys
 * camelCased). JS: JSON.stringify, no spaces; Python: httpx json=, spaced as
 * json.dumps spaces it (httpx before 0.28; later ones send it compact).
 * What they read: the JS OperationBuilder throws when the answer has an
 * "error" member; both clients' own tests read "configured" and
 * options[key] for the keys they set (the reference's JS configureQueue test
 * sends 15 options and compares each with ===). A 4xx throws in both.
 *
 * Plus: a typo'd option is still a 400 naming it (and creates nothing), the
 * labels show in GET /api/v1/resources/queues, a reconfiguration merges, and
 * several clients creating one queue at once all land. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http_fixture.h"
#include "pgtest.h"
#include "testutil.h"

static test_broker B;

/* Both clients send this header. */
static const char *const JSON_HEADERS[] = {"Content-Type: application/json", NULL};

/* client-js utils/defaults.js QUEUE_DEFAULTS, as JSON.stringify writes it. */
#define JS_DEFAULTS                                                                                                    \
    "\"leaseTime\":300,\"retryLimit\":3,\"priority\":0,\"delayedProcessing\":0,\"windowBuffer\":0,\"maxSize\":0,"     \
    "\"retentionSeconds\":0,\"completedRetentionSeconds\":0,\"encryptionEnabled\":false"

static int setup(void **state)
{
    (void)state;
    /* A payload key: the clients' configs switch encryptionEnabled on, which
     * a broker without one refuses (log_encryption_key_missing). */
    static const char *const env[] = {
        "QUEEN_ENCRYPTION_KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", NULL};
    return broker_start(&B, env) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return broker_stop(&B) == 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------- */

/* POST /api/v1/configure as a client does; must answer 200 with a body the
 * JS OperationBuilder accepts (no "error" member) and configured true. */
static json_t *create(const char *body)
{
    json_t *v = http_call_json(&B, JSON_HEADERS, "POST", "/api/v1/configure", body, 200);
    if (json_object_get(v, "error") != NULL)
        fail_msg("the JS client throws on an answer with an error member: %s", body);
    assert_true(jtrue(v, "configured"));
    return v;
}

/* JavaScript's === on two JSON values: numbers by value (1000 === 1000.0),
 * booleans, strings and null by value; objects and arrays never. */
static bool js_strict_equal(const json_t *a, const json_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) || json_is_array(a))
        return false;
    return json_equal(a, b);
}

/* Every member of sent (an options object) comes back in answer.options
 * with a value === the one sent: the reference's JS configureQueue test. */
static void echoes_every_option(const json_t *answer, const char *sent_json)
{
    json_t *sent = json_parse(sent_json);
    const json_t *opts = json_object_get(answer, "options");
    const char *k;
    json_t *v;
    json_object_foreach(sent, k, v)
    {
        if (!js_strict_equal(json_object_get(opts, k), v))
            fail_msg("options.%s does not come back as sent", k);
    }
    json_decref(sent);
}

/* The element of GET /api/v1/resources/queues for queue (a new reference),
 * or NULL when it is not listed. */
static json_t *listed(const char *queue)
{
    json_t *v = http_ok(&B, "GET", "/api/v1/resources/queues", NULL, 200);
    json_t *found = NULL;
    size_t i;
    json_t *el;
    json_array_foreach(json_object_get(v, "queues"), i, el)
    {
        const char *name = jstr(el, "name");
        if (name != NULL && strcmp(name, queue) == 0)
            found = json_incref(el);
    }
    json_decref(v);
    return found;
}

/* A label member (namespace, task) of o: its string, or NULL when null. */
static const char *label(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    if (v == NULL)
        fail_msg("%s is missing", k);
    if (json_is_null(v))
        return NULL;
    if (!json_is_string(v))
        fail_msg("%s is neither a string nor null", k);
    return json_string_value(v);
}

static void assert_stored_only(const json_t *v)
{
    /* the names this broker stores and echoes but does not act on yet */
    const json_t *so = json_object_get(v, "storedOnly");
    assert_true(json_is_array(so));
    bool delayed = false, encryption = false, retention = false, lease = false; /* delayedProcessing (sql/log_delays.sql) and
                                                                                 encryptionEnabled (log_encryption.sql) are acted on */
    size_t i;
    json_t *el;
    json_array_foreach(so, i, el)
    {
        delayed |= strcmp(json_string_value(el), "delayedProcessing") == 0;
        encryption |= strcmp(json_string_value(el), "encryptionEnabled") == 0;
        retention |= strcmp(json_string_value(el), "retentionEnabled") == 0;
        lease |= strcmp(json_string_value(el), "leaseTime") == 0;
    }
    assert_true(!delayed && !encryption && retention);
    assert_false(lease);
}

/* ---- JS client ------------------------------------------------------------- */

/* await queen.queue(q).create() */
static void js_create(void **state)
{
    (void)state;
    char *q = pgtest_unique("cjs");
    char *body = fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{" JS_DEFAULTS "}}", q);
    json_t *v = create(body);
    assert_string_equal(jstr(v, "queue"), q);
    echoes_every_option(v, "{" JS_DEFAULTS "}");
    assert_null(label(v, "namespace"));
    assert_null(label(v, "task"));
    assert_stored_only(v);
    json_decref(v);

    json_t *el = listed(q);
    assert_non_null(el);
    assert_null(label(el, "namespace"));
    json_decref(el);

    /* create() twice is how programs start: the second is a reconfiguration. */
    json_decref(create(body));
    free(body);
    free(q);
}

/* await queen.queue(q).namespace('billing').task('invoice').create() */
static void js_create_with_labels(void **state)
{
    (void)state;
    char *q = pgtest_unique("cjsl");
    char *body =
        fmt("{\"queue\":\"%s\",\"namespace\":\"billing\",\"task\":\"invoice\",\"options\":{" JS_DEFAULTS "}}", q);
    json_t *v = create(body);
    assert_string_equal(label(v, "namespace"), "billing");
    assert_string_equal(label(v, "task"), "invoice");
    json_decref(v);

    json_t *el = listed(q);
    assert_non_null(el);
    assert_string_equal(label(el, "namespace"), "billing");
    assert_string_equal(label(el, "task"), "invoice");
    json_decref(el);

    /* Another program's plain queue(q).create() (labels null) keeps them. */
    char *plain = fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{" JS_DEFAULTS "}}", q);
    json_decref(create(plain));
    el = listed(q);
    assert_string_equal(label(el, "namespace"), "billing");
    assert_string_equal(label(el, "task"), "invoice");
    json_decref(el);
    free(plain);
    free(body);
    free(q);
}

/* The reference's own JS test (client-js test-v2 queue.js configureQueue):
 * queen.queue(q).config({15 options}).create(), then
 * res.options[key] === config[key] for each. */
#define JS_CONFIG                                                                                                      \
    "\"completedRetentionSeconds\":1,\"deadLetterQueue\":true,\"delayedProcessing\":1,\"dlqAfterMaxRetries\":true,"   \
    "\"encryptionEnabled\":true,\"leaseTime\":30,\"maxSize\":1000,\"maxWaitTimeSeconds\":10,\"priority\":5,"          \
    "\"retentionEnabled\":false,\"retentionSeconds\":0,\"retryDelay\":1000,\"retryLimit\":3,\"ttl\":36,"              \
    "\"windowBuffer\":100"

static void js_config_create(void **state)
{
    (void)state;
    char *q = pgtest_unique("cjsc");
    /* {...QUEUE_DEFAULTS, ...config}: the defaults' keys in their order with
     * config's values, then config's other keys. */
    char *body = fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{"
                     "\"leaseTime\":30,\"retryLimit\":3,\"priority\":5,\"delayedProcessing\":1,\"windowBuffer\":100,"
                     "\"maxSize\":1000,\"retentionSeconds\":0,\"completedRetentionSeconds\":1,"
                     "\"encryptionEnabled\":true,\"deadLetterQueue\":true,\"dlqAfterMaxRetries\":true,"
                     "\"maxWaitTimeSeconds\":10,\"retentionEnabled\":false,\"retryDelay\":1000,\"ttl\":36}}",
                     q);
    json_t *v = create(body);
    echoes_every_option(v, "{" JS_CONFIG "}");
    json_decref(v);
    free(body);
    free(q);
}

/* ---- Python client ----------------------------------------------------------- */

/* await queen.queue(q).create(); its test reads res.get("configured"). */
static void py_create(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpy");
    char *body = fmt("{\"queue\": \"%s\", \"namespace\": null, \"task\": null, \"options\": {\"leaseTime\": 300, "
                     "\"retryLimit\": 3, \"priority\": 0, \"delayedProcessing\": 0, \"windowBuffer\": 0, "
                     "\"maxSize\": 0, \"retentionSeconds\": 0, \"completedRetentionSeconds\": 0, "
                     "\"encryptionEnabled\": false}}",
                     q);
    json_t *v = create(body);
    assert_int_equal(jint(json_object_get(v, "options"), "leaseTime"), 300);
    json_decref(v);
    free(body);
    free(q);
}

/* The Python client's own test_configure_queue: config({lease_time: 60,
 * retry_limit: 5, priority: 7, max_size: 5000, encryption_enabled: True,
 * dlq_after_max_retries: True}).create(), namespace/task set; it reads
 * options leaseTime, retryLimit, priority, maxSize. */
static void py_config_create(void **state)
{
    (void)state;
    char *q = pgtest_unique("cpyc");
    char *body = fmt("{\"queue\": \"%s\", \"namespace\": \"billing\", \"task\": \"invoice\", \"options\": "
                     "{\"leaseTime\": 60, \"retryLimit\": 5, \"priority\": 7, \"delayedProcessing\": 0, "
                     "\"windowBuffer\": 0, \"maxSize\": 5000, \"retentionSeconds\": 0, "
                     "\"completedRetentionSeconds\": 0, \"encryptionEnabled\": true, \"dlqAfterMaxRetries\": true}}",
                     q);
    json_t *v = create(body);
    const json_t *o = json_object_get(v, "options");
    assert_int_equal(jint(o, "leaseTime"), 60);
    assert_int_equal(jint(o, "retryLimit"), 5);
    assert_int_equal(jint(o, "priority"), 7);
    assert_int_equal(jint(o, "maxSize"), 5000);
    assert_true(jtrue(o, "encryptionEnabled"));
    assert_true(jtrue(o, "dlqAfterMaxRetries"));
    json_decref(v);

    /* leaseTime is acted on: a pop without leaseSeconds leases for 60 s. */
    char *push = fmt("{\"items\":[{\"queue\":\"%s\",\"payload\":1}]}", q);
    json_decref(http_ok(&B, "POST", "/api/v1/push", push, 201));
    char *path = fmt("/api/v1/pop/queue/%s?batch=1", q);
    json_t *p = http_ok(&B, "GET", path, NULL, 200);
    PGconn *c = pgtest_connect();
    const char *lp[] = {jstr(p, "leaseId")};
    long long secs = pgtest_int(
        c, "SELECT round(extract(epoch FROM lease_expires_at - now()))::bigint FROM queen.log_consumers "
           "WHERE lease_id = $1::uuid",
        1, lp);
    assert_in_range(secs, 55, 60);
    PQfinish(c);
    json_decref(p);

    json_t *el = listed(q);
    assert_string_equal(label(el, "namespace"), "billing");
    assert_string_equal(label(el, "task"), "invoice");
    json_decref(el);
    free(path);
    free(push);
    free(body);
    free(q);
}

/* ---- refusals ------------------------------------------------------------- */

/* config({leaseTme: 60}): the reference would ignore the typo and leave the
 * lease at 300; here it is a 400 naming it, and nothing is created. */
static void typo_is_refused(void **state)
{
    (void)state;
    char *q = pgtest_unique("ctypo");
    char *body =
        fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{" JS_DEFAULTS ",\"leaseTme\":60}}", q);
    http_reply r = broker_http(&B, "POST", "/api/v1/configure", body, JSON_HEADERS);
    http_expect(&r, 400, "bad_request", "log_bad_options");
    json_t *v = json_of(&r);
    assert_non_null(strstr(jstr(v, "detail"), "leaseTme"));
    json_decref(v);
    http_reply_free(&r);
    assert_null(listed(q));

    /* A value of the wrong kind names its option too. */
    char *kind = fmt("{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":\"yes\"}}", q);
    r = broker_http(&B, "POST", "/api/v1/configure", kind, JSON_HEADERS);
    http_expect(&r, 400, "bad_request", "log_bad_options");
    assert_non_null(strstr(r.body, "encryptionEnabled"));
    http_reply_free(&r);

    /* An option at the top level of the body is not silently dropped. */
    char *top = fmt("{\"queue\":\"%s\",\"leaseTime\":60}", q);
    http_refused(&B, "POST", "/api/v1/configure", top, 400, "bad_request", "log_bad_request");
    char *mode = fmt("{\"queue\":\"%s\",\"mode\":\"patch\"}", q);
    http_refused(&B, "POST", "/api/v1/configure", mode, 400, "bad_request", "log_bad_request");
    char *ns = fmt("{\"queue\":\"%s\",\"namespace\":7}", q);
    http_refused(&B, "POST", "/api/v1/configure", ns, 400, "bad_request", NULL);
    assert_null(listed(q));
    free(ns);
    free(mode);
    free(top);
    free(kind);
    free(body);
    free(q);
}

/* ---- reconfiguration ----------------------------------------------------- */

/* queue(q).config({ttl: 36}).create(), then a plain queue(q).create(): what
 * the second body carries (the defaults: priority 0, ...) applies, what it
 * does not carry (ttl, dedupWindowSeconds) keeps its stored value. */
static void reconfigure_merges(void **state)
{
    (void)state;
    char *q = pgtest_unique("cmerge");
    char *first = fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{\"leaseTime\":300,"
                      "\"retryLimit\":3,\"priority\":9,\"delayedProcessing\":0,\"windowBuffer\":0,\"maxSize\":0,"
                      "\"retentionSeconds\":0,\"completedRetentionSeconds\":0,\"encryptionEnabled\":false,"
                      "\"ttl\":36,\"dedupWindowSeconds\":60}}",
                      q);
    json_decref(create(first));
    char *plain = fmt("{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{" JS_DEFAULTS "}}", q);
    json_t *v = create(plain);
    const json_t *o = json_object_get(v, "options");
    assert_int_equal(jint(o, "priority"), 0);
    assert_int_equal(jint(o, "ttl"), 36);
    assert_int_equal(jint(o, "dedupWindowSeconds"), 60);
    json_decref(v);

    /* "mode":"replace" (a raw caller's): everything not given to its default. */
    char *rep = fmt("{\"queue\":\"%s\",\"mode\":\"replace\",\"options\":{\"retryLimit\":1}}", q);
    v = create(rep);
    o = json_object_get(v, "options");
    assert_int_equal(jint(o, "ttl"), 3600);
    assert_int_equal(jint(o, "dedupWindowSeconds"), 3600);
    assert_int_equal(jint(o, "retryLimit"), 1);
    json_decref(v);
    free(rep);
    free(plain);
    free(first);
    free(q);
}

/* Eight workers boot at once and each create()s the queue with its own
 * config: every one answers 200 and every one's option is there after (the
 * second create of a new queue waits for the first and merges onto it). */
#define RACERS 8
static const char *const RACE_KEYS[RACERS] = {"ttl",          "retryDelay",     "maxWaitTimeSeconds",
                                              "windowBuffer", "minPopWaitTime", "delayedProcessing",
                                              "maxSize",      "priority"};

typedef struct racer {
    const char *queue;
    int i;
    long status;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    char body[512];
    snprintf(body, sizeof body, "{\"queue\":\"%s\",\"namespace\":null,\"task\":null,\"options\":{\"%s\":%d}}",
             r->queue, RACE_KEYS[r->i], 100 + r->i);
    http_reply rep = broker_http(&B, "POST", "/api/v1/configure", body, JSON_HEADERS);
    r->status = rep.status;
    http_reply_free(&rep);
    return NULL;
}

static void concurrent_creates_merge(void **state)
{
    (void)state;
    char *q = pgtest_unique("crace");
    pthread_t t[RACERS];
    racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.queue = q, .i = i};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(r[i].status, 200);
    }
    char *body = fmt("{\"queue\":\"%s\"}", q);
    json_t *v = create(body);
    const json_t *o = json_object_get(v, "options");
    for (int i = 0; i < RACERS; i++)
        if (jint(o, RACE_KEYS[i]) != 100 + i)
            fail_msg("%s lost in the race: %s", RACE_KEYS[i], json_dumps(o, 0));
    json_decref(v);
    free(body);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(js_create),
        cmocka_unit_test(js_create_with_labels),
        cmocka_unit_test(js_config_create),
        cmocka_unit_test(py_create),
        cmocka_unit_test(py_config_create),
        cmocka_unit_test(typo_is_refused),
        cmocka_unit_test(reconfigure_merges),
        cmocka_unit_test(concurrent_creates_merge),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
