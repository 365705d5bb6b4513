// Route (SPEC §2.2, §5): the fused fp32 kernel against a naive double
// reference that materialises K, logits, softmax and output; the reference
// backward is itself checked against central finite differences.
#include "check.h"
#include "kernels/ops.h"
#include "util/common.h"

#include <float.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define EPS 1e-6f

typedef struct { int N, T, d, H; } Dims; // sources, tokens, width, heads

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

// ---- double reference ------------------------------------------------------------

// Token t of the forward, materialised: rho [N], K [N, d], lg [N, H], p [N, H].
typedef struct { double *rho, *K, *lg, *p; } RefTok;

static RefTok reftok_new(Dims m) {
    RefTok r = {xcalloc(m.N, sizeof(double)), xcalloc((size_t)m.N * m.d, sizeof(double)),
                xcalloc((size_t)m.N * m.H, sizeof(double)), xcalloc((size_t)m.N * m.H, sizeof(double))};
    return r;
}
static void reftok_free(RefTok r) { free(r.rho), free(r.K), free(r.lg), free(r.p); }

// S[n] [T, d]. Also returns max over (n, t, h) of Σ_k |q_k K_{n,k}| in *lscale:
// the size of the terms of a logit, which sets its fp32 rounding error.
static void ref_token(RefTok r, Dims m, int t, double *const *S, const double *q,
                      const double *g, double eps, double *lscale) {
    const int hw = m.d / m.H;
    for (int n = 0; n < m.N; n++) {
        const double *s = S[n] + (size_t)t * m.d;
        double ms = 0;
        for (int k = 0; k < m.d; k++) ms += s[k] * s[k];
        r.rho[n] = 1.0 / sqrt(ms / m.d + eps);
        for (int k = 0; k < m.d; k++) r.K[n * m.d + k] = s[k] * r.rho[n] * g[k];
        for (int h = 0; h < m.H; h++) {
            double l = 0, a = 0;
            for (int k = h * hw; k < (h + 1) * hw; k++)
                l += q[k] * r.K[n * m.d + k], a += fabs(q[k] * r.K[n * m.d + k]);
            r.lg[n * m.H + h] = l;
            if (lscale && a > *lscale) *lscale = a;
        }
    }
    for (int h = 0; h < m.H; h++) {
        double mx = -INFINITY, z = 0;
        for (int n = 0; n < m.N; n++) mx = fmax(mx, r.lg[n * m.H + h]);
        for (int n = 0; n < m.N; n++) z += exp(r.lg[n * m.H + h] - mx);
        for (int n = 0; n < m.N; n++) r.p[n * m.H + h] = exp(r.lg[n * m.H + h] - mx) / z;
    }
}

// x [T, d], w [N, T, H] (w may be NULL).
static void ref_forward(double *x, double *w, double *lscale, Dims m, double *const *S,
                        const double *q, const double *g, double eps) {
    RefTok r = reftok_new(m);
    const int hw = m.d / m.H;
    for (int t = 0; t < m.T; t++) {
        ref_token(r, m, t, S, q, g, eps, lscale);
        for (int k = 0; k < m.d; k++) {
            double v = 0;
            for (int n = 0; n < m.N; n++) v += r.p[n * m.H + k / hw] * S[n][(size_t)t * m.d + k];
            x[(size_t)t * m.d + k] = v;
        }
        for (int n = 0; n < m.N && w; n++)
            for (int h = 0; h < m.H; h++) w[((size_t)n * m.T + t) * m.H + h] = r.p[n * m.H + h];
    }
    reftok_free(r);
}

