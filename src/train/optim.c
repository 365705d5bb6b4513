#include "optim.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../util/common.h"
#include "../util/memlimit.h"

int adamw_init(AdamW *o, OpsContext *ctx, size_t n) {
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->beta1 = 0.9f; o->beta2 = 0.95f; o->eps = 1e-8f; o->weight_decay = 0.1f; o->clip = 1.0f;
    o->n = n;
    if (n > (size_t)INT32_MAX) return mhar_fail("%zu parameters exceed the optimizer's limit", n);
    int shape[1] = {(int)n};
    int im = ptable_add(&o->moments, "exp_avg", 1, shape, INIT_ZEROS, PARAM_MATRIX);
    int iv = ptable_add(&o->moments, "exp_avg_sq", 1, shape, INIT_ZEROS, PARAM_MATRIX);
    if (im < 0 || iv < 0) return MHAR_ERR;
    if (mem_check(sizeof(float) * (double)o->moments.total, "the AdamW moments of %.0fM parameters", n / 1e6))
        return MHAR_ERR;
    o->state = ops_alloc(ctx, o->moments.total * sizeof(float));
    if (!o->state) return MHAR_ERR;
    o->m = o->state + o->moments.p[im].offset;
    o->v = o->state + o->moments.p[iv].offset;
    return MHAR_OK;
}

void adamw_free(AdamW *o) {
    ops_free(o->ctx, o->state);
    ops_free(o->ctx, o->decay);
    ops_free(o->ctx, o->ema);
    ptable_free(&o->moments);
    memset(o, 0, sizeof *o);
}

int adamw_exclude_decay(AdamW *o, const ParamTable *t, size_t lo, unsigned classes) {
    ops_free(o->ctx, o->decay);
    o->decay = NULL;
    if (!classes) return MHAR_OK;
    if (!(o->decay = ops_alloc(o->ctx, o->n ? o->n : 1))) return MHAR_ERR;
    memset(o->decay, 1, o->n);   // the alignment gaps between tensors too: they stay 0 either way
    const size_t hi = lo + o->n;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        size_t a = p->offset > lo ? p->offset : lo, b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a < b && (classes >> p->cls & 1u)) memset(o->decay + (a - lo), 0, b - a);
    }
    return MHAR_OK;
}

int adamw_add_ema(AdamW *o, float decay, const float *start) {
    if (!(decay > 0.0f && decay < 1.0f)) return mhar_fail("EMA decay %g is outside (0, 1)", (double)decay);
    if (mem_check(sizeof(float) * (double)o->n, "the EMA of %.0fM weights", o->n / 1e6)) return MHAR_ERR;
    if (!o->ema && !(o->ema = ops_alloc(o->ctx, sizeof(float) * (o->n ? o->n : 1)))) return MHAR_ERR;
    o->ema_decay = decay;
    if (start) vec_copy(o->ctx, o->ema, start, o->n);
    return MHAR_OK;
}

double grad_global_norm(OpsContext *ctx, const float *g, size_t n) {
    enum { PARTS = 64 };   // blocks summed in parallel, then in order
    double part[PARTS], total = 0;
    size_t block = n / PARTS + 1;
    sum_squares(ctx, part, g, n, block);
    for (size_t b = 0; b < (n + block - 1) / block; b++) total += part[b];
    return sqrt(total);
}

void adamw_step(AdamW *o, float *p, float *g, double norm, float lr) {
    o->step++;
    // torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6), at most 1.
    float scale = (float)(o->clip / (norm + 1e-6));
    if (scale > 1.0f) scale = 1.0f;
    const AdamWStep s = {
        .lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->weight_decay,
        .bc1 = 1.0f - powf(o->beta1, (float)o->step), .bc2_sqrt = sqrtf(1.0f - powf(o->beta2, (float)o->step)),
        .grad_scale = scale,
    };
    adamw_update(o->ctx, p, o->m, o->v, g, o->decay, o->n, s);
    if (o->ema) ema_update(o->ctx, o->ema, p, o->ema_decay, o->n);
}

float lr_schedule(long i, long total, long warmup, float peak) {
    if (i < warmup) return peak * (float)(i + 1) / (float)warmup;
    long span = total - warmup > 1 ? total - warmup : 1;
    double progress = (double)(i - warmup) / (double)span;
    if (progress > 1) progress = 1;
    return (float)(0.1 * peak + 0.9 * peak * 0.5 * (1.0 + cos(M_PI * progress)));
}
