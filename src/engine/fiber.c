/* fiber: see fiber.h. ucontext switches, with the sanitizer told about every
 * stack change so AddressSanitizer follows the switches instead of
 * reporting the fiber's stack as a stack overflow or a bad access. */
#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif
#ifdef FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* 256 KiB: a handler's deepest path (a body parsed by jansson at the
 * largest accepted nesting, QUEEN_MAX_BODY_DEPTH, plus libpq and printf)
 * stays under 64 KiB; the rest is margin. Only touched pages cost memory.
 * A guard page below turns an overflow into a crash, never a silent
 * overwrite of the neighbouring stack. */
#define FIBER_STACK_BYTES (256u << 10)
/* Stacks kept per thread for reuse: a burst beyond it maps new ones. */
#define FIBER_CACHE_MAX 64

struct fiber {
    ucontext_t ctx;
    ucontext_t *caller;
    fiber_fn fn;
    void *arg;
    bool done;
    void *map;   /* guard page + stack */
    size_t map_len;
    fiber *next_free;
#ifdef FIBER_ASAN
    const void *caller_stack;
    size_t caller_stack_size;
#endif
};

static _Thread_local fiber *current;
static _Thread_local ucontext_t thread_ctx;
static _Thread_local fiber *cache;
static _Thread_local int ncached;

fiber *fiber_current(void)
{
    return current;
}

static void trampoline(void)
{
    fiber *f = current;
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->caller_stack, &f->caller_stack_size);
#endif
    f->fn(f->arg);
    f->done = true;
#ifdef FIBER_ASAN
    /* NULL: this stack is finished, its fake frames may go. */
    __sanitizer_start_switch_fiber(NULL, f->caller_stack, f->caller_stack_size);
#endif
    current = NULL;
    setcontext(f->caller);
}

fiber *fiber_new(fiber_fn fn, void *arg)
{
    fiber *f = cache;
    if (f != NULL) {
        cache = f->next_free;
        ncached--;
    } else {
        f = calloc(1, sizeof *f);
        if (f == NULL)
            return NULL;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        f->map_len = FIBER_STACK_BYTES + page;
        f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (f->map == MAP_FAILED) {
            free(f);
            return NULL;
        }
        mprotect(f->map, page, PROT_NONE);
        /* Once per stack: getcontext is a system call (it saves the signal
         * mask); a reused fiber only needs makecontext's fresh entry. */
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = (char *)f->map + page;
        f->ctx.uc_stack.ss_size = f->map_len - page;
        f->ctx.uc_link = NULL;
    }
    f->fn = fn;
    f->arg = arg;
    f->done = false;
    f->next_free = NULL;
    makecontext(&f->ctx, trampoline, 0);
    return f;
}

static void unmap(fiber *f)
{
    munmap(f->map, f->map_len);
    free(f);
}

void fiber_free(fiber *f)
{
    if (f == NULL)
        return;
    /* Only a finished fiber's stack can be reused: an unfinished one still
     * holds frames whose owners expect to run again. */
    if (f->done && ncached < FIBER_CACHE_MAX) {
        f->next_free = cache;
        cache = f;
        ncached++;
        return;
    }
    unmap(f);
}

void fiber_release_cache(void)
{
    while (cache != NULL) {
        fiber *f = cache;
        cache = f->next_free;
        unmap(f);
    }
    ncached = 0;
}

bool fiber_resume(fiber *f)
{
    /* Always from the thread's own stack: fibers never resume each other. */
    f->caller = &thread_ctx;
    current = f;
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->ctx.uc_stack.ss_sp, f->ctx.uc_stack.ss_size);
#endif
    swapcontext(&thread_ctx, &f->ctx);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    current = NULL;
    return f->done;
}

void fiber_yield(void)
{
    fiber *f = current;
    if (f == NULL)
        return;
    current = NULL;
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->caller_stack, f->caller_stack_size);
#endif
    swapcontext(&f->ctx, f->caller);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &f->caller_stack, &f->caller_stack_size);
#endif
    current = f;
}
