// Tests of the CPU kernels of kernels/ops.h (all but route_*): each forward
// and backward against a plain double-precision reference written here, the
// references' gradients against finite differences, determinism (each
// backward twice, bit-identical), and edge cases (repeated tokens, ±80
// logits, in-place xent, RoPE inverse and pos0).
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels/ops.h"
#include "util/common.h"

static OpsContext *ctx;  // the backend under test

// fp32 kernel vs double reference: float rounding over sums of ≤ a few
// hundred terms gives ~1e-6; 1e-5 leaves headroom yet catches any real bug
// (a wrong index or term is off by O(1)).
#define TOL_F32 1e-5
// Double reference vs central finite differences (h = 1e-6): truncation
// ~h² and rounding ~1e-16/h are both far below 1e-6.
#define TOL_FD 1e-6
#define FD_H 1e-6

static Rng rng;

// ---- helpers -------------------------------------------------------------------

static float *fnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dnew(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static int *inew(size_t n) { return calloc(n ? n : 1, sizeof(int)); }

static float *frandn(size_t n, float scale) {
    float *a = fnew(n);
    for (size_t i = 0; i < n; i++) a[i] = scale * rng_normal(&rng);
    return a;
}

static double *drandn(size_t n, double scale) {
    double *a = dnew(n);
    for (size_t i = 0; i < n; i++) a[i] = scale * rng_normal(&rng);
    return a;
}

static double *to_d(const float *a, size_t n) {
    double *r = dnew(n);
    for (size_t i = 0; i < n; i++) r[i] = a[i];
    return r;
}

static float *fcopy(const float *a, size_t n) {
    float *r = fnew(n);
    memcpy(r, a, n * sizeof(float));
    return r;
}

static void fill_nan(float *a, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = NAN;
}

// Same figure as rel_err, for double vs double (finite-difference checks).
static double rel_err_d(const double *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - ref[i]);
        if (e > num || isnan(e)) num = isnan(e) ? INFINITY : e;
        if (fabs(ref[i]) > den) den = fabs(ref[i]);
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

static int all_finite(const float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

// Central differences of a scalar loss with respect to p[0..n) -> g.
typedef double (*LossFn)(void *ctx);
static void fd_grad(double *g, double *p, size_t n, LossFn loss, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = loss(ctx);
        p[i] = keep - FD_H;
        double lm = loss(ctx);
        p[i] = keep;
        g[i] = (lp - lm) / (2 * FD_H);
    }
}

// Σ r ⊙ y: the scalar loss whose gradient with respect to y is r.
static double dot_d(const double *r, const double *y, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += r[i] * y[i];
    return s;
}

// ---- matmul ----------------------------------------------------------------------

// in [M, K], w [N, K] -> out [M, N], double
static void ref_matmul(double *out, const double *in, const double *w, int M, int K, int N) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += in[(size_t)m * K + k] * w[(size_t)n * K + k];
            out[(size_t)m * N + n] = s;
        }
}

static void test_matmul(int M, int K, int N) {
    char name[96];
    size_t nin = (size_t)M * K, nw = (size_t)N * K, nout = (size_t)M * N;
    float *in = frandn(nin, 1), *w = frandn(nw, 0.5f), *dout = frandn(nout, 1);
    float *out = fnew(nout), *din = fnew(nin), *dw0 = frandn(nw, 1);
    float *dw = fcopy(dw0, nw), *din2 = fnew(nin), *dw2 = fcopy(dw0, nw);
    double *ind = to_d(in, nin), *wd = to_d(w, nw), *doutd = to_d(dout, nout);
    double *outr = dnew(nout), *dinr = dnew(nin), *dwr = dnew(nw);

    fill_nan(out, nout);
    matmul_forward(ctx, out, in, w, M, K, N);
    ref_matmul(outr, ind, wd, M, K, N);
    double e = rel_err(out, outr, nout);
    snprintf(name, sizeof name, "matmul_forward_%dx%dx%d", M, K, N);
    CHECK(e < TOL_F32, name, "rel_err %.3g", e);

    // din = dout · W; dw = dw0 + doutᵀ · in (accumulates)
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int n = 0; n < N; n++) s += doutd[(size_t)m * N + n] * wd[(size_t)n * K + k];
            dinr[(size_t)m * K + k] = s;
        }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double s = dw0[(size_t)n * K + k];
            for (int m = 0; m < M; m++) s += doutd[(size_t)m * N + n] * ind[(size_t)m * K + k];
            dwr[(size_t)n * K + k] = s;
        }
    fill_nan(din, nin);
    matmul_backward(ctx, din, dw, dout, in, w, M, K, N);
    double ei = rel_err(din, dinr, nin), ew = rel_err(dw, dwr, nw);
    snprintf(name, sizeof name, "matmul_backward_%dx%dx%d", M, K, N);
    CHECK(ei < TOL_F32 && ew < TOL_F32, name, "din %.3g dw %.3g", ei, ew);

    matmul_backward(ctx, din2, dw2, dout, in, w, M, K, N);
    snprintf(name, sizeof name, "matmul_backward_deterministic_%dx%dx%d", M, K, N);
    CHECK(same_bits(din, din2, nin) && same_bits(dw, dw2, nw), name, "runs differ");

    // din = NULL: only dw is computed
    memcpy(dw2, dw0, nw * sizeof(float));
    matmul_backward(ctx, NULL, dw2, dout, in, w, M, K, N);
    snprintf(name, sizeof name, "matmul_backward_din_null_%dx%dx%d", M, K, N);
    CHECK(same_bits(dw, dw2, nw), name, "dw differs when din is NULL");

    free(in); free(w); free(dout); free(out); free(din); free(dw0); free(dw); free(din2);
    free(dw2); free(ind); free(wd); free(doutd); free(outr); free(dinr); free(dwr);
}

