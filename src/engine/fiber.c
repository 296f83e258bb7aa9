/* fiber: see fiber.h.
 *
 * On x86-64 a switch saves the callee-saved registers and the floating-point
 * control words on the stack it leaves and loads the other stack's:
 * nothing else needs to survive a call under the System V ABI. ucontext's
 * swapcontext would also save and restore the signal mask, a system call
 * on every switch (four per request: start, wait, resume, end); the edge's
 * threads never change their mask, so it is not carried. Elsewhere, or with
 * QUEEN_FIBER_UCONTEXT defined, ucontext does the switching.
 *
 * Either way the sanitizer is told about every stack change, so
 * AddressSanitizer follows the switches instead of reporting the fiber's
 * stack as an overflow or a bad access. */
#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(QUEEN_FIBER_UCONTEXT)
#define FIBER_OWN_SWITCH 1
#else
#include <ucontext.h>
#endif

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
#ifdef FIBER_OWN_SWITCH
    void *sp; /* its saved stack pointer while it is not running */
#else
    ucontext_t ctx;
#endif
    fiber_fn fn;
    void *arg;
    bool done;
    long long deadline_ms; /* fiber_deadline_ms */
    void *map; /* guard page + stack */
    size_t map_len;
    fiber *next_free;
#ifdef FIBER_ASAN
    const void *caller_stack;
    size_t caller_stack_size;
#endif
};

static _Thread_local fiber *current;
static _Thread_local fiber *cache;
static _Thread_local int ncached;

#ifdef FIBER_OWN_SWITCH
static _Thread_local void *thread_sp; /* the thread's own stack while a fiber runs */

/* fiber_switch(&save, load): pushes rbp, rbx, r12-r15 and the MXCSR and
 * x87 control words, stores rsp in *save, loads rsp from load and pops the
 * same from there; its ret goes wherever that stack was left (or, for a
 * new fiber, to fiber_entry, see prepare_stack). */
void queen_fiber_switch(void **save, void *load);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl queen_fiber_switch\n"
        ".hidden queen_fiber_switch\n"
        ".type queen_fiber_switch, @function\n"
        "queen_fiber_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $16, %rsp\n"
        "    stmxcsr 8(%rsp)\n"
        "    fnstcw (%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr 8(%rsp)\n"
        "    fldcw (%rsp)\n"
        "    addq $16, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size queen_fiber_switch, .-queen_fiber_switch\n");
#else
static _Thread_local ucontext_t thread_ctx;
#endif

fiber *fiber_current(void)
{
    return current;
}

static void *stack_low(const fiber *f)
{
    return (char *)f->map + sysconf(_SC_PAGESIZE);
}

static size_t stack_size(const fiber *f)
{
    return f->map_len - (size_t)sysconf(_SC_PAGESIZE);
}

/* Runs the fiber's function, then hands the thread back for good. */
static void fiber_entry(void)
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
#ifdef FIBER_OWN_SWITCH
    queen_fiber_switch(&f->sp, thread_sp);
#else
    setcontext(&thread_ctx);
#endif
    abort(); /* never resumed once done */
}

/* A fresh stack that the first switch to it enters at fiber_entry. */
static void prepare_stack(fiber *f)
{
#ifdef FIBER_OWN_SWITCH
    uintptr_t top = ((uintptr_t)stack_low(f) + stack_size(f)) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;                        /* fiber_entry's return address: none (ends backtraces) */
    *--sp = (uint64_t)(uintptr_t)fiber_entry; /* where the switch's ret goes */
    for (int i = 0; i < 6; i++)
        *--sp = 0;                    /* rbp, rbx, r12-r15 */
    sp -= 2;                          /* the control words: the ABI's defaults */
    ((uint16_t *)sp)[0] = 0x037f;     /* x87: all exceptions masked, double extended, round to nearest */
    ((uint32_t *)sp)[2] = 0x1f80;     /* MXCSR: all exceptions masked, round to nearest */
    f->sp = sp;
#else
    makecontext(&f->ctx, fiber_entry, 0);
#endif
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
#ifndef FIBER_OWN_SWITCH
        /* Once per stack: getcontext is a system call (it saves the signal
         * mask); a reused fiber only needs makecontext's fresh entry. */
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = stack_low(f);
        f->ctx.uc_stack.ss_size = stack_size(f);
        f->ctx.uc_link = NULL;
#endif
    }
    f->fn = fn;
    f->arg = arg;
    f->done = false;
    f->deadline_ms = 0;
    f->next_free = NULL;
    prepare_stack(f);
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
    current = f;
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, stack_low(f), stack_size(f));
#endif
#ifdef FIBER_OWN_SWITCH
    queen_fiber_switch(&thread_sp, f->sp);
#else
    swapcontext(&thread_ctx, &f->ctx);
#endif
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
#ifdef FIBER_OWN_SWITCH
    queen_fiber_switch(&f->sp, thread_sp);
#else
    swapcontext(&f->ctx, &thread_ctx);
#endif
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &f->caller_stack, &f->caller_stack_size);
#endif
    current = f;
}

long long fiber_deadline_ms(const fiber *f)
{
    return f->deadline_ms;
}

void fiber_set_deadline_ms(fiber *f, long long deadline_ms)
{
    f->deadline_ms = deadline_ms;
}
