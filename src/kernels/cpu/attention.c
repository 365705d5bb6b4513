// Grouped-query causal attention without T×T storage (flash-style).
// The forward runs an online softmax over key tiles: per query row a running
// max and normaliser, the output rescaled when the max grows; it saves only
// y and each row's log-sum-exp. The backward recomputes every tile's
// probabilities from q, k and that lse. Memory is linear in T: per thread
// one kv head's kᵀ (and vᵀ for the backward) and a few ATT_BQ × ATT_BK
// tiles, and, when the (batch, kv head) groups do not share out evenly over
// the threads, per-split dk/dv partials.
// Tiles above the diagonal are skipped, diagonal ones masked per row. Every
// product is a tile_gemm on a tile (tile_gemm.h: register blocks; these
// were cblas_sgemm calls until 2026-12-07, 0.8-0.9x the time now on a Zen 3
// with AVX2, README). Each task
// transposes its kv head's k and v once, so that every product reads its
// right operand along rows (A·B or Aᵀ·B, never A·Bᵀ). One parallel region a
// pass (no separate transposing pass): on a busy machine every extra fork
// and join waits for the slowest thread.
#include <math.h>
#include <string.h>

#include "kernels/ops.h"
#include "context.h"
#include "vmath.h"
#include "tile_gemm.h"

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

// Query rows × keys of a tile, chosen by measurement with OpenBLAS's
// products (README, "Attention without T×T storage"): against 64 × 64 the
// wider key tile repacked each query tile fewer times (backward 0.6x the
// time at 100m's T 512 on its Haswell kernels); 128 query rows were slower.
// ATT_LD: the row stride of tiles and of kt's blocks, padded off a power of
// two (rows 1 KiB apart would fall into a few cache sets).
enum { ATT_BQ = 64, ATT_BK = 128, ATT_LD = ATT_BK + 16, ATT_TB = 16 };

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline size_t round16(size_t n) { return (n + 15) / 16 * 16; }

// Keys of the tile [j0, j0 + nk) that query token t sees (keys ≤ t).
static inline int causal_cols(int t, int j0, int nk) {
    int n = t - j0 + 1;
    return n < 0 ? 0 : imin(n, nk);
}

// max(m, p[0..nv)), nv whole vectors: per-lane maxima, then a fixed tree
// (a reduction clause left gcc an in-order scalar tail per row).
static inline float row_max16(const float *restrict p, int nv, float m) {
    float lane[16];
    for (int e = 0; e < 16; e++) lane[e] = m;
    for (int c = 0; c < nv; c += 16)
#pragma omp simd
        for (int e = 0; e < 16; e++) lane[e] = p[c + e] > lane[e] ? p[c + e] : lane[e];
    for (int w = 8; w >= 1; w /= 2)
        for (int e = 0; e < w; e++) lane[e] = lane[e + w] > lane[e] ? lane[e + w] : lane[e];
    return lane[0];
}

// p[c] = exp(p[c] − mx) over nv whole vectors; returns their sum: per-lane
// sums, then a fixed tree.
static inline float exp_sum16(float *restrict p, int nv, float mx) {
    float lane[16] = {0};
    for (int c = 0; c < nv; c += 16)
#pragma omp simd
        for (int e = 0; e < 16; e++) {
            p[c + e] = vexp(p[c + e] - mx);
            lane[e] += p[c + e];
        }
    for (int w = 8; w >= 1; w /= 2)
        for (int e = 0; e < w; e++) lane[e] += lane[e + w];
    return lane[0];
}

// ---- the scratch --------------------------------------------------------------------

// Splits of one (batch, kv head) group's query tiles: 1 when the groups
// share out evenly over the threads, else enough for 4 tasks a thread,
// which the dynamic schedule then balances (3 groups on 2 threads would
// leave a quarter of the machine idle). In the backward each split sums
// into its own dk/dv partials, added afterwards in split order.
static int group_splits(int groups, int n_tiles) {
    const int threads = omp_get_max_threads();
    const int s = groups % threads == 0 ? 1 : (4 * threads + groups - 1) / groups;
    return imin(s, n_tiles);
}

// First query tile of split s of n: tile t costs ∝ t + 1 (the keys it
// sees), so tiles [0, t) cost ∝ t²: equal shares end at n_tiles·sqrt(s/n).
static int split_begin(int s, int n, int n_tiles) { return (int)lround(n_tiles * sqrt((double)s / n)); }