// Chain rule node by node: x ← (p, S), p ← lg (softmax Jacobian), lg ← (q, K),
// K ← (S, rho, g), rho ← ms, ms ← S. dS[n] [T, d], dq, dg [d]: overwritten.
static void ref_backward(double *const *dS, double *dq, double *dg, const double *dx,
                         Dims m, double *const *S, const double *q, const double *g,
                         double eps) {
    RefTok r = reftok_new(m);
    const int hw = m.d / m.H;
    double *dp = xcalloc((size_t)m.N * m.H, sizeof(double));
    double *dlg = xcalloc((size_t)m.N * m.H, sizeof(double));
    memset(dq, 0, m.d * sizeof(double)), memset(dg, 0, m.d * sizeof(double));
    for (int t = 0; t < m.T; t++) {
        ref_token(r, m, t, S, q, g, eps, NULL);
        const double *dxt = dx + (size_t)t * m.d;
        for (int n = 0; n < m.N; n++)
            for (int h = 0; h < m.H; h++) {
                double a = 0;
                for (int k = h * hw; k < (h + 1) * hw; k++) a += dxt[k] * S[n][(size_t)t * m.d + k];
                dp[n * m.H + h] = a;
            }
        // Softmax: dlg_n = Σ_j dp_j p_j (δ_jn − p_n) = p_n Σ_j p_j (dp_n − dp_j)
        // (Σ p = 1). The second form has no 1 − p_n, which even double loses
        // to cancellation when one weight is 1 − 1e-14 (saturated tests).
        for (int h = 0; h < m.H; h++)
            for (int n = 0; n < m.N; n++) {
                double v = 0;
                for (int j = 0; j < m.N; j++)
                    v += r.p[j * m.H + h] * (dp[n * m.H + h] - dp[j * m.H + h]);
                dlg[n * m.H + h] = r.p[n * m.H + h] * v;
            }
        for (int n = 0; n < m.N; n++) {
            const double *s = S[n] + (size_t)t * m.d;
            double *ds = dS[n] + (size_t)t * m.d, drho = 0;
            for (int k = 0; k < m.d; k++) {
                const double dl = dlg[n * m.H + k / hw], dK = dl * q[k];
                dq[k] += dl * r.K[n * m.d + k];
                dg[k] += dK * r.rho[n] * s[k];
                drho += dK * s[k] * g[k];
                ds[k] = r.p[n * m.H + k / hw] * dxt[k] + dK * r.rho[n] * g[k];
            }
            // rho = (ms + eps)^(-1/2), ms = Σ s² / d
            const double dms = drho * -0.5 * pow(r.rho[n], 3.0);
            for (int k = 0; k < m.d; k++) ds[k] += dms * 2.0 * s[k] / m.d;
        }
    }
    free(dp), free(dlg);
    reftok_free(r);
}

// ---- finite-difference check of the reference ------------------------------------

static double loss(const double *r, Dims m, double *const *S, const double *q,
                   const double *g, double *x) {
    ref_forward(x, NULL, NULL, m, S, q, g, EPS);
    double L = 0;
    for (size_t i = 0; i < (size_t)m.T * m.d; i++) L += r[i] * x[i];
    return L;
}

// max |fd − grad| / max |grad| over one tensor v [n] with analytic grad [n].
static double fd_err(double *v, const double *grad, size_t n, const double *r, Dims m,
                     double *const *S, const double *q, const double *g, double *x) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double v0 = v[i], h = 1e-6 * fmax(fabs(v0), 1e-2);
        v[i] = v0 + h;
        const double lp = loss(r, m, S, q, g, x);
        v[i] = v0 - h;
        const double lm = loss(r, m, S, q, g, x);
        v[i] = v0;
        num = fmax(num, fabs((lp - lm) / (2 * h) - grad[i]));
        den = fmax(den, fabs(grad[i]));
    }
    return num / den;
}

static void test_reference_fd(void) {
    const Dims m = {3, 2, 16, 4};
    Rng rng;
    rng_seed(&rng, 7);
    double *S[3], *dS[3], q[16], g[16], dq[16], dg[16], r[32], x[32];
    for (int n = 0; n < m.N; n++) {
        S[n] = xcalloc(m.T * m.d, sizeof(double)), dS[n] = xcalloc(m.T * m.d, sizeof(double));
        for (int t = 0; t < m.T; t++) { // rows of different magnitude exercise rho
            const double scale = pow(10.0, 2.0 * rng_uniform(&rng) - 1.0);
            for (int k = 0; k < m.d; k++) S[n][t * m.d + k] = scale * rng_normal(&rng);
        }
    }
    for (int k = 0; k < m.d; k++) q[k] = rng_normal(&rng), g[k] = 1 + 0.3 * rng_normal(&rng);
    for (int i = 0; i < m.T * m.d; i++) r[i] = rng_normal(&rng);
    ref_backward(dS, dq, dg, r, m, S, q, g, EPS);
    double eS = 0;
    for (int n = 0; n < m.N; n++)
        eS = fmax(eS, fd_err(S[n], dS[n], (size_t)m.T * m.d, r, m, S, q, g, x));
    const double eq = fd_err(q, dq, m.d, r, m, S, q, g, x);
    const double eg = fd_err(g, dg, m.d, r, m, S, q, g, x);
    // Central differences with h ~ 1e-6·|v|: truncation O(h²), rounding ~1e-16/h.
    CHECK(eS < 1e-6 && eq < 1e-6 && eg < 1e-6, "route reference backward vs finite differences",
          "dS %.2e dq %.2e dg %.2e", eS, eq, eg);
    for (int n = 0; n < m.N; n++) free(S[n]), free(dS[n]);
}

