// report.md: a sweep's results in Markdown, section by section (report.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic.h"
#include "model/config.h"
#include "report.h"
#include "stats.h"
#include "util/common.h"
#include "util/json.h"
#include "util/median.h"

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

static int multi_lr(const Report *rep) {
    for (int i = 0; i < rep->n_runs; i++)
        if (rep->runs[i].r.opt.lr != rep->runs[0].r.opt.lr) return 1;
    return 0;
}

static int has_run(const Report *rep, const char *name) {
    for (int i = 0; i < rep->n_runs; i++)
        if (!strcmp(rep->runs[i].r.name, name)) return 1;
    return 0;
}

// The runs of the grid (sweep.json) that have no directory yet.
static const cJSON *grid_runs(const Report *rep) {
    return rep->sweep ? cJSON_GetObjectItemCaseSensitive(rep->sweep, "runs") : NULL;
}

static void md_title(FILE *md, const Report *rep, int n_done) {
    const cJSON *grid = rep->sweep ? cJSON_GetObjectItemCaseSensitive(rep->sweep, "grid") : NULL, *gr;
    fprintf(md, "# Sweep report: `%s`\n\n", rep->dir);
    if (grid && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(grid, "name")))
        fprintf(md, "Sweep **%s**. ", json_string_or(grid, "name", ""));
    int n = rep->n_runs, n_unstarted = 0;
    cJSON_ArrayForEach(gr, grid_runs(rep)) n_unstarted += !has_run(rep, json_string_or(gr, "name", ""));
    fprintf(md, "%d runs, %d finished%s", n + n_unstarted, n_done,
            n_done < n + n_unstarted ? " (unfinished runs are listed at the end and left out of every statistic)" : "");
    fprintf(md, ". Written by `mhar report`; lower loss is better.\n\n");
}

static void describe_preset(FILE *md, const char *preset) {
    Config c;
    if (config_preset(preset, &c)) return;
    fprintf(md, "- preset `%s`: d %d, %d layers, %d/%d heads of %d, ffn %d\n", preset, c.hidden_size,
            c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size);
}

// The distinct presets in run order (at most cap); one line each.
static int md_presets(FILE *md, const Report *rep, const char **seen, int cap) {
    int n_seen = 0;
    for (int i = 0; i < rep->n_runs && n_seen < cap; i++) {
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= !strcmp(seen[k], rep->runs[i].r.opt.preset);
        if (!dup) { seen[n_seen++] = rep->runs[i].r.opt.preset; describe_preset(md, rep->runs[i].r.opt.preset); }
    }
    return n_seen;
}

static void md_recipe(FILE *md, const Report *rep) {
    const SweepRun *r = &rep->runs[0].r;
    const ReportGroup *gs = rep->groups;
    fprintf(md, "- recipe (SPEC §4, scaled down): %ld steps of %d × %d tokens (gradient accumulation %d); AdamW "
                "β (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter, clip 1.0; peak lr ",
            r->opt.steps, r->opt.batch, r->opt.seq, r->opt.accum);
    for (int i = 0, first = 1; i < rep->n_groups; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= gs[k].lr == gs[i].lr;
        if (!dup) { fprintf(md, "%s%g", first ? "" : ", ", gs[i].lr); first = 0; }
    }
    fprintf(md, ", %ld warm-up steps then cosine to 0.1× peak; validation every %d steps on %d batches "
                "(%ld tokens)\n", r->opt.warmup, r->opt.eval_every, r->opt.eval_batches, (long)r->opt.eval_batches * r->opt.batch * r->opt.seq);
    for (int i = 1; i < rep->n_runs; i++) {
        const SweepRun *q = &rep->runs[i].r;
        if (q->opt.steps != r->opt.steps || q->opt.batch != r->opt.batch || q->opt.seq != r->opt.seq || q->opt.accum != r->opt.accum ||
            q->opt.warmup != r->opt.warmup || q->opt.eval_every != r->opt.eval_every || q->opt.eval_batches != r->opt.eval_batches) {
            fprintf(md, "- **note**: the runs do not all share this recipe (e.g. %s); see the run table\n", q->name);
            break;
        }
    }
}

