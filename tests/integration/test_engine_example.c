/* examples/exactly_once end to end: the built example (next to $QUEEN_BIN,
 * in examples/) consumes seeded messages and commits marker + push + ack;
 * then the input queue is deleted (its dedup history with it) and the same
 * messages are pushed again, as a producer retrying after its dedup window
 * would: the markers make the second run skip every one, and the output
 * queue still holds each effect exactly once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "pgtest.h"
#include "queen.h"

/* Runs the example with args; returns its stdout (malloc'd). */
static char *run_example(const char *in, const char *out, const char *seed)
{
    const char *bin = getenv("QUEEN_BIN");
    if (bin == NULL)
        fail_msg("QUEEN_BIN is not set: run the suite through scripts/test.sh");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s", bin);
    snprintf(path, sizeof path, "%s/examples/exactly_once", dirname(dir));
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        setenv("QUEEN_PG_URL", pgtest_url(), 1);
        setenv("QUEEN_LOG_LEVEL", "warn", 1);
        execl(path, "exactly_once", in, out, seed, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char *buf = calloc(1, 4096);
    size_t len = 0;
    ssize_t n;
    while (len < 4095 && (n = read(pipefd[0], buf + len, 4095 - len)) > 0)
        len += (size_t)n;
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s exited with %d: %s", path, WIFEXITED(status) ? WEXITSTATUS(status) : -1, buf);
    return buf;
}

static void exactly_once_across_redelivery(void **state)
{
    (void)state;
    char *in = pgtest_unique("eo-in-"), *out = pgtest_unique("eo-out-");
    char *text = run_example(in, out, "5");
    if (strstr(text, "processed 5, skipped 0") == NULL)
        fail_msg("first run: %s", text);
    free(text);

    queen *q = engine_open(2);
    queen_error e = {0};
    char *res;
    assert_int_equal(queen_queue_delete(q, NULL, in, &res, &e), 0);
    free(res);

    text = run_example(in, out, "5");
    if (strstr(text, "processed 0, skipped 5") == NULL)
        fail_msg("second run: %s", text);
    free(text);

    /* Five effects, each once, squares of 1..5. */
    assert_int_equal(queen_pop(q, NULL, &(queen_pop_options){.queue = out, .batch = 100}, &res, &e), 0);
    json_t *body = json_loads(res, 0, NULL);
    free(res);
    json_t *msgs = json_object_get(body, "messages");
    assert_int_equal(json_array_size(msgs), 5);
    long sum = 0;
    for (size_t i = 0; i < 5; i++)
        sum += (long)json_integer_value(json_object_get(json_object_get(json_array_get(msgs, i), "data"), "square"));
    assert_int_equal(sum, 1 + 4 + 9 + 16 + 25);
    json_decref(body);
    queen_close(q);
    free(in);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exactly_once_across_redelivery),
    };
    return cmocka_run_group_tests_name("engine_example", tests, NULL, NULL);
}
