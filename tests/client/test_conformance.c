/* The conformance runner of the C client: every scenario of
 * clients/conformance/scenarios, as that folder's README defines them, one
 * cmocka test each, against real brokers on the private PostgreSQL. */
#include "queen_client.h"
#include "jbuf.h"
#include "jdoc.h"

#include "broker.h"
#include "pgtest.h"
#include "testutil.h"

#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_VARS 64


typedef struct vars {
    char *name[MAX_VARS];
    char *raw[MAX_VARS]; /* JSON text */
    int n;
} vars;

static test_broker main_broker;

/* ---- variables ------------------------------------------------------------------- */

static void var_set(vars *v, const char *name, const char *raw, size_t len)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->name[i], name) == 0) {
            free(v->raw[i]);
            v->raw[i] = strndup(raw, len);
            return;
        }
    assert_true(v->n < MAX_VARS);
    v->name[v->n] = strdup(name);
    v->raw[v->n] = strndup(raw, len);
    v->n++;
}

static const char *var_get(const vars *v, const char *name, size_t len)
{
    for (int i = 0; i < v->n; i++)
        if (strlen(v->name[i]) == len && memcmp(v->name[i], name, len) == 0)
            return v->raw[i];
    return NULL;
}

static void vars_free(vars *v)
{
    for (int i = 0; i < v->n; i++) {
        free(v->name[i]);
        free(v->raw[i]);
    }
    v->n = 0;
}

/* A variable's text inside a longer string: a string's characters, else its JSON text. */
static char *var_text(const char *raw)
{
    jd *d = jd_parse(raw, strlen(raw), NULL, 0);
    char *t = d != NULL && d->type == JD_STRING ? strdup(d->str) : strdup(raw);
    jd_free(d);
    return t;
}

/* A string with its embedded ${name}s replaced by their text, as a JSON string. */
static void subst_text(const char *s, const vars *vs, jbuf *out)
{
    const char *whole = s;
    jbuf text = {0};
    while (*s) {
        const char *open = strstr(s, "${");
        const char *close = open != NULL ? strchr(open, '}') : NULL;
        if (open == NULL || close == NULL) {
            jbuf_add(&text, s);
            break;
        }
        jbuf_raw(&text, s, (size_t)(open - s));
        const char *raw = var_get(vs, open + 2, (size_t)(close - open - 2));
        if (raw == NULL)
            fail_msg("unknown variable in %s", whole);
        char *t = var_text(raw);
        jbuf_add(&text, t);
        free(t);
        s = close + 1;
    }
    char *str = jbuf_take(&text);
    jbuf_str(out, str != NULL ? str : "");
    free(str);
}

static void subst_into(const jd *v, const vars *vs, jbuf *out)
{
    switch (v->type) {
    case JD_STRING: {
        const char *s = v->str;
        size_t len = strlen(s);
        if (len > 3 && s[0] == '$' && s[1] == '{' && s[len - 1] == '}' && memchr(s + 2, '}', len - 3) == NULL) {
            const char *raw = var_get(vs, s + 2, len - 3);
            if (raw == NULL)
                fail_msg("unknown variable %s", s);
            jbuf_add(out, raw);
            return;
        }
        subst_text(s, vs, out);
        return;
    }
    case JD_ARRAY:
    case JD_OBJECT:
        jbuf_add(out, v->type == JD_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i > 0)
                jbuf_add(out, ",");
            if (v->type == JD_OBJECT) {
                subst_text(v->keys[i], vs, out);
                jbuf_add(out, ":");
            }
            subst_into(v->items[i], vs, out);
        }
        jbuf_add(out, v->type == JD_ARRAY ? "]" : "}");
        return;
    default:
        jbuf_raw(out, v->raw, v->rawlen);
    }
}

/* v with every variable substituted, parsed again; NULL when v is NULL. */
static jd *subst(const jd *v, const vars *vs)
{
    if (v == NULL)
        return NULL;
    jbuf out = {0};
    subst_into(v, vs, &out);
    char *text = jbuf_take(&out);
    char msg[128];
    jd *r = jd_parse(text, strlen(text), msg, sizeof msg);
    if (r == NULL)
        fail_msg("substitution gave bad JSON (%s): %s", msg, text);
    free(text);
    return r;
}

/* ---- patterns ------------------------------------------------------------------- */

