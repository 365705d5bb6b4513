// mhar report: what a sweep found (analysis/report.h writes it).
#include <stdio.h>
#include <string.h>

#include "analysis/report.h"
#include "args.h"
#include "commands.h"
#include "util/common.h"

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
    "probe.json files (mhar probe --run) are tabled beside the losses, and\n"
    "routing.jsonl files drawn as routing over training (read entropy / ln n\n"
    "per site; delta_mh's gates).\n"
    "DIR/runs/ may also hold runs of mhar train itself (no run.json): their\n"
    "scheme comes from config.json, their recipe and seed from\n"
    "checkpoint/state.json, their preset from the model's shape.\n"
    "When routing runs span presets, each routing scheme at its best lr minus\n"
    "baseline at its best lr (same seeds) is tabled and drawn against the\n"
    "slice width d/H a head reads (plots/slices.png), one line per preset.\n"
    "Runs whose routing queries started N(0, 0.02) (methods \"...-qnormal\") are\n"
    "paired with the same method's zero-query runs at the same lr, when present:\n"
    "normal - zero per seed.";

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
    ReportSummary sum;
    if (report_make(dir, !no_plots, stderr, &sum)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    if (!no_plots && sum.missing_gnuplot)
        fprintf(stderr, "note: gnuplot is not installed: plots not drawn (apt-get install gnuplot-nox)\n");
    if (!no_plots && sum.plots_failed) fprintf(stderr, "warning: %d plots failed: %s\n", sum.plots_failed, sum.first_error);
    printf("wrote %s/report.md, %s/report.json and %d plots (%d runs, %d finished)\n", dir, dir, sum.plots_drawn,
           sum.n_runs, sum.n_done);
    return 0;
}
