/* No C source builds SQL against the kv table (the engine calls
 * the functions: kv_apply_v1, kv_list_v1, ... and nothing else).
 *
 * Scans every file under src/ for SQL naming the table: the C string
 * literals of each file (adjacent literals joined, as the compiler joins
 * them; comments skipped, so a comment may talk about queen.kv) are matched,
 * case-insensitively, against
 *   - queen.kv not followed by an identifier character (queen.kv_apply_v1 is
 *     a function and fine), quoted forms included ("queen"."kv");
 *   - FROM/INTO/UPDATE/JOIN/TABLE kv (an unqualified table name).
 * Fails listing every offender as file:line. The scanner itself is tested
 * on positive and negative samples first, so a scanner that matches nothing
 * cannot pass the real scan silently. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const patterns[] = {
    "\"?queen\"?[[:space:]]*\\.[[:space:]]*\"?kv\"?([^a-z0-9_]|$)",
    "(^|[^a-z0-9_])(from|into|update|join|table)[[:space:]]+(only[[:space:]]+)?\"?kv\"?([^a-z0-9_.]|$)",
};

/* One SQL-ish string: the joined literals and the line it starts on. */
typedef struct literal {
    char *text;
    int line;
} literal;

static void push_char(char **buf, size_t *len, size_t *cap, char c)
{
    if (*len + 2 > *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *buf = realloc(*buf, *cap);
    }
    (*buf)[(*len)++] = c;
    (*buf)[*len] = '\0';
}

/* Extracts the string literals of C source text. Adjacent literals
 * separated only by whitespace, comments or a line break are joined (that
 * is how "SELECT ... FROM queen." "kv" reaches the compiler). Escapes are
 * kept as two characters except \" and \\, which become the character. */
static literal *extract_literals(const char *src, size_t *count)
{
    literal *out = NULL;
    size_t n = 0;
    int line = 1;
    const char *p = src;
    char *cur = NULL;
    size_t len = 0, cap = 0;
    int cur_line = 0;
    bool open_joinable = false; /* a literal just ended; another may join it */
    while (*p) {
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (p[0] == '/' && p[1] == '*') {
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n')
                    line++;
                p++;
            }
            if (*p)
                p += 2;
            continue;
        }
        if (*p == '\'') { /* a char literal: '"' must not open a string */
            p++;
            while (*p && *p != '\'') {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p)
                p++;
            open_joinable = false;
            continue;
        }
        if (*p == '"') {
            if (!open_joinable) {
                if (cur != NULL) {
                    out = realloc(out, (n + 1) * sizeof *out);
                    out[n++] = (literal){cur, cur_line};
                }
                cur = NULL;
                len = cap = 0;
                push_char(&cur, &len, &cap, '\0');
                len = 0;
                cur_line = line;
            }
            p++;
            while (*p && *p != '"' && *p != '\n') {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\')) {
                    push_char(&cur, &len, &cap, p[1]);
                    p += 2;
                    continue;
                }
                if (*p == '\\' && p[1] == 'n') { /* a newline in SQL is whitespace */
                    push_char(&cur, &len, &cap, ' ');
                    p += 2;
                    continue;
                }
                push_char(&cur, &len, &cap, *p++);
            }
            if (*p == '"')
                p++;
            open_joinable = true;
            continue;
        }
        if (*p == '\n')
            line++;
        /* A backslash-newline (macro continuation) and whitespace keep the
         * literal joinable; anything else ends the run. */
        if (!(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\\'))
            open_joinable = false;
        p++;
    }
    if (cur != NULL) {
        out = realloc(out, (n + 1) * sizeof *out);
        out[n++] = (literal){cur, cur_line};
    }
    *count = n;
    return out;
}

/* Appends "name:line: text" of every offending literal of src to report
 * (may be NULL). Returns the number of offenders. */
