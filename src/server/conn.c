/* conn: connection cap, read deadline and idle timeout (see conn.h).
 *
 * One slot per connection MHD may hold (the cap plus the headroom), taken at
 * MHD_CONNECTION_NOTIFY_STARTED and given back at ..._CLOSED. MHD calls
 * CLOSED before it closes the socket, and CLOSED takes the slot's lock, so
 * the watchdog, which holds that lock across every call on the socket, never
 * touches a descriptor that was closed (or already reused by another
 * connection).
 *
 * A slot's phase: IDLE (no request in progress: the idle timeout runs),
 * READING (a request's bytes are arriving: the read deadline runs), BUSY
 * (the request is whole; its handler, long poll or answer takes what it
 * takes), CUT (the watchdog shut the socket; MHD closes it). The MHD thread
 * learns of a request at its request line (the URI log callback); a request
 * line that trickles is seen by the watchdog instead, which asks the kernel
 * (TCP_INFO) whether bytes arrived on an idle connection. Both date the
 * request from the last moment it was known not to have begun, so a late
 * sighting shortens the deadline by at most a tick, never lengthens it. */
#include "conn.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "errors.h"
#include "logging.h"

enum { PHASE_FREE, PHASE_IDLE, PHASE_READING, PHASE_BUSY, PHASE_CUT };

/* The kernel dates the last byte in jiffies (4 ms at HZ=250, 10 ms at 100):
 * bytes within this much after a connection went idle may be the previous
 * request's, so they do not count as a new request's first byte. */
#define LAST_BYTE_SLACK_MS 20
/* How often the refusal and deadline lines may be written. */
#define LOG_EVERY_MS 10000

typedef struct conn_slot {
    pthread_mutex_t lock; /* the watchdog's socket calls, and every phase change */
    atomic_int phase;     /* read without the lock for the cheap checks */
    int fd;
    bool admitted;              /* counted against the cap */
    long long idle_since_ms;    /* IDLE: when the last request completed (or the connection opened) */
    long long reading_since_ms; /* READING: when the request began, at the latest */
    long long quiet_at_ms;      /* IDLE: the watchdog's last look that found no new byte (0: none yet) */
    unsigned long long quiet_bytes; /* bytes received by then (TCP_INFO) */
    int next_free;
} conn_slot;

typedef struct conn_guard {
    server *srv;
    conn_slot *slots;
    int nslots;
    pthread_mutex_t free_lock;
    int free_head;
    int cap, read_ms, idle_ms, tick_ms;
    atomic_llong open, admitted;
    atomic_llong refused, read_timeouts, idle_closed;
    atomic_llong refused_unlogged, timeouts_unlogged;
    long long refused_logged_at, timeouts_logged_at; /* the watchdog's own */
    char *timeout_reply;                             /* the whole 408, written by the watchdog */
    size_t timeout_reply_len;
    pthread_t thread;
    bool running;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stop;
} conn_guard;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

long conn_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            log_warn("http: cannot raise the open-file limit from %llu to %llu: %s", (unsigned long long)was,
                     (unsigned long long)rl.rlim_max, strerror(errno));
            rl.rlim_cur = was;
        } else {
            log_info("http: open-file limit %llu (raised from %llu to the hard limit)",
                     (unsigned long long)rl.rlim_cur, (unsigned long long)was);
        }
    } else {
        log_info("http: open-file limit %llu (the hard limit)", (unsigned long long)rl.rlim_cur);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)1 << 30 ? 1L << 30 : (long)rl.rlim_cur;
}

static conn_slot *slot_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* ---- Slots ------------------------------------------------------------- */

static conn_slot *slot_take(conn_guard *g)
{
    pthread_mutex_lock(&g->free_lock);
    int i = g->free_head;
    if (i >= 0)
        g->free_head = g->slots[i].next_free;
    pthread_mutex_unlock(&g->free_lock);
    return i >= 0 ? &g->slots[i] : NULL;
}

static void slot_give(conn_guard *g, conn_slot *s)
{
    pthread_mutex_lock(&g->free_lock);
    s->next_free = g->free_head;
    g->free_head = (int)(s - g->slots);
    pthread_mutex_unlock(&g->free_lock);
}