// Floats of one group's k or v transposed: whole key tiles, each [hd,
// ATT_BK] in a block of its own at row stride ATT_LD (the stride T, often a
// power of two, would map a tile's rows onto a few cache sets).
static size_t kt_floats(int T, int hd) { return (size_t)((T + ATT_BK - 1) / ATT_BK) * hd * ATT_LD; }

// Per thread: kt, vt (as kt_floats), then forward S [ATT_BQ, ATT_BK] and
// the row max and sum [ATT_BQ] each, or backward P, dS [ATT_BQ, ATT_BK] and
// D [ATT_BQ] (tile rows ATT_LD apart); each part rounded to 64 bytes.
static size_t thread_floats(int T, int hd) {
    return 2 * round16(kt_floats(T, hd)) + round16((size_t)2 * ATT_BQ * ATT_LD + 2 * ATT_BQ);
}

typedef struct {
    float *kt, *vt, *tile;  // this thread's
} ThreadScratch;

static ThreadScratch thread_scratch(float *scratch, int T, int hd) {
    float *kt = scratch + (size_t)omp_get_thread_num() * thread_floats(T, hd);
    float *vt = kt + round16(kt_floats(T, hd));
    return (ThreadScratch){kt, vt, vt + round16(kt_floats(T, hd))};
}

// Sized for omp_get_max_threads() threads: call it under the thread count
// attention_forward and attention_backward will run with. After the
// threads' parts: the backward's partials [B·nkv, splits, 2, T, hd] when
// there is more than one split.
size_t attention_scratch_floats(OpsContext *ctx, int B, int T, int nkv, int hd) {
    (void)ctx;
    const int splits = group_splits(B * nkv, (T + ATT_BQ - 1) / ATT_BQ);
    const size_t partials = splits > 1 ? (size_t)B * nkv * splits * 2 * T * hd : 0;
    return (size_t)omp_get_max_threads() * thread_floats(T, hd) + partials;
}

// dst [n, m] (row stride ldd) = srcᵀ, src [m, n] (row stride lds), by
// ATT_TB-square blocks: row by row, each destination row would be written
// one float per cache line.
static void transpose(float *restrict dst, int ldd, const float *restrict src, int lds, int m, int n) {
    for (int r0 = 0; r0 < m; r0 += ATT_TB)
        for (int c0 = 0; c0 < n; c0 += ATT_TB) {
            const int r1 = imin(m, r0 + ATT_TB), c1 = imin(n, c0 + ATT_TB);
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
        }
}

// xt [key tiles, hd, ATT_LD] = keys [0, n) of x [T, hd] (row stride ld), by
// key tile (the columns past n of the last tile are left alone).
static void transpose_keys(float *xt, const float *x, int ld, int n, int hd) {
    for (int j0 = 0; j0 < n; j0 += ATT_BK)
        transpose(xt + (size_t)j0 / ATT_BK * hd * ATT_LD, ATT_LD, x + (size_t)j0 * ld, ld, imin(ATT_BK, n - j0), hd);
}

// One product over the causal (query, key) pairs of every head: 2·hd
// operations a pair, T(T+1)/2 pairs a sequence; what the masked halves of
// the diagonal tiles also compute is not counted (the profile's rate is
// that of the useful work).
static double causal_pair_flops(int B, int T, int nh, int hd) {
    return 2.0 * hd * ((double)T * (T + 1) / 2) * B * nh;
}

// ---- forward ------------------------------------------------------------------------

