// SPEC §2.4: block routing. Layers form blocks of ceil(L/N); the sources are
// b_0 = emb and the block sums b_1..b_m of completed blocks, plus p, the
// partial sum of the current block (absent at a block's first sublayer).
// acc[s] is the running sum of the current block up to and including o_s, so
// p at sublayer s is acc[s-1] and b_j is acc at block j-1's last sublayer.
// In the backward every acc of block j shares one gradient row, db_{j+1}:
// dacc[s-1] = dacc[s] + (the route gradient of p at site s), and dacc[s] is
// not needed once o_s's backward has read it, so the row is updated in
// place and is also o_s's gradient (source_grad: nothing copied); the final
// read writes the db rows first (route_backward_set), so nothing is zeroed.
#include "residual.h"

#include "../kernels/ops.h"

typedef struct {
    int block_layers, n_blocks;
    size_t *q, *g;        // [2L+1] site parameter offsets
    float **w;            // [2L+1] saved weights, each [n_src(s), n, H]
    // Summaries [n_blocks + 1] rows of [n, d] at stride `view`: b_0 = a copy
    // of emb (so every completed source is one strided buffer), b_j = the sum
    // of block j-1. db: their gradients, alike.
    float *b, *db;
    size_t view;
    float **acc, **dacc;  // [2L] running block sums (rows of b at a block's end); their gradients (db rows)
} BlockState;

static int block_of(const BlockState *st, int s) { return (s / 2) / st->block_layers; }
static int first_in_block(const BlockState *st, int s) { return s == 2 * block_of(st, s) * st->block_layers; }
// Last sublayer of block j (0-based).
static int block_end(const BlockState *st, int j, int L) {
    int end_layer = (j + 1) * st->block_layers < L ? (j + 1) * st->block_layers : L;
    return 2 * end_layer - 1;
}

static int block_add_params(ParamTable *t, const Config *c) { return residual_add_route_sites(t, c, 1); }

static size_t view_floats(const Config *c, int n_tok) { return ((size_t)n_tok * c->hidden_size + 15) / 16 * 16; }

// Weights, the summaries and their gradients, and a partial sum for every
// sublayer that does not end a block.
static size_t block_act_floats(const Config *c, int n_tok) {
    size_t L = c->num_hidden_layers, sites = 2 * L + 1, nb = residual_n_blocks(c);
    return sites * (nb + 2) * n_tok * c->attnres_num_heads + (2 * (nb + 1) + 2 * L - nb) * view_floats(c, n_tok);
}

static int block_bind(Residual *r) {
    const Config *c = r->cfg;
    int L = c->num_hidden_layers, sites = 2 * L + 1, nb = residual_n_blocks(c);
    BlockState *st = r->priv;
    if (!st) {
        size_t bytes = sizeof(BlockState) + sites * (2 * sizeof(size_t) + sizeof(float *)) +
                       2 * (2 * L) * sizeof(float *);
        st = r->priv = mhar_alloc(bytes);
        if (!st) return MHAR_ERR;
        st->q = (size_t *)(st + 1);
        st->g = st->q + sites;
        st->w = (float **)(st->g + sites);
        st->acc = st->w + sites;
        st->dacc = st->acc + 2 * L;
    }
    st->block_layers = residual_block_layers(c);
    st->n_blocks = nb;
    st->view = view_floats(c, r->n_tok);
    float *p = r->acts;
    for (int s = 0; s < sites; s++) {
        if (residual_route_site(r, s, &st->q[s], &st->g[s])) return MHAR_ERR;
        st->w[s] = p;
        p += (size_t)(nb + 2) * r->n_tok * c->attnres_num_heads;
    }
    st->b = p; p += (size_t)(nb + 1) * st->view;
    st->db = p; p += (size_t)(nb + 1) * st->view;
    for (int s = 0; s < 2 * L; s++) {
        int j = block_of(st, s);
        st->dacc[s] = st->db + (size_t)(j + 1) * st->view;
        if (s == block_end(st, j, L)) st->acc[s] = st->b + (size_t)(j + 1) * st->view;
        else {
            st->acc[s] = p;
            p += st->view;
        }
    }
    return MHAR_OK;
}

// The sources of site s: b_0 .. b_m of the completed blocks, then p (the
// tail) inside a block.
static RouteSources sources_of(const BlockState *st, int s, int L) {
    int final = s == 2 * L, completed = final ? st->n_blocks : block_of(st, s);
    int partial = !final && !first_in_block(st, s);
    return (RouteSources){st->b, st->view, completed + 1 + partial, partial ? st->acc[s - 1] : NULL};
}

