/* libFuzzer: the HTTP/1.1 parser adapter (src/server/h1.c) driven the way
 * a connection drives it (conn.c's read_request: heads accumulate in one
 * buffer, bodies are fed as they come, what follows a message is the next
 * request's), on arbitrary bytes: pipelined requests, garbage, every
 * refusal. The same bytes cut into pieces (at every byte for short inputs,
 * at a spread of points otherwise) must give the same account, request by
 * request, as the bytes in one piece: a request split at any byte is the
 * same request. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h1.h"

/* What the driver saw, as text: heads, body sizes and sums, ends, refusals. */
typedef struct account {
    char text[8192];
    size_t len;
} account;

static void note(account *a, const char *fmt_text, unsigned long long x, const char *s, size_t n)
{
    char line[128];
    int k = snprintf(line, sizeof line, fmt_text, x, (int)(n > 40 ? 40 : n), s ? s : "");
    if (k > 0 && a->len + (size_t)k < sizeof a->text) {
        memcpy(a->text + a->len, line, (size_t)k);
        a->len += (size_t)k;
    }
}

typedef struct body_sum {
    unsigned long long n, sum;
} body_sum;

/* Refuses a body past 64 KiB, as the request's cap would. */
static bool sink(void *ctx, const char *p, size_t n)
{
    body_sum *b = ctx;
    for (size_t i = 0; i < n; i++)
        b->sum = b->sum * 31 + (unsigned char)p[i];
    b->n += n;
    return b->n <= 65536;
}

/* Feeds data in pieces ending at cuts[0..ncuts) (ascending, the last
 * = size); false when the account overflowed or an invariant broke. */
static void drive(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, account *a)
{
    h1 *p = h1_new();
    if (p == NULL)
        abort();
    char *buf = malloc(size + 1);
    size_t len = 0, off = 0;
    bool in_body = false, stopped = false;
    body_sum b = {0, 0};
    size_t from = 0;
    for (size_t k = 0; k < ncuts && !stopped; k++) {
        memcpy(buf + len, data + from, cuts[k] - from);
        len += cuts[k] - from;
        from = cuts[k];
        for (;;) {
            if (!in_body) {
                h1_error err;
                long head = h1_head(p, buf + off, len - off, &err);
                if (head < 0) {
                    if (err.status < 400 || err.status > 505 || err.reason == NULL || err.detail == NULL)
                        abort();
                    note(a, "refused %llu %.*s\n", err.status, err.reason, strlen(err.reason));
                    stopped = true;
                    break;
                }
                if (head == 0)
                    break;
                const char *method = h1_method(p), *target = h1_target(p);
                if (method == NULL || target == NULL || strlen(target) == 0)
                    abort();
                note(a, "head %llu %.*s\n", (unsigned long long)h1_content_length(p) + 1, target, strlen(target));
                off += (size_t)head;
                in_body = h1_has_body(p);
                b = (body_sum){0, 0};
                if (!in_body) {
                    note(a, "end %llu%.*s\n", 0, "", 0);
                    h1_reset(p);
                    continue;
                }
            }
            if (off >= len)
                break;
            h1_body_sink s = {sink, &b};
            bool done = false;
            h1_error err;
            long took = h1_body(p, buf + off, len - off, &s, &done, &err);
            if (took < 0) {
                note(a, "body refused %llu %.*s\n", err.status, err.reason ? err.reason : "", err.reason ? strlen(err.reason) : 0);
                stopped = true;
                break;
            }
            off += (size_t)took;
            if (!done)
                break;
            note(a, "end %llu%.*s\n", b.n * 1000003ULL + b.sum, "", 0);
            in_body = false;
            h1_reset(p);
        }
    }
    h1_free(p);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 70000)
        return 0;
    account whole = {.len = 0};
    size_t one = size;
    drive(data, size, &one, 1, &whole);
    /* Two pieces at every byte (a spread of points past 512 bytes), and one
     * byte at a time for short inputs. */
    size_t step = size <= 512 ? 1 : size / 97 + 1;
    for (size_t cut = 1; cut < size; cut += step) {
        account split = {.len = 0};
        size_t cuts[2] = {cut, size};
        drive(data, size, cuts, 2, &split);
        if (split.len != whole.len || memcmp(split.text, whole.text, whole.len) != 0) {
            fprintf(stderr, "cut at %zu:\n%.*s\nwhole:\n%.*s\n", cut, (int)split.len, split.text, (int)whole.len,
                    whole.text);
            abort();
        }
    }
    if (size <= 256) {
        size_t *cuts = malloc(size * sizeof *cuts);
        for (size_t i = 0; i < size; i++)
            cuts[i] = i + 1;
        account bytes = {.len = 0};
        drive(data, size, cuts, size, &bytes);
        if (bytes.len != whole.len || memcmp(bytes.text, whole.text, whole.len) != 0) {
            fprintf(stderr, "byte at a time:\n%.*s\nwhole:\n%.*s\n", (int)bytes.len, bytes.text, (int)whole.len,
                    whole.text);
            abort();
        }
        free(cuts);
    }
    return 0;
}
