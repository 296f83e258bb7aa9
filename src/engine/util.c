/* util: see util.h. */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

long long engine_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void engine_one_line(char *s)
{
    long n = 0;
    for (char *p = s; *p; p++) {
        char c = (*p == '\n' || *p == '\t' || *p == '\r') ? ' ' : *p;
        if (c == ' ' && n > 0 && s[n - 1] == ' ')
            continue; /* "unexpectedly\n\tThis" reads as one space */
        s[n++] = c;
    }
    while (n > 0 && s[n - 1] == ' ')
        n--;
    s[n] = '\0';
}

bool engine_buf_append(char **buf, size_t *used, size_t *cap, const char *p, size_t len)
{
    if (*used + len + 1 > *cap) {
        size_t want = (*used + len + 1) * 2;
        char *grown = realloc(*buf, want);
        if (grown == NULL)
            return false;
        *buf = grown;
        *cap = want;
    }
    memcpy(*buf + *used, p, len);
    *used += len;
    (*buf)[*used] = '\0';
    return true;
}