// One query tile of one head, tokens [i0, i0 + mq): Q, Y [mq, hd] (row
// stride ldq); Kt as kt holds one group, V [T, hd] (stride ldk) -> Y, lse [mq].
// tile: the thread's tiles (ThreadScratch).
static void forward_tile(float *Y, float *lse, float *tile, const float *Q, const float *Kt, const float *V, int i0,
                         int mq, int hd, int ldq, int ldk, float scale) {
    float *S = tile, *m = S + ATT_BQ * ATT_LD, *l = m + ATT_BQ;
    const int i1 = i0 + mq;
    for (int j0 = 0; j0 < i1; j0 += ATT_BK) {
        const int nk = imin(ATT_BK, i1 - j0);
        // S [mq, nk] = scale · Q · K[j0 : j0 + nk]ᵀ
        tile_gemm(mq, nk, hd, scale, Q, ldq, 1, Kt + (size_t)j0 / ATT_BK * hd * ATT_LD, ATT_LD, 0, S, ATT_LD);
        for (int a = 0; a < mq; a++) {
            float *restrict p = S + (size_t)a * ATT_LD;
            const int n = causal_cols(i0 + a, j0, nk), nv = (int)round16((size_t)n);  // n >= 1: key 0 is seen by all
            // Up to whole 16-float vectors (≤ ATT_LD: a tile row has room), so
            // that no column runs the scalar remainder
            // of the loops (a third of the forward's time at T 256 went to
            // the diagonal tiles' remainders): the columns past n hold −∞ for
            // the max, whose exp (the clamped ~1.6e-38) changes no sum ≥ 1,
            // and are zeroed after.
            for (int c = n; c < nv; c++) p[c] = -INFINITY;
            const float mx = row_max16(p, nv, j0 ? m[a] : -INFINITY);
            const float s = exp_sum16(p, nv, mx);
            memset(p + n, 0, sizeof(float) * (size_t)(nk - n));  // masked: exactly 0
            if (j0 && mx != m[a]) {  // the max grew: rescale what is summed so far
                const float alpha = vexp(m[a] - mx);
                float *restrict yr = Y + (size_t)a * ldq;
                for (int e = 0; e < hd; e++) yr[e] *= alpha;
                l[a] *= alpha;
            }
            l[a] = j0 ? l[a] + s : s;
            m[a] = mx;
        }
        // Y (+)= P · V[j0 : j0 + nk]
        tile_gemm(mq, hd, nk, 1.0f, S, ATT_LD, 1, V + (size_t)j0 * ldk, ldk, j0 > 0, Y, ldq);
    }
    for (int a = 0; a < mq; a++) {
        const float inv = 1.0f / l[a];
        float *restrict yr = Y + (size_t)a * ldq;
        for (int e = 0; e < hd; e++) yr[e] *= inv;
        lse[a] = m[a] + logf(l[a]);
    }
}

// q [B, T, nh, hd], k, v [B, T, nkv, hd] -> y [B, T, nh, hd], lse [B, nh, T].
// One task per (batch, kv head) group, or per split of its query tiles: it
// transposes the keys its queries see, then runs each query tile for the
// group's query heads in turn, which share the k/v tiles while they are in
// cache. A query tile's result depends on nothing but the inputs.
void attention_forward(OpsContext *ctx, float *y, float *lse, float *scratch, const float *q, const float *k,
                       const float *v, int B, int T, int nh, int nkv, int hd) {
    OPS_TIMED(ctx);
    const int rep = nh / nkv, ldq = nh * hd, ldk = nkv * hd, groups = B * nkv;
    const int n_tiles = (T + ATT_BQ - 1) / ATT_BQ, splits = group_splits(groups, n_tiles);
    const float scale = 1.0f / sqrtf((float)hd);
    ops_op_flops(ctx, 2 * causal_pair_flops(B, T, nh, hd));   // S = Q·Kᵀ, Y = P·V
#pragma omp parallel for schedule(dynamic)
    for (int task = 0; task < groups * splits; task++) {
        const int bg = task / splits, s = task % splits, b = bg / nkv, g = bg % nkv;
        const int qt0 = split_begin(s, splits, n_tiles), qt1 = split_begin(s + 1, splits, n_tiles);
        const size_t ko = (size_t)b * T * ldk + (size_t)g * hd;
        const ThreadScratch ts = thread_scratch(scratch, T, hd);
        transpose_keys(ts.kt, k + ko, ldk, imin(T, qt1 * ATT_BQ), hd);
        for (int qt = qt0; qt < qt1; qt++) {
            const int i0 = qt * ATT_BQ, mq = imin(ATT_BQ, T - i0);
            for (int r = 0; r < rep; r++) {
                const int h = g * rep + r;
                const size_t qo = ((size_t)b * T + i0) * ldq + (size_t)h * hd;
                forward_tile(y + qo, lse + ((size_t)b * nh + h) * T + i0, ts.tile, q + qo, ts.kt, v + ko, i0, mq,
                             hd, ldq, ldk, scale);
            }
        }
    }
}

// ---- backward -----------------------------------------------------------------------

