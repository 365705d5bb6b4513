// Shared by route_forward.c and route_backward.c (the fused routing kernel
// of SPEC §5, Route(S, q, g, H) of SPEC §2.2): the per-call arguments, the
// width reductions and memory helpers.
//
// Per token t, for sources S_n [d] (n < N), heads h owning the contiguous
// slice [h·hw, (h+1)·hw) of width hw = d/H:
//   ρ_n     = rsqrt(mean_k S_{n,k}² + eps)            (full width)
//   ℓ_{n,h} = ρ_n · Σ_{k∈h} q_k g_k S_{n,k}             (= ⟨q_h, K_{n,h}⟩)
//   w_{n,h} = softmax_n ℓ_{n,h},   x_k = Σ_n w_{n,h(k)} S_{n,k}
// Both passes walk tiles of tokens (route_tile_tokens), split over OpenMP
// threads with a static schedule, and use the key weight qg = q ⊙ g,
// computed once per call into the scratch.
#pragma once
#include "kernels/ops.h"
#include "kernels/cpu/context.h"
#include "kernels/cpu/vmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

enum {
    HEAD_CHUNK = 64, // forward keeps per-head max/normaliser on the stack
    PAD = 16,        // per-thread scratch slices start on 64-byte boundaries
};

#define INLINE static inline __attribute__((always_inline))

// Runs CALL(HW) with HW a literal for the common head widths: the per-token
// code is always inlined, so those copies get fixed trip counts and fully
// unrolled slice loops (measured ~20% faster than a runtime width).
#define DISPATCH_HW(hw, CALL)        \
    switch (hw) {                    \
    case 8: CALL(8); break;          \
    case 16: CALL(16); break;        \
    case 32: CALL(32); break;        \
    case 64: CALL(64); break;        \
    case 128: CALL(128); break;      \
    default: CALL(hw); break;        \
    }

// What every token needs. w is read by backward; forward writes its own.
typedef struct {
    RouteSources S;          // [N] rows of [n_tok, d]
    RouteGrads dS;           // their gradients; backward only
    const float *qg;         // [d] key weight q ⊙ g
    const float *dx;         // [n_tok, d]; backward only
    const float *w;          // [N, n_tok, H]; backward only
    int n_src, n_tok, d, H;
    int set_dsrc;            // backward: write dsrc rows instead of adding to them
    float eps;
} Args;

// Tiles of tokens. Within a tile each pass walks the sources one at a time,
// each over all the tile's tokens: one contiguous run of tile·d floats per
// source (and per source gradient), which the hardware prefetches as one
// stream, where walking token by token reads N rows from N streams
// (measured on a 2-core AMD EPYC: a bare read of micro's 17 sources ran at
// 19-22 GB/s row by row, 25-32 GB/s in runs of 64 rows, 26-37 GB/s as one
// stream). A tile's source rows stay in L2 for the pass that reads them
// again, and one of the passes (the forward's first, the backward's second)
// fetches the next tile's into L2 beside them:
// TILE_BYTES of rows, a quarter of a 1 MiB L2 (15 tokens for micro's 17
// sources × d 256). Over the model's 17 reads (tools/route_ab.sh -- 8 40
// 4096 1), against token by token: tiles of 512 KiB without the fetch ahead
// 0.79 forward, 0.79 backward; the fetch ahead with 256 KiB tiles 0.89-0.92
// of that forward (0.94 with 512 KiB), 0.90-0.91 backward (the same at 512);
// the backward's dS rows fetched during its first pass, 0.87-0.90 of that.
enum { TILE_BYTES = 256 << 10, TILE_MIN = 4, TILE_MAX = 64 };

static inline int route_tile_tokens(int n_src, int d) {
    const size_t fit = TILE_BYTES / ((size_t)n_src * d * sizeof(float));
    return fit < TILE_MIN ? TILE_MIN : fit > TILE_MAX ? TILE_MAX : (int)fit;
}

// An upper bound on n_src · route_tile_tokens(n_src, d) over every call
// with at most n_src sources (fewer sources get longer tiles).
static inline size_t route_tile_rows_bound(int n_src, int d) {
    const size_t a = TILE_BYTES / ((size_t)d * sizeof(float)), b = (size_t)n_src * TILE_MIN;
    return a > b ? a : b;
}

// Fetch the row [d] at p into L2 (prefetcht2 on x86: into L1 it evicted the
// tile being read, 1.3x the time), to be written (`write`) or only read.
static inline void prefetch_row_l2(const float *p, int d, int write) {
    for (int k = 0; k < d; k += 16) // one 64-byte line each
        if (write) __builtin_prefetch(p + k, 1, 1);
        else __builtin_prefetch(p + k, 0, 1);
}

