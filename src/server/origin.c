/* origin: the Host, Origin and Content-Type rules (see origin.h). Headers
 * are read as the parser keeps them (with their lengths); nothing here
 * allocates, and the setting lists are short, so they are walked per
 * request rather than kept parsed. */
#include "origin.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "errors.h"
#include "tls.h"

typedef struct span {
    const char *p;
    size_t n;
} span;

/* host[:port] or [v6][:port]: the name (brackets dropped), the port (-1
 * when absent). false when it is not that shape. */
typedef struct authority {
    span name;
    bool v6;
    long port;
} authority;

static span trim(const char *p, size_t n)
{
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return (span){p, n};
}

static bool parse_port(const char *p, size_t n, long *port)
{
    if (n == 0 || n > 5)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    if (v < 1 || v > 65535)
        return false;
    *port = v;
    return true;
}

/* A name of letters, digits, '-', '.' and '_' (what a Host can name besides
 * an address literal). */
static bool plain_name(span s)
{
    if (s.n == 0 || s.n > 253)
        return false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_'))
            return false;
    }
    return true;
}

static bool parse_authority(const char *p, size_t n, authority *a)
{
    a->port = -1;
    a->v6 = false;
    const char *end = p + n, *colon;
    if (n > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (close == NULL)
            return false;
        a->name = (span){p + 1, (size_t)(close - p - 1)};
        a->v6 = true;
        char buf[INET6_ADDRSTRLEN + 1];
        struct in6_addr six;
        if (a->name.n == 0 || a->name.n >= sizeof buf)
            return false;
        memcpy(buf, a->name.p, a->name.n);
        buf[a->name.n] = '\0';
        if (inet_pton(AF_INET6, buf, &six) != 1)
            return false;
        colon = close + 1;
        if (colon == end)
            return true;
        return *colon == ':' && parse_port(colon + 1, (size_t)(end - colon - 1), &a->port);
    }
    colon = memchr(p, ':', n);
    a->name = (span){p, colon ? (size_t)(colon - p) : n};
    if (!plain_name(a->name))
        return false;
    return colon == NULL || parse_port(colon + 1, (size_t)(end - colon - 1), &a->port);
}

static bool same_name(span a, const char *b)
{
    return a.n == strlen(b) && strncasecmp(a.p, b, a.n) == 0;
}

static bool same_span(span a, span b)
{
    return a.n == b.n && strncasecmp(a.p, b.p, a.n) == 0;
}

/* scheme://authority with no path, scheme http or https; the port made
 * explicit. "null" (sandboxed pages, files) and every other shape: false. */
typedef struct web_origin {
    bool https;
    authority at;
} web_origin;

static bool parse_origin(const char *p, size_t n, web_origin *o)
{
    span s = trim(p, n);
    size_t skip;
    if (s.n > 8 && strncasecmp(s.p, "https://", 8) == 0) {
        o->https = true;
        skip = 8;
    } else if (s.n > 7 && strncasecmp(s.p, "http://", 7) == 0) {
        o->https = false;
        skip = 7;
    } else {
        return false;
    }
    if (!parse_authority(s.p + skip, s.n - skip, &o->at))
        return false;
    if (o->at.port < 0)
        o->at.port = o->https ? 443 : 80;
    return true;
}

static bool same_origin(const web_origin *a, const web_origin *b)
{
    return a->https == b->https && a->at.port == b->at.port && same_span(a->at.name, b->at.name);
}

/* Calls each non-empty, trimmed entry of a comma-separated list until one
 * answers true. */
typedef bool (*entry_fn)(span entry, void *ctx);

