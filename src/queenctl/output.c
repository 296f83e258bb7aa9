/* output: aligned tables for a terminal, JSON lines for everything else. */
#include "ctl.h"

#include <stdlib.h>
#include <string.h>

struct ctl_table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* row-major, headers first */
};

ctl_table *ctl_table_new(int ncols, const char *const *headers)
{
    ctl_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    ctl_table_row(t, headers);
    return t;
}

/* A cell shows one line: control characters become spaces. */
static char *cell_text(const char *s)
{
    char *c = strdup(s != NULL ? s : "-");
    for (char *p = c; p != NULL && *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    return c;
}

void ctl_table_row(ctl_table *t, const char *const *cells)
{
    if (t == NULL)
        return;
    if (t->nrows == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, nc * (size_t)t->ncols * sizeof *c);
        if (c == NULL)
            return;
        t->cells = c;
        t->cap = nc;
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = cell_text(cells[i]);
    t->nrows++;
}

void ctl_table_print(ctl_table *t, FILE *out)
{
    if (t == NULL)
        return;
    size_t *w = calloc((size_t)t->ncols, sizeof *w);
    for (size_t r = 0; w != NULL && r < t->nrows; r++)
        for (int i = 0; i < t->ncols; i++) {
            size_t l = strlen(t->cells[r * (size_t)t->ncols + (size_t)i]);
            if (l > w[i])
                w[i] = l;
        }
    for (size_t r = 0; w != NULL && r < t->nrows; r++) {
        for (int i = 0; i < t->ncols; i++) {
            const char *c = t->cells[r * (size_t)t->ncols + (size_t)i];
            if (i == t->ncols - 1)
                fprintf(out, "%s\n", c);
            else
                fprintf(out, "%-*s  ", (int)w[i], c);
        }
    }
    for (size_t k = 0; k < t->nrows * (size_t)t->ncols; k++)
        free(t->cells[k]);
    free(t->cells);
    free(w);
    free(t);
}

void ctl_json_line(FILE *out, const char *json)
{
    bool in_string = false, escaped = false;
    for (const char *p = json; *p; p++) {
        char c = *p;
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '\n' || c == '\r') {
            continue; /* whitespace between tokens: a JSON line stays one line */
        }
        fputc(c, out);
    }
    fputc('\n', out);
}