// ---- embedding -------------------------------------------------------------------

static void test_embedding(void) {
    // Many repeated tokens (7 distinct ids among 301), V = 50, odd d; n·d is
    // large enough to take the parallel path.
    int V = 50, d = 131, n = 301;
    int *tok = inew(n);
    for (int i = 0; i < n; i++) tok[i] = i % 3 ? (int)rng_below(&rng, 7) : (int)rng_below(&rng, V);
    float *emb = frandn((size_t)V * d, 1), *out = fnew((size_t)n * d);
    float *dout = frandn((size_t)n * d, 1), *demb0 = frandn((size_t)V * d, 1);
    float *demb = fcopy(demb0, (size_t)V * d), *demb2 = fcopy(demb0, (size_t)V * d);
    double *outr = dnew((size_t)n * d), *dembr = to_d(demb0, (size_t)V * d);

    embedding_forward(ctx, out, tok, emb, n, d);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) outr[(size_t)i * d + j] = emb[(size_t)tok[i] * d + j];
    double e = rel_err(out, outr, (size_t)n * d);
    // a copy: exact
    CHECK(e == 0, "embedding_forward", "rel_err %.3g", e);

    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) dembr[(size_t)tok[i] * d + j] += dout[(size_t)i * d + j];
    embedding_backward(ctx, demb, dout, tok, n, d, V);
    e = rel_err(demb, dembr, (size_t)V * d);
    CHECK(e < TOL_F32, "embedding_backward_repeated_tokens", "rel_err %.3g", e);
    embedding_backward(ctx, demb2, dout, tok, n, d, V);
    CHECK(same_bits(demb, demb2, (size_t)V * d), "embedding_backward_deterministic",
          "runs differ");
    free(tok); free(emb); free(out); free(dout); free(demb0); free(demb); free(demb2);
    free(outr); free(dembr);
}

// ---- RMSNorm -----------------------------------------------------------------------

static const float EPS = 1e-6f;

static void ref_rmsnorm_fwd(double *y, double *rstd, const double *x, const double *w,
                            int rows, int d) {
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * d;
        double ss = 0;
        for (int j = 0; j < d; j++) ss += xr[j] * xr[j];
        double rs = 1 / sqrt(ss / d + (double)EPS);
        if (rstd) rstd[r] = rs;
        for (int j = 0; j < d; j++) y[(size_t)r * d + j] = xr[j] * rs * w[j];
    }
}

// dx (overwritten), dw (accumulates), analytic in double
static void ref_rmsnorm_bwd(double *dx, double *dw, const double *dy, const double *x,
                            const double *w, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * d, *g = dy + (size_t)r * d;
        double ss = 0, dot = 0;
        for (int j = 0; j < d; j++) ss += xr[j] * xr[j], dot += g[j] * w[j] * xr[j];
        double rs = 1 / sqrt(ss / d + (double)EPS);
        for (int j = 0; j < d; j++) {
            dx[(size_t)r * d + j] = rs * w[j] * g[j] - rs * rs * rs * dot / d * xr[j];
            dw[j] += g[j] * xr[j] * rs;
        }
    }
}

typedef struct { double *x, *w, *r, *y; int rows, d; } RmsCtx;
static double rms_loss(void *p) {
    RmsCtx *c = p;
    ref_rmsnorm_fwd(c->y, NULL, c->x, c->w, c->rows, c->d);
    return dot_d(c->r, c->y, (size_t)c->rows * c->d);
}

