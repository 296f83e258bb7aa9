/* error: the error registry (see error.h). Two tables decide everything:
 * state_rows (what PostgreSQL said -> category) and classes (category ->
 * how every caller presents it). The HTTP edge, the transaction failure
 * body and queen.h's retry advice all read them; nothing restates them. */
#include "error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawjson.h"
#include "util.h"

/* Category -> presentation. Retry-After is a floor: a rate refusal carries
 * the engine's own seconds until a token. A lost required KV op is a 409 in
 * general; the KV routes render it as their 200 verdict. */
static const queen_error_class classes[] = {
    [QUEEN_OK] = {200, "ok", "ok", "ok", "ok", false, 0},
    [QUEEN_ERR_BAD_REQUEST] = {400, "bad_request", "kv_bad_request", "bad_request", "bad_request", false, 0},
    [QUEEN_ERR_TOO_LARGE] = {413, "payload_too_large", "payload_too_large", "payload_too_large", "payload_too_large",
                             false, 0},
    [QUEEN_ERR_PRECONDITION] = {409, "precondition_failed", "kv_precondition", "kv_precondition",
                                "kv_precondition_failed", false, 0},
    [QUEEN_ERR_UNAVAILABLE] = {503, "unavailable", "kv_unavailable", "db_error", "db_unavailable", true, 1},
    [QUEEN_ERR_MISCONFIGURED] = {500, "misconfigured", "kv_misconfigured", "db_error", "db_misconfigured", false, 0},
    [QUEEN_ERR_INTERNAL] = {500, "internal_error", "kv_error", "db_error", "db_error", false, 0},
    [QUEEN_ERR_QUOTA_EXCEEDED] = {403, "kv_quota_exceeded", "kv_quota_exceeded", "kv_quota_exceeded",
                                  "kv_quota_exceeded", false, 0},
    [QUEEN_ERR_FEATURE_GATED] = {403, "feature_gated", "feature_gated", "feature_gated", "feature_gated", false, 0},
    [QUEEN_ERR_RATE_LIMITED] = {429, "rate_limited", "rate_limited", "rate_limited", "rate_limited", true, 1},
    [QUEEN_ERR_CONFLICT] = {409, "conflict", "kv_conflict", "db_error", "conflict", false, 0},
    [QUEEN_ERR_UNAUTHORIZED] = {401, "unauthorized", "unauthorized", "unauthorized", "unauthorized", false, 0},
    [QUEEN_ERR_FORBIDDEN] = {403, "forbidden", "forbidden", "forbidden", "forbidden", false, 0},
    /* 403, not 429: a per-tenant limit is a standing budget (it frees only
     * when the tenant deletes queues or retention removes traces), not a
     * rate a short wait fixes, so nothing tells the client to retry. */
    [QUEEN_ERR_LIMIT_EXCEEDED] = {403, "limit_exceeded", "limit_exceeded", "limit_exceeded", "limit_exceeded", false,
                                  0},
    /* 504, not 503: clients retry a 503 blindly, and this call may have
     * committed. Not retryable as such; the caller decides (queen.h). */
    [QUEEN_ERR_OUTCOME_UNKNOWN] = {504, "outcome_unknown", "kv_outcome_unknown", "outcome_unknown",
                                   "db_outcome_unknown", false, 1},
};

const queen_error_class *queen_error_class_of(queen_error_category cat)
{
    if ((int)cat < 0 || (size_t)cat >= sizeof classes / sizeof classes[0] || classes[cat].code == NULL)
        cat = QUEEN_ERR_INTERNAL;
    return &classes[cat];
}

