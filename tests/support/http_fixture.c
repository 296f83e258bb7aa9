/* http_fixture: request-and-assert helpers for tests (see http_fixture.h). */
#include "http_fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

json_t *json_of(const http_reply *r)
{
    return json_parse(r->body);
}

void http_expect(const http_reply *r, long status, const char *error, const char *reason)
{
    if (r->status != status)
        fail_msg("status %ld, want %ld: %s", r->status, status, r->body);
    if (error == NULL)
        return;
    json_t *v = json_of(r);
    const char *code = jstr(v, "code");
    const char *why = jstr(v, "reason");
    if (code == NULL || strcmp(code, error) != 0 || (reason && (why == NULL || strcmp(why, reason) != 0)))
        fail_msg("want %s/%s, got %s", error, reason ? reason : "*", r->body);
    assert_non_null(json_object_get(v, "detail"));
    /* error is the sentence a person reads: never empty */
    if (jstr(v, "error") == NULL || jstr(v, "error")[0] == '\0')
        fail_msg("no error text in %s", r->body);
    json_decref(v);
}

/* A call whose status must be want; the message names the request. */
static http_reply call_for(const test_broker *b, const char *const *headers, const char *method, const char *path,
                           const char *body, long want)
{
    http_reply r = broker_http(b, method, path, body, headers);
    if (r.status != want)
        fail_msg("%s %s%s%s: status %ld, want %ld: %s", method, path, headers ? " with " : "",
                 headers ? headers[0] : "", r.status, want, r.body);
    return r;
}

json_t *http_call_json(const test_broker *b, const char *const *headers, const char *method, const char *path,
                       const char *body, long status)
{
    http_reply r = call_for(b, headers, method, path, body, status);
    json_t *v = r.len == 0 && status == 204 ? json_null() : json_of(&r);
    http_reply_free(&r);
    return v;
}

json_t *http_ok(const test_broker *b, const char *method, const char *path, const char *body, long status)
{
    return http_call_json(b, NULL, method, path, body, status);
}

long long http_metric(const test_broker *b, const char *section, const char *group, const char *name)
{
    http_reply r = call_for(b, NULL, "GET", "/metrics", NULL, 200);
    /* Integers kept as integers here: a counter must be one. */
    json_t *m = json_loads(r.body, 0, NULL);
    json_t *parent = json_object_get(m, section);
    if (group != NULL)
        parent = json_object_get(parent, group);
    json_t *v = json_object_get(parent, name);
    if (!json_is_integer(v))
        fail_msg("/metrics %s.%s.%s is not an integer: %s", section, group ? group : "", name, r.body);
    long long n = json_integer_value(v);
    json_decref(m);
    http_reply_free(&r);
    return n;
}

long long http_requests_counted(const test_broker *b, const char *method, const char *route, long status)
{
    http_reply r = call_for(b, NULL, "GET", "/metrics", NULL, 200);
    json_t *m = json_loads(r.body, 0, NULL);
    long long n = 0;
    size_t i;
    json_t *el;
    json_array_foreach(json_object_get(json_object_get(m, "http"), "requests"), i, el)
    {
        const char *mt = json_string_value(json_object_get(el, "method"));
        const char *rt = json_string_value(json_object_get(el, "route"));
        if (mt && rt && strcmp(mt, method) == 0 && strcmp(rt, route) == 0 &&
            json_integer_value(json_object_get(el, "status")) == status)
            n += json_integer_value(json_object_get(el, "count"));
    }
    json_decref(m);
    http_reply_free(&r);
    return n;
}

void *timed_get_run(void *arg)
{
    timed_get *g = arg;
    long long t0 = now_ms();
    http_reply r = broker_http(g->b, "GET", g->path, NULL, NULL);
    g->took_ms = now_ms() - t0;
    g->status = r.status;
    http_reply_free(&r);
    return NULL;
}

void http_refused(const test_broker *b, const char *method, const char *path, const char *body, long status,
                  const char *error, const char *reason)
{
    http_reply r = call_for(b, NULL, method, path, body, status);
    http_expect(&r, status, error, reason);
    http_reply_free(&r);
}

test_broker http_broker;

int http_broker_start(const char *const *env)
{
    return broker_start(&http_broker, env) ? 0 : -1;
}

/* make check's runner starts one broker with exactly these settings
 * (scripts/test.sh, QUEEN_TEST_BROKER_PORT), and every file that asks for
 * nothing more uses it instead of a broker of its own and leaves it
 * running: the runner stops it at the end and fails the run on its exit
 * status (a sanitizer's report). Keep the two lists the same. */
static bool http_broker_shared;

int http_broker_setup(void **state)
{
    (void)state;
    const char *port = getenv("QUEEN_TEST_BROKER_PORT");
    if (port != NULL && *port != '\0') {
        memset(&http_broker, 0, sizeof http_broker);
        http_broker.port = atoi(port);
        snprintf(http_broker.base, sizeof http_broker.base, "http://127.0.0.1:%d", http_broker.port);
        snprintf(http_broker.log, sizeof http_broker.log, "%s", "test-logs/shared-broker.log");
        http_broker_shared = true;
        return 0;
    }
    static const char *const env[] = {"QUEEN_HTTP_THREADS=2", NULL};
    return http_broker_start(env);
}

int http_broker_teardown(void **state)
{
    (void)state;
    if (http_broker_shared)
        return 0;
    return broker_stop(&http_broker) == 0 ? 0 : -1;
}

json_t *http_ok_fmt(const char *method, char *path, char *body, long status)
{
    json_t *v = http_ok(&http_broker, method, path, body, status);
    free(path);
    free(body);
    return v;
}

void http_refused_fmt(const char *method, char *path, char *body, long status, const char *error, const char *reason)
{
    http_refused(&http_broker, method, path, body, status, error, reason);
    free(path);
    free(body);
}