static void test_rmsnorm_fd(void) {
    int rows = 3, d = 5;
    RmsCtx c = {drandn(rows * d, 1), drandn(d, 1), drandn(rows * d, 1), dnew(rows * d),
                rows, d};
    double *dx = dnew(rows * d), *dw = dnew(d), *gx = dnew(rows * d), *gw = dnew(d);
    ref_rmsnorm_bwd(dx, dw, c.r, c.x, c.w, rows, d);
    fd_grad(gx, c.x, rows * d, rms_loss, &c);
    fd_grad(gw, c.w, d, rms_loss, &c);
    double ex = rel_err_d(dx, gx, rows * d), ew = rel_err_d(dw, gw, d);
    CHECK(ex < TOL_FD && ew < TOL_FD, "rmsnorm_reference_vs_finite_diff", "dx %.3g dw %.3g",
          ex, ew);
    free(c.x); free(c.w); free(c.r); free(c.y); free(dx); free(dw); free(gx); free(gw);
}

static void test_rmsnorm(int rows, int d) {
    char name[96];
    size_t n = (size_t)rows * d;
    float *x = frandn(n, 2), *w = frandn(d, 1), *dy = frandn(n, 1), *y = fnew(n);
    float *rstd = fnew(rows), *dx = fnew(n), *dw0 = frandn(d, 1), *dw = fcopy(dw0, d);
    float *dx2 = fnew(n), *dw2 = fcopy(dw0, d);
    for (int r = 0; r < rows; r += 7) // rows of very different scale
        for (int j = 0; j < d; j++) x[(size_t)r * d + j] *= 100.0f;
    double *xd = to_d(x, n), *wd = to_d(w, d), *dyd = to_d(dy, n);
    double *yr = dnew(n), *rstdr = dnew(rows), *dxr = dnew(n), *dwr = to_d(dw0, d);

    rmsnorm_forward(ctx, y, rstd, x, w, rows, d, EPS);
    ref_rmsnorm_fwd(yr, rstdr, xd, wd, rows, d);
    double ey = rel_err(y, yr, n), er = 0;
    for (int r = 0; r < rows; r++) { // per row: rstd spans orders of magnitude
        double e = fabs(rstd[r] - rstdr[r]) / rstdr[r];
        er = e > er ? e : er;
    }
    snprintf(name, sizeof name, "rmsnorm_forward_%dx%d", rows, d);
    CHECK(ey < TOL_F32 && er < TOL_F32, name, "y %.3g rstd %.3g", ey, er);

    fill_nan(dx, n);
    rmsnorm_backward(ctx, dx, dw, dy, x, w, rstd, rows, d);
    ref_rmsnorm_bwd(dxr, dwr, dyd, xd, wd, rows, d);
    // dx rows differ in scale by the rstd ratio (100×): compare per row
    double ex = 0;
    for (int r = 0; r < rows; r++) {
        double e = rel_err(dx + (size_t)r * d, dxr + (size_t)r * d, d);
        ex = e > ex ? e : ex;
    }
    double ew = rel_err(dw, dwr, d);
    snprintf(name, sizeof name, "rmsnorm_backward_%dx%d", rows, d);
    CHECK(ex < TOL_F32 && ew < TOL_F32, name, "dx %.3g dw %.3g", ex, ew);

    rmsnorm_backward(ctx, dx2, dw2, dy, x, w, rstd, rows, d);
    snprintf(name, sizeof name, "rmsnorm_backward_deterministic_%dx%d", rows, d);
    CHECK(same_bits(dx, dx2, n) && same_bits(dw, dw2, d), name, "runs differ");
    free(x); free(w); free(dy); free(y); free(rstd); free(dx); free(dw0); free(dw);
    free(dx2); free(dw2); free(xd); free(wd); free(dyd); free(yr); free(rstdr); free(dxr);
    free(dwr);
}

// ---- RoPE --------------------------------------------------------------------------

static const double THETA = 10000.0;

// x [B, T, nh, hd] -> y, rotated by sg·angle(pos0 + t, j), angles in double
static void ref_rope(double *y, const double *x, int B, int T, int nh, int hd, int pos0,
                     double sg) {
    int half = hd / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                size_t o = (((size_t)b * T + t) * nh + h) * hd;
                for (int j = 0; j < half; j++) {
                    double a = sg * (pos0 + t) * pow(THETA, -2.0 * j / hd);
                    double x1 = x[o + j], x2 = x[o + j + half];
                    y[o + j] = x1 * cos(a) - x2 * sin(a);
                    y[o + j + half] = x2 * cos(a) + x1 * sin(a);
                }
            }
}

typedef struct { double *x, *r, *y; int T, hd, pos0; } RopeCtx;
static double rope_loss(void *p) {
    RopeCtx *c = p;
    ref_rope(c->y, c->x, 1, c->T, 2, c->hd, c->pos0, 1);
    return dot_d(c->r, c->y, (size_t)c->T * 2 * c->hd);
}

static void test_rope_fd(void) {
    int T = 3, hd = 6, n = T * 2 * hd;
    RopeCtx c = {drandn(n, 1), drandn(n, 1), dnew(n), T, hd, 5};
    double *g = dnew(n), *dx = dnew(n);
    ref_rope(dx, c.r, 1, T, 2, hd, c.pos0, -1); // the reference backward
    fd_grad(g, c.x, n, rope_loss, &c);
    double e = rel_err_d(dx, g, n);
    CHECK(e < TOL_FD, "rope_reference_vs_finite_diff", "rel_err %.3g", e);
    free(c.x); free(c.r); free(c.y); free(g); free(dx);
}