static RouteGrads grads_of(const BlockState *st, int s, int L) {
    int partial = s != 2 * L && !first_in_block(st, s);
    return (RouteGrads){st->db, st->view, partial ? st->dacc[s - 1] : NULL};
}

static void block_read(Residual *r, int s) {
    BlockState *st = r->priv;
    const Config *c = r->cfg;
    if (s == 0) vec_copy(r->ctx, st->b, residual_source(r, 0), (size_t)r->n_tok * c->hidden_size);  // b_0 = emb
    route_forward(r->ctx, residual_input(r, s), st->w[s], r->scratch, sources_of(st, s, c->num_hidden_layers),
                  r->params + st->q[s], r->params + st->g[s], r->n_tok, c->hidden_size, c->attnres_num_heads,
                  c->rms_norm_eps);
}

static void block_write(Residual *r, int s) {
    BlockState *st = r->priv;
    size_t nd = (size_t)r->n_tok * r->cfg->hidden_size;
    if (first_in_block(st, s)) vec_copy(r->ctx, st->acc[s], residual_source(r, s + 1), nd);
    else vec_add(r->ctx, st->acc[s], st->acc[s - 1], residual_source(r, s + 1), nd);
}

static void block_read_backward(Residual *r, int s, const float *dx) {
    BlockState *st = r->priv;
    const Config *c = r->cfg;
    int L = c->num_hidden_layers;
    // The final read, the first backward call, reads every summary: it writes their gradients.
    (s == 2 * L ? route_backward_set : route_backward)(
        r->ctx, grads_of(st, s, L), r->grads + st->q[s], r->grads + st->g[s], r->scratch, dx, st->w[s],
        sources_of(st, s, L), r->params + st->q[s], r->params + st->g[s], r->n_tok, c->hidden_size,
        c->attnres_num_heads, c->rms_norm_eps);
}

// acc[s] = acc[s-1] + o_s: when o_s's backward reads its gradient (every
// reader of acc[s] comes later), that is acc[s]'s, and acc[s-1]'s so far,
// in the same row; source 0 (emb) has b_0's.
static float *block_source_grad(Residual *r, int s) {
    BlockState *st = r->priv;
    return s == 0 ? st->db : st->dacc[s - 1];
}

static void block_write_backward(Residual *r, int s) { (void)r; (void)s; }

static const float *block_route_weights(const Residual *r, int s, int *n_src) {
    BlockState *st = r->priv;
    *n_src = sources_of(st, s, r->cfg->num_hidden_layers).n;
    return st->w[s];
}

// Traffic per step, in rows of n·d floats, nb blocks, N_s sources at site s
// (the completed summaries, b_0, and p inside a block):
//   forward   b_0 = emb (copy: 1 in, 1 out); each site routes (route_bytes_site);
//             each write copies o_s (1 in, 1 out) or adds p + o_s (2 in, 1 out)
//   backward  each site routes back (the sources' gradients are its rows)
static RouteBytes block_route_bytes(const Config *c, int n_tok) {
    const int L = c->num_hidden_layers, bl = residual_block_layers(c), nb = residual_n_blocks(c);
    const double row = (double)n_tok * c->hidden_size;
    RouteBytes b = {0, 0};
    route_bytes_add(&b, row, row);                            // b_0 = emb
    for (int s = 0; s <= 2 * L; s++) {
        const int first = s == 2 * ((s / 2) / bl) * bl;      // first_in_block, from the config
        const int n_src = s == 2 * L ? nb + 1 : (s / 2) / bl + 1 + !first;
        route_bytes_site(&b, n_src, n_tok, c->hidden_size, c->attnres_num_heads);
        if (s == 2 * L) break;
        route_bytes_add(&b, (first ? 1 : 2) * row, row);      // write
    }
    return b;
}

const ResidualScheme residual_block = {
    .name = "block",
    .summary = "block routing: H heads over N block summaries",
    .heads = HEADS_ANY,
    .default_heads = 8,
    .needs_blocks = 1,
    .from_scratch = 1,
    .add_params = block_add_params,
    .init_params = residual_init_route_queries,
    .act_floats = block_act_floats,
    .bind = block_bind,
    .read = block_read,
    .write = block_write,
    .read_backward = block_read_backward,
    .write_backward = block_write_backward,
    .source_grad = block_source_grad,
    .release = residual_free_priv,
    .route_weights = block_route_weights,
    .route_bytes = block_route_bytes,
};
