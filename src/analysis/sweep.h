// mhar sweep's scheduler: every run of a grid (grid.h) trained in DIR/runs/
// by `mhar train` child processes (this binary), jobs at a time, each with
// OMP_NUM_THREADS threads. Started again on the same DIR it skips finished
// runs and resumes interrupted ones from their last checkpoint. Writes
// DIR/grid.json (the grid, paths made absolute), DIR/sweep.json (commit,
// data hashes, every invocation, run status) and per run run.json (settings,
// commit, data hashes, every start) and train.log. Progress goes to stdout.
#pragma once

#define SWEEP_MAX_JOBS 256

typedef struct {
    const char *grid;     // the grid file; NULL: DIR/grid.json of an earlier sweep
    const char *out;      // the sweep directory DIR (created)
    int jobs;             // runs at a time
    int threads;          // OpenMP threads per run (0: cores / jobs)
    int max_runs;         // start at most this many runs (0: all)
    int dry_run;          // list the runs, their status and commands; train nothing
    const char *commit;   // the commit this binary was built from, for the records
    int dirty;            // ... and whether tracked files differed from it
} SweepOptions;

typedef struct {
    int failed;           // runs that failed
    int stop_signal;      // the signal that stopped the sweep (0: none)
} SweepOutcome;

// MHAR_ERR (with a message) when the sweep could not run or its scheduling
// failed; a failed run is counted in outcome->failed instead.
int sweep_execute(const SweepOptions *o, SweepOutcome *outcome);