static void test_rope(int B, int T, int nh, int hd, int pos0) {
    char name[96];
    int max_pos = 300, half = hd / 2;
    size_t n = (size_t)B * T * nh * hd;
    float *ct = fnew((size_t)max_pos * half), *st = fnew((size_t)max_pos * half);
    rope_table(ctx, ct, st, max_pos, hd, (float)THETA);
    double *ctr = dnew((size_t)max_pos * half), *str = dnew((size_t)max_pos * half);
    for (int p = 0; p < max_pos; p++)
        for (int j = 0; j < half; j++) {
            double a = p * pow(THETA, -2.0 * j / hd);
            ctr[(size_t)p * half + j] = cos(a), str[(size_t)p * half + j] = sin(a);
        }
    double ec = rel_err(ct, ctr, (size_t)max_pos * half);
    double es = rel_err(st, str, (size_t)max_pos * half);
    snprintf(name, sizeof name, "rope_table_hd%d", hd);
    // table entries are doubles rounded to float: half an ulp, ~6e-8
    CHECK(ec < 1e-7 && es < 1e-7, name, "cos %.3g sin %.3g", ec, es);

    float *x = frandn(n, 1), *y = fcopy(x, n);
    double *xd = to_d(x, n), *yr = dnew(n);
    rope_forward(ctx, y, B, T, nh, hd, pos0, ct, st);
    ref_rope(yr, xd, B, T, nh, hd, pos0, 1);
    double e = rel_err(y, yr, n);
    snprintf(name, sizeof name, "rope_forward_B%d_T%d_nh%d_hd%d_pos%d", B, T, nh, hd, pos0);
    CHECK(e < TOL_F32, name, "rel_err %.3g", e);

    float *dx = fcopy(x, n), *dx2 = fcopy(x, n); // x doubles as the incoming gradient
    rope_backward(ctx, dx, B, T, nh, hd, pos0, ct, st);
    ref_rope(yr, xd, B, T, nh, hd, pos0, -1);
    e = rel_err(dx, yr, n);
    snprintf(name, sizeof name, "rope_backward_B%d_T%d_nh%d_hd%d_pos%d", B, T, nh, hd, pos0);
    CHECK(e < TOL_F32, name, "rel_err %.3g", e);
    rope_backward(ctx, dx2, B, T, nh, hd, pos0, ct, st);
    snprintf(name, sizeof name, "rope_backward_deterministic_hd%d", hd);
    CHECK(same_bits(dx, dx2, n), name, "runs differ");

    // backward ∘ forward = identity (orthogonal rotation); two float
    // rotations: a few ulp
    rope_backward(ctx, y, B, T, nh, hd, pos0, ct, st);
    e = rel_err(y, xd, n);
    snprintf(name, sizeof name, "rope_inverse_hd%d", hd);
    CHECK(e < 1e-6, name, "rel_err %.3g", e);

    // A block of rows starting at pos0 + t0 equals those rows of the full
    // run: same table entries, same arithmetic, so bit-identical.
    int t0 = T / 3, Tb = T - t0 - 1;
    float *full = fcopy(x, n), *blk = fnew((size_t)B * Tb * nh * hd);
    size_t row = (size_t)nh * hd;
    for (int b = 0; b < B; b++)
        memcpy(blk + (size_t)b * Tb * row, x + ((size_t)b * T + t0) * row, Tb * row * 4);
    rope_forward(ctx, full, B, T, nh, hd, pos0, ct, st);
    rope_forward(ctx, blk, B, Tb, nh, hd, pos0 + t0, ct, st);
    int same = 1;
    for (int b = 0; b < B; b++)
        same &= same_bits(blk + (size_t)b * Tb * row, full + ((size_t)b * T + t0) * row,
                          Tb * row);
    snprintf(name, sizeof name, "rope_pos0_block_hd%d", hd);
    CHECK(same, name, "block rows differ from the full-length rope");
    free(ct); free(st); free(ctr); free(str); free(x); free(y); free(xd); free(yr);
    free(dx); free(dx2); free(full); free(blk);
}

// ---- attention ---------------------------------------------------------------------

typedef struct { int B, T, nh, nkv, hd; } AttShape;

static size_t qi(AttShape s, int b, int t, int h) { // [B, T, nh, hd] row offset
    return (((size_t)b * s.T + t) * s.nh + h) * s.hd;
}
static size_t ki(AttShape s, int b, int t, int g) { // [B, T, nkv, hd] row offset
    return (((size_t)b * s.T + t) * s.nkv + g) * s.hd;
}

