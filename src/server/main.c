/* main: the queen command. Reads configuration, boots the schema, serves.
 *
 *   queen serve            schema boot, then HTTP until SIGTERM/SIGINT
 *   queen dev              private PostgreSQL under .queen/, then serve
 *   queen schema apply     apply the schema and exit
 *   queen version          print the version
 *   queen settings         print the settings table (markdown, for docs/settings.md)
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "http.h"
#include "queen.h"
#include "queen_runtime.h"

/* The engine pool's size under `serve`: the sweeper and the quota refresh
 * each hold one connection at a time. */
#define ENGINE_BACKGROUND_CONNECTIONS 2

/* scripts/pg.sh, embedded by the build so `queen dev` needs no source tree. */
extern const char queen_pg_script[];

static void usage(FILE *out)
{
    fprintf(out, "usage: queen <serve|dev|schema apply|version|settings> [--flag value ...]\n\n"
                 "  serve          apply the schema, then serve HTTP until SIGTERM/SIGINT\n"
                 "  dev            run a private PostgreSQL under QUEEN_DEV_DIR, then serve on it\n"
                 "  schema apply   apply the schema to QUEEN_PG_URL and exit\n"
                 "  version        print the version\n"
                 "  settings       print the settings as a markdown table\n\n");
    queen_config_print_help(out);
}

static int load_config(queen_config *cfg, int argc, char **argv)
{
    char err[512];
    queen_config_defaults(cfg);
    if (queen_config_from_env(cfg, err, sizeof err) != 0 || queen_config_from_args(cfg, argc, argv, err, sizeof err) < 0) {
        fprintf(stderr, "queen: configuration: %s\n", err);
        return -1;
    }
    /* Once, here: the engine and the HTTP edge then size themselves from the
     * same numbers (the pool and the threads that share it), and the
     * cross-setting rules see the values that will be used. */
    queen_config_resolve(cfg);
    if (queen_config_validate(cfg, err, sizeof err) != 0) {
        fprintf(stderr, "queen: configuration: %s\n", err);
        return -1;
    }
    queen_log_set_level(cfg->log_level);
    return 0;
}

static int run_pg_script(const char *action, const char *dir, int port)
{
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("bash", "bash", "-c", queen_pg_script, "pg.sh", action, dir, portbuf, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The database's exact version, for the operator: /health no longer
 * tells it to whoever asks. */
static void log_database_version(queen *engine)
{
    char version[128];
    queen_error err;
    if (queen_health(engine, version, sizeof version, &err) == 0)
        log_info("database: %s", version);
}

/* Blocks from this size up are mapped for themselves and unmapped when
 * freed. glibc's default threshold rises to the largest block freed (up to
 * 32 MiB), after which multi-MB answers, their database results and their
 * copies are carved from the loops' arenas and, freed between live small
 * blocks, stay resident: 300 unread 4 MB listings left 17 MiB so held
 * (bench/RESULTS.md, edge section, the 2026-12-04 follow-up). Fixing the
 * threshold costs one mmap and munmap per such block, nothing beside
 * building it. */
#define SERVE_MMAP_THRESHOLD (1 << 20)

static int serve(queen_config *cfg)
{
    char err[1024];
    mallopt(M_MMAP_THRESHOLD, SERVE_MMAP_THRESHOLD);
    if (queen_schema_apply(cfg, err, sizeof err) != 0) {
        log_error("schema boot failed: %s", err);
        return 1;
    }
    /* Block the stop signals in every thread; main waits for them below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Requests use the event loops' own connections (QUEEN_PG_POOL of
     * them); the engine's blocking pool serves only background work here
     * (the sweeper, the quota refresh) and calls made off a loop. */
    queen_config engine_cfg = *cfg;
    engine_cfg.pg_pool = ENGINE_BACKGROUND_CONNECTIONS;
    queen_error qerr = {0};
    queen *engine = queen_open(&engine_cfg, &qerr);
    if (engine == NULL) {
        log_error("engine: %s", qerr.detail);
        return 1;
    }
    log_database_version(engine);
    server srv = {.engine = engine, .cfg = cfg};
    if (auth_start(&srv) != 0 || http_start(&srv) != 0) {
        auth_stop(&srv);
        queen_close(engine);
        return 1;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    log_info("received %s: finishing in-flight requests", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    http_stop(&srv);
    auth_stop(&srv);
    queen_close(engine);
    log_info("stopped");
    return 0;
}

static int dev(queen_config *cfg)
{
    char *dir = realpath(cfg->dev_dir, NULL);
    if (dir == NULL) {
        if (mkdir(cfg->dev_dir, 0755) != 0 || (dir = realpath(cfg->dev_dir, NULL)) == NULL) {
            log_error("QUEEN_DEV_DIR: cannot create '%s'", cfg->dev_dir);
            return 1;
        }
    }
    log_info("dev: private PostgreSQL in %s on 127.0.0.1:%d", dir, cfg->dev_pg_port);
    if (run_pg_script("up", dir, cfg->dev_pg_port) != 0) {
        log_error("dev: could not start the private PostgreSQL (see %s/server.log)", dir);
        free(dir);
        return 1;
    }
    if (cfg->pg_url[0] == '\0') {
        char url[256];
        snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%d/queen", cfg->dev_pg_port);
        char err[256];
        queen_config_set(cfg, "QUEEN_PG_URL", url, err, sizeof err);
    }
    int rc = serve(cfg);
    run_pg_script("down", dir, cfg->dev_pg_port);
    free(dir);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0) {
        printf("queen %s\n", QUEEN_VERSION);
        return 0;
    }
    if (strcmp(cmd, "settings") == 0) {
        queen_config_print_markdown(stdout);
        return 0;
    }
    int skip = 2;
    if (strcmp(cmd, "schema") == 0) {
        if (argc < 3 || strcmp(argv[2], "apply") != 0) {
            fprintf(stderr, "usage: queen schema apply [--flag value ...]\n");
            return 2;
        }
        skip = 3;
    } else if (strcmp(cmd, "serve") != 0 && strcmp(cmd, "dev") != 0) {
        fprintf(stderr, "queen: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return 2;
    }
    for (int i = skip; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
    }

    queen_config cfg;
    if (load_config(&cfg, argc - skip, argv + skip) != 0) {
        queen_config_clear(&cfg);
        return 2;
    }
    int rc;
    if (strcmp(cmd, "schema") == 0) {
        char err[1024];
        rc = queen_schema_apply(&cfg, err, sizeof err) == 0 ? 0 : 1;
        if (rc != 0)
            log_error("schema apply failed: %s", err);
    } else if (strcmp(cmd, "dev") == 0) {
        rc = dev(&cfg);
    } else {
        rc = serve(&cfg);
    }
    queen_config_clear(&cfg);
    return rc;
}
