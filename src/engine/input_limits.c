/* input_limits: see input_limits.h. */
#include "input_limits.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include <jansson.h>

#include "schema.h"

static const struct limit_name {
    const char *name;
    size_t offset;
} limit_names[] = {
    {"kvMaxOps", offsetof(input_limits, kv_max_ops)},
    {"kvMaxKeys", offsetof(input_limits, kv_max_keys)},
    {"wireMaxKvOps", offsetof(input_limits, wire_max_kv_ops)},
    {"wireMaxKvKeys", offsetof(input_limits, wire_max_kv_keys)},
    {"kvMaxKeyBytes", offsetof(input_limits, kv_max_key_bytes)},
    {"kvMaxNsChars", offsetof(input_limits, kv_max_ns_chars)},
    {"pageDefault", offsetof(input_limits, page_default)},
    {"pageMax", offsetof(input_limits, page_max)},
    {"kvDetailMaxBytes", offsetof(input_limits, kv_detail_max_bytes)},
};

int input_limits_parse(const char *sql_text, input_limits *out)
{
    memset(out, 0, sizeof *out);
    /* The object is the one string literal of input_limits_v1's body. */
    const char *fn = sql_text ? strstr(sql_text, "FUNCTION queen.input_limits_v1()") : NULL;
    const char *open = fn ? strstr(fn, "SELECT '") : NULL;
    const char *close = open ? strstr(open, "'::jsonb") : NULL;
    if (close == NULL)
        return -1;
    open += strlen("SELECT '");
    json_t *doc = json_loadb(open, (size_t)(close - open), 0, NULL);
    int rc = json_is_object(doc) ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < sizeof limit_names / sizeof limit_names[0]; i++) {
        json_t *v = json_object_get(doc, limit_names[i].name);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000000000)
            rc = -1;
        else
            *(int *)((char *)out + limit_names[i].offset) = (int)json_integer_value(v);
    }
    json_decref(doc);
    if (rc != 0)
        memset(out, 0, sizeof *out);
    return rc;
}

static input_limits loaded;
static bool loaded_ok;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    for (size_t i = 0; i < queen_sql_file_count; i++)
        if (strcmp(queen_sql_files[i].name, "limits.sql") == 0)
            loaded_ok = input_limits_parse(queen_sql_files[i].text, &loaded) == 0;
}

const input_limits *input_limits_get(void)
{
    pthread_once(&load_once, load);
    return &loaded;
}

bool input_limits_ok(void)
{
    pthread_once(&load_once, load);
    return loaded_ok;
}
