// SPEC §2.5: static hyper-connections, n = 4 streams (reading R6 of
// tests/ref/model.py). Sublayer s has α_s [4], A_s [4, 4], β_s [4]:
//   read   x_s  = Σ_r p_r H_r,  p = softmax(α_s)
//   write  H'_j = Σ_i A_s[j, i] H_i + β_s[j] o_s     (from the old H: simultaneous)
//   final  h    = mean_r H_r                         (the read at s = 2L)
// All four streams start as the embedding.
//
// Activation slice, in views of [n_tok, d] (each rounded up to 16 floats):
//   H^(s), s = 1 .. 2L   [2L][4]: the streams before sublayer s, and the final
//                        ones; H^(0) is sources[0] and is not stored
//   G                    [4]: dL/dH at the depth backward has reached. It
//                        reuses the H^(2L) views, which backward never reads.
//
// The scheme costs memory traffic, not FLOPs, so passes are fused:
// - write(s) also forms x_{s+1} from the new streams while they are in
//   registers; read(s+1) then finds it done.
// - read_backward(s), s ≥ 1, also runs the backward of write(s-1), one pass
//   per token; write_backward is empty. With g_j = G_j + p_j dx (G = 0 at
//   s = 2L), and H = H^(s-1), o = o_{s-1}, A, β of sublayer s-1:
//     d o_{s-1} += Σ_j β_j g_j,     G_i ← Σ_j A[j, i] g_j,
//     dA[j, i] += ⟨g_j, H_i⟩,       dβ_j += ⟨g_j, o⟩,
//     dα_s[r] += p_r Σ_q p_q (dp_r − dp_q), where by linearity
//     dp_r = ⟨dx, H^(s)_r⟩ = Σ_i A[r, i] ⟨dx, H_i⟩ + β_r ⟨dx, o⟩ (H^(s) is not read).
//   The interface allows it: read_backward(s) accumulates into dsources[0..s],
//   and it runs before sublayer s-1's backward consumes dsources[s].
// The passes themselves are ops (kernels/cpu/hc.c).
#include "residual.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/ops.h"

enum { NS = 4 };  // streams

typedef struct { size_t alpha, A, beta; } HcSite;  // parameter offsets of one sublayer
typedef struct {
    size_t view;     // floats per [n_tok, d] view (16-float aligned)
    int primed;      // the s whose x_s the last write already formed (-1: none)
    HcSite site[];   // [2L]
} HcPriv;

static size_t view_floats(const Config *c, int n_tok) {
    return ((size_t)n_tok * c->hidden_size + 15) / 16 * 16;
}

// ---- views -------------------------------------------------------------------

// The 4 streams before sublayer s ([n_tok, d] each); H^(0) is the embedding
// four times (stride 0).
static HcStreams streams(const Residual *r, int s) {
    if (s == 0) return (HcStreams){residual_source(r, 0), 0};
    const HcPriv *p = r->priv;
    return (HcStreams){r->acts + (size_t)(s - 1) * NS * p->view, p->view};
}

// dL/dH_i at the depth backward has reached (4 rows of [n_tok, d]), in the
// place of the final streams: only the forward's final read uses those.
static float *grad_streams(const Residual *r) {
    return (float *)streams(r, 2 * r->cfg->num_hidden_layers).base;
}

// p = softmax(α_s) [4]; the final read (s = 2L) is the plain mean.
static void read_weights(const Residual *r, int s, float p[NS]) {
    if (s == 2 * r->cfg->num_hidden_layers) {
        for (int i = 0; i < NS; i++) p[i] = 1.0f / NS;
        return;
    }
    const float *a = r->params + ((const HcPriv *)r->priv)->site[s].alpha;
    double mx = a[0], e[NS], sum = 0;
    for (int i = 1; i < NS; i++) mx = a[i] > mx ? a[i] : mx;
    for (int i = 0; i < NS; i++) sum += e[i] = exp(a[i] - mx);
    for (int i = 0; i < NS; i++) p[i] = (float)(e[i] / sum);
}

// ---- parameters ------------------------------------------------------------------

static const char *const KINDS[2] = {"attn", "mlp"};  // s even: attention, odd: MLP

// model.layers.{i}.hc_{alpha,A,beta}_{attn,mlp}: [4], [4, 4], [4] (SPEC §3).
static int hc_add_params(ParamTable *t, const Config *c) {
    const int vec[1] = {NS}, mat[2] = {NS, NS};
    for (int i = 0; i < c->num_hidden_layers; i++)
        for (int k = 0; k < 2; k++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.hc_alpha_%s", i, KINDS[k]);
            if (ptable_add(t, name, 1, vec, INIT_CUSTOM, PARAM_ROUTE) < 0) return MHAR_ERR;
            snprintf(name, sizeof name, "model.layers.%d.hc_A_%s", i, KINDS[k]);
            if (ptable_add(t, name, 2, mat, INIT_CUSTOM, PARAM_ROUTE) < 0) return MHAR_ERR;
            snprintf(name, sizeof name, "model.layers.%d.hc_beta_%s", i, KINDS[k]);
            if (ptable_add(t, name, 1, vec, INIT_CUSTOM, PARAM_ROUTE) < 0) return MHAR_ERR;
        }
    return MHAR_OK;
}

// SPEC §2.5 init, drawn in table order: α = 0.02·randn, A = I + 0.02·randn,
// β = e_0 + 0.02·randn.
static void hc_init_params(const ParamTable *t, const Config *c, float *params, Rng *rng) {
    (void)c;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        int alpha = strstr(p->name, ".hc_alpha_") != NULL, A = strstr(p->name, ".hc_A_") != NULL;
        int beta = strstr(p->name, ".hc_beta_") != NULL;
        if (!alpha && !A && !beta) continue;
        float *w = params + p->offset;
        for (size_t j = 0; j < p->numel; j++) w[j] = 0.02f * rng_normal(rng);
        if (A)
            for (int j = 0; j < NS; j++) w[j * NS + j] += 1.0f;
        if (beta) w[0] += 1.0f;
    }
}

