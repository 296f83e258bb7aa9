/* broker: start and stop real `queen serve` processes for integration tests,
 * and make HTTP calls to them (libcurl). The binary is $QUEEN_BIN. */
#ifndef QUEEN_TEST_BROKER_H
#define QUEEN_TEST_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct test_broker {
    pid_t pid;
    int port;
    char base[64];   /* http://127.0.0.1:PORT */
    char log[256];   /* its stderr, kept for failure messages */
} test_broker;

/* A free TCP port on 127.0.0.1. */
int broker_free_port(void);

/* Starts `queen serve` on pg_url and a free port, with extra environment
 * entries ("NAME=value", NULL-terminated, may be NULL). Does not wait. */
void broker_spawn(test_broker *b, const char *pg_url, const char *const *extra_env);

/* Waits until GET /health answers 200 (true) or the process exits or
 * timeout_ms passes (false). */
bool broker_wait_healthy(test_broker *b, int timeout_ms);

/* broker_spawn on the test database (pgtest_url) + broker_wait_healthy for
 * up to 30 s. false, with the log's path on stderr, when it never answered:
 * a group setup returns -1 on that, a test fails. */
bool broker_start(test_broker *b, const char *const *extra_env);

/* Sends SIGTERM and waits; returns the exit status (-1 if killed). */
int broker_stop(test_broker *b);

typedef struct http_reply {
    long status;
    char *body;      /* malloc'd, NUL-terminated */
    size_t len;
    char *headers;   /* raw response headers, malloc'd */
} http_reply;

/* One HTTP call. body may be NULL. headers: NULL-terminated "Name: value"
 * list or NULL. Fails the test on a transport error. */
http_reply broker_http(const test_broker *b, const char *method, const char *path, const char *body,
                       const char *const *headers);
void http_reply_free(http_reply *r);

/* A libcurl write callback appending to the http_reply in userdata (body
 * and len; body stays NUL-terminated): for any test code driving libcurl. */
size_t broker_collect_body(char *ptr, size_t size, size_t n, void *userdata);

/* The value of a response header (case-insensitive name), malloc'd, or NULL. */
char *http_reply_header(const http_reply *r, const char *name);

#endif
