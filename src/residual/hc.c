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
// Parameter dots are summed per token in float (fixed-lane vectors), per
// fixed token chunk in double, then over chunks in order: deterministic for
// any thread count, no atomics.
#include "residual.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
    NS = 4,          // streams
    NCHUNK = 64,     // fixed token chunks of the parameter-gradient reductions
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

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

// Stream i before sublayer s ([n_tok, d]); H^(0) is the embedding.
static float *stream(const Residual *r, int s, int i) {
    if (s == 0) return r->sources[0];
    const HcPriv *p = r->priv;
    return r->acts + ((size_t)(s - 1) * NS + i) * p->view;
}

// dL/dH_i at the depth backward has reached ([n_tok, d]), in the place of
// the final streams: only the forward's final read uses those.
static float *grad_stream(const Residual *r, int i) {
    return stream(r, 2 * r->cfg->num_hidden_layers, i);
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

// ---- fixed-order dot products -------------------------------------------------

// Explicit 8-lane vectors with a fixed final tree (as in kernels/cpu/route_impl.h):
// plain float sums do not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));

// Unaligned loads through a macro: a function returning v8 by value trips
// clang's -Wpsabi without -mavx.
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static inline float hsum8(const v8 *v) {
    return (((*v)[0] + (*v)[4]) + ((*v)[2] + (*v)[6])) + (((*v)[1] + (*v)[5]) + ((*v)[3] + (*v)[7]));
}

// out[i] = ⟨a, b[i]⟩ over d floats, for the five rows b = H_0..H_3, o.
static void dot5(const float *a, const float *const b[5], int d, float out[5]) {
    v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) {
        const v8 x = load8(a + k);
        s0 += x * load8(b[0] + k); s1 += x * load8(b[1] + k); s2 += x * load8(b[2] + k);
        s3 += x * load8(b[3] + k); s4 += x * load8(b[4] + k);
    }
    float t[5] = {0};  // tail, d % 8 values
    for (; k < d; k++)
        for (int i = 0; i < 5; i++) t[i] += a[k] * b[i][k];
    out[0] = hsum8(&s0) + t[0]; out[1] = hsum8(&s1) + t[1]; out[2] = hsum8(&s2) + t[2];
    out[3] = hsum8(&s3) + t[3]; out[4] = hsum8(&s4) + t[4];
}

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// out[q] = Σ_c part[c][q]: chunks in order, in double.
static void sum_chunks(double *out, const double (*part)[25], int nq) {
    for (int q = 0; q < nq; q++) {
        double s = 0;
        for (int c = 0; c < NCHUNK; c++) s += part[c][q];
        out[q] = s;
    }
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
            if (ptable_add(t, name, 1, vec, INIT_CUSTOM) < 0) return MHAR_ERR;
            snprintf(name, sizeof name, "model.layers.%d.hc_A_%s", i, KINDS[k]);
            if (ptable_add(t, name, 2, mat, INIT_CUSTOM) < 0) return MHAR_ERR;
            snprintf(name, sizeof name, "model.layers.%d.hc_beta_%s", i, KINDS[k]);
            if (ptable_add(t, name, 1, vec, INIT_CUSTOM) < 0) return MHAR_ERR;
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

static void hc_read(Residual *r, int s) {
    HcPriv *pv = r->priv;
    if (pv->primed == s) { pv->primed = -1; return; }  // formed by write(s-1)
    pv->primed = -1;
    float p[NS];
    read_weights(r, s, p);
    const float *restrict h0 = stream(r, s, 0), *restrict h1 = stream(r, s, 1);
    const float *restrict h2 = stream(r, s, 2), *restrict h3 = stream(r, s, 3);
    float *restrict x = r->inputs[s];
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) x[k] = p[0] * h0[k] + p[1] * h1[k] + p[2] * h2[k] + p[3] * h3[k];
}

