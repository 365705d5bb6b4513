#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/atomic.h"
#include "../util/common.h"

// The number after "key": within [line, end), or 0 if the key is absent.
static int field(const char *line, const char *end, const char *key, double *out) {
    char pat[64];
    size_t n = (size_t)snprintf(pat, sizeof pat, "\"%s\":", key);
    for (const char *p = line; p + n <= end; p++) {
        if (memcmp(p, pat, n) != 0) continue;
        char *stop;
        double v = strtod(p + n, &stop);
        if (stop == p + n || stop > end) return 0;
        *out = v;
        return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int metrics_load(const char *path, Metrics *m) {
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    if (read_file(path, &text, &len)) return MHAR_ERR;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    m->eval_step = malloc(sizeof(long) * lines);
    m->val_loss = malloc(sizeof(double) * lines);
    double *tps = malloc(sizeof(double) * lines);
    if (!m->eval_step || !m->val_loss || !tps) {
        free(text); free(tps); metrics_free(m);
        return mhar_fail("%s: out of memory reading %zu lines", path, lines);
    }
    int n_tps = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        int complete = end != NULL;   // a kill can leave the last line without its newline
        if (!end) end = line + strlen(line);
        double step, v;
        if (end == line) { line = end + complete; continue; }
        if (!complete || line[0] != '{' || end[-1] != '}' || !field(line, end, "step", &step)) {
            m->skipped_lines++;
        } else if (field(line, end, "val_loss", &v)) {
            if (m->n_evals && m->eval_step[m->n_evals - 1] >= (long)step) {
                // A repeated or earlier step (a run restarted without trimming): drop what it replaces.
                while (m->n_evals && m->eval_step[m->n_evals - 1] >= (long)step) m->n_evals--;
            }
            m->eval_step[m->n_evals] = (long)step;
            m->val_loss[m->n_evals++] = v;
        } else if (field(line, end, "loss", &v)) {
            m->last_step = (long)step;
            m->last_loss = v;
            if (field(line, end, "tok_per_s", &v) && isfinite(v)) tps[n_tps++] = v;
        } else {
            m->skipped_lines++;
        }
        line = end + complete;
    }
    if (n_tps) {
        qsort(tps, n_tps, sizeof *tps, cmp_double);
        m->tok_per_s = n_tps % 2 ? tps[n_tps / 2] : 0.5 * (tps[n_tps / 2 - 1] + tps[n_tps / 2]);
    }
    free(tps);
    free(text);
    return MHAR_OK;
}

void metrics_free(Metrics *m) {
    free(m->eval_step);
    free(m->val_loss);
    memset(m, 0, sizeof *m);
}