static bool any_entry(const char *list, entry_fn fn, void *ctx)
{
    if (list == NULL)
        return false;
    const char *p = list;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        span e = trim(p, n);
        if (e.n > 0 && fn(e, ctx))
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

static bool is_star(span e)
{
    return e.n == 1 && e.p[0] == '*';
}

static bool entry_is_star(span e, void *ctx)
{
    (void)ctx;
    return is_star(e);
}

typedef struct host_match {
    const authority *host;
    long default_port;
} host_match;

static bool host_entry_matches(span e, void *ctx)
{
    host_match *m = ctx;
    authority want;
    if (is_star(e))
        return true;
    if (!parse_authority(e.p, e.n, &want) || !same_span(want.name, m->host->name))
        return false;
    long got = m->host->port >= 0 ? m->host->port : m->default_port;
    return want.port < 0 || want.port == got;
}

static bool origin_entry_matches(span e, void *ctx)
{
    web_origin want;
    return is_star(e) || (parse_origin(e.p, e.n, &want) && same_origin(&want, ctx));
}

bool origin_host_allowed(const queen_config *cfg, const char *host, size_t len)
{
    authority a;
    span h = trim(host, len);
    if (!parse_authority(h.p, h.n, &a))
        return false;
    if (a.v6)
        return true; /* parse_authority took it as an IPv6 literal */
    char buf[16];
    struct in_addr four;
    if (a.name.n < sizeof buf) {
        memcpy(buf, a.name.p, a.name.n);
        buf[a.name.n] = '\0';
        if (inet_pton(AF_INET, buf, &four) == 1)
            return true;
    }
    if (same_name(a.name, "localhost") || (cfg->bind != NULL && same_name(a.name, cfg->bind)))
        return true;
    host_match m = {&a, tls_enabled(cfg) ? 443 : 80};
    return any_entry(cfg->allowed_hosts, host_entry_matches, &m);
}

bool origin_origin_allowed(const queen_config *cfg, bool tls, const char *host, size_t host_len, const char *origin,
                           size_t origin_len)
{
    web_origin got, own = {.https = tls};
    if (!parse_origin(origin, origin_len, &got))
        return any_entry(cfg->allowed_origins, entry_is_star, NULL);
    span h = trim(host ? host : "", host ? host_len : 0);
    if (h.n > 0 && parse_authority(h.p, h.n, &own.at)) {
        if (own.at.port < 0)
            own.at.port = tls ? 443 : 80;
        if (same_origin(&got, &own))
            return true;
    }
    return any_entry(cfg->allowed_origins, origin_entry_matches, &got);
}

bool origin_refused(const queen_config *cfg, bool auth_on, struct conn *c, http_family fam,
                    http_response *res)
{
    const char *host = NULL, *origin = NULL, *site = NULL;
    size_t host_len = 0, origin_len = 0, site_len = 0;
    unsigned hosts = http_header_first(c, "Host", &host, &host_len);
    if (!auth_on && hosts > 0 && !origin_host_allowed(cfg, host, host_len)) {
        http_refuse(res, fam, QUEEN_ERR_FORBIDDEN, "host_not_allowed",
                    "with QUEEN_AUTH=off the broker answers a Host that is an IP address, localhost, QUEEN_BIND or "
                    "a name in QUEEN_ALLOWED_HOSTS");
        return true;
    }
    unsigned origins = http_header_first(c, "Origin", &origin, &origin_len);
    if (origins > 1 || (origins == 1 && !origin_origin_allowed(cfg, tls_enabled(cfg), hosts ? host : NULL, host_len,
                                                               origin, origin_len))) {
        http_refuse(res, fam, QUEEN_ERR_FORBIDDEN, "origin_not_allowed",
                    "a browser page of another origin sent this request; QUEEN_ALLOWED_ORIGINS names the origins "
                    "served besides the broker's own");
        return true;
    }
    /* No Origin: browsers leave it out of a no-cors GET, and say where the
     * request came from in Sec-Fetch-Site, which no page can set. */
    if (origins == 0 && http_header_first(c, "Sec-Fetch-Site", &site, &site_len) > 0) {
        span s = trim(site, site_len);
        if ((same_name(s, "cross-site") || same_name(s, "same-site")) &&
            !any_entry(cfg->allowed_origins, entry_is_star, NULL)) {
            http_refuse(res, fam, QUEEN_ERR_FORBIDDEN, "cross_site_request",
                        "a browser page of another origin sent this request (Sec-Fetch-Site) without naming its "
                        "origin");
            return true;
        }
    }
    return false;
}

typedef struct type_count {
    unsigned json, other;
} type_count;

bool origin_content_type_refused(struct conn *c, const char *method, bool has_body, http_response *res)
{
    if (!has_body || strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 || strcmp(method, "OPTIONS") == 0)
        return false;
    /* Every Content-Type the request carries says JSON (a client library
     * may repeat the one its caller set): none other may ride along. */
    type_count t = {0, 0};
    const h1 *head = conn_head(c);
    for (size_t i = 0; i < h1_header_count(head); i++) {
        const h1_header *h = h1_header_at(head, i);
        if (h->name_len != 12 || strncasecmp(h->name, "Content-Type", 12) != 0)
            continue;
        const char *semi = memchr(h->value, ';', h->value_len);
        span media = trim(h->value, semi ? (size_t)(semi - h->value) : h->value_len);
        if (same_name(media, "application/json"))
            t.json++;
        else
            t.other++;
    }
    if (t.json > 0 && t.other == 0)
        return false;
    /* A form (urlencoded, multipart) and text/plain are what a page of any
     * origin may send without asking the broker first. */
    http_error(res, 415, "unsupported_media_type", "content_type_not_json",
               "a request with a body must send Content-Type: application/json");
    return true;
}

typedef struct check_ctx {
    bool origins; /* the list being checked: origins, else hosts */
    span bad;
} check_ctx;

static bool entry_bad(span e, void *ctx)
{
    check_ctx *k = ctx;
    web_origin o;
    authority a;
    bool ok = is_star(e) || (k->origins ? parse_origin(e.p, e.n, &o) : parse_authority(e.p, e.n, &a));
    if (!ok)
        k->bad = e;
    return !ok;
}

int origin_check_settings(const queen_config *cfg, char *err, size_t errlen)
{
    check_ctx k = {.origins = true};
    if (any_entry(cfg->allowed_origins, entry_bad, &k)) {
        snprintf(err, errlen, "QUEEN_ALLOWED_ORIGINS: '%.*s' is not * or scheme://host[:port] (http or https)",
                 (int)(k.bad.n > 200 ? 200 : k.bad.n), k.bad.p);
        return -1;
    }
    k = (check_ctx){.origins = false};
    if (any_entry(cfg->allowed_hosts, entry_bad, &k)) {
        snprintf(err, errlen, "QUEEN_ALLOWED_HOSTS: '%.*s' is not * or host[:port]",
                 (int)(k.bad.n > 200 ? 200 : k.bad.n), k.bad.p);
        return -1;
    }
    return 0;
}
