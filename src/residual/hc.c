// SPEC §2.5: static hyper-connections, n = 4 streams (reading R6 of
// tests/ref/model.py). Sublayer s has α_s [4], A_s [4, 4], β_s [4]:
//   read   x_s  = Σ_r p_r H_r,  p = softmax(α_s)
//   write  H'_j = Σ_i A_s[j, i] H_i + β_s[j] o_s     (from the old H: simultaneous)
//   final  h    = mean_r H_r                         (the read at s = 2L)
// All four streams start as the embedding. Activation slice, F = one
// [n_tok, d] view rounded up to 16 floats:
//   H^(s), s = 1 .. 2L   [2L][4] views: the streams before sublayer s (and
//                        the final ones); H^(0) is sources[0], not stored
//   G                    [4] views: dL/dH at the current depth in backward
// Backward, G = dL/dH^(s+1) on entry to write_backward(s):
//   d o_s += Σ_j β_j G_j,  dβ_j += ⟨G_j, o_s⟩,  dA[j, i] += ⟨G_j, H_i⟩,
//   G_i ← Σ_j A[j, i] G_j                          (in place, per element)
// and read_backward(s, dx): G_r += p_r dx, dα_r += p_r (dp_r − Σ_q p_q dp_q)
// with dp_r = ⟨dx, H_r⟩. Parameter dots are summed per token in float, per
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

// dL/dH_i at the depth backward has reached ([n_tok, d]).
static float *grad_stream(const Residual *r, int i) {
    const HcPriv *p = r->priv;
    return r->acts + ((size_t)2 * r->cfg->num_hidden_layers * NS + i) * p->view;
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

// Explicit 8-lane vectors with a fixed final tree (as in kernels/cpu/route.c):
// plain float sums do not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));

// Unaligned loads through a macro: a function returning v8 by value trips
// clang's -Wpsabi without -mavx.
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static inline float hsum8(const v8 *v) {
    return (((*v)[0] + (*v)[4]) + ((*v)[2] + (*v)[6])) + (((*v)[1] + (*v)[5]) + ((*v)[3] + (*v)[7]));
}

// out[i] = ⟨a, b_i⟩ over d floats, for four rows b_0..b_3.
static void dot4(const float *a, const float *b0, const float *b1, const float *b2,
                 const float *b3, int d, float out[NS]) {
    v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) {
        const v8 x = load8(a + k);
        s0 += x * load8(b0 + k); s1 += x * load8(b1 + k);
        s2 += x * load8(b2 + k); s3 += x * load8(b3 + k);
    }
    float t0 = 0, t1 = 0, t2 = 0, t3 = 0;  // tail, d % 8 values
    for (; k < d; k++) t0 += a[k] * b0[k], t1 += a[k] * b1[k], t2 += a[k] * b2[k], t3 += a[k] * b3[k];
    out[0] = hsum8(&s0) + t0; out[1] = hsum8(&s1) + t1;
    out[2] = hsum8(&s2) + t2; out[3] = hsum8(&s3) + t3;
}

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// out[q] = Σ_c part[c][q]: chunks in order, in double.
static void sum_chunks(double *out, const double (*part)[20], int nq) {
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

// 4·4·(2L + 1) views: the stored streams of 2L depths plus G.
static size_t hc_act_floats(const Config *c, int n_tok) {
    return (size_t)NS * (2 * c->num_hidden_layers + 1) * view_floats(c, n_tok);
}

static int hc_bind(Residual *r) {
    int sites = 2 * r->cfg->num_hidden_layers;
    mhar_free(r->priv);  // bound again after a new arena: offsets are rebuilt
    HcPriv *p = r->priv = mhar_alloc(sizeof *p + sizeof(HcSite) * sites);
    if (!p) return MHAR_ERR;
    p->view = view_floats(r->cfg, r->n_tok);
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

// x [n] = Σ_r p_r h_r
static void mix(float *restrict x, const float *restrict h0, const float *restrict h1,
                const float *restrict h2, const float *restrict h3, const float p[NS], size_t n) {
    const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) x[k] = p0 * h0[k] + p1 * h1[k] + p2 * h2[k] + p3 * h3[k];
}

static void hc_read(Residual *r, int s) {
    float p[NS];
    read_weights(r, s, p);
    mix(r->inputs[s], stream(r, s, 0), stream(r, s, 1), stream(r, s, 2), stream(r, s, 3), p,
        (size_t)r->n_tok * r->cfg->hidden_size);
}

// H^(s+1)_j = Σ_i A[j, i] H^(s)_i + β_j o, all [n].
static void hc_write(Residual *r, int s) {
    const HcSite *site = &((const HcPriv *)r->priv)->site[s];
    float A[NS * NS], b[NS];
    memcpy(A, r->params + site->A, sizeof A);
    memcpy(b, r->params + site->beta, sizeof b);
    const float *restrict h0 = stream(r, s, 0), *restrict h1 = stream(r, s, 1);
    const float *restrict h2 = stream(r, s, 2), *restrict h3 = stream(r, s, 3);
    const float *restrict o = r->sources[s + 1];
    float *restrict n0 = stream(r, s + 1, 0), *restrict n1 = stream(r, s + 1, 1);
    float *restrict n2 = stream(r, s + 1, 2), *restrict n3 = stream(r, s + 1, 3);
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) {
        const float a0 = h0[k], a1 = h1[k], a2 = h2[k], a3 = h3[k], ok = o[k];
        n0[k] = A[0] * a0 + A[1] * a1 + A[2] * a2 + A[3] * a3 + b[0] * ok;
        n1[k] = A[4] * a0 + A[5] * a1 + A[6] * a2 + A[7] * a3 + b[1] * ok;
        n2[k] = A[8] * a0 + A[9] * a1 + A[10] * a2 + A[11] * a3 + b[2] * ok;
        n3[k] = A[12] * a0 + A[13] * a1 + A[14] * a2 + A[15] * a3 + b[3] * ok;
    }
}