// ---- the fp32 kernel on one problem ----------------------------------------------

// Problem kinds: random q and g; rows of magnitude spread over 1e-3..1e3;
// a saturated softmax (logits ~N(0, 100²)); q = 0; and "rising", where later
// sources align with q ⊙ g so the running max grows at most sources (the
// forward's rescaling chain) with logits spread over ~30.
enum { RANDOM, SPREAD, SATURATED, ZERO_Q, RISING, NKIND };
static const char *kind_name[NKIND] = {"random", "spread", "saturated", "zero-q", "rising"};

static OpsContext *ctx;

typedef struct {
    Dims m;
    float **src, **dsrc, *q, *g, *dx, *x, *w, *dq, *dg, *scratch;
} Prob;

static void fill_sources(Prob *p, int kind, Rng *rng) {
    const Dims m = p->m;
    float *v = xcalloc(m.d, sizeof(float)); // RISING: one noise row per token
    for (int t = 0; t < m.T; t++) {
        for (int k = 0; k < m.d; k++) v[k] = rng_normal(rng);
        for (int n = 0; n < m.N; n++) {
            float *row = p->src[n] + (size_t)t * m.d;
            if (kind == RISING) { // from v (f = 0) to v turned along q ⊙ g (f = 1)
                const float f = m.N > 1 ? (float)n / (m.N - 1) : 0.0f;
                for (int k = 0; k < m.d; k++) {
                    const float along = p->q[k] * p->g[k] >= 0 ? fabsf(v[k]) : -fabsf(v[k]);
                    row[k] = (1 - f) * v[k] + f * along + 0.05f * rng_normal(rng);
                }
                continue;
            } // SPREAD: each row 10^U(-3, 3) in scale
            const float sc = kind == SPREAD ? powf(10.0f, 6.0f * rng_uniform(rng) - 3.0f) : 1.0f;
            for (int k = 0; k < m.d; k++) row[k] = sc * rng_normal(rng);
        }
    }
    free(v);
}

static Prob prob_new(Dims m, int kind, uint64_t seed) {
    Prob p = {.m = m};
    Rng rng;
    rng_seed(&rng, seed);
    const size_t td = (size_t)m.T * m.d;
    // Keys have unit RMS, so a logit is ~N(0, hw·σ_q²): σ_q = c/sqrt(hw) gives
    // logits of spread ~c (2: a soft mixture; 100: a saturated softmax).
    const float hw = (float)(m.d / m.H);
    const float qs = kind == SATURATED ? 100.0f : kind == ZERO_Q ? 0.0f : kind == RISING ? 10.0f : 2.0f;
    p.q = xcalloc(m.d, sizeof(float)), p.g = xcalloc(m.d, sizeof(float));
    for (int k = 0; k < m.d; k++)
        p.q[k] = qs / sqrtf(hw) * rng_normal(&rng), p.g[k] = 1 + 0.3f * rng_normal(&rng);
    // One buffer of N rows each (the kernel reads a row stride); src[n] and
    // dsrc[n] point at the rows for the test's own loops.
    p.src = xcalloc(m.N, sizeof(float *)), p.dsrc = xcalloc(m.N, sizeof(float *));
    p.src[0] = xcalloc((size_t)m.N * td, sizeof(float)), p.dsrc[0] = xcalloc((size_t)m.N * td, sizeof(float));
    for (int n = 1; n < m.N; n++) p.src[n] = p.src[0] + n * td, p.dsrc[n] = p.dsrc[0] + n * td;
    fill_sources(&p, kind, &rng);
    p.dx = xcalloc(td, sizeof(float)), p.x = xcalloc(td, sizeof(float));
    for (size_t i = 0; i < td; i++) p.dx[i] = rng_normal(&rng), p.x[i] = NAN;
    p.w = xcalloc((size_t)m.N * m.T * m.H, sizeof(float));
    for (size_t i = 0; i < (size_t)m.N * m.T * m.H; i++) p.w[i] = NAN; // all must be written
    p.dq = xcalloc(m.d, sizeof(float)), p.dg = xcalloc(m.d, sizeof(float));
    p.scratch = xcalloc(route_scratch_floats(ctx, m.N, m.d, m.H), sizeof(float));
    return p;
}