static void md_data(FILE *md, const Report *rep) {
    const ReportRun *r0 = &rep->runs[0];
    const SweepRun *r = &r0->r;
    fprintf(md, "- data: train `%s`%s%.16s%s, validation `%s`%s%.16s%s\n", r->opt.train[0] ? r->opt.train : "(built-in synthetic)",
            r0->train_sha[0] ? " (sha256 " : "", r0->train_sha, r0->train_sha[0] ? "…)" : "",
            r->opt.val[0] ? r->opt.val : "(built-in synthetic)", r0->val_sha[0] ? " (sha256 " : "", r0->val_sha,
            r0->val_sha[0] ? "…)" : "");
    const char *mpath = rep->sweep ? json_string_or(rep->sweep, "manifest", "") : "";
    if (mpath[0]) fprintf(md, "- corpus manifest: `%s`%s%s\n", mpath, r0->manifest_sha[0] ? " sha256 " : "", r0->manifest_sha);
    else if (r0->manifest_sha[0]) fprintf(md, "- corpus manifest: sha256 %s\n", r0->manifest_sha);
    else fprintf(md, "- corpus manifest: none recorded\n");
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportRun *q = &rep->runs[i];
        if (strcmp(q->train_sha, r0->train_sha) || strcmp(q->val_sha, r0->val_sha) ||
            strcmp(q->manifest_sha, r0->manifest_sha)) {
            fprintf(md, "- **note**: run %s was trained on other data (other hashes) than %s\n", q->r.name, r->name);
            break;
        }
    }
}

static void md_commits(FILE *md, const Report *rep) {
    char commits[16][48];
    int nc = 0, dirty = 0, plain = 0;
    for (int i = 0; i < rep->n_runs; i++) {
        const ReportRun *r = &rep->runs[i];
        dirty |= r->dirty;
        plain += r->plain;
        for (int c = 0; c < r->n_commits; c++) {
            int dup = 0;
            for (int k = 0; k < nc; k++) dup |= !strcmp(commits[k], r->commits[c]);
            if (!dup && nc < 16) snprintf(commits[nc++], 48, "%s", r->commits[c]);
        }
    }
    if (nc) {
        fprintf(md, "- code: commit%s", nc == 1 ? "" : "s");
        for (int k = 0; k < nc; k++) fprintf(md, "%s `%.12s`", k ? "," : "", commits[k]);
        fprintf(md, "%s%s\n", dirty ? " (with uncommitted changes)" : "",
                nc > 1 ? " (**more than one**: see run.json `starts` for which commit trained what)" : "");
    }
    if (plain)
        fprintf(md, "- %d of %d runs were trained by `mhar train` outside a sweep (no run.json): their settings come "
                    "from checkpoint/state.json and config.json, their commit and data hashes are not recorded\n",
                plain, rep->n_runs);
}

// The metric, and whether the curves have flattened: the least-squares
// slope inside the metric's window.
static void md_metric(FILE *md, const Report *rep) {
    int n = rep->n_runs, few_evals = 0;
    for (int i = 0; i < n; i++) few_evals |= rep->runs[i].done && rep->runs[i].tail_used < STATS_TAIL_EVALS;
    fprintf(md, "- metric: per run, the mean of its last %d validation evaluations (SPEC §4)%s\n",
            STATS_TAIL_EVALS, few_evals ? "; **some runs have fewer evaluations: their metric averages all of "
                                          "them** (the count is in the tables)" : "");
    double lo = INFINITY, hi = -INFINITY, *sl = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int ns = 0;
    for (int i = 0; i < n && sl; i++)
        if (rep->runs[i].done && isfinite(rep->runs[i].tail_slope)) {
            double s = rep->runs[i].tail_slope;
            sl[ns++] = s;
            lo = fmin(lo, s), hi = fmax(hi, s);
        }
    if (ns) {
        const double med = median(sl, ns);
        fprintf(md, "- flatness: inside the metric's window the validation loss still changes by %+.3f nats "
                    "per 1000 steps (median over %d finished runs; range %+.3f to %+.3f); per run in the "
                    "last table\n", med, ns, lo, hi);
    }
    free(sl);
}

