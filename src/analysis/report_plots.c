// The figures of mhar report (report.h), drawn by plot.c: per preset (and
// lr) the validation curves and the loss against the routing heads H.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plot.h"
#include "report.h"
#include "routing_log.h"
#include "residual/residual.h"
#include "stats.h"
#include "util/common.h"

static void tally(ReportSummary *sum, int rc) {
    if (rc == 0) sum->plots_drawn++;
    else if (rc == 1) sum->missing_gnuplot = 1;
    else {
        if (!sum->plots_failed) snprintf(sum->first_error, sizeof sum->first_error, "%s", mhar_error());
        sum->plots_failed++;
    }
}

// The group's mean curve over its finished seeds, at the first seed's
// evaluation steps, into x, y [m0->n_evals]; returns the point count.
static int mean_curve(const Report *rep, const ReportGroup *g, double *x, double *y) {
    const Metrics *m0 = &rep->runs[g->idx[0]].m;
    int k = 0;
    for (int e = 0; e < m0->n_evals; e++) {
        double sum = 0;
        int cnt = 0;
        for (int r = 0; r < g->n; r++) {
            const Metrics *m = &rep->runs[g->idx[r]].m;
            for (int f = 0; f < m->n_evals; f++)
                if (m->eval_step[f] == m0->eval_step[e]) { sum += m->val_loss[f]; cnt++; break; }
        }
        x[k] = (double)m0->eval_step[e];
        y[k++] = sum / cnt;
    }
    return k;
}

static void draw_curves(const char *plots, const char *key, const char *label, const PlotSeries *s, int ns,
                        double tail_from, ReportSummary *sum, FILE *md) {
    char name[200], title[300];
    snprintf(name, sizeof name, "val_%s", key);
    snprintf(title, sizeof title, "validation loss, mean over seeds (%s)", label);
    Plot p = {plots, name, title, "step", "validation loss (nats/token)", NAN, 0};
    tally(sum, plot_draw(&p, s, ns));
    fprintf(md, "![validation loss, %s](plots/%s.png)\n", label, name);
    snprintf(name, sizeof name, "val_tail_%s", key);
    snprintf(title, sizeof title, "validation loss over the last %d evaluations, mean over seeds (%s)",
             STATS_TAIL_EVALS, label);
    p.name = name;
    p.title = title;
    p.xmin = tail_from;
    tally(sum, plot_draw(&p, s, ns));
    fprintf(md, "![validation loss, tail, %s](plots/%s.png)\n\n", label, name);
}

// Validation curves (mean over the finished seeds at each evaluation) of the
// groups [lo, hi), and the same from the first step of the tail window on.
void report_plot_curves(const Report *rep, int lo, int hi, const char *plots, const char *key, const char *label,
                        ReportSummary *sum, FILE *md) {
    int n = hi - lo, ns = 0;
    PlotSeries *s = calloc(n, sizeof *s);
    double **xy = calloc(2 * n, sizeof *xy);
    double tail_from = INFINITY;
    for (int i = 0; s && xy && i < n; i++) {
        const ReportGroup *g = &rep->groups[lo + i];
        if (g->n == 0) continue;
        const Metrics *m0 = &rep->runs[g->idx[0]].m;
        double *x = xy[2 * i] = calloc(m0->n_evals ? m0->n_evals : 1, sizeof(double));
        double *y = xy[2 * i + 1] = calloc(m0->n_evals ? m0->n_evals : 1, sizeof(double));
        if (!x || !y) continue;
        int k = mean_curve(rep, g, x, y);
        int used = m0->n_evals < STATS_TAIL_EVALS ? m0->n_evals : STATS_TAIL_EVALS;
        if (used) tail_from = fmin(tail_from, (double)m0->eval_step[m0->n_evals - used]);
        s[ns++] = (PlotSeries){g->method, SERIES_LINES, x, y, NULL, k};
    }
    if (ns) draw_curves(plots, key, label, s, ns, tail_from, sum, md);
    for (int i = 0; xy && i < 2 * n; i++) free(xy[i]);
    free(xy);
    free(s);
}

// The non-routing schemes trained from scratch (baseline, hc, denseformer):
// the horizontal references of the H plots, the reference scheme first.
static int reference_groups(const ReportGroup *gs, int lo, int hi, const ReportGroup **rg, const char **names,
                            int cap) {
    int n = 0;
    for (int i = 0; i < residual_count() && n < cap; i++) {
        const ResidualScheme *sc = residual_at(i);
        if (residual_is_routed(sc) || !sc->from_scratch) continue;
        names[n] = sc->name;
        rg[n++] = report_find_group(gs + lo, hi - lo, &gs[lo], sc->name);
    }
    return n;
}

