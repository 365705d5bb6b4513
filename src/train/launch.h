// Start or resume the training run in a directory: what `mhar train` does
// once its flags are parsed. A fresh run builds its model (a preset or a
// config, the scheme and its H and N; or the model of --init-from), reads
// its token files (or builds the default data, data/default_data.h) and
// records their absolute paths; a resumed run takes its model, optimizer,
// options and data from DIR/checkpoint (run_options_resume says what a flag
// given again may do). A run started --init-from another run's model is a
// fresh run in every other way: step 0, fresh AdamW moments, the warm-up and
// the learning-rate schedule from their start (re-warm-up), its EMA (--ema)
// starting at the loaded weights. Then train_run.
#pragma once
#include "run_options.h"

typedef struct {
    const char *out;         // the run directory (created)
    const char *init_from;   // a fresh run starts from this run's model (fresh optimizer); NULL: none
    int resume;              // continue the run in out from its checkpoint
    long stop_at;            // checkpoint and return after this step (0: never)
    RunOptions opt;          // the options given, defaults derived (run_options_finish)
    int given[RUN_OPTIONS_MAX];   // given[i]: run_option_at(i) was given on the command line
} TrainLaunch;

// MHAR_OK when the run reached its last step or stop_at (or stopped on a
// signal with a checkpoint), MHAR_ERR with a message otherwise.
int train_launch(const TrainLaunch *l);
