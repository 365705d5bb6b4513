// The training loop: micro-batches with gradient accumulation, AdamW,
// evaluation, metrics.jsonl, checkpoints, a progress line, clean stops.
#pragma once
#include "../data/tokens.h"
#include "../model/model.h"
#include "../residual/route_stats.h"
#include "checkpoint.h"
#include "optim.h"

// Run from st->step to st->steps (or stop_at, if > 0: checkpoint and
// return there). The model's arena must be sized for (st->batch, st->seq).
// Returns MHAR_OK, or MHAR_ERR with a message.
int train_run(const char *dir, Model *m, AdamW *opt, TrainState *st,
              const TokenFile *train, const TokenFile *val, long stop_at);
// Mean next-token loss over up to `batches` batches of val, read in file
// order (the same windows every time). *tokens receives the token count;
// routing statistics are added to *stats when it is not NULL.
double evaluate(Model *m, const TokenFile *val, int batches, long *tokens, RouteStats *stats);
