// SPEC §2.6: DenseFormer depth-weighted averaging (reading R7 of
// tests/ref/model.py). X_0 = Y_0 = emb; layer i (sublayers 2i, 2i+1) runs
// with its ordinary residual on Y_i, then the averaged state is formed:
//   x_{2i} = Y_i,  a_i = x_{2i+1} = Y_i + o_{2i},  X_{i+1} = a_i + o_{2i+1}
//   Y_{i+1} = Σ_{j=0..i+1} α_i[j] X_j     (α_i = model.layers.{i}.dwa_alpha [i+2])
//   final h = Y_L                          (the read at s = 2L)
// Activation slice: X_0 .. X_L [L+1][n_tok, d] (X_0 a copy of sources[0], so
// the X_j are one strided buffer), then the backward's scratch
// (dwa_scratch_floats).
// Backward needs no gradient buffers of its own: X_j (j ≥ 1) enters the loss
// only through Y_{i+1} for i ≥ j-1, and o_{2j-1} only through X_j, so
// dL/dX_j IS dL/do_{2j-1} = dsources[2j]; dL/dX_0 accumulates in dsources[0].
// Expanding gy = dL/dY_i into them happens in read_backward(2i), when gy is
// complete; by write_backward(2j-1) every later Y has been expanded.
#include "residual.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/ops.h"

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
static size_t view_floats(const Config *c, int n_tok) { return round16((size_t)n_tok * c->hidden_size); }

// X_j, j = 0 .. L ([n_tok, d]), at stride view_floats.
static float *X(const Residual *r, int j) {
    return r->acts + (size_t)j * view_floats(r->cfg, r->n_tok);
}

// dL/dX_j is accumulated directly in the sources' gradients (see the
// header): dsources[2j], a strided buffer of its own.
static float *dX0(const Residual *r) { return r->dsources; }
static size_t dX_stride(const Residual *r) { return 2 * r->row_floats; }

static float *scratch(const Residual *r) { return X(r, r->cfg->num_hidden_layers + 1); }

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
        if (ptable_add(t, name, 1, shape, INIT_CUSTOM, PARAM_ROUTE) < 0) return MHAR_ERR;
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
    return (L + 1) * view_floats(c, n_tok) + dwa_scratch_floats(c->hidden_size, L + 1);
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

// ---- forward -------------------------------------------------------------------------

static void df_read(Residual *r, int s) {
    const int n_tok = r->n_tok, d = r->cfg->hidden_size;
    size_t n = (size_t)n_tok * d;
    if (s == 0) {  // Y_0 = X_0 = emb
        vec_copy(r->ctx, residual_input(r, 0), residual_source(r, 0), n);
        vec_copy(r->ctx, X(r, 0), residual_source(r, 0), n);
    } else if (s % 2) {  // a = Y + o_{s-1}
        vec_add(r->ctx, residual_input(r, s), residual_input(r, s - 1), residual_source(r, s), n);
    } else {  // Y_i = Σ_{j ≤ i} α_{i-1}[j] X_j
        int i = s / 2;
        dwa_average(r->ctx, residual_input(r, s), X(r, 0), view_floats(r->cfg, n_tok), alpha_of(r, i - 1), i + 1,
                    n_tok, d);
    }
}

// After the MLP of layer i (s = 2i+1): X_{i+1} = a_i + o_{2i+1}.
static void df_write(Residual *r, int s) {
    if (s % 2 == 0) return;
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    vec_add(r->ctx, X(r, s / 2 + 1), residual_input(r, s), residual_source(r, s + 1), n);
}

// ---- backward ------------------------------------------------------------------------

// gy = dL/dY_i = dnext + dx (dnext = dL/da_i, NULL for the final read Y_L).
// Expand through Y_i = Σ_{j≤i} α_{i-1}[j] X_j: dL/dX_j += α_{i-1}[j] gy and
// dα_{i-1}[j] += ⟨gy, X_j⟩.
static void expand(Residual *r, int i, const float *dnext, const float *dx) {
    float *dalpha = r->grads + ((const size_t *)r->priv)[i - 1];
    dwa_backward(r->ctx, dX0(r), dX_stride(r), dalpha, scratch(r), dnext, dx, X(r, 0),
                 view_floats(r->cfg, r->n_tok), alpha_of(r, i - 1), i + 1, r->n_tok, r->cfg->hidden_size);
}

static void df_read_backward(Residual *r, int s, const float *dx) {
    int L = r->cfg->num_hidden_layers;
    if (s == 2 * L) { expand(r, L, NULL, dx); return; }      // h = Y_L
    // s odd: d o_{s-1} = dL/da = dL/dX_{(s+1)/2} + dx.  s = 0: demb = dL/dX_0
    // (already in dsources[0]) + dL/dY_0, dL/dY_0 = dL/da_0 + dx.
    if (s == 0 || s % 2)
        vec_acc2(r->ctx, residual_dsource(r, s), residual_dsource(r, s + 1), dx,
                 (size_t)r->n_tok * r->cfg->hidden_size);
    else
        expand(r, s / 2, residual_dsource(r, s + 1), dx);  // x_s = Y_{s/2}
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
