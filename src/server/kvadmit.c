/* kvadmit: counts a kv call's demand and asks the engine to admit it (see
 * kvadmit.h). Never decides a quota itself and never calls libpq: the
 * engine's queen_kv_admit owns the figures, so the HTTP edge and an
 * embedder enforce the same numbers. */
#include "kvadmit.h"

#include "errors.h"

/* kind is the op member's raw string (quotes included); rawjson_key_is
 * compares it unescaped, as SQL will read it. */
static bool is(rawjson_span kind, const char *want)
{
    return rawjson_key_is(kind, want);
}

kv_demand kv_demand_of(rawjson_span ops)
{
    kv_demand d = {0, 0, 0, 0};
    rawjson_iter it;
    rawjson_span op, kind, value;
    if (!rawjson_open(&it, rawjson_trim(ops), '['))
        return d;
    while (rawjson_next(&it, NULL, &op)) {
        if (!rawjson_member(op, "op", &kind))
            continue;
        if (is(kind, "get") || is(kind, "getMany") || is(kind, "getPrefix")) {
            d.reads++;
        } else if (is(kind, "put") || is(kind, "putIfAbsent") || is(kind, "incr")) {
            d.writes++;
            d.creating++;
            /* incr carries no value: a number, counted as 8 bytes. */
            d.bytes += rawjson_member(op, "value", &value) ? (long)value.len : 8;
        } else if (is(kind, "delete")) {
            d.writes++;
        }
    }
    return d;
}

bool kv_admit(server *srv, const http_request *req, kv_demand d, http_family fam, http_response *res)
{
    if (d.reads == 0 && d.writes == 0)
        return true;
    queen_error err;
    http_error_init(&err);
    int retry = 0;
    if (queen_kv_admit(srv->engine, req->tenant, d.reads, d.writes, d.creating, d.bytes, &retry, &err) == 0)
        return true;
    http_engine_error_retry(res, fam, &err, retry);
    return false;
}