// -> y [B, T, nh, hd], P [B, nh, T, T] (upper triangle 0), double
static void ref_attn_fwd(double *y, double *P, const double *q, const double *k,
                         const double *v, AttShape s) {
    double scale = 1 / sqrt((double)s.hd);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.nh; h++) {
            int g = h / (s.nh / s.nkv);
            double *Pb = P + ((size_t)b * s.nh + h) * s.T * s.T;
            for (int i = 0; i < s.T; i++) {
                double *p = Pb + (size_t)i * s.T, m = -INFINITY, z = 0;
                for (int j = 0; j < s.T; j++) {
                    double a = 0;
                    for (int c = 0; c < s.hd; c++)
                        a += q[qi(s, b, i, h) + c] * k[ki(s, b, j, g) + c];
                    p[j] = j <= i ? a * scale : -INFINITY;
                    m = p[j] > m ? p[j] : m;
                }
                for (int j = 0; j < s.T; j++) z += p[j] = exp(p[j] - m);
                for (int j = 0; j < s.T; j++) p[j] /= z;
                for (int c = 0; c < s.hd; c++) {
                    double a = 0;
                    for (int j = 0; j <= i; j++) a += p[j] * v[ki(s, b, j, g) + c];
                    y[qi(s, b, i, h) + c] = a;
                }
            }
        }
}

// Analytic backward in double: dP = dY·Vᵀ, dS = P⊙(dP − rowsum(dP⊙P)),
// dQ = dS·K/√hd, dK = dSᵀ·Q/√hd, dV = Pᵀ·dY (dk, dv summed over the group).
static void ref_attn_bwd(double *dq, double *dk, double *dv, const double *dy,
                         const double *P, const double *q, const double *k,
                         const double *v, AttShape s) {
    double scale = 1 / sqrt((double)s.hd);
    size_t nk = (size_t)s.B * s.T * s.nkv * s.hd;
    memset(dk, 0, nk * sizeof(double));
    memset(dv, 0, nk * sizeof(double));
    double *dS = dnew(s.T);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.nh; h++) {
            int g = h / (s.nh / s.nkv);
            const double *Pb = P + ((size_t)b * s.nh + h) * s.T * s.T;
            for (int i = 0; i < s.T; i++) {
                const double *p = Pb + (size_t)i * s.T, *gy = dy + qi(s, b, i, h);
                double dot = 0;
                for (int j = 0; j < s.T; j++) {
                    double a = 0;
                    for (int c = 0; c < s.hd; c++) a += gy[c] * v[ki(s, b, j, g) + c];
                    dS[j] = a;
                    dot += a * p[j];
                }
                for (int j = 0; j < s.T; j++) dS[j] = p[j] * (dS[j] - dot);
                for (int c = 0; c < s.hd; c++) {
                    double a = 0;
                    for (int j = 0; j < s.T; j++) a += dS[j] * k[ki(s, b, j, g) + c];
                    dq[qi(s, b, i, h) + c] = a * scale;
                }
                for (int j = 0; j < s.T; j++)
                    for (int c = 0; c < s.hd; c++) {
                        dk[ki(s, b, j, g) + c] += dS[j] * q[qi(s, b, i, h) + c] * scale;
                        dv[ki(s, b, j, g) + c] += p[j] * gy[c];
                    }
            }
        }
    free(dS);
}

typedef struct { double *q, *k, *v, *r, *y, *P; AttShape s; } AttCtx;
static double att_loss(void *p) {
    AttCtx *c = p;
    ref_attn_fwd(c->y, c->P, c->q, c->k, c->v, c->s);
    return dot_d(c->r, c->y, (size_t)c->s.B * c->s.T * c->s.nh * c->s.hd);
}

static void test_attention_fd(void) {
    AttShape s = {2, 5, 4, 2, 4};
    size_t nq = (size_t)s.B * s.T * s.nh * s.hd, nk = (size_t)s.B * s.T * s.nkv * s.hd;
    AttCtx c = {drandn(nq, 1), drandn(nk, 1), drandn(nk, 1), drandn(nq, 1), dnew(nq),
                dnew((size_t)s.B * s.nh * s.T * s.T), s};
    double *dq = dnew(nq), *dk = dnew(nk), *dv = dnew(nk);
    double *gq = dnew(nq), *gk = dnew(nk), *gv = dnew(nk);
    att_loss(&c);
    ref_attn_bwd(dq, dk, dv, c.r, c.P, c.q, c.k, c.v, s);
    fd_grad(gq, c.q, nq, att_loss, &c);
    fd_grad(gk, c.k, nk, att_loss, &c);
    fd_grad(gv, c.v, nk, att_loss, &c);
    double eq = rel_err_d(dq, gq, nq), ek = rel_err_d(dk, gk, nk), ev = rel_err_d(dv, gv, nk);
    CHECK(eq < TOL_FD && ek < TOL_FD && ev < TOL_FD, "attention_reference_vs_finite_diff",
          "dq %.3g dk %.3g dv %.3g", eq, ek, ev);
    free(c.q); free(c.k); free(c.v); free(c.r); free(c.y); free(c.P);
    free(dq); free(dk); free(dv); free(gq); free(gk); free(gv);
}