static void prob_free(Prob p) {
    free(p.src[0]), free(p.dsrc[0]);
    free(p.src), free(p.dsrc), free(p.q), free(p.g), free(p.dx), free(p.x), free(p.w);
    free(p.dq), free(p.dg), free(p.scratch);
}

static RouteSources prob_sources(const Prob *p, int n) {
    return (RouteSources){p->src[0], (size_t)p->m.T * p->m.d, n, NULL};
}
static RouteGrads prob_grads(const Prob *p) { return (RouteGrads){p->dsrc[0], (size_t)p->m.T * p->m.d, NULL}; }
static void prob_forward(Prob *p) {
    route_forward(ctx, p->x, p->w, p->scratch, prob_sources(p, p->m.N), p->q, p->g, p->m.T, p->m.d, p->m.H, EPS);
}
static void prob_backward(Prob *p, RouteGrads dS) {
    route_backward(ctx, dS, p->dq, p->dg, p->scratch, p->dx, p->w, prob_sources(p, p->m.N), p->q, p->g,
                   p->m.T, p->m.d, p->m.H, EPS);
}
static void prob_zero_grads(Prob *p) {
    for (int n = 0; n < p->m.N; n++) memset(p->dsrc[n], 0, (size_t)p->m.T * p->m.d * sizeof(float));
    memset(p->dq, 0, p->m.d * sizeof(float)), memset(p->dg, 0, p->m.d * sizeof(float));
}

static double *to_double(const float *a, size_t n) {
    double *o = xcalloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) o[i] = a[i];
    return o;
}

// ---- kernel against reference ----------------------------------------------------

enum { EX, EW, ES, EQ, EG, NERR };
static const char *err_name[NERR] = {"x", "w", "dsrc", "dq", "dg"};

// Forward, backward from zeroed gradients, then each output's rel_err against
// the double reference on the same fp32 inputs. Returns the logit term scale.
static double compare(Prob *p, double err[NERR]) {
    const Dims m = p->m;
    const size_t td = (size_t)m.T * m.d, nw = (size_t)m.N * m.T * m.H;
    prob_forward(p);
    prob_zero_grads(p);
    prob_backward(p, prob_grads(p));
    double **S = xcalloc(m.N, sizeof(double *)), **dS = xcalloc(m.N, sizeof(double *));
    for (int n = 0; n < m.N; n++) S[n] = to_double(p->src[n], td), dS[n] = xcalloc(td, sizeof(double));
    double *q = to_double(p->q, m.d), *g = to_double(p->g, m.d), *dx = to_double(p->dx, td);
    double *x = xcalloc(td, sizeof(double)), *w = xcalloc(nw, sizeof(double));
    double *dq = xcalloc(m.d, sizeof(double)), *dg = xcalloc(m.d, sizeof(double)), lscale = 0;
    ref_forward(x, w, &lscale, m, S, q, g, EPS);
    ref_backward(dS, dq, dg, dx, m, S, q, g, EPS);
    err[EX] = rel_err(p->x, x, td);
    err[EW] = rel_err(p->w, w, nw);
    err[ES] = 0;
    for (int n = 0; n < m.N; n++) err[ES] = fmax(err[ES], rel_err(p->dsrc[n], dS[n], td));
    err[EQ] = rel_err(p->dq, dq, m.d);
    err[EG] = rel_err(p->dg, dg, m.d);
    for (int n = 0; n < m.N; n++) free(S[n]), free(dS[n]);
    free(S), free(dS), free(q), free(g), free(dx), free(x), free(w), free(dq), free(dg);
    return lscale;
}

// Tolerance of one output. fp32 sums of ≤ 256 products and ≤ 17 sources
// round to a few 1e-7 of the largest term, hence 1e-5 of the tensor's max;
// sums over more sources grow their error bound in proportion (n_src / 17).
// A logit's absolute error is ~ FLT_EPSILON · Σ_k |q_k K_k| (lscale), and a
// softmax weight's error is w(1−w) times that: for saturated softmaxes
// (lscale ~ 1e3) this dominates every output that depends on w.
static double tolerance_n(double lscale, int n_src) {
    return 1e-5 * (n_src > 17 ? n_src / 17.0 : 1.0) + 4 * FLT_EPSILON * lscale;
}
static double tolerance(double lscale) { return tolerance_n(lscale, 17); }

