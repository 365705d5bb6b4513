// A training checkpoint: DIR/checkpoint/ holds config.json, model.safetensors,
// optimizer.safetensors, state.json and, with --ema, ema.safetensors (the
// EMA of the weights, named like the model's). It is written as DIR/.checkpoint.tmp/
// and swapped in with one atomic rename (renameat2 RENAME_EXCHANGE), so at
// every instant DIR/checkpoint is a complete checkpoint. DIR/config.json and
// DIR/model.safetensors are then (hard-)linked to the new files, so the run
// directory itself is what eval, sample and HF transformers load; with an
// EMA, DIR/ema/ holds config.json and model.safetensors the same way.
#pragma once
#include <stdint.h>
#include "../model/model.h"
#include "optim.h"
#include "run_options.h"

typedef struct {
    RunOptions opt;             // the run's options (a resumed run continues with exactly these)
    // progress
    long step;                  // optimizer steps done
    long data_epoch, data_pos;  // loader position
    long bad_steps;             // consecutive non-finite steps
    long opt_step;              // updates applied (AdamW bias correction)
    double tokens_seen;
} TrainState;

int checkpoint_save(const char *dir, const Model *m, const AdamW *opt, const TrainState *st);
// Load DIR/checkpoint into a fresh model and optimizer.
int checkpoint_load(const char *dir, Model *m, AdamW *opt, TrainState *st);
// Options and progress only (for --resume before the model is built).
// state.json: "step", the options with RUN_STATE (run_options.c), then
// data_epoch, data_pos, bad_steps, optimizer_step, tokens_seen.
int checkpoint_load_state(const char *dir, TrainState *st);
