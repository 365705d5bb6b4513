// SPEC §2.7: delta_mh, the identity-preserving conversion of a pretrained
// baseline (reading R8 of tests/ref/model.py). The ordinary stream r is kept;
// each sublayer s also routes over its own source list and adds the result
// with a scalar gate a_s (init 0, so a converted model IS the baseline):
//   read   x_s = r + a_s · y_s,   y_s = Route([z_s, emb, D_1 .. D_m], q_s, g_s, H)
//   write  r += o_s;  D_{b+1} += o_s for the block b of sublayer s
//   final  h = r                   (no final routing site)
// z_s [d] is the site's null source, the same vector at every token; it is
// materialised into a [n_tok, d] row so the fused Route kernel (SPEC §5)
// reads it like any other source. Blocks are runs of ceil(L/N) layers; a
// sublayer of block m (0-based) reads only the m completed block deltas, so
// the last block's delta is never read and never formed.
//
// Parameters per site, SPEC §3 names (model.layers.{i}.{attn,mlp}_...):
//   res_proj.weight [1, d] = q (init 0), res_norm.weight [d] = g (init 1),
//   null_source [d] = z (init 0), res_alpha [] = a (init 0).
//
// Activation slice, views of [n_tok, d] rounded up to 16 floats:
//   r, dr      the stream and dL/dr at the depth backward has reached
//   dy         a_s · dx, the Route output's gradient
//   y [2L]     each site's Route output (for dL/da_s = Σ dx · y_s)
//   src [nb+1] the sources, one strided buffer: Z (z_s broadcast over
//              tokens), E (a copy of emb), D_1 .. D_{nb-1} (block deltas)
//   dsrc [nb+1] their gradients, alike (dZ before its sum over tokens)
//   w [2L]     each site's softmax weights [m+2, n_tok, H]
#include "residual.h"

#include <stdio.h>

#include "../kernels/ops.h"

typedef struct { size_t q, g, z, a; } Site;  // parameter offsets of one site

typedef struct {
    int block_layers, n_blocks;
    size_t view;               // floats per [n_tok, d] view
    float *r, *dr, *dy;
    float *src, *dsrc;         // [n_blocks + 1] views each: Z, E, D_1 .. (see the header)
    float **y, **w;            // [2L]
    Site site[];               // [2L]
} DeltaState;

enum { ROW_Z, ROW_EMB, ROW_D1 };  // rows of src and dsrc

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
static int block_of(const DeltaState *st, int s) { return (s / 2) / st->block_layers; }
static int first_in_block(const DeltaState *st, int s) { return s == 2 * block_of(st, s) * st->block_layers; }

// ---- parameters ------------------------------------------------------------------

static const char *const KINDS[2] = {"attn", "mlp"};  // s even: attention, odd: MLP

static void site_name(char *out, size_t cap, int s, const char *suffix) {
    snprintf(out, cap, "model.layers.%d.%s_%s", s / 2, KINDS[s % 2], suffix);
}

