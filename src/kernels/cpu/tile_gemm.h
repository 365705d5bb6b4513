// The small products of attention's tiles (attention.c), register-blocked.
// At attention's shapes (64 × 128 × 64 and the like, one call per tile and
// thread, inside a parallel region) OpenBLAS's sgemm ran the baseline's
// attention at 40-45% (forward) and 45-53% (backward) of the sgemm probe on
// a Zen 3 with AVX2; these, at 48-52% and 50-65% (README, "thirty-first
// session: attention's tile products"), with the left operand read in
// place and the right one's column panels copied into a contiguous block.
#pragma once
#include <stddef.h>

// Column counts that are a multiple of this run in whole vectors (the rest
// element by element).
#ifdef __AVX512F__
#define TILE_GEMM_COLS 16
#else
#define TILE_GEMM_COLS 8
#endif

// C [m, n] (row stride ldc) = alpha · Σ_p A(i, p) B[p, :]  (+ C when
// accumulate), B [k, n] row-major with row stride ldb, A's element (i, p)
// at A[i·a_row + p·a_col]: a row-major A [m, k] is (lda, 1), the transpose of
// a row-major [k, m] is (1, lda). Each element of C sums its k terms in
// order p = 0, 1, ..., one fused multiply-add each, then scales by alpha
// (for k > 256, per run of 256 terms, each run's scaled sum added to C).
void tile_gemm(int m, int n, int k, float alpha, const float *A, size_t a_row, size_t a_col, const float *B,
               size_t ldb, int accumulate, float *C, size_t ldc);