// One query tile of one query head, tokens [i0, i0 + mq), against keys
// [0, i0 + mq): dY, Y, Q [mq, hd] (stride ldq), lse [mq]; K (stride ldk),
// Kt, Vt as kt, vt hold one group -> dQ [mq, hd] (stride ldq, overwritten); dK,
// dV (stride ldd) accumulate. tile: the thread's tiles (ThreadScratch).
static void backward_tile(float *dQ, float *dK, float *dV, int ldd, float *tile, const float *dY, const float *Y,
                          const float *lse, const float *Q, const float *K, const float *Kt, const float *Vt,
                          int i0, int mq, int hd, int ldq, int ldk, float scale) {
    float *P = tile, *dS = P + ATT_BQ * ATT_LD, *D = dS + ATT_BQ * ATT_LD;
    // D_a = ⟨dy_a, y_a⟩ = Σ_c P_ac dP_ac: the softmax gradient's row term
    for (int a = 0; a < mq; a++) {
        const float *restrict dy = dY + (size_t)a * ldq, *restrict yr = Y + (size_t)a * ldq;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int e = 0; e < hd; e++) s += dy[e] * yr[e];
        D[a] = s;
    }
    const int i1 = i0 + mq;
    for (int j0 = 0; j0 < i1; j0 += ATT_BK) {
        const int nk = imin(ATT_BK, i1 - j0);
        // S = scale · Q · K[j0:]ᵀ into P; dP = dY · V[j0:]ᵀ into dS (both [mq, nk])
        const size_t blk = (size_t)j0 / ATT_BK * hd * ATT_LD;  // key tile j0's block of kt, vt
        tile_gemm(mq, nk, hd, scale, Q, ldq, 1, Kt + blk, ATT_LD, 0, P, ATT_LD);
        tile_gemm(mq, nk, hd, 1.0f, dY, ldq, 1, Vt + blk, ATT_LD, 0, dS, ATT_LD);
        for (int a = 0; a < mq; a++) {
            float *restrict p = P + (size_t)a * ATT_LD, *restrict ds = dS + (size_t)a * ATT_LD;
            const int n = causal_cols(i0 + a, j0, nk), nv = (int)round16((size_t)n);
            const float L = lse[a], Da = D[a];
            // Whole vectors, as in the forward: the columns past n give
            // p = exp(0) = 1 and dS = 1·(D − D) = 0 (no tiny p that would
            // make dS subnormal); both are zeroed after, to the tile's end.
            for (int c = n; c < nv; c++) p[c] = L, ds[c] = Da;
#pragma omp simd
            for (int c = 0; c < nv; c++) {
                p[c] = vexp(p[c] - L);           // P = exp(S − lse)
                ds[c] = p[c] * (ds[c] - Da);     // dS = P ⊙ (dP − D)
            }
            memset(p + n, 0, sizeof(float) * (size_t)(nk - n));
            memset(ds + n, 0, sizeof(float) * (size_t)(nk - n));
        }
        // Token 0 sees one key: its softmax is the constant 1 and its dS is
        // exactly 0, but dP and D, the same dot summed in two orders, would
        // leave rounding noise (dq and dk of T = 1 must be 0, not 1e-8).
        if (i0 == 0 && j0 == 0) dS[0] = 0.0f;
        // dV[j0:] += Pᵀ · dY; dK[j0:] += scale · dSᵀ · Q; dQ (+)= scale · dS · K[j0:]
        tile_gemm(nk, hd, mq, 1.0f, P, 1, ATT_LD, dY, ldq, 1, dV + (size_t)j0 * ldd, ldd);
        tile_gemm(nk, hd, mq, scale, dS, 1, ATT_LD, Q, ldq, 1, dK + (size_t)j0 * ldd, ldd);
        tile_gemm(mq, hd, nk, scale, dS, ATT_LD, 1, K + (size_t)j0 * ldk, ldk, j0 > 0, dQ, ldq);
    }
}

// x: n rows of hd floats at stride ld -> 0
static void zero_rows(float *x, int n, int hd, int ld) {
    for (int t = 0; t < n; t++) memset(x + (size_t)t * ld, 0, sizeof(float) * (size_t)hd);
}