static int scan_source(const char *name, const char *src, char **report)
{
    regex_t re[sizeof patterns / sizeof patterns[0]];
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        if (regcomp(&re[i], patterns[i], REG_EXTENDED | REG_ICASE | REG_NOSUB) != 0)
            fail_msg("pattern %zu does not compile", i);
    size_t n;
    literal *lits = extract_literals(src, &n);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        bool bad = false;
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++)
            bad = bad || regexec(&re[k], lits[i].text, 0, NULL, 0) == 0;
        if (bad) {
            found++;
            if (report != NULL) {
                size_t old = *report ? strlen(*report) : 0;
                size_t add = strlen(name) + strlen(lits[i].text) + 32;
                *report = realloc(*report, old + add);
                snprintf(*report + old, add, "%s:%d: %.200s\n", name, lits[i].line, lits[i].text);
            }
        }
        free(lits[i].text);
    }
    free(lits);
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        regfree(&re[i]);
    return found;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    size_t got = fread(buf, 1, (size_t)size, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* Recursively scans dir; counts files looked at in *files. */
static int scan_tree(const char *dir, int *files, char **report)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            found += scan_tree(path, files, report);
        } else if (S_ISREG(st.st_mode)) {
            char *src = read_file(path);
            if (src != NULL) {
                (*files)++;
                found += scan_source(path, src, report);
                free(src);
            }
        }
    }
    closedir(d);
    return found;
}

/* Table-driven: each sample is a piece of C source and whether the scanner
 * must flag it. */
static void scanner_flags_table_sql_and_spares_functions(void **state)
{
    (void)state;
    static const struct {
        const char *src;
        int offenders;
    } cases[] = {
        {"const char *s = \"SELECT value FROM queen.kv WHERE key = $1\";", 1},
        {"x(\"delete from QUEEN.KV where true\");", 1},
        {"x(\"INSERT INTO \\\"queen\\\".\\\"kv\\\" VALUES (1)\");", 1},
        {"x(\"SELECT 1 FROM queen.\" \"kv\");", 1},                     /* joined literals */
        {"#define Q \"SELECT * \" \\\n  \"FROM queen.kv k\"\n", 1},      /* across a macro line */
        {"x(\"update kv set value = 1\");", 1},
        {"x(\"SELECT * FROM kv\");", 1},
        {"x(\"SELECT * FROM a JOIN kv ON true\");", 1},
        {"x(\"TRUNCATE TABLE queen.kv\");", 1},
        {"x(\"SELECT count(*) FROM queen.kv\"); y(\"FROM kv;\");", 2},
        {"x(\"SELECT queen.kv_apply_v1($1::jsonb, $2::uuid, now(), $3)\");", 0},
        {"x(\"SELECT queen.kv_list_v1($1)\"); y(\"queen.kv_expire_step_v1\");", 0},
        {"/* Never builds SQL against queen.kv */ int x;", 0},           /* comments are prose */
        {"// reads FROM kv in a comment\nint y;", 0},
        {"x(\"FROM kv_apply\"); y(\"from kvx\");", 0},
        {"char c = '\"'; x(\"SELECT 1\"); /* queen.kv */", 0},
        {"x(\"the kv ops\"); y(\"kv\");", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = scan_source("sample", cases[i].src, NULL);
        if (got != cases[i].offenders)
            fail_msg("case %zu: %d offenders, expected %d: %s", i, got, cases[i].offenders, cases[i].src);
    }
}

static void no_source_under_src_names_the_kv_table(void **state)
{
    (void)state;
    struct stat st;
    if (stat("src/engine", &st) != 0 || !S_ISDIR(st.st_mode))
        fail_msg("src/engine not found: run from the repository root (scripts/test.sh does)");
    int files = 0;
    char *report = NULL;
    int found = scan_tree("src", &files, &report);
    if (files < 5)
        fail_msg("only %d files scanned under src/: the scan is not looking where the code is", files);
    if (found > 0) {
        print_error("SQL against the kv table (call the kv_*_v1 functions instead):\n%s", report);
        free(report);
        fail_msg("%d offending string(s) under src/", found);
    }
    free(report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scanner_flags_table_sql_and_spares_functions),
        cmocka_unit_test(no_source_under_src_names_the_kv_table),
    };
    return cmocka_run_group_tests_name("engine_no_kv_sql", tests, NULL, NULL);
}
