/* testutil: the small helpers every kind of integration test shares, so no
 * test file carries its own copy: a monotonic clock, formatted strings, and
 * readers for the JSON that libqueen and the broker answer.
 *
 * JSON is parsed with integers as reals (JSON_DECODE_INT_AS_REAL): a legal
 * 2^64 must not fail the parse, so counts and versions are read back through
 * jnum/jint. Helpers fail the running cmocka test (fail_msg) instead of
 * returning an error; worker threads must not call the failing ones. */
#ifndef QUEEN_TESTUTIL_H
#define QUEEN_TESTUTIL_H

#include <jansson.h>
#include <stdbool.h>

/* CLOCK_MONOTONIC in milliseconds / seconds: for deadlines and latencies. */
long long now_ms(void);
double now_s(void);

/* vasprintf into a malloc'd string (fails the test when out of memory). */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

/* A whole file as a malloc'd NUL-terminated string (a broker's log, say);
 * fails the test when it cannot be read. */
char *read_file(const char *path);

/* JSON text (any value) parsed; fails the test when text is not JSON. The
 * caller json_decref()s it. */
json_t *json_parse(const char *text);

/* json_parse of text the engine returned, then free(text); fails the test
 * when text is NULL. */
json_t *take_json(char *text);

/* Member k of object o as a string (NULL when absent or not a string), as a
 * number truncated to an integer (0 when absent), as true/false. */
const char *jstr(const json_t *o, const char *k);
long long jint(const json_t *o, const char *k);
bool jtrue(const json_t *o, const char *k);

/* A JSON number truncated to an integer (0 when v is not a number). */
long long jnum(const json_t *v);

/* Sleeps ms milliseconds: only as the pause of a polling loop. */
void pause_ms(int ms);

/* Waits for the condition a test needs instead of guessing a delay: cond is
 * re-evaluated every 5 ms until it holds; when within_ms pass first, the
 * test fails with the printf-style message that follows. cond may call
 * helpers that fail the test themselves. */
#define WAIT_UNTIL(cond, within_ms, ...)                                                                         \
    do {                                                                                                         \
        long long wait_until_ = now_ms() + (within_ms);                                                          \
        while (!(cond)) {                                                                                        \
            if (now_ms() >= wait_until_)                                                                         \
                fail_msg(__VA_ARGS__);                                                                           \
            pause_ms(5);                                                                                         \
        }                                                                                                        \
    } while (0)

#endif