// Source n's row of token t, and its gradient row.
INLINE const float *src_row(const Args *A, int n, int t) {
    const float *row = A->S.tail && n == A->n_src - 1 ? A->S.tail : A->S.base + (size_t)n * A->S.stride;
    return row + (size_t)t * A->d;
}
INLINE float *dsrc_row(const Args *A, int n, int t) {
    float *row = A->dS.tail && n == A->n_src - 1 ? A->dS.tail : A->dS.base + (size_t)n * A->dS.stride;
    return row + (size_t)t * A->d;
}

// ---- width reductions --------------------------------------------------------------
// Explicit 8-lane vectors (GNU C vector extensions, gcc and clang): plain C
// float sums must stay in order and do not vectorise without -ffast-math, and
// "omp simd reduction" makes gcc 12 end every sum with a serial chain of
// scalar adds, which dominated the short per-head dots. Lanes and the final
// tree are fixed by the code, so results do not depend on addresses.
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
// Unaligned loads through a may_alias type; vectors never pass by value
// between functions (that would depend on the target's vector ABI).
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define LOAD8(p) (*(const v8u *)(p))
#define STORE8(p, x) (*(v8u *)(p) = (x))

INLINE float hsum8(const v8 *v) {
    v4 lo, hi;
    memcpy(&lo, v, sizeof lo);
    memcpy(&hi, (const char *)v + sizeof lo, sizeof hi);
    const v4 a = lo + hi;
    return (a[0] + a[2]) + (a[1] + a[3]);
}

// Sums over a row use four independent accumulators, 32 floats a step (then
// 8 at a time into the first): a single one makes every row a chain of d/8
// dependent FMAs. Lane use and the final tree are fixed by the code, so
// results do not depend on addresses.
INLINE float hsum4(const v8 acc[4]) {
    const v8 t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    return hsum8(&t);
}

// Σ s² over a row [n].
INLINE float row_sumsq(const float *restrict s, int n) {
    v8 ss[4] = {{0}, {0}, {0}, {0}};
    int k = 0;
    for (; k + 32 <= n; k += 32)
        for (int j = 0; j < 4; j++) {
            const v8 x = LOAD8(s + k + 8 * j);
            ss[j] += x * x;
        }
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        ss[0] += x * x;
    }
    float ts = 0;
    for (; k < n; k++) ts += s[k] * s[k];
    return hsum4(ss) + ts;
}

// Σ qg s over a head slice [n]; adds s² into the lanes ss[4] (the n % 8
// tail into *ts).
INLINE float slice_stats(const float *restrict s, const float *restrict qg, int n, v8 ss[4],
                         float *ts) {
    v8 qs[4] = {{0}, {0}, {0}, {0}};
    int k = 0;
    for (; k + 32 <= n; k += 32)
        for (int j = 0; j < 4; j++) {
            const v8 x = LOAD8(s + k + 8 * j);
            ss[j] += x * x;
            qs[j] += LOAD8(qg + k + 8 * j) * x;
        }
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        ss[0] += x * x;
        qs[0] += LOAD8(qg + k) * x;
    }
    float tq = 0;
    for (; k < n; k++) *ts += s[k] * s[k], tq += qg[k] * s[k];
    return hsum4(qs) + tq;
}

// Σ qg s over a head slice [n], and *dxs = Σ dx s.
INLINE float slice_dot2(const float *restrict s, const float *restrict qg,
                        const float *restrict dx, int n, float *dxs) {
    v8 qs[4] = {{0}, {0}, {0}, {0}}, ds[4] = {{0}, {0}, {0}, {0}};
    int k = 0;
    for (; k + 32 <= n; k += 32)
        for (int j = 0; j < 4; j++) {
            const v8 x = LOAD8(s + k + 8 * j);
            qs[j] += LOAD8(qg + k + 8 * j) * x;
            ds[j] += LOAD8(dx + k + 8 * j) * x;
        }
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        qs[0] += LOAD8(qg + k) * x;
        ds[0] += LOAD8(dx + k) * x;
    }
    float tq = 0, td = 0;
    for (; k < n; k++) tq += qg[k] * s[k], td += dx[k] * s[k];
    *dxs = hsum4(ds) + td;
    return hsum4(qs) + tq;
}

