// mhar sweep: a grid of training runs (src/analysis/sweep.h, grid.h).
#include <stdio.h>

#include "analysis/sweep.h"
#include "args.h"
#include "commit.h"   // generated: MHAR_COMMIT, MHAR_DIRTY
#include "commands.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar sweep --grid FILE --out DIR [--jobs N] [--threads T] [--max-runs K] [--dry-run]\n"
    "       mhar sweep --out DIR            (continue the sweep in DIR with its saved grid)\n\n"
    "Trains every run of the grid into DIR/runs/<preset>-<method>[-lr<lr>]-s<seed>/,\n"
    "seed by seed (all schemes of the first seed first), with --jobs runs at a time,\n"
    "each with OMP_NUM_THREADS = cores / jobs (or --threads). Started again on the\n"
    "same DIR it skips finished runs and resumes interrupted ones from their last\n"
    "checkpoint. Writes DIR/grid.json (the grid, paths made absolute), DIR/sweep.json\n"
    "(commit, data hashes, run status) and per run run.json (settings, commit, data\n"
    "hashes, every start) and train.log. Then: mhar report DIR.\n\n"
    "Grid file (JSON; relative paths are relative to the grid file):\n"
    "  {\"preset\": \"nano\" | [\"nano\", \"micro\"],\n"
    "   \"schemes\": [{\"residual\": \"baseline\"}, {\"residual\": \"hc\"}, {\"residual\": \"attnres\"},\n"
    "               {\"residual\": \"mhar\", \"route_heads\": [2, 4, 8, 16]},\n"
    "               {\"residual\": \"block\", \"route_heads\": 4, \"route_blocks\": 2}],\n"
    "   \"seeds\": [1, 2, 3], \"train\": \"train.bin\", \"val\": \"val.bin\", \"manifest\": \"manifest.json\",\n"
    "   \"steps\": 2000, \"batch\": 8, \"seq\": 256, \"accum\": 1, \"lr\": 5e-4 | [3e-4, 1e-3],\n"
    "   \"warmup\": 100, \"eval_every\": 100, \"eval_batches\": 20, \"save_every\": 100}\n"
    "Required: preset, schemes, seeds, train, val, steps. Defaults: mhar train's\n"
    "(warmup steps/20, save_every = eval_every). The corpus manifest is looked for\n"
    "beside the train file, in corpus/ beside it and one directory up.";

int cmd_sweep(int argc, char **argv) {
    // The commit this binary was built from (Makefile: build/gen/commit.h), and
    // whether tracked files differed from it: a checkout's HEAD at run time
    // would name the wrong commit once the tree moves on while a sweep runs.
    SweepOptions o = {.jobs = 1, .commit = MHAR_COMMIT, .dirty = MHAR_DIRTY};
    Flag flags[] = {
        {"grid", FLAG_STR, &o.grid, "grid file (JSON; default DIR/grid.json of an earlier sweep)", 0, 0, 0},
        {"out", FLAG_STR, &o.out, "sweep directory (created; started again: resumed)", 0, 0, 0},
        {"jobs", FLAG_INT, &o.jobs, "runs at a time (default 1)", 1, SWEEP_MAX_JOBS, 0},
        {"threads", FLAG_INT, &o.threads, "OpenMP threads per run (default cores / jobs)", 1, 4096, 0},
        {"max-runs", FLAG_INT, &o.max_runs, "start at most K runs, then stop (continue later)", 1, 1e9, 0},
        {"dry-run", FLAG_BOOL, &o.dry_run, "list the runs, their status and commands; train nothing", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!o.out) { fprintf(stderr, "error: --out DIR is required (see --help)\n"); return 2; }
    SweepOutcome out;
    int rc = sweep_execute(&o, &out);
    if (rc) fprintf(stderr, "error: %s\n", mhar_error());
    if (out.stop_signal) return 128 + out.stop_signal;
    return rc || out.failed ? 1 : 0;
}
