// DenseFormer's depth-weighted average (SPEC §2.6) and its backward.
#include <string.h>

#include "kernels/ops.h"
#include "context.h"

enum {
    NCHUNK = 64,     // fixed token chunks of the dα reduction
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

// Explicit 8-lane vectors with a fixed final tree (as in route_impl.h):
// plain float sums do not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));
// Unaligned loads through a macro: a function returning v8 by value trips
// clang's -Wpsabi without -mavx.
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static float dot_row(const float *a, const float *b, int d) {
    v8 s = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) s += load8(a + k) * load8(b + k);
    float t = 0;  // tail, d % 8 values
    for (; k < d; k++) t += a[k] * b[k];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])) + t;
}

static void axpy_row(float *restrict y, float a, const float *restrict x, int d) {
    for (int k = 0; k < d; k++) y[k] += a * x[k];
}

static void add_row(float *restrict y, const float *restrict a, const float *restrict b, int d) {
    for (int k = 0; k < d; k++) y[k] = a[k] + b[k];
}

static void scale_row(float *restrict y, float a, const float *restrict x, int d) {
    for (int k = 0; k < d; k++) y[k] = a * x[k];
}

// y = Σ_{j<count} alpha[j] X_j, token by token
void dwa_average(OpsContext *ctx, float *y, const float *X, size_t x_stride, const float *alpha, int count,
                 int n_tok, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static) if ((size_t)n_tok * d >= PAR_MIN)
    for (int t = 0; t < n_tok; t++) {
        const size_t off = (size_t)t * d;
        scale_row(y + off, alpha[0], X + off, d);
        for (int j = 1; j < count; j++) axpy_row(y + off, alpha[j], X + (size_t)j * x_stride + off, d);
    }
}

// A gy row [round16(d)] per chunk, then the dα partials [NCHUNK][count] doubles.
size_t dwa_scratch_floats(int d, int count) {
    return NCHUNK * round16((size_t)d) + round16((size_t)2 * NCHUNK * count);
}

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// gy = dnext + dx per token (reused from L1 for every j); dX_j += α_j gy,
// dα_j += ⟨gy, X_j⟩ summed per chunk in double, then chunks in order.
void dwa_backward(OpsContext *ctx, float *dX, size_t dx_stride, float *dalpha, float *scratch, const float *dnext,
                  const float *dx, const float *X, size_t x_stride, const float *alpha, int count, int n_tok,
                  int d) {
    OPS_TIMED(ctx);
    (void)ctx;
    double *parts = (double *)(scratch + NCHUNK * round16((size_t)d));
#pragma omp parallel for schedule(static) if ((size_t)n_tok * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double *acc = parts + (size_t)c * count;
        float *gy = scratch + (size_t)c * round16((size_t)d);
        for (int j = 0; j < count; j++) acc[j] = 0;
        for (size_t t = chunk_start(c, n_tok); t < chunk_start(c + 1, n_tok); t++) {
            const size_t off = t * d;
            const float *g = dx + off;
            if (dnext) {
                add_row(gy, dnext + off, dx + off, d);
                g = gy;
            }
            for (int j = 0; j < count; j++) {
                acc[j] += dot_row(g, X + (size_t)j * x_stride + off, d);
                axpy_row(dX + (size_t)j * dx_stride + off, alpha[j], g, d);
            }
        }
    }
    for (int j = 0; j < count; j++) {
        double s = 0;
        for (int c = 0; c < NCHUNK; c++) s += parts[(size_t)c * count + j];
        dalpha[j] += (float)s;
    }
}