// The horizontal sums of eight vectors at once: out[i] = Σ_lanes v[i], by a
// fixed tree of pairwise lane shuffles (14 shuffles and 7 adds for all
// eight, against about 12 instructions each summed one by one; the
// backward's per-head dot products at head width 32 spent as long on their
// sums as on the products).
INLINE void hsum8x8(float *restrict out, const v8 v[8]) {
#define EVEN(a, b) __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14)
#define ODD(a, b) __builtin_shufflevector(a, b, 1, 9, 3, 11, 5, 13, 7, 15)
    // Pairs: lane 2i holds v_a's lanes (2i, 2i+1) summed, lane 2i+1 v_b's.
    const v8 p01 = EVEN(v[0], v[1]) + ODD(v[0], v[1]), p23 = EVEN(v[2], v[3]) + ODD(v[2], v[3]);
    const v8 p45 = EVEN(v[4], v[5]) + ODD(v[4], v[5]), p67 = EVEN(v[6], v[7]) + ODD(v[6], v[7]);
#undef EVEN
#undef ODD
    // Quads: lanes (0-3 | 4-7) hold v0..v3's sums of lanes (0-3 | 4-7).
    const v8 q0 = __builtin_shufflevector(p01, p23, 0, 1, 8, 9, 4, 5, 12, 13) +
                  __builtin_shufflevector(p01, p23, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8 q1 = __builtin_shufflevector(p45, p67, 0, 1, 8, 9, 4, 5, 12, 13) +
                  __builtin_shufflevector(p45, p67, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8 r = __builtin_shufflevector(q0, q1, 0, 1, 2, 3, 8, 9, 10, 11) +
                 __builtin_shufflevector(q0, q1, 4, 5, 6, 7, 12, 13, 14, 15);
    memcpy(out, &r, sizeof r);
}

INLINE float rms_inv(float ss, int d, float eps) { return 1.0f / sqrtf(ss / (float)d + eps); }

// The scratch starts with qg [d] (padded); route_backward's per-thread
// partials follow.
static inline size_t qg_floats(int d) { return ((size_t)d + PAD - 1) / PAD * PAD; }

// qg [d] = q ⊙ g into the head of the scratch.
static inline const float *key_weight(float *scratch, const float *q, const float *g, int d) {
    for (int k = 0; k < d; k++) scratch[k] = q[k] * g[k];
    return scratch;
}

// out [H] = Σ_{k∈h} a_k b_k over the head slices of rows a, b [H·hw]: eight
// heads at a time through hsum8x8 when hw is a multiple of 8 (the route
// kernels' common widths), two accumulators within a slice (even and odd
// vectors). route_gather's dots sum exactly so: its ⟨dx, S⟩ must cancel
// route_dx_keep's ⟨dx, x⟩ where one source has all the weight.
INLINE void head_dots(float *restrict out, const float *restrict a, const float *restrict b, int H, int hw) {
    if (hw % 8 == 0) {
        for (int h0 = 0; h0 < H; h0 += 8) {
            const int hc = H - h0 < 8 ? H - h0 : 8;
            v8 v[8];
            for (int i = 0; i < hc; i++) {
                const float *x = a + (size_t)(h0 + i) * hw, *y = b + (size_t)(h0 + i) * hw;
                v8 acc[2] = {{0}, {0}};
                int k = 0;
                for (; k + 16 <= hw; k += 16) {
                    acc[0] += LOAD8(x + k) * LOAD8(y + k);
                    acc[1] += LOAD8(x + k + 8) * LOAD8(y + k + 8);
                }
                if (k < hw) acc[0] += LOAD8(x + k) * LOAD8(y + k);
                v[i] = acc[0] + acc[1];
            }
            if (hc == 8) hsum8x8(out + h0, v);
            else
                for (int i = 0; i < hc; i++) out[h0 + i] = hsum8(&v[i]);
        }
        return;
    }
    for (int h = 0; h < H; h++) {
        const float *x = a + (size_t)h * hw, *y = b + (size_t)h * hw;
        float s = 0;
        for (int k = 0; k < hw; k++) s += x[k] * y[k];
        out[h] = s;
    }
}

// Coordinate k of dq and dg from the per-thread partials z (thread i's at
// part + i·per): z_k summed in fixed thread order, dq_k += g_k z_k,
// dg_k += q_k z_k (as qg = q ⊙ g).
INLINE void add_key_grads(float *dq, float *dg, const float *q, const float *g, const float *part, size_t per,
                          int nthr, int k) {
    float zk = 0;
    for (int i = 0; i < nthr; i++) zk += part[(size_t)i * per + k];
    dq[k] += g[k] * zk;
    dg[k] += q[k] * zk;
}

// The by-source kernels' scratch (route_source.c): the readers' key weights
// (route_keys: transposed or reordered), then per thread route_keys'
// products or reordered row, or route_gather's dq/dg partials and a tile's
// u; route_scratch_floats covers it.
size_t route_source_scratch_floats(int n_rd, int d, int H);
