#include "data_parallel.h"

#include <math.h>
#include <string.h>

#include "../util/common.h"

int dp_init(DataParallel *dp, Comm *comm, Model *m, int accum_global) {
    memset(dp, 0, sizeof *dp);
    dp->comm = comm;
    dp->ctx = m->ctx;
    if (accum_global % comm->size)
        return mhar_fail("%d micro-batches per step cannot be split evenly over %d ranks", accum_global, comm->size);
    dp->accum = accum_global / comm->size;
    // Blocks of a power of two ≥ 256 parameters, about 1024 of them: enough
    // to spread over many ranks, few enough to sum cheaply. The block depends
    // on the model alone, so the norm's partial sums do not depend on N.
    size_t total = m->table.total, block = 256;
    while (block * DP_BLOCKS < total) block *= 2;
    if ((total + block - 1) / block < (size_t)comm->size)
        return mhar_fail("%d ranks are more than the %zu blocks of %zu parameters the model shards into", comm->size,
                         (total + block - 1) / block, block);
    if (shards_init(&dp->shards, total, comm->size, block)) return MHAR_ERR;
    dp->lo = dp->shards.lo[comm->rank];
    dp->n_mine = dp->shards.hi[comm->rank] - dp->lo;
    size_t largest = 0, blocks = 0;
    dp->norm_counts = mhar_alloc(sizeof(size_t) * comm->size);
    if (!dp->norm_counts) return MHAR_ERR;
    for (int r = 0; r < comm->size; r++) {
        size_t n = dp->shards.hi[r] - dp->shards.lo[r];
        if (n > largest) largest = n;
        dp->norm_counts[r] = (n + block - 1) / block;
        blocks += dp->norm_counts[r];
    }
    dp->losses = mhar_alloc(sizeof(double) * comm->size * dp->accum);
    dp->norm_parts = mhar_alloc(sizeof(double) * (blocks ? blocks : 1));
    if (!dp->losses || !dp->norm_parts) return MHAR_ERR;
    // One process taking one micro-batch per step reduces nothing: the
    // model's gradient is the step's.
    if (comm->size == 1 && dp->accum == 1) {
        dp->grad = m->grads;
        return MHAR_OK;
    }
    dp->grad = ops_alloc(dp->ctx, sizeof(float) * (dp->n_mine ? dp->n_mine : 1));
    if (!dp->grad) return MHAR_ERR;
    if (comm->size > 1 && !(dp->scratch = ops_alloc(dp->ctx, sizeof(float) * comm->size * largest))) return MHAR_ERR;
    dp->owns_grad = 1;
    if (comm->size > 1) dp_set_overlap(dp, m, 1);
    return MHAR_OK;
}

// model_backward's hook: [lo, hi) of the gradients is final; send it.
static void on_grads_ready(void *arg, size_t lo, size_t hi) {
    DataParallel *dp = arg;
    double t0 = now_seconds();
    if (!dp->sending) dp->sending = dp->model_grads;
    if (comm_reduce_scatter_begin(dp->comm, dp->model_grads, lo, hi, &dp->shards, dp->scratch) ||
        comm_progress(dp->comm))
        dp->failed = 1;
    dp->comm_seconds += now_seconds() - t0;
}

void dp_set_overlap(DataParallel *dp, Model *m, int on) {
    dp->overlap = on && dp->comm->size > 1;
    dp->model_grads = m->grads;
    m->grads_ready = dp->overlap ? on_grads_ready : NULL;
    m->grads_ready_arg = dp->overlap ? dp : NULL;
}

void dp_free(DataParallel *dp) {
    if (dp->owns_grad) ops_free(dp->ctx, dp->grad);
    ops_free(dp->ctx, dp->scratch);
    shards_free(&dp->shards);
    mhar_free(dp->losses);
    mhar_free(dp->norm_parts);
    mhar_free(dp->norm_counts);
    memset(dp, 0, sizeof *dp);
}

void dp_next_batch(DataParallel *dp, Loader *ld, int B, int *inputs, int *targets) {
    for (int r = 0; r < dp->comm->size; r++) {
        if (r == dp->comm->rank) loader_next(ld, B, inputs, targets);
        else loader_skip(ld, B);
    }
}

