// The registry of residual schemes: attnres_mode -> implementation.
#include "residual.h"

#include <stdio.h>
#include <string.h>

static const ResidualScheme *const schemes[] = {
    &residual_baseline,
    &residual_hc,
    &residual_denseformer,
    &residual_attnres,
    &residual_mhar,
    &residual_block,
    &residual_delta_mh,
};

int residual_count(void) { return (int)(sizeof schemes / sizeof schemes[0]); }

const ResidualScheme *residual_at(int i) { return i >= 0 && i < residual_count() ? schemes[i] : NULL; }

const ResidualScheme *residual_find(const char *mode) {
    for (int i = 0; i < residual_count(); i++)
        if (strcmp(schemes[i]->name, mode) == 0) return schemes[i];
    return NULL;
}

const char *residual_names(char *buf, size_t cap, const char *sep, int (*keep)(const ResidualScheme *)) {
    size_t used = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < residual_count(); i++) {
        if (keep && !keep(schemes[i])) continue;
        int k = snprintf(buf + used, cap - used, "%s%s", used ? sep : "", schemes[i]->name);
        if (k < 0 || (size_t)k >= cap - used) break;  // truncated: the caller's buffer is too small
        used += (size_t)k;
    }
    return buf;
}

int residual_is_routed(const ResidualScheme *s) { return s->route_weights != NULL || s->heads != HEADS_NONE; }

// Schemes without heads or blocks accept (and ignore) any value in range, as
// configs written before the registry did.
int residual_check_shape(const ResidualScheme *s, int heads, int blocks, int d, int L, const char *origin) {
    if (heads < 1 || heads > d)
        return mhar_fail("%s: attnres_num_heads is %d, outside 1..%d (hidden_size)", origin, heads, d);
    if (d % heads != 0)
        return mhar_fail("%s: hidden_size %d is not divisible by attnres_num_heads %d", origin, d, heads);
    if (s->heads == HEADS_ONE && heads != 1)
        return mhar_fail("%s: attnres_num_heads is %d, but attnres_mode '%s' is single-head "
                         "(use 'mhar' for several heads)", origin, heads, s->name);
    if (blocks < (s->needs_blocks ? 1 : 0) || blocks > L) {
        if (s->needs_blocks)
            return mhar_fail("%s: attnres_num_blocks is %d; attnres_mode '%s' needs 1..%d (at most num_hidden_layers)",
                             origin, blocks, s->name, L);
        return mhar_fail("%s: attnres_num_blocks is %d, outside 0..%d (num_hidden_layers)", origin, blocks, L);
    }
    return MHAR_OK;
}

int residual_route_bytes(const ResidualScheme *s, const Config *c, int n_tok, RouteBytes *out) {
    *out = (RouteBytes){0, 0};
    if (!s->route_bytes) return 0;
    *out = s->route_bytes(c, n_tok);
    if (!s->sets_source_grads && !s->source_grad)  // model_backward zeroes every dsources row first
        route_bytes_add(out, 0, (2.0 * c->num_hidden_layers + 1) * n_tok * c->hidden_size);
    return 1;
}

void route_bytes_add(RouteBytes *b, double read, double write) {
    b->read += 4 * read;
    b->write += 8 * write;
}

// route_forward reads the n_src rows and writes x (one row) and w [n_src,
// n, H]. route_backward's first pass reads the rows, w and dx; its second
// re-reads a token's rows from L1/L2 (n_src·d floats) while it updates, or
// for the first site to touch them writes, the n_src source-gradient rows.
void route_bytes_forward(RouteBytes *b, int n_src, int n_tok, int d, int H) {
    const double row = (double)n_tok * d, w = (double)n_src * n_tok * H;
    route_bytes_add(b, n_src * row, row + w);
}

void route_bytes_backward(RouteBytes *b, int n_src, int n_tok, int d, int H) {
    const double row = (double)n_tok * d, w = (double)n_src * n_tok * H;
    route_bytes_add(b, n_src * row + w + row, n_src * row);
}

void route_bytes_site(RouteBytes *b, int n_src, int n_tok, int d, int H) {
    route_bytes_forward(b, n_src, n_tok, d, H);
    route_bytes_backward(b, n_src, n_tok, d, H);
}

void residual_free_priv(Residual *r) { mhar_free(r->priv); }

void residual_release(Residual *r) {
    if (r->scheme && r->scheme->release) r->scheme->release(r);
    r->priv = NULL;
}

int residual_param(const Residual *r, const char *name, size_t *offset) {
    int i = ptable_find(r->table, name);
    if (i < 0) return mhar_fail("residual scheme %s: parameter '%s' missing", r->scheme->name, name);
    *offset = r->table->p[i].offset;
    return MHAR_OK;
}

static void site_names(int s, int L, char *q, char *g, size_t cap) {
    if (s == 2 * L) {
        snprintf(q, cap, "model.final_res_proj.weight");
        snprintf(g, cap, "model.final_res_norm.weight");
    } else {
        const char *kind = s % 2 ? "mlp" : "attn";
        snprintf(q, cap, "model.layers.%d.%s_res_proj.weight", s / 2, kind);
        snprintf(g, cap, "model.layers.%d.%s_res_norm.weight", s / 2, kind);
    }
}

int residual_route_query_init(const Config *c) {
    return c->route_query_init == ROUTE_QUERY_NORMAL ? INIT_CUSTOM : INIT_ZEROS;
}

// The queries are the only INIT_CUSTOM tensors of a routing scheme. They draw
// from the scheme's stream (model_init_weights), so the base model's initial
// weights are the same under either init: a paired comparison of the two
// differs in the queries alone.
void residual_init_route_queries(const ParamTable *t, const Config *c, float *params, Rng *rng) {
    if (c->route_query_init != ROUTE_QUERY_NORMAL) return;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        if (p->init != INIT_CUSTOM || p->cls != PARAM_ROUTE) continue;
        float *w = params + p->offset;
        for (size_t j = 0; j < p->numel; j++) w[j] = 0.02f * rng_normal(rng);
    }
}

int residual_add_route_sites(ParamTable *t, const Config *c, int with_final) {
    int L = c->num_hidden_layers, d = c->hidden_size;
    int q_shape[2] = {1, d}, g_shape[1] = {d};
    for (int s = 0; s < 2 * L + (with_final ? 1 : 0); s++) {
        char q[96], g[96];
        site_names(s, L, q, g, sizeof q);
        if (ptable_add(t, q, 2, q_shape, residual_route_query_init(c), PARAM_ROUTE) < 0 ||
            ptable_add(t, g, 1, g_shape, INIT_ONES, PARAM_ROUTE) < 0)
            return MHAR_ERR;
    }
    return MHAR_OK;
}

int residual_route_site(const Residual *r, int s, size_t *q_off, size_t *g_off) {
    char q[96], g[96];
    site_names(s, r->cfg->num_hidden_layers, q, g, sizeof q);
    if (residual_param(r, q, q_off) || residual_param(r, g, g_off)) return MHAR_ERR;
    return MHAR_OK;
}

int residual_block_layers(const Config *c) {
    int N = c->attnres_num_blocks, L = c->num_hidden_layers;
    return (L + N - 1) / N;
}

int residual_n_blocks(const Config *c) {
    int bl = residual_block_layers(c);
    return (c->num_hidden_layers + bl - 1) / bl;
}
