// SPEC §2.7: delta_mh, the identity-preserving conversion of a pretrained
// baseline (reading R8 of tests/ref/model.py). The ordinary stream r is kept;
// each sublayer s also routes over its own source list and adds the result
// with a scalar gate a_s (init 0, so a converted model IS the baseline):
//   read   x_s = r + a_s · y_s,   y_s = Route([z_s, emb, D_1 .. D_m], q_s, g_s, H)
//   write  r += o_s;  D_{b+1} += o_s for the block b of sublayer s
//   final  h = r                   (no final routing site)
// z_s [d] is the site's null source, the same vector at every token; it is
// materialised into a [n_tok, d] buffer so the fused Route kernel (SPEC §5)
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
//   Z, dZ      z_s broadcast over tokens, and its gradient before the sum
//   dy         a_s · dx, the Route output's gradient
//   y [2L]     each site's Route output (for dL/da_s = Σ dx · y_s)
//   D, dD [nb-1]  completed block deltas and their gradients
//   w [2L]     each site's softmax weights [m+2, n_tok, H]
// Reductions (da over tokens and width, dz over tokens) use fixed chunks and
// double partials summed in a fixed order: deterministic for any thread
// count, no atomics.
#include "residual.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/ops.h"

enum {
    NCHUNK = 64,     // fixed token chunks of the dα reduction
    TILE = 16,       // columns per task of the dz reduction (one cache line)
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

typedef struct { size_t q, g, z, a; } Site;  // parameter offsets of one site

typedef struct {
    int block_layers, n_blocks;
    size_t view;               // floats per [n_tok, d] view
    float *r, *dr, *Z, *dZ, *dy;
    float **y, **w;            // [2L]
    float **D, **dD;           // [n_blocks - 1]
    const float **src;         // [n_blocks + 1] the source list being routed
    float **dsrc;              // [n_blocks + 1] its gradient buffers
    Site site[];               // [2L]
} DeltaState;

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
// model's weights and the rng stream are untouched (SPEC §2.7 identity).
static int delta_add_params(ParamTable *t, const Config *c) {
    const int d = c->hidden_size, q_shape[2] = {1, d}, v_shape[1] = {d}, none[1] = {0};
    for (int s = 0; s < 2 * c->num_hidden_layers; s++) {
        char name[96];
        site_name(name, sizeof name, s, "res_proj.weight");
        if (ptable_add(t, name, 2, q_shape, INIT_ZEROS) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_norm.weight");
        if (ptable_add(t, name, 1, v_shape, INIT_ONES) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "null_source");
        if (ptable_add(t, name, 1, v_shape, INIT_ZEROS) < 0) return MHAR_ERR;
        site_name(name, sizeof name, s, "res_alpha");
        if (ptable_add(t, name, 0, none, INIT_ZEROS) < 0) return MHAR_ERR;
    }
    return MHAR_OK;
}

// Site s of block m routes over m + 2 sources: its weights are [m+2, n_tok, H].
static size_t weight_rows(const Config *c, int s) { return (size_t)((s / 2) / residual_block_layers(c)) + 2; }

static size_t delta_act_floats(const Config *c, int n_tok) {
    size_t L = c->num_hidden_layers, view = round16((size_t)n_tok * c->hidden_size);
    size_t total = (5 + 2 * L + 2 * (size_t)(residual_n_blocks(c) - 1)) * view;
    for (int s = 0; s < 2 * (int)L; s++) total += round16(weight_rows(c, s) * n_tok * c->attnres_num_heads);
    return total;
}

static int delta_bind(Residual *r) {
    const Config *c = r->cfg;
    int sites = 2 * c->num_hidden_layers, nb = residual_n_blocks(c);
    mhar_free(r->priv);  // bound again after a new arena: views are rebuilt
    size_t ptrs = 2 * (size_t)sites + 2 * (size_t)(nb - 1) + 2 * (size_t)(nb + 1);
    DeltaState *st = r->priv = mhar_alloc(sizeof *st + sizeof(Site) * sites + sizeof(float *) * ptrs);
    if (!st) return MHAR_ERR;
    st->block_layers = residual_block_layers(c);
    st->n_blocks = nb;
    st->view = round16((size_t)r->n_tok * c->hidden_size);
    float **p = (float **)(st->site + sites);
    st->y = p; p += sites;
    st->w = p; p += sites;
    st->D = p; p += nb - 1;
    st->dD = p; p += nb - 1;
    st->src = (const float **)p; p += nb + 1;
    st->dsrc = p;
    float *a = r->acts;
    st->r = a; a += st->view;
    st->dr = a; a += st->view;
    st->Z = a; a += st->view;
    st->dZ = a; a += st->view;
    st->dy = a; a += st->view;
    for (int s = 0; s < sites; s++) { st->y[s] = a; a += st->view; }
    for (int b = 0; b < nb - 1; b++) { st->D[b] = a; a += st->view; st->dD[b] = a; a += st->view; }
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

// ---- helpers -----------------------------------------------------------------------

// Z [n_tok, d] = z [d] at every token; dZ (if given) cleared for the
// kernel to accumulate into.
static void broadcast_null(float *restrict Z, float *restrict dZ, const float *restrict z, int n, int d) {
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int t = 0; t < n; t++) {
        memcpy(Z + (size_t)t * d, z, sizeof(float) * d);
        if (dZ) memset(dZ + (size_t)t * d, 0, sizeof(float) * d);
    }
}

// The source list of site s: [Z, emb, D_1 .. D_m] and their gradients.
static int gather(Residual *r, DeltaState *st, int s) {
    int m = block_of(st, s), n = 0;
    st->src[n] = st->Z;
    st->dsrc[n++] = st->dZ;
    st->src[n] = r->sources[0];
    st->dsrc[n++] = r->dsources[0];
    for (int j = 0; j < m; j++, n++) {
        st->src[n] = st->D[j];
        st->dsrc[n] = st->dD[j];
    }
    return n;
}

// Explicit 8-lane vectors with a fixed final tree (as in kernels/cpu/route_impl.h):
// a plain float sum does not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static inline float hsum8(const v8 *v) {
    return (((*v)[0] + (*v)[4]) + ((*v)[2] + (*v)[6])) + (((*v)[1] + (*v)[5]) + ((*v)[3] + (*v)[7]));
}

static inline float dot(const float *restrict a, const float *restrict b, int d) {
    v8 s = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) s += load8(a + k) * load8(b + k);
    float t = 0;
    for (; k < d; k++) t += a[k] * b[k];
    return hsum8(&s) + t;
}

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// ---- forward -----------------------------------------------------------------------

