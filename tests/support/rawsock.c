/* rawsock: see rawsock.h. */
#include "rawsock.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "testutil.h"

int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect to 127.0.0.1:%d failed", port);
    return fd;
}

bool raw_send(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

char *raw_read_until_closed(int fd, int timeout_ms, size_t max_len, bool *closed)
{
    char *buf = malloc(max_len + 1);
    if (buf == NULL)
        fail_msg("out of memory");
    size_t len = 0;
    long long deadline = now_ms() + timeout_ms;
    *closed = false;
    while (len < max_len) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(fd, buf + len, max_len - len, 0);
        if (n <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}
