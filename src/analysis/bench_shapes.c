// mhar bench --scaling: baseline and mhar timed over model sizes and
// sequence lengths, each shape in its own child (bench_scheme), written as a
// Markdown table, a JSON file and gnuplot PNGs.
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../io/atomic.h"
#include "../model/config.h"
#include "../model/model.h"
#include "../util/dir.h"
#include "../util/median.h"
#include "../util/memlimit.h"
#include "plot.h"

// The size sweep at 2048 tokens a step keeps the 1b shape to about a minute
// a step on 2 cores; the length sweep holds 4096 tokens a step, so its
// attention cost grows with T while everything else stays.
enum { SIZE_B = 8, SIZE_T = 256, LEN_TOKENS = 4096, LEN_T0 = 256, MAX_SHAPES = 32 };
#define BUDGET_S 20.0   // timed seconds per scheme and shape, at most (at least one step)
#define RAM_SHARE 0.9   // a shape must fit this share of RAM

typedef enum { SHAPE_RUN, SHAPE_SKIPPED, SHAPE_FAILED } ShapeState;

typedef struct {
    const char *sweep, *preset;  // sweep: "preset" or "seq"
    int B, T;
    double est_gb;               // model_train_bytes of the larger scheme
    ShapeState state;
    char why[200];               // skipped or failed: the reason
    BenchSample s[2];            // baseline, mhar (each with the sgemm rate probed between its steps)
} Shape;

static double ram_bytes(void) {
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE), lim = mem_limit_bytes();
    return phys > 0 && phys < lim ? phys : lim;
}

static int plan_shapes(const BenchShapesPlan *p, Shape *sh, int *n) {
    int last = -1;
    for (int i = 0; config_preset_name(i); i++)
        if (strcmp(config_preset_name(i), p->max_preset) == 0) last = i;
    Config c;
    if (last < 0) return mhar_fail("--max-preset '%s' is not a preset (nano, micro, mini, 100m, 350m, 1b)",
                                   p->max_preset);
    if (config_preset(p->preset, &c)) return MHAR_ERR;
    if (p->max_seq < LEN_T0 || p->max_seq > c.max_position_embeddings)
        return mhar_fail("--max-seq %d: the sweep needs %d .. %d (max_position_embeddings of %s)", p->max_seq,
                         LEN_T0, c.max_position_embeddings, p->preset);
    *n = 0;
    for (int i = 0; i <= last; i++) {
        memset(&sh[*n], 0, sizeof sh[*n]);
        sh[*n].sweep = "preset", sh[*n].preset = config_preset_name(i), sh[*n].B = SIZE_B, sh[(*n)++].T = SIZE_T;
    }
    for (int T = LEN_T0; T <= p->max_seq && *n < MAX_SHAPES; T *= 2) {
        memset(&sh[*n], 0, sizeof sh[*n]);
        sh[*n].sweep = "seq", sh[*n].preset = p->preset, sh[*n].B = LEN_TOKENS / T > 0 ? LEN_TOKENS / T : 1;
        sh[(*n)++].T = T;
    }
    return MHAR_OK;
}

// Estimated memory of the larger of the two schemes, against the cap.
static void check_memory(Shape *sh, const BenchScheme *sc, int vocab, double cap, const char *what) {
    for (int k = 0; k < 2; k++) {
        Config c;
        config_preset(sh->preset, &c);
        c.vocab_size = vocab;
        snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", sc[k].mode);
        c.attnres_num_heads = sc[k].heads;
        double b = model_train_bytes(&c, sh->B, sh->T);
        if (b / 1e9 > sh->est_gb) sh->est_gb = b / 1e9;
    }
    if (sh->est_gb * 1e9 > cap) {
        sh->state = SHAPE_SKIPPED;
        snprintf(sh->why, sizeof sh->why, "needs about %.2f GB, more than %s", sh->est_gb, what);
    }
}

