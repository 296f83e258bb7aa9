/* util: see util.h. */
#include "util.h"

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