static bool equal(const jd *a, const jd *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case JD_NULL: return true;
    case JD_BOOL: return a->boolean == b->boolean;
    case JD_NUMBER: return jd_number_equal(a->raw, a->rawlen, b->raw, b->rawlen);
    case JD_STRING: return a->strlen == b->strlen && memcmp(a->str, b->str, a->strlen) == 0;
    case JD_ARRAY:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++)
            if (!equal(a->items[i], b->items[i]))
                return false;
        return true;
    case JD_OBJECT:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++) {
            const jd *o = jd_get(b, a->keys[i]);
            if (o == NULL || !equal(a->items[i], o))
                return false;
        }
        return true;
    }
    return false;
}

static const char *type_name(const jd *v)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return names[v->type];
}

static bool mismatch(char *why, size_t len, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool mismatch(char *why, size_t len, const char *path, const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(why, len, "at %s: %s", path[0] ? path : "/", m);
    return false;
}

static bool is_matcher(const jd *p) { return p->type == JD_OBJECT && p->n == 1 && p->keys[0][0] == '$'; }

static bool match(const jd *p, const jd *v, const char *path, char *why, size_t len)
{
    if (is_matcher(p)) {
        const char *m = p->keys[0];
        const jd *arg = p->items[0];
        if (strcmp(m, "$absent") == 0)
            return v == NULL ? true : mismatch(why, len, path, "present, expected absent");
        if (v == NULL)
            return mismatch(why, len, path, "absent");
        if (strcmp(m, "$any") == 0)
            return true;
        if (strcmp(m, "$type") == 0) {
            const char *t = arg->str != NULL ? arg->str : "";
            bool ok = strcmp(t, type_name(v)) == 0 ||
                      (strcmp(t, "integer") == 0 && v->type == JD_NUMBER &&
                       strcspn(v->raw, ".eE") >= v->rawlen);
            return ok ? true : mismatch(why, len, path, "%s, expected %s", type_name(v), t);
        }
        if (strcmp(m, "$raw") == 0) {
            bool ok = arg->str != NULL && strlen(arg->str) == v->rawlen && memcmp(arg->str, v->raw, v->rawlen) == 0;
            return ok ? true : mismatch(why, len, path, "raw text %.*s, expected %s", (int)v->rawlen, v->raw, arg->str);
        }
        if (strcmp(m, "$len") == 0) {
            char n[24];
            snprintf(n, sizeof n, "%zu", v->n);
            bool ok = v->type == JD_ARRAY && jd_number_equal(arg->raw, arg->rawlen, n, strlen(n));
            return ok ? true : mismatch(why, len, path, "%s of %zu, expected length %.*s", type_name(v), v->n,
                                        (int)arg->rawlen, arg->raw);
        }
        if (strcmp(m, "$ne") == 0)
            return !equal(arg, v) ? true : mismatch(why, len, path, "equal to %.*s", (int)v->rawlen, v->raw);
        return mismatch(why, len, path, "unknown matcher %s", m);
    }
    if (v == NULL)
        return mismatch(why, len, path, "absent, expected %.*s", (int)p->rawlen, p->raw);
    char sub[512];
    switch (p->type) {
    case JD_OBJECT:
        if (v->type != JD_OBJECT)
            return mismatch(why, len, path, "%s, expected an object", type_name(v));
        for (size_t i = 0; i < p->n; i++) {
            snprintf(sub, sizeof sub, "%s/%s", path, p->keys[i]);
            if (!match(p->items[i], jd_get(v, p->keys[i]), sub, why, len))
                return false;
        }
        return true;
    case JD_ARRAY:
        if (v->type != JD_ARRAY || v->n != p->n)
            return mismatch(why, len, path, "%.*s, expected %zu elements", (int)(v->rawlen > 200 ? 200 : v->rawlen),
                            v->raw, p->n);
        for (size_t i = 0; i < p->n; i++) {
            snprintf(sub, sizeof sub, "%s/%zu", path, i);
            if (!match(p->items[i], v->items[i], sub, why, len))
                return false;
        }
        return true;
    default:
        return equal(p, v) ? true
                           : mismatch(why, len, path, "%.*s, expected %.*s", (int)(v->rawlen > 200 ? 200 : v->rawlen),
                                      v->raw, (int)p->rawlen, p->raw);
    }
}

/* ---- the calls ------------------------------------------------------------------- */

static const char *arg_str(const jd *a, const char *k) { return jd_str(a, k); }

/* The scenario's expiry as the C call takes it. Neither, or both: 0, which
 * the client refuses as it refuses any ttl that is not > 0. */
static long arg_ttl(const jd *a)
{
    const jd *t = jd_get(a, "ttlSeconds");
    if (jd_true(a, "forever"))
        return t != NULL ? 0 : QUEEN_FOREVER;
    return t != NULL ? (long)jd_int(a, "ttlSeconds", 0) : 0;
}

static char *arg_raw(const jd *a, const char *k) { return jd_text(jd_get(a, k)); }

static double arg_double(const jd *v) { return v != NULL ? strtod(v->raw, NULL) : 0; }

static char *error_json(const queen_client_error *e)
{
    jbuf b = {0};
    jbuf_printf(&b, "{\"status\":%d,\"code\":", e->status);
    jbuf_str(&b, e->code);
    jbuf_add(&b, ",\"reason\":");
    jbuf_str(&b, e->reason);
    jbuf_add(&b, ",\"detail\":");
    jbuf_str(&b, e->detail);
    jbuf_printf(&b, ",\"retryAfter\":%d,\"kind\":", e->retry_after_s);
    jbuf_str(&b, queen_client_error_kind(e));
    if (e->category == QUEEN_ERR_PRECONDITION) {
        jbuf_printf(&b, ",\"failedIndex\":%d,\"kvReason\":", e->precondition.index);
        jbuf_str(&b, e->precondition.reason);
        jbuf_printf(&b, ",\"version\":%lld", e->precondition.version);
        if (e->precondition.value_omitted)
            jbuf_printf(&b, ",\"valueOmitted\":true,\"valueBytes\":%zu", e->precondition.value_bytes);
        else
            jbuf_printf(&b, ",\"value\":%s", e->precondition.value);
    }
    jbuf_add(&b, "}");
    return jbuf_take(&b);
}

typedef struct scan_acc {
    jbuf keys;
    int n;
} scan_acc;

static int scan_row(void *ctx, const char *row_json)
{
    scan_acc *acc = ctx;
    jd *row = jd_parse(row_json, strlen(row_json), NULL, 0);
    jbuf_add(&acc->keys, acc->n++ > 0 ? "," : "");
    jbuf_str(&acc->keys, jd_str(row, "key"));
    jd_free(row);
    return 0;
}

/* ---- consume ---------------------------------------------------------------------- */

#define MAX_TRACKED 64

typedef struct consume_state {
    pthread_mutex_t lock;
    char *ids[MAX_TRACKED];
    int deliveries[MAX_TRACKED];
    int n, handled, failed, stop_after;
    bool fail_first;
    long sleep_ms;
    const char *effect; /* kv op JSON, or NULL */
    volatile int stop;
} consume_state;

static int consume_handler(void *ctx, const queen_client_message *m, queen_client_tx *tx)
{
    consume_state *s = ctx;
    pthread_mutex_lock(&s->lock);
    int i = 0;
    while (i < s->n && strcmp(s->ids[i], m->transaction_id) != 0)
        i++;
    if (i == s->n && s->n < MAX_TRACKED)
        s->ids[s->n++] = strdup(m->transaction_id);
    int delivery = i < MAX_TRACKED ? ++s->deliveries[i] : 1;
    pthread_mutex_unlock(&s->lock);
    if (s->sleep_ms > 0)
        pause_ms((int)s->sleep_ms);
    if (s->fail_first && delivery == 1) {
        pthread_mutex_lock(&s->lock);
        s->failed++;
        pthread_mutex_unlock(&s->lock);
        return QUEEN_CLIENT_FAILED;
    }
    if (s->effect != NULL)
        queen_client_tx_kv(tx, s->effect);
    pthread_mutex_lock(&s->lock);
    if (++s->handled >= s->stop_after)
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->lock);
    return QUEEN_CLIENT_HANDLED;
}