// The shape's runs, each with the sgemm probe between its steps that its
// mfu is measured against (a neighbour may come and go during a grid of
// many minutes).
static void run_shape(const BenchShapesPlan *p, Shape *sh, const BenchScheme *sc) {
    for (int k = 0; k < 2 && sh->state == SHAPE_RUN; k++) {
        if (bench_scheme(sh->preset, &sc[k], p->vocab, sh->B, sh->T, p->steps, BUDGET_S, &sh->s[k])) {
            sh->state = SHAPE_FAILED;
            snprintf(sh->why, sizeof sh->why, "%s", mhar_error());
            break;
        }
        fprintf(stderr, "  %-4s %-6s B %2d x T %4d  %-8s %9.0f tok/s  %7.0f MB  (%d steps)\n", sh->sweep, sh->preset,
                sh->B, sh->T, sc[k].name, sh->s[k].tok_s, sh->s[k].peak_mb, sh->s[k].steps);
    }
}

// ---- output ---------------------------------------------------------------------

static double mfu(const BenchSample *s) { return s->flops * s->tok_s / 1e9 / s->sgemm_gflops; }

// The sgemm probes of the shapes that ran (all NAN if none).
static Spread sgemm_spread(const Shape *sh, int n) {
    double v[2 * MAX_SHAPES];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (sh[i].state == SHAPE_RUN) v[m++] = sh[i].s[0].sgemm_gflops, v[m++] = sh[i].s[1].sgemm_gflops;
    return spread(v, m);
}

static char *markdown(const Shape *sh, int n, const BenchShapesPlan *p, double seconds) {
    size_t cap = 65536, len = 0;
    char *md = malloc(cap);
    if (!md) return NULL;
    const Spread sg = sgemm_spread(sh, n);
#define MD(...) (len += (size_t)snprintf(md + len, len < cap ? cap - len : 0, __VA_ARGS__))
    MD("# mhar bench --scaling\n\nbaseline and mhar (H = %d), vocab %d, fp32, median of the timed steps after one "
       "warm-up; mfu against this machine's sgemm rate (2048³) probed between each run's steps (median %.1f "
       "GFLOP/s, range %.1f-%.1f). The whole grid took %.0f s.\n\n",
       p->heads, p->vocab, sg.median, sg.min, sg.max, seconds);
    MD("| sweep | preset | params (M) | B | T | steps (baseline/mhar) | baseline tok/s | mhar tok/s | mhar/baseline tok/s | "
       "baseline mfu | mhar mfu | baseline peak MB | mhar peak MB | mhar/baseline memory |\n");
    MD("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const Shape *s = &sh[i];
        if (s->state != SHAPE_RUN) {
            MD("| %s | %s | | %d | %d | | %s: %s | | | | | | | |\n", s->sweep, s->preset, s->B, s->T,
               s->state == SHAPE_SKIPPED ? "skipped" : "failed", s->why);
            continue;
        }
        const BenchSample *b = &s->s[0], *m = &s->s[1];
        MD("| %s | %s | %.1f | %d | %d | %d/%d | %.0f | %.0f | %.3f | %.1f%% | %.1f%% | %.0f | %.0f | %.3f |\n", s->sweep,
           s->preset, m->params / 1e6, s->B, s->T, b->steps, m->steps, b->tok_s, m->tok_s, m->tok_s / b->tok_s,
           100 * mfu(b), 100 * mfu(m), b->peak_mb, m->peak_mb, m->peak_mb / b->peak_mb);
    }
#undef MD
    if (len >= cap) md[cap - 1] = '\0';
    return md;
}

static cJSON *sample_json(const BenchSample *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tok_per_s", s->tok_s);
    cJSON_AddNumberToObject(o, "sgemm_gflops", s->sgemm_gflops);
    cJSON_AddNumberToObject(o, "mfu", mfu(s));
    cJSON_AddNumberToObject(o, "peak_rss_mb", s->peak_mb);
    cJSON_AddNumberToObject(o, "steps", s->steps);
    cJSON_AddNumberToObject(o, "params", s->params);
    return o;
}

