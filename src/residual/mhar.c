// SPEC §2.3: full depth routing. attnres (H = 1) and mhar (H heads). The
// sources are the model's own buffer [emb, o_0, o_1, ...], each written once
// by its producer (SPEC §5); a read at sublayer s routes over rows 0..s with
// the fused kernel, which saves only the softmax weights w [s+1, n, H].
#include "residual.h"

#include "../kernels/ops.h"

typedef struct {
    size_t *q, *g;   // [2L+1] offsets of each site's query and key-norm weight
    float **w;       // [2L+1] views into the arena: site s's weights [s+1, n, H]
} RouteState;

static int heads(const Config *c) { return c->attnres_num_heads; }

static int mhar_add_params(ParamTable *t, const Config *c) { return residual_add_route_sites(t, c, 1); }

static size_t mhar_act_floats(const Config *c, int n_tok) {
    size_t sites = 2 * (size_t)c->num_hidden_layers + 1;
    return sites * (sites + 1) / 2 * n_tok * heads(c);  // Σ_s (s+1)·n·H
}

static int mhar_bind(Residual *r) {
    int sites = 2 * r->cfg->num_hidden_layers + 1;
    RouteState *st = r->priv;
    if (!st) {
        st = r->priv = mhar_alloc(sizeof(RouteState) + sites * (2 * sizeof(size_t) + sizeof(float *)));
        if (!st) return MHAR_ERR;
        st->q = (size_t *)(st + 1);
        st->g = st->q + sites;
        st->w = (float **)(st->g + sites);
    }
    float *w = r->acts;
    for (int s = 0; s < sites; s++) {
        if (residual_route_site(r, s, &st->q[s], &st->g[s])) return MHAR_ERR;
        st->w[s] = w;
        w += (size_t)(s + 1) * r->n_tok * heads(r->cfg);
    }
    return MHAR_OK;
}

static void mhar_read(Residual *r, int s) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    const RouteSources S = {r->sources, r->row_floats, s + 1, NULL};
    route_forward(r->ctx, residual_input(r, s), st->w[s], r->scratch, S, r->params + st->q[s],
                  r->params + st->g[s], r->n_tok, c->hidden_size, heads(c), c->rms_norm_eps);
}

// The final read (s = 2L) routes over every source and its backward runs
// first: it sets each dsources row, the later sites add to them.
static void mhar_read_backward(Residual *r, int s, const float *dx) {
    RouteState *st = r->priv;
    const Config *c = r->cfg;
    const RouteSources S = {r->sources, r->row_floats, s + 1, NULL};
    const RouteGrads dS = {r->dsources, r->row_floats, NULL};
    (s == 2 * c->num_hidden_layers ? route_backward_set : route_backward)(
        r->ctx, dS, r->grads + st->q[s], r->grads + st->g[s], r->scratch, dx, st->w[s], S,
        r->params + st->q[s], r->params + st->g[s], r->n_tok, c->hidden_size, heads(c), c->rms_norm_eps);
}

static void no_write(Residual *r, int s) { (void)r; (void)s; }

// Traffic per step: P = 2L+1 sites, site s over s+1 sources, so with rows
// of n·d floats and Σ_s (s+1) = P(P+1)/2 = Σ (each site: route_bytes_site):
//   read  = 4·(2·Σ·n·d + P·n·d + Σ·n·H)   sources twice, dx, w in the backward
//   write = 8·(P·n·d + Σ·n·H + Σ·n·d)     x and w forward, dS backward
// (the final site's backward writes its dS rows, the others update them).
static RouteBytes mhar_route_bytes(const Config *c, int n_tok) {
    RouteBytes b = {0, 0};
    for (int s = 0; s <= 2 * c->num_hidden_layers; s++)
        route_bytes_site(&b, s + 1, n_tok, c->hidden_size, heads(c));
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
        .write = no_write,                       \
        .read_backward = mhar_read_backward,     \
        .write_backward = no_write,              \
        .sets_source_grads = 1,                  \
        .route_weights = mhar_route_weights,     \
        .release = residual_free_priv,           \
        .route_bytes = mhar_route_bytes,         \
    }

const ResidualScheme residual_attnres = ROUTE_SCHEME("attnres", "full depth routing, one head (AttnRes)", HEADS_ONE, 1);
const ResidualScheme residual_mhar = ROUTE_SCHEME("mhar", "full depth routing with H heads (MHAR)", HEADS_ANY, 8);