// Method × preset: mean ± sd over seeds, one row per (method, lr).
static void md_results(FILE *md, const Report *rep, const char *const *seen, int n_seen) {
    const ReportGroup *gs = rep->groups;
    int ng = rep->n_groups, mlr = multi_lr(rep);
    fprintf(md, "## Results\n\n### Validation loss: mean ± sample sd over seeds of the metric\n\n| method |");
    for (int k = 0; k < n_seen; k++) fprintf(md, " %s |", seen[k]);
    fprintf(md, "\n|---|");
    for (int k = 0; k < n_seen; k++) fprintf(md, "---|");
    fprintf(md, "\n");
    for (int i = 0; i < ng; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= !strcmp(gs[k].method, gs[i].method) && gs[k].lr == gs[i].lr;
        if (dup) continue;
        fprintf(md, "| %s", gs[i].method);
        if (mlr) fprintf(md, " (lr %g)", gs[i].lr);
        fprintf(md, " |");
        for (int k = 0; k < n_seen; k++) {
            const ReportGroup *g = NULL;
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
}

// Sentences on loss against H: its minimum, and on the seeds every H has.
static void headline_heads(FILE *md, const ReportGroup *gs, int lo, int hi) {
    const ReportGroup *h[64];
    int n = report_heads_groups(gs, lo, hi, h, 64);
    if (n < 2) return;
    int imin = 0;
    for (int k = 1; k < n; k++) if (h[k]->mean < h[imin]->mean) imin = k;
    fprintf(md, "- Loss against H:");
    for (int k = 0; k < n; k++) fprintf(md, "%s H=%d %.4f", k ? "," : "", report_group_heads(h[k]), h[k]->mean);
    fprintf(md, ". Minimum at H=%d", report_group_heads(h[imin]));
    if (imin == 0) fprintf(md, ", the smallest H tried");
    else if (imin == n - 1) fprintf(md, ", the largest H tried");
    else fprintf(md, ", inside the range tried: the smallest H (%d) is %+.4f above it, the largest (%d) %+.4f",
                 report_group_heads(h[0]), h[0]->mean - h[imin]->mean, report_group_heads(h[n - 1]),
                 h[n - 1]->mean - h[imin]->mean);
    fprintf(md, ".\n");
    uint64_t common[256];
    double yc[64];
    int nc = h[0]->n <= 256 ? report_heads_on_common_seeds(h, n, common, yc) : 0;
    if (nc) {
        int cmin = 0;
        for (int k = 1; k < n; k++) if (yc[k] < yc[cmin]) cmin = k;
        fprintf(md, "- The head counts were not all run on the same seeds; on the %s every H has (",
                nc == 1 ? "seed" : "seeds");
        for (int c = 0; c < nc; c++) fprintf(md, "%s%llu", c ? ", " : "", (unsigned long long)common[c]);
        fprintf(md, "):");
        for (int k = 0; k < n; k++) fprintf(md, "%s H=%d %.4f", k ? "," : "", report_group_heads(h[k]), yc[k]);
        fprintf(md, ". Minimum at H=%d.\n", report_group_heads(h[cmin]));
    }
    const ReportGroup *att = report_find_group(gs + lo, hi - lo, &gs[lo], report_single_head_scheme());
    if (att && h[imin] != att) {
        Paired p = report_paired(h[imin], att);
        if (p.n) {
            fprintf(md, "- %s − attnres: %+.4f", h[imin]->method, p.mean);
            put_spread(md, &p);
            fprintf(md, "; lower on %d of %d seeds.\n", p.better, p.n);
        }
    }
}

// Plain sentences for one preset (and lr): the best method, each method
// against baseline, and the shape of loss in H.
static void headline(FILE *md, const ReportGroup *gs, int lo, int hi) {
    const ReportGroup *best = NULL, *base = report_find_group(gs + lo, hi - lo, &gs[lo], report_reference_scheme());
    for (int i = lo; i < hi; i++)
        if (gs[i].n && isfinite(gs[i].mean) && (!best || gs[i].mean < best->mean)) best = &gs[i];
    if (!best) { fprintf(md, "No finished runs.\n\n"); return; }
    fprintf(md, "- Lowest mean: **%s**, %.4f (n %d).\n", best->method, best->mean, best->n);
    for (int i = lo; base && base->n && i < hi; i++) {
        const ReportGroup *g = &gs[i];
        if (g == base || g->n == 0) continue;
        Paired p = report_paired(g, base);
        if (p.n == 0) continue;
        fprintf(md, "- %s − baseline: %+.4f", g->method, p.mean);
        put_spread(md, &p);
        fprintf(md, "; %s on %d of %d seeds.\n", "lower", p.better, p.n);
    }
    headline_heads(md, gs, lo, hi);
    fprintf(md, "\n");
}

// One preset (and lr), groups [lo, hi): paired differences, headline, plots.
static void md_section(FILE *md, const Report *rep, int lo, int hi, const char *plots, ReportSummary *sum) {
    const ReportGroup *gs = rep->groups;
    char label[128], key[128];
    if (multi_lr(rep)) {
        snprintf(label, sizeof label, "preset %s, lr %g", gs[lo].preset, gs[lo].lr);
        snprintf(key, sizeof key, "%s_lr%g", gs[lo].preset, gs[lo].lr);   // plot files by preset (and lr)
    } else {
        snprintf(label, sizeof label, "preset %s", gs[lo].preset);
        snprintf(key, sizeof key, "%s", gs[lo].preset);
    }
    const ReportGroup *base = report_find_group(gs + lo, hi - lo, &gs[lo], report_reference_scheme());
    const ReportGroup *att = report_find_group(gs + lo, hi - lo, &gs[lo], report_single_head_scheme());
    fprintf(md, "### %s\n\n", label);
    fprintf(md, "Paired differences are method − reference on the same seed (negative: the method is "
                "better), as mean ± sd (n pairs, t = mean / (sd/√n), n − 1 degrees of freedom: two-sided p < 0.05 needs |t| > "
                "12.71, 4.30, 3.18, 2.78 for n = 2, 3, 4, 5).\n\n");
    fprintf(md, "| method | runs done | evals in metric | loss (mean ± sd) | − baseline | lower than baseline on | − attnres |\n"
                "|---|---|---|---|---|---|---|\n");
    for (int i = lo; i < hi; i++) {
        const ReportGroup *g = &gs[i];
        char a[64], b[96], c[96];
        Paired pb = report_paired(g, base), pa = report_routes(g->residual) ? report_paired(g, att) : (Paired){0};
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
    if (plots) {
        report_plot_curves(rep, lo, hi, plots, key, label, sum, md);
        report_plot_heads(rep, lo, hi, plots, key, label, sum, md);
    }
}

// With several learning rates: each method at its own best lr (the lowest
// mean metric over seeds), and its paired difference to baseline at
// baseline's best lr -- every method gets the best of the same lr set.
static void md_best_lr(FILE *md, const Report *rep) {
    const ReportGroup *gs = rep->groups;
    const char *ref = report_reference_scheme(), *single = report_single_head_scheme();
    fprintf(md, "### Each method at its best learning rate\n\nThe lr with the lowest mean metric of the same lr "
                "set, per method and preset; the differences pair seeds with %s (and, for a routing scheme, "
                "%s) at its own best lr.\n\n| preset | method | best lr | loss (mean ± sd, n) | − %s (at its best "
                "lr) | − %s (at its best lr) |\n|---|---|---|---|---|---|\n", ref, single, ref, single);
    for (int i = 0; i < rep->n_groups; i++) {
        int first = 1;   // one row per (preset, method), where the table first has it
        for (int k = 0; k < i; k++) first &= strcmp(gs[k].preset, gs[i].preset) || strcmp(gs[k].method, gs[i].method);
        const ReportGroup *best = first ? report_best_lr(rep, gs[i].preset, gs[i].method) : NULL;
        if (!best) continue;
        char a[64], b[96], c[96];
        Paired p = report_paired(best, report_best_lr(rep, best->preset, ref));
        Paired pa = report_routes(best->residual) ? report_paired(best, report_best_lr(rep, best->preset, single))
                                                  : (Paired){0};
        fprintf(md, "| %s | %s | %g | %s (n %d) | %s | %s |\n", best->preset, best->method, best->lr,
                fmt_ms(a, sizeof a, best->mean, best->sd, best->n), best->n, fmt_paired(b, sizeof b, &p),
                fmt_paired(c, sizeof c, &pa));
    }
    fprintf(md, "\n");
}

// Loss against slice width d/H when routing runs span presets (nano's d 128
// and micro's d 256, say): the paired difference to baseline, each at its
// best lr, is the axis the presets share.
static void md_slices(FILE *md, const Report *rep, const char *plots, ReportSummary *sum) {
    ReportSlice rows[128];
    int n = report_slices(rep, rows, 128);
    if (report_slice_presets(rows, n) < 2) return;
    fprintf(md, "## Loss against slice width d/H\n\nEach routing scheme at its best lr in its preset, minus "
                "%s at %s's best lr there, on the same seeds (negative: better than the standard residual). "
                "A head reads a slice of d/H coordinates; H = 1 is %s.\n\n"
                "| preset | d | H | slice width d/H | lr | loss (mean ± sd, n) | − %s (at its best lr) |\n"
                "|---|---|---|---|---|---|---|\n",
            report_reference_scheme(), report_reference_scheme(), report_single_head_scheme(),
            report_reference_scheme());
    for (int i = 0; i < n; i++) {
        const ReportSlice *r = &rows[i];
        char a[64], b[96];
        fprintf(md, "| %s | %d | %d | %d | %g | %s (n %d) | %s |\n", r->g->preset, r->d, r->heads, r->d / r->heads,
                r->g->lr, fmt_ms(a, sizeof a, r->g->mean, r->g->sd, r->g->n), r->g->n, fmt_paired(b, sizeof b, &r->p));
    }
    fprintf(md, "\n");
    if (plots) report_plot_slices(rows, n, plots, sum, md);
}

// probe.json of each run, then per group over seeds.
static void md_probes(FILE *md, const Report *rep) {
    int n_probe = 0;
    for (int i = 0; i < rep->n_runs; i++) n_probe += rep->runs[i].probe != NULL;
    if (!n_probe) return;
    fprintf(md, "## Probe (mhar probe)\n\nattnres runs: width disagreement, the mean over slices, sites and "
                "held-out tokens of KL(a_s ‖ α) (SPEC §4); mhar runs: each head's deviation from the head "
                "consensus, KL(w_h ‖ mean_h w_h). The null uses random queries of matched norm; excess = "
                "trained − null. Nats.\n\n| run | probe | S or H | tokens | trained | null | excess |\n"
                "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const cJSON *p = rep->runs[i].probe;
        if (!p) continue;
        int width = !strcmp(json_string_or(p, "probe", ""), "width_disagreement");
        fprintf(md, "| %s | %s | %s %.0f | %.0f | %.4g | %.4g | %.4g |\n", rep->runs[i].r.name,
                width ? "width disagreement" : "head deviation", width ? "S" : "H",
                width ? json_number_or(p, "slices", NAN) : json_number_or(p, "heads", NAN), json_number_or(p, "tokens", NAN), json_number_or(p, "trained", NAN),
                json_number_or(p, "null", NAN), json_number_or(p, "excess", NAN));
    }
    // over seeds, per method: a probe figure varies with the seed as the loss does
    fprintf(md, "\nOver seeds (mean ± sample sd):\n\n| preset | method | n | trained | null | excess |\n"
                "|---|---|---|---|---|---|\n");
    for (int k = 0; k < rep->n_groups; k++) {
        double tr[256], nl[256], ex[256];
        int m = 0;
        for (int i = 0; i < rep->n_runs && m < 256; i++) {
            const cJSON *p = rep->runs[i].probe;
            if (!p || !report_in_group(&rep->groups[k], &rep->runs[i].r)) continue;
            tr[m] = json_number_or(p, "trained", NAN); nl[m] = json_number_or(p, "null", NAN); ex[m] = json_number_or(p, "excess", NAN);
            m++;
        }
        if (!m) continue;
        char a[64], b[64], c[64];
        fprintf(md, "| %s | %s | %d | %s | %s | %s |\n", rep->groups[k].preset, rep->groups[k].method, m,
                fmt_ms(a, sizeof a, stats_mean(tr, m), stats_sd(tr, m), m),
                fmt_ms(b, sizeof b, stats_mean(nl, m), stats_sd(nl, m), m),
                fmt_ms(c, sizeof c, stats_mean(ex, m), stats_sd(ex, m), m));
    }
    fprintf(md, "\nPublished (SPEC §4, S = 4): trained 0.273 / 0.570 / 0.701 vs null 0.038 / 0.058 / 0.095 at "
                "100M / 350M / 1B.\n\n");
}

// Every run, then the grid's runs that were never started.
static void md_runs(FILE *md, const Report *rep) {
    fprintf(md, "## Runs\n\n| run | seed | status | step | evals | metric (evals) | tail slope /1k steps | last val | "
                "last train loss | tok/s | starts |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const ReportRun *r = &rep->runs[i];
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
        if (r->plain) fprintf(md, " | - |\n");
        else fprintf(md, " | %d |\n", r->n_starts);
    }
    const cJSON *gr;
    cJSON_ArrayForEach(gr, grid_runs(rep))
        if (!has_run(rep, json_string_or(gr, "name", "")))
            fprintf(md, "| %s | - | not started | 0/%.0f | 0 | - | - | - | - | - | 0 |\n", json_string_or(gr, "name", ""),
                    json_number_or(gr, "steps", NAN));
    fprintf(md, "\n");
}

// Routing queries started N(0, 0.02) (a "-qnormal" method) against the
// same scheme started from zero queries, at the same preset and lr: the
// paired difference normal − zero on the same seed (both runs share every
// other initial weight and the data order). Nothing without such a pair.
static void md_query_init(FILE *md, const Report *rep) {
    const ReportGroup *gs = rep->groups;
    int any = 0;
    for (int i = 0; i < rep->n_groups; i++) {
        const ReportGroup *g = &gs[i], *zero = report_zero_init_twin(gs, rep->n_groups, g);
        if (!zero) continue;
        if (!any++)
            fprintf(md, "### The routing queries' initial value\n\nEach method whose queries started N(0, 0.02) "
                        "against the same method started from zero queries (SPEC), same preset and lr; the "
                        "difference pairs seeds (negative: the random start is better).\n\n| preset | lr | "
                        "method | loss, queries N(0, 0.02) | loss, zero queries | normal − zero | lower on |\n"
                        "|---|---|---|---|---|---|---|\n");
        char a[64], b[64], c[96];
        const Paired p = report_paired(g, zero);
        fprintf(md, "| %s | %g | %s | %s (n %d) | %s (n %d) | %s | ", g->preset, g->lr, zero->method,
                fmt_ms(a, sizeof a, g->mean, g->sd, g->n), g->n, fmt_ms(b, sizeof b, zero->mean, zero->sd, zero->n),
                zero->n, fmt_paired(c, sizeof c, &p));
        if (p.n) fprintf(md, "%d of %d seeds |\n", p.better, p.n);
        else fprintf(md, "- |\n");
    }
    if (any) fprintf(md, "\n");
}

static void md_body(FILE *md, const Report *rep, const char *plots, ReportSummary *sum) {
    fprintf(md, "## Setup\n\n");
    const char *seen[16];
    int n_seen = md_presets(md, rep, seen, 16);
    md_recipe(md, rep);
    md_data(md, rep);
    md_commits(md, rep);
    md_metric(md, rep);
    fprintf(md, "\n");
    md_results(md, rep, seen, n_seen);
    for (int lo = 0; lo < rep->n_groups;) {
        int hi = report_section_end(rep, lo);
        md_section(md, rep, lo, hi, plots, sum);
        lo = hi;
    }
    if (multi_lr(rep)) md_best_lr(md, rep);
    md_query_init(md, rep);
    md_slices(md, rep, plots, sum);
    if (plots && sum->missing_gnuplot)
        fprintf(md, "*Plots not drawn: gnuplot is not installed (Debian: `apt-get install gnuplot-nox`); the data "
                    "and scripts are in `plots/`, draw them with `gnuplot FILE.gp` there.*\n\n");
    if (plots && sum->plots_failed) fprintf(md, "*%d plots failed: %s*\n\n", sum->plots_failed, sum->first_error);
    md_probes(md, rep);
    report_routing(rep, plots, sum, md);
    md_runs(md, rep);
}

int report_write_md(const Report *rep, const char *path, const char *plots, ReportSummary *sum) {
    if (rep->n_runs == 0) return mhar_fail("%s: no runs to report", path);
    sum->n_runs = rep->n_runs;
    sum->n_done = 0;
    for (int i = 0; i < rep->n_runs; i++) sum->n_done += rep->runs[i].done;
    AtomicFile af;
    if (atomic_open(&af, path)) return MHAR_ERR;
    md_title(af.f, rep, sum->n_done);
    md_body(af.f, rep, plots, sum);
    return atomic_commit(&af);
}