/* (SQLSTATE exact or two-character class, message or NULL for any) ->
 * category and, where the wire names it apart from its category, the
 * transaction failure reason. First match wins: exact before class.
 *   22001 string too long, 54000 program limit (a jsonb past PostgreSQL's
 *   limits): too large, not malformed.
 *   23514 is raised only by kv_apply_v1 for a required op that lost.
 *   23505 log_duplicate and 55000 log_ack_rejected: the wire's bundle
 *   conflicts with what is committed (a transaction id seen, a lease gone).
 *   55000 log_group_leased: a seek or delete of a consumer group that holds a
 *   live lease (sql/030), refused rather than moving a consumer's cursor;
 *   55000 log_message_leased: deleting a message a live lease covers (032).
 *   55000 log_message_consumed: moving to the dead letters a message every
 *   group has consumed (039).
 *   55000 streams_config_mismatch: a query registered again under its name
 *   with another pipeline hash (040); 55000 streams_lease_lost: a stream
 *   cycle whose source lease is no longer held (040): both refused, 409.
 *   55000 encryption_key_missing: an unsealed payload for an encrypted
 *   queue (003); a broker with the key would have sealed it: 503, retry.
 *   54000 tenant_*_limit: a per-tenant limit of 001/033, not a size.
 *   Classes 08 (connection), 53 (resources), 57 (operator intervention,
 *   statement_timeout), 58 (system error: I/O) and the two concurrency
 *   codes may succeed on a retry; class 42 means the schema is older than
 *   the broker. */
static const struct state_row {
    const char *state, *message;
    queen_error_category category;
    const char *wire_reason; /* NULL: the category's */
} state_rows[] = {
    {"23514", NULL, QUEEN_ERR_PRECONDITION, NULL},
    {"23505", "log_duplicate", QUEEN_ERR_CONFLICT, "duplicate"},
    {"55000", "log_ack_rejected", QUEEN_ERR_CONFLICT, "ack_rejected"},
    {"55000", "log_group_leased", QUEEN_ERR_CONFLICT, NULL},
    {"55000", "log_message_leased", QUEEN_ERR_CONFLICT, NULL},
    {"55000", "log_message_consumed", QUEEN_ERR_CONFLICT, NULL},
    {"55000", "encryption_key_missing", QUEEN_ERR_UNAVAILABLE, NULL},
    {"55000", "streams_config_mismatch", QUEEN_ERR_CONFLICT, NULL},
    {"55000", "streams_lease_lost", QUEEN_ERR_CONFLICT, NULL},
    {"XX000", "log_result_misaligned", QUEEN_ERR_INTERNAL, "misaligned"},
    {"XX000", "kv_result_misaligned", QUEEN_ERR_INTERNAL, "misaligned"},
    {"54000", "tenant_queue_limit", QUEEN_ERR_LIMIT_EXCEEDED, NULL},
    {"54000", "tenant_partition_limit", QUEEN_ERR_LIMIT_EXCEEDED, NULL},
    {"54000", "tenant_trace_limit", QUEEN_ERR_LIMIT_EXCEEDED, NULL},
    {"22001", NULL, QUEEN_ERR_TOO_LARGE, NULL},
    {"54000", NULL, QUEEN_ERR_TOO_LARGE, NULL},
    {"22", NULL, QUEEN_ERR_BAD_REQUEST, NULL},
    {"40001", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"40P01", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"08", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"53", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"57", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"58", NULL, QUEEN_ERR_UNAVAILABLE, NULL},
    {"42", NULL, QUEEN_ERR_MISCONFIGURED, NULL},
};

static const struct state_row *row_of(const char *state, const char *message)
{
    if (state == NULL || *state == '\0')
        return NULL;
    for (size_t i = 0; i < sizeof state_rows / sizeof state_rows[0]; i++) {
        const struct state_row *r = &state_rows[i];
        size_t n = strlen(r->state);
        if (strncmp(state, r->state, n) == 0 && (n == 2 ? strlen(state) == 5 : state[n] == '\0') &&
            (r->message == NULL || (message != NULL && strcmp(message, r->message) == 0)))
            return r;
    }
    return NULL;
}

queen_error_category error_category_of(const char *state, const char *message)
{
    if (state == NULL || *state == '\0')
        return QUEEN_ERR_UNAVAILABLE; /* no SQLSTATE: libpq lost the connection */
    const struct state_row *r = row_of(state, message);
    return r ? r->category : QUEEN_ERR_INTERNAL;
}