/* Takes a place under the cap, or none: never more than cap admitted. */
static bool admit(conn_guard *g)
{
    if (atomic_fetch_add(&g->admitted, 1) < g->cap)
        return true;
    atomic_fetch_sub(&g->admitted, 1);
    return false;
}

static void become_idle(conn_slot *s, long long now)
{
    s->idle_since_ms = now;
    s->quiet_at_ms = 0;
    atomic_store(&s->phase, PHASE_IDLE);
}

void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    server *srv = cls;
    conn_guard *g = srv->guard;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&g->open, 1);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_slot *s = ci != NULL ? slot_take(g) : NULL;
        /* No slot (cannot happen while MHD keeps to its limit): no
         * deadlines, and conn_over_cap refuses its request. */
        if (s != NULL) {
            pthread_mutex_lock(&s->lock);
            s->fd = ci->connect_fd;
            s->admitted = admit(g);
            become_idle(s, mono_ms());
            pthread_mutex_unlock(&s->lock);
        }
        *socket_context = s;
        return;
    }
    atomic_fetch_sub(&g->open, 1);
    conn_slot *s = *socket_context;
    *socket_context = NULL;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->admitted)
        atomic_fetch_sub(&g->admitted, 1);
    s->admitted = false;
    s->fd = -1;
    atomic_store(&s->phase, PHASE_FREE);
    pthread_mutex_unlock(&s->lock);
    slot_give(g, s);
}

/* ---- Request hooks (MHD threads) ------------------------------------- */

void conn_request_reading(struct MHD_Connection *c)
{
    conn_slot *s = slot_of(c);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    if (atomic_load(&s->phase) == PHASE_IDLE) {
        /* The first byte came after the last quiet look, or after the
         * connection went idle: date the request from there. */
        s->reading_since_ms = s->quiet_at_ms > s->idle_since_ms ? s->quiet_at_ms : s->idle_since_ms;
        atomic_store(&s->phase, PHASE_READING);
    }
    pthread_mutex_unlock(&s->lock);
}

bool conn_over_cap(server *srv, struct MHD_Connection *c)
{
    conn_slot *s = slot_of(c);
    if (s != NULL && s->admitted) /* set before MHD hands the connection over: stable */
        return false;
    conn_guard *g = srv->guard;
    atomic_fetch_add(&g->refused, 1);
    atomic_fetch_add(&g->refused_unlogged, 1);
    return true;
}

bool conn_request_handling(struct MHD_Connection *c)
{
    conn_slot *s = slot_of(c);
    if (s == NULL)
        return true;
    pthread_mutex_lock(&s->lock);
    bool cut = atomic_load(&s->phase) == PHASE_CUT;
    if (!cut)
        atomic_store(&s->phase, PHASE_BUSY);
    pthread_mutex_unlock(&s->lock);
    return !cut;
}

bool conn_cut(struct MHD_Connection *c)
{
    conn_slot *s = slot_of(c);
    return s != NULL && atomic_load(&s->phase) == PHASE_CUT;
}

void conn_request_done(struct MHD_Connection *c)
{
    conn_slot *s = slot_of(c);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    int phase = atomic_load(&s->phase);
    if (phase != PHASE_CUT && phase != PHASE_FREE)
        become_idle(s, mono_ms());
    pthread_mutex_unlock(&s->lock);
}

/* ---- The watchdog -------------------------------------------------------- */

/* Cuts the connection: MHD reads end-of-stream and closes it; the client
 * reads what was written first, then end-of-stream. */