static int verbose;

static void test_sweep(int kind) {
    static const int Hs[] = {1, 2, 4, 8}, Ns[] = {1, 2, 5, 17}, ds[] = {64, 256};
    double worst[NERR] = {0}, ratio[NERR] = {0};
    char where[NERR][96] = {{0}};
    uint64_t seed = 1000 * (kind + 1);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 2; c++) {
                const Dims m = {Ns[b], 37, ds[c], Hs[a]};
                Prob p = prob_new(m, kind, seed++);
                double err[NERR];
                const double ls = compare(&p, err);
                if (verbose)
                    printf("  %s H=%d N=%d d=%d lscale %.0f: x %.1e w %.1e dS %.1e dq %.1e dg %.1e\n",
                           kind_name[kind], m.H, m.N, m.d, ls, err[EX], err[EW], err[ES], err[EQ], err[EG]);
                for (int e = 0; e < NERR; e++)
                    if (err[e] / tolerance(ls) > ratio[e] || isnan(err[e])) {
                        ratio[e] = isnan(err[e]) ? INFINITY : err[e] / tolerance(ls);
                        worst[e] = err[e];
                        snprintf(where[e], sizeof where[e], "H=%d N=%d d=%d (tol %.1e)", m.H,
                                 m.N, m.d, tolerance(ls));
                    }
                prob_free(p);
            }
    for (int e = 0; e < NERR; e++) {
        char name[96];
        snprintf(name, sizeof name, "route %s %s vs reference", kind_name[kind], err_name[e]);
        CHECK(ratio[e] <= 1.0, name, "rel err %.2e at %s", worst[e], where[e]);
    }
}

// q = 0: every logit is 0, so w = 1/N exactly and x is the plain mean.
static void test_zero_q(void) {
    static const int Hs[] = {1, 2, 4, 8}, Ns[] = {1, 2, 5, 17}, ds[] = {64, 256};
    double ex = 0, ew = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 2; c++) {
                const Dims m = {Ns[b], 37, ds[c], Hs[a]};
                Prob p = prob_new(m, ZERO_Q, 77 + a * 8 + b * 2 + c);
                prob_forward(&p);
                const size_t td = (size_t)m.T * m.d;
                double *mean = xcalloc(td, sizeof(double));
                for (size_t i = 0; i < td; i++) {
                    for (int n = 0; n < m.N; n++) mean[i] += p.src[n][i];
                    mean[i] /= m.N;
                }
                ex = fmax(ex, rel_err(p.x, mean, td));
                for (size_t i = 0; i < (size_t)m.N * m.T * m.H; i++)
                    ew = fmax(ew, fabs(p.w[i] * m.N - 1.0));
                free(mean);
                prob_free(p);
            }
    // Sums of ≤ 17 fp32 values and one division: a few ulps.
    CHECK(ex <= 1e-6, "route q=0 gives the uniform mean", "rel err %.2e", ex);
    CHECK(ew <= 1e-6, "route q=0 gives w = 1/N", "max |w·N − 1| %.2e", ew);
}

// H = 1 against the AttnRes formula written directly: one softmax over the
// full-width logits ℓ_n = ρ_n ⟨q ⊙ g, S_n⟩.
static void test_single_head(void) {
    const Dims m = {5, 37, 256, 1};
    Prob p = prob_new(m, RANDOM, 4242);
    prob_forward(&p);
    double *x = xcalloc((size_t)m.T * m.d, sizeof(double));
    double *w = xcalloc((size_t)m.N * m.T, sizeof(double)), lg[5];
    for (int t = 0; t < m.T; t++) {
        double mx = -INFINITY, z = 0;
        for (int n = 0; n < m.N; n++) {
            const float *s = p.src[n] + (size_t)t * m.d;
            double ss = 0, dot = 0;
            for (int k = 0; k < m.d; k++) ss += (double)s[k] * s[k], dot += (double)p.q[k] * p.g[k] * s[k];
            lg[n] = dot / sqrt(ss / m.d + EPS);
            mx = fmax(mx, lg[n]);
        }
        for (int n = 0; n < m.N; n++) z += exp(lg[n] - mx);
        for (int n = 0; n < m.N; n++) {
            w[n * m.T + t] = exp(lg[n] - mx) / z;
            for (int k = 0; k < m.d; k++)
                x[(size_t)t * m.d + k] += w[n * m.T + t] * p.src[n][(size_t)t * m.d + k];
        }
    }
    const double ex = rel_err(p.x, x, (size_t)m.T * m.d), ew = rel_err(p.w, w, (size_t)m.N * m.T);
    // Logits of spread ~2: fp32 rounding of a few 1e-7 (see tolerance()).
    CHECK(ex <= 1e-5 && ew <= 1e-5, "route H=1 equals single-head AttnRes", "x %.2e w %.2e", ex, ew);
    free(x), free(w);
    prob_free(p);
}

