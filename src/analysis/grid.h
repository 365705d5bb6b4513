// A sweep grid: the JSON file `mhar sweep --grid` reads, expanded into one
// run per (preset, seed, learning rate, scheme, routing heads, blocks), and
// the run record (run.json) each run directory keeps.
//
// Grid file (unknown keys are refused, so a typo cannot silently fall back
// to a default). The recipe keys (steps ... save_every) are the run options
// with RUN_GRID (src/train/run_options.c), with mhar train's defaults and
// ranges; steps is required.
//   {
//     "name": "nano-h-sweep",                   optional label
//     "preset": "nano" | ["nano", "micro"],     required
//     "schemes": [                              required, non-empty
//       {"residual": "baseline"}, {"residual": "hc"}, {"residual": "denseformer"},
//       {"residual": "attnres"},                (H = 1)
//       {"residual": "mhar", "route_heads": [2, 4, 8, 16]},   (default: the registry's, 8)
//       {"residual": "block", "route_heads": 4, "route_blocks": [2, 3]}
//     ],
//     "seeds": [1, 2, 3] | 1,                   required
//     "train": "tok/train.bin", "val": "tok/val.bin",   required
//     "manifest": "corpus/manifest.json",       optional
//     "steps": 2000,                            required
//     "batch": 8, "seq": 256, "accum": 1, "lr": 5e-4 | [3e-4, 1e-3],
//     "warmup": 100, "eval_every": 100, "eval_batches": 20, "save_every": 100
//   }
// Relative paths are relative to the grid file's directory. Without a
// manifest, manifest.json is looked for next to the train file, in corpus/
// next to it (mhar train's default data) and one directory up.
#pragma once
#include "../util/common.h"
#include <stdint.h>
#include <cjson/cJSON.h>

#include "../train/run_options.h"

typedef struct {
    char name[160];             // <preset>-<method>[-lr<lr>]-s<seed>: the run directory's name
    char method[64];            // baseline, hc, attnres, mhar-h4, block-h4-b2 (no preset, seed or lr)
    // the run's options (preset, residual, heads H: 1 for attnres, 0 when the
    // scheme does not route; blocks N: 0 unless it needs them; the recipe;
    // train and val as absolute paths)
    RunOptions opt;
} SweepRun;

typedef struct {
    cJSON *json;                // the grid as read
    char path[MHAR_PATH_MAX];            // the grid file, absolute
    char manifest[MHAR_PATH_MAX];        // absolute, "" when none was given or found
    SweepRun *runs;             // in execution order: preset, seed, lr, scheme, H, blocks
    int n_runs;
    int n_lr;                   // learning rates in the grid (>1: lr is part of the run names)
} Grid;

// Parse, validate (every preset, scheme and H against the model config) and
// expand. Errors name the file, the field and the reason.
int grid_load(const char *path, Grid *g);
void grid_free(Grid *g);

// A run's method as sweeps and reports name it: baseline, attnres; mhar-h4
// (a scheme with H heads); block-h4-b2 (and blocks); "-qnormal" after any
// whose routing queries start N(0, 0.02). query_init "" is zero.
// The suffix of a method whose routing queries start N(0, 0.02).
#define GRID_QNORMAL_SUFFIX "-qnormal"
void grid_method_name(const char *residual, int heads, int blocks, const char *query_init, char *out, size_t cap);

// The `mhar train` options of a fresh run into dir, as argv strings after
// "train" (NULL-terminated, at most cap - 1 entries), pointing into buf:
// --out dir, then every RUN_SWEEP option that applies (run_options_argv).
int sweep_run_args(const SweepRun *r, const char *dir, char **argv, int cap, char *buf, size_t buf_cap);

// run.json: the run's settings (name, method and every RUN_SWEEP option) as
// a JSON object, and back.
cJSON *sweep_run_to_json(const SweepRun *r);
int sweep_run_from_json(const cJSON *j, const char *origin, SweepRun *r);

// How far the run in dir is: "step" and "steps" of dir/checkpoint/state.json.
// Reads only those two fields, so it does not depend on the rest of the
// training state's format. Returns 0, or -1 when there is no readable
// checkpoint yet (*step = -1).
int sweep_run_progress(const char *dir, long *step, long *steps);


