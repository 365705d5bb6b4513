// SPEC §2.6: DenseFormer depth-weighted averaging (reading R7 of
// tests/ref/model.py). X_0 = Y_0 = emb; layer i (sublayers 2i, 2i+1) runs
// with its ordinary residual on Y_i, then the averaged state is formed:
//   x_{2i} = Y_i,  a_i = x_{2i+1} = Y_i + o_{2i},  X_{i+1} = a_i + o_{2i+1}
//   Y_{i+1} = Σ_{j=0..i+1} α_i[j] X_j     (α_i = model.layers.{i}.dwa_alpha [i+2])
//   final h = Y_L                          (the read at s = 2L)
// Activation slice: X_1 .. X_L [L][n_tok, d] (X_0 is sources[0]), then
// per-chunk backward scratch: a gy row [NCHUNK][d] and the dα partials
// [NCHUNK][L+1] doubles.
// Backward needs no gradient buffers of its own: X_j (j ≥ 1) enters the loss
// only through Y_{i+1} for i ≥ j-1, and o_{2j-1} only through X_j, so
// dL/dX_j IS dL/do_{2j-1} = dsources[2j]; dL/dX_0 accumulates in dsources[0].
// Expanding gy = dL/dY_i into them happens in read_backward(2i), when gy is
// complete; by write_backward(2j-1) every later Y has been expanded.
#include "residual.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/ops.h"

enum {
    NCHUNK = 64,     // fixed token chunks of the dα reduction
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
static size_t view_floats(const Config *c, int n_tok) { return round16((size_t)n_tok * c->hidden_size); }

// X_j, j = 0 .. L ([n_tok, d]).
static float *X(const Residual *r, int j) {
    return j == 0 ? r->sources[0] : r->acts + (size_t)(j - 1) * view_floats(r->cfg, r->n_tok);
}

// dL/dX_j: accumulated directly in the sources' gradients (see the header).
static float *dX(const Residual *r, int j) { return r->dsources[2 * j]; }

static float *gy_rows(const Residual *r) {  // [NCHUNK][round16(d)]
    return r->acts + (size_t)r->cfg->num_hidden_layers * view_floats(r->cfg, r->n_tok);
}

static double *alpha_parts(const Residual *r) {  // [NCHUNK][L+1]
    return (double *)(gy_rows(r) + NCHUNK * round16(r->cfg->hidden_size));
}

static const float *alpha_of(const Residual *r, int i) {
    return r->params + ((const size_t *)r->priv)[i];
}

// ---- parameters ------------------------------------------------------------------

// model.layers.{i}.dwa_alpha [i+2] (SPEC §3).
static int df_add_params(ParamTable *t, const Config *c) {
    for (int i = 0; i < c->num_hidden_layers; i++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.dwa_alpha", i);
        const int shape[1] = {i + 2};
        if (ptable_add(t, name, 1, shape, INIT_CUSTOM) < 0) return MHAR_ERR;
    }
    return MHAR_OK;
}

// SPEC §2.6 init: α_i[i+1] = 1, all others 0 (Y_{i+1} = X_{i+1}: the
// baseline). Deterministic, so the rng is not drawn from.
static void df_init_params(const ParamTable *t, const Config *c, float *params, Rng *rng) {
    (void)c; (void)rng;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        if (!strstr(p->name, ".dwa_alpha")) continue;
        float *w = params + p->offset;
        memset(w, 0, sizeof(float) * p->numel);
        w[p->numel - 1] = 1.0f;
    }
}

static size_t df_act_floats(const Config *c, int n_tok) {
    int L = c->num_hidden_layers;
    return L * view_floats(c, n_tok) + NCHUNK * round16(c->hidden_size) +
           round16((size_t)2 * NCHUNK * (L + 1));
}

// priv: size_t offset of dwa_alpha [L].
static int df_bind(Residual *r) {
    int L = r->cfg->num_hidden_layers;
    mhar_free(r->priv);  // bound again after a new arena
    size_t *off = r->priv = mhar_alloc(sizeof(size_t) * L);
    if (!off) return MHAR_ERR;
    for (int i = 0; i < L; i++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.dwa_alpha", i);
        if (residual_param(r, name, &off[i])) return MHAR_ERR;
    }
    return MHAR_OK;
}

// ---- row kernels (one token, d floats) ---------------------------------------------

// Explicit 8-lane vectors with a fixed final tree (as in kernels/cpu/route_impl.h):
// plain float sums do not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));

// Unaligned loads through a macro: a function returning v8 by value trips
// clang's -Wpsabi without -mavx.
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static float dot_row(const float *a, const float *b, int d) {
    v8 s = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) s += load8(a + k) * load8(b + k);
    float t = 0;  // tail, d % 8 values
    for (; k < d; k++) t += a[k] * b[k];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])) + t;
}

static void axpy_row(float *restrict y, float a, const float *restrict x, int d) {
    for (int k = 0; k < d; k++) y[k] += a * x[k];
}