// dy [B, T, nh, hd] -> dq [B, T, nh, hd], dk, dv [B, T, nkv, hd] (all overwritten).
// One task per (batch, kv head, split): it owns dq of the group's query
// heads for its query tiles and sums dk/dv over them in a fixed order (head,
// query tile, key tile), into dk/dv directly when there is one split, else
// into its partials, which are then added in split order. No atomics.
void attention_backward(OpsContext *ctx, float *dq, float *dk, float *dv, float *scratch, const float *dy,
                        const float *y, const float *lse, const float *q, const float *k, const float *v, int B,
                        int T, int nh, int nkv, int hd) {
    OPS_TIMED(ctx);
    const int rep = nh / nkv, ldq = nh * hd, ldk = nkv * hd, groups = B * nkv;
    const int n_tiles = (T + ATT_BQ - 1) / ATT_BQ;
    const float scale = 1.0f / sqrtf((float)hd);
    const int splits = group_splits(groups, n_tiles);
    ops_op_flops(ctx, 5 * causal_pair_flops(B, T, nh, hd));   // S and dP again, dV, dK, dQ
    float *partials = scratch + (size_t)omp_get_max_threads() * thread_floats(T, hd);
    const size_t part_floats = (size_t)T * hd;  // one of dk, dv of one split
#pragma omp parallel for schedule(dynamic)
    for (int task = 0; task < groups * splits; task++) {
        const int bg = task / splits, s = task % splits, b = bg / nkv, g = bg % nkv;
        const int qt0 = split_begin(s, splits, n_tiles), qt1 = split_begin(s + 1, splits, n_tiles);
        const int keys = imin(T, qt1 * ATT_BQ);  // the keys this split's queries see
        const size_t ko = (size_t)b * T * ldk + (size_t)g * hd;
        const ThreadScratch ts = thread_scratch(scratch, T, hd);
        transpose_keys(ts.kt, k + ko, ldk, keys, hd);
        transpose_keys(ts.vt, v + ko, ldk, keys, hd);
        float *dK = dk + ko, *dV = dv + ko;
        int ldd = ldk;
        if (splits > 1) dK = partials + 2 * part_floats * task, dV = dK + part_floats, ldd = hd;
        zero_rows(dK, keys, hd, ldd);
        zero_rows(dV, keys, hd, ldd);
        for (int r = 0; r < rep; r++) {
            const int h = g * rep + r;
            for (int qt = qt0; qt < qt1; qt++) {
                const int i0 = qt * ATT_BQ, mq = imin(ATT_BQ, T - i0);
                const size_t qo = ((size_t)b * T + i0) * ldq + (size_t)h * hd;
                backward_tile(dq + qo, dK, dV, ldd, ts.tile, dy + qo, y + qo, lse + ((size_t)b * nh + h) * T + i0,
                              q + qo, k + ko, ts.kt, ts.vt, i0, mq, hd, ldq, ldk, scale);
            }
        }
    }
    if (splits == 1) return;
    // Key t gets the partials of the splits whose queries reach it, in split order.
#pragma omp parallel for schedule(static)
    for (long row = 0; row < (long)groups * T; row++) {
        const int bg = (int)(row / T), t = (int)(row % T), b = bg / nkv, g = bg % nkv;
        const size_t o = ((size_t)b * T + t) * ldk + (size_t)g * hd;
        memset(dk + o, 0, sizeof(float) * (size_t)hd);
        memset(dv + o, 0, sizeof(float) * (size_t)hd);
        for (int s = 0; s < splits; s++) {
            if (t >= imin(T, split_begin(s + 1, splits, n_tiles) * ATT_BQ)) continue;
            const float *pk = partials + 2 * part_floats * ((size_t)bg * splits + s) + (size_t)t * hd;
            const float *pv = pk + part_floats;
            for (int e = 0; e < hd; e++) dk[o + e] += pk[e], dv[o + e] += pv[e];
        }
    }
}

// ---- decoding: one new token against the KV cache ---------------------------------

// q [nh, hd], k_cache, v_cache [n_pos, nkv, hd] -> y [nh, hd]; scores [n_pos]
// scratch. One token's work is small: a single thread.
void attention_decode(OpsContext *ctx, float *y, float *scores, const float *q, const float *k_cache,
                      const float *v_cache, int n_pos, int nh, int nkv, int hd) {
    OPS_TIMED(ctx);
    ops_op_flops(ctx, 4.0 * n_pos * nh * hd);   // its scores and their weighted sum
    const int kvd = nkv * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < nh; h++) {
        const float *qh = q + h * hd;
        const int g = h / (nh / nkv);
        float mx = -INFINITY, sum = 0;
        for (int t = 0; t < n_pos; t++) {
            const float *k = k_cache + (size_t)t * kvd + g * hd;
            float dot = 0;
            for (int i = 0; i < hd; i++) dot += qh[i] * k[i];
            scores[t] = dot * scale;
            if (scores[t] > mx) mx = scores[t];
        }
        for (int t = 0; t < n_pos; t++) sum += (scores[t] = expf(scores[t] - mx));
        float *yh = y + h * hd;
        memset(yh, 0, sizeof(float) * hd);
        for (int t = 0; t < n_pos; t++) {
            const float *v = v_cache + (size_t)t * kvd + g * hd;
            const float p = scores[t] / sum;
            for (int i = 0; i < hd; i++) yh[i] += p * v[i];
        }
    }
}
