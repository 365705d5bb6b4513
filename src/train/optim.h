// AdamW (decoupled weight decay, torch.optim.AdamW semantics), global-norm
// gradient clipping and the warm-up + cosine learning-rate schedule.
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
} AdamW;

// The SPEC §4 hyper-parameters, zero moments for n parameters on ctx.
int adamw_init(AdamW *o, OpsContext *ctx, size_t n);
void adamw_free(AdamW *o);
// Global L2 norm of g [n], reduced in a fixed order (deterministic).
double grad_global_norm(OpsContext *ctx, const float *g, size_t n);
// Clip g to o->clip by `norm` and apply one update to p with learning rate lr.
void adamw_step(AdamW *o, float *p, float *g, double norm, float lr);
// Learning rate at 0-based step i of `total`: linear warm-up over `warmup`
// steps to `peak`, then cosine to 0.1·peak at the last step.
float lr_schedule(long i, long total, long warmup, float peak);
