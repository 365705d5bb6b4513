// Data-parallel training with sharded optimizer state (ZeRO-1) on the
// communication interface (src/dist/comm.h). One process is the case of one
// rank, through the same code.
//
// A step of `accum` micro-batches over `size` ranks: global micro-batch
// i = k·size + r is rank r's k-th, taken from the one seeded window order
// every rank follows. Each micro-batch's gradient is reduced as soon as its
// backward ends: rank r adds the pieces of its shard in the order i, so the
// step's gradient is ((g_0 + g_1) + g_2) + … for any number of ranks, bit for
// bit the sum one process makes with --accum size·K. The loss, the gradient
// norm (per block of parameters) and AdamW on each rank's shard
// follow the same rule; the updated shards are then gathered by all.
#pragma once
#include "../data/loader.h"
#include "../dist/comm.h"
#include "../model/model.h"
#include "optim.h"

#define DP_BLOCKS 1024   // about this many blocks: shard boundaries and the gradient norm's partial sums

typedef struct {
    Comm *comm;
    OpsContext *ctx;
    Shards shards;
    size_t lo, n_mine;   // this rank's shard [lo, lo + n_mine) of the parameters
    int accum;           // micro-batches per step on each rank
    float *grad;         // [n_mine] the step's gradient on this shard (the model's own when 1 rank × 1 micro-batch)
    float *scratch;      // [size · largest shard] the pieces received
    double *losses;      // [size · accum] per micro-batch, rank-major
    double *norm_parts;  // [blocks of all shards]
    size_t *norm_counts; // [size] blocks per shard
    int owns_grad;       // grad is this module's (not the model's)
    int overlap;         // reduce each range of gradients as the backward finishes it (default on)
    const float *model_grads, *sending;  // the model's gradients; those being sent (overlap)
    int failed;          // a send begun in the hook failed
    double comm_seconds; // time in collectives during the last step
} DataParallel;

// For m's parameters over comm's ranks; accum_global micro-batches per step
// (a multiple of the rank count).
int dp_init(DataParallel *dp, Comm *comm, Model *m, int accum_global);
void dp_free(DataParallel *dp);
// This rank's inputs and targets [B, T] for micro-batch k of the step; the
// other ranks' windows are passed over.
void dp_next_batch(DataParallel *dp, Loader *ld, int B, int *inputs, int *targets);
// Micro-batch k's gradient (the model's grads) into the step's shard. With
// overlap, its pieces were sent during model_backward (dp_init hooks
// m->grads_ready); this waits for them and adds them up.
int dp_reduce(DataParallel *dp, const float *grads, int k);
// Overlap on or off (on after dp_init); the result is the same bit for bit.
void dp_set_overlap(DataParallel *dp, Model *m, int on);
// The step's mean loss from this rank's micro-batch losses [accum] (the same on every rank).
int dp_loss(DataParallel *dp, const double *mine, double *loss);
// The L2 norm of the step's gradient over all shards (the same on every rank).
int dp_grad_norm(DataParallel *dp, double *norm);
// AdamW on this rank's shard (o holds its moments), then every rank gathers the parameters.
int dp_update(DataParallel *dp, AdamW *o, float *params, double norm, float lr);
// An optimizer for this rank's shard with the shard's part of full's moments
// (and EMA). The weight-decay exclusion is set by the caller, per shard.
int dp_shard_optimizer(const DataParallel *dp, const AdamW *full, AdamW *shard);
// Rank 0: the full optimizer (moments, EMA) gathered from every shard into
// *full (allocated here); other ranks send theirs and leave *full zeroed.
int dp_gather_optimizer(const DataParallel *dp, const AdamW *shard, AdamW *full);
