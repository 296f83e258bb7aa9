/* http_fixture: the request-and-assert helpers of the tests that talk to a
 * real broker over HTTP (test_http_*.c): a reply's JSON body, its status and
 * error envelope ({error, code, reason, detail}, docs/api.md), and one call that
 * must answer a given status. Every helper fails the running cmocka test
 * (fail_msg) instead of returning an error. JSON is read as in testutil.h
 * (integers as reals). */
#ifndef QUEEN_HTTP_FIXTURE_H
#define QUEEN_HTTP_FIXTURE_H

#include <jansson.h>

#include "broker.h"

/* The reply's body parsed; fails the test when it is not JSON. */
json_t *json_of(const http_reply *r);

/* Fails the test unless r answered status and, when error is given, the
 * error envelope carries that code (error names the category, which the
 * envelope's member code holds), that reason (when given), a detail and a
 * non-empty error text. */
void http_expect(const http_reply *r, long status, const char *error, const char *reason);

/* One call (headers: NULL-terminated "Name: value" list or NULL) that must
 * answer status; returns its parsed body, JSON null for a 204's empty body. */
json_t *http_call_json(const test_broker *b, const char *const *headers, const char *method, const char *path,
                       const char *body, long status);

/* http_call_json without headers. */
json_t *http_ok(const test_broker *b, const char *method, const char *path, const char *body, long status);

/* One call that must be refused with status and the envelope code/reason
 * (reason NULL: any). */
void http_refused(const test_broker *b, const char *method, const char *path, const char *body, long status,
                  const char *error, const char *reason);

/* The one broker the tests of a file share, started by cmocka's group setup
 * and stopped by its teardown:
 *   cmocka_run_group_tests(tests, http_broker_setup, http_broker_teardown)
 * http_broker_setup starts it with two HTTP threads and nothing else (under
 * make check it uses the runner's one shared broker of those settings and
 * leaves it running: a file on it must not count on a fresh broker); a file
 * that needs more settings calls http_broker_start(env) (a NULL-terminated
 * "NAME=value" list) from a setup of its own. */
extern test_broker http_broker;
int http_broker_start(const char *const *env);
int http_broker_setup(void **state);
int http_broker_teardown(void **state);

/* http_ok and http_refused on http_broker, for a path and a body the caller
 * made with fmt() (body may be NULL): both are freed. */
json_t *http_ok_fmt(const char *method, char *path, char *body, long status);
void http_refused_fmt(const char *method, char *path, char *body, long status, const char *error, const char *reason);

/* The counter section.group.name of GET /metrics (e.g. engine.pool.
 * acquiredTotal; group NULL: section.name, e.g. http.longPollsWaiting);
 * fails the test unless /metrics answers 200 and the counter is an
 * integer. */
long long http_metric(const test_broker *b, const char *section, const char *group, const char *name);

/* How many requests /metrics counts for method, route pattern and status
 * (0 when that line is absent yet). */
long long http_requests_counted(const test_broker *b, const char *method, const char *route, long status);

/* A GET timed on a thread of its own, for long polls:
 *   timed_get g = {.b = b, .path = path};
 *   pthread_create(&t, NULL, timed_get_run, &g);
 * status and took_ms are set when the answer is in. */
typedef struct timed_get {
    const test_broker *b;
    const char *path;
    long status;
    long long took_ms; /* from just before the request was sent */
} timed_get;
void *timed_get_run(void *arg);

#endif
