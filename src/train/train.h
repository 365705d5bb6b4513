// The training loop: micro-batches with gradient accumulation, AdamW,
// evaluation, metrics.jsonl, checkpoints, a progress line, clean stops.
// metrics.jsonl: per step {"step", "loss" (the mean cross-entropy), "z_loss"
// (with --z-loss: the term C·mean(lse²) added to the objective), "lr",
// "grad_norm", "tok_per_s", "tokens"}; per evaluation {"step", "val_loss"
// (cross-entropy), "val_loss_ema" (with --ema: of the EMA weights),
// "val_tokens"}.
#pragma once
#include "../data/tokens.h"
#include "../model/model.h"
#include "../residual/route_stats.h"
#include "checkpoint.h"
#include "data_parallel.h"
#include "optim.h"

// Run from st->step to st->steps (or stop_at, if > 0: checkpoint and
// return there) on every rank of dp (opt: this rank's shard of the
// optimizer; st->opt.accum: micro-batches per step over all ranks). The
// model's arena must be sized for (st->batch, st->seq). Rank 0 writes the
// run's files. Returns MHAR_OK, or MHAR_ERR with a message (the same on
// every rank).
int train_run(const char *dir, Model *m, DataParallel *dp, AdamW *opt, TrainState *st,
              const TokenFile *train, const TokenFile *val, long stop_at);
// Mean next-token loss over up to `batches` batches of val, read in file
// order (the same windows every time), shared among the ranks of the job. *tokens receives the token count;
// routing statistics are added to *stats when it is not NULL.
double evaluate(Model *m, const TokenFile *val, int batches, long *tokens, RouteStats *stats);
