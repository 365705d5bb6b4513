// AdamW (decoupled weight decay, torch.optim.AdamW semantics), global-norm
// gradient clipping, the warm-up + cosine learning-rate schedule, and the
// recipe's options on top: weight decay left off some parameter classes and
// an exponential moving average of the weights, both held per element like
// the moments (so a data-parallel rank holds them for its shard).
#pragma once
#include <stddef.h>
#include "../kernels/ops.h"
#include "../model/params.h"

typedef struct {
    OpsContext *ctx;     // the backend of the model it updates; owns the moments
    float beta1, beta2, eps, weight_decay, clip;  // 0.9, 0.95, 1e-8, 0.1, 1.0
    ParamTable moments;  // "exp_avg" and "exp_avg_sq", each [n]: how they are saved
    float *state;        // moments.total floats
    float *m, *v;        // views into state: first and second moments [n]
    size_t n;
    long step;           // updates applied so far
    unsigned char *decay;  // [n] 0 where weight decay is left off (adamw_exclude_decay); NULL: decay all
    float ema_decay;     // the EMA's decay D (adamw_add_ema); 0: no EMA
    float *ema;          // [n] EMA of the weights, in the parameters' layout; NULL: none
} AdamW;

// The SPEC §4 hyper-parameters, zero moments for n parameters on ctx.
int adamw_init(AdamW *o, OpsContext *ctx, size_t n);
void adamw_free(AdamW *o);
// No weight decay on the tensors of t whose class is in `classes` (bits
// 1u << ParamClass) among the elements [lo, lo + o->n) of t's buffer: the
// ones this optimizer updates. classes 0 leaves every element decayed.
int adamw_exclude_decay(AdamW *o, const ParamTable *t, size_t lo, unsigned classes);
// Keep an EMA of the weights, ema ← D·ema + (1 − D)·p after every update,
// starting from `start` [n] (the weights it updates; NULL: zeros, to be
// loaded).
int adamw_add_ema(AdamW *o, float decay, const float *start);
// Global L2 norm of g [n], reduced in a fixed order (deterministic).
double grad_global_norm(OpsContext *ctx, const float *g, size_t n);
// Clip g to o->clip by `norm` and apply one update to p with learning rate
// lr (without decay where adamw_exclude_decay said), then the EMA's.
void adamw_step(AdamW *o, float *p, float *g, double norm, float lr);
// Learning rate at 0-based step i of `total`: linear warm-up over `warmup`
// steps to `peak`, then cosine to 0.1·peak at the last step.
float lr_schedule(long i, long total, long warmup, float peak);
