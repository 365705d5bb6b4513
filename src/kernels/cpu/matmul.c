// Linear-layer matmuls on OpenBLAS. Layout as in PyTorch: W is [N, K] and
// out = in · Wᵀ. Called outside parallel regions, so OpenBLAS uses its own
// threads; sgemm does not split K, so results are deterministic for a fixed
// thread count.
#include <cblas.h>
#include <string.h>

#include "kernels/ops.h"
#include "context.h"

// in [M, K], w [N, K] -> out [M, N] (overwritten)
void matmul_forward(OpsContext *ctx, float *out, const float *in, const float *w, int M, int K, int N) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { // empty sum; BLAS would reject ld = 0
        memset(out, 0, sizeof(float) * (size_t)M * (size_t)N);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, in, K, w, K,
                0.0f, out, N);
}

// dout [M, N], in [M, K], w [N, K] -> din [M, K] = dout · W (overwritten,
// skipped if NULL), dw [N, K] += doutᵀ · in (accumulates)
void matmul_backward(OpsContext *ctx, float *din, float *dw, const float *dout, const float *in,
                     const float *w, int M, int K, int N) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (M <= 0 || K <= 0) return;
    if (din) {
        if (N <= 0) memset(din, 0, sizeof(float) * (size_t)M * (size_t)K);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N,
                        w, K, 0.0f, din, K);
    }
    if (dw && N > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, in,
                    K, 1.0f, dw, K);
}
