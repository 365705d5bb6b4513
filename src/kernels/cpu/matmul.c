// Linear-layer matmuls on OpenBLAS. Layout as in PyTorch: W is [N, K] and
// out = in · Wᵀ. Called outside parallel regions, so OpenBLAS uses its own
// threads; sgemm does not split K, so results are deterministic for a fixed
// thread count.
#include <cblas.h>
#include <string.h>

#include "kernels/ops.h"
#include "context.h"

// OpenBLAS applies beta = 0 in a pass of its own over C before the product,
// which costs more than zeroing C here on every thread: micro's logits
// (4096 × 8192) take 82-88 ms with beta 0 and 73-75 ms zeroed here and
// accumulated with beta 1 (2 threads, AVX-512). The sums are the same: the
// kernel adds the product to C either way. Small outputs stay with beta 0,
// where the pass costs nothing measurable.
enum { ZERO_HERE_MIN = 1 << 21, ZERO_CHUNK = 1 << 14 };  // floats

// C [M, N] (row stride N) = alpha · op(A) · op(B), as cblas_sgemm with beta 0.
static void sgemm_overwrite(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda,
                            const float *B, int ldb, float *C) {
    const size_t n = (size_t)M * N;
    float beta = 0.0f;
    if (n >= ZERO_HERE_MIN) {
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < (n + ZERO_CHUNK - 1) / ZERO_CHUNK; c++) {
            const size_t lo = c * ZERO_CHUNK, len = n - lo < ZERO_CHUNK ? n - lo : ZERO_CHUNK;
            memset(C + lo, 0, sizeof(float) * len);
        }
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, N);
}

// in [M, K], w [N, K] -> out [M, N] (overwritten)
void matmul_forward(OpsContext *ctx, float *out, const float *in, const float *w, int M, int K, int N) {
    OPS_TIMED(ctx);
    if (M <= 0 || N <= 0) return;
    ops_op_flops(ctx, 2.0 * M * N * (K > 0 ? K : 0));
    if (K <= 0) { // empty sum; BLAS would reject ld = 0
        memset(out, 0, sizeof(float) * (size_t)M * (size_t)N);
        return;
    }
    sgemm_overwrite(CblasNoTrans, CblasTrans, M, N, K, in, K, w, K, out);
}

// The backward's two products, each 2·M·N·K, as far as it computes them.
static void count_backward(OpsContext *ctx, const float *din, const float *dw, int M, int K, int N) {
    if (N > 0) ops_op_flops(ctx, 2.0 * M * N * K * ((din != NULL) + (dw != NULL)));
}

// dw [N, K] += doutᵀ · in
static void weight_grad(float *dw, const float *dout, const float *in, int M, int K, int N) {
    if (dw && N > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, in, K, 1.0f, dw, K);
}

// dout [M, N], in [M, K], w [N, K] -> din [M, K] = dout · W (overwritten,
// skipped if NULL), dw [N, K] += doutᵀ · in (accumulates)
void matmul_backward(OpsContext *ctx, float *din, float *dw, const float *dout, const float *in,
                     const float *w, int M, int K, int N) {
    OPS_TIMED(ctx);
    if (M <= 0 || K <= 0) return;
    count_backward(ctx, din, dw, M, K, N);
    if (din) {
        if (N <= 0) memset(din, 0, sizeof(float) * (size_t)M * (size_t)K);
        else
            sgemm_overwrite(CblasNoTrans, CblasNoTrans, M, K, N, dout, N, w, K, din);
    }
    weight_grad(dw, dout, in, M, K, N);
}

// As matmul_backward, with din [M, K] += dout · W (beta 1: the GEMM adds its
// product to din as it would to zeros, so no separate pass over din).
void matmul_backward_add(OpsContext *ctx, float *din, float *dw, const float *dout, const float *in,
                         const float *w, int M, int K, int N) {
    OPS_TIMED(ctx);
    if (M <= 0 || K <= 0) return;
    count_backward(ctx, din, dw, M, K, N);
    if (din && N > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N, w, K, 1.0f, din, K);
    weight_grad(dw, dout, in, M, K, N);
}