// Per site, in the reference's order: res_proj [1, d] 0, res_norm [d] 1,
// null_source [d] 0, res_alpha [] 0. Every init is a constant, so the base
// model's weights and the rng stream are untouched (SPEC §2.7 identity);
// route_query_init normal draws q from the scheme's own stream, and a = 0
// keeps the identity all the same.
static int delta_add_params(ParamTable *t, const Config *c) {
    const int d = c->hidden_size, q_shape[2] = {1, d}, v_shape[1] = {d}, none[1] = {0};
    for (int s = 0; s < 2 * c->num_hidden_layers; s++) {
        char name[96];
        site_name(name, sizeof name, s, "res_proj.weight");
        if (ptable_add(t, name, 2, q_shape, residual_route_query_init(c), PARAM_ROUTE) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_norm.weight");
        if (ptable_add(t, name, 1, v_shape, INIT_ONES, PARAM_ROUTE) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "null_source");
        if (ptable_add(t, name, 1, v_shape, INIT_ZEROS, PARAM_ROUTE) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_alpha");
        if (ptable_add(t, name, 0, none, INIT_ZEROS, PARAM_ROUTE) < 0) return MHAR_ERR;
    }
    return MHAR_OK;
}

// Site s of block m routes over m + 2 sources: its weights are [m+2, n_tok, H].
static size_t weight_rows(const Config *c, int s) { return (size_t)((s / 2) / residual_block_layers(c)) + 2; }

static size_t delta_act_floats(const Config *c, int n_tok) {
    size_t L = c->num_hidden_layers, view = round16((size_t)n_tok * c->hidden_size);
    size_t total = (3 + 2 * L + 2 * (size_t)(residual_n_blocks(c) + 1)) * view;
    for (int s = 0; s < 2 * (int)L; s++) total += round16(weight_rows(c, s) * n_tok * c->attnres_num_heads);
    return total;
}

static int delta_bind(Residual *r) {
    const Config *c = r->cfg;
    int sites = 2 * c->num_hidden_layers, nb = residual_n_blocks(c);
    mhar_free(r->priv);  // bound again after a new arena: views are rebuilt
    DeltaState *st = r->priv = mhar_alloc(sizeof *st + sizeof(Site) * sites + sizeof(float *) * 2 * sites);
    if (!st) return MHAR_ERR;
    st->block_layers = residual_block_layers(c);
    st->n_blocks = nb;
    st->view = round16((size_t)r->n_tok * c->hidden_size);
    st->y = (float **)(st->site + sites);
    st->w = st->y + sites;
    float *a = r->acts;
    st->r = a; a += st->view;
    st->dr = a; a += st->view;
    st->dy = a; a += st->view;
    st->src = a; a += (size_t)(nb + 1) * st->view;
    st->dsrc = a; a += (size_t)(nb + 1) * st->view;
    for (int s = 0; s < sites; s++) { st->y[s] = a; a += st->view; }
    for (int s = 0; s < sites; s++) {
        st->w[s] = a;
        a += round16(weight_rows(c, s) * r->n_tok * c->attnres_num_heads);
        char name[96];
        Site *si = &st->site[s];
        site_name(name, sizeof name, s, "res_proj.weight");
        if (residual_param(r, name, &si->q)) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_norm.weight");
        if (residual_param(r, name, &si->g)) return MHAR_ERR;
        site_name(name, sizeof name, s, "null_source");
        if (residual_param(r, name, &si->z)) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_alpha");
        if (residual_param(r, name, &si->a)) return MHAR_ERR;
    }
    return MHAR_OK;
}

static float *row(const DeltaState *st, float *base, int i) { return base + (size_t)i * st->view; }

// Site s of block m routes over [Z, E, D_1 .. D_m]: the first m + 2 rows.
static RouteSources sources_of(const DeltaState *st, int s) {
    return (RouteSources){st->src, st->view, block_of(st, s) + 2, NULL};
}

// ---- forward -----------------------------------------------------------------------

static void delta_read(Residual *r, int s) {
    DeltaState *st = r->priv;
    const Config *c = r->cfg;
    const int n = r->n_tok, d = c->hidden_size;
    const size_t nd = (size_t)n * d;
    if (s == 2 * c->num_hidden_layers) {  // h = r
        vec_copy(r->ctx, residual_input(r, s), st->r, nd);
        return;
    }
    if (s == 0) {  // r = emb, and E = emb for the routing
        vec_copy(r->ctx, st->r, residual_source(r, 0), nd);
        vec_copy(r->ctx, row(st, st->src, ROW_EMB), residual_source(r, 0), nd);
    }
    const Site *si = &st->site[s];
    rows_broadcast(r->ctx, row(st, st->src, ROW_Z), r->params + si->z, n, d);
    route_forward(r->ctx, st->y[s], st->w[s], r->scratch, sources_of(st, s), r->params + si->q,
                  r->params + si->g, n, d, c->attnres_num_heads, c->rms_norm_eps);
    // a = 0 must give exactly r, as the baseline's read does: r + 0·y would
    // turn -0.0 into +0.0 and an infinite y into NaN.
    const float a = r->params[si->a];
    if (a == 0.0f) vec_copy(r->ctx, residual_input(r, s), st->r, nd);
    else vec_axpy(r->ctx, residual_input(r, s), st->r, a, st->y[s], nd);
}

// r += o_s (the same float add as the baseline's stream), and the delta of
// the sublayer's block when a later block reads it.
static void delta_write(Residual *r, int s) {
    DeltaState *st = r->priv;
    const size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    const float *o = residual_source(r, s + 1);
    vec_acc(r->ctx, st->r, o, nd);
    int b = block_of(st, s);
    if (b == st->n_blocks - 1) return;
    if (first_in_block(st, s)) vec_copy(r->ctx, row(st, st->src, ROW_D1 + b), o, nd);
    else vec_acc(r->ctx, row(st, st->src, ROW_D1 + b), o, nd);
}

// ---- backward ----------------------------------------------------------------------

// x_s = r + a·y_s:  dr += dx,  da += Σ dx·y_s,  dy = a·dx into Route's
// backward (q, g, z, emb, the deltas). At s = 0 the stream is the embedding.
static void delta_read_backward(Residual *r, int s, const float *dx) {
    DeltaState *st = r->priv;
    const Config *c = r->cfg;
    const int n = r->n_tok, d = c->hidden_size;
    const size_t nd = (size_t)n * d;
    if (s == 2 * c->num_hidden_layers) {  // the first backward call: h = r
        vec_copy(r->ctx, st->dr, dx, nd);
        vec_zero(r->ctx, row(st, st->dsrc, ROW_EMB), (size_t)st->n_blocks * st->view);  // E and the deltas
        return;
    }
    const Site *si = &st->site[s];
    const float a = r->params[si->a];
    gated_read_backward(r->ctx, st->dr, st->dy, r->grads + si->a, dx, st->y[s], a, n, d);
    // a = 0: dy = 0, so every Route gradient is exactly 0 and adds nothing.
    if (a != 0.0f) {
        rows_broadcast(r->ctx, row(st, st->src, ROW_Z), r->params + si->z, n, d);
        vec_zero(r->ctx, row(st, st->dsrc, ROW_Z), nd);
        route_backward(r->ctx, (RouteGrads){st->dsrc, st->view, NULL}, r->grads + si->q, r->grads + si->g,
                       r->scratch, st->dy, st->w[s], sources_of(st, s), r->params + si->q, r->params + si->g,
                       n, d, c->attnres_num_heads, c->rms_norm_eps);
        rows_sum(r->ctx, r->grads + si->z, row(st, st->dsrc, ROW_Z), n, d);
    }
    if (s == 0) {  // emb: the stream's gradient and the routes' (through E)
        vec_acc(r->ctx, residual_dsource(r, 0), row(st, st->dsrc, ROW_EMB), nd);
        vec_acc(r->ctx, residual_dsource(r, 0), st->dr, nd);
    }
}

// r_{s+1} = r_s + o_s and D_{b+1} ∋ o_s: d o_s = dr + dD_b. Both are complete
// here: every reader of r_{s+1} and of D_{b+1} ran its backward already.
static void delta_write_backward(Residual *r, int s) {
    DeltaState *st = r->priv;
    const size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    float *dout = residual_dsource(r, s + 1);
    int b = block_of(st, s);
    if (b == st->n_blocks - 1) vec_acc(r->ctx, dout, st->dr, nd);
    else vec_acc2(r->ctx, dout, st->dr, row(st, st->dsrc, ROW_D1 + b), nd);
}

// The statistics (routing.jsonl) see 2L sites, no final read, with source 0
// the null source z_s, and each site's gate a_s.
static const float *delta_route_weights(const Residual *r, int s, int *n_src) {
    const DeltaState *st = r->priv;
    if (s >= 2 * r->cfg->num_hidden_layers) return NULL;
    *n_src = sources_of(st, s).n;
    return st->w[s];
}

static float delta_route_gate(const Residual *r, int s) {
    const DeltaState *st = r->priv;
    return r->params[st->site[s].a];
}

const ResidualScheme residual_delta_mh = {
    .name = "delta_mh",
    .summary = "identity-preserving conversion of a baseline (mhar convert)",
    .heads = HEADS_ANY,
    .default_heads = 8,
    .needs_blocks = 1,
    .from_scratch = 0,
    .add_params = delta_add_params,
    .init_params = residual_init_route_queries,
    .route_weights = delta_route_weights,
    .source0 = "null",
    .route_gate = delta_route_gate,
    .act_floats = delta_act_floats,
    .bind = delta_bind,
    .read = delta_read,
    .write = delta_write,
    .read_backward = delta_read_backward,
    .write_backward = delta_write_backward,
    .release = residual_free_priv,
};
