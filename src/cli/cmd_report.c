// mhar report: what a sweep found. Reads every DIR/runs/*/ (run.json,
// metrics.jsonl, checkpoint state, probe.json) and writes DIR/report.md,
// DIR/report.json and gnuplot PNGs under DIR/plots/.
//
// The figure of merit is SPEC §4's: per run, the mean of its last 11
// validation evaluations. Only finished runs enter the statistics (a run cut
// short would be compared at another point of its schedule). Over seeds:
// mean and sample standard deviation; against baseline (and attnres): the
// paired difference per seed -- the same seed gives both runs the same data
// order and the same initial weights of every shared tensor -- with its
// mean, standard deviation, count and t = mean / (sd / sqrt(n)).
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/grid.h"
#include "analysis/metrics.h"
#include "analysis/stats.h"
#include "args.h"
#include "commands.h"
#include "io/atomic.h"
#include "util/common.h"
#include "model/config.h"
#include "report_plot.h"

static const char *usage =
    "usage: mhar report DIR [--no-plots]\n\n"
    "Summarises the sweep in DIR (mhar sweep --out DIR) into DIR/report.md and\n"
    "DIR/report.json, with PNG plots by gnuplot in DIR/plots/: validation loss\n"
    "per scheme (mean over seeds), its tail, and loss against the routing head\n"
    "count H (H = 1: attnres; also on the seeds every H has, when they differ).\n"
    "The metric of a run is the mean of its last 11 validation evaluations (all\n"
    "of them, said so, when it has fewer); tables give mean +- sample sd over\n"
    "seeds and the paired difference to baseline (same seed: same init and data\n"
    "order). Unfinished runs are listed, not counted.\n"
    "probe.json files (mhar probe --run) are tabled beside the losses.";

typedef struct {
    SweepRun r;
    char dir[4300];
    int done;
    long step;
    Metrics m;
    int have_metrics;
    double tail;
    int tail_used;
    double tail_slope;     // nats per 1000 steps over the metric's window
    char commits[4][48];   // distinct commits of its starts
    int n_commits, dirty, n_starts;
    char train_sha[65], val_sha[65], manifest_sha[65];
    cJSON *probe;
} Run;

typedef struct {
    char preset[32], method[64], residual[16];
    int heads, blocks;
    double lr;
    int *idx, n;        // finished runs, by seed order
    int n_all;          // finished or not
    double *vals;
    uint64_t *seeds;
    double mean, sd;
    int min_used;
} Group;

typedef struct { double mean, sd, t; int n, better; } Paired;

static int residual_rank(const char *residual);
static int preset_cmp(const char *a, const char *b);

// Presets by size (the order of config.c's table), unknown ones last by name.
static int preset_cmp(const char *a, const char *b) {
    static const char *const order[] = {"nano", "micro", "mini", "100m", "350m", "1b"};
    int ra = 6, rb = 6;
    for (int i = 0; i < 6; i++) {
        if (!strcmp(a, order[i])) ra = i;
        if (!strcmp(b, order[i])) rb = i;
    }
    return ra != rb ? ra - rb : strcmp(a, b);
}

static int cmp_group(const void *pa, const void *pb) {
    const Group *a = pa, *b = pb;
    int c = preset_cmp(a->preset, b->preset);
    if (c) return c;
    if (a->lr != b->lr) return a->lr < b->lr ? -1 : 1;
    c = residual_rank(a->residual) - residual_rank(b->residual);
    if (c) return c;
    if (a->heads != b->heads) return a->heads - b->heads;
    return a->blocks - b->blocks;
}


