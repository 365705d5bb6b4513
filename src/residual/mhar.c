// SPEC §2.3: full depth routing. attnres (H = 1) and mhar (H heads). The
// sources are the model's own buffer [emb, o_0, o_1, ...], each written once
// by its producer (SPEC §5). Every site's query is a parameter, so when a
// source is written its logits at every site that will read it are computed
// at once (route_keys), and a read at sublayer s is the softmax and weighted
// sum over rows 0..s (route_mix), saving the weights w [s+1, n, H]. In the
// backward a site keeps its dx, and a source's gradient is gathered from
// the kept dx of the sites that read it just before its producer's backward
// consumes it (route_gather), written once instead of updated at every site.
#include "residual.h"

#include "../kernels/ops.h"

typedef struct {
    size_t *q, *g;   // [P] offsets of each site's query and key-norm weight (P = 2L+1 sites)
    float **w;       // [P] views into the arena: site s's weights [s+1, n, H]
    float **lg;      // [P] site s's logits [s+1, n, H]
    float *rho;      // [P, n] each source's key norm ρ (source s: row s)
    float *c;        // [P, n, H] each site's ⟨dx_h, x_h⟩
    float *dx_final; // [n, d] the final read's dx (the other sites keep theirs in dsources, see kept_dx)
    RouteReader *rd; // [P] the readers of one source, filled per call
} RouteState;

static int heads(const Config *c) { return c->attnres_num_heads; }
static int sites(const Config *c) { return 2 * c->num_hidden_layers + 1; }

static int mhar_add_params(ParamTable *t, const Config *c) { return residual_add_route_sites(t, c, 1); }

static size_t weights_floats(const Config *c, int n_tok) {
    const size_t P = sites(c);
    return P * (P + 1) / 2 * n_tok * heads(c);  // Σ_s (s+1)·n·H
}

// w and lg, then rho, c and the final read's dx.
static size_t mhar_act_floats(const Config *c, int n_tok) {
    const size_t P = sites(c), n = n_tok;
    return 2 * weights_floats(c, n_tok) + P * n + P * n * heads(c) + n * c->hidden_size;
}

static int mhar_bind(Residual *r) {
    const int P = sites(r->cfg), H = heads(r->cfg);
    const size_t n = r->n_tok;
    RouteState *st = r->priv;
    if (!st) {
        st = r->priv = mhar_alloc(sizeof(RouteState) + P * (2 * sizeof(size_t) + 2 * sizeof(float *) +
                                                            sizeof(RouteReader)));
        if (!st) return MHAR_ERR;
        st->rd = (RouteReader *)(st + 1);
        st->q = (size_t *)(st->rd + P);
        st->g = st->q + P;
        st->w = (float **)(st->g + P);
        st->lg = st->w + P;
    }
    float *a = r->acts;
    for (int s = 0; s < P; s++) {
        if (residual_route_site(r, s, &st->q[s], &st->g[s])) return MHAR_ERR;
        st->w[s] = a;
        a += (size_t)(s + 1) * n * H;
    }
    for (int s = 0; s < P; s++) {
        st->lg[s] = a;
        a += (size_t)(s + 1) * n * H;
    }
    st->rho = a;
    st->c = st->rho + P * n;
    st->dx_final = st->c + P * n * H;
    return MHAR_OK;
}

// Where site s keeps its dx until the last source it read has gathered:
// dsources row s+1, free once sublayer s's backward has consumed it (the
// gradient of source s+1 is gathered just before, from the dx of sites
// s+1 and later, kept in rows s+2... and dx_final); the final read's in
// dx_final.
static float *kept_dx(const Residual *r, int s) {
    const RouteState *st = r->priv;
    return s + 1 < sites(r->cfg) ? residual_dsource(r, s + 1) : st->dx_final;
}

// The sites that read source src (src..2L) into st->rd; returns their count.
// Without gradients (eval, decoding) the backward's fields stay NULL.
static int readers(Residual *r, int src) {
    RouteState *st = r->priv;
    const int P = sites(r->cfg);
    const size_t slot = (size_t)src * r->n_tok * heads(r->cfg);
    for (int s = src; s < P; s++) {
        RouteReader *rd = &st->rd[s - src];
        *rd = (RouteReader){.q = r->params + st->q[s], .g = r->params + st->g[s],
                            .lg = st->lg[s] + slot, .w = st->w[s] + slot};
        if (r->grads) {
            rd->dx = kept_dx(r, s);
            rd->c = st->c + (size_t)s * r->n_tok * heads(r->cfg);
            rd->dq = r->grads + st->q[s];
            rd->dg = r->grads + st->g[s];
        }
    }
    return P - src;
}

// Source src has been written: its logits at every site that reads it.
static void source_keys(Residual *r, int src) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    const int n_rd = readers(r, src);
    route_keys(r->ctx, st->rho + (size_t)src * r->n_tok, st->rd, n_rd, r->scratch, residual_source(r, src),
               r->n_tok, c->hidden_size, heads(c), c->rms_norm_eps);
}