// H^(s+1)_j = Σ_i A[j, i] H^(s)_i + β_j o, and the next read's
// x_{s+1} = Σ_j p_j H^(s+1)_j from the same registers; all [n].
static void hc_write(Residual *r, int s) {
    HcPriv *pv = r->priv;
    float A[NS * NS], b[NS], p[NS];
    memcpy(A, r->params + pv->site[s].A, sizeof A);
    memcpy(b, r->params + pv->site[s].beta, sizeof b);
    read_weights(r, s + 1, p);
    const float *restrict h0 = stream(r, s, 0), *restrict h1 = stream(r, s, 1);
    const float *restrict h2 = stream(r, s, 2), *restrict h3 = stream(r, s, 3);
    const float *restrict o = r->sources[s + 1];
    float *restrict n0 = stream(r, s + 1, 0), *restrict n1 = stream(r, s + 1, 1);
    float *restrict n2 = stream(r, s + 1, 2), *restrict n3 = stream(r, s + 1, 3);
    float *restrict x = r->inputs[s + 1];
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) {
        const float a0 = h0[k], a1 = h1[k], a2 = h2[k], a3 = h3[k], ok = o[k];
        const float y0 = A[0] * a0 + A[1] * a1 + A[2] * a2 + A[3] * a3 + b[0] * ok;
        const float y1 = A[4] * a0 + A[5] * a1 + A[6] * a2 + A[7] * a3 + b[1] * ok;
        const float y2 = A[8] * a0 + A[9] * a1 + A[10] * a2 + A[11] * a3 + b[2] * ok;
        const float y3 = A[12] * a0 + A[13] * a1 + A[14] * a2 + A[15] * a3 + b[3] * ok;
        n0[k] = y0; n1[k] = y1; n2[k] = y2; n3[k] = y3;
        x[k] = p[0] * y0 + p[1] * y1 + p[2] * y2 + p[3] * y3;
    }
    pv->primed = s + 1;
}

// ---- backward ----------------------------------------------------------------------

// Coefficients by value, so the row loops provably do not alias them.
typedef struct { float A[NS * NS], b[NS], p[NS]; } HcCoef;

// One token, d floats: g_j = G_j + p_j dx (G absent if fresh), then
// d o += Σ_j β_j g_j and G_i = Σ_j A[j, i] g_j.
static void back_row(float *restrict dout, float *restrict g0, float *restrict g1,
                     float *restrict g2, float *restrict g3, const float *restrict dx,
                     HcCoef c, int fresh, int d) {
    const float *A = c.A, *b = c.b, *p = c.p;
    for (int k = 0; k < d; k++) {
        const float x = dx[k];
        float x0 = p[0] * x, x1 = p[1] * x, x2 = p[2] * x, x3 = p[3] * x;
        if (!fresh) x0 += g0[k], x1 += g1[k], x2 += g2[k], x3 += g3[k];
        dout[k] += b[0] * x0 + b[1] * x1 + b[2] * x2 + b[3] * x3;
        g0[k] = A[0] * x0 + A[4] * x1 + A[8] * x2 + A[12] * x3;
        g1[k] = A[1] * x0 + A[5] * x1 + A[9] * x2 + A[13] * x3;
        g2[k] = A[2] * x0 + A[6] * x1 + A[10] * x2 + A[14] * x3;
        g3[k] = A[3] * x0 + A[7] * x1 + A[11] * x2 + A[15] * x3;
    }
}

