// A sweep's results (mhar report): every DIR/runs/*/ loaded (run.json,
// metrics.jsonl, checkpoint progress, probe.json), grouped by (preset,
// method, lr), and written as DIR/report.md, DIR/report.json and gnuplot
// PNGs under DIR/plots/.
//
// The figure of merit is SPEC §4's: per run, the mean of its last 11
// validation evaluations. Only finished runs enter the statistics (a run cut
// short would be compared at another point of its schedule). Over seeds:
// mean and sample standard deviation; against baseline (and attnres): the
// paired difference per seed -- the same seed gives both runs the same data
// order and the same initial weights of every shared tensor -- with its
// mean, standard deviation, count and t = mean / (sd / sqrt(n)).
//
// Which scheme is the reference, which route and which have heads comes
// from the scheme registry (residual/residual.h), never from a list here.
#pragma once
#include "../util/common.h"
#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "grid.h"
#include "metrics.h"

typedef struct {
    SweepRun r;                // run.json's settings
    char dir[MHAR_PATH_MAX];
    int done;                  // finished its steps, with evaluations to report
    long step;                 // checkpoint step, -1 before the first checkpoint
    Metrics m;
    int have_metrics;
    double tail;               // the metric: mean of the last <= 11 evaluations
    int tail_used;             // evaluations it averages
    double tail_slope;         // nats per 1000 steps over the metric's window
    char commits[4][48];       // distinct commits of its starts
    int n_commits, dirty, n_starts;
    char train_sha[65], val_sha[65], manifest_sha[65];
    cJSON *probe;              // probe.json, NULL if none
    int plain;                 // trained by mhar train, not a sweep: no run.json, commits or data hashes
} ReportRun;

typedef struct {
    char preset[32], method[64], residual[16];
    int heads, blocks;
    double lr;
    int *idx, n;               // finished runs (indices into the runs), by seed
    int n_all;                 // finished or not
    double *vals;              // [n] their metric
    uint64_t *seeds;           // [n]
    double mean, sd;
    int min_used;              // fewest evaluations in any run's metric
} ReportGroup;

// A paired difference a - b over the seeds both have.
typedef struct { double mean, sd, t; int n, better; } Paired;

typedef struct {
    const char *dir;
    ReportRun *runs;           // in table order: preset, lr, scheme, H, blocks, seed
    int n_runs;
    ReportGroup *groups;       // in the same order
    int n_groups;
    cJSON *sweep;              // DIR/sweep.json, NULL if missing or unreadable
} Report;

// What report_make did, for the command to say.
typedef struct {
    int n_runs, n_done;
    int plots_drawn, plots_failed, missing_gnuplot;
    char first_error[512];     // of the first failed plot
} ReportSummary;

// Load DIR's runs (a sweep's, with run.json; or runs of mhar train itself,
// read from checkpoint/state.json and config.json; anything else is noted on
// `notes`, when not NULL, and left out), group them and read sweep.json.
// An error when DIR/runs cannot be opened or holds no run.
int report_load(Report *rep, const char *dir, FILE *notes);
void report_free(Report *rep);
// The whole report: load DIR, write DIR/report.md and DIR/report.json and,
// with plots, DIR/plots/.
int report_make(const char *dir, int plots, FILE *notes, ReportSummary *sum);

// ---- comparisons (report.c)
Paired report_paired(const ReportGroup *a, const ReportGroup *b);
// The group of `method` at like's preset and lr among gs[0..n), or NULL.
const ReportGroup *report_find_group(const ReportGroup *gs, int n, const ReportGroup *like, const char *method);
// The groups [lo, end) that share gs[lo]'s preset and lr: returns end.
int report_section_end(const Report *rep, int lo);
// Same preset, method and lr as the group.
int report_in_group(const ReportGroup *g, const SweepRun *r);
// The registry's reference scheme (the first: baseline) and its single-head
// routing scheme (attnres), by name.
const char *report_reference_scheme(void);
const char *report_single_head_scheme(void);
// Whether a scheme routes (has a "- attnres" column), and whether it routes
// over full depth with H heads (the loss-against-H comparison).
int report_routes(const char *residual);
int report_routes_heads(const char *residual);
// Its routing heads H (the single-head scheme's H is 1).
int report_group_heads(const ReportGroup *g);
// The routing-heads groups of [lo, hi) with runs, one per H (attnres and
// mhar-h1 are the same model: the first is kept), sorted by H.
int report_heads_groups(const ReportGroup *gs, int lo, int hi, const ReportGroup **out, int cap);
// Loss against H on the seeds that every H has: fills common[] (cap:
// hg[0]->n) and y[k]; returns how many seeds are common, or 0 when every H
// has the same seeds (nothing to add) or none in common.
int report_heads_on_common_seeds(const ReportGroup *const *hg, int n, uint64_t *common, double *y);

// A group whose routing queries started N(0, 0.02) ("-qnormal"): its twin
// with zero-initialised queries, same preset, lr and scheme; NULL for any
// other group, or when the twin is not among gs[0..n).
const ReportGroup *report_zero_init_twin(const ReportGroup *gs, int n, const ReportGroup *g);

// The group of `method` in `preset` (with finished runs) of the lowest mean:
// that method at its best lr. Ties keep the first in table order; NULL if none.
const ReportGroup *report_best_lr(const Report *rep, const char *preset, const char *method);

// ---- loss against slice width d/H, across presets (report.c)
// A from-scratch routing scheme at its best lr in its preset (the lowest
// mean over that preset's lrs), paired by seed with the reference scheme at
// the reference's best lr there: the comparison that survives a change of
// preset, whose losses differ by far more than any method's effect.
typedef struct {
    const ReportGroup *g, *base;
    int d, heads;              // the preset's width; H (1: the single-head scheme)
    Paired p;                  // g - base, same seed
} ReportSlice;
// The rows, by preset (in table order) and then H, one per (preset, H);
// returns their count.
int report_slices(const Report *rep, ReportSlice *out, int cap);
// How many presets they span.
int report_slice_presets(const ReportSlice *rows, int n);

// ---- output
// report.md at path; plots under plots_dir (NULL: none drawn), tallied in sum.
int report_write_md(const Report *rep, const char *path, const char *plots_dir, ReportSummary *sum);
// The figures of one section, groups [lo, hi) (report_plots.c): the
// validation curves, and loss against H; each links itself into md.
void report_plot_curves(const Report *rep, int lo, int hi, const char *plots_dir, const char *key,
                        const char *label, ReportSummary *sum, FILE *md);
void report_plot_heads(const Report *rep, int lo, int hi, const char *plots_dir, const char *key,
                       const char *label, ReportSummary *sum, FILE *md);
// Each preset's paired difference to baseline against d/H, one line per
// preset (report_slices' rows), linked into md.
void report_plot_slices(const ReportSlice *rows, int n, const char *plots_dir, ReportSummary *sum, FILE *md);
// Routing over training, for every run with a routing.jsonl (report_plots.c):
// per run one line (the last evaluation's read entropy / ln n over the sites,
// the gates' range) and, with plots_dir, its figures: per site the read
// entropy / ln n against the step, and delta_mh's gates res_alpha.
void report_routing(const Report *rep, const char *plots_dir, ReportSummary *sum, FILE *md);
// report.json's object: every group and run with their numbers.
cJSON *report_json(const Report *rep);
