/* loop: see loop.h. */
#include "loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "queen_runtime.h"

/* Listen backlog of each loop's socket (the kernel caps it at somaxconn):
 * bursts of connects wait here, not in SYN retries. */
#define LOOP_LISTEN_BACKLOG 4096
/* Readiness events taken per epoll_wait. */
#define LOOP_EVENTS 256

typedef struct fiber_call fiber_call;

struct edge_loop {
    server *srv;
    int index;
    pthread_t thread;
    bool started;
    int epfd;
    int wakefd;
    loop_watch wake_watch;
    conn_set conns;
    bool conns_open;
    int listen_fd;              /* until conns takes it */
    http_poll *resumed;         /* long polls woken for this loop (http.c), under srv->poll_lock */
    pipeline_set *db;
    sql_executor exec;
    fiber_call *ready_head, *ready_tail; /* calls answered: their fibers run next */
    bool quiesced;
    atomic_bool finish;
};

/* One statement of a request's fiber: lives on the fiber's stack while it
 * waits, so nothing is allocated per statement. */
struct fiber_call {
    pipeline_call call; /* first: the pipeline hands this pointer back */
    edge_loop *loop;
    fiber *f;
    fiber_call *next_ready;
};

/* ---- the executor: engine calls made on a request's fiber ----------------- */

static void call_done(pipeline_call *call)
{
    fiber_call *fc = (fiber_call *)call;
    edge_loop *L = fc->loop;
    fc->next_ready = NULL;
    if (L->ready_tail != NULL)
        L->ready_tail->next_ready = fc;
    else
        L->ready_head = fc;
    L->ready_tail = fc;
}

static bool loop_exec(void *ctx, const char *name, const char *sql, int nparams, const char *const *params,
                      const sql_coalesce *coalesce, PGresult **res, bool *lost, queen_error *err)
{
    edge_loop *L = ctx;
    fiber *f = fiber_current();
    if (f == NULL)
        return false; /* on the loop's own stack: the pool serves it */
    fiber_call fc = {
        .call = {.name = name,
                 .sql = sql,
                 .nparams = nparams,
                 .params = params,
                 .coalesce = coalesce,
                 .done = call_done},
        .loop = L,
        .f = f,
    };
    pipeline_submit(L->db, &fc.call);
    fiber_yield(); /* resumed by run_ready once call_done queued it */
    *res = fc.call.res;
    *lost = fc.call.lost;
    if (*res == NULL && err != NULL)
        *err = fc.call.err;
    return true;
}

/* Runs the fibers whose statements were answered, in the order answered. A
 * fiber that finishes has answered its request (http.c's task end). */
static void run_ready(edge_loop *L)
{
    while (L->ready_head != NULL) {
        fiber_call *fc = L->ready_head;
        L->ready_head = fc->next_ready;
        if (L->ready_head == NULL)
            L->ready_tail = NULL;
        fiber *f = fc->f; /* fc lives on f's stack: read before resuming */
        if (fiber_resume(f))
            fiber_free(f);
    }
}

/* ---- the thread ------------------------------------------------------------ */

static void wake_ready(loop_watch *w, uint32_t events)
{
    (void)events;
    edge_loop *L = (edge_loop *)((char *)w - offsetof(edge_loop, wake_watch));
    uint64_t n;
    while (read(L->wakefd, &n, sizeof n) == (ssize_t)sizeof n)
        ;
}

static _Thread_local edge_loop *this_loop;

edge_loop *loop_current(void)
{
    return this_loop;
}

http_poll **loop_resumed(edge_loop *L)
{
    return &L->resumed;
}

server *loop_server(edge_loop *L)
{
    return L->srv;
}

void loop_wake(edge_loop *L)
{
    uint64_t one = 1;
    ssize_t r = write(L->wakefd, &one, sizeof one);
    (void)r; /* a full counter already wakes it */
}

static int wait_timeout_ms(edge_loop *L, long long next_db, long long now)
{
    if (L->ready_head != NULL)
        return 0;
    long long t = conn_set_wait_ms(&L->conns, now);
    if (next_db >= 0) {
        long long d = next_db > now ? next_db - now : 0;
        if (d < t)
            t = d;
    }
    return (int)t;
}

static void *loop_main(void *arg)
{
    edge_loop *L = arg;
    server *srv = L->srv;
    /* From here every queen_* call a request's fiber makes on this thread
     * yields to this loop while its statement is in flight (loop_exec;
     * queen_runtime.h, "Yields"). */
    sql_executor_set(&L->exec);
    this_loop = L;
    struct epoll_event evs[LOOP_EVENTS];
    long long next_db = -1;
    while (!atomic_load(&L->finish)) {
        if (!L->quiesced && atomic_load(&srv->stopping)) {
            conn_set_quiesce(&L->conns);
            L->quiesced = true;
        }
        int n = epoll_wait(L->epfd, evs, LOOP_EVENTS, wait_timeout_ms(L, next_db, http_now_ms()));
        for (int i = 0; i < n; i++) {
            loop_watch *w = evs[i].data.ptr;
            w->on_ready(w, evs[i].events);
        }
        /* Answered statements first: their fibers finish requests, whose
         * answers are then written in this turn. */
        run_ready(L);
        conn_set_run(&L->conns, http_now_ms());
        http_run_resumed(L);
        /* Last, so calls queued during this turn count in the next wait. */
        next_db = pipeline_tick(L->db, http_now_ms());
    }
    /* What still waits for the database fails (503, or "lost" in flight),
     * so every fiber ends before its connection is closed. */
    pipeline_close(L->db);
    L->db = NULL;
    run_ready(L);
    http_run_resumed(L);
    sql_executor_set(NULL);
    conn_set_close(&L->conns); /* and its listening socket, if still open */
    L->conns_open = false;
    L->listen_fd = -1;
    fiber_release_cache();
    return NULL;
}