static void cut(conn_slot *s, const char *reply, size_t len)
{
    atomic_store(&s->phase, PHASE_CUT);
    if (reply != NULL) /* best effort: the socket's buffer takes a few hundred bytes */
        (void)send(s->fd, reply, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(s->fd, SHUT_RDWR);
}

/* An idle connection: has a request begun that the MHD thread has not seen
 * (its request line is still arriving)? */
static void look_for_first_bytes(conn_slot *s, long long now)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return;
    bool begun;
    if (s->quiet_at_ms == 0)
        begun = now - (long long)ti.tcpi_last_data_recv > s->idle_since_ms + LAST_BYTE_SLACK_MS;
    else
        begun = ti.tcpi_bytes_received > s->quiet_bytes;
    if (begun) {
        s->reading_since_ms = s->quiet_at_ms != 0 ? s->quiet_at_ms : s->idle_since_ms;
        atomic_store(&s->phase, PHASE_READING);
        return;
    }
    s->quiet_at_ms = now;
    s->quiet_bytes = ti.tcpi_bytes_received;
}

static void check_slot(conn_guard *g, conn_slot *s, long long now)
{
    int phase = atomic_load(&s->phase);
    if (phase == PHASE_IDLE) {
        long long idle = now - s->idle_since_ms;
        if (idle >= g->idle_ms) {
            cut(s, NULL, 0);
            atomic_fetch_add(&g->idle_closed, 1);
        } else if (idle >= g->tick_ms) { /* fresh idlers would only cost a system call */
            look_for_first_bytes(s, now);
        }
        phase = atomic_load(&s->phase);
    }
    if (phase == PHASE_READING && now - s->reading_since_ms >= g->read_ms) {
        cut(s, g->timeout_reply, g->timeout_reply_len);
        atomic_fetch_add(&g->read_timeouts, 1);
        atomic_fetch_add(&g->timeouts_unlogged, 1);
    }
}

static void flush_log(atomic_llong *unlogged, long long *logged_at, long long now, const char *what, int setting,
                      const conn_guard *g)
{
    if (atomic_load(unlogged) == 0 || (*logged_at != 0 && now - *logged_at < LOG_EVERY_MS))
        return;
    long long n = atomic_exchange(unlogged, 0);
    *logged_at = now;
    log_warn("http: %s: %lld since the last such line (limit %d; %lld connection(s) open)", what, n, setting,
             (long long)atomic_load(&g->open));
}

static void *watchdog(void *arg)
{
    conn_guard *g = arg;
    pthread_mutex_lock(&g->stop_lock);
    while (!g->stop) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_nsec += (long)g->tick_ms * 1000000L;
        at.tv_sec += at.tv_nsec / 1000000000L;
        at.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g->stop_cond, &g->stop_lock, &at);
        if (g->stop)
            break;
        pthread_mutex_unlock(&g->stop_lock);
        long long now = mono_ms();
        for (int i = 0; i < g->nslots; i++) {
            conn_slot *s = &g->slots[i];
            int phase = atomic_load(&s->phase);
            if (phase != PHASE_IDLE && phase != PHASE_READING)
                continue;
            pthread_mutex_lock(&s->lock);
            check_slot(g, s, now);
            pthread_mutex_unlock(&s->lock);
        }
        flush_log(&g->refused_unlogged, &g->refused_logged_at, now,
                  "requests refused with 503 past QUEEN_MAX_CONNECTIONS", g->cap, g);
        flush_log(&g->timeouts_unlogged, &g->timeouts_logged_at, now,
                  "requests cut with 408 past QUEEN_REQUEST_READ_TIMEOUT_MS", g->read_ms, g);
        pthread_mutex_lock(&g->stop_lock);
    }
    pthread_mutex_unlock(&g->stop_lock);
    return NULL;
}

/* ---- Start, stop, figures ---------------------------------------------- */

