/* http: libmicrohttpd daemon, body accumulation, routing, access log
 * (see http.h). Handlers do the work; this file never calls the engine. */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "logging.h"

/* Per-request state kept by MHD between calls of the access handler. */
typedef struct request_state {
    char *body;
    size_t len, cap;
    bool too_large;
    struct timespec started;
} request_state;

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

char *http_percent_decode(const char *s, size_t len)
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
    return out;
}

void http_free_params(char **params, size_t nparams)
{
    for (size_t i = 0; i < nparams; i++)
        free(params[i]);
}

int http_match(const char *pattern, const char *path, char **params, size_t *nparams)
{
    *nparams = 0;
    const char *p = pattern, *u = path;
    while (*p != '\0') {
        if (*p == ':' || *p == '*') {
            bool rest = *p == '*';
            while (*p != '\0' && *p != '/')
                p++;
            const char *end = rest ? u + strlen(u) : strchrnul(u, '/');
            if (end == u || *nparams >= HTTP_MAX_PARAMS)
                goto nomatch;
            char *value = http_percent_decode(u, (size_t)(end - u));
            if (value == NULL || value[0] == '\0') {
                free(value);
                goto nomatch;
            }
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
        return 1;
nomatch:
    http_free_params(params, *nparams);
    *nparams = 0;
    return 0;
}

static void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)connection;
    (void)toe;
    request_state *st = *con_cls;
    if (st != NULL) {
        free(st->body);
        free(st);
        *con_cls = NULL;
    }
}

static enum MHD_Result send_response(struct MHD_Connection *connection, http_response *res)
{
    size_t len = res->body ? strlen(res->body) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, res->body ? res->body : (void *)"",
                                                             res->body ? MHD_RESPMEM_MUST_FREE
                                                                       : MHD_RESPMEM_PERSISTENT);
    res->body = NULL; /* MHD owns it now */
    if (r == NULL)
        return MHD_NO;
    if (len > 0 || res->content_type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                res->content_type ? res->content_type : "application/json");
    if (res->etag[0] != '\0')
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, res->etag);
    if (res->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", res->retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    enum MHD_Result ok = MHD_queue_response(connection, res->status, r);
    MHD_destroy_response(r);
    return ok;
}

static double elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) * 1e3 + (double)(now.tv_nsec - since->tv_nsec) / 1e6;
}

static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)key;
    (void)value;
    (*(int *)cls)++;
    return MHD_YES;
}

static enum MHD_Result dispatch(server *srv, struct MHD_Connection *connection, const char *method,
                                const char *url, request_state *st)
{
    http_response res = {.status = 500};
    const char *pattern = "(none)";
    if (st->too_large) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body exceeds %d bytes (QUEEN_MAX_BODY_BYTES)", srv->cfg->max_body_bytes);
        http_error(&res, 413, "payload_too_large", "body_too_large", detail);
    } else {
        char *params[HTTP_MAX_PARAMS];
        size_t nparams = 0;
        const route *found = NULL;
        bool path_matched = false;
        for (size_t i = 0; i < http_route_count; i++) {
            if (http_match(http_routes[i].pattern, url, params, &nparams)) {
                path_matched = true;
                if (strcmp(http_routes[i].method, method) == 0) {
                    found = &http_routes[i];
                    break;
                }
                http_free_params(params, nparams);
            }
        }
        if (found == NULL) {
            json_t *body = json_pack("{s:s, s:s}", "error", "Not Found", "code", "no_such_route");
            http_json(&res, path_matched ? 405 : 404, body);
            if (path_matched) {
                free(res.body);
                res.body = NULL;
                http_error(&res, 405, "method_not_allowed", "method_not_allowed", method);
            }
        } else {
            pattern = found->pattern;
            int nargs = 0;
            MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, count_arg, &nargs);
            http_request req = {
                .method = method,
                .path = url,
                .has_query = nargs > 0,
                .body = st->body ? st->body : "",
                .body_len = st->len,
                .nparams = nparams,
                .tenant = QUEEN_DEFAULT_TENANT,
                .mhd = connection,
            };
            for (size_t i = 0; i < nparams; i++)
                req.params[i] = params[i];
            found->handler(srv, &req, &res);
            http_free_params(params, nparams);
        }
    }
    unsigned status = res.status;
    enum MHD_Result ok = send_response(connection, &res);
    log_info("http %s %s %u %.2fms", method, pattern, status, elapsed_ms(&st->started));
    return ok;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls)
{
    (void)version;
    server *srv = cls;
    request_state *st = *con_cls;
    if (st == NULL) {
        st = calloc(1, sizeof *st);
        if (st == NULL)
            return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &st->started);
        *con_cls = st;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (st->too_large || st->len + n > (size_t)srv->cfg->max_body_bytes) {
            st->too_large = true; /* keep reading, drop the bytes, answer 413 */
            free(st->body);
            st->body = NULL;
            st->len = st->cap = 0;
            return MHD_YES;
        }
        if (st->len + n + 1 > st->cap) {
            size_t ncap = st->cap ? st->cap : 1024;
            while (ncap < st->len + n + 1)
                ncap *= 2;
            char *nb = realloc(st->body, ncap);
            if (nb == NULL)
                return MHD_NO;
            st->body = nb;
            st->cap = ncap;
        }
        memcpy(st->body + st->len, upload_data, n);
        st->len += n;
        st->body[st->len] = '\0';
        return MHD_YES;
    }
    return dispatch(srv, connection, method, url, st);
}

/* Keep the path exactly as sent: routes decode each capture once, so %2F
 * inside a key stays a slash of the key, not a path separator. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

int http_start(server *srv)
{
    unsigned threads = (unsigned)(srv->cfg->http_threads > 0 ? srv->cfg->http_threads : srv->cfg->pg_pool);
    if (threads == 0)
        threads = 8;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->cfg->port)};
    if (inet_pton(AF_INET, srv->cfg->bind, &addr.sin_addr) != 1) {
        log_error("QUEEN_BIND: '%s' is not an IPv4 address", srv->cfg->bind);
        return -1;
    }
    srv->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                                       MHD_USE_ERROR_LOG,
                                   0, NULL, NULL, access_handler, srv, MHD_OPTION_THREAD_POOL_SIZE, threads,
                                   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                                   request_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_LISTENING_ADDRESS_REUSE,
                                   (unsigned)1, MHD_OPTION_END);
    if (srv->daemon == NULL) {
        log_error("http: cannot listen on %s:%d", srv->cfg->bind, srv->cfg->port);
        return -1;
    }
    log_info("http: listening on %s:%d with %u threads", srv->cfg->bind, srv->cfg->port, threads);
    return 0;
}

void http_stop(server *srv)
{
    if (srv->daemon == NULL)
        return;
    /* Stop accepting first; MHD_stop_daemon then waits for the worker
     * threads, which finish the requests they are serving. */
    MHD_quiesce_daemon(srv->daemon);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}
