/* error: the error registry (see error.h). The registry file reasons.txt
 * decides the categories' presentation and each reason's category (the
 * tables generated from it, reasons.h); state_rows here classifies what
 * PostgreSQL raised on its own. The HTTP edge, the transaction failure body
 * and queen.h's retry advice all read them; nothing restates them. */
#include "error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawjson.h"
#include "reasons.h"
#include "util.h"

/* The registry (reasons.txt, generated into queen_error_classes and
 * queen_reasons): a category's presentation, and each reason's category. */
const queen_error_class *queen_error_class_of(queen_error_category cat)
{
    if ((int)cat < 0 || (size_t)cat >= QUEEN_ERROR_CATEGORIES || queen_error_classes[cat].reason == NULL)
        cat = QUEEN_ERR_INTERNAL;
    return &queen_error_classes[cat];
}

static int reason_cmp(const void *key, const void *row)
{
    return strcmp(key, ((const queen_reason_row *)row)->id);
}

const queen_reason_row *queen_reason_find(const char *id)
{
    if (id == NULL)
        return NULL;
    return bsearch(id, queen_reasons, queen_reason_count, sizeof queen_reasons[0], reason_cmp);
}

/* A reason our SQL raised, with the SQLSTATE the registry gives it: its
 * category and wire reason are the registry's (log_duplicate is a conflict
 * whatever 23505 means elsewhere). */
static const queen_reason_row *sql_reason(const char *state, const char *message)
{
    const queen_reason_row *r = queen_reason_find(message);
    if (r == NULL || r->sqlstate == NULL || state == NULL || strcmp(r->sqlstate, state) != 0 ||
        r->category == QUEEN_REASON_EDGE_ONLY)
        return NULL;
    return r;
}

/* An error PostgreSQL raised on its own, by SQLSTATE (exact or
 * two-character class) -> category. First match wins: exact before class.
 *   22001 string too long, 54000 program limit (a jsonb past PostgreSQL's
 *   limits): too large, not malformed.
 *   23514 check violation: kv_apply_v1's lost required op raises it.
 *   Classes 08 (connection), 53 (resources), 57 (operator intervention,
 *   statement_timeout), 58 (system error: I/O) and the two concurrency
 *   codes may succeed on a retry; class 42 means the schema is older than
 *   the broker. Our SQL's own reasons carry their category in the registry. */
static const struct state_row {
    const char *state;
    queen_error_category category;
} state_rows[] = {
    {"23514", QUEEN_ERR_PRECONDITION}, {"22001", QUEEN_ERR_TOO_LARGE},   {"54000", QUEEN_ERR_TOO_LARGE},
    {"22", QUEEN_ERR_BAD_REQUEST},     {"40001", QUEEN_ERR_UNAVAILABLE}, {"40P01", QUEEN_ERR_UNAVAILABLE},
    {"08", QUEEN_ERR_UNAVAILABLE},     {"53", QUEEN_ERR_UNAVAILABLE},    {"57", QUEEN_ERR_UNAVAILABLE},
    {"58", QUEEN_ERR_UNAVAILABLE},     {"42", QUEEN_ERR_MISCONFIGURED},
};

static const struct state_row *row_of(const char *state)
{
    for (size_t i = 0; i < sizeof state_rows / sizeof state_rows[0]; i++) {
        const struct state_row *r = &state_rows[i];
        size_t n = strlen(r->state);
        if (strncmp(state, r->state, n) == 0 && (n == 2 ? strlen(state) == 5 : state[n] == '\0'))
            return r;
    }
    return NULL;
}

queen_error_category error_category_of(const char *state, const char *message)
{
    if (state == NULL || *state == '\0')
        return QUEEN_ERR_UNAVAILABLE; /* no SQLSTATE: libpq lost the connection */
    const queen_reason_row *ours = sql_reason(state, message);
    if (ours != NULL)
        return ours->category;
    const struct state_row *r = row_of(state);
    return r ? r->category : QUEEN_ERR_INTERNAL;
}

const char *error_wire_reason(const queen_error *err)
{
    const queen_reason_row *r = err->sqlstate[0] ? sql_reason(err->sqlstate, err->reason) : NULL;
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

/* Our SQL raises registered ids ("kv_bad_key", "log_bad_queue",
 * "tenant_queue_limit"); anything else is PostgreSQL's prose and may quote
 * the caller's input. */
static bool is_our_reason(const char *msg, size_t cap)
{
    return msg != NULL && strlen(msg) < cap && queen_reason_find(msg) != NULL;
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