int dp_reduce(DataParallel *dp, const float *grads, int k) {
    if (dp->grad == grads) return MHAR_OK;
    double t0 = now_seconds();
    int rc;
    if (dp->overlap) {
        rc = dp->failed || grads != dp->sending
                 ? mhar_fail("the gradients were not sent during the backward pass")
                 : comm_reduce_scatter_end(dp->comm, dp->ctx, dp->grad, &dp->shards, k > 0, dp->scratch);
        dp->sending = NULL;
        dp->failed = 0;
    } else {
        rc = comm_reduce_scatter(dp->comm, dp->ctx, grads, dp->grad, &dp->shards, k > 0, dp->scratch);
    }
    dp->comm_seconds += now_seconds() - t0;
    return rc;
}

int dp_loss(DataParallel *dp, const double *mine, double *loss) {
    const int N = dp->comm->size, K = dp->accum;
    double t0 = now_seconds();
    if (comm_allgather_f64(dp->comm, mine, dp->losses, K)) return MHAR_ERR;
    dp->comm_seconds += now_seconds() - t0;
    double sum = 0;
    for (int k = 0; k < K; k++)      // micro-batch k·N + r, in that order
        for (int r = 0; r < N; r++) sum += dp->losses[r * K + k] / (N * K);
    *loss = sum;
    return MHAR_OK;
}

int dp_grad_norm(DataParallel *dp, double *norm) {
    const Comm *c = dp->comm;
    size_t before = 0;
    for (int r = 0; r < c->rank; r++) before += dp->norm_counts[r];
    double *mine = dp->norm_parts + before;
    sum_squares(dp->ctx, mine, dp->grad, dp->n_mine, dp->shards.block);
    double t0 = now_seconds();
    if (c->size > 1) {
        double copy[dp->norm_counts[c->rank] + 1];   // the send buffer may not overlap the receive one
        memcpy(copy, mine, sizeof(double) * dp->norm_counts[c->rank]);
        if (comm_allgatherv_f64(dp->comm, copy, dp->norm_parts, dp->norm_counts)) return MHAR_ERR;
    }
    dp->comm_seconds += now_seconds() - t0;
    size_t blocks = 0;
    for (int r = 0; r < c->size; r++) blocks += dp->norm_counts[r];
    double sum = 0;
    for (size_t b = 0; b < blocks; b++) sum += dp->norm_parts[b];
    *norm = sqrt(sum);
    return MHAR_OK;
}

int dp_update(DataParallel *dp, AdamW *o, float *params, double norm, float lr) {
    adamw_step(o, params + dp->lo, dp->grad, norm, lr);
    double t0 = now_seconds();
    int rc = comm_allgather_shards(dp->comm, params, &dp->shards);
    dp->comm_seconds += now_seconds() - t0;
    return rc;
}

int dp_shard_optimizer(const DataParallel *dp, const AdamW *full, AdamW *shard) {
    if (adamw_init(shard, dp->ctx, dp->n_mine)) return MHAR_ERR;
    vec_copy(dp->ctx, shard->m, full->m + dp->lo, dp->n_mine);
    vec_copy(dp->ctx, shard->v, full->v + dp->lo, dp->n_mine);
    shard->step = full->step;
    if (full->ema && adamw_add_ema(shard, full->ema_decay, full->ema + dp->lo)) return MHAR_ERR;
    return MHAR_OK;
}

int dp_gather_optimizer(const DataParallel *dp, const AdamW *shard, AdamW *full) {
    memset(full, 0, sizeof *full);
    int rc = MHAR_OK;
    if (dp->comm->rank == 0) {
        rc = adamw_init(full, dp->ctx, dp->shards.n);
        if (!rc && shard->ema) rc = adamw_add_ema(full, shard->ema_decay, NULL);
    }
    if (comm_agree(dp->comm, rc)) return MHAR_ERR;
    if (comm_gather_shards(dp->comm, shard->m, full->m, &dp->shards) ||
        comm_gather_shards(dp->comm, shard->v, full->v, &dp->shards) ||
        (shard->ema && comm_gather_shards(dp->comm, shard->ema, full->ema, &dp->shards)))
        return MHAR_ERR;
    full->step = shard->step;
    return MHAR_OK;
}
