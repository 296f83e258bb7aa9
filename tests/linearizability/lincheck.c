/* lincheck: see lincheck.h. */
#include "lincheck.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A version the model does not know yet: the row was written by an op whose
 * answer never came. The first answer that reports the row's version binds it. */
#define VER_UNKNOWN (-2LL)

typedef struct lin_state {
    bool exists;
    long long value;   /* 0 when absent */
    long long version; /* 0 when absent */
} lin_state;

static const lin_state ABSENT = {false, 0, 0};

static bool version_is(lin_state *s, long long observed)
{
    if (s->version == VER_UNKNOWN && observed > 0) {
        s->version = observed;
        return true;
    }
    return s->version == observed;
}

/* A write that did not apply reports the live row as it found it. */
static bool reports_current(lin_state *s, const lin_op *op)
{
    if (!s->exists)
        return op->res_version == 0;
    return op->res_value == s->value && version_is(s, op->res_version);
}

static bool within_limits(const lin_op *op, long long v)
{
    return (!op->has_min || v >= op->min) && (!op->has_max || v <= op->max);
}

/* Whether a conditional write (expect) applies on s. A known-answer op with
 * an unknown current version tells us: applied binds the version to expect. */
static bool expect_applies(lin_state *s, long long expect, const lin_op *op, bool pending)
{
    if (expect == LIN_NO_EXPECT)
        return op->kind != LIN_DELETE || s->exists;
    if (expect == 0)
        return !s->exists;
    if (!s->exists)
        return false;
    if (s->version == VER_UNKNOWN) {
        if (pending || op->ok) {
            s->version = expect;
            return true;
        }
        return false; /* reports_current binds it, and it must differ */
    }
    return s->version == expect;
}

/* One op applied to the model: false when its answer is impossible from in
 * (or, for an op without answer, when it could only have had no effect:
 * leaving it out of the linearization is the same and cheaper). */
static bool step(const lin_op *op, const lin_state *in, lin_state *out)
{
    lin_state s = *in;
    bool pending = op->complete_ns == LIN_PENDING;
    switch (op->kind) {
    case LIN_GET:
        if (pending || op->ok != s.exists)
            return false;
        if (s.exists && (op->res_value != s.value || !version_is(&s, op->res_version)))
            return false;
        break;
    case LIN_PUT:
    case LIN_PUT_IF_ABSENT:
    case LIN_DELETE: {
        long long expect = op->kind == LIN_PUT_IF_ABSENT ? 0 : op->expect;
        bool applies = expect_applies(&s, expect, op, pending);
        if (pending) {
            if (!applies)
                return false;
            s = op->kind == LIN_DELETE ? ABSENT : (lin_state){true, op->value, VER_UNKNOWN};
            break;
        }
        if (op->ok != applies)
            return false;
        if (!applies) {
            if (!reports_current(&s, op))
                return false;
            if (expect > 0 && s.exists && s.version == expect)
                return false;
            break;
        }
        if (op->kind == LIN_DELETE) {
            /* an applied delete reports the row it removed (0 for expect 0 on nothing) */
            if (!reports_current(&s, op))
                return false;
            s = ABSENT;
        } else {
            if (op->res_value != op->value || op->res_version <= 0)
                return false;
            s = (lin_state){true, op->value, op->res_version};
        }
        break;
    }
    case LIN_INCR: {
        long long next = (s.exists ? s.value : 0) + op->delta;
        bool applies = within_limits(op, next);
        if (pending) {
            if (!applies)
                return false;
            s = (lin_state){true, next, VER_UNKNOWN};
            break;
        }
        if (op->ok != applies)
            return false;
        if (!applies) {
            if (!reports_current(&s, op))
                return false;
            break;
        }
        if (op->res_value != next || op->res_version <= 0)
            return false;
        s = (lin_state){true, next, op->res_version};
        break;
    }
    }
    *out = s;
    return true;
}

/* ---- memo: a set of (linearized ops, state) ---------------------------- */

typedef struct memo {
    size_t words;      /* bitset words per entry */
    size_t stride;     /* words + 3 state words */
    uint64_t *arena;   /* entries, stride words each */
    size_t count, cap; /* entries used / allocated */
    uint32_t *slots;   /* 1 + entry index, 0 = empty */
    size_t nslots;
} memo;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static void memo_entry(const memo *m, const uint64_t *bits, const lin_state *s, uint64_t *e)
{
    memcpy(e, bits, m->words * sizeof *e);
    e[m->words] = s->exists;
    e[m->words + 1] = (uint64_t)s->value;
    e[m->words + 2] = (uint64_t)s->version;
}

