// Register-blocked small products (tile_gemm.h). Compiled with
// -ffp-contract=fast (Makefile): the inner step is one fused multiply-add.
//
// C is covered by blocks of MR rows and two vectors of columns. A block's
// accumulators stay in registers over all k: per p, two vector loads of B's
// row p and MR broadcasts of A's column p feed 2·MR multiply-adds. Blocks go
// column panel by column panel, so B's panel (k rows, two vectors wide)
// stays in L1 while every row block of A passes over it.
#include "kernels/cpu/tile_gemm.h"

// One vector: 16 floats where the machine has 512-bit registers (32 of
// them), else 8 (16 registers): 2·MR accumulators, two of B and one
// broadcast fit either way.
#ifdef __AVX512F__
#define VW 16
#define SPLAT(x) ((vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})
#else
#define VW 8
#define SPLAT(x) ((vf){x, x, x, x, x, x, x, x})
#endif
enum { MR = 6 };
typedef float vf __attribute__((vector_size(VW * sizeof(float))));
typedef float vfu __attribute__((vector_size(VW * sizeof(float)), aligned(4), may_alias));
#define LOADV(p) (*(const vfu *)(p))
#define STOREV(p, x) (*(vfu *)(p) = (x))
// SPLAT(x): x in every lane, x a plain variable. A list, not a loop over the
// lanes (gcc built a chain of inserts) nor 0 + x (an addition, which −0
// forbids dropping); a macro, not a function returning a vector, whose ABI
// changes between builds with and without AVX (the sanitizer and valgrind
// builds have no -march=native; gcc and clang warn, -Werror).

// The block of rows [0, mr) and columns [0, nv·VW) of C (nv 1 or 2); B
// points at the block's first column. mr and nv are constants in each
// inlined copy, so that the accumulators are registers.
static inline __attribute__((always_inline)) void block(int mr, int nv, int k, float alpha, const float *restrict A,
                                                        size_t a_row, size_t a_col, const float *restrict B,
                                                        size_t ldb, int accumulate, float *restrict C, size_t ldc) {
    vf acc[MR][2];
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = (vf){0};
    for (int p = 0; p < k; p++) {
        vf b[2];
        for (int v = 0; v < nv; v++) b[v] = LOADV(B + (size_t)p * ldb + v * VW);
        const float *a = A + (size_t)p * a_col;
        for (int i = 0; i < mr; i++) {
            const float ax = a[(size_t)i * a_row];
            const vf ai = SPLAT(ax);
            for (int v = 0; v < nv; v++) acc[i][v] += ai * b[v];
        }
    }
    const vf al = SPLAT(alpha);
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++) {
            float *c = C + (size_t)i * ldc + v * VW;
            const vf r = al * acc[i][v];
            if (accumulate) STOREV(c, LOADV(c) + r);
            else STOREV(c, r);
        }
}

#define ROW_BLOCKS(NV)                                                                                          \
    static void row_blocks_##NV(int m, int k, float alpha, const float *A, size_t a_row, size_t a_col,         \
                                const float *B, size_t ldb, int accumulate, float *C, size_t ldc) {           \
        int i0 = 0;                                                                                             \
        for (; i0 + MR <= m; i0 += MR)                                                                          \
            block(MR, NV, k, alpha, A + (size_t)i0 * a_row, a_row, a_col, B, ldb, accumulate,                   \
                  C + (size_t)i0 * ldc, ldc);                                                                   \
        const float *a = A + (size_t)i0 * a_row;                                                                \
        float *c = C + (size_t)i0 * ldc;                                                                        \
        switch (m - i0) {                                                                                       \
        case 5: block(5, NV, k, alpha, a, a_row, a_col, B, ldb, accumulate, c, ldc); break;                     \
        case 4: block(4, NV, k, alpha, a, a_row, a_col, B, ldb, accumulate, c, ldc); break;                     \
        case 3: block(3, NV, k, alpha, a, a_row, a_col, B, ldb, accumulate, c, ldc); break;                     \
        case 2: block(2, NV, k, alpha, a, a_row, a_col, B, ldb, accumulate, c, ldc); break;                     \
        case 1: block(1, NV, k, alpha, a, a_row, a_col, B, ldb, accumulate, c, ldc); break;                     \
        default: break;                                                                                         \
        }                                                                                                       \
    }
ROW_BLOCKS(1)
ROW_BLOCKS(2)
#undef ROW_BLOCKS

// B's panels are copied into one contiguous block first: in place, rows of
// V or dY lie 512 B or 1 KiB apart (a power of two), so a panel's k rows
// fall into a few L1 sets (micro's attention forward, both threads: 9.1-9.3
// ms a layer read in place, 8.5-8.9 copied, OpenBLAS 9.5-11.2).
// k runs in chunks of KC rows; a later chunk adds its alpha-scaled sum to C.
enum { KC = 256 };

#define PANEL(NV)                                                                                          \
    static void panel_##NV(int m, int k, float alpha, const float *A, size_t a_row, size_t a_col,         \
                           const float *B, size_t ldb, int accumulate, float *C, size_t ldc) {           \
        _Alignas(64) float bp[KC * NV * VW];                                                               \
        for (int p0 = 0; p0 < k; p0 += KC) {                                                               \
            const int kc = k - p0 < KC ? k - p0 : KC;                                                      \
            for (int p = 0; p < kc; p++)                                                                   \
                for (int v = 0; v < NV; v++)                                                               \
                    STOREV(bp + (size_t)(p * NV + v) * VW, LOADV(B + (size_t)(p0 + p) * ldb + v * VW));    \
            row_blocks_##NV(m, kc, alpha, A + (size_t)p0 * a_col, a_row, a_col, bp, NV * VW,              \
                            accumulate || p0, C, ldc);                                                     \
        }                                                                                                  \
    }
PANEL(1)
PANEL(2)
#undef PANEL

void tile_gemm(int m, int n, int k, float alpha, const float *A, size_t a_row, size_t a_col, const float *B,
               size_t ldb, int accumulate, float *C, size_t ldc) {
    int j0 = 0;
    for (; j0 + 2 * VW <= n; j0 += 2 * VW) panel_2(m, k, alpha, A, a_row, a_col, B + j0, ldb, accumulate, C + j0, ldc);
    if (j0 + VW <= n) panel_1(m, k, alpha, A, a_row, a_col, B + j0, ldb, accumulate, C + j0, ldc), j0 += VW;
    // Fewer than VW columns left (a head width or a key count off the
    // vector width): element by element, in the same order.
    for (int i = 0; i < m; i++)
        for (int j = j0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s += A[(size_t)i * a_row + (size_t)p * a_col] * B[(size_t)p * ldb + j];
            float *c = C + (size_t)i * ldc + j;
            *c = accumulate ? *c + alpha * s : alpha * s;
        }
}