// Shapes off the main grid: H > 64 (the forward's head-chunk path), a head
// width that is not a multiple of the vector lanes, fewer tokens than threads,
// more sources than one softmax chunk.
static void test_other_shapes(void) {
    const struct { Dims m; int kind; const char *name; } cs[] = {
        {{5, 37, 256, 128}, RANDOM, "route H=128 (head chunks) vs reference"},
        {{5, 37, 256, 128}, SATURATED, "route H=128 saturated vs reference"},
        {{3, 37, 60, 4}, SPREAD, "route head width 15 vs reference"},
        {{17, 1, 64, 8}, RANDOM, "route one token vs reference"},
        // More sources than one online-softmax chunk (32): the chunk rescaling
        // and the backward walk that finishes the earlier chunks' weights.
        {{70, 9, 64, 4}, RISING, "route 70 sources (3 chunks, rising max) vs reference"},
        {{70, 9, 64, 4}, SATURATED, "route 70 sources saturated vs reference"},
        {{33, 9, 64, 2}, SPREAD, "route 33 sources (one-source last chunk) vs reference"},
        {{49, 5, 256, 128}, RANDOM, "route 49 sources, H=128 (both chunkings) vs reference"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        Prob p = prob_new(cs[i].m, cs[i].kind, 900 + i);
        double err[NERR], ratio = 0;
        const double ls = compare(&p, err);
        const double tol = tolerance_n(ls, cs[i].m.N);
        for (int e = 0; e < NERR; e++) ratio = fmax(ratio, isnan(err[e]) ? INFINITY : err[e] / tol);
        CHECK(ratio <= 1.0, cs[i].name, "x %.2e w %.2e dS %.2e dq %.2e dg %.2e (tol %.1e)", err[EX],
              err[EW], err[ES], err[EQ], err[EG], tol);
        prob_free(p);
    }
}

// ---- accumulation, NULL sources, determinism ---------------------------------------

typedef struct { float **ds, *dq, *dg; } Grads; // a copy of a problem's gradients

static Grads grads_copy(const Prob *p) {
    const size_t td = (size_t)p->m.T * p->m.d;
    Grads g = {xcalloc(p->m.N, sizeof(float *)), xcalloc(p->m.d, sizeof(float)),
               xcalloc(p->m.d, sizeof(float))};
    for (int n = 0; n < p->m.N; n++) {
        g.ds[n] = xcalloc(td, sizeof(float));
        memcpy(g.ds[n], p->dsrc[n], td * sizeof(float));
    }
    memcpy(g.dq, p->dq, p->m.d * sizeof(float)), memcpy(g.dg, p->dg, p->m.d * sizeof(float));
    return g;
}
static void grads_free(Grads g, int N) {
    for (int n = 0; n < N; n++) free(g.ds[n]);
    free(g.ds), free(g.dq), free(g.dg);
}
static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

// max |a − s·ref| / max |s·ref|
static double scaled_err(const float *a, const float *ref, float s, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++)
        num = fmax(num, fabs(a[i] - (double)s * ref[i])), den = fmax(den, fabs((double)s * ref[i]));
    return num / fmax(den, 1e-30);
}

