/* broker: real broker processes and HTTP calls for tests (see broker.h). */
#include "broker.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pgtest.h"

int broker_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        fail_msg("free port: %s", strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

void broker_spawn(test_broker *b, const char *pg_url, const char *const *extra_env)
{
    const char *bin = getenv("QUEEN_BIN");
    if (bin == NULL)
        fail_msg("QUEEN_BIN is not set: run the suite through make test");
    memset(b, 0, sizeof *b);
    b->port = broker_free_port();
    snprintf(b->base, sizeof b->base, "http://127.0.0.1:%d", b->port);
    snprintf(b->log, sizeof b->log, "/tmp/queen-test-broker-%d-%d.log", (int)getpid(), b->port);
    pid_t pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        char port[16];
        snprintf(port, sizeof port, "%d", b->port);
        setenv("QUEEN_PG_URL", pg_url, 1);
        setenv("QUEEN_PORT", port, 1);
        setenv("QUEEN_BIND", "127.0.0.1", 1);
        for (size_t i = 0; extra_env && extra_env[i]; i++)
            putenv(strdup(extra_env[i]));
        int fd = open(b->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
        execl(bin, bin, "serve", (char *)NULL);
        _exit(127);
    }
    b->pid = pid;
}

size_t broker_collect_body(char *ptr, size_t size, size_t n, void *userdata)
{
    http_reply *r = userdata;
    size_t add = size * n;
    char *nb = realloc(r->body, r->len + add + 1);
    if (nb == NULL)
        return 0;
    memcpy(nb + r->len, ptr, add);
    r->body = nb;
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

static size_t collect_header(char *ptr, size_t size, size_t n, void *userdata)
{
    char **h = userdata;
    size_t add = size * n, old = *h ? strlen(*h) : 0;
    char *nb = realloc(*h, old + add + 1);
    if (nb == NULL)
        return 0;
    memcpy(nb + old, ptr, add);
    nb[old + add] = '\0';
    *h = nb;
    return add;
}

static int try_http(const test_broker *b, const char *method, const char *path, const char *body,
                    const char *const *headers, http_reply *out)
{
    memset(out, 0, sizeof *out);
    CURL *curl = curl_easy_init();
    char url[2048];
    snprintf(url, sizeof url, "%s%s", b->base, path);
    struct curl_slist *list = NULL;
    for (size_t i = 0; headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    if (body != NULL)
        list = curl_slist_append(list, "Content-Type: application/json");
    list = curl_slist_append(list, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (body != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, broker_collect_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &out->headers);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    if (out->body == NULL)
        out->body = strdup("");
    return (int)rc;
}

http_reply broker_http(const test_broker *b, const char *method, const char *path, const char *body,
                       const char *const *headers)
{
    http_reply r;
    int rc = try_http(b, method, path, body, headers, &r);
    if (rc != CURLE_OK) {
        http_reply_free(&r);
        fail_msg("%s %s: transport error: %s (broker log: %s)", method, path, curl_easy_strerror((CURLcode)rc),
                 b->log);
    }
    return r;
}

void http_reply_free(http_reply *r)
{
    free(r->body);
    free(r->headers);
    r->body = r->headers = NULL;
}

char *http_reply_header(const http_reply *r, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n + 1 && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            return strndup(v, (size_t)(line + len - v));
        }
        line = end ? end + 2 : line + len;
    }
    return NULL;
}

bool broker_wait_healthy(test_broker *b, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        int status;
        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            b->pid = 0;
            return false;
        }
        http_reply r;
        if (try_http(b, "GET", "/health", NULL, NULL, &r) == 0 && r.status == 200) {
            http_reply_free(&r);
            return true;
        }
        http_reply_free(&r);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

bool broker_start(test_broker *b, const char *const *extra_env)
{
    broker_spawn(b, pgtest_url(), extra_env);
    if (broker_wait_healthy(b, 30000))
        return true;
    fprintf(stderr, "broker did not become healthy (log: %s)\n", b->log);
    return false;
}

int broker_stop(test_broker *b)
{
    if (b->pid <= 0)
        return -1;
    kill(b->pid, SIGTERM);
    int status = 0;
    for (int waited = 0; waited < 30000; waited += 20) {
        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            b->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(b->pid, SIGKILL);
    waitpid(b->pid, &status, 0);
    b->pid = 0;
    return -1;
}
