// Static hyper-connections (SPEC §2.5): the 4-stream mixing of residual/hc.c.
// The scheme costs memory traffic, not FLOPs, so each op is one pass over
// the tokens that does everything the pass can (see residual/hc.c for the
// algebra). Parameter dots are summed per token in float (fixed-lane
// vectors), per fixed token chunk in double, then over chunks in order:
// deterministic for any thread count, no atomics.
#include <string.h>

#include "kernels/ops.h"
#include "context.h"

enum {
    NS = 4,          // streams
    NCHUNK = 64,     // fixed token chunks of the parameter-gradient reductions
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

// Explicit 8-lane vectors with a fixed final tree (as in route_impl.h):
// plain float sums do not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));
// Unaligned loads through a macro: a function returning v8 by value trips
// clang's -Wpsabi without -mavx.
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static inline float hsum8(const v8 *v) {
    return (((*v)[0] + (*v)[4]) + ((*v)[2] + (*v)[6])) + (((*v)[1] + (*v)[5]) + ((*v)[3] + (*v)[7]));
}

static inline const float *stream(HcStreams H, int i) { return H.base + (size_t)i * H.stride; }

// x [n] = Σ_i p_i H_i
void hc_read(OpsContext *ctx, float *restrict x, HcStreams H, const float p[4], size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    const float *restrict h0 = stream(H, 0), *restrict h1 = stream(H, 1);
    const float *restrict h2 = stream(H, 2), *restrict h3 = stream(H, 3);
    const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) x[k] = p0 * h0[k] + p1 * h1[k] + p2 * h2[k] + p3 * h3[k];
}

// new_j = Σ_i A[j, i] H_i + β_j o, and x_next = Σ_j p_j new_j from the same registers.
void hc_write(OpsContext *ctx, float *out, size_t out_stride, float *restrict x_next, HcStreams H,
              const float *restrict o, const float A_in[16], const float beta[4], const float p_in[4], size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    float A[NS * NS], b[NS], p[NS];  // by value: the loop provably does not alias them
    memcpy(A, A_in, sizeof A);
    memcpy(b, beta, sizeof b);
    memcpy(p, p_in, sizeof p);
    const float *restrict h0 = stream(H, 0), *restrict h1 = stream(H, 1);
    const float *restrict h2 = stream(H, 2), *restrict h3 = stream(H, 3);
    float *restrict n0 = out, *restrict n1 = out + out_stride;
    float *restrict n2 = out + 2 * out_stride, *restrict n3 = out + 3 * out_stride;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) {
        const float a0 = h0[k], a1 = h1[k], a2 = h2[k], a3 = h3[k], ok = o[k];
        const float y0 = A[0] * a0 + A[1] * a1 + A[2] * a2 + A[3] * a3 + b[0] * ok;
        const float y1 = A[4] * a0 + A[5] * a1 + A[6] * a2 + A[7] * a3 + b[1] * ok;
        const float y2 = A[8] * a0 + A[9] * a1 + A[10] * a2 + A[11] * a3 + b[2] * ok;
        const float y3 = A[12] * a0 + A[13] * a1 + A[14] * a2 + A[15] * a3 + b[3] * ok;
        n0[k] = y0; n1[k] = y1; n2[k] = y2; n3[k] = y3;
        x_next[k] = p[0] * y0 + p[1] * y1 + p[2] * y2 + p[3] * y3;
    }
}

// ---- backward ----------------------------------------------------------------------

// Coefficients by value, so the row loops provably do not alias them.
typedef struct { float A[NS * NS], b[NS], p[NS]; } HcCoef;

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

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// Per chunk, 25 sums: S[l][i] = ⟨a_l, b_i⟩ for a = G_0..G_3, dx and
// b = H_0..H_3, o (rows 0..3 stay 0 when fresh); then the row update.
void hc_backward(OpsContext *ctx, double S[25], float *G, size_t g_stride, float *dout, const float *dx,
                 HcStreams H, const float *o, const float A[16], const float beta[4], const float p[4],
                 int fresh, int n_tok, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
    HcCoef cf;
    memcpy(cf.A, A, sizeof cf.A);
    memcpy(cf.b, beta, sizeof cf.b);
    memcpy(cf.p, p, sizeof cf.p);
    const float *b[5] = {stream(H, 0), stream(H, 1), stream(H, 2), stream(H, 3), o};
    float *g[NS];
    for (int i = 0; i < NS; i++) g[i] = G + (size_t)i * g_stride;
    double part[NCHUNK][25];
    const int n = n_tok;
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
    for (int q = 0; q < 25; q++) {  // chunks in order, in double
        double s = 0;
        for (int c = 0; c < NCHUNK; c++) s += part[c][q];
        S[q] = s;
    }
}

// demb += Σ_r (G_r + p_r dx)
void hc_first_read_backward(OpsContext *ctx, float *restrict demb, const float *G, size_t g_stride,
                            const float *restrict dx, const float p[4], size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    const float *restrict g0 = G, *restrict g1 = G + g_stride;
    const float *restrict g2 = G + 2 * g_stride, *restrict g3 = G + 3 * g_stride;
    const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t k = 0; k < n; k++) {
        const float x = dx[k];
        demb[k] += (g0[k] + p0 * x) + (g1[k] + p1 * x) + (g2[k] + p2 * x) + (g3[k] + p3 * x);
    }
}
