// RMSNorm: y = x · rsqrt(mean(x²) + eps) ⊙ w, rows in parallel.
#include <math.h>
#include <omp.h>

#include "kernels/ops.h"
#include "context.h"

// Sum of squares of one row. `omp simd` lets gcc vectorise the float
// reduction without -ffast-math; the lane order is fixed, so it is
// deterministic. Float is accurate enough for d ≤ 4096 (~1e-6 relative).
static inline float row_sumsq(const float *restrict x, int d) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < d; j++) s += x[j] * x[j];
    return s;
}

// in [rows, d], w [d] -> out [rows, d], rstd [rows]
void rmsnorm_forward(OpsContext *ctx, float *restrict out, float *restrict rstd, const float *restrict in,
                     const float *restrict w, int rows, int d, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *x = in + (size_t)r * d;
        float *y = out + (size_t)r * d;
        float rs = (float)(1.0 / sqrt((double)(row_sumsq(x, d) / (float)d) + (double)eps));
        rstd[r] = rs;
        for (int j = 0; j < d; j++) y[j] = x[j] * rs * w[j];
    }
}

// Columns handled per task in the dw reduction: wide enough to keep loads
// contiguous (a multiple of 16 floats), bounded so the accumulator fits the
// stack, and split so every thread gets work when d is small (q/k norm).
enum { DW_TILE_MAX = 256 };
static int dw_tile(int d) {
    int per = (d + omp_get_max_threads() - 1) / omp_get_max_threads();
    per = (per + 15) / 16 * 16;
    return per < 16 ? 16 : per > DW_TILE_MAX ? DW_TILE_MAX : per;
}

// dw[j] += Σ_r dout[r,j]·in[r,j]·rstd[r]. Each column is summed by one
// thread, over rows in order, in double: deterministic for any thread count.
static void rmsnorm_dw(float *restrict dw, const float *restrict dout,
                       const float *restrict in, const float *restrict rstd, int rows,
                       int d) {
    int tile = dw_tile(d), ntiles = (d + tile - 1) / tile;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < ntiles; t++) {
        int j0 = t * tile, nj = d - j0 < tile ? d - j0 : tile;
        double acc[DW_TILE_MAX] = {0};
        for (int r = 0; r < rows; r++) {
            const float *dy = dout + (size_t)r * d + j0, *x = in + (size_t)r * d + j0;
            float rs = rstd[r];
            for (int j = 0; j < nj; j++) acc[j] += (double)(dy[j] * x[j] * rs);
        }
        for (int j = 0; j < nj; j++) dw[j0 + j] += (float)acc[j];
    }
}

// dout [rows, d], in [rows, d], w [d], rstd [rows] -> din [rows, d]
// (overwritten), dw [d] (accumulates). With y = x·r·w and r = rstd:
// dx = r·w⊙dy − (r³/d)·⟨dy⊙w, x⟩·x.
void rmsnorm_backward(OpsContext *ctx, float *restrict din, float *restrict dw, const float *restrict dout,
                      const float *restrict in, const float *restrict w,
                      const float *restrict rstd, int rows, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *x = in + (size_t)r * d, *dy = dout + (size_t)r * d;
        float *dx = din + (size_t)r * d;
        float dot = 0.0f, rs = rstd[r];
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < d; j++) dot += dy[j] * w[j] * x[j];
        float c = rs * rs * rs * dot / (float)d;
        for (int j = 0; j < d; j++) dx[j] = rs * w[j] * dy[j] - c * x[j];
    }
    if (dw) rmsnorm_dw(dw, dout, in, rstd, rows, d);
}