typedef struct watchdog {
    consume_state *s;
    long ms;
    bool fired;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
} watchdog;

static void *watchdog_main(void *arg)
{
    watchdog *w = arg;
    long long until = now_ms() + w->ms;
    pthread_mutex_lock(&w->lock);
    while (!w->done && now_ms() < until) {
        pthread_mutex_unlock(&w->lock);
        pause_ms(20);
        pthread_mutex_lock(&w->lock);
    }
    if (!w->done) {
        w->fired = true;
        __atomic_store_n(&w->s->stop, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static int run_consume(queen_client *c, const jd *a, char **result, queen_client_error *err)
{
    consume_state s = {.stop_after = (int)jd_int(a, "stopAfter", 1)};
    pthread_mutex_init(&s.lock, NULL);
    const jd *h = jd_get(a, "handler");
    s.fail_first = jd_true(h, "failFirst");
    s.sleep_ms = (long)jd_int(h, "sleepMs", 0);
    char *effect = jd_text(jd_get(h, "effect"));
    s.effect = effect;
    queen_client_consume_options o = {
        .tenant = arg_str(a, "tenant"),
        .queue = arg_str(a, "queue"),
        .consumer_group = arg_str(a, "group"),
        .concurrency = (int)jd_int(a, "concurrency", 1),
        .batch = (int)jd_int(a, "batch", 1),
        .lease_seconds = (int)jd_int(a, "leaseSeconds", 0),
        .poll_ms = 300,
        .handler = consume_handler,
        .ctx = &s,
        .stop = &s.stop,
    };
    watchdog w = {.s = &s, .ms = (long)jd_int(a, "timeoutMs", 30000)};
    pthread_mutex_init(&w.lock, NULL);
    pthread_t wt;
    assert_int_equal(pthread_create(&wt, NULL, watchdog_main, &w), 0);
    int rc = queen_client_consume(c, &o, err);
    pthread_mutex_lock(&w.lock);
    w.done = true;
    pthread_mutex_unlock(&w.lock);
    pthread_join(wt, NULL);
    if (w.fired)
        fail_msg("consume did not stop within %ld ms (handled %d, failed %d)", w.ms, s.handled, s.failed);
    if (rc == 0) {
        jbuf b = {0};
        jbuf_printf(&b, "{\"handled\":%d,\"failed\":%d,\"deliveries\":{", s.handled, s.failed);
        for (int i = 0; i < s.n; i++) {
            jbuf_add(&b, i > 0 ? "," : "");
            jbuf_str(&b, s.ids[i]);
            jbuf_printf(&b, ":%d", s.deliveries[i]);
        }
        jbuf_add(&b, "}}");
        *result = jbuf_take(&b);
    }
    for (int i = 0; i < s.n; i++)
        free(s.ids[i]);
    free(effect);
    pthread_mutex_destroy(&s.lock);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

/* One call; 0 with *result (JSON text), or -1 with err. */
static int do_call(queen_client *c, const char *call, const jd *a, char **result, queen_client_error *err)
{
    const char *tenant = arg_str(a, "tenant"), *ns = arg_str(a, "ns"), *key = arg_str(a, "key");
    long long expect = jd_get(a, "expect") != NULL ? jd_int(a, "expect", -1) : -1;
    bool required = jd_true(a, "required");
    int rc;
    *result = NULL;
    if (strcmp(call, "health") == 0) {
        char version[64];
        rc = queen_client_health(c, version, sizeof version, err);
        if (rc == 0) {
            jbuf b = {0};
            jbuf_add(&b, "{\"status\":\"healthy\",\"version\":");
            jbuf_str(&b, version);
            jbuf_add(&b, "}");
            *result = jbuf_take(&b);
        }
        return rc;
    }
    if (strcmp(call, "kv_get") == 0)
        return queen_client_kv_get(c, tenant, ns, key, result, err);
    if (strcmp(call, "kv_put") == 0 || strcmp(call, "kv_put_if_absent") == 0) {
        char *value = arg_raw(a, "value");
        rc = strcmp(call, "kv_put") == 0
                 ? queen_client_kv_put(c, tenant, ns, key, value, arg_ttl(a), expect, required, result, err)
                 : queen_client_kv_put_if_absent(c, tenant, ns, key, value, arg_ttl(a), required, result, err);
        free(value);
        return rc;
    }
    if (strcmp(call, "kv_delete") == 0)
        return queen_client_kv_delete(c, tenant, ns, key, expect, required, result, err);
    if (strcmp(call, "kv_incr") == 0) {
        double mn = arg_double(jd_get(a, "min")), mx = arg_double(jd_get(a, "max"));
        return queen_client_kv_incr(c, tenant, ns, key, arg_double(jd_get(a, "delta")),
                                    jd_get(a, "min") != NULL ? &mn : NULL, jd_get(a, "max") != NULL ? &mx : NULL,
                                    arg_ttl(a), required, result, err);
    }
    if (strcmp(call, "kv_get_many") == 0) {
        const jd *keys = jd_get(a, "keys");
        size_t n = keys != NULL ? keys->n : 0;
        const char **k = calloc(n + 1, sizeof *k);
        for (size_t i = 0; i < n; i++)
            k[i] = keys->items[i]->str;
        rc = queen_client_kv_get_many(c, tenant, ns, k, n, result, err);
        free(k);
        return rc;
    }
    if (strcmp(call, "kv_get_prefix") == 0)
        return queen_client_kv_get_prefix(c, tenant, ns, arg_str(a, "prefix"), arg_str(a, "after"),
                                          (int)jd_int(a, "limit", 0), jd_true(a, "keysOnly"), result, err);
    if (strcmp(call, "kv_scan") == 0) {
        scan_acc acc = {0};
        int pages = queen_client_kv_scan(c, tenant, ns, arg_str(a, "prefix"), (int)jd_int(a, "limit", 0),
                                         jd_true(a, "keysOnly"), scan_row, &acc, err);
        char *keys = jbuf_take(&acc.keys);
        if (pages >= 0) {
            jbuf b = {0};
            jbuf_printf(&b, "{\"keys\":[%s],\"pages\":%d}", keys != NULL ? keys : "", pages);
            *result = jbuf_take(&b);
        }
        free(keys);
        return pages >= 0 ? 0 : -1;
    }
    if (strcmp(call, "kv_apply") == 0) {
        char *ops = arg_raw(a, "ops");
        rc = queen_client_kv_apply(c, tenant, ops, result, err);
        free(ops);
        return rc;
    }
    if (strcmp(call, "kv_namespaces") == 0)
        return queen_client_kv_namespaces(c, tenant, result, err);
    if (strcmp(call, "push") == 0) {
        char *items = arg_raw(a, "items");
        rc = queen_client_push(c, tenant, items, result, err);
        free(items);
        return rc;
    }
    if (strcmp(call, "pop") == 0) {
        queen_pop_options o = {.queue = arg_str(a, "queue"), .partition = arg_str(a, "partition"),
                               .consumer_group = arg_str(a, "group"), .batch = (int)jd_int(a, "batch", 0),
                               .lease_seconds = (int)jd_int(a, "leaseSeconds", 0), .auto_ack = jd_true(a, "autoAck"),
                               .wait = jd_true(a, "wait"), .timeout_ms = (int)jd_int(a, "timeoutMs", 0)};
        rc = queen_client_pop(c, tenant, &o, result, err);
        if (rc == 0 && *result == NULL)
            *result = strdup("null");
        return rc;
    }
    if (strcmp(call, "ack") == 0) {
        char *acks = arg_raw(a, "acks");
        rc = queen_client_ack(c, tenant, acks, arg_str(a, "group"), result, err);
        free(acks);
        return rc;
    }
    if (strcmp(call, "lease_extend") == 0)
        return queen_client_lease_extend(c, tenant, arg_str(a, "leaseId"), (int)jd_int(a, "seconds", 60), result,
                                         err);
    if (strcmp(call, "configure") == 0) {
        char *options = arg_raw(a, "options");
        rc = queen_client_configure_ex(c, tenant, arg_str(a, "queue"), options, arg_str(a, "namespace"),
                                       arg_str(a, "task"), NULL, result, err);
        free(options);
        return rc;
    }
    if (strcmp(call, "queues") == 0)
        return queen_client_queues(c, tenant, result, err);
    if (strcmp(call, "queue_delete") == 0)
        return queen_client_queue_delete(c, tenant, arg_str(a, "queue"), result, err);
    if (strcmp(call, "transaction") == 0) {
        queen_client_tx *tx = queen_client_tx_new();
        const jd *ops = jd_get(a, "ops");
        for (size_t i = 0; ops != NULL && i < ops->n; i++) {
            const jd *op = ops->items[i];
            const jd *x;
            if ((x = jd_get(op, "ack")) != NULL) {
                queen_client_tx_ack(tx, jd_str(x, "transactionId"), jd_str(x, "partitionId"), jd_str(x, "leaseId"),
                                    jd_str(x, "status"), jd_str(x, "consumerGroup"));
            } else if ((x = jd_get(op, "push")) != NULL) {
                char *payload = arg_raw(x, "payload");
                queen_client_tx_push(tx, jd_str(x, "queue"), jd_str(x, "partition"), payload,
                                     jd_str(x, "transactionId"));
                free(payload);
            } else if ((x = jd_get(op, "kv")) != NULL) {
                char *kv = jd_text(x);
                queen_client_tx_kv(tx, kv);
                free(kv);
            } else {
                fail_msg("unknown transaction op %.*s", (int)op->rawlen, op->raw);
            }
        }
        const jd *leases = jd_get(a, "requiredLeases");
        for (size_t i = 0; leases != NULL && i < leases->n; i++)
            queen_client_tx_require_lease(tx, leases->items[i]->str);
        rc = queen_client_tx_commit(c, tenant, tx, result, err);
        queen_client_tx_free(tx);
        return rc;
    }
    if (strcmp(call, "consume") == 0)
        return run_consume(c, a, result, err);
    fail_msg("unknown call %s", call);
    return -1;
}

/* ---- needs: the brokers a scenario runs against ------------------------------------------ */

typedef struct world {
    test_broker brokers[2];
    bool running[2];
    int nbrokers;         /* started for this scenario */
    char *urls[3];
    int nurls;
    int held_fd;          /* saturated: the connection that fills the broker */
    char tenant[40];
} world;

static char *dead_url(void)
{
    return fmt("http://127.0.0.1:%d", broker_free_port());
}

static void world_start(world *w, int n, const char *const *env)
{
    for (int i = 0; i < n; i++) {
        if (!broker_start(&w->brokers[i], env))
            fail_msg("a broker for the scenario did not start");
        w->running[i] = true;
        w->nbrokers = i + 1;
    }
}

static void saturate(world *w)
{
    const char *env[] = {"QUEEN_MAX_CONNECTIONS=1", "QUEEN_HTTP_THREADS=1", "QUEEN_IDLE_TIMEOUT_MS=600000",
                         "QUEEN_REQUEST_READ_TIMEOUT_MS=600000", NULL};
    broker_spawn(&w->brokers[0], pgtest_url(), env);
    w->running[0] = true;
    w->nbrokers = 1;
    /* The broker admits connections in the order they open: the one held
     * here is its first, before any health probe, so it takes the only place. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->brokers[0].port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long long until = now_ms() + 30000;
    for (;;) {
        w->held_fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(w->held_fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        close(w->held_fd);
        w->held_fd = -1;
        if (now_ms() > until)
            fail_msg("the broker never listened (log: %s)", w->brokers[0].log);
        pause_ms(20);
    }
    /* Up once a request is answered; with the place held, the answer is 503. */
    for (;;) {
        http_reply r = broker_http(&w->brokers[0], "GET", "/health", NULL, NULL);
        long status = r.status;
        http_reply_free(&r);
        if (status == 503)
            break;
        if (status == 200)
            fail_msg("the held connection did not take the broker's only place");
        if (now_ms() > until)
            fail_msg("the broker never answered (log: %s)", w->brokers[0].log);
        pause_ms(20);
    }
}

static void world_setup(world *w, const jd *needs)
{
    memset(w, 0, sizeof *w);
    w->held_fd = -1;
    if (needs == NULL) {
        w->urls[w->nurls++] = strdup(main_broker.base);
        return;
    }
    const jd *quota = jd_get(needs, "quota");
    if (jd_get(needs, "noBroker") != NULL) {
        w->urls[w->nurls++] = dead_url();
    } else if (jd_get(needs, "saturated") != NULL) {
        saturate(w);
        w->urls[w->nurls++] = strdup(w->brokers[0].base);
    } else if (quota != NULL) {
        /* A fresh tenant per scenario: its quota row is its own. */
        snprintf(w->tenant, sizeof w->tenant, "00000000-0000-4000-8000-%012llx",
                 ((unsigned long long)getpid() << 24 ^ (unsigned long long)now_ms()) & 0xffffffffffffULL);
        jbuf cols = {0}, vals = {0};
        for (size_t i = 0; i < quota->n; i++) {
            jbuf_printf(&cols, ", %s", quota->keys[i]);
            jbuf_add(&vals, ", ");
            jbuf_raw(&vals, quota->items[i]->raw, quota->items[i]->rawlen);
        }
        char *c = jbuf_take(&cols), *v = jbuf_take(&vals);
        char *sql = fmt("INSERT INTO queen.kv_quota (tenant_id, enabled%s) VALUES ('%s', true%s)", c, w->tenant, v);
        PGconn *conn = pgtest_connect();
        PQclear(pgtest_exec(conn, sql, 0, NULL));
        PQfinish(conn);
        free(sql);
        free(c);
        free(v);
        const char *env[] = {"QUEEN_TENANCY_HEADER=1", "QUEEN_TRUSTED_PROXY=1", NULL};
        world_start(w, 1, env);
        w->urls[w->nurls++] = strdup(w->brokers[0].base);
    } else {
        int n = (int)jd_int(needs, "brokers", 0);
        if (jd_get(needs, "deadUrlFirst") != NULL)
            w->urls[w->nurls++] = dead_url();
        if (n > 0) {
            world_start(w, n, NULL);
            for (int i = 0; i < n; i++)
                w->urls[w->nurls++] = strdup(w->brokers[i].base);
        } else {
            w->urls[w->nurls++] = strdup(main_broker.base);
        }
    }
}

static void world_teardown(world *w)
{
    if (w->held_fd > 0) /* 0: never set (a zeroed world) */
        close(w->held_fd);
    for (int i = 0; i < w->nbrokers; i++)
        if (w->running[i])
            broker_stop(&w->brokers[i]);
    for (int i = 0; i < w->nurls; i++)
        free(w->urls[i]);
    if (w->tenant[0] != '\0') {
        PGconn *conn = pgtest_connect();
        const char *p[] = {w->tenant};
        PQclear(pgtest_exec(conn, "DELETE FROM queen.kv_quota WHERE tenant_id = $1::uuid", 1, p));
        PQfinish(conn);
    }
}

typedef struct scenario {
    char *name;
    jd *doc;         /* the scenario object, within its file's parse */
    world w;         /* what the teardown stops, also when a step failed */
    queen_client *c;
} scenario;

static int scenario_teardown(void **state)
{
    scenario *sc = *state;
    queen_client_close(sc->c);
    sc->c = NULL;
    world_teardown(&sc->w);
    return 0;
}

/* ---- a scenario -------------------------------------------------------------------- */

static void run_scenario(void **state)
{
    scenario *sc = *state;
    const jd *doc = sc->doc;
    world_setup(&sc->w, jd_get(doc, "needs"));

    const jd *co = jd_get(doc, "client");
    queen_client_options o;
    queen_client_options_defaults(&o);
    o.urls = (const char *const *)sc->w.urls;
    o.nurls = (size_t)sc->w.nurls;
    o.max_attempts = (int)jd_int(co, "max_attempts", 3);
    o.backoff_ms = (int)jd_int(co, "backoff_ms", 50);
    o.max_backoff_ms = (int)jd_int(co, "max_backoff_ms", 2000);
    o.timeout_ms = (int)jd_int(co, "timeout_ms", 10000);
    queen_client_error err;
    queen_client *c = sc->c = queen_client_open(&o, &err);
    assert_non_null(c);

    vars vs = {0};
    char *run = pgtest_unique("r");
    for (char *p = run; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    char *run_json = fmt("\"%s\"", run);
    var_set(&vs, "run", run_json, strlen(run_json));
    free(run_json);
    free(run);
    if (sc->w.tenant[0] != '\0') {
        char *t = fmt("\"%s\"", sc->w.tenant);
        var_set(&vs, "tenant", t, strlen(t));
        free(t);
    }

    const jd *steps = jd_get(doc, "steps");
    assert_non_null(steps);
    for (size_t i = 0; i < steps->n; i++) {
        const jd *step = steps->items[i];
        const char *harness = jd_str(step, "harness");
        if (harness != NULL) {
            int b = (int)jd_int(step, "broker", 0);
            if (strcmp(harness, "stop_broker") != 0 || b >= sc->w.nbrokers)
                fail_msg("step %zu: harness %s broker %d is not something this runner can do", i, harness, b);
            broker_stop(&sc->w.brokers[b]);
            sc->w.running[b] = false;
            continue;
        }
        const char *call = jd_str(step, "call");
        assert_non_null(call);
        jd *args = subst(jd_get(step, "args"), &vs);
        jd *expect = subst(jd_get(step, "expect"), &vs);
        jd *empty = jd_parse("{}", 2, NULL, 0);
        long long retries_before = queen_client_retries(c);
        char *result = NULL;
        int rc = do_call(c, call, args != NULL ? args : empty, &result, &err);
        long long retries = queen_client_retries(c) - retries_before;
        char *errtext = rc != 0 ? error_json(&err) : NULL;
        jd *got = jd_parse(rc == 0 ? result : errtext, strlen(rc == 0 ? result : errtext), NULL, 0);
        if (got == NULL)
            fail_msg("step %zu (%s): the %s is not JSON: %s", i, call, rc == 0 ? "result" : "error",
                     rc == 0 ? result : errtext);
        const jd *want_result = jd_get(expect, "result"), *want_error = jd_get(expect, "error");
        char why[1024] = "";
        if (want_error != NULL) {
            if (rc == 0)
                fail_msg("step %zu (%s): succeeded with %s, expected an error", i, call, result);
            if (!match(want_error, got, "", why, sizeof why))
                fail_msg("step %zu (%s): error %s: %s", i, call, why, errtext);
        } else {
            if (rc != 0)
                fail_msg("step %zu (%s): failed with %s", i, call, errtext);
            if (want_result != NULL && !match(want_result, got, "", why, sizeof why))
                fail_msg("step %zu (%s): result %s: %s", i, call, why, result);
        }
        const jd *want_retries = jd_get(step, "retries");
        if (want_retries != NULL && retries != jd_int(step, "retries", -1))
            fail_msg("step %zu (%s): %lld retries, expected %.*s", i, call, retries, (int)want_retries->rawlen,
                     want_retries->raw);
        const jd *save = jd_get(step, "save");
        for (size_t k = 0; save != NULL && k < save->n; k++) {
            const jd *at = jd_pointer(got, save->items[k]->str);
            if (at == NULL)
                fail_msg("step %zu (%s): save %s: nothing at %s in %s", i, call, save->keys[k], save->items[k]->str,
                         rc == 0 ? result : errtext);
            var_set(&vs, save->keys[k], at->raw, at->rawlen);
        }
        jd_free(got);
        jd_free(args);
        jd_free(expect);
        jd_free(empty);
        free(result);
        free(errtext);
    }
    vars_free(&vs);
}

/* ---- loading ---------------------------------------------------------------------- */

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int group_setup(void **state)
{
    (void)state;
    return broker_start(&main_broker, NULL) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    broker_stop(&main_broker);
    return 0;
}

int main(void)
{
    const char *dir = getenv("QUEEN_CONFORMANCE_DIR") ? getenv("QUEEN_CONFORMANCE_DIR") : "clients/conformance/scenarios";
    struct dirent **files;
    int nf = scandir(dir, &files, NULL, by_name);
    if (nf < 0) {
        fprintf(stderr, "no scenarios at %s\n", dir);
        return 1;
    }
    size_t cap = 64, n = 0;
    struct CMUnitTest *tests = calloc(cap, sizeof *tests);
    scenario *scs = calloc(cap, sizeof *scs);
    jd **docs = calloc((size_t)nf, sizeof *docs);
    int ndocs = 0;
    for (int f = 0; f < nf; f++) {
        const char *name = files[f]->d_name;
        size_t len = strlen(name);
        if (len > 5 && strcmp(name + len - 5, ".json") == 0) {
            char *path = fmt("%s/%s", dir, name);
            char *text = read_file(path);
            char msg[128];
            jd *doc = jd_parse(text, strlen(text), msg, sizeof msg);
            if (doc == NULL) {
                fprintf(stderr, "%s: %s\n", path, msg);
                return 1;
            }
            docs[ndocs++] = doc;
            const jd *list = jd_get(doc, "scenarios");
            for (size_t i = 0; list != NULL && i < list->n && n < cap; i++) {
                scs[n].name = (char *)jd_str(list->items[i], "name");
                scs[n].doc = list->items[i];
                tests[n] = (struct CMUnitTest){.name = scs[n].name, .test_func = run_scenario,
                                               .teardown_func = scenario_teardown, .initial_state = &scs[n]};
                n++;
            }
            free(text);
            free(path);
        }
        free(files[f]);
    }
    free(files);
    const char *only = getenv("QUEEN_CONFORMANCE_ONLY"); /* a name substring, to run a few while working */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (only == NULL || strstr(tests[i].name, only) != NULL)
            tests[kept++] = tests[i];
    int rc = _cmocka_run_group_tests("conformance", tests, kept, group_setup, group_teardown);
    for (int i = 0; i < ndocs; i++)
        jd_free(docs[i]);
    free(tests);
    free(scs);
    free(docs);
    return rc;
}