const char *error_wire_reason(const queen_error *err)
{
    const struct state_row *r = err->sqlstate[0] ? row_of(err->sqlstate, err->reason) : NULL;
    if (r != NULL && r->wire_reason != NULL)
        return r->wire_reason;
    return queen_error_class_of(err->category)->wire_reason;
}

static void clear_precondition(queen_error *err)
{
    err->precondition.index = 0;
    err->precondition.op[0] = err->precondition.ns[0] = err->precondition.key[0] = '\0';
    err->precondition.reason[0] = err->precondition.value[0] = '\0';
    err->precondition.version = 0;
    err->precondition.value_omitted = false;
    err->precondition.value_bytes = 0;
}

void queen_error_set(queen_error *err, queen_error_category cat, const char *reason, const char *fmt, ...)
{
    if (err == NULL)
        return;
    clear_precondition(err);
    err->category = cat;
    err->sqlstate[0] = '\0';
    err->retry_after_s = queen_error_class_of(cat)->retry_after_s;
    snprintf(err->reason, sizeof err->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

/* Our SQL raises opaque ids ("kv_bad_key", "log_bad_queue",
 * "tenant_queue_limit", "encryption_key_missing", "streams_bad_ack");
 * anything else is PostgreSQL's prose and may quote the caller's input. */
static bool is_our_reason(const char *msg, size_t cap)
{
    if (msg == NULL ||
        (strncmp(msg, "kv_", 3) != 0 && strncmp(msg, "log_", 4) != 0 && strncmp(msg, "tenant_", 7) != 0 &&
         strncmp(msg, "encryption_", 11) != 0 && strncmp(msg, "streams_", 8) != 0) ||
        strlen(msg) >= cap)
        return false;
    for (const char *p = msg; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return false;
    return true;
}

/* Decodes the JSON string member `name` of the object text into out
 * (truncated to cap); "" when absent or not a string. */
static void member_string(rawjson_span obj, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    rawjson_span raw;
    if (!rawjson_member(obj, name, &raw) || raw.p[0] != '"')
        return;
    json_t *s = json_loadb(raw.p, raw.len, JSON_DECODE_ANY, NULL);
    if (json_is_string(s))
        snprintf(out, cap, "%s", json_string_value(s));
    json_decref(s);
}

static long long member_int(rawjson_span obj, const char *name, long long fallback)
{
    rawjson_span raw;
    if (!rawjson_member(obj, name, &raw) || raw.len == 0 || raw.len > 30)
        return fallback;
    char buf[32], *end;
    memcpy(buf, raw.p, raw.len);
    buf[raw.len] = '\0';
    long long v = strtoll(buf, &end, 10);
    return *end == '\0' ? v : fallback;
}

/* The DETAIL of a 23514 from kv_apply_v1: {index, op, ns, key, reason,
 * version, value[, valueOmitted, valueBytes]}. The value is kept as
 * PostgreSQL rendered it (0.1 and 20-digit integers stay exact); one too
 * large for the buffer, or dropped by SQL at its DETAIL cap, is reported as
 * omitted with its size, never as null. */
static void parse_precondition(queen_error *err, const char *detail)
{
    clear_precondition(err);
    rawjson_span obj = rawjson_trim((rawjson_span){detail, strlen(detail)});
    err->precondition.index = (int)member_int(obj, "index", -1);
    member_string(obj, "op", err->precondition.op, sizeof err->precondition.op);
    member_string(obj, "ns", err->precondition.ns, sizeof err->precondition.ns);
    member_string(obj, "key", err->precondition.key, sizeof err->precondition.key);
    member_string(obj, "reason", err->precondition.reason, sizeof err->precondition.reason);
    err->precondition.version = member_int(obj, "version", 0);
    rawjson_span omitted, value;
    if (rawjson_member(obj, "valueOmitted", &omitted) && omitted.len == 4 && memcmp(omitted.p, "true", 4) == 0) {
        err->precondition.value_omitted = true;
        err->precondition.value_bytes = (size_t)member_int(obj, "valueBytes", 0);
    } else if (rawjson_member(obj, "value", &value)) {
        if (value.len >= sizeof err->precondition.value) {
            err->precondition.value_omitted = true;
            err->precondition.value_bytes = value.len;
        } else {
            memcpy(err->precondition.value, value.p, value.len);
            err->precondition.value[value.len] = '\0';
        }
    } else {
        snprintf(err->precondition.value, sizeof err->precondition.value, "null");
    }
    /* The detail becomes a line for people; the fields above carry the data. */
    if (err->precondition.op[0] != '\0')
        snprintf(err->detail, sizeof err->detail, "required %s of op %d lost: %s", err->precondition.op,
                 err->precondition.index, err->precondition.reason);
}

void queen_error_from_fields(queen_error *err, const char *state, const char *msg, const char *detail)
{
    if (err == NULL)
        return;
    clear_precondition(err);
    err->category = error_category_of(state, msg);
    err->retry_after_s = queen_error_class_of(err->category)->retry_after_s;
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", state ? state : "");
    if (is_our_reason(msg, sizeof err->reason)) {
        snprintf(err->reason, sizeof err->reason, "%s", msg);
        snprintf(err->detail, sizeof err->detail, "%s", detail ? detail : "");
    } else {
        snprintf(err->reason, sizeof err->reason, "%s", queen_error_class_of(err->category)->reason);
        snprintf(err->detail, sizeof err->detail, "%s%s%s", msg ? msg : "", detail && *detail ? ": " : "",
                 detail ? detail : "");
    }
    if (err->category == QUEEN_ERR_PRECONDITION)
        parse_precondition(err, detail ? detail : "");
}

void queen_error_from_result(queen_error *err, const PGresult *res)
{
    if (err == NULL)
        return;
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (state == NULL) {
        /* libpq's own failure (no server error): its message, on one line. */
        char text[512];
        snprintf(text, sizeof text, "%s", PQresultErrorMessage(res));
        engine_one_line(text);
        /* Past the send the server may have run it: not "unavailable",
         * which tells the caller a repeat is safe. */
        queen_error_set(err, QUEEN_ERR_OUTCOME_UNKNOWN, "db_outcome_unknown", "%s",
                        text[0] ? text : "the database connection was lost during the statement; its outcome is unknown");
        return;
    }
    queen_error_from_fields(err, state, PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY),
                            PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL));
}

char *queen_error_precondition_json(const queen_error *err, int index_offset)
{
    if (err == NULL || err->category != QUEEN_ERR_PRECONDITION)
        return NULL;
    json_t *o = json_pack("{s:i, s:s, s:I}", "failedIndex", index_offset + err->precondition.index, "kvReason",
                          err->precondition.reason, "version", (json_int_t)err->precondition.version);
    if (o != NULL && err->precondition.value_omitted) {
        json_object_set_new(o, "valueOmitted", json_true());
        json_object_set_new(o, "valueBytes", json_integer((json_int_t)err->precondition.value_bytes));
    }
    char *head = o ? json_dumps(o, JSON_COMPACT | JSON_EMBED) : NULL;
    json_decref(o);
    if (head == NULL || err->precondition.value_omitted)
        return head;
    /* The value is spliced as PostgreSQL rendered it: through jansson 0.1
     * would come back as 0.10000000000000001 and 2^64 not at all. Only text
     * that is one whole JSON value is spliced (it came from our SQL). */
    const char *value = err->precondition.value;
    rawjson_span v = rawjson_trim((rawjson_span){value, strlen(value)});
    if (v.len == 0 || rawjson_value_len(v) != v.len)
        v = (rawjson_span){"null", 4};
    char *out = NULL;
    if (asprintf(&out, "%s,\"value\":%.*s", head, (int)v.len, v.p) < 0)
        out = NULL;
    free(head);
    return out;
}