// The metric against H (the single-head scheme as H = 1), mean ± one sample
// sd over seeds, with the references as horizontal lines.
static void plot_heads_loss(const ReportGroup *const *hg, int n, const ReportGroup *const *rg, const char *const *refs,
                            int n_ref, const char *plots, const char *key, const char *label, ReportSummary *sum,
                            FILE *md) {
    double x[64], y[64], e[64], ref[8], yc[64];
    for (int k = 0; k < n; k++) { x[k] = report_group_heads(hg[k]); y[k] = hg[k]->mean; e[k] = hg[k]->sd; }
    PlotSeries s[10];
    s[0] = (PlotSeries){"MHAR (H = 1: attnres), mean ± sd over seeds", SERIES_ERRORBARS, x, y, e, n};
    int ns = 1, nr = 0;
    uint64_t common[256];
    if (hg[0]->n <= 256 && report_heads_on_common_seeds(hg, n, common, yc))
        s[ns++] = (PlotSeries){"mean on the seeds every H has", SERIES_LINES, x, yc, NULL, n};
    for (int k = 0; k < n_ref; k++) {
        if (!rg[k] || rg[k]->n == 0) continue;
        ref[nr] = rg[k]->mean;
        s[ns++] = (PlotSeries){refs[k], SERIES_HLINE, NULL, &ref[nr], NULL, 1};
        nr++;
    }
    char name[200], title[300];
    snprintf(name, sizeof name, "heads_%s", key);
    snprintf(title, sizeof title, "val loss (mean of the last %d evals) against routing heads H, %s",
             STATS_TAIL_EVALS, label);
    Plot p = {plots, name, title, "routing heads H", "validation loss (nats/token)", NAN, 1};
    tally(sum, plot_draw(&p, s, ns));
    fprintf(md, "![loss against H, %s](plots/%s.png)\n", label, name);
}

// The paired difference to the reference against H, mean ± sd over seeds:
// the seeds' own spread (the same in every scheme) cancels there, so it
// shows what the first plot's error bars can hide. 0 when not drawn.
static int plot_heads_delta(const ReportGroup *const *hg, int n, const ReportGroup *const *rg,
                            const char *const *refs, int n_ref, const char *plots, const char *key,
                            const char *label, ReportSummary *sum, FILE *md) {
    double x[64], y[64], e[64], ref[8];
    int m = 0;
    for (int k = 0; k < n; k++) {
        Paired d = report_paired(hg[k], rg[0]);
        if (d.n == 0) continue;
        x[m] = report_group_heads(hg[k]); y[m] = d.mean; e[m] = d.sd;
        m++;
    }
    if (m < 2) return 0;
    PlotSeries s[10];
    s[0] = (PlotSeries){"MHAR (H = 1: attnres) - baseline, same seed: mean ± sd", SERIES_ERRORBARS, x, y, e, m};
    ref[0] = 0;
    s[1] = (PlotSeries){refs[0], SERIES_HLINE, NULL, &ref[0], NULL, 1};
    int ns = 2;
    for (int k = 1; k < n_ref; k++) {
        Paired d = report_paired(rg[k], rg[0]);
        if (d.n == 0) continue;
        ref[k] = d.mean;
        s[ns++] = (PlotSeries){refs[k], SERIES_HLINE, NULL, &ref[k], NULL, 1};
    }
    char name[200], title[300];
    snprintf(name, sizeof name, "heads_delta_%s", key);
    snprintf(title, sizeof title, "paired difference to baseline (mean of the last %d evals) against H, %s",
             STATS_TAIL_EVALS, label);
    Plot p = {plots, name, title, "routing heads H", "method - baseline, same seed (nats/token)", NAN, 1};
    tally(sum, plot_draw(&p, s, ns));
    fprintf(md, "![paired difference to baseline against H, %s](plots/%s.png)\n\n", label, name);
    return 1;
}

void report_plot_heads(const Report *rep, int lo, int hi, const char *plots, const char *key, const char *label,
                       ReportSummary *sum, FILE *md) {
    const ReportGroup *hg[64], *rg[8];
    const char *refs[8];
    int n = report_heads_groups(rep->groups, lo, hi, hg, 64);
    if (n < 2) return;
    int n_ref = reference_groups(rep->groups, lo, hi, rg, refs, 8);
    plot_heads_loss(hg, n, rg, refs, n_ref, plots, key, label, sum, md);
    if (n_ref == 0 || !rg[0] || rg[0]->n == 0 || !plot_heads_delta(hg, n, rg, refs, n_ref, plots, key, label, sum, md))
        fprintf(md, "\n");
}