static void delta_read(Residual *r, int s) {
    DeltaState *st = r->priv;
    const Config *c = r->cfg;
    const int n = r->n_tok, d = c->hidden_size;
    const size_t nd = (size_t)n * d;
    if (s == 2 * c->num_hidden_layers) {  // h = r
        memcpy(r->inputs[s], st->r, nd * sizeof(float));
        return;
    }
    if (s == 0) memcpy(st->r, r->sources[0], nd * sizeof(float));  // r = emb
    const Site *si = &st->site[s];
    broadcast_null(st->Z, NULL, r->params + si->z, n, d);
    int n_src = gather(r, st, s);
    route_forward(st->y[s], st->w[s], r->scratch, st->src, n_src, r->params + si->q, r->params + si->g, n, d,
                  c->attnres_num_heads, c->rms_norm_eps);
    // a = 0 must give exactly r, as the baseline's read does: r + 0·y would
    // turn -0.0 into +0.0 and an infinite y into NaN.
    const float a = r->params[si->a];
    float *restrict x = r->inputs[s];
    const float *restrict rr = st->r, *restrict y = st->y[s];
    if (a == 0.0f) { memcpy(x, rr, nd * sizeof(float)); return; }
#pragma omp parallel for simd schedule(static) if (parallel : nd >= PAR_MIN)
    for (size_t k = 0; k < nd; k++) x[k] = rr[k] + a * y[k];
}

// r += o_s (the same float add as the baseline's stream), and the delta of
// the sublayer's block when a later block reads it.
static void delta_write(Residual *r, int s) {
    DeltaState *st = r->priv;
    const size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    const float *o = r->sources[s + 1];
    vec_acc(st->r, o, nd);
    int b = block_of(st, s);
    if (b == st->n_blocks - 1) return;
    if (first_in_block(st, s)) memcpy(st->D[b], o, nd * sizeof(float));
    else vec_acc(st->D[b], o, nd);
}

// ---- backward ----------------------------------------------------------------------

