/* routes_kv: the KV routes (docs/api.md, KV): the batch, the path routes
 * (GET/PUT/DELETE /api/v1/kv/:ns/KEY..., the key being the rest of the path)
 * and the console reads. Each handler parses HTTP, calls one engine
 * function (which judges the ops: guards, quota, rate) and renders.
 *
 * Never calls libpq and never judges an op's shape: kv_apply_v1 does, once,
 * so the path routes hand it the body's own members and let SQL refuse what
 * is wrong. Values travel as the client's raw JSON (see rawjson.h) and come
 * back as PostgreSQL rendered them. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "errors.h"

static const char *const path_fields[] = {"op", "ns", "namespace", "key", NULL};

static void refuse(http_response *res, const char *reason, const char *detail)
{
    http_refuse(res, FAMILY_KV, QUEEN_ERR_BAD_REQUEST, reason, detail);
}

static bool span_is(rawjson_span s, const char *text)
{
    return s.len == strlen(text) && memcmp(s.p, text, s.len) == 0;
}

/* The rule every path route shares: no query string (keys must not land in
 * access logs, and a client that puts one there has misread the API).
 * params[0] is the namespace, params[1] the key. */
static bool path_ok(const http_request *req, http_response *res)
{
    if (req->has_query) {
        refuse(res, "kv_no_query_string", "the kv path routes take no query string");
        return false;
    }
    /* A percent-decoded %00 never gets here: the edge refuses it with the
     * path (http.c, kv_bad_key on these routes); every other key rule is
     * the engine's. */
    return true;
}

/* Why an object body of a path route is refused, or NULL: a field the path
 * carries (kv_field_in_path), a tenant (kv_tenant_not_an_input), or a field
 * the route does not take (kv_bad_request). */
static const char *object_refusal(const json_t *body, const char *const *allowed, const char **reason, char *detail,
                                  size_t len)
{
    for (size_t i = 0; path_fields[i] != NULL; i++) {
        if (json_object_get(body, path_fields[i]) != NULL) {
            *reason = "kv_field_in_path";
            snprintf(detail, len, "the body names \"%s\", which the path carries", path_fields[i]);
            return detail;
        }
    }
    static const char *const tenant_fields[] = QUEEN_TENANT_FIELDS;
    for (size_t i = 0; i < sizeof tenant_fields / sizeof tenant_fields[0]; i++) {
        if (json_object_get(body, tenant_fields[i]) != NULL) {
            *reason = "kv_tenant_not_an_input";
            return "the tenant comes from the request, never the body";
        }
    }
    const char *field = body_unknown_field(body, allowed);
    if (field != NULL) {
        *reason = "kv_bad_request";
        snprintf(detail, len, "unknown field \"%.64s\" for this route", field);
        return detail;
    }
    return NULL;
}

/* The body of a path route: blank or null (when allow_empty), or an object
 * whose members are all in allowed. Its members' raw text goes to *inner.
 * False with res filled otherwise. */
static bool path_body(const http_request *req, http_response *res, bool allow_empty, const char *const *allowed,
                      rawjson_span *inner)
{
    *inner = (rawjson_span){"", 0};
    json_t *body = body_parse(req, res, allow_empty);
    if (body == NULL)
        return false;
    const char *why = NULL, *reason = "kv_bad_request";
    char detail[160];
    if (json_is_object(body))
        why = object_refusal(body, allowed, &reason, detail, sizeof detail);
    else if (!(json_is_null(body) && allow_empty))
        why = allow_empty ? "the body must be empty, null or a JSON object" : "the body must be a JSON object";
    if (why != NULL)
        refuse(res, reason, why);
    else if (json_is_object(body))
        rawjson_object_inner(body_span(req), inner);
    json_decref(body);
    return why == NULL;
}

/* [{"op":kind,"ns":..,"key":..,<the body's members>}]. The names are
 * escaped by jansson and the members are text jansson accepted, so the
 * splice is valid JSON; it keeps values byte for byte. NULL (res filled)
 * when a name is not UTF-8. */