void report_plot_slices(const ReportSlice *rows, int n, const char *plots, ReportSummary *sum, FILE *md) {
    PlotSeries s[17];
    double x[128], y[128], e[128], zero = 0;
    int ns = 0, m = 0;
    for (int lo = 0, hi; lo < n && ns < 16; lo = hi) {
        for (hi = lo; hi < n && !strcmp(rows[hi].g->preset, rows[lo].g->preset); hi++) {}
        const int first = m;
        for (int i = lo; i < hi; i++) {
            if (rows[i].p.n == 0) continue;
            x[m] = (double)rows[i].d / rows[i].heads, y[m] = rows[i].p.mean, e[m] = rows[i].p.sd;
            m++;
        }
        if (m > first)
            s[ns++] = (PlotSeries){rows[lo].g->preset, SERIES_ERRORBARS, x + first, y + first, e + first, m - first};
    }
    if (ns == 0) return;
    s[ns++] = (PlotSeries){report_reference_scheme(), SERIES_HLINE, NULL, &zero, NULL, 1};
    char title[300];
    snprintf(title, sizeof title, "paired difference to %s (mean of the last %d evals, each at its best lr) against "
             "slice width d/H", report_reference_scheme(), STATS_TAIL_EVALS);
    Plot p = {plots, "slices", title, "slice width d/H (coordinates a head reads)",
              "method - baseline, same seed (nats/token)", NAN, 1};
    tally(sum, plot_draw(&p, s, ns));
    fprintf(md, "![paired difference to baseline against slice width](plots/slices.png)\n\n");
}

// One run's routing figures: one line per site (sites that read one source
// have no entropy to show); values [n_records · n_sites], site-major rows.
static void plot_sites(const RoutingLog *lg, const double *values, const char *plots, const char *name,
                       const char *title, const char *ylabel, ReportSummary *sum, FILE *md) {
    PlotSeries *s = calloc(lg->n_sites, sizeof *s);
    double *y = calloc((size_t)lg->n_sites * lg->n_records, sizeof *y);
    int ns = 0;
    for (int i = 0; s && y && i < lg->n_sites; i++) {
        if (isnan(values[i])) continue;
        double *yi = y + (size_t)i * lg->n_records;
        for (int r = 0; r < lg->n_records; r++) yi[r] = values[(size_t)r * lg->n_sites + i];
        s[ns++] = (PlotSeries){lg->site[i], SERIES_LINES, lg->step, yi, NULL, lg->n_records};
    }
    if (ns) {
        Plot p = {plots, name, title, "step", ylabel, NAN, 0};
        tally(sum, plot_draw(&p, s, ns));
        fprintf(md, "![%s](plots/%s.png)\n", title, name);
    }
    free(y);
    free(s);
}

void report_routing(const Report *rep, const char *plots, ReportSummary *sum, FILE *md) {
    int header = 0;
    for (int i = 0; i < rep->n_runs; i++) {
        const ReportRun *r = &rep->runs[i];
        char path[MHAR_PATH_MAX];
        RoutingLog lg;
        if (path_join(path, sizeof path, r->dir, "routing.jsonl") || access(path, F_OK) != 0) continue;
        if (!header++) fprintf(md, "## Routing over training\n\nPer run, from its `routing.jsonl`: the read entropy "
                                   "of each site, mean over heads, divided by ln n (1: uniform over its n sources; "
                                   "0: one source), and for delta_mh each site's gate res_alpha (0: the read adds "
                                   "nothing).\n\n");
        if (routing_log_load(path, &lg)) { fprintf(md, "- %s: %s\n", r->r.name, mhar_error()); continue; }
        const int last = lg.n_records - 1;
        double lo = INFINITY, hi = -INFINITY, alo = INFINITY, ahi = -INFINITY;
        for (int k = 0; k < lg.n_sites; k++) {
            const double e = lg.entropy_norm[(size_t)last * lg.n_sites + k];
            if (!isnan(e)) lo = fmin(lo, e), hi = fmax(hi, e);
            if (lg.res_alpha) {
                const double a = lg.res_alpha[(size_t)last * lg.n_sites + k];
                alo = fmin(alo, a), ahi = fmax(ahi, a);
            }
        }
        fprintf(md, "- **%s**, step %.0f (%d evaluations): entropy / ln n %.3f to %.3f over %d sites", r->r.name,
                lg.step[last], lg.n_records, lo, hi, lg.n_sites);
        if (lg.res_alpha) fprintf(md, "; gates res_alpha %+.3f to %+.3f", alo, ahi);
        fprintf(md, "\n");
        if (plots) {
            char name[200], title[300];
            fprintf(md, "\n");
            snprintf(name, sizeof name, "routing_%s", r->r.name);
            snprintf(title, sizeof title, "%s: read entropy / ln n per site, mean over heads", r->r.name);
            plot_sites(&lg, lg.entropy_norm, plots, name, title, "entropy / ln n", sum, md);
            if (lg.res_alpha) {
                snprintf(name, sizeof name, "gates_%s", r->r.name);
                snprintf(title, sizeof title, "%s: gate res_alpha per site", r->r.name);
                plot_sites(&lg, lg.res_alpha, plots, name, title, "res_alpha", sum, md);
            }
            fprintf(md, "\n");
        }
        routing_log_free(&lg);
    }
    if (header) fprintf(md, "\n");
}