static int write_json(const char *path, const Shape *sh, int n, const BenchShapesPlan *p, double seconds, double ram,
                      double cap) {
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "shapes");
    const Spread sg = sgemm_spread(sh, n);
    if (!isnan(sg.median)) {  // cJSON would write a NaN as null
        cJSON_AddNumberToObject(root, "sgemm_gflops", sg.median);
        cJSON_AddNumberToObject(root, "sgemm_gflops_min", sg.min);
        cJSON_AddNumberToObject(root, "sgemm_gflops_max", sg.max);
    }
    cJSON_AddNumberToObject(root, "heads", p->heads);
    cJSON_AddNumberToObject(root, "vocab", p->vocab);
    cJSON_AddNumberToObject(root, "ram_gb", ram / 1e9);
    cJSON_AddNumberToObject(root, "max_memory_gb", cap / 1e9);
    cJSON_AddNumberToObject(root, "seconds", seconds);
    for (int i = 0; i < n; i++) {
        const Shape *s = &sh[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "sweep", s->sweep);
        cJSON_AddStringToObject(o, "preset", s->preset);
        cJSON_AddNumberToObject(o, "batch", s->B);
        cJSON_AddNumberToObject(o, "seq", s->T);
        cJSON_AddNumberToObject(o, "estimated_gb", s->est_gb);
        cJSON_AddStringToObject(o, "state", s->state == SHAPE_RUN ? "run" : s->state == SHAPE_SKIPPED ? "skipped" : "failed");
        if (s->state != SHAPE_RUN) cJSON_AddStringToObject(o, "reason", s->why);
        else {
            cJSON_AddItemToObject(o, "baseline", sample_json(&s->s[0]));
            cJSON_AddItemToObject(o, "mhar", sample_json(&s->s[1]));
            cJSON_AddNumberToObject(o, "tok_ratio", s->s[1].tok_s / s->s[0].tok_s);
            cJSON_AddNumberToObject(o, "mem_ratio", s->s[1].peak_mb / s->s[0].peak_mb);
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return mhar_fail("%s: out of memory", path);
    size_t len = strlen(text);
    text[len] = '\n';  // cJSON_Print leaves room only for its NUL: write the newline in its place
    int rc = atomic_write_file(path, text, len + 1);
    free(text);
    return rc;
}

// One sweep's four plots. x: parameters (M) for the size sweep, T for the other.
static int draw_sweep(const char *dir, const char *sweep, const Shape *sh, int n) {
    double x[MAX_SHAPES], y[6][MAX_SHAPES];
    int m = 0;
    for (int i = 0; i < n; i++) {
        const Shape *s = &sh[i];
        if (strcmp(s->sweep, sweep) || s->state != SHAPE_RUN) continue;
        x[m] = strcmp(sweep, "preset") ? s->T : round(s->s[1].params / 1e5) / 10;  // 0.1M: readable ticks
        for (int k = 0; k < 2; k++) {
            y[k][m] = s->s[k].tok_s;
            y[2 + k][m] = 100 * mfu(&s->s[k]);
            y[4 + k][m] = s->s[k].peak_mb;
        }
        m++;
    }
    if (m == 0) return 0;  // every shape skipped or failed: nothing to draw
    double tok_r[MAX_SHAPES], mem_r[MAX_SHAPES], one = 1;
    for (int i = 0; i < m; i++) tok_r[i] = y[1][i] / y[0][i], mem_r[i] = y[5][i] / y[4][i];
    const int by_size = strcmp(sweep, "preset") == 0;
    const char *xl = by_size ? "parameters (M)" : "sequence length T (4096 tokens a step)";
    const char *what[3] = {"tok_s", "mfu", "peak_mb"}, *yl[3] = {"tokens/s", "mfu (%)", "peak RSS (MB)"};
    int worst = 0;
    for (int k = 0; k < 4; k++) {
        char name[64], title[128];
        snprintf(name, sizeof name, "scaling_%s_%s", sweep, k < 3 ? what[k] : "ratio");
        snprintf(title, sizeof title, "mhar bench --scaling: %s by %s%s", k < 3 ? yl[k] : "mhar / baseline",
                 by_size ? "model size" : "sequence length", by_size ? " (B 8 x T 256)" : "");
        Plot pl = {dir, name, title, xl, k < 3 ? yl[k] : "ratio", NAN, 1};
        PlotSeries s2[3] = {{"baseline", SERIES_LINES, x, k < 3 ? y[2 * k] : tok_r, NULL, m},
                            {"mhar", SERIES_LINES, x, k < 3 ? y[2 * k + 1] : mem_r, NULL, m},
                            {"parity", SERIES_HLINE, NULL, &one, NULL, 1}};
        if (k == 3) s2[0].title = "tokens/s", s2[1].title = "peak memory";
        int rc = plot_draw(&pl, s2, k == 3 ? 3 : 2);
        if (rc < 0) return MHAR_ERR;
        if (rc > worst) worst = rc;
    }
    return worst;  // 1: gnuplot is not installed
}

int bench_shapes(const BenchShapesPlan *p, char **md) {
    static Shape sh[MAX_SHAPES];
    int n = 0;
    *md = NULL;
    if (plan_shapes(p, sh, &n) || mkdir_p(p->dir)) return MHAR_ERR;
    const BenchScheme sc[2] = {{"baseline", "baseline", 1, 0}, {"mhar", "mhar", p->heads, 0}};
    Config probe;
    config_preset("nano", &probe);
    probe.vocab_size = p->vocab;
    snprintf(probe.attnres_mode, sizeof probe.attnres_mode, "mhar");
    probe.attnres_num_heads = p->heads;
    if (config_validate(&probe, "bench --scaling")) return MHAR_ERR;  // H must divide every width
    const double ram = ram_bytes(), cap = p->max_gb > 0 ? p->max_gb * 1e9 : RAM_SHARE * ram, t0 = now_seconds();
    char what[96];
    if (p->max_gb > 0) snprintf(what, sizeof what, "--max-memory %.2f GB", p->max_gb);
    else snprintf(what, sizeof what, "%.0f%% of the %.1f GB of RAM", 100 * RAM_SHARE, ram / 1e9);
    // Children first: no OpenMP thread may exist in this process before a fork.
    for (int i = 0; i < n; i++) {
        check_memory(&sh[i], sc, p->vocab, cap, what);
        if (sh[i].state == SHAPE_SKIPPED)
            fprintf(stderr, "  %-4s %-6s B %2d x T %4d  skipped: %s\n", sh[i].sweep, sh[i].preset, sh[i].B, sh[i].T,
                    sh[i].why);
        run_shape(p, &sh[i], sc);
        if (sh[i].state == SHAPE_FAILED) fprintf(stderr, "  %s %s failed: %s\n", sh[i].sweep, sh[i].preset, sh[i].why);
    }
    const double seconds = now_seconds() - t0;
    char path[4096];
    snprintf(path, sizeof path, "%s/scaling.json", p->dir);
    if (write_json(path, sh, n, p, seconds, ram, cap)) return MHAR_ERR;
    *md = markdown(sh, n, p, seconds);
    snprintf(path, sizeof path, "%s/scaling.md", p->dir);
    if (!*md || atomic_write_file(path, *md, strlen(*md))) return MHAR_ERR;
    int a = draw_sweep(p->dir, "preset", sh, n), b = a < 0 ? a : draw_sweep(p->dir, "seq", sh, n);
    if (a < 0 || b < 0) return MHAR_ERR;
    if (a || b) fprintf(stderr, "warning: gnuplot is not installed: %s has the plots' .dat and .gp, no PNG\n", p->dir);
    return MHAR_OK;
}