static void test_semantics(void) {
    const Dims m = {5, 37, 256, 4};
    const size_t td = (size_t)m.T * m.d;
    Prob p = prob_new(m, RANDOM, 31337);
    prob_forward(&p);
    float *x1 = xcalloc(td, sizeof(float));
    memcpy(x1, p.x, td * sizeof(float));
    prob_forward(&p);
    CHECK(same(x1, p.x, td), "route forward deterministic", "two runs differ");
    prob_zero_grads(&p);
    prob_backward(&p, prob_grads(&p));
    Grads g1 = grads_copy(&p);

    prob_zero_grads(&p); // determinism: a second run from zero, bit for bit
    prob_backward(&p, prob_grads(&p));
    int ok = same(p.dq, g1.dq, m.d) && same(p.dg, g1.dg, m.d);
    for (int n = 0; n < m.N; n++) ok = ok && same(p.dsrc[n], g1.ds[n], td);
    CHECK(ok, "route backward deterministic", "two runs differ");

    prob_backward(&p, prob_grads(&p)); // accumulation: now every gradient holds 2×
    double e2 = fmax(scaled_err(p.dq, g1.dq, 2, m.d), scaled_err(p.dg, g1.dg, 2, m.d));
    for (int n = 0; n < m.N; n++) e2 = fmax(e2, scaled_err(p.dsrc[n], g1.ds[n], 2, td));
    // x + x is exact in fp32, so 2× should be exact; 1e-6 allows a compiler
    // that contracts differently, while overwriting (1×) would give 0.5.
    CHECK(e2 <= 1e-6, "route backward accumulates dsrc, dq, dg", "err vs 2x %.2e", e2);

    // The last source given apart (the tail, as block routing's partial sum):
    // the same x, w and gradients, bit for bit, and the strided rows' last
    // slot untouched.
    {
        float *tail = xcalloc(td, sizeof(float)), *dtail = xcalloc(td, sizeof(float));
        memcpy(tail, p.src[m.N - 1], td * sizeof(float));
        prob_zero_grads(&p);
        for (size_t i = 0; i < td; i++) p.src[m.N - 1][i] = NAN, p.dsrc[m.N - 1][i] = 0;
        RouteSources S = prob_sources(&p, m.N);
        S.tail = tail;
        RouteGrads dS = prob_grads(&p);
        dS.tail = dtail;
        float *w1 = xcalloc((size_t)m.N * m.T * m.H, sizeof(float));
        memcpy(w1, p.w, (size_t)m.N * m.T * m.H * sizeof(float));
        route_forward(ctx, p.x, p.w, p.scratch, S, p.q, p.g, m.T, m.d, m.H, EPS);
        ok = same(p.x, x1, td) && same(p.w, w1, (size_t)m.N * m.T * m.H);
        route_backward(ctx, dS, p.dq, p.dg, p.scratch, p.dx, p.w, S, p.q, p.g, m.T, m.d, m.H, EPS);
        ok = ok && same(p.dq, g1.dq, m.d) && same(p.dg, g1.dg, m.d) && same(dtail, g1.ds[m.N - 1], td);
        for (int n = 0; n < m.N - 1; n++) ok = ok && same(p.dsrc[n], g1.ds[n], td);
        double untouched = 0;
        for (size_t i = 0; i < td; i++) untouched = fmax(untouched, fabs(p.dsrc[m.N - 1][i]));
        CHECK(ok && untouched == 0, "route with the last source as a tail row",
              "equal to the strided call: %d, strided last row's gradient max %.2e", ok, untouched);
        memcpy(p.src[m.N - 1], tail, td * sizeof(float));
        free(tail), free(dtail), free(w1);
    }

    // route_backward_set writes dsrc: over garbage it gives what
    // route_backward adds to zeros (x and 0 + x are the same value); dq and
    // dg still accumulate.
    for (int n = 0; n < m.N; n++)
        for (size_t i = 0; i < td; i++) p.dsrc[n][i] = (float)(i % 7) - 3.0f;
    memset(p.dq, 0, m.d * sizeof(float)), memset(p.dg, 0, m.d * sizeof(float));
    route_backward_set(ctx, prob_grads(&p), p.dq, p.dg, p.scratch, p.dx, p.w, prob_sources(&p, m.N), p.q, p.g,
                       m.T, m.d, m.H, EPS);
    size_t differ = 0;
    for (int n = 0; n < m.N; n++)
        for (size_t i = 0; i < td; i++) differ += p.dsrc[n][i] != g1.ds[n][i];
    ok = same(p.dq, g1.dq, m.d) && same(p.dg, g1.dg, m.d);
    CHECK(differ == 0 && ok, "route backward_set writes dsrc",
          "%zu dsrc values differ from the accumulate-into-zero result; dq, dg equal: %d", differ, ok);
    grads_free(g1, m.N);
    free(x1);
    prob_free(p);
}

// ---- throughput --------------------------------------------------------------------

