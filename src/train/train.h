// The training loop: micro-batches with gradient accumulation, AdamW,
// evaluation, metrics.jsonl, checkpoints, a progress line, clean stops.
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