static const char *jstr(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double jnum(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int residual_rank(const char *residual) {
    static const char *const order[] = {"baseline", "hc", "denseformer", "attnres", "mhar", "block"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(residual, order[i])) return i;
    return 6;
}

// Runs in the order of the tables: preset, lr, scheme, H, blocks, seed.
static int cmp_run(const void *pa, const void *pb) {
    const SweepRun *a = &((const Run *)pa)->r, *b = &((const Run *)pb)->r;
    int c = preset_cmp(a->opt.preset, b->opt.preset);
    if (c) return c;
    if (a->opt.lr != b->opt.lr) return a->opt.lr < b->opt.lr ? -1 : 1;
    if ((c = residual_rank(a->opt.residual) - residual_rank(b->opt.residual))) return c;
    if (a->opt.heads != b->opt.heads) return a->opt.heads - b->opt.heads;
    if (a->opt.blocks != b->opt.blocks) return a->opt.blocks - b->opt.blocks;
    return (a->opt.seed > b->opt.seed) - (a->opt.seed < b->opt.seed);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Every DIR/runs/*/run.json, sorted by name.
static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int load_runs(const char *dir, Run **out, int *n_out) {
    char runs_dir[4300];
    if (path_join(runs_dir, sizeof runs_dir, dir, "runs")) return MHAR_ERR;
    DIR *dp = opendir(runs_dir);
    if (!dp) return mhar_fail("%s: cannot open (is %s a sweep directory? mhar sweep --out %s)", runs_dir, dir, dir);
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, sizeof *names * cap);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    Run *runs = calloc(n ? n : 1, sizeof *runs);
    int k = 0, rc = runs ? MHAR_OK : mhar_fail("out of memory");
    for (int i = 0; i < n && !rc; i++) {
        Run *r = &runs[k];
        char path[4400];
        if (path_join(r->dir, sizeof r->dir, runs_dir, names[i]) || path_join(path, sizeof path, r->dir, "run.json"))
            continue;
        cJSON *rec = json_read_file(path);
        if (!rec) {
            fprintf(stderr, "note: %s: no readable run.json (not made by mhar sweep): left out\n", r->dir);
            continue;
        }
        if (sweep_run_from_json(rec, path, &r->r)) {
            fprintf(stderr, "note: %s: left out\n", mhar_error());
            cJSON_Delete(rec);
            continue;
        }
        snprintf(r->train_sha, sizeof r->train_sha, "%s", jstr(rec, "train_sha256"));
        snprintf(r->val_sha, sizeof r->val_sha, "%s", jstr(rec, "val_sha256"));
        snprintf(r->manifest_sha, sizeof r->manifest_sha, "%s", jstr(rec, "manifest_sha256"));
        const cJSON *starts = cJSON_GetObjectItemCaseSensitive(rec, "starts"), *s;
        cJSON_ArrayForEach(s, starts) {
            r->n_starts++;
            const char *c = jstr(s, "commit");
            int seen = 0;
            for (int q = 0; q < r->n_commits; q++) seen |= !strncmp(r->commits[q], c, 40);
            if (!seen && r->n_commits < 4) snprintf(r->commits[r->n_commits++], 48, "%.40s", c);
            r->dirty |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "dirty"));
        }
        cJSON_Delete(rec);
        long steps;
        if (sweep_run_progress(r->dir, &r->step, &steps) == 0) r->done = r->step >= steps;
        if (path_join(path, sizeof path, r->dir, "metrics.jsonl") == MHAR_OK && access(path, F_OK) == 0)
            r->have_metrics = metrics_load(path, &r->m) == MHAR_OK;
        r->tail = r->have_metrics ? stats_tail_mean(r->m.val_loss, r->m.n_evals, STATS_TAIL_EVALS, &r->tail_used) : NAN;
        if (!r->have_metrics || r->m.n_evals == 0) r->done = 0;   // finished but nothing to report
        r->tail_slope = NAN;
        if (r->have_metrics && r->m.n_evals >= 2) {
            double *xs = malloc(sizeof(double) * r->m.n_evals);
            if (xs) {
                for (int e = 0; e < r->m.n_evals; e++) xs[e] = (double)r->m.eval_step[e];
                r->tail_slope = 1000 * stats_tail_slope(xs, r->m.val_loss, r->m.n_evals, STATS_TAIL_EVALS);
                free(xs);
            }
        }
        if (path_join(path, sizeof path, r->dir, "probe.json") == MHAR_OK) r->probe = json_read_file(path);
        k++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) { free(runs); return rc; }
    qsort(runs, k, sizeof *runs, cmp_run);
    *out = runs;
    *n_out = k;
    return MHAR_OK;
}

static int same_group(const Group *g, const SweepRun *r) {
    return !strcmp(g->preset, r->opt.preset) && !strcmp(g->method, r->method) && g->lr == r->opt.lr;
}

static int cmp_u64_idx(const void *a, const void *b, void *runs) {
    const Run *ra = &((const Run *)runs)[*(const int *)a], *rb = &((const Run *)runs)[*(const int *)b];
    return (ra->r.opt.seed > rb->r.opt.seed) - (ra->r.opt.seed < rb->r.opt.seed);
}

static int build_groups(Run *runs, int n, Group **out, int *n_out) {
    Group *gs = calloc(n ? n : 1, sizeof *gs);
    if (!gs) return mhar_fail("out of memory");
    int ng = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < ng && !same_group(&gs[k], &runs[i].r)) k++;
        Group *g = &gs[k];
        if (k == ng) {
            ng++;
            snprintf(g->preset, sizeof g->preset, "%s", runs[i].r.opt.preset);
            snprintf(g->method, sizeof g->method, "%s", runs[i].r.method);
            snprintf(g->residual, sizeof g->residual, "%s", runs[i].r.opt.residual);
            g->heads = runs[i].r.opt.heads;
            g->blocks = runs[i].r.opt.blocks;
            g->lr = runs[i].r.opt.lr;
            g->idx = calloc(n, sizeof(int));
            g->vals = calloc(n, sizeof(double));
            g->seeds = calloc(n, sizeof(uint64_t));
            g->min_used = 1 << 30;
            if (!g->idx || !g->vals || !g->seeds) return mhar_fail("out of memory");
        }
        g->n_all++;
        if (runs[i].done) g->idx[g->n++] = i;
    }
    for (int k = 0; k < ng; k++) {
        Group *g = &gs[k];
        qsort_r(g->idx, g->n, sizeof(int), cmp_u64_idx, runs);
        for (int i = 0; i < g->n; i++) {
            const Run *r = &runs[g->idx[i]];
            g->vals[i] = r->tail;
            g->seeds[i] = r->r.opt.seed;
            if (r->tail_used < g->min_used) g->min_used = r->tail_used;
        }
        g->mean = stats_mean(g->vals, g->n);
        g->sd = stats_sd(g->vals, g->n);
    }
    qsort(gs, ng, sizeof *gs, cmp_group);
    *out = gs;
    *n_out = ng;
    return MHAR_OK;
}

static void free_groups(Group *gs, int n) {
    for (int i = 0; i < n; i++) { free(gs[i].idx); free(gs[i].vals); free(gs[i].seeds); }
    free(gs);
}

// The group of `method` at the same preset and lr, or NULL.
static const Group *find_group(const Group *gs, int n, const Group *like, const char *method) {
    for (int i = 0; i < n; i++)
        if (!strcmp(gs[i].preset, like->preset) && gs[i].lr == like->lr && !strcmp(gs[i].method, method)) return &gs[i];
    return NULL;
}

static Paired paired(const Group *a, const Group *b) {
    Paired p = {NAN, NAN, NAN, 0, 0};
    if (!a || !b || a == b) return p;
    double *d = malloc(sizeof(double) * (a->n ? a->n : 1));
    if (!d) return p;
    p.n = stats_paired_diff(a->vals, a->seeds, a->n, b->vals, b->seeds, b->n, d);
    p.mean = stats_mean(d, p.n);
    p.sd = stats_sd(d, p.n);
    p.t = p.n > 1 && p.sd > 0 ? p.mean / (p.sd / sqrt(p.n)) : NAN;
    for (int i = 0; i < p.n; i++) p.better += d[i] < 0;
    free(d);
    return p;
}

// "3.1234 ± 0.0012" / "3.1234 (one seed)" / "-"
static const char *fmt_ms(char *buf, size_t cap, double m, double sd, int n) {
    if (n == 0 || !isfinite(m)) snprintf(buf, cap, n ? "%.4f" : "-", m);
    else if (fabs(m) < 0.01) snprintf(buf, cap, n == 1 ? "%.4g" : "%.4g ± %.2g", m, sd);   // small probe figures
    else if (n == 1) snprintf(buf, cap, "%.4f", m);
    else snprintf(buf, cap, "%.4f ± %.4f", m, sd);
    return buf;
}

static const char *fmt_paired(char *buf, size_t cap, const Paired *p) {
    if (p->n == 0) snprintf(buf, cap, "-");
    else if (p->n == 1) snprintf(buf, cap, "%+.4f (n 1)", p->mean);
    else if (!isfinite(p->t)) snprintf(buf, cap, "%+.4f ± %.4f (n %d)", p->mean, p->sd, p->n);
    else snprintf(buf, cap, "%+.4f ± %.4f (n %d, t %.1f)", p->mean, p->sd, p->n, p->t);
    return buf;
}

// " (sd 0.0012, n 3, t -4.1)" after a paired mean (nothing for one pair).
static void put_spread(FILE *md, const Paired *p) {
    if (p->n < 2) return;
    fprintf(md, " (sd %.4f, n %d", p->sd, p->n);
    if (isfinite(p->t)) fprintf(md, ", t %.1f", p->t);
    fprintf(md, ")");
}

static int is_heads_method(const Group *g) {
    return !strcmp(g->residual, "attnres") || !strcmp(g->residual, "mhar");
}

// Plot files are named by preset (and lr when the sweep has several).
static void plot_key(char *buf, size_t cap, const Group *g, int multi_lr) {
    if (multi_lr) snprintf(buf, cap, "%s_lr%g", g->preset, g->lr);
    else snprintf(buf, cap, "%s", g->preset);
}

static void section_label(char *buf, size_t cap, const Group *g, int multi_lr) {
    if (multi_lr) snprintf(buf, cap, "preset %s, lr %g", g->preset, g->lr);
    else snprintf(buf, cap, "preset %s", g->preset);
}

typedef struct {
    int drawn, missing_gnuplot, failed;
    char first_error[512];
} PlotState;

static void note_plot(PlotState *ps, int rc) {
    if (rc == 0) ps->drawn++;
    else if (rc == 1) ps->missing_gnuplot = 1;
    else {
        if (!ps->failed) snprintf(ps->first_error, sizeof ps->first_error, "%s", mhar_error());
        ps->failed++;
    }
}

// Validation curves (mean over the finished seeds at each evaluation) of the
// groups [lo, hi) -- one preset (and lr) -- and the same from the first
// step of the tail window on.
static void plot_curves(const char *plots, const Run *runs, const Group *gs, int lo, int hi, const char *key,
                        const char *label, PlotState *ps, FILE *md) {
    int n = hi - lo, ns = 0;
    PlotSeries *s = calloc(n, sizeof *s);
    double **xy = calloc(2 * n, sizeof *xy);
    double tail_from = INFINITY;
    for (int i = 0; s && xy && i < n; i++) {
        const Group *g = &gs[lo + i];
        if (g->n == 0) continue;
        const Metrics *m0 = &runs[g->idx[0]].m;
        double *x = xy[2 * i] = calloc(m0->n_evals ? m0->n_evals : 1, sizeof(double));
        double *y = xy[2 * i + 1] = calloc(m0->n_evals ? m0->n_evals : 1, sizeof(double));
        if (!x || !y) continue;
        int k = 0;
        for (int e = 0; e < m0->n_evals; e++) {
            double sum = 0;
            int cnt = 0;
            for (int r = 0; r < g->n; r++) {
                const Metrics *m = &runs[g->idx[r]].m;
                for (int f = 0; f < m->n_evals; f++)
                    if (m->eval_step[f] == m0->eval_step[e]) { sum += m->val_loss[f]; cnt++; break; }
            }
            x[k] = (double)m0->eval_step[e];
            y[k++] = sum / cnt;
        }
        int used = m0->n_evals < STATS_TAIL_EVALS ? m0->n_evals : STATS_TAIL_EVALS;
        if (used) tail_from = fmin(tail_from, (double)m0->eval_step[m0->n_evals - used]);
        s[ns++] = (PlotSeries){g->method, SERIES_LINES, x, y, NULL, k};
    }
    if (ns) {
        char name[200], title[300];
        snprintf(name, sizeof name, "val_%s", key);
        snprintf(title, sizeof title, "validation loss, mean over seeds (%s)", label);
        Plot p = {plots, name, title, "step", "validation loss (nats/token)", NAN, 0};
        note_plot(ps, plot_draw(&p, s, ns));
        fprintf(md, "![validation loss, %s](plots/%s.png)\n", label, name);
        snprintf(name, sizeof name, "val_tail_%s", key);
        snprintf(title, sizeof title, "validation loss over the last %d evaluations, mean over seeds (%s)",
                 STATS_TAIL_EVALS, label);
        p.name = name;
        p.title = title;
        p.xmin = tail_from;
        note_plot(ps, plot_draw(&p, s, ns));
        fprintf(md, "![validation loss, tail, %s](plots/%s.png)\n\n", label, name);
    }
    for (int i = 0; xy && i < 2 * n; i++) free(xy[i]);
    free(xy);
    free(s);
}

static int group_heads(const Group *g) { return !strcmp(g->residual, "attnres") ? 1 : g->heads; }

// The attnres/mhar groups of [lo, hi) with runs, one per H (attnres and
// mhar-h1 are the same model: the first is kept), sorted by H.
static int heads_groups(const Group *gs, int lo, int hi, const Group **out, int cap) {
    int n = 0;
    for (int i = lo; i < hi && n < cap; i++) {
        if (!is_heads_method(&gs[i]) || gs[i].n == 0) continue;
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= group_heads(out[k]) == group_heads(&gs[i]);
        if (!dup) out[n++] = &gs[i];
    }
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && group_heads(out[b]) < group_heads(out[b - 1]); b--) {
            const Group *t = out[b]; out[b] = out[b - 1]; out[b - 1] = t;
        }
    return n;
}

// Loss against H on the seeds that every H has: when the head counts were run
// on different seeds (say H = 8 on three, H = 2 on one), their plain means
// differ by the seeds' own spread as well, so the comparison is also made on
// the common seeds. Fills common[0..) (cap: hg[0]->n) and y[k], and returns
// how many seeds are common, or 0 when every H has the same seeds (nothing
// to add) or none in common.
static int heads_on_common_seeds(const Group *const *hg, int n, uint64_t *common, double *y) {
    const uint64_t *keys[64] = {0};
    int counts[64] = {0}, same = 1;
    if (n < 2 || n > 64) return 0;
    for (int k = 0; k < n; k++) keys[k] = hg[k]->seeds, counts[k] = hg[k]->n;
    int nc = stats_common_keys(keys, counts, n, common);
    for (int k = 0; k < n; k++) same &= hg[k]->n == nc;
    if (same || nc == 0) return 0;
    for (int k = 0; k < n; k++) y[k] = stats_mean_on_keys(hg[k]->vals, hg[k]->seeds, hg[k]->n, common, nc);
    return nc;
}

// Two plots against H (attnres as H = 1): the metric, mean ± one sample sd
// over seeds, with baseline, hc and denseformer as horizontal references; and
// the paired difference to baseline, mean ± sd over seeds -- the seeds' own
// spread (the same in every scheme) cancels there, so it shows what the
// first plot's error bars can hide.
static void plot_heads(const char *plots, const Group *gs, int lo, int hi, const char *key, const char *label,
                       PlotState *ps, FILE *md) {
    const Group *hg[64];
    double x[64], y[64], e[64], ref[3];
    int n = heads_groups(gs, lo, hi, hg, 64), nr = 0;
    if (n < 2) return;
    for (int k = 0; k < n; k++) { x[k] = group_heads(hg[k]); y[k] = hg[k]->mean; e[k] = hg[k]->sd; }
    PlotSeries s[5];
    s[0] = (PlotSeries){"MHAR (H = 1: attnres), mean ± sd over seeds", SERIES_ERRORBARS, x, y, e, n};
    int ns = 1;
    uint64_t common[256];
    double yc[64];
    if (hg[0]->n <= 256 && heads_on_common_seeds(hg, n, common, yc))
        s[ns++] = (PlotSeries){"mean on the seeds every H has", SERIES_LINES, x, yc, NULL, n};
    const char *refs[3] = {"baseline", "hc", "denseformer"};
    const Group *rg[3];
    for (int k = 0; k < 3; k++) {
        const Group *g = rg[k] = find_group(gs + lo, hi - lo, &gs[lo], refs[k]);
        if (!g || g->n == 0) continue;
        ref[nr] = g->mean;
        s[ns++] = (PlotSeries){refs[k], SERIES_HLINE, NULL, &ref[nr], NULL, 1};
        nr++;
    }
    char name[200], title[300];
    snprintf(name, sizeof name, "heads_%s", key);
    snprintf(title, sizeof title, "val loss (mean of the last %d evals) against routing heads H, %s",
             STATS_TAIL_EVALS, label);
    Plot p = {plots, name, title, "routing heads H", "validation loss (nats/token)", NAN, 1};
    note_plot(ps, plot_draw(&p, s, ns));
    fprintf(md, "![loss against H, %s](plots/%s.png)\n", label, name);

    if (!rg[0] || rg[0]->n == 0) { fprintf(md, "\n"); return; }
    int m = 0;
    for (int k = 0; k < n; k++) {
        Paired d = paired(hg[k], rg[0]);
        if (d.n == 0) continue;
        x[m] = group_heads(hg[k]); y[m] = d.mean; e[m] = d.sd;
        m++;
    }
    if (m < 2) { fprintf(md, "\n"); return; }
    s[0] = (PlotSeries){"MHAR (H = 1: attnres) - baseline, same seed: mean ± sd", SERIES_ERRORBARS, x, y, e, m};
    ref[0] = 0;
    s[1] = (PlotSeries){"baseline", SERIES_HLINE, NULL, &ref[0], NULL, 1};
    ns = 2;
    for (int k = 1; k < 3; k++) {
        Paired d = paired(rg[k], rg[0]);
        if (d.n == 0) continue;
        ref[k] = d.mean;
        s[ns++] = (PlotSeries){refs[k], SERIES_HLINE, NULL, &ref[k], NULL, 1};
    }
    snprintf(name, sizeof name, "heads_delta_%s", key);
    snprintf(title, sizeof title, "paired difference to baseline (mean of the last %d evals) against H, %s",
             STATS_TAIL_EVALS, label);
    p.name = name;
    p.title = title;
    p.ylabel = "method - baseline, same seed (nats/token)";
    note_plot(ps, plot_draw(&p, s, ns));
    fprintf(md, "![paired difference to baseline against H, %s](plots/%s.png)\n\n", label, name);
}

// With several learning rates: each method at its own best lr (the lowest
// mean metric over seeds), and its paired difference to baseline at
// baseline's best lr -- every method gets the best of the same lr set.
static void best_lr_table(FILE *md, const Group *gs, int ng) {
    fprintf(md, "### Each method at its best learning rate\n\nThe lr with the lowest mean metric of the same lr "
                "set, per method and preset; the difference to baseline pairs seeds with baseline at its own best "
                "lr.\n\n| preset | method | best lr | loss (mean ± sd, n) | − baseline (at its best lr) |\n"
                "|---|---|---|---|---|\n");
    for (int i = 0; i < ng; i++) {
        const Group *best = NULL;
        int first = 1;
        for (int k = 0; k < i; k++) first &= strcmp(gs[k].preset, gs[i].preset) || strcmp(gs[k].method, gs[i].method);
        if (!first) continue;
        const Group *bb = NULL;
        for (int k = 0; k < ng; k++) {
            if (strcmp(gs[k].preset, gs[i].preset) || !gs[k].n || !isfinite(gs[k].mean)) continue;
            if (!strcmp(gs[k].method, gs[i].method) && (!best || gs[k].mean < best->mean)) best = &gs[k];
            if (!strcmp(gs[k].method, "baseline") && (!bb || gs[k].mean < bb->mean)) bb = &gs[k];
        }
        if (!best) continue;
        char a[64], b[96];
        Paired p = paired(best, bb);
        fprintf(md, "| %s | %s | %g | %s (n %d) | %s |\n", best->preset, best->method, best->lr,
                fmt_ms(a, sizeof a, best->mean, best->sd, best->n), best->n, fmt_paired(b, sizeof b, &p));
    }
    fprintf(md, "\n");
}

static void describe_preset(FILE *md, const char *preset) {
    Config c;
    if (config_preset(preset, &c)) return;
    fprintf(md, "- preset `%s`: d %d, %d layers, %d/%d heads of %d, ffn %d\n", preset, c.hidden_size,
            c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size);
}

// Plain sentences for one preset (and lr): the best method, each method
// against baseline, and the shape of loss in H.
static void headline(FILE *md, const Group *gs, int lo, int hi) {
    const Group *best = NULL, *base = find_group(gs + lo, hi - lo, &gs[lo], "baseline");
    for (int i = lo; i < hi; i++)
        if (gs[i].n && isfinite(gs[i].mean) && (!best || gs[i].mean < best->mean)) best = &gs[i];
    if (!best) { fprintf(md, "No finished runs.\n\n"); return; }
    fprintf(md, "- Lowest mean: **%s**, %.4f (n %d).\n", best->method, best->mean, best->n);
    for (int i = lo; base && base->n && i < hi; i++) {
        const Group *g = &gs[i];
        if (g == base || g->n == 0) continue;
        Paired p = paired(g, base);
        if (p.n == 0) continue;
        fprintf(md, "- %s − baseline: %+.4f", g->method, p.mean);
        put_spread(md, &p);
        fprintf(md, "; %s on %d of %d seeds.\n", "lower", p.better, p.n);
    }
    // loss against H
    const Group *h[64];
    int n = heads_groups(gs, lo, hi, h, 64);
    if (n >= 2) {
        int imin = 0;
        for (int k = 1; k < n; k++) if (h[k]->mean < h[imin]->mean) imin = k;
        fprintf(md, "- Loss against H:");
        for (int k = 0; k < n; k++)
            fprintf(md, "%s H=%d %.4f", k ? "," : "", group_heads(h[k]), h[k]->mean);
        int hmin = group_heads(h[imin]);
        fprintf(md, ". Minimum at H=%d", hmin);
        if (imin == 0) fprintf(md, ", the smallest H tried");
        else if (imin == n - 1) fprintf(md, ", the largest H tried");
        else fprintf(md, ", inside the range tried: the smallest H (%d) is %+.4f above it, the largest (%d) %+.4f",
                     group_heads(h[0]), h[0]->mean - h[imin]->mean, group_heads(h[n - 1]),
                     h[n - 1]->mean - h[imin]->mean);
        fprintf(md, ".\n");
        uint64_t common[256];
        double yc[64];
        int nc = h[0]->n <= 256 ? heads_on_common_seeds(h, n, common, yc) : 0;
        if (nc) {
            int cmin = 0;
            for (int k = 1; k < n; k++) if (yc[k] < yc[cmin]) cmin = k;
            fprintf(md, "- The head counts were not all run on the same seeds; on the %s every H has (",
                    nc == 1 ? "seed" : "seeds");
            for (int c = 0; c < nc; c++) fprintf(md, "%s%llu", c ? ", " : "", (unsigned long long)common[c]);
            fprintf(md, "):");
            for (int k = 0; k < n; k++) fprintf(md, "%s H=%d %.4f", k ? "," : "", group_heads(h[k]), yc[k]);
            fprintf(md, ". Minimum at H=%d.\n", group_heads(h[cmin]));
        }
        const Group *att = find_group(gs + lo, hi - lo, &gs[lo], "attnres");
        if (att && h[imin] != att) {
            Paired p = paired(h[imin], att);
            if (p.n) {
                fprintf(md, "- %s − attnres: %+.4f", h[imin]->method, p.mean);
                put_spread(md, &p);
                fprintf(md, "; lower on %d of %d seeds.\n", p.better, p.n);
            }
        }
    }
    fprintf(md, "\n");
}

static cJSON *group_json(const Group *gs, int ng, const Group *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "preset", g->preset);
    cJSON_AddStringToObject(o, "method", g->method);
    cJSON_AddNumberToObject(o, "lr", g->lr);
    cJSON_AddNumberToObject(o, "n", g->n);
    cJSON_AddNumberToObject(o, "n_runs", g->n_all);
    if (g->n) cJSON_AddNumberToObject(o, "mean", g->mean);
    if (g->n > 1) cJSON_AddNumberToObject(o, "sd", g->sd);
    if (g->n) cJSON_AddNumberToObject(o, "min_evals_in_tail", g->min_used);
    cJSON *v = cJSON_AddArrayToObject(o, "values"), *sd = cJSON_AddArrayToObject(o, "seeds");
    for (int i = 0; i < g->n; i++) {
        cJSON_AddItemToArray(v, cJSON_CreateNumber(g->vals[i]));
        cJSON_AddItemToArray(sd, cJSON_CreateNumber((double)g->seeds[i]));
    }
    const char *refs[2] = {"baseline", "attnres"};
    for (int k = 0; k < 2; k++) {
        Paired p = paired(g, find_group(gs, ng, g, refs[k]));
        if (!p.n) continue;
        cJSON *q = cJSON_CreateObject();
        cJSON_AddNumberToObject(q, "n", p.n);
        cJSON_AddNumberToObject(q, "mean", p.mean);
        if (p.n > 1) { cJSON_AddNumberToObject(q, "sd", p.sd); cJSON_AddNumberToObject(q, "t", p.t); }
        cJSON_AddNumberToObject(q, "lower", p.better);
        char key[32];
        snprintf(key, sizeof key, "minus_%s", refs[k]);
        cJSON_AddItemToObject(o, key, q);
    }
    return o;
}

static int write_report(const char *dir, Run *runs, int n, Group *gs, int ng, int plots_on) {
    char path[4300], plots[4300];
    if (path_join(path, sizeof path, dir, "report.md") || path_join(plots, sizeof plots, dir, "plots")) return MHAR_ERR;
    if (plots_on && mkdir(plots, 0755) && access(plots, F_OK) != 0)
        return mhar_fail("%s: cannot create: %s", plots, mhar_error());
    AtomicFile af;
    if (atomic_open(&af, path)) return MHAR_ERR;
    FILE *md = af.f;
    cJSON *sweep = NULL;
    char sp[4300];
    if (path_join(sp, sizeof sp, dir, "sweep.json") == MHAR_OK) sweep = json_read_file(sp);
    const cJSON *grid = sweep ? cJSON_GetObjectItemCaseSensitive(sweep, "grid") : NULL;
    int n_done = 0, multi_lr = 0, few_evals = 0;
    for (int i = 0; i < n; i++) {
        n_done += runs[i].done;
        multi_lr |= runs[i].r.opt.lr != runs[0].r.opt.lr;
        few_evals |= runs[i].done && runs[i].tail_used < STATS_TAIL_EVALS;
    }

    fprintf(md, "# Sweep report: `%s`\n\n", dir);
    if (grid && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(grid, "name")))
        fprintf(md, "Sweep **%s**. ", jstr(grid, "name"));
    // runs of the grid (sweep.json) that have no directory yet
    const cJSON *grid_runs = sweep ? cJSON_GetObjectItemCaseSensitive(sweep, "runs") : NULL, *gr;
    int n_unstarted = 0;
    cJSON_ArrayForEach(gr, grid_runs) {
        int found = 0;
        for (int i = 0; i < n && !found; i++) found = !strcmp(runs[i].r.name, jstr(gr, "name"));
        n_unstarted += !found;
    }
    fprintf(md, "%d runs, %d finished%s", n + n_unstarted, n_done,
            n_done < n + n_unstarted ? " (unfinished runs are listed at the end and left out of every statistic)" : "");
    fprintf(md, ". Written by `mhar report`; lower loss is better.\n\n");

    // ---- setup
    fprintf(md, "## Setup\n\n");
    const char *seen[16];
    int n_seen = 0;
    for (int i = 0; i < n && n_seen < 16; i++) {
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= !strcmp(seen[k], runs[i].r.opt.preset);
        if (!dup) { seen[n_seen++] = runs[i].r.opt.preset; describe_preset(md, runs[i].r.opt.preset); }
    }
    if (n) {
        const SweepRun *r = &runs[0].r;
        fprintf(md, "- recipe (SPEC §4, scaled down): %ld steps of %d × %d tokens (gradient accumulation %d); AdamW "
                    "β (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter, clip 1.0; peak lr ",
                r->opt.steps, r->opt.batch, r->opt.seq, r->opt.accum);
        for (int i = 0, first = 1; i < ng; i++) {
            int dup = 0;
            for (int k = 0; k < i; k++) dup |= gs[k].lr == gs[i].lr;
            if (!dup) { fprintf(md, "%s%g", first ? "" : ", ", gs[i].lr); first = 0; }
        }
        fprintf(md, ", %ld warm-up steps then cosine to 0.1× peak; validation every %d steps on %d batches "
                    "(%ld tokens)\n", r->opt.warmup, r->opt.eval_every, r->opt.eval_batches,
                (long)r->opt.eval_batches * r->opt.batch * r->opt.seq);
        for (int i = 1; i < n; i++) {
            const SweepRun *q = &runs[i].r;
            if (q->opt.steps != r->opt.steps || q->opt.batch != r->opt.batch || q->opt.seq != r->opt.seq || q->opt.accum != r->opt.accum ||
                q->opt.warmup != r->opt.warmup || q->opt.eval_every != r->opt.eval_every || q->opt.eval_batches != r->opt.eval_batches) {
                fprintf(md, "- **note**: the runs do not all share this recipe (e.g. %s); see the run table\n",
                        q->name);
                break;
            }
        }
        fprintf(md, "- data: train `%s`%s%.16s%s, validation `%s`%s%.16s%s\n", r->opt.train[0] ? r->opt.train : "(built-in synthetic)",
                runs[0].train_sha[0] ? " (sha256 " : "", runs[0].train_sha, runs[0].train_sha[0] ? "…)" : "",
                r->opt.val[0] ? r->opt.val : "(built-in synthetic)", runs[0].val_sha[0] ? " (sha256 " : "", runs[0].val_sha,
                runs[0].val_sha[0] ? "…)" : "");
        const char *mpath = sweep ? jstr(sweep, "manifest") : "";
        if (mpath[0]) fprintf(md, "- corpus manifest: `%s`%s%s\n", mpath, runs[0].manifest_sha[0] ? " sha256 " : "",
                              runs[0].manifest_sha);
        else if (runs[0].manifest_sha[0]) fprintf(md, "- corpus manifest: sha256 %s\n", runs[0].manifest_sha);
        else fprintf(md, "- corpus manifest: none recorded\n");
        for (int i = 1; i < n; i++)
            if (strcmp(runs[i].train_sha, runs[0].train_sha) || strcmp(runs[i].val_sha, runs[0].val_sha) ||
                strcmp(runs[i].manifest_sha, runs[0].manifest_sha)) {
                fprintf(md, "- **note**: run %s was trained on other data (other hashes) than %s\n", runs[i].r.name,
                        runs[0].r.name);
                break;
            }
        char commits[16][48];
        int nc = 0, dirty = 0;
        for (int i = 0; i < n; i++) {
            dirty |= runs[i].dirty;
            for (int c = 0; c < runs[i].n_commits; c++) {
                int dup = 0;
                for (int k = 0; k < nc; k++) dup |= !strcmp(commits[k], runs[i].commits[c]);
                if (!dup && nc < 16) snprintf(commits[nc++], 48, "%s", runs[i].commits[c]);
            }
        }
        fprintf(md, "- code: commit%s", nc == 1 ? "" : "s");
        for (int k = 0; k < nc; k++) fprintf(md, "%s `%.12s`", k ? "," : "", commits[k]);
        fprintf(md, "%s%s\n", dirty ? " (with uncommitted changes)" : "",
                nc > 1 ? " (**more than one**: see run.json `starts` for which commit trained what)" : "");
    }
    fprintf(md, "- metric: per run, the mean of its last %d validation evaluations (SPEC §4)%s\n",
            STATS_TAIL_EVALS, few_evals ? "; **some runs have fewer evaluations: their metric averages all of "
                                          "them** (the count is in the tables)" : "");
    {   // have the curves flattened? the least-squares slope inside the metric's window
        double lo = INFINITY, hi = -INFINITY, *sl = malloc(sizeof(double) * (n ? n : 1));
        int ns = 0;
        for (int i = 0; i < n && sl; i++)
            if (runs[i].done && isfinite(runs[i].tail_slope)) {
                sl[ns++] = runs[i].tail_slope;
                lo = fmin(lo, runs[i].tail_slope), hi = fmax(hi, runs[i].tail_slope);
            }
        if (ns) {
            qsort(sl, ns, sizeof *sl, cmp_double);
            const double med = ns % 2 ? sl[ns / 2] : 0.5 * (sl[ns / 2 - 1] + sl[ns / 2]);
            fprintf(md, "- flatness: inside the metric's window the validation loss still changes by %+.3f nats "
                        "per 1000 steps (median over %d finished runs; range %+.3f to %+.3f); per run in the "
                        "last table\n", med, ns, lo, hi);
        }
        free(sl);
    }
    fprintf(md, "\n");

    // ---- method × preset
    fprintf(md, "## Results\n\n### Validation loss: mean ± sample sd over seeds of the metric\n\n| method |");
    for (int k = 0; k < n_seen; k++) fprintf(md, " %s |", seen[k]);
    fprintf(md, "\n|---|");
    for (int k = 0; k < n_seen; k++) fprintf(md, "---|");
    fprintf(md, "\n");
    for (int i = 0; i < ng; i++) {
        int dup = 0;   // one row per (method, lr)
        for (int k = 0; k < i; k++) dup |= !strcmp(gs[k].method, gs[i].method) && gs[k].lr == gs[i].lr;
        if (dup) continue;
        fprintf(md, "| %s", gs[i].method);
        if (multi_lr) fprintf(md, " (lr %g)", gs[i].lr);
        fprintf(md, " |");
        for (int k = 0; k < n_seen; k++) {
            const Group *g = NULL;
            for (int q = 0; q < ng; q++)
                if (!strcmp(gs[q].preset, seen[k]) && !strcmp(gs[q].method, gs[i].method) && gs[q].lr == gs[i].lr)
                    g = &gs[q];
            char b[64];
            if (!g || !g->n) fprintf(md, " - |");
            else fprintf(md, " %s (n %d%s) |", fmt_ms(b, sizeof b, g->mean, g->sd, g->n), g->n,
                         g->min_used < STATS_TAIL_EVALS ? ", fewer evals" : "");
        }
        fprintf(md, "\n");
    }
    fprintf(md, "\n");

    // ---- per preset (and lr): paired differences, headline, plots
    PlotState ps = {0};
    for (int lo = 0; lo < ng;) {
        int hi = lo + 1;
        while (hi < ng && !strcmp(gs[hi].preset, gs[lo].preset) && gs[hi].lr == gs[lo].lr) hi++;
        char label[128], key[128];
        section_label(label, sizeof label, &gs[lo], multi_lr);
        plot_key(key, sizeof key, &gs[lo], multi_lr);
        const Group *base = find_group(gs + lo, hi - lo, &gs[lo], "baseline");
        const Group *att = find_group(gs + lo, hi - lo, &gs[lo], "attnres");
        fprintf(md, "### %s\n\n", label);
        fprintf(md, "Paired differences are method − reference on the same seed (negative: the method is "
                    "better), as mean ± sd (n pairs, t = mean / (sd/√n), n − 1 degrees of freedom: two-sided p < 0.05 needs |t| > "
                    "12.71, 4.30, 3.18, 2.78 for n = 2, 3, 4, 5).\n\n");
        fprintf(md, "| method | runs done | evals in metric | loss (mean ± sd) | − baseline | lower than baseline on | − attnres |\n"
                    "|---|---|---|---|---|---|---|\n");
        for (int i = lo; i < hi; i++) {
            const Group *g = &gs[i];
            char a[64], b[96], c[96];
            Paired pb = paired(g, base), pa = is_heads_method(g) || !strcmp(g->residual, "block") ? paired(g, att)
                                                                                                   : (Paired){0};
            fprintf(md, "| %s | %d of %d | ", g->method, g->n, g->n_all);
            if (g->n) fprintf(md, "%d%s", g->min_used, g->min_used < STATS_TAIL_EVALS ? " (fewer than 11)" : "");
            else fprintf(md, "-");
            fprintf(md, " | %s | %s | ", fmt_ms(a, sizeof a, g->mean, g->sd, g->n), fmt_paired(b, sizeof b, &pb));
            if (pb.n) fprintf(md, "%d of %d seeds", pb.better, pb.n);
            else fprintf(md, "-");
            fprintf(md, " | %s |\n", fmt_paired(c, sizeof c, &pa));
        }
        fprintf(md, "\n");
        headline(md, gs, lo, hi);
        if (plots_on) {
            plot_curves(plots, runs, gs, lo, hi, key, label, &ps, md);
            plot_heads(plots, gs, lo, hi, key, label, &ps, md);
        }
        lo = hi;
    }
    if (multi_lr) best_lr_table(md, gs, ng);
    if (plots_on && ps.missing_gnuplot)
        fprintf(md, "*Plots not drawn: gnuplot is not installed (Debian: `apt-get install gnuplot-nox`); the data "
                    "and scripts are in `plots/`, draw them with `gnuplot FILE.gp` there.*\n\n");
    if (plots_on && ps.failed) fprintf(md, "*%d plots failed: %s*\n\n", ps.failed, ps.first_error);

    // ---- probes
    int n_probe = 0;
    for (int i = 0; i < n; i++) n_probe += runs[i].probe != NULL;
    if (n_probe) {
        fprintf(md, "## Probe (mhar probe)\n\nattnres runs: width disagreement, the mean over slices, sites and "
                    "held-out tokens of KL(a_s ‖ α) (SPEC §4); mhar runs: each head's deviation from the head "
                    "consensus, KL(w_h ‖ mean_h w_h). The null uses random queries of matched norm; excess = "
                    "trained − null. Nats.\n\n| run | probe | S or H | tokens | trained | null | excess |\n"
                    "|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n; i++) {
            const cJSON *p = runs[i].probe;
            if (!p) continue;
            int width = !strcmp(jstr(p, "probe"), "width_disagreement");
            fprintf(md, "| %s | %s | %s %.0f | %.0f | %.4g | %.4g | %.4g |\n", runs[i].r.name,
                    width ? "width disagreement" : "head deviation", width ? "S" : "H",
                    width ? jnum(p, "slices") : jnum(p, "heads"), jnum(p, "tokens"), jnum(p, "trained"),
                    jnum(p, "null"), jnum(p, "excess"));
        }
        // over seeds, per method: a probe figure varies with the seed as the loss does
        fprintf(md, "\nOver seeds (mean ± sample sd):\n\n| preset | method | n | trained | null | excess |\n"
                    "|---|---|---|---|---|---|\n");
        for (int k = 0; k < ng; k++) {
            double tr[256], nl[256], ex[256];
            int m = 0;
            for (int i = 0; i < n && m < 256; i++) {
                const cJSON *p = runs[i].probe;
                if (!p || !same_group(&gs[k], &runs[i].r)) continue;
                tr[m] = jnum(p, "trained"); nl[m] = jnum(p, "null"); ex[m] = jnum(p, "excess");
                m++;
            }
            if (!m) continue;
            char a[64], b[64], c[64];
            fprintf(md, "| %s | %s | %d | %s | %s | %s |\n", gs[k].preset, gs[k].method, m,
                    fmt_ms(a, sizeof a, stats_mean(tr, m), stats_sd(tr, m), m),
                    fmt_ms(b, sizeof b, stats_mean(nl, m), stats_sd(nl, m), m),
                    fmt_ms(c, sizeof c, stats_mean(ex, m), stats_sd(ex, m), m));
        }
        fprintf(md, "\nPublished (SPEC §4, S = 4): trained 0.273 / 0.570 / 0.701 vs null 0.038 / 0.058 / 0.095 at "
                    "100M / 350M / 1B.\n\n");
    }

    // ---- runs
    fprintf(md, "## Runs\n\n| run | seed | status | step | evals | metric (evals) | tail slope /1k steps | last val | "
                "last train loss | tok/s | starts |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const Run *r = &runs[i];
        fprintf(md, "| %s | %llu | %s | %ld/%ld | %d | ", r->r.name, (unsigned long long)r->r.opt.seed,
                r->done ? "done" : r->step >= 0 ? "unfinished" : "not started", r->step < 0 ? 0 : r->step,
                r->r.opt.steps, r->have_metrics ? r->m.n_evals : 0);
        if (r->have_metrics && r->m.n_evals) fprintf(md, "%.4f (%d)", r->tail, r->tail_used);
        else fprintf(md, "-");
        if (isfinite(r->tail_slope)) fprintf(md, " | %+.3f", r->tail_slope);
        else fprintf(md, " | -");
        if (r->have_metrics && r->m.n_evals) fprintf(md, " | %.4f", r->m.val_loss[r->m.n_evals - 1]);
        else fprintf(md, " | -");
        if (r->have_metrics && r->m.last_step) fprintf(md, " | %.4f | %.0f", r->m.last_loss, r->m.tok_per_s);
        else fprintf(md, " | - | -");
        fprintf(md, " | %d |\n", r->n_starts);
    }
    cJSON_ArrayForEach(gr, grid_runs) {
        int found = 0;
        for (int i = 0; i < n && !found; i++) found = !strcmp(runs[i].r.name, jstr(gr, "name"));
        if (!found) fprintf(md, "| %s | - | not started | 0/%.0f | 0 | - | - | - | - | - | 0 |\n", jstr(gr, "name"),
                            jnum(gr, "steps"));
    }
    fprintf(md, "\n");
    cJSON_Delete(sweep);
    int rc = atomic_commit(&af);

    // report.json: the same numbers for scripts
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "dir", dir);
    cJSON_AddStringToObject(j, "metric", "mean of the last 11 validation evaluations of each finished run");
    cJSON *ga = cJSON_AddArrayToObject(j, "groups"), *ra = cJSON_AddArrayToObject(j, "runs");
    for (int i = 0; i < ng; i++) cJSON_AddItemToArray(ga, group_json(gs, ng, &gs[i]));
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", runs[i].r.name);
        cJSON_AddBoolToObject(o, "done", runs[i].done);
        cJSON_AddNumberToObject(o, "step", runs[i].step < 0 ? 0 : runs[i].step);
        cJSON_AddNumberToObject(o, "evals", runs[i].have_metrics ? runs[i].m.n_evals : 0);
        if (isfinite(runs[i].tail)) cJSON_AddNumberToObject(o, "metric", runs[i].tail);
        cJSON_AddNumberToObject(o, "evals_in_metric", runs[i].tail_used);
        if (isfinite(runs[i].tail_slope)) cJSON_AddNumberToObject(o, "tail_slope_per_1k_steps", runs[i].tail_slope);
        if (runs[i].probe) cJSON_AddItemToObject(o, "probe", cJSON_Duplicate(runs[i].probe, 1));
        cJSON_AddItemToArray(ra, o);
    }
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!rc && path_join(path, sizeof path, dir, "report.json") == MHAR_OK)
        rc = text ? atomic_write_file(path, text, strlen(text)) : mhar_fail("out of memory");
    free(text);
    if (!rc && plots_on) {
        if (ps.missing_gnuplot) fprintf(stderr, "note: gnuplot is not installed: plots not drawn (apt-get install gnuplot-nox)\n");
        if (ps.failed) fprintf(stderr, "warning: %d plots failed: %s\n", ps.failed, ps.first_error);
    }
    if (!rc) printf("wrote %s/report.md, %s/report.json and %d plots (%d runs, %d finished)\n", dir, dir, ps.drawn, n,
                    n_done);
    return rc;
}

int cmd_report(int argc, char **argv) {
    const char *dir = NULL;
    int no_plots = 0;
    if (argc > 0 && strncmp(argv[0], "--", 2) != 0) { dir = argv[0]; argc--; argv++; }
    Flag flags[] = {
        {"no-plots", FLAG_BOOL, &no_plots, "write report.md and report.json only", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!dir) { fprintf(stderr, "error: give the sweep directory: mhar report DIR (see --help)\n"); return 2; }
    Run *runs = NULL;
    Group *gs = NULL;
    int n = 0, ng = 0;
    int rc = load_runs(dir, &runs, &n);
    if (!rc && n == 0) rc = mhar_fail("%s/runs: no runs with a run.json yet", dir);
    if (!rc) rc = build_groups(runs, n, &gs, &ng);
    if (!rc) rc = write_report(dir, runs, n, gs, ng, !no_plots);
    if (rc) fprintf(stderr, "error: %s\n", mhar_error());
    for (int i = 0; i < n; i++) { metrics_free(&runs[i].m); cJSON_Delete(runs[i].probe); }
    free(runs);
    if (gs) free_groups(gs, ng);
    return rc ? 1 : 0;
}