static void add_row(float *restrict y, const float *restrict a, const float *restrict b, int d) {
    for (int k = 0; k < d; k++) y[k] = a[k] + b[k];
}

static void scale_row(float *restrict y, float a, const float *restrict x, int d) {
    for (int k = 0; k < d; k++) y[k] = a * x[k];
}

// ---- forward -------------------------------------------------------------------------

// Y_{i+1} = Σ_{j=0..i+1} α_i[j] X_j -> y [n_tok, d]
static void average(Residual *r, int i, float *y) {
    const int d = r->cfg->hidden_size, n = r->n_tok;
    const float *a = alpha_of(r, i);
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int t = 0; t < n; t++) {
        const size_t off = (size_t)t * d;
        scale_row(y + off, a[0], X(r, 0) + off, d);
        for (int j = 1; j <= i + 1; j++) axpy_row(y + off, a[j], X(r, j) + off, d);
    }
}

static void df_read(Residual *r, int s) {
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    if (s == 0) memcpy(r->inputs[0], r->sources[0], n * sizeof(float));   // Y_0 = emb
    else if (s % 2) vec_add(r->inputs[s], r->inputs[s - 1], r->sources[s], n); // a = Y + o_{s-1}
    else average(r, s / 2 - 1, r->inputs[s]);                             // Y_{s/2}
}

// After the MLP of layer i (s = 2i+1): X_{i+1} = a_i + o_{2i+1}.
static void df_write(Residual *r, int s) {
    if (s % 2 == 0) return;
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    vec_add(X(r, s / 2 + 1), r->inputs[s], r->sources[s + 1], n);
}

// ---- backward ------------------------------------------------------------------------

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// gy = dL/dY_i = dnext + dx (dnext = dL/da_i, NULL for the final read Y_L).
// Expand through Y_i = Σ_{j≤i} α_{i-1}[j] X_j: dL/dX_j += α_{i-1}[j] gy and
// dα_{i-1}[j] += ⟨gy, X_j⟩, summed per chunk in double, then chunks in order.
static void expand(Residual *r, int i, const float *dnext, const float *dx) {
    const int d = r->cfg->hidden_size, n = r->n_tok, np = r->cfg->num_hidden_layers + 1;
    const float *a = alpha_of(r, i - 1);
    double *parts = alpha_parts(r);
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double *acc = parts + (size_t)c * np;
        float *gy = gy_rows(r) + (size_t)c * round16(d);
        for (int j = 0; j <= i; j++) acc[j] = 0;
        for (size_t t = chunk_start(c, n); t < chunk_start(c + 1, n); t++) {
            const size_t off = t * d;
            const float *g = dx + off;
            if (dnext) {  // the token's gy row, reused from L1 for every j
                add_row(gy, dnext + off, dx + off, d);
                g = gy;
            }
            for (int j = 0; j <= i; j++) {
                acc[j] += dot_row(g, X(r, j) + off, d);
                axpy_row(dX(r, j) + off, a[j], g, d);
            }
        }
    }
    float *da = r->grads + ((const size_t *)r->priv)[i - 1];
    for (int j = 0; j <= i; j++) {
        double s = 0;
        for (int c = 0; c < NCHUNK; c++) s += parts[(size_t)c * np + j];
        da[j] += (float)s;
    }
}

// out += a + b, all [n]
static void acc_sum(float *restrict out, const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) out[k] += a[k] + b[k];
}

static void df_read_backward(Residual *r, int s, const float *dx) {
    int L = r->cfg->num_hidden_layers;
    if (s == 2 * L) { expand(r, L, NULL, dx); return; }      // h = Y_L
    // s odd: d o_{s-1} = dL/da = dL/dX_{(s+1)/2} + dx.  s = 0: demb = dL/dX_0
    // (already in dsources[0]) + dL/dY_0, dL/dY_0 = dL/da_0 + dx.
    if (s == 0 || s % 2)
        acc_sum(r->dsources[s], r->dsources[s + 1], dx, (size_t)r->n_tok * r->cfg->hidden_size);
    else
        expand(r, s / 2, r->dsources[s + 1], dx);  // x_s = Y_{s/2}
}

// Nothing to do: d o_s is complete in dsources[s+1] when its sublayer needs it.
static void df_write_backward(Residual *r, int s) { (void)r; (void)s; }

const ResidualScheme residual_denseformer = {
    .name = "denseformer",
    .summary = "depth-weighted averaging of every layer output",
    .heads = HEADS_NONE,
    .default_heads = 1,
    .needs_blocks = 0,
    .from_scratch = 1,
    .add_params = df_add_params,
    .init_params = df_init_params,
    .act_floats = df_act_floats,
    .bind = df_bind,
    .read = df_read,
    .write = df_write,
    .read_backward = df_read_backward,
    .write_backward = df_write_backward,
    .release = residual_free_priv,
};
