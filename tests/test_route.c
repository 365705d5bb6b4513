// Route (SPEC §2.2, §5): the properties of the fused fp32 kernel that are
// not "op against its reference" (test_ops.c checks route and
// route_backward_set against a double reference and finite differences,
// over n_src, H, widths and saturated data): q = 0 gives the plain mean,
// H = 1 is AttnRes written directly, a NULL source gradient, backward_set
// against backward into zeros, and the timing of a model's worth of sites.
#include "check.h"
#include "kernels/ops.h"
#include "util/common.h"

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

// ---- the fp32 kernel on one problem ----------------------------------------------

// Problem kinds: random q and g; rows of magnitude spread over 1e-3..1e3;
// a saturated softmax (logits ~N(0, 100²)); q = 0; and "rising", where later
// sources align with q ⊙ g so the running max grows at most sources (the
// forward's rescaling chain) with logits spread over ~30.
enum { RANDOM, SPREAD, SATURATED, ZERO_Q, RISING };

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
    // Logits of spread ~2: fp32 rounding of a few 1e-7 (see test_ops.c).
    CHECK(ex <= 1e-5 && ew <= 1e-5, "route H=1 equals single-head AttnRes", "x %.2e w %.2e", ex, ew);
    free(x), free(w);
    prob_free(p);
}

// ---- NULL sources, backward_set ---------------------------------------

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

static void test_semantics(void) {
    const Dims m = {5, 37, 256, 4};
    const size_t td = (size_t)m.T * m.d;
    Prob p = prob_new(m, RANDOM, 31337);
    prob_forward(&p);
    prob_zero_grads(&p);
    prob_backward(&p, prob_grads(&p));
    Grads g1 = grads_copy(&p);

    // The last source given apart (the tail, as block routing's partial sum):
    // the same x, w and gradients, bit for bit, and the strided rows' last
    // slot untouched.
    int ok;
    {
        float *tail = xcalloc(td, sizeof(float)), *dtail = xcalloc(td, sizeof(float));
        float *x1 = xcalloc(td, sizeof(float)), *w1 = xcalloc((size_t)m.N * m.T * m.H, sizeof(float));
        memcpy(x1, p.x, td * sizeof(float));
        memcpy(w1, p.w, (size_t)m.N * m.T * m.H * sizeof(float));
        memcpy(tail, p.src[m.N - 1], td * sizeof(float));
        prob_zero_grads(&p);
        for (size_t i = 0; i < td; i++) p.src[m.N - 1][i] = NAN;
        RouteSources S = prob_sources(&p, m.N);
        S.tail = tail;
        RouteGrads dS = prob_grads(&p);
        dS.tail = dtail;
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
        free(tail), free(dtail), free(x1), free(w1);
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

// The sources' row stride (ops.h), which the model and both route benches
// use: whole 64-byte lines, room for the row, and never a multiple of 4 KiB
// (all N rows of a token in the same cache sets), also where n·d is one.
static void test_row_stride(void) {
    const int shapes[][2] = {{4096, 256}, {2048, 512}, {2048, 128}, {3, 5}, {1, 16}, {2, 2048}, {1, 1008}, {63, 16}};
    int ok = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const size_t n = shapes[i][0], d = shapes[i][1], s = route_row_floats(n, d);
        ok &= s >= n * d && s % 16 == 0 && s % 1024 != 0;
    }
    CHECK(ok, "route row stride: 64-byte lines, off the 4 KiB multiple", "a stride breaks the rule");
}

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
    test_zero_q();
    test_single_head();
    test_semantics();
    test_row_stride();
    if (!(argc > 1 && !strcmp(argv[1], "--no-timing"))) time_route(), time_chain();
    CHECK_EXIT();
}