// Baselines with the kernels' access pattern (per token, every source's row):
// a plain read of the sources (sum into x), and dS += S (read S, update dS).
static void plain_read(float *x, float *const *src, int N, int T, int d) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *xt = x + (size_t)t * d;
        for (int k = 0; k < d; k++) xt[k] = 0;
        for (int n = 0; n < N; n++) {
            const float *s = src[n] + (size_t)t * d;
            for (int k = 0; k < d; k++) xt[k] += s[k];
        }
    }
}
static void plain_update(float *const *dsrc, float *const *src, int N, int T, int d) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            float *ds = dsrc[n] + (size_t)t * d;
            const float *s = src[n] + (size_t)t * d;
            for (int k = 0; k < d; k++) ds[k] += s[k];
        }
}

#define BEST_OF(reps, secs, stmt)                                       \
    do {                                                                \
        secs = INFINITY;                                                \
        for (int r_ = 0; r_ < (reps); r_++) {                           \
            const double t0_ = now_seconds();                           \
            stmt;                                                       \
            secs = fmin(secs, now_seconds() - t0_);                     \
        }                                                               \
    } while (0)

static void time_route(void) {
    const Dims m = {17, 4096, 256, 8};
    Prob p = prob_new(m, RANDOM, 5);
    const double mb = (double)m.N * m.T * m.d * sizeof(float) / 1e9; // one pass over sources, GB
    double tf, tb, tr, tu;
    prob_forward(&p), prob_backward(&p, prob_grads(&p)); // warm up (pages, threads)
    BEST_OF(10, tf, prob_forward(&p));
    BEST_OF(10, tb, prob_backward(&p, prob_grads(&p)));
    BEST_OF(10, tr, plain_read(p.x, p.src, m.N, m.T, m.d));
    BEST_OF(10, tu, plain_update(p.dsrc, p.src, m.N, m.T, m.d));
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("INFO route timing: n_tok %d, d %d, H %d, n_src %d, %d threads, sources %.1f MB\n",
           m.T, m.d, m.H, m.N, threads, mb * 1e3);
    printf("INFO route forward  %7.2f ms  %6.1f GB/s of sources (plain read %7.2f ms, %6.1f GB/s)\n",
           tf * 1e3, mb / tf, tr * 1e3, mb / tr);
    printf("INFO route backward %7.2f ms  %6.1f GB/s of S + dS r/w (plain dS += S %7.2f ms, %6.1f GB/s)\n",
           tb * 1e3, 3 * mb / tb, tu * 1e3, 3 * mb / tu);
    CHECK(isfinite(p.x[0]) && isfinite(p.dq[0]), "route large problem runs", "non-finite output");
    prob_free(p);
}

// A model's worth of full routing: 17 sources, site s reads sources 0..s,
// forward then backward last site first, as in a step. One problem holds
// the sources; every site uses its q, g and w slots (timing only: a site's
// backward sees the w of the last forward).
static void time_chain(void) {
    const Dims m = {17, 4096, 256, 8};
    Prob p = prob_new(m, RANDOM, 11);
    double tf, tb;
    BEST_OF(5, tf, for (int s = 0; s < m.N; s++) route_forward(ctx, p.x, p.w, p.scratch, prob_sources(&p, s + 1),
                                                              p.q, p.g, m.T, m.d, m.H, EPS));
    BEST_OF(5, tb, for (int s = m.N - 1; s >= 0; s--) route_backward(ctx, prob_grads(&p), p.dq, p.dg, p.scratch,
                                                                     p.dx, p.w, prob_sources(&p, s + 1), p.q,
                                                                     p.g, m.T, m.d, m.H, EPS));
    printf("INFO route chain (17 sites, site s reads sources 0..s): forward %.2f ms, backward %.2f ms\n",
           tf * 1e3, tb * 1e3);
    CHECK(isfinite(p.x[0]) && isfinite(p.dq[0]) && isfinite(p.dsrc[0][0]), "route chain runs",
          "non-finite output");
    prob_free(p);
}

int main(int argc, char **argv) {
    ctx = ops_open();
    if (!ctx) return 1;
    verbose = getenv("ROUTE_VERBOSE") != NULL;
    test_reference_fd();
    for (int kind = 0; kind < NKIND; kind++) test_sweep(kind);
    test_zero_q();
    test_single_head();
    test_other_shapes();
    test_semantics();
    if (!(argc > 1 && !strcmp(argv[1], "--no-timing"))) time_route(), time_chain();
    CHECK_EXIT();
}