// One pass over the tokens: dr += dx, dy = a·dx, and Σ dx·y_s per fixed
// token chunk (float lanes per token, double over tokens) into part.
static void stream_backward(DeltaState *st, const float *restrict dx, const float *restrict y, float a,
                            int n, int d, double *part) {
    float *restrict dr = st->dr, *restrict dy = st->dy;
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double acc = 0;
        for (size_t t = chunk_start(c, n); t < chunk_start(c + 1, n); t++) {
            const size_t o = t * d;
            acc += dot(dx + o, y + o, d);
            for (int k = 0; k < d; k++) {
                dr[o + k] += dx[o + k];
                dy[o + k] = a * dx[o + k];
            }
        }
        part[c] = acc;
    }
}

// dz [d] += Σ_t dZ[t, :]: each task owns TILE columns and walks the tokens
// in order, in double.
static void reduce_tokens(float *dz, const float *dZ, int n, int d) {
    const int tiles = (d + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int i = 0; i < tiles; i++) {
        const int k0 = i * TILE, nk = d - k0 < TILE ? d - k0 : TILE;
        double acc[TILE] = {0};
        for (int t = 0; t < n; t++)
            for (int k = 0; k < nk; k++) acc[k] += dZ[(size_t)t * d + k0 + k];
        for (int k = 0; k < nk; k++) dz[k0 + k] += (float)acc[k];
    }
}

// x_s = r + a·y_s:  dr += dx,  da += Σ dx·y_s,  dy = a·dx into Route's
// backward (q, g, z, emb, the deltas). At s = 0 the stream is the embedding.
static void delta_read_backward(Residual *r, int s, const float *dx) {
    DeltaState *st = r->priv;
    const Config *c = r->cfg;
    const int n = r->n_tok, d = c->hidden_size;
    const size_t nd = (size_t)n * d;
    if (s == 2 * c->num_hidden_layers) {  // the first backward call: h = r
        memcpy(st->dr, dx, nd * sizeof(float));
        for (int b = 0; b < st->n_blocks - 1; b++) memset(st->dD[b], 0, nd * sizeof(float));
        return;
    }
    const Site *si = &st->site[s];
    const float a = r->params[si->a];
    double part[NCHUNK], da = 0;
    stream_backward(st, dx, st->y[s], a, n, d, part);
    for (int k = 0; k < NCHUNK; k++) da += part[k];
    r->grads[si->a] += (float)da;
    // a = 0: dy = 0, so every Route gradient is exactly 0 and adds nothing.
    if (a != 0.0f) {
        broadcast_null(st->Z, st->dZ, r->params + si->z, n, d);
        int n_src = gather(r, st, s);
        route_backward(st->dsrc, r->grads + si->q, r->grads + si->g, r->scratch, st->dy, st->w[s],
                       st->src, n_src, r->params + si->q, r->params + si->g, n, d,
                       c->attnres_num_heads, c->rms_norm_eps);
        reduce_tokens(r->grads + si->z, st->dZ, n, d);
    }
    if (s == 0) vec_acc(r->dsources[0], st->dr, nd);
}

// r_{s+1} = r_s + o_s and D_{b+1} ∋ o_s: d o_s = dr + dD_b. Both are complete
// here: every reader of r_{s+1} and of D_{b+1} ran its backward already.
static void delta_write_backward(Residual *r, int s) {
    DeltaState *st = r->priv;
    const size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    float *restrict dout = r->dsources[s + 1];
    const float *restrict dr = st->dr;
    int b = block_of(st, s);
    if (b == st->n_blocks - 1) { vec_acc(dout, dr, nd); return; }
    const float *restrict dD = st->dD[b];
#pragma omp parallel for simd schedule(static) if (parallel : nd >= PAR_MIN)
    for (size_t k = 0; k < nd; k++) dout[k] += dr[k] + dD[k];
}

// No route_weights: the statistics and probes read source 0 as the
// embedding and expect a final site; here source 0 is z_s and h = r.
const ResidualScheme residual_delta_mh = {
    .name = "delta_mh",
    .summary = "identity-preserving conversion of a baseline (mhar convert)",
    .heads = HEADS_ANY,
    .default_heads = 8,
    .needs_blocks = 1,
    .from_scratch = 0,
    .add_params = delta_add_params,
    .act_floats = delta_act_floats,
    .bind = delta_bind,
    .read = delta_read,
    .write = delta_write,
    .read_backward = delta_read_backward,
    .write_backward = delta_write_backward,
    .release = residual_free_priv,
};