// 4·2L views: the stored streams of 2L depths (G shares the last four).
static size_t hc_act_floats(const Config *c, int n_tok) {
    return (size_t)NS * 2 * c->num_hidden_layers * view_floats(c, n_tok);
}

static int hc_bind(Residual *r) {
    int sites = 2 * r->cfg->num_hidden_layers;
    mhar_free(r->priv);  // bound again after a new arena: offsets are rebuilt
    HcPriv *p = r->priv = mhar_alloc(sizeof *p + sizeof(HcSite) * sites);
    if (!p) return MHAR_ERR;
    p->view = view_floats(r->cfg, r->n_tok);
    p->primed = -1;
    for (int s = 0; s < sites; s++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.hc_alpha_%s", s / 2, KINDS[s % 2]);
        if (residual_param(r, name, &p->site[s].alpha)) return MHAR_ERR;
        snprintf(name, sizeof name, "model.layers.%d.hc_A_%s", s / 2, KINDS[s % 2]);
        if (residual_param(r, name, &p->site[s].A)) return MHAR_ERR;
        snprintf(name, sizeof name, "model.layers.%d.hc_beta_%s", s / 2, KINDS[s % 2]);
        if (residual_param(r, name, &p->site[s].beta)) return MHAR_ERR;
    }
    return MHAR_OK;
}

// ---- forward -----------------------------------------------------------------------

static void streams_read(Residual *r, int s) {
    HcPriv *pv = r->priv;
    if (pv->primed == s) { pv->primed = -1; return; }  // formed by write(s-1)
    pv->primed = -1;
    float p[NS];
    read_weights(r, s, p);
    hc_read(r->ctx, residual_input(r, s), streams(r, s), p, (size_t)r->n_tok * r->cfg->hidden_size);
}

// H^(s+1)_j = Σ_i A[j, i] H^(s)_i + β_j o, and the next read's
// x_{s+1} = Σ_j p_j H^(s+1)_j in the same pass.
static void streams_write(Residual *r, int s) {
    HcPriv *pv = r->priv;
    float p[NS];
    read_weights(r, s + 1, p);
    HcStreams next = streams(r, s + 1);
    hc_write(r->ctx, (float *)next.base, next.stride, residual_input(r, s + 1), streams(r, s),
             residual_source(r, s + 1), r->params + pv->site[s].A, r->params + pv->site[s].beta, p,
             (size_t)r->n_tok * r->cfg->hidden_size);
    pv->primed = s + 1;
}

// ---- backward ----------------------------------------------------------------------

// The read at s, then the write of sublayer s-1 (see the header). s = 0: the
// streams are all the embedding, so demb += Σ_r (G_r + p_r dx), and dα_0 = 0
// exactly (dp_r is the same for every r), as in the reference.
static void streams_read_backward(Residual *r, int s, const float *dx) {
    const HcPriv *pv = r->priv;
    const size_t view = pv->view;
    float p[NS];
    read_weights(r, s, p);
    if (s == 0) {
        hc_first_read_backward(r->ctx, residual_dsource(r, 0), grad_streams(r), view, dx, p,
                               (size_t)r->n_tok * r->cfg->hidden_size);
        return;
    }
    const HcSite *w = &pv->site[s - 1];
    const int fresh = s == 2 * r->cfg->num_hidden_layers;  // no G yet: h is the first read back
    const float *A = r->params + w->A, *beta = r->params + w->beta;
    double S[25];
    hc_backward(r->ctx, S, grad_streams(r), view, residual_dsource(r, s), dx, streams(r, s - 1),
                residual_source(r, s), A, beta, p, fresh, r->n_tok, r->cfg->hidden_size);
    float *dA = r->grads + w->A, *db = r->grads + w->beta;
    for (int j = 0; j < NS; j++) {  // g_j = G_j + p_j dx
        for (int i = 0; i < NS; i++) dA[j * NS + i] += (float)(S[5 * j + i] + p[j] * S[20 + i]);
        db[j] += (float)(S[5 * j + 4] + p[j] * S[24]);
    }
    if (fresh) return;  // the final mean has no α
    double dp[NS];
    for (int q = 0; q < NS; q++) {
        dp[q] = beta[q] * S[24];
        for (int i = 0; i < NS; i++) dp[q] += A[q * NS + i] * S[20 + i];
    }
    float *da = r->grads + pv->site[s].alpha;
    for (int i = 0; i < NS; i++) {  // softmax backward, p_r Σ_q p_q (dp_r − dp_q)
        double v = 0;
        for (int q = 0; q < NS; q++) v += (double)p[q] * (dp[i] - dp[q]);
        da[i] += (float)(p[i] * v);
    }
}

// Empty: write(s)'s backward ran inside read_backward(s+1), which the model
// calls first, so d o_s in dsources[s+1] is already complete.
static void streams_write_backward(Residual *r, int s) { (void)r; (void)s; }

const ResidualScheme residual_hc = {
    .name = "hc",
    .summary = "static hyper-connections, 4 streams",
    .heads = HEADS_NONE,
    .default_heads = 1,
    .needs_blocks = 0,
    .from_scratch = 1,
    .add_params = hc_add_params,
    .init_params = hc_init_params,
    .act_floats = hc_act_floats,
    .bind = hc_bind,
    .read = streams_read,
    .write = streams_write,
    .read_backward = streams_read_backward,
    .write_backward = streams_write_backward,
    .release = residual_free_priv,
};
