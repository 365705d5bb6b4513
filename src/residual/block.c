// SPEC §2.4: block routing. Layers form blocks of ceil(L/N); the sources are
// b_0 = emb and the block sums b_1..b_m of completed blocks, plus p, the
// partial sum of the current block (absent at a block's first sublayer).
// acc[s] is the running sum of the current block up to and including o_s, so
// p at sublayer s is acc[s-1] and b_j is acc at block j-1's last sublayer.
#include "residual.h"

#include <string.h>

#include "../kernels/ops.h"

typedef struct {
    int block_layers, n_blocks;
    size_t *q, *g;        // [2L+1] site parameter offsets
    float **w;            // [2L+1] saved weights, each [n_src(s), n, H]
    float **acc, **dacc;  // [2L] running block sums and their gradients
    const float **src;    // [n_blocks + 2] source list being routed
    float **dsrc;         // [n_blocks + 2] their gradient buffers
} BlockState;

static int block_of(const BlockState *st, int s) { return (s / 2) / st->block_layers; }
static int first_in_block(const BlockState *st, int s) { return s == 2 * block_of(st, s) * st->block_layers; }
// Last sublayer of block j (0-based).
static int block_end(const BlockState *st, int j, int L) {
    int end_layer = (j + 1) * st->block_layers < L ? (j + 1) * st->block_layers : L;
    return 2 * end_layer - 1;
}

static int block_add_params(ParamTable *t, const Config *c) { return residual_add_route_sites(t, c, 1); }

static size_t block_act_floats(const Config *c, int n_tok) {
    size_t L = c->num_hidden_layers, sites = 2 * L + 1, nd = (size_t)n_tok * c->hidden_size;
    return sites * (residual_n_blocks(c) + 2) * n_tok * c->attnres_num_heads + 2 * (2 * L) * nd;
}

static int block_bind(Residual *r) {
    const Config *c = r->cfg;
    int L = c->num_hidden_layers, sites = 2 * L + 1, nb = residual_n_blocks(c);
    BlockState *st = r->priv;
    if (!st) {
        size_t bytes = sizeof(BlockState) + sites * (2 * sizeof(size_t) + sizeof(float *)) +
                       2 * (2 * L) * sizeof(float *) + 2 * (nb + 2) * sizeof(float *);
        st = r->priv = mhar_alloc(bytes);
        if (!st) return MHAR_ERR;
        st->q = (size_t *)(st + 1);
        st->g = st->q + sites;
        st->w = (float **)(st->g + sites);
        st->acc = st->w + sites;
        st->dacc = st->acc + 2 * L;
        st->src = (const float **)(st->dacc + 2 * L);
        st->dsrc = (float **)(st->src + nb + 2);
    }
    st->block_layers = residual_block_layers(c);
    st->n_blocks = nb;
    size_t nd = (size_t)r->n_tok * c->hidden_size;
    float *p = r->acts;
    for (int s = 0; s < sites; s++) {
        if (residual_route_site(r, s, &st->q[s], &st->g[s])) return MHAR_ERR;
        st->w[s] = p;
        p += (size_t)(nb + 2) * r->n_tok * c->attnres_num_heads;
    }
    for (int s = 0; s < 2 * L; s++) { st->acc[s] = p; p += nd; st->dacc[s] = p; p += nd; }
    return MHAR_OK;
}

// The sources of site s (and, for backward, their gradient buffers).
static int gather(Residual *r, BlockState *st, int s) {
    int L = r->cfg->num_hidden_layers, final = s == 2 * L;
    int completed = final ? st->n_blocks : block_of(st, s), n = 0;
    st->src[n] = r->sources[0];
    st->dsrc[n++] = r->dsources[0];
    for (int j = 0; j < completed; j++, n++) {
        st->src[n] = st->acc[block_end(st, j, L)];
        st->dsrc[n] = st->dacc[block_end(st, j, L)];
    }
    if (!final && !first_in_block(st, s)) {
        st->src[n] = st->acc[s - 1];
        st->dsrc[n++] = st->dacc[s - 1];
    }
    return n;
}

static void block_read(Residual *r, int s) {
    BlockState *st = r->priv;
    const Config *c = r->cfg;
    int n = gather(r, st, s);
    route_forward(r->inputs[s], st->w[s], r->scratch, st->src, n, r->params + st->q[s], r->params + st->g[s],
                  r->n_tok, c->hidden_size, c->attnres_num_heads, c->rms_norm_eps);
}

static void block_write(Residual *r, int s) {
    BlockState *st = r->priv;
    size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    if (first_in_block(st, s)) memcpy(st->acc[s], r->sources[s + 1], nd * sizeof(float));
    else vec_add(st->acc[s], st->acc[s - 1], r->sources[s + 1], nd);
}

static void block_read_backward(Residual *r, int s, const float *dx) {
    BlockState *st = r->priv;
    const Config *c = r->cfg;
    size_t nd = (size_t)r->n_tok * c->hidden_size;
    if (s == 2 * c->num_hidden_layers)  // the first backward call: clear the block-sum gradients
        for (int k = 0; k < s; k++) memset(st->dacc[k], 0, nd * sizeof(float));
    int n = gather(r, st, s);
    route_backward(st->dsrc, r->grads + st->q[s], r->grads + st->g[s], r->scratch, dx, st->w[s], st->src, n,
                   r->params + st->q[s], r->params + st->g[s], r->n_tok, c->hidden_size,
                   c->attnres_num_heads, c->rms_norm_eps);
}

// acc[s] = acc[s-1] + o_s: its gradient is complete here (every reader of
// acc[s] comes later); it flows to o_s and to acc[s-1].
static void block_write_backward(Residual *r, int s) {
    BlockState *st = r->priv;
    size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    vec_acc(r->dsources[s + 1], st->dacc[s], nd);
    if (!first_in_block(st, s)) vec_acc(st->dacc[s - 1], st->dacc[s], nd);
}

static const float *block_route_weights(const Residual *r, int s, int *n_src) {
    BlockState *st = r->priv;
    int L = r->cfg->num_hidden_layers;
    *n_src = 1 + (s == 2 * L ? st->n_blocks : block_of(st, s) + !first_in_block(st, s));
    return st->w[s];
}

const ResidualScheme residual_block = {
    .name = "block",
    .summary = "block routing: H heads over N block summaries",
    .heads = HEADS_ANY,
    .default_heads = 8,
    .needs_blocks = 1,
    .from_scratch = 1,
    .add_params = block_add_params,
    .act_floats = block_act_floats,
    .bind = block_bind,
    .read = block_read,
    .write = block_write,
    .read_backward = block_read_backward,
    .write_backward = block_write_backward,
    .release = residual_free_priv,
    .route_weights = block_route_weights,
};