static char *path_op(const char *kind, const http_request *req, rawjson_span inner, http_response *res)
{
    json_t *ns = json_stringn(req->params[0], req->params_len[0]);
    json_t *key = json_stringn(req->params[1], req->params_len[1]);
    char *ns_text = ns ? json_dumps(ns, JSON_ENCODE_ANY) : NULL;
    char *key_text = key ? json_dumps(key, JSON_ENCODE_ANY) : NULL;
    json_decref(ns);
    json_decref(key);
    char *out = NULL;
    if (ns_text == NULL)
        refuse(res, "kv_bad_namespace", "the namespace is not valid UTF-8");
    else if (key_text == NULL)
        refuse(res, "kv_bad_key", "the key is not valid UTF-8");
    else if (asprintf(&out, "[{\"op\":\"%s\",\"ns\":%s,\"key\":%s%s%.*s}]", kind, ns_text, key_text,
                      inner.len > 0 ? "," : "", (int)inner.len, inner.p) < 0) {
        out = NULL;
        http_refuse(res, FAMILY_KV, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    }
    free(ns_text);
    free(key_text);
    return out;
}

/* The bare result element of a path route (results may be the element or
 * a one-element array); on a found get, ETag: "<version>". Takes results. */
static void render_element(http_response *res, char *results, bool etag)
{
    rawjson_span el = rawjson_trim((rawjson_span){results, strlen(results)});
    rawjson_iter it;
    if (el.len > 0 && el.p[0] == '[' && !(rawjson_open(&it, el, '[') && rawjson_next(&it, NULL, &el))) {
        http_refuse(res, FAMILY_KV, QUEEN_ERR_INTERNAL, "kv_result_misaligned", "the engine returned no element");
        free(results);
        return;
    }
    rawjson_span found, version;
    if (etag && rawjson_member(el, "found", &found) && span_is(found, "true") &&
        rawjson_member(el, "version", &version) && version.len + 3 <= sizeof res->etag)
        snprintf(res->etag, sizeof res->etag, "\"%.*s\"", (int)version.len, version.p);
    http_wrap(res, 200, "", el.p, el.len, "");
    free(results);
}

/* One op through kv_apply_v1 (the judge of its shape), rendered bare. */
static void apply_one(server *srv, const http_request *req, http_response *res, char *ops)
{
    char *results = NULL;
    queen_error err;
    if (queen_kv_apply(srv->engine, req->tenant, ops, false, &results, &err) != 0)
        http_engine_error(res, FAMILY_KV, &err);
    else
        render_element(res, results, false);
    free(ops);
}

void route_kv_get(server *srv, const http_request *req, http_response *res)
{
    rawjson_span none;
    if (!path_ok(req, res) || !path_body(req, res, true, (const char *const[]){NULL}, &none))
        return;
    char *result = NULL;
    queen_error err;
    if (queen_kv_get(srv->engine, req->tenant, req->params[0], req->params[1], &result, &err) != 0)
        http_engine_error(res, FAMILY_KV, &err);
    else
        render_element(res, result, true);
}

void route_kv_put(server *srv, const http_request *req, http_response *res)
{
    static const char *const allowed[] = {"value", "ttlSeconds", "forever", "expect", "required", NULL};
    rawjson_span inner;
    if (!path_ok(req, res) || !path_body(req, res, false, allowed, &inner))
        return;
    char *ops = path_op("put", req, inner, res);
    if (ops != NULL)
        apply_one(srv, req, res, ops);
}

void route_kv_delete(server *srv, const http_request *req, http_response *res)
{
    static const char *const allowed[] = {"expect", "required", NULL};
    rawjson_span inner;
    if (!path_ok(req, res) || !path_body(req, res, true, allowed, &inner))
        return;
    char *ops = path_op("delete", req, inner, res);
    if (ops != NULL)
        apply_one(srv, req, res, ops);
}

void route_kv_batch(server *srv, const http_request *req, http_response *res)
{
    /* Checked, not built into a tree: the ops go on as raw text (the engine
     * guards them raw and SQL parses them), and on a one-op get the tree was
     * a fifth of the broker's instructions (bench/RESULTS.md). */
    if (!body_check(req, res, false))
        return;
    rawjson_span raw = rawjson_trim(body_span(req));
    if (raw.p[0] == '{') {
        /* {"operations":[...]} and nothing else; valid JSON holds no
         * duplicate name, so one match is the member. */
        rawjson_iter it;
        rawjson_span key, value, ops = {NULL, 0};
        bool other = !rawjson_open(&it, raw, '{');
        while (!other && rawjson_next(&it, &key, &value)) {
            if (rawjson_key_is(key, "operations"))
                ops = value;
            else
                other = true;
        }
        if (other || ops.p == NULL) {
            refuse(res, "kv_bad_request", "the body is {\"operations\":[...]} or a bare array of ops");
            return;
        }
        raw = ops;
    }
    char *text = span_dup(raw), *results = NULL;
    queen_error err;
    if (text == NULL)
        http_refuse(res, FAMILY_KV, QUEEN_ERR_INTERNAL, "out_of_memory", "");
    else if (queen_kv_apply(srv->engine, req->tenant, text, false, &results, &err) == 0)
        http_wrap(res, 200, "{\"results\":", results, strlen(results), "}");
    else
        http_engine_error(res, FAMILY_KV, &err);
    free(text);
    free(results);
}

void route_kv_namespaces(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    if (queen_kv_namespaces(srv->engine, req->tenant, &result, &err) != 0)
        http_engine_error(res, FAMILY_KV, &err);
    else
        http_text(res, 200, result);
}

typedef struct list_args {
    const char *ns, *prefix, *after;
    int limit;
    bool keys_only, include_expired;
} list_args;

/* The console list's body {namespace, prefix:"", after, limit:100,
 * keysOnly:false, includeExpired:false}; false with res filled. */
static bool list_parse(const json_t *body, http_response *res, list_args *a)
{
    static const char *const allowed[] = {"namespace", "prefix", "after", "limit", "keysOnly", "includeExpired",
                                          NULL};
    char detail[160];
    bool bad = false;
    if (!json_is_object(body)) {
        refuse(res, "kv_bad_request", "the body must be a JSON object");
        return false;
    }
    const char *field = body_unknown_field(body, allowed);
    if (field != NULL) {
        snprintf(detail, sizeof detail, "unknown field \"%.64s\" for this route", field);
        refuse(res, "kv_bad_request", detail);
        return false;
    }
    a->ns = body_string(body, "namespace", res, FAMILY_KV, &bad);
    if (!bad)
        a->prefix = body_string(body, "prefix", res, FAMILY_KV, &bad);
    if (!bad)
        a->after = body_string(body, "after", res, FAMILY_KV, &bad);
    if (bad)
        return false;
    if (a->ns == NULL) {
        refuse(res, "kv_bad_namespace", "namespace is required");
        return false;
    }
    const json_t *limit = json_object_get(body, "limit");
    long long lim = 100;
    if (limit != NULL && !json_is_null(limit) && !body_int(limit, -2147483647LL, 2147483647LL, &lim)) {
        refuse(res, "kv_bad_request", "limit must be an integer");
        return false;
    }
    /* SQL clamps the page and never refuses; the engine reads 0 as
     * "default", so an explicit 0 or below is sent as 1 (SQL's floor). */
    a->limit = lim < 1 ? 1 : (int)lim;
    const json_t *keys_only = json_object_get(body, "keysOnly"), *expired = json_object_get(body, "includeExpired");
    if ((keys_only && !json_is_boolean(keys_only)) || (expired && !json_is_boolean(expired))) {
        refuse(res, "kv_bad_request", "keysOnly and includeExpired must be booleans");
        return false;
    }
    a->keys_only = json_is_true(keys_only);
    a->include_expired = json_is_true(expired);
    return true;
}

/* GET /api/v1/resources/kv/quota: the caller's tenant's quota and usage. */
void route_kv_quota(server *srv, const http_request *req, http_response *res)
{
    char *result = NULL;
    queen_error err;
    if (queen_kv_quota(srv->engine, req->tenant, &result, &err) != 0)
        http_engine_error(res, FAMILY_KV, &err);
    else
        http_text(res, 200, result);
}

void route_kv_list(server *srv, const http_request *req, http_response *res)
{
    json_t *body = body_parse(req, res, false);
    if (body == NULL)
        return;
    list_args a = {0};
    if (list_parse(body, res, &a)) {
        char *result = NULL;
        queen_error err;
        if (queen_kv_list(srv->engine, req->tenant, a.ns, a.prefix ? a.prefix : "", a.after, a.limit, a.keys_only,
                          a.include_expired, &result, &err) != 0)
            http_engine_error(res, FAMILY_KV, &err);
        else
            http_text(res, 200, result);
    }
    json_decref(body);
}