static void test_attention(AttShape s) {
    char tag[64], name[128];
    snprintf(tag, sizeof tag, "B%d_T%d_nh%d_nkv%d_hd%d", s.B, s.T, s.nh, s.nkv, s.hd);
    size_t nq = (size_t)s.B * s.T * s.nh * s.hd, nk = (size_t)s.B * s.T * s.nkv * s.hd;
    size_t na = (size_t)s.B * s.nh * s.T * s.T;
    // q, k of scale 2: logits up to ~±20, so the softmax is far from uniform
    float *q = frandn(nq, 2), *k = frandn(nk, 2), *v = frandn(nk, 1), *dy = frandn(nq, 1);
    float *y = fnew(nq), *att = fnew(na), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    float *dq2 = fnew(nq), *dk2 = fnew(nk), *dv2 = fnew(nk);
    float *scr = fnew(attention_scratch_floats(s.B, s.T, s.nkv));
    double *qd = to_d(q, nq), *kd = to_d(k, nk), *vd = to_d(v, nk), *dyd = to_d(dy, nq);
    double *yr = dnew(nq), *Pr = dnew(na), *dqr = dnew(nq), *dkr = dnew(nk), *dvr = dnew(nk);

    fill_nan(y, nq); // outputs must be fully written
    fill_nan(att, na);
    attention_forward(ctx, y, att, q, k, v, s.B, s.T, s.nh, s.nkv, s.hd);
    ref_attn_fwd(yr, Pr, qd, kd, vd, s);
    double ey = rel_err(y, yr, nq), ea = rel_err(att, Pr, na);
    snprintf(name, sizeof name, "attention_forward_%s", tag);
    CHECK(ey < TOL_F32 && ea < TOL_F32, name, "y %.3g att %.3g", ey, ea);
    int upper_zero = 1;
    for (size_t bh = 0; bh < (size_t)s.B * s.nh; bh++)
        for (int i = 0; i < s.T; i++)
            for (int j = i + 1; j < s.T; j++) upper_zero &= att[(bh * s.T + i) * s.T + j] == 0;
    snprintf(name, sizeof name, "attention_upper_triangle_zero_%s", tag);
    CHECK(upper_zero, name, "att has non-zero entries above the diagonal");

    fill_nan(dq, nq); // overwritten, not accumulated; scratch needs no init
    fill_nan(dk, nk);
    fill_nan(dv, nk);
    fill_nan(scr, attention_scratch_floats(s.B, s.T, s.nkv));
    attention_backward(ctx, dq, dk, dv, scr, dy, att, q, k, v, s.B, s.T, s.nh, s.nkv, s.hd);
    ref_attn_bwd(dqr, dkr, dvr, dyd, Pr, qd, kd, vd, s);
    double eq = rel_err(dq, dqr, nq), ek = rel_err(dk, dkr, nk), ev = rel_err(dv, dvr, nk);
    snprintf(name, sizeof name, "attention_backward_%s", tag);
    CHECK(eq < TOL_F32 && ek < TOL_F32 && ev < TOL_F32, name, "dq %.3g dk %.3g dv %.3g", eq,
          ek, ev);

    attention_backward(ctx, dq2, dk2, dv2, scr, dy, att, q, k, v, s.B, s.T, s.nh, s.nkv, s.hd);
    snprintf(name, sizeof name, "attention_backward_deterministic_%s", tag);
    CHECK(same_bits(dq, dq2, nq) && same_bits(dk, dk2, nk) && same_bits(dv, dv2, nk), name,
          "runs differ");
    free(q); free(k); free(v); free(dy); free(y); free(att); free(dq); free(dk); free(dv);
    free(dq2); free(dk2); free(dv2); free(scr); free(qd); free(kd); free(vd); free(dyd);
    free(yr); free(Pr); free(dqr); free(dkr); free(dvr);
}

// ---- SwiGLU ------------------------------------------------------------------------

static double silu_d(double g) { return g / (1 + exp(-g)); }

// dgate, dup from dh, analytic in double
static void ref_swiglu_bwd(double *dg, double *du, const double *dh, const double *g,
                           const double *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double s = 1 / (1 + exp(-g[i]));
        dg[i] = dh[i] * u[i] * s * (1 + g[i] * (1 - s));
        du[i] = dh[i] * g[i] * s;
    }
}

typedef struct { double *g, *u, *r; size_t n; } SwiCtx;
static double swi_loss(void *p) {
    SwiCtx *c = p;
    double l = 0;
    for (size_t i = 0; i < c->n; i++) l += c->r[i] * silu_d(c->g[i]) * c->u[i];
    return l;
}