static bool render_timeout_reply(conn_guard *g)
{
    http_response res = {0};
    char detail[160];
    snprintf(detail, sizeof detail,
             "the request did not arrive whole within %d ms of its first byte (QUEEN_REQUEST_READ_TIMEOUT_MS)",
             g->read_ms);
    http_error(&res, 408, "request_timeout", "request_read_timeout", detail);
    if (res.body == NULL)
        return false;
    int n = asprintf(&g->timeout_reply,
                     "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(res.body), res.body);
    free(res.body);
    if (n < 0) {
        g->timeout_reply = NULL;
        return false;
    }
    g->timeout_reply_len = (size_t)n;
    return true;
}

/* The cap's headroom: connections MHD still accepts past the cap, only to
 * answer them 503. */
static long headroom_of(long cap)
{
    return cap / 8 + 16;
}

unsigned conn_guard_start(server *srv, long nofile)
{
    const queen_config *cfg = srv->cfg;
    long threads = cfg->http_threads > 0 ? cfg->http_threads : 1;
    /* Descriptors that are not client connections: the database pool, the
     * threads' wake-up pipes and epoll sets, the listener, logs, slack. */
    long avail = nofile - cfg->pg_pool - 3 * threads - 64;
    long cap = cfg->max_connections;
    if (cap + headroom_of(cap) > avail) {
        long fits = (avail - 16) * 8 / 9;
        if (fits < threads)
            fits = threads;
        log_warn("http: the open-file limit %ld fits %ld connections, not QUEEN_MAX_CONNECTIONS=%ld: the cap is %ld",
                 nofile, fits, cap, fits);
        cap = fits;
    }
    long limit = cap + headroom_of(cap);
    conn_guard *g = calloc(1, sizeof *g);
    if (g == NULL)
        return 0;
    g->srv = srv;
    g->cap = (int)cap;
    g->read_ms = cfg->request_read_timeout_ms;
    g->idle_ms = cfg->idle_timeout_ms;
    int shorter = g->read_ms < g->idle_ms ? g->read_ms : g->idle_ms;
    g->tick_ms = shorter / 10 < 10 ? 10 : shorter / 10 > 1000 ? 1000 : shorter / 10;
    g->nslots = (int)limit;
    g->slots = calloc((size_t)limit, sizeof *g->slots);
    if (g->slots == NULL || !render_timeout_reply(g)) {
        free(g->slots);
        free(g);
        log_error("http: out of memory sizing %ld connections", limit);
        return 0;
    }
    for (int i = 0; i < g->nslots; i++) {
        pthread_mutex_init(&g->slots[i].lock, NULL);
        g->slots[i].fd = -1;
        g->slots[i].next_free = i + 1 < g->nslots ? i + 1 : -1;
    }
    g->free_head = 0;
    pthread_mutex_init(&g->free_lock, NULL);
    pthread_mutex_init(&g->stop_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->stop_cond, &ca);
    pthread_condattr_destroy(&ca);
    srv->guard = g;
    if (pthread_create(&g->thread, NULL, watchdog, g) != 0) {
        log_error("http: cannot start the connection watchdog");
        conn_guard_free(srv);
        return 0;
    }
    g->running = true;
    log_info("http: at most %ld connections (then 503), request read deadline %d ms, idle timeout %d ms", cap,
             g->read_ms, g->idle_ms);
    return (unsigned)limit;
}

void conn_guard_stop(server *srv)
{
    conn_guard *g = srv->guard;
    if (g == NULL || !g->running)
        return;
    pthread_mutex_lock(&g->stop_lock);
    g->stop = true;
    pthread_cond_signal(&g->stop_cond);
    pthread_mutex_unlock(&g->stop_lock);
    pthread_join(g->thread, NULL);
    g->running = false;
}

void conn_guard_free(server *srv)
{
    conn_guard *g = srv->guard;
    if (g == NULL)
        return;
    conn_guard_stop(srv);
    for (int i = 0; i < g->nslots; i++)
        pthread_mutex_destroy(&g->slots[i].lock);
    pthread_mutex_destroy(&g->free_lock);
    pthread_mutex_destroy(&g->stop_lock);
    pthread_cond_destroy(&g->stop_cond);
    free(g->timeout_reply);
    free(g->slots);
    free(g);
    srv->guard = NULL;
}

void conn_figures_get(const server *srv, conn_figures *out)
{
    memset(out, 0, sizeof *out);
    conn_guard *g = srv->guard;
    if (g == NULL)
        return;
    out->open = atomic_load(&g->open);
    out->cap = g->cap;
    out->refused = atomic_load(&g->refused);
    out->read_timeouts = atomic_load(&g->read_timeouts);
    out->idle_closed = atomic_load(&g->idle_closed);
}
