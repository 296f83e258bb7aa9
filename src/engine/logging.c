/* logging: level filter and line formatting (see logging.h). */
#include "logging.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int current_level = QUEEN_LOG_INFO;

static const char *const level_tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void queen_log_set_level(queen_log_level level)
{
    atomic_store(&current_level, (int)level);
}

bool queen_log_enabled(queen_log_level level)
{
    return (int)level <= atomic_load(&current_level);
}

void queen_log(queen_log_level level, const char *fmt, ...)
{
    if (!queen_log_enabled(level))
        return;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(tv.tv_usec / 1000),
                     level_tags[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : ((size_t)m < sizeof line - (size_t)n - 1 ? (size_t)m : sizeof line - (size_t)n - 2));
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
