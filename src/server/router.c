/* router: a request's path and method to its row of the route table
 * (routes.c), with the path's captures decoded once (see http.h). Rows are
 * tried in order (first match wins); a row whose literal start (the bytes
 * before its first capture, or all of a pattern without one) is not the
 * path's is passed over without walking it: most rows share "/api/v1/", and
 * the walk byte by byte was 1,322 instructions of a one-op kv get (the 12th
 * row; bench/RESULTS.md). */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

char *http_percent_decode(const char *s, size_t len, size_t *out_len)
{
    char *out = malloc(len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    if (out_len != NULL)
        *out_len = o;
    return out;
}

void http_free_params(char **params, size_t nparams)
{
    for (size_t i = 0; i < nparams; i++)
        free(params[i]);
}

int http_match(const char *pattern, const char *path, char **params, size_t *lens, size_t *nparams)
{
    *nparams = 0;
    int verdict = 0;
    const char *p = pattern, *u = path;
    while (*p != '\0') {
        if (*p == ':' || *p == '*') {
            bool rest = *p == '*';
            while (*p != '\0' && *p != '/')
                p++;
            const char *end = rest ? u + strlen(u) : strchrnul(u, '/');
            if (end == u || *nparams >= HTTP_MAX_PARAMS)
                goto nomatch;
            size_t n = 0;
            char *value = http_percent_decode(u, (size_t)(end - u), &n);
            if (value == NULL) {
                /* The shape fits; keep matching so a bad escape in a path
                 * that is otherwise this route's answers 400, not 404. */
                verdict = -1;
                value = strdup("");
            } else if (n == 0) {
                free(value);
                goto nomatch;
            }
            if (value == NULL)
                goto nomatch;
            lens[*nparams] = n;
            params[(*nparams)++] = value;
            u = end;
            continue;
        }
        if (*p != *u)
            goto nomatch;
        p++;
        u++;
    }
    if (*u == '\0')
        return verdict < 0 ? -1 : 1;
nomatch:
    http_free_params(params, *nparams);
    *nparams = 0;
    return 0;
}

/* Per row, computed once: the length of its literal start and whether that
 * is the whole pattern. Rows past ROUTER_ROWS are walked in full. */
#define ROUTER_ROWS 256
static struct {
    size_t len;
    bool whole;
} literal[ROUTER_ROWS];
static pthread_once_t literal_once = PTHREAD_ONCE_INIT;

static void literal_init(void)
{
    for (size_t i = 0; i < http_route_count && i < ROUTER_ROWS; i++) {
        const char *pattern = http_routes[i].pattern;
        literal[i].len = strcspn(pattern, ":*");
        literal[i].whole = pattern[literal[i].len] == '\0';
    }
}

const route *route_find(const char *method, const char *path, char **params, size_t *lens, size_t *nparams,
                        bool *path_matched, bool *bad_path)
{
    *nparams = 0;
    *path_matched = *bad_path = false;
    pthread_once(&literal_once, literal_init);
    size_t path_len = strlen(path);
    for (size_t i = 0; i < http_route_count; i++) {
        if (i < ROUTER_ROWS) {
            /* A pattern without a capture matches only itself; one with a
             * capture only a path that starts with its literal start. */
            size_t n = literal[i].len;
            if (literal[i].whole ? path_len != n : path_len < n)
                continue;
            if (memcmp(http_routes[i].pattern, path, n) != 0)
                continue;
        }
        int m = http_match(http_routes[i].pattern, path, params, lens, nparams);
        if (m == 0)
            continue;
        *path_matched = true;
        if (strcmp(http_routes[i].method, method) == 0) {
            *bad_path = m < 0;
            return &http_routes[i];
        }
        http_free_params(params, *nparams);
        *nparams = 0;
    }
    return NULL;
}