static void test_swiglu_fd(void) {
    size_t n = 9;
    SwiCtx c = {drandn(n, 3), drandn(n, 1), drandn(n, 1), n};
    double *dg = dnew(n), *du = dnew(n), *gg = dnew(n), *gu = dnew(n);
    ref_swiglu_bwd(dg, du, c.r, c.g, c.u, n);
    fd_grad(gg, c.g, n, swi_loss, &c);
    fd_grad(gu, c.u, n, swi_loss, &c);
    double eg = rel_err_d(dg, gg, n), eu = rel_err_d(du, gu, n);
    CHECK(eg < TOL_FD && eu < TOL_FD, "swiglu_reference_vs_finite_diff", "dgate %.3g dup %.3g",
          eg, eu);
    free(c.g); free(c.u); free(c.r); free(dg); free(du); free(gg); free(gu);
}

static void test_swiglu(size_t n) {
    char name[96];
    float *g = frandn(n, 4), *u = frandn(n, 1), *dh = frandn(n, 1), *h = fnew(n);
    float *dg = fnew(n), *du = fnew(n), *dg2 = fnew(n), *du2 = fnew(n);
    const float extreme[] = {-1000, -100, -88, -30, 0, 30, 88, 100, 1000};
    for (size_t i = 0; i < 9 && i < n; i++) g[i * (n / 9)] = extreme[i]; // saturated sigmoid
    double *gd = to_d(g, n), *ud = to_d(u, n), *dhd = to_d(dh, n);
    double *hr = dnew(n), *dgr = dnew(n), *dur = dnew(n);
    swiglu_forward(ctx, h, g, u, n);
    for (size_t i = 0; i < n; i++) hr[i] = silu_d(gd[i]) * ud[i];
    double e = rel_err(h, hr, n);
    snprintf(name, sizeof name, "swiglu_forward_n%zu", n);
    CHECK(e < TOL_F32 && all_finite(h, n), name, "rel_err %.3g", e);

    swiglu_backward(ctx, dg, du, dh, g, u, n);
    ref_swiglu_bwd(dgr, dur, dhd, gd, ud, n);
    double eg = rel_err(dg, dgr, n), eu = rel_err(du, dur, n);
    snprintf(name, sizeof name, "swiglu_backward_n%zu", n);
    CHECK(eg < TOL_F32 && eu < TOL_F32 && all_finite(dg, n), name, "dgate %.3g dup %.3g", eg,
          eu);
    swiglu_backward(ctx, dg2, du2, dh, g, u, n);
    snprintf(name, sizeof name, "swiglu_backward_deterministic_n%zu", n);
    CHECK(same_bits(dg, dg2, n) && same_bits(du, du2, n), name, "runs differ");
    free(g); free(u); free(dh); free(h); free(dg); free(du); free(dg2); free(du2);
    free(gd); free(ud); free(dhd); free(hr); free(dgr); free(dur);
}

// ---- cross-entropy -------------------------------------------------------------------

// losses [n] and, if dl, dl = (softmax − onehot)·scale, in double
static double ref_xent(double *loss, double *dl, const double *x, const int *tg, int n,
                       int V, double scale) {
    double total = 0;
    for (int i = 0; i < n; i++) {
        const double *r = x + (size_t)i * V;
        double m = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) m = r[j] > m ? r[j] : m;
        for (int j = 0; j < V; j++) z += exp(r[j] - m);
        loss[i] = log(z) + m - r[tg[i]];
        total += loss[i];
        if (dl)
            for (int j = 0; j < V; j++)
                dl[(size_t)i * V + j] = (exp(r[j] - m) / z - (j == tg[i])) * scale;
    }
    return total;
}

typedef struct { double *x, *loss; int *tg; int n, V; double scale; } XentCtx;
static double xent_loss(void *p) {
    XentCtx *c = p;
    return c->scale * ref_xent(c->loss, NULL, c->x, c->tg, c->n, c->V, 1);
}

static void test_xent_fd(void) {
    int n = 3, V = 7;
    XentCtx c = {drandn(n * V, 2), dnew(n), inew(n), n, V, 0.25};
    for (int i = 0; i < n; i++) c.tg[i] = (int)rng_below(&rng, V);
    double *dl = dnew(n * V), *g = dnew(n * V);
    ref_xent(c.loss, dl, c.x, c.tg, n, V, c.scale);
    fd_grad(g, c.x, n * V, xent_loss, &c);
    double e = rel_err_d(dl, g, n * V);
    CHECK(e < TOL_FD, "xent_reference_vs_finite_diff", "rel_err %.3g", e);
    free(c.x); free(c.loss); free(c.tg); free(dl); free(g);
}