// ---- backward ----------------------------------------------------------------------

typedef struct { float A[NS * NS], b[NS]; } HcCoef;  // by value: provably no alias

// One token, d floats: d o += Σ_j β_j g_j, then g_i ← Σ_j A[j, i] g_j in place.
static void write_back_row(float *restrict dout, float *restrict g0, float *restrict g1,
                           float *restrict g2, float *restrict g3, HcCoef c, int d) {
    const float *A = c.A, *b = c.b;
    for (int k = 0; k < d; k++) {
        const float x0 = g0[k], x1 = g1[k], x2 = g2[k], x3 = g3[k];
        dout[k] += b[0] * x0 + b[1] * x1 + b[2] * x2 + b[3] * x3;
        g0[k] = A[0] * x0 + A[4] * x1 + A[8] * x2 + A[12] * x3;
        g1[k] = A[1] * x0 + A[5] * x1 + A[9] * x2 + A[13] * x3;
        g2[k] = A[2] * x0 + A[6] * x1 + A[10] * x2 + A[14] * x3;
        g3[k] = A[3] * x0 + A[7] * x1 + A[11] * x2 + A[15] * x3;
    }
}

// Entry: G = dL/dH^(s+1). Exit: G = dL/dH^(s) through the write (the read's
// share is added by read_backward), d o_s final in dsources[s+1], dA, dβ.
static void hc_write_backward(Residual *r, int s) {
    const HcSite *site = &((const HcPriv *)r->priv)->site[s];
    HcCoef cf;
    memcpy(cf.A, r->params + site->A, sizeof cf.A);
    memcpy(cf.b, r->params + site->beta, sizeof cf.b);
    const int d = r->cfg->hidden_size, n = r->n_tok;
    const float *h[NS], *o = r->sources[s + 1];
    float *g[NS], *dout = r->dsources[s + 1];
    for (int i = 0; i < NS; i++) h[i] = stream(r, s, i), g[i] = grad_stream(r, i);
    double part[NCHUNK][20];  // per chunk: dA [4·4] row-major, then dβ [4]
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double acc[20] = {0};
        for (size_t t = chunk_start(c, n); t < chunk_start(c + 1, n); t++) {
            const size_t off = t * d;
            float dots[20];
            for (int j = 0; j < NS; j++)  // dA[j, i] = ⟨G_j, H_i⟩
                dot4(g[j] + off, h[0] + off, h[1] + off, h[2] + off, h[3] + off, d, dots + NS * j);
            dot4(o + off, g[0] + off, g[1] + off, g[2] + off, g[3] + off, d, dots + 16);  // dβ_j
            for (int q = 0; q < 20; q++) acc[q] += dots[q];
            write_back_row(dout + off, g[0] + off, g[1] + off, g[2] + off, g[3] + off, cf, d);
        }
        memcpy(part[c], acc, sizeof acc);
    }
    double sum[20];
    sum_chunks(sum, (const double (*)[20])part, 20);
    float *dA = r->grads + site->A, *db = r->grads + site->beta;
    for (int q = 0; q < NS * NS; q++) dA[q] += (float)sum[q];
    for (int j = 0; j < NS; j++) db[j] += (float)sum[NS * NS + j];
}

