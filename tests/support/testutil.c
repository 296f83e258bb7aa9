/* testutil: clock, strings and JSON readers for tests (see testutil.h). */
#include "testutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        fail_msg("out of memory");
    va_end(ap);
    return s;
}

json_t *json_parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
    if (v == NULL)
        fail_msg("not JSON (%s): %s", je.text, text);
    return v;
}

json_t *take_json(char *text)
{
    assert_non_null(text);
    json_t *v = json_parse(text);
    free(text);
    return v;
}

const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

long long jint(const json_t *o, const char *k)
{
    return jnum(json_object_get(o, k));
}

bool jtrue(const json_t *o, const char *k)
{
    return json_is_true(json_object_get(o, k));
}

long long jnum(const json_t *v)
{
    return (long long)json_number_value(v);
}

char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    if (buf == NULL)
        fail_msg("out of memory");
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap *= 2);
            if (grown == NULL)
                fail_msg("out of memory");
            buf = grown;
        }
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}