// logits ~ N(0, sd²), or uniform in [-80, 80] when big
static void test_xent(int n, int V, int big) {
    char name[96], tag[48];
    snprintf(tag, sizeof tag, "%s%dx%d", big ? "large_logits_" : "", n, V);
    size_t nv = (size_t)n * V;
    float *x = big ? fnew(nv) : frandn(nv, 3), *loss = fnew(n), *dl = fnew(nv);
    int *tg = inew(n);
    if (big)
        for (size_t i = 0; i < nv; i++) x[i] = 160 * rng_uniform(&rng) - 80;
    for (int i = 0; i < n; i++) tg[i] = (int)rng_below(&rng, V);
    if (big) x[tg[0]] = -80, x[(size_t)V + tg[1]] = 80; // a hopeless and a confident row
    float scale = 1.0f / n;
    double *xd = to_d(x, nv), *lr = dnew(n), *dlr = dnew(nv);
    double totr = ref_xent(lr, dlr, xd, tg, n, V, scale);

    double tot = xent_forward(ctx, loss, x, tg, n, V);
    double el = rel_err(loss, lr, n), et = fabs(tot - totr) / fabs(totr);
    snprintf(name, sizeof name, "xent_forward_%s", tag);
    CHECK(el < TOL_F32 && et < TOL_F32 && all_finite(loss, n), name, "losses %.3g sum %.3g",
          el, et);

    xent_backward(ctx, dl, x, tg, n, V, scale);
    double ed = rel_err(dl, dlr, nv);
    snprintf(name, sizeof name, "xent_backward_%s", tag);
    CHECK(ed < TOL_F32 && all_finite(dl, nv), name, "rel_err %.3g", ed);

    float *dl2 = fnew(nv), *inplace = fcopy(x, nv);
    xent_backward(ctx, dl2, x, tg, n, V, scale);
    snprintf(name, sizeof name, "xent_backward_deterministic_%s", tag);
    CHECK(same_bits(dl, dl2, nv), name, "runs differ");
    xent_backward(ctx, inplace, inplace, tg, n, V, scale); // dlogits aliases logits
    snprintf(name, sizeof name, "xent_backward_in_place_%s", tag);
    CHECK(same_bits(dl, inplace, nv), name, "in-place result differs");
    free(x); free(loss); free(dl); free(tg); free(xd); free(lr); free(dlr); free(dl2);
    free(inplace);
}

// ---- vector helpers --------------------------------------------------------------------

static void test_vec(size_t n) {
    char name[96];
    float *a = frandn(n, 1), *b = frandn(n, 1), *o = fnew(n);
    double *r = dnew(n);
    vec_add(ctx, o, a, b, n);
    for (size_t i = 0; i < n; i++) r[i] = (double)a[i] + b[i];
    // one float rounding per element: ≤ 6e-8 relative
    double e1 = rel_err(o, r, n);
    memcpy(o, a, n * sizeof(float));
    vec_acc(ctx, o, b, n);
    double e2 = rel_err(o, r, n);
    memcpy(o, a, n * sizeof(float));
    vec_scale_acc(ctx, o, b, -0.37f, n);
    for (size_t i = 0; i < n; i++) r[i] = (double)a[i] + (double)-0.37f * b[i];
    double e3 = rel_err(o, r, n);
    memcpy(o, a, n * sizeof(float));
    vec_add(ctx, o, o, b, n); // out aliasing an input
    for (size_t i = 0; i < n; i++) r[i] = (double)a[i] + b[i];
    double e4 = rel_err(o, r, n);
    snprintf(name, sizeof name, "vec_add_acc_scale_acc_n%zu", n);
    CHECK(e1 < 1e-7 && e2 < 1e-7 && e3 < 1e-7 && e4 < 1e-7, name,
          "add %.3g acc %.3g scale_acc %.3g add_alias %.3g", e1, e2, e3, e4);
    free(a); free(b); free(o); free(r);
}

int main(void) {
    ctx = ops_open();
    if (!ctx) return 1;
    rng_seed(&rng, 1234);
    test_matmul(37, 53, 29);
    test_matmul(257, 130, 67);
    test_matmul(1, 7, 1);
    test_embedding();
    test_rmsnorm_fd();
    test_rmsnorm(37, 67);
    test_rmsnorm(1023, 256);
    test_rmsnorm(501, 64);
    test_rope_fd();
    test_rope(2, 13, 3, 32, 0);
    test_rope(3, 29, 2, 64, 17);
    test_attention_fd();
    test_attention((AttShape){2, 37, 4, 2, 32});
    test_attention((AttShape){2, 130, 2, 2, 64});
    test_attention((AttShape){1, 71, 4, 1, 32});
    test_attention((AttShape){3, 67, 4, 4, 64});
    test_swiglu_fd();
    test_swiglu(100003);
    test_swiglu(13);
    test_xent_fd();
    test_xent(37, 1001, 0);
    test_xent(13, 1001, 1);
    test_vec(100003);
    test_vec(5);
    CHECK_EXIT();
}