/* ---- start and stop ---------------------------------------------------------- */

static int listen_socket(const struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    /* SO_REUSEPORT: each loop listens on its own socket of the same port
     * and the kernel spreads new connections among them. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, LOOP_LISTEN_BACKLOG) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void loop_free(edge_loop *L)
{
    if (L->conns_open) {
        conn_set_close(&L->conns); /* closes the listening socket too */
        L->conns_open = false;
        L->listen_fd = -1;
    }
    pipeline_close(L->db);
    if (L->listen_fd >= 0)
        close(L->listen_fd);
    if (L->wakefd >= 0)
        close(L->wakefd);
    if (L->epfd >= 0)
        close(L->epfd);
    L->db = NULL;
    L->listen_fd = L->wakefd = L->epfd = -1;
}

static int loop_open(server *srv, edge_loop *L, int index, const struct sockaddr_in *addr, int db_conns)
{
    const queen_config *cfg = srv->cfg;
    L->srv = srv;
    L->index = index;
    L->listen_fd = L->wakefd = -1;
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    L->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (L->epfd < 0 || L->wakefd < 0) {
        log_error("http: loop %d: %s", index, strerror(errno));
        return -1;
    }
    L->listen_fd = listen_socket(addr);
    if (L->listen_fd < 0) {
        log_error("http: cannot listen on %s:%d: %s", cfg->bind, ntohs(addr->sin_port), strerror(errno));
        return -1;
    }
    char err[512];
    char settings[256];
    queen_config_session_settings(cfg, settings, sizeof settings);
    L->db = pipeline_open(cfg->pg_url, settings, db_conns, cfg->pg_pipeline_depth, cfg->stmt_timeout_ms,
                          cfg->pg_acquire_timeout_ms, cfg->pg_write_group_wait_ms, cfg->request_deadline_ms, L->epfd,
                          &srv->db_figures, err, sizeof err);
    if (L->db == NULL) {
        log_error("http: loop %d: database: %s", index, err);
        return -1;
    }
    L->exec = (sql_executor){.exec = loop_exec, .ctx = L};
    L->wake_watch.on_ready = wake_ready;
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &L->wake_watch};
    if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, L->wakefd, &wev) != 0 ||
        conn_set_open(&L->conns, srv, L, L->epfd, L->listen_fd, srv->tls) != 0) {
        log_error("http: loop %d: cannot watch its sockets: %s", index, strerror(errno));
        return -1;
    }
    L->conns_open = true;
    return 0;
}

int loops_start(server *srv)
{
    const queen_config *cfg = srv->cfg;
    /* A loop owns at least one database connection: no more loops than
     * QUEEN_PG_POOL, so the pool's size stays what the operator set. */
    int n = cfg->http_threads > 0 ? cfg->http_threads : 1;
    if (n > cfg->pg_pool && cfg->pg_pool > 0)
        n = cfg->pg_pool;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1) {
        log_error("QUEEN_BIND: '%s' is not an IPv4 address", cfg->bind);
        return -1;
    }
    srv->loops = calloc((size_t)n, sizeof *srv->loops);
    if (srv->loops == NULL)
        return -1;
    srv->nloops = n;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        /* The pool's connections shared out, the first loops taking the
         * remainder. */
        int conns = cfg->pg_pool / n + (i < cfg->pg_pool % n ? 1 : 0);
        rc = loop_open(srv, &srv->loops[i], i, &addr, conns);
        if (rc == 0 && i == 0 && addr.sin_port == 0) {
            /* Port 0: the others join the port the first was given. */
            struct sockaddr_in got;
            socklen_t len = sizeof got;
            if (getsockname(srv->loops[0].listen_fd, (struct sockaddr *)&got, &len) == 0)
                addr.sin_port = got.sin_port;
        }
    }
    for (int i = 0; i < n && rc == 0; i++) {
        if (pthread_create(&srv->loops[i].thread, NULL, loop_main, &srv->loops[i]) != 0) {
            log_error("http: cannot start event loop %d", i);
            rc = -1;
            break;
        }
        srv->loops[i].started = true;
    }
    if (rc != 0) {
        for (int i = 0; i < n; i++)
            atomic_store(&srv->loops[i].finish, true);
        for (int i = 0; i < n; i++) {
            if (srv->loops[i].started) {
                loop_wake(&srv->loops[i]);
                pthread_join(srv->loops[i].thread, NULL);
            }
            loop_free(&srv->loops[i]);
        }
        free(srv->loops);
        srv->loops = NULL;
        srv->nloops = 0;
        return -1;
    }
    return 0;
}

void loops_quiesce(server *srv)
{
    for (int i = 0; i < srv->nloops; i++)
        loop_wake(&srv->loops[i]);
}

void loops_finish(server *srv)
{
    for (int i = 0; i < srv->nloops; i++) {
        atomic_store(&srv->loops[i].finish, true);
        loop_wake(&srv->loops[i]);
    }
    for (int i = 0; i < srv->nloops; i++) {
        pthread_join(srv->loops[i].thread, NULL);
        loop_free(&srv->loops[i]);
    }
    free(srv->loops);
    srv->loops = NULL;
    srv->nloops = 0;
}