// One token: g_r += p_r dx.
static void read_back_row(float *restrict g0, float *restrict g1, float *restrict g2,
                          float *restrict g3, const float *restrict dx, HcCoef c, int d) {
    const float *p = c.b;
    for (int k = 0; k < d; k++) {
        const float x = dx[k];
        g0[k] += p[0] * x; g1[k] += p[1] * x; g2[k] += p[2] * x; g3[k] += p[3] * x;
    }
}

// s = 0: every stream is the embedding, so demb += Σ_r (g_r + p_r dx).
static void read_back_row_emb(float *restrict demb, const float *restrict g0,
                              const float *restrict g1, const float *restrict g2,
                              const float *restrict g3, const float *restrict dx, HcCoef c, int d) {
    const float *p = c.b;
    for (int k = 0; k < d; k++) {
        const float x = dx[k];
        demb[k] += (g0[k] + p[0] * x) + (g1[k] + p[1] * x) + (g2[k] + p[2] * x) + (g3[k] + p[3] * x);
    }
}

// The final read h = mean_r H_r starts backward: G_r = dx / 4 (set).
static void final_read_backward(Residual *r, const float *restrict dx) {
    float *restrict g0 = grad_stream(r, 0), *restrict g1 = grad_stream(r, 1);
    float *restrict g2 = grad_stream(r, 2), *restrict g3 = grad_stream(r, 3);
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    const float q = 1.0f / NS;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) g0[k] = g1[k] = g2[k] = g3[k] = q * dx[k];
}

static void hc_read_backward(Residual *r, int s, const float *dx) {
    if (s == 2 * r->cfg->num_hidden_layers) { final_read_backward(r, dx); return; }
    const int d = r->cfg->hidden_size, n = r->n_tok;
    HcCoef cf;  // only .b used: the read weights p
    read_weights(r, s, cf.b);
    const float *h[NS];
    float *g[NS], *demb = r->dsources[0];
    for (int i = 0; i < NS; i++) h[i] = stream(r, s, i), g[i] = grad_stream(r, i);
    double part[NCHUNK][20];  // per chunk: dp_r = ⟨dx, H_r⟩ in [0, 4)
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double acc[NS] = {0};
        for (size_t t = chunk_start(c, n); t < chunk_start(c + 1, n); t++) {
            const size_t off = t * d;
            float dp[NS];
            dot4(dx + off, h[0] + off, h[1] + off, h[2] + off, h[3] + off, d, dp);
            for (int q = 0; q < NS; q++) acc[q] += dp[q];
            if (s == 0)
                read_back_row_emb(demb + off, g[0] + off, g[1] + off, g[2] + off, g[3] + off, dx + off, cf, d);
            else
                read_back_row(g[0] + off, g[1] + off, g[2] + off, g[3] + off, dx + off, cf, d);
        }
        memcpy(part[c], acc, sizeof acc);
    }
    double dp[NS];
    sum_chunks(dp, (const double (*)[20])part, NS);
    // Softmax backward written as p_r Σ_q p_q (dp_r − dp_q): exactly 0 when
    // all streams are equal (s = 0), as in the float64 reference.
    const float *p = cf.b;
    float *da = r->grads + ((const HcPriv *)r->priv)->site[s].alpha;
    for (int i = 0; i < NS; i++) {
        double v = 0;
        for (int q = 0; q < NS; q++) v += (double)p[q] * (dp[i] - dp[q]);
        da[i] += (float)(p[i] * v);
    }
}

const ResidualScheme residual_hc = {
    .name = "hc",
    .add_params = hc_add_params,
    .init_params = hc_init_params,
    .act_floats = hc_act_floats,
    .bind = hc_bind,
    .read = hc_read,
    .write = hc_write,
    .read_backward = hc_read_backward,
    .write_backward = hc_write_backward,
};