static uint64_t memo_hash(const memo *m, const uint64_t *e)
{
    uint64_t h = 0x84222325cbf29ce4ULL;
    for (size_t i = 0; i < m->stride; i++)
        h = mix(h, e[i]);
    return h;
}

static bool memo_grow(memo *m)
{
    size_t nslots = m->nslots ? m->nslots * 2 : 1024;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < m->count; i++) {
        size_t at = memo_hash(m, m->arena + i * m->stride) & (nslots - 1);
        while (slots[at])
            at = (at + 1) & (nslots - 1);
        slots[at] = (uint32_t)(i + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    return true;
}

/* Adds the pair; false when it was already there (or out of memory, which
 * prunes the branch: the caller's budget then reports it as given up). */
static bool memo_add(memo *m, const uint64_t *bits, const lin_state *s, bool *oom)
{
    if ((m->count + 1) * 2 > m->nslots && !memo_grow(m)) {
        *oom = true;
        return false;
    }
    if (m->count == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *arena = realloc(m->arena, cap * m->stride * sizeof *arena);
        if (arena == NULL) {
            *oom = true;
            return false;
        }
        m->arena = arena;
        m->cap = cap;
    }
    uint64_t *e = m->arena + m->count * m->stride;
    memo_entry(m, bits, s, e);
    size_t at = memo_hash(m, e) & (m->nslots - 1);
    while (m->slots[at]) {
        if (memcmp(m->arena + (size_t)(m->slots[at] - 1) * m->stride, e, m->stride * sizeof *e) == 0)
            return false;
        at = (at + 1) & (m->nslots - 1);
    }
    m->slots[at] = (uint32_t)(++m->count);
    return true;
}

/* ---- the search over one key ------------------------------------------ */

typedef struct node {
    size_t op;         /* index into the key's ops */
    bool is_call;
    long long t;
    struct node *prev, *next;
    struct node *match; /* the call's return (NULL for a pending op) */
} node;

static int by_time(const void *a, const void *b)
{
    const node *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    /* at one instant, calls first: the ops overlap */
    return (int)y->is_call - (int)x->is_call;
}

static void lift(node *call)
{
    call->prev->next = call->next;
    if (call->next)
        call->next->prev = call->prev;
    node *ret = call->match;
    if (ret) {
        ret->prev->next = ret->next;
        if (ret->next)
            ret->next->prev = ret->prev;
    }
}

static void unlift(node *call)
{
    node *ret = call->match;
    if (ret) {
        ret->prev->next = ret;
        if (ret->next)
            ret->next->prev = ret;
    }
    call->prev->next = call;
    if (call->next)
        call->next->prev = call;
}

typedef struct frame {
    node *call;
    lin_state before;
} frame;

static lin_verdict check_key(const lin_op *const *ops, size_t n, long long budget, long long *steps, char *why,
                             size_t whylen)
{
    node *nodes = calloc(2 * n + 1, sizeof *nodes);
    node **call_of = calloc(n, sizeof *call_of);
    frame *stack = calloc(n + 1, sizeof *stack);
    memo m = {.words = (n + 63) / 64};
    m.stride = m.words + 3;
    uint64_t *bits = calloc(m.words + 1, sizeof *bits);
    lin_verdict verdict = LIN_GAVE_UP;
    if (!nodes || !call_of || !stack || !bits)
        goto done;

    size_t count = 0, completed = 0;
    node *ev = nodes + 1;
    for (size_t i = 0; i < n; i++) {
        ev[count++] = (node){.op = i, .is_call = true, .t = ops[i]->invoke_ns};
        if (ops[i]->complete_ns != LIN_PENDING) {
            ev[count++] = (node){.op = i, .is_call = false, .t = ops[i]->complete_ns};
            completed++;
        }
    }
    qsort(ev, count, sizeof *ev, by_time);
    node *head = nodes; /* sentinel */
    head->next = count ? ev : NULL;
    for (size_t i = 0; i < count; i++) {
        ev[i].prev = i ? &ev[i - 1] : head;
        ev[i].next = i + 1 < count ? &ev[i + 1] : NULL;
        if (ev[i].is_call)
            call_of[ev[i].op] = &ev[i];
    }
    for (size_t i = 0; i < count; i++)
        if (!ev[i].is_call)
            call_of[ev[i].op]->match = &ev[i];

    lin_state state = ABSENT;
    size_t depth = 0, remaining = completed, deepest = 0;
    const node *stuck = NULL;
    bool oom = false;
    node *entry = head->next;
    while (remaining > 0) {
        if (++*steps > budget || oom) {
            snprintf(why, whylen, "search gave up after %lld steps%s", *steps, oom ? " (out of memory)" : "");
            goto done;
        }
        if (entry->is_call) {
            lin_state next;
            size_t i = entry->op;
            if (step(ops[i], &state, &next)) {
                bits[i / 64] |= 1ULL << (i % 64);
                if (memo_add(&m, bits, &next, &oom)) {
                    stack[depth++] = (frame){entry, state};
                    state = next;
                    lift(entry);
                    if (entry->match)
                        remaining--;
                    entry = head->next;
                    continue;
                }
                bits[i / 64] &= ~(1ULL << (i % 64));
            }
            entry = entry->next;
        } else {
            if (depth >= deepest) {
                deepest = depth;
                stuck = entry;
            }
            if (depth == 0) {
                char d[200];
                lin_describe(ops[stuck->op], d, sizeof d);
                snprintf(why, whylen, "no linearization: at most %zu of %zu ops ordered; then nothing explains %s",
                         deepest, n, d);
                verdict = LIN_VIOLATION;
                goto done;
            }
            frame f = stack[--depth];
            state = f.before;
            size_t i = f.call->op;
            bits[i / 64] &= ~(1ULL << (i % 64));
            unlift(f.call);
            if (f.call->match)
                remaining++;
            entry = f.call->next;
        }
    }
    verdict = LIN_OK;
done:
    free(nodes);
    free(call_of);
    free(stack);
    free(bits);
    free(m.arena);
    free(m.slots);
    return verdict;
}

static int by_key(const void *a, const void *b)
{
    const lin_op *x = *(const lin_op *const *)a, *y = *(const lin_op *const *)b;
    return (x->key > y->key) - (x->key < y->key);
}

lin_verdict lin_check(const lin_op *ops, size_t n, long long step_budget, lin_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->bad_key = -1;
    if (step_budget <= 0)
        step_budget = 50000000;
    const lin_op **sorted = malloc((n + 1) * sizeof *sorted);
    if (sorted == NULL) {
        snprintf(rep->why, sizeof rep->why, "out of memory");
        return LIN_GAVE_UP;
    }
    /* A read without an answer constrains nothing: it is dropped here. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].complete_ns == LIN_PENDING && ops[i].kind == LIN_GET)
            continue;
        sorted[kept++] = &ops[i];
        rep->pending += ops[i].complete_ns == LIN_PENDING;
    }
    qsort(sorted, kept, sizeof *sorted, by_key);
    rep->ops = kept;
    lin_verdict verdict = LIN_OK;
    for (size_t from = 0; from < kept;) {
        size_t to = from;
        while (to < kept && sorted[to]->key == sorted[from]->key)
            to++;
        long long steps = 0;
        lin_verdict v = check_key(sorted + from, to - from, step_budget, &steps, rep->why, sizeof rep->why);
        rep->steps += steps;
        rep->keys++;
        if (v != LIN_OK) {
            rep->bad_key = sorted[from]->key;
            verdict = v;
            break;
        }
        from = to;
    }
    free(sorted);
    return verdict;
}

void lin_describe(const lin_op *op, char *out, size_t len)
{
    static const char *const names[] = {"get", "put", "putIfAbsent", "incr", "delete"};
    char args[96] = "", ans[96];
    switch (op->kind) {
    case LIN_GET:
        break;
    case LIN_PUT:
    case LIN_PUT_IF_ABSENT:
        snprintf(args, sizeof args, " value=%lld", op->value);
        if (op->expect != LIN_NO_EXPECT && op->kind == LIN_PUT)
            snprintf(args + strlen(args), sizeof args - strlen(args), " expect=%lld", op->expect);
        break;
    case LIN_DELETE:
        if (op->expect != LIN_NO_EXPECT)
            snprintf(args, sizeof args, " expect=%lld", op->expect);
        break;
    case LIN_INCR:
        snprintf(args, sizeof args, " delta=%lld", op->delta);
        if (op->has_min)
            snprintf(args + strlen(args), sizeof args - strlen(args), " min=%lld", op->min);
        if (op->has_max)
            snprintf(args + strlen(args), sizeof args - strlen(args), " max=%lld", op->max);
        break;
    }
    if (op->complete_ns == LIN_PENDING)
        snprintf(ans, sizeof ans, "no answer");
    else
        snprintf(ans, sizeof ans, "%s value=%lld version=%lld [%lld..%lld ns]",
                 op->kind == LIN_GET ? (op->ok ? "found" : "not found") : (op->ok ? "applied" : "not applied"),
                 op->res_value, op->res_version, op->invoke_ns, op->complete_ns);
    snprintf(out, len, "client %d key %d %s%s -> %s", op->client, op->key, names[op->kind], args, ans);
}
