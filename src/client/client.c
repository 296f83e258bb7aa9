/* client: the handle, its connection pool and the retrying transport
 * (transport.h). One libcurl easy handle per call in flight, kept in a
 * pool so keep-alive connections are reused across calls and threads. */
#include "queen_client.h"
#include "jdoc.h"
#include "transport.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define POOL_KEEP 16 /* idle handles kept; more are closed when returned */

struct queen_client {
    char **urls;
    size_t nurls;
    char *auth_header;
    int max_attempts, backoff_ms, max_backoff_ms, timeout_ms, connect_timeout_ms;
    void (*on_retry)(void *ctx, int attempt, const queen_client_error *err, int wait_ms);
    void *on_retry_ctx;
    atomic_size_t current;       /* index of the URL that answered last */
    atomic_llong retries;
    queen_client *pool;          /* owner of urls, auth, idle, current,
                                  * retries: itself, or the base of a view */
    pthread_mutex_t lock;        /* guards idle */
    CURL *idle[POOL_KEEP];
    int nidle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void queen_client_options_defaults(queen_client_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_attempts = 3;
    o->backoff_ms = 50;
    o->max_backoff_ms = 5000;
    o->timeout_ms = 30000;
    o->connect_timeout_ms = 3000;
}

void client_error_set(queen_client_error *err, int status, const char *code, const char *detail)
{
    if (err == NULL)
        return;
    int attempts = err->attempts;
    memset(err, 0, sizeof *err);
    err->attempts = attempts;
    err->status = status;
    snprintf(err->code, sizeof err->code, "%s", code);
    snprintf(err->reason, sizeof err->reason, "%s", code);
    snprintf(err->detail, sizeof err->detail, "%s", detail != NULL ? detail : "");
    err->category = strcmp(code, "bad_response") == 0 ? QUEEN_ERR_INTERNAL
                    : strcmp(code, "out_of_memory") == 0 ? QUEEN_ERR_INTERNAL
                    : strcmp(code, "bad_request") == 0 || strcmp(code, "bad_argument") == 0 ? QUEEN_ERR_BAD_REQUEST
                                                          : QUEEN_ERR_UNAVAILABLE;
}

const char *queen_client_error_kind(const queen_client_error *e)
{
    if (e->category == QUEEN_ERR_PRECONDITION)
        return "precondition";
    switch (e->status) {
    case 0: return e->category == QUEEN_ERR_BAD_REQUEST ? "bad_request" : "transport"; /* refused before sending */
    case 401:
    case 403: return "auth";
    case 404: return "not_found";
    case 409: return "conflict";
    case 429: return "rate_limited";
    case 503: return "unavailable";
    default: return e->status >= 500 ? "server" : e->status >= 400 ? "bad_request" : "transport";
    }
}

int client_oom(queen_client_error *err)
{
    client_error_set(err, 0, "out_of_memory", "out of memory");
    return -1;
}

queen_client *queen_client_open(const queen_client_options *o, queen_client_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
    if (o == NULL) {
        client_error_set(err, 0, "bad_argument", "no options given");
        return NULL;
    }
    if (o->urls == NULL || o->nurls == 0) {
        /* clients/API.md: with no URL given every client reads QUEEN_URL,
         * a comma-separated list in failover order. */
        const char *env = getenv("QUEEN_URL");
        char *copy = env != NULL ? strdup(env) : NULL;
        const char *urls[16];
        size_t n = 0;
        for (char *save = NULL, *u = copy != NULL ? strtok_r(copy, ", \t", &save) : NULL;
             u != NULL && n < sizeof urls / sizeof urls[0]; u = strtok_r(NULL, ", \t", &save))
            urls[n++] = u;
        queen_client *c = NULL;
        if (n == 0)
            client_error_set(err, 0, "bad_argument", "no broker URL given (options.urls, or QUEEN_URL)");
        else {
            queen_client_options from_env = *o;
            from_env.urls = urls;
            from_env.nurls = n;
            c = queen_client_open(&from_env, err);
        }
        free(copy);
        return c;
    }
    pthread_once(&curl_once, curl_init_once);
    queen_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        client_oom(err);
        return NULL;
    }
    c->urls = calloc(o->nurls, sizeof *c->urls);
    bool ok = c->urls != NULL;
    for (size_t i = 0; ok && i < o->nurls; i++) {
        const char *u = o->urls[i] != NULL ? o->urls[i] : "";
        size_t n = strlen(u);
        while (n > 0 && u[n - 1] == '/') /* paths are appended with their own '/' */
            n--;
        c->urls[i] = strndup(u, n);
        ok = c->urls[i] != NULL;
        c->nurls = i + 1;
    }
    if (ok && o->token != NULL && o->token[0] != '\0') {
        size_t n = strlen(o->token) + 32;
        c->auth_header = malloc(n);
        ok = c->auth_header != NULL;
        if (ok)
            snprintf(c->auth_header, n, "Authorization: Bearer %s", o->token);
    }
    if (!ok) {
        queen_client_close(c);
        client_oom(err);
        return NULL;
    }
    c->max_attempts = o->max_attempts > 0 ? o->max_attempts : 3;
    c->backoff_ms = o->backoff_ms > 0 ? o->backoff_ms : 50;
    c->max_backoff_ms = o->max_backoff_ms > 0 ? o->max_backoff_ms : 5000;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 3000;
    c->on_retry = o->on_retry;
    c->on_retry_ctx = o->on_retry_ctx;
    c->pool = c;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

queen_client *queen_client_with_timeout(queen_client *base, int timeout_ms)
{
    if (base == NULL || timeout_ms <= 0)
        return NULL;
    queen_client *v = malloc(sizeof *v);
    if (v == NULL)
        return NULL;
    /* A view copies the settings and borrows everything else through
     * pool, so its calls share the base's connections and failover. */
    v->urls = base->urls;
    v->nurls = base->nurls;
    v->auth_header = base->auth_header;
    v->max_attempts = base->max_attempts;
    v->backoff_ms = base->backoff_ms;
    v->max_backoff_ms = base->max_backoff_ms;
    v->connect_timeout_ms = base->connect_timeout_ms;
    v->on_retry = base->on_retry;
    v->on_retry_ctx = base->on_retry_ctx;
    v->timeout_ms = timeout_ms;
    v->pool = base->pool;
    v->nidle = 0;
    atomic_init(&v->current, 0);
    atomic_init(&v->retries, 0);
    return v;
}

void queen_client_close(queen_client *c)
{
    if (c == NULL)
        return;
    if (c->pool != c && c->pool != NULL) { /* a view owns only itself */
        free(c);
        return;
    }
    for (int i = 0; i < c->nidle; i++)
        curl_easy_cleanup(c->idle[i]);
    for (size_t i = 0; i < c->nurls; i++)
        free(c->urls[i]);
    free(c->urls);
    free(c->auth_header);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

long long queen_client_retries(queen_client *c) { return c != NULL ? atomic_load(&c->pool->retries) : 0; }

static CURL *handle_get(queen_client *c)
{
    c = c->pool;
    CURL *h = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->nidle > 0)
        h = c->idle[--c->nidle];
    pthread_mutex_unlock(&c->lock);
    return h != NULL ? h : curl_easy_init();
}

static void handle_put(queen_client *c, CURL *h)
{
    c = c->pool;
    pthread_mutex_lock(&c->lock);
    if (c->nidle < POOL_KEEP) {
        c->idle[c->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (h != NULL)
        curl_easy_cleanup(h);
}

typedef struct collect {
    char *s;
    size_t len, cap;
    bool oom;
    int retry_after; /* seconds; 0: none */
} collect;

static size_t on_body(char *ptr, size_t size, size_t n, void *ud)
{
    collect *b = ud;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 1024;
        while (nc < b->len + add + 1)
            nc *= 2;
        char *s = realloc(b->s, nc);
        if (s == NULL) {
            b->oom = true;
            return 0;
        }
        b->s = s;
        b->cap = nc;
    }
    memcpy(b->s + b->len, ptr, add);
    b->len += add;
    b->s[b->len] = '\0';
    return add;
}

static size_t on_header(char *ptr, size_t size, size_t n, void *ud)
{
    collect *b = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(ptr, name, sizeof name - 1) == 0) {
        long v = strtol(ptr + sizeof name - 1, NULL, 10); /* seconds; an HTTP date is not used by the broker */
        b->retry_after = v > 0 && v < 86400 ? (int)v : 0;
    }
    return len;
}

static void copy_member(const jd *o, const char *key, char *out, size_t outlen)
{
    const char *s = jd_str(o, key);
    snprintf(out, outlen, "%s", s != NULL ? s : "");
}

/* The precondition members (failedIndex, kvReason, version, value or
 * valueOmitted/valueBytes) of a verdict or a failure body. */
static void fill_precondition(const jd *o, queen_client_error *err)
{
    err->precondition.index = (int)jd_int(o, "failedIndex", 0);
    copy_member(o, "kvReason", err->precondition.reason, sizeof err->precondition.reason);
    err->precondition.version = jd_int(o, "version", 0);
    err->precondition.value_omitted = jd_true(o, "valueOmitted");
    err->precondition.value_bytes = (size_t)jd_int(o, "valueBytes", 0);
    const jd *v = jd_get(o, "value");
    if (v != NULL && v->rawlen <= QUEEN_PRECONDITION_VALUE_MAX) {
        memcpy(err->precondition.value, v->raw, v->rawlen);
        err->precondition.value[v->rawlen] = '\0';
    } else if (v == NULL && !err->precondition.value_omitted) {
        strcpy(err->precondition.value, "null");
    }
}

bool client_kv_verdict(const char *body, size_t len, queen_client_error *err)
{
    if (len == 0 || body[0] != '{' || strstr(body, "kv_precondition") == NULL)
        return false;
    jd *o = jd_parse(body, len, NULL, 0);
    const jd *ok = jd_get(o, "ok");
    const char *reason = jd_str(o, "reason");
    bool verdict = ok != NULL && ok->type == JD_BOOL && !ok->boolean && reason != NULL &&
                   strcmp(reason, "kv_precondition") == 0;
    if (verdict && err != NULL) {
        int attempts = err->attempts;
        memset(err, 0, sizeof *err);
        err->attempts = attempts;
        err->category = QUEEN_ERR_PRECONDITION;
        err->status = 200;
        strcpy(err->code, "kv_precondition");
        strcpy(err->reason, "kv_precondition");
        snprintf(err->detail, sizeof err->detail, "a required op lost");
        fill_precondition(o, err);
    }
    jd_free(o);
    return verdict;
}

static queen_error_category category_of(long status, const char *code)
{
    switch (status) {
    case 400: return QUEEN_ERR_BAD_REQUEST;
    case 413: return QUEEN_ERR_TOO_LARGE;
    case 429: return QUEEN_ERR_RATE_LIMITED;
    case 403:
        return strcmp(code, "feature_gated") == 0    ? QUEEN_ERR_FEATURE_GATED
               : strcmp(code, "limit_exceeded") == 0 ? QUEEN_ERR_LIMIT_EXCEEDED
                                                     : QUEEN_ERR_QUOTA_EXCEEDED;
    case 409: return strstr(code, "precondition") != NULL ? QUEEN_ERR_PRECONDITION : QUEEN_ERR_CONFLICT;
    case 503: return QUEEN_ERR_UNAVAILABLE;
    case 504: return QUEEN_ERR_OUTCOME_UNKNOWN;
    case 500: return strstr(code, "misconfigured") != NULL ? QUEEN_ERR_MISCONFIGURED : QUEEN_ERR_INTERNAL;
    default: return status >= 500 ? QUEEN_ERR_UNAVAILABLE : status >= 400 ? QUEEN_ERR_BAD_REQUEST : QUEEN_ERR_INTERNAL;
    }
}

/* An answer of 4xx/5xx: the envelope's members as sent; a body that is not
 * the envelope (a proxy's own page, say) keeps its status and
 * says so in detail. */
static void fill_envelope(queen_client_error *err, long status, const collect *b)
{
    int attempts = err->attempts;
    memset(err, 0, sizeof *err);
    err->attempts = attempts;
    err->status = (int)status;
    err->retry_after_s = b->retry_after;
    jd *o = b->s != NULL ? jd_parse(b->s, b->len, NULL, 0) : NULL;
    if (o != NULL && o->type == JD_OBJECT && jd_str(o, "code") != NULL) {
        copy_member(o, "code", err->code, sizeof err->code);
        copy_member(o, "reason", err->reason, sizeof err->reason);
        copy_member(o, "detail", err->detail, sizeof err->detail);
        if (err->detail[0] == '\0')
            copy_member(o, "error", err->detail, sizeof err->detail);
        if (jd_get(o, "failedIndex") != NULL)
            fill_precondition(o, err);
    } else {
        snprintf(err->code, sizeof err->code, "http_%ld", status);
        snprintf(err->reason, sizeof err->reason, "http_%ld", status);
        snprintf(err->detail, sizeof err->detail, "HTTP %ld without the error envelope", status);
    }
    err->category = category_of(status, err->code);
    jd_free(o);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Full-jitter exponential backoff: a random wait in [d/2, d] with d the
 * base doubled per attempt, so clients retrying together spread out. */
static long backoff_for(const queen_client *c, int attempt, unsigned *seed)
{
    long d = c->backoff_ms;
    for (int i = 1; i < attempt && d < c->max_backoff_ms; i++)
        d *= 2;
    if (d > c->max_backoff_ms)
        d = c->max_backoff_ms;
    return d / 2 + (long)(rand_r(seed) % (unsigned)(d / 2 + 1));
}

int client_call(queen_client *c, const client_request *rq, client_reply *reply, queen_client_error *err)
{
    queen_client_error local;
    if (err == NULL)
        err = &local;
    memset(err, 0, sizeof *err);
    memset(reply, 0, sizeof *reply);
    CURL *h = handle_get(c);
    if (h == NULL)
        return client_oom(err);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)(size_t)&seed ^ (unsigned)clock();
    size_t url_i = atomic_load(&c->pool->current) % c->nurls;
    int rc = -1;
    for (int attempt = 1;; attempt++) {
        err->attempts = attempt;
        if (attempt > 1)
            atomic_fetch_add(&c->pool->retries, 1);
        size_t n = strlen(c->urls[url_i]) + strlen(rq->path) + 1;
        char *url = malloc(n);
        if (url == NULL) {
            rc = client_oom(err);
            break;
        }
        snprintf(url, n, "%s%s", c->urls[url_i], rq->path);
        struct curl_slist *hdrs = NULL;
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip */
        if (c->auth_header != NULL)
            hdrs = curl_slist_append(hdrs, c->auth_header);
        char tenant_hdr[128];
        if (rq->tenant != NULL && rq->tenant[0] != '\0') {
            snprintf(tenant_hdr, sizeof tenant_hdr, "x-queen-tenant: %s", rq->tenant);
            hdrs = curl_slist_append(hdrs, tenant_hdr);
        }
        collect b = {0};
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms + rq->extra_ms);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        if (rq->body != NULL) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(rq->body));
        } else if (strcmp(rq->method, "GET") == 0) {
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &b);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdrs);
        free(url);

        bool retry = false, next_url = true;
        if (b.oom) {
            free(b.s);
            rc = client_oom(err);
            break;
        }
        if (cc != CURLE_OK) {
            free(b.s);
            bool no_connection = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
                                 cc == CURLE_COULDNT_RESOLVE_PROXY;
            const char *code = no_connection ? "unreachable" : cc == CURLE_OPERATION_TIMEDOUT ? "timeout" : "transport";
            char detail[256];
            snprintf(detail, sizeof detail, "%s: %s", c->urls[url_i], curl_easy_strerror(cc));
            client_error_set(err, 0, code, detail);
            /* Nothing was sent without a connection: any call may go again. */
            retry = no_connection || rq->safe;
        } else if (status >= 200 && status < 300) {
            atomic_store(&c->pool->current, url_i);
            reply->status = status;
            reply->body = b.s != NULL ? b.s : strdup("");
            reply->len = b.len;
            if (reply->body == NULL) {
                rc = client_oom(err);
                break;
            }
            rc = 0;
            break;
        } else {
            atomic_store(&c->pool->current, url_i);
            fill_envelope(err, status, &b);
            free(b.s);
            /* db_unavailable: the statement never reached the database, so
             * any call may go again; 504 (db_outcome_unknown, or a gateway's
             * timeout) may have committed, so only a call a repeat cannot
             * harm goes again, as after a timeout of our own. */
            retry = ((status == 429 || status == 503 || status == 504) && rq->safe) ||
                    (status == 503 && strcmp(err->reason, "db_unavailable") == 0);
            next_url = status != 429; /* a rate limit is the tenant's on every broker */
        }
        if (!retry || attempt >= c->max_attempts) {
            rc = -1;
            break;
        }
        long wait = backoff_for(c, attempt, &seed);
        if (err->retry_after_s > 0 && err->retry_after_s * 1000L > wait)
            wait = err->retry_after_s * 1000L;
        if (wait > c->max_backoff_ms)
            wait = c->max_backoff_ms;
        if (next_url)
            url_i = (url_i + 1) % c->nurls;
        if (c->on_retry != NULL)
            c->on_retry(c->on_retry_ctx, attempt, err, (int)wait);
        sleep_ms(wait);
    }
    handle_put(c, h);
    return rc;
}

int queen_client_health(queen_client *c, char *version, size_t len, queen_client_error *err)
{
    client_request rq = {.method = "GET", .path = "/health", .safe = true};
    client_reply r;
    if (client_call(c, &rq, &r, err) != 0)
        return -1;
    jd *o = jd_parse(r.body, r.len, NULL, 0);
    const char *v = jd_str(o, "version");
    int rc = 0;
    if (v == NULL) {
        client_error_set(err, (int)r.status, "bad_response", "the health answer has no version");
        rc = -1;
    } else if (version != NULL && len > 0) {
        snprintf(version, len, "%s", v);
    }
    jd_free(o);
    free(r.body);
    return rc;
}
