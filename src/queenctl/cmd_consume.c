/* queenctl consume: each message to a command's stdin; exit 0 acks it
 * (with the ack committed in one transaction), anything else fails it so
 * the broker redelivers it. SIGINT/SIGTERM stop cleanly: the commands
 * running finish and are settled. */
#include "ctl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char CONSUME_USAGE[] =
    "usage: queenctl consume QUEUE [--group G] [--partition P] [--concurrency N] [--batch N]\n"
    "                              [--lease SECONDS] [--count N] -- CMD [ARG]...\n"
    "  Runs CMD once per message with the payload (JSON text and a newline) on its stdin and\n"
    "  QUEEN_QUEUE, QUEEN_PARTITION, QUEEN_TRANSACTION_ID, QUEEN_DELIVERY_ATTEMPT in its\n"
    "  environment. Exit 0 acks the message; any other exit fails it (the broker redelivers it).\n"
    "  The lease is renewed while CMD runs. --count N stops after N messages were acked;\n"
    "  otherwise SIGINT or SIGTERM stops, after the commands running have finished.\n";

static volatile int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
}

typedef struct consume_ctx {
    ctl *x;
    char **cmd;
    long count, handled;
    pthread_mutex_t lock; /* output and the count */
} consume_ctx;

/* Runs the command with the payload on stdin; its exit status. */
static int run_command(char **cmd, const queen_client_message *m)
{
    int in[2];
    if (pipe(in) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        close(in[0]);
        close(in[1]);
        char attempt[16];
        snprintf(attempt, sizeof attempt, "%d", m->delivery_attempt);
        setenv("QUEEN_QUEUE", m->queue != NULL ? m->queue : "", 1);
        setenv("QUEEN_PARTITION", m->partition != NULL ? m->partition : "", 1);
        setenv("QUEEN_TRANSACTION_ID", m->transaction_id, 1);
        setenv("QUEEN_DELIVERY_ATTEMPT", attempt, 1);
        execvp(cmd[0], cmd);
        fprintf(stderr, "queenctl: consume: %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    signal(SIGPIPE, SIG_IGN); /* a command that does not read its stdin is fine */
    size_t len = strlen(m->payload_json);
    const char *p = m->payload_json;
    while (len > 0) {
        ssize_t w = write(in[1], p, len);
        if (w <= 0)
            break;
        p += w;
        len -= (size_t)w;
    }
    if (write(in[1], "\n", 1) < 0) {
        /* the command closed its stdin early: its exit status decides */
    }
    close(in[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int handler(void *arg, const queen_client_message *m, queen_client_tx *tx)
{
    (void)tx;
    consume_ctx *c = arg;
    int code = run_command(c->cmd, m);
    pthread_mutex_lock(&c->lock);
    if (c->x->table)
        printf("%-36s  %-9s  exit %d\n", m->transaction_id, code == 0 ? "acked" : "failed", code);
    else
        printf("{\"transactionId\":\"%s\",\"status\":\"%s\",\"exit\":%d}\n", m->transaction_id,
               code == 0 ? "acked" : "failed", code);
    fflush(stdout);
    if (code == 0 && c->count > 0 && ++c->handled >= c->count)
        __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->lock);
    return code == 0 ? QUEEN_CLIENT_HANDLED : QUEEN_CLIENT_FAILED;
}

int cmd_consume(ctl *x, int argc, char **argv)
{
    const char *group = NULL, *partition = NULL, *concurrency = NULL, *batch = NULL, *lease = NULL, *count = NULL;
    const ctl_opt spec[] = {{"group", &group, NULL},     {"partition", &partition, NULL},
                            {"concurrency", &concurrency, NULL}, {"batch", &batch, NULL},
                            {"lease", &lease, NULL},     {"count", &count, NULL},
                            {NULL, NULL, NULL}};
    const char *pos[1];
    int npos, nrest;
    char **rest;
    int p = ctl_parse(argc, argv, spec, pos, 1, &npos, &rest, &nrest, CONSUME_USAGE);
    if (p != 0)
        return p > 0 ? CTL_OK : CTL_USAGE;
    if (npos != 1)
        return ctl_usage_error(CONSUME_USAGE, "consume needs QUEUE");
    if (rest == NULL || nrest == 0)
        return ctl_usage_error(CONSUME_USAGE, "consume needs -- CMD");
    long nconc = 1, nbatch = 1, nlease = 0, ncount = 0;
    if ((concurrency != NULL && !ctl_long("--concurrency", concurrency, &nconc)) ||
        (batch != NULL && !ctl_long("--batch", batch, &nbatch)) || (lease != NULL && !ctl_long("--lease", lease, &nlease)) ||
        (count != NULL && !ctl_long("--count", count, &ncount)))
        return CTL_USAGE;
    char **cmd = calloc((size_t)nrest + 1, sizeof *cmd);
    if (cmd == NULL)
        return CTL_UNAVAILABLE;
    memcpy(cmd, rest, (size_t)nrest * sizeof *cmd);
    consume_ctx c = {.x = x, .cmd = cmd, .count = ncount};
    pthread_mutex_init(&c.lock, NULL);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    queen_client_consume_options o = {.tenant = x->tenant, .queue = pos[0], .partition = partition,
                                      .consumer_group = group, .concurrency = (int)nconc, .batch = (int)nbatch,
                                      .lease_seconds = (int)nlease, .handler = handler, .ctx = &c,
                                      .stop = &stop_flag};
    queen_client_error err;
    int rc = queen_client_consume(x->client, &o, &err) == 0 ? CTL_OK : ctl_fail("consume", &err);
    pthread_mutex_destroy(&c.lock);
    free(cmd);
    return rc;
}