static void mhar_read(Residual *r, int s) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    if (s == 0) source_keys(r, 0); // the embedding, written by the model
    const RouteSources S = {r->sources, r->row_floats, s + 1, NULL};
    route_mix(r->ctx, residual_input(r, s), st->w[s], st->lg[s], S, r->n_tok, c->hidden_size, heads(c));
}

static void mhar_write(Residual *r, int s) { source_keys(r, s + 1); }

// Source src's gradient into its dsources row, from every site that read it.
// Tried: gathering sources in pairs (an odd source's readers are those of
// the source below it but one, so one pass over their dx gave both, the
// lower one's rest added later): 18% less extra read per micro step (1372
// → 1128 MB) and the same time (mhar +work 49.6 and 50.0 ms against 50.0
// and 51.3, attnres 48.1 and 50.2 against 50.7 and 51.2; two alternated
// rounds each at 33-35 GB/s): a pass's time did not follow its dx reads.
static void source_gather(Residual *r, int src) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    const int n_rd = readers(r, src);
    route_gather(r->ctx, residual_dsource(r, src), st->rd, n_rd, r->scratch, residual_source(r, src),
                 st->rho + (size_t)src * r->n_tok, r->n_tok, c->hidden_size, heads(c));
}

// The model writes site s's dx where the site keeps it.
static float *mhar_read_grad(Residual *r, int s) { return kept_dx(r, s); }

// Site s keeps its dx (already in place: mhar_read_grad); the last site's
// backward (s = 0) also gathers the embedding's gradient, which every site
// read.
static void mhar_read_backward(Residual *r, int s, const float *dx) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    route_dx_keep(r->ctx, kept_dx(r, s), st->c + (size_t)s * r->n_tok * heads(c), dx,
                  residual_input(r, s), r->n_tok, c->hidden_size, heads(c));
    if (s == 0) source_gather(r, 0);
}

// Before sublayer s's backward consumes dsources[s+1].
static void mhar_write_backward(Residual *r, int s) { source_gather(r, s + 1); }

// Traffic per step, with P = 2L+1 sites (site s reads s+1 sources), rows of
// n·d floats, Σ = P(P+1)/2 (source, site) pairs, each with n·H logits and
// n·H weights:
//   keys    each source once, its logits at every reader: read P·n·d, write Σ·n·H + P·n
//   mix     each site its sources and logits: read Σ·(n·d + n·H), write P·n·d + Σ·n·H
//   dx_keep each site dx (where the model wrote it) and x: read 2·P·n·d, write P·n·H
//   gather  each source its row and ρ, each reader's dx, w, ℓ and c:
//           read P·(n·d + n) + Σ·(n·d + 3·n·H), write P·n·d
static RouteBytes mhar_route_bytes(const Config *c, int n_tok) {
    const double P = sites(c), pairs = P * (P + 1) / 2, row = (double)n_tok * c->hidden_size,
                 slot = (double)n_tok * heads(c);
    RouteBytes b = {0, 0};
    route_bytes_add(&b, P * row, pairs * slot + P * n_tok);
    route_bytes_add(&b, pairs * (row + slot), P * row + pairs * slot);
    route_bytes_add(&b, 2 * P * row, P * slot);
    route_bytes_add(&b, P * (row + n_tok) + pairs * (row + 3 * slot), P * row);
    return b;
}

static const float *mhar_route_weights(const Residual *r, int s, int *n_src) {
    *n_src = s + 1;
    return ((const RouteState *)r->priv)->w[s];
}

// attnres is mhar with H = 1 (config validation enforces the head count).
#define ROUTE_SCHEME(mode, summary_, heads_, default_heads_) \
    {                                            \
        .name = mode,                            \
        .summary = summary_,                     \
        .heads = heads_,                         \
        .default_heads = default_heads_,         \
        .from_scratch = 1,                       \
        .add_params = mhar_add_params,           \
        .init_params = residual_init_route_queries, \
        .act_floats = mhar_act_floats,           \
        .bind = mhar_bind,                       \
        .read = mhar_read,                       \
        .write = mhar_write,                     \
        .read_backward = mhar_read_backward,     \
        .read_grad = mhar_read_grad,             \
        .write_backward = mhar_write_backward,   \
        .sets_source_grads = 1,                  \
        .route_weights = mhar_route_weights,     \
        .release = residual_free_priv,           \
        .route_bytes = mhar_route_bytes,         \
    }

const ResidualScheme residual_attnres = ROUTE_SCHEME("attnres", "full depth routing, one head (AttnRes)", HEADS_ONE, 1);
const ResidualScheme residual_mhar = ROUTE_SCHEME("mhar", "full depth routing with H heads (MHAR)", HEADS_ANY, 8);