// Per chunk, 25 sums: S[l][i] = ⟨a_l, b_i⟩ for a = G_0..G_3, dx and
// b = H_0..H_3, o (rows 0..3 stay 0 when fresh); then the row update.
static void back_pass(Residual *r, const float *dx, const float *const b[5], float *dout,
                      HcCoef cf, int fresh, double (*part)[25]) {
    const int d = r->cfg->hidden_size, n = r->n_tok;
    float *g[NS];
    for (int i = 0; i < NS; i++) g[i] = grad_stream(r, i);
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double acc[25] = {0};
        for (size_t t = chunk_start(c, n); t < chunk_start(c + 1, n); t++) {
            const size_t off = t * d;
            const float *bt[5] = {b[0] + off, b[1] + off, b[2] + off, b[3] + off, b[4] + off};
            float dots[25] = {0};
            for (int l = 0; l < NS && !fresh; l++) dot5(g[l] + off, bt, d, dots + 5 * l);
            dot5(dx + off, bt, d, dots + 20);
            for (int q = 0; q < 25; q++) acc[q] += dots[q];
            back_row(dout + off, g[0] + off, g[1] + off, g[2] + off, g[3] + off, dx + off, cf, fresh, d);
        }
        memcpy(part[c], acc, sizeof acc);
    }
}

// s = 0: the streams are all the embedding, so demb += Σ_r (G_r + p_r dx),
// and dα_0 = 0 exactly (dp_r is the same for every r), as in the reference.
static void first_read_backward(Residual *r, const float *restrict dx) {
    float p[NS];
    read_weights(r, 0, p);
    const float *restrict g0 = grad_stream(r, 0), *restrict g1 = grad_stream(r, 1);
    const float *restrict g2 = grad_stream(r, 2), *restrict g3 = grad_stream(r, 3);
    float *restrict demb = r->dsources[0];
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) {
        const float x = dx[k];
        demb[k] += (g0[k] + p[0] * x) + (g1[k] + p[1] * x) + (g2[k] + p[2] * x) + (g3[k] + p[3] * x);
    }
}

// The read at s, then the write of sublayer s-1 (see the header).
static void hc_read_backward(Residual *r, int s, const float *dx) {
    if (s == 0) { first_read_backward(r, dx); return; }
    const HcPriv *pv = r->priv;
    const HcSite *w = &pv->site[s - 1];
    const int fresh = s == 2 * r->cfg->num_hidden_layers;  // no G yet: h is the first read back
    HcCoef cf;
    memcpy(cf.A, r->params + w->A, sizeof cf.A);
    memcpy(cf.b, r->params + w->beta, sizeof cf.b);
    read_weights(r, s, cf.p);
    const float *b[5] = {stream(r, s - 1, 0), stream(r, s - 1, 1), stream(r, s - 1, 2),
                         stream(r, s - 1, 3), r->sources[s]};
    double part[NCHUNK][25], S[25];
    back_pass(r, dx, b, r->dsources[s], cf, fresh, part);
    sum_chunks(S, (const double (*)[25])part, 25);
    float *dA = r->grads + w->A, *db = r->grads + w->beta;
    for (int j = 0; j < NS; j++) {  // g_j = G_j + p_j dx
        for (int i = 0; i < NS; i++) dA[j * NS + i] += (float)(S[5 * j + i] + cf.p[j] * S[20 + i]);
        db[j] += (float)(S[5 * j + 4] + cf.p[j] * S[24]);
    }
    if (fresh) return;  // the final mean has no α
    double dp[NS];
    for (int q = 0; q < NS; q++) {
        dp[q] = cf.b[q] * S[24];
        for (int i = 0; i < NS; i++) dp[q] += cf.A[q * NS + i] * S[20 + i];
    }
    float *da = r->grads + pv->site[s].alpha;
    for (int i = 0; i < NS; i++) {  // softmax backward, p_r Σ_q p_q (dp_r − dp_q)
        double v = 0;
        for (int q = 0; q < NS; q++) v += (double)cf.p[q] * (dp[i] - dp[q]);
        da[i] += (float)(cf.p[i] * v);
    }
}

// Empty: write(s)'s backward ran inside read_backward(s+1), which the model
// calls first, so d o_s in dsources[s+1] is already complete.
static void hc_write_backward(Residual *r, int s) { (void)r; (void)s; }

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
    .read = hc_read,
    .write = hc_write,
    .read_backward = hc_read_backward,
    .write_backward = hc_write_backward,
    .release = residual_free_priv,
};
