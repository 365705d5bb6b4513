// Depth routing, Route(S, q, g, H) (SPEC §2.2), as the fused kernel of SPEC §5.
//
// Per token t, for sources S_n [d] (n < N), heads h owning the contiguous
// slice [h·hw, (h+1)·hw) of width hw = d/H:
//   ρ_n     = rsqrt(mean_k S_{n,k}² + eps)            (full width)
//   ℓ_{n,h} = ρ_n · Σ_{k∈h} q_k g_k S_{n,k}             (= ⟨q_h, K_{n,h}⟩)
//   w_{n,h} = softmax_n ℓ_{n,h},   x_k = Σ_n w_{n,h(k)} S_{n,k}
// Forward reads every source once (online softmax); backward reads each
// token's sources twice, the second time from L1/L2 (N·d floats per token).
// Tokens are split over OpenMP threads with a static schedule.
#include "kernels/ops.h"
#include "vmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_num_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

enum {
    HEAD_CHUNK = 64, // forward keeps per-head running max/normaliser on the stack
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
    const float *const *src; // [N] -> [n_tok, d]
    float *const *dsrc;      // [N] -> [n_tok, d] or NULL entries; backward only
    const float *q, *g;      // [d]
    const float *dx;         // [n_tok, d]; backward only
    const float *w;          // [N, n_tok, H]; backward only
    int n_src, n_tok, d, H;
    float eps;
} Args;

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

INLINE float hsum8(const v8 *v) {
    v4 lo, hi;
    memcpy(&lo, v, sizeof lo);
    memcpy(&hi, (const char *)v + sizeof lo, sizeof hi);
    const v4 a = lo + hi;
    return (a[0] + a[2]) + (a[1] + a[3]);
}

// Slice s [n]: adds s² into the lanes *ss (the n % 8 tail into *ts) and
// returns Σ q g s.
INLINE float slice_stats(const float *restrict s, const float *restrict q,
                         const float *restrict g, int n, v8 *ss, float *ts) {
    v8 qs = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        *ss += x * x;
        qs += LOAD8(q + k) * LOAD8(g + k) * x;
    }
    float tq = 0;
    for (; k < n; k++) *ts += s[k] * s[k], tq += q[k] * g[k] * s[k];
    return hsum8(&qs) + tq;
}

// As slice_stats, plus *dxs = Σ dx s.
INLINE float slice_stats3(const float *restrict s, const float *restrict q,
                          const float *restrict g, const float *restrict dx, int n,
                          v8 *ss, float *ts, float *dxs) {
    v8 qs = {0}, ds = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        *ss += x * x;
        qs += LOAD8(q + k) * LOAD8(g + k) * x;
        ds += LOAD8(dx + k) * x;
    }
    float tq = 0, td = 0;
    for (; k < n; k++) *ts += s[k] * s[k], tq += q[k] * g[k] * s[k], td += dx[k] * s[k];
    *dxs = hsum8(&ds) + td;
    return hsum8(&qs) + tq;
}

INLINE float sumsq(const float *restrict s, int n) {
    v8 ss = {0};
    float ts = 0;
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = LOAD8(s + k);
        ss += x * x;
    }
    for (; k < n; k++) ts += s[k] * s[k];
    return hsum8(&ss) + ts;
}

INLINE float rms_inv(float ss, int d, float eps) { return 1.0f / sqrtf(ss / (float)d + eps); }

// Prefetch the row [d] that the next token will read: with N source streams
// (plus gradients and w) the hardware prefetchers fall behind and the loads
// stalled on DRAM (measured: forward and backward 2x slower without).
INLINE void prefetch_row(const float *p, int d, int write) {
    for (int k = 0; k < d; k += 16) // one 64-byte line per call
        if (write) __builtin_prefetch(p + k, 1);
        else __builtin_prefetch(p + k, 0);
}

// ---- forward -----------------------------------------------------------------------

// Source row S [d]: logits lg [hc] of heads [h0, h0 + hc).
INLINE void source_logits(float *restrict lg, const float *restrict S, const Args *A,
                          int h0, int hc, int hw) {
    v8 ss = {0};
    float ts = 0;
    for (int i = 0; i < hc; i++) {
        const int o = (h0 + i) * hw;
        lg[i] = slice_stats(S + o, A->q + o, A->g + o, hw, &ss, &ts);
    }
    // Chunked heads (H > HEAD_CHUNK): ρ still needs the full width.
    const float sq = hc < A->H ? sumsq(S, A->d) : hsum8(&ss) + ts;
    const float rho = rms_inv(sq, A->d, A->eps);
    for (int i = 0; i < hc; i++) lg[i] *= rho;
}

// acc [n] = acc·c + p·s: the online-softmax update of one head's accumulator.
INLINE void rescale_add(float *restrict acc, const float *restrict s, float c, float p,
                        int n) {
    for (int k = 0; k < n; k++) acc[k] = acc[k] * c + p * s[k];
}

// Online-softmax step for heads i < hc given this source's logits lg: m, l
// become the running max and normaliser, c, p the factors of
// acc = acc·c + p·S, and the w slot gets p, or −c where the max grew (see
// finish_weights).
INLINE void softmax_step(float *restrict m, float *restrict l, float *restrict c,
                         float *restrict p, float *restrict slot,
                         const float *restrict lg, int hc) {
    for (int i = 0; i < hc; i++) {
        const float diff = lg[i] - m[i];
        const int grew = diff > 0;
        const float e = vexp(grew ? -diff : diff)  /* argument ≤ 0 */;
        c[i] = grew ? e : 1.0f;
        p[i] = grew ? 1.0f : e;
        m[i] = grew ? lg[i] : m[i];
        l[i] = l[i] * c[i] + p[i];
        slot[i] = grew ? -c[i] : p[i];
    }
}

// The w slots of one token hold, per source n and head, p_n = exp(ℓ_n − m_n)
// with m_n the running max after n, or −c_n where the max grew at n (then
// p_n = 1 and the older terms were scaled by c_n = exp(m_{n−1} − m_n); the
// sign marks it). Walking back from the last source turns them
// into w_n = p_n · Π_{j>n} c_j / l without a single exp. wt: the slots of
// source 0, heads [h0, h0 + hc); ws: the stride between sources, a multiple
// of 4 KiB, so the loops visit each source's line once (L1 set conflicts).
INLINE void finish_weights(float *restrict wt, size_t ws, int n_src,
                           const float *restrict l, int hc) {
    float scale[HEAD_CHUNK];
    for (int i = 0; i < hc; i++) scale[i] = 1.0f / l[i];
    for (int n = n_src - 1; n >= 0; n--) {
        float *slot = wt + n * ws;
        for (int i = 0; i < hc; i++) {
            const float v = slot[i];
            const int grew = signbit(v) != 0;
            slot[i] = (grew ? 1.0f : v) * scale[i];
            scale[i] *= grew ? -v : 1.0f;
        }
    }
}

// Token t, heads [h0, h0 + hc): one pass over the sources with an online
// softmax per head (running max m, normaliser l); the accumulator is the
// token's row of x [d].
INLINE void forward_token(float *restrict xt, float *restrict w, const Args *A, int t,
                          int h0, int hc, int hw) {
    const size_t ws = (size_t)A->n_tok * A->H; // w stride between sources
    float *wt = w + (size_t)t * A->H + h0;     // w slot (source 0, head h0)
    float m[HEAD_CHUNK], l[HEAD_CHUNK], lg[HEAD_CHUNK], c[HEAD_CHUNK], p[HEAD_CHUNK];
    memset(xt + h0 * hw, 0, (size_t)hc * hw * sizeof(float));
    for (int n = 0; n < A->n_src; n++) {
        const float *S = A->src[n] + (size_t)t * A->d;
        if (t + 1 < A->n_tok) prefetch_row(S + A->d, A->d, 0);
        source_logits(lg, S, A, h0, hc, hw);
        if (n == 0) // start at max = ℓ_0, l = 0: source 0 gets p = 1, c = 1
            for (int i = 0; i < hc; i++) m[i] = lg[i], l[i] = 0;
        softmax_step(m, l, c, p, wt + n * ws, lg, hc);
        for (int i = 0; i < hc; i++) {
            const int o = (h0 + i) * hw;
            rescale_add(xt + o, S + o, c[i], p[i], hw);
        }
    }
    for (int i = 0; i < hc; i++) {
        float *xo = xt + (h0 + i) * hw;
        const float inv = 1.0f / l[i];
        for (int k = 0; k < hw; k++) xo[k] *= inv;
    }
    finish_weights(wt, ws, A->n_src, l, hc);
}

void route_forward(float *x, float *w, const float *const *src, int n_src,
                   const float *q, const float *g, int n_tok, int d, int H, float eps) {
    if (n_src <= 0) { // nothing to read: the empty sum
        memset(x, 0, (size_t)n_tok * d * sizeof(float));
        return;
    }
    const Args A = {.src = src, .q = q, .g = g, .n_src = n_src, .n_tok = n_tok,
                    .d = d, .H = H, .eps = eps};
    const int hw = d / H;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n_tok; t++)
        for (int h0 = 0; h0 < H; h0 += HEAD_CHUNK) {
            const int hc = H - h0 < HEAD_CHUNK ? H - h0 : HEAD_CHUNK;
#define FWD(HW) forward_token(x + (size_t)t * d, w, &A, t, h0, hc, HW)
            DISPATCH_HW(hw, FWD)
#undef FWD
        }
}

// ---- backward ----------------------------------------------------------------------
//
// With a_{n,h} = ⟨dx_h, S_{n,h}⟩ (= ∂x/∂w), s_h = Σ_n w_{n,h} a_{n,h} and
// b_{n,h} = Σ_{k∈h} q_k g_k S_{n,k} (= ℓ_{n,h}/ρ_n):
//   dℓ_{n,h} = w_{n,h}(a_{n,h} − s_h),  dK_{n,k} = dℓ_{n,h(k)} q_k,  u_{n,h} = ρ_n dℓ_{n,h}
//   dq_k += Σ dℓ ρ_n S_{n,k} g_k = g_k z_k,   dg_k += Σ dK ρ_n S_{n,k} = q_k z_k,
//     where z_k = Σ_{t,n} u_{n,h(k)} S_{n,k}   (one [d] partial per thread)
//   dS_{n,k} += w_{n,h} dx_k + u_{n,h} q_k g_k − β_n S_{n,k},
//     β_n = (ρ_n³/d)·⟨g⊙dK_n, S_n⟩ = (ρ_n³/d)·Σ_h dℓ_{n,h} b_{n,h}.

// Per-thread scratch: z [d] | a, b [N, H] | rho [N] | s, best, ap [H], padded.
typedef struct { float *z, *a, *b, *rho, *s, *best, *ap; } Tmp;

static size_t thread_floats(int n_src, int d, int H) {
    size_t f = (size_t)d + 2 * (size_t)n_src * H + (size_t)n_src + 3 * (size_t)H;
    return (f + PAD - 1) / PAD * PAD;
}

static Tmp thread_tmp(float *base, int n_src, int d, int H) {
    Tmp T = {.z = base, .a = base + d};
    T.b = T.a + (size_t)n_src * H;
    T.rho = T.b + (size_t)n_src * H;
    T.s = T.rho + n_src;
    T.best = T.s + H;
    T.ap = T.best + H;
    return T;
}

// Scratch for omp_get_max_threads() threads, so call it under the thread
// count route_backward will run with. It grows with every argument: the size
// for (N, d, H) also serves any call with fewer sources or heads.
size_t route_scratch_floats(int n_src, int d, int H) {
    return (size_t)omp_get_max_threads() * thread_floats(n_src, d, H);
}

// s_h relative to the pivot p = argmax_n w_{n,h}: with Σ_n w = 1,
// a_n − s = (a_n − a_p) − Σ_m w_m (a_m − a_p). When one source takes almost
// all the weight, a_p − s is tiny and Σ w a would lose it to cancellation
// (measured: 6e-3 relative error in dq for a saturated softmax). Loops run
// over sources outside, heads inside: wt's source stride is a multiple of 4 KiB.
INLINE void pivot_sums(Tmp T, const float *wt, size_t ws, int n_src, int H) {
    for (int h = 0; h < H; h++) T.best[h] = -1.0f, T.ap[h] = 0;
    for (int n = 0; n < n_src; n++)
        for (int h = 0; h < H; h++)
            if (wt[n * ws + h] > T.best[h]) T.best[h] = wt[n * ws + h], T.ap[h] = T.a[n * H + h];
    for (int h = 0; h < H; h++) T.s[h] = 0;
    for (int n = 0; n < n_src; n++)
        for (int h = 0; h < H; h++) {
            T.a[n * H + h] -= T.ap[h]; // a becomes a − a_p (exactly 0 for n = p)
            T.s[h] += wt[n * ws + h] * T.a[n * H + h];
        }
}

// Pass 1 for token t: a (as a − a_pivot), b [N, H], rho [N], s [H].
INLINE void backward_stats(Tmp T, const Args *A, int t, int hw) {
    const int d = A->d, H = A->H;
    const float *dxt = A->dx + (size_t)t * d;
    for (int n = 0; n < A->n_src; n++) {
        const float *S = A->src[n] + (size_t)t * d;
        if (t + 1 < A->n_tok) {
            prefetch_row(S + d, d, 0);
            if (A->dsrc[n]) prefetch_row(A->dsrc[n] + (size_t)(t + 1) * d, d, 1);
        }
        v8 ss = {0};
        float ts = 0;
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            T.b[n * H + h] = slice_stats3(S + o, A->q + o, A->g + o, dxt + o, hw, &ss,
                                          &ts, &T.a[n * H + h]);
        }
        T.rho[n] = rms_inv(hsum8(&ss) + ts, d, A->eps);
    }
    pivot_sums(T, A->w + (size_t)t * H, (size_t)A->n_tok * H, A->n_src, H);
}

// One head slice [n] of one source: z += u·S and, if dS, the source gradient.
INLINE void slice_grad(float *restrict z, float *restrict dS, const float *restrict S,
                       const float *restrict dx, const float *restrict q,
                       const float *restrict g, float wt, float u, float beta, int n) {
    for (int k = 0; k < n; k++) z[k] += u * S[k];
    if (!dS) return;
    for (int k = 0; k < n; k++) dS[k] += (wt * dx[k] + u * q[k] * g[k] - beta * S[k]);
}

// Pass 2 for token t: per source, dℓ (overwrites a), β, then z and dS slices.
INLINE void backward_grads(Tmp T, const Args *A, int t, int hw) {
    const int d = A->d, H = A->H;
    const float *dxt = A->dx + (size_t)t * d;
    for (int n = 0; n < A->n_src; n++) {
        const float *S = A->src[n] + (size_t)t * d;
        float *dS = A->dsrc[n] ? A->dsrc[n] + (size_t)t * d : NULL;
        const float *wn = A->w + ((size_t)n * A->n_tok + t) * H;
        float *dl = T.a + n * H;
        float c = 0; // ⟨g⊙dK_n, S_n⟩ / ρ_n
        for (int h = 0; h < H; h++) {
            dl[h] = wn[h] * (dl[h] - T.s[h]);
            c += dl[h] * T.b[n * H + h];
        }
        const float r = T.rho[n], beta = (r * c) * r * r / (float)d; // r·c first: bounded
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            slice_grad(T.z + o, dS ? dS + o : NULL, S + o, dxt + o, A->q + o, A->g + o,
                       wn[h], r * dl[h], beta, hw);
        }
    }
}

void route_backward(float *const *dsrc, float *dq, float *dg, float *scratch,
                    const float *dx, const float *w, const float *const *src,
                    int n_src, const float *q, const float *g, int n_tok, int d,
                    int H, float eps) {
    if (n_src <= 0) return;
    const Args A = {.src = src, .dsrc = dsrc, .q = q, .g = g, .dx = dx, .w = w,
                    .n_src = n_src, .n_tok = n_tok, .d = d, .H = H, .eps = eps};
    const size_t per = thread_floats(n_src, d, H);
    const int hw = d / H;
#pragma omp parallel
    {
        const int nthr = omp_get_num_threads();
        const Tmp T = thread_tmp(scratch + (size_t)omp_get_thread_num() * per, n_src, d, H);
        memset(T.z, 0, (size_t)d * sizeof(float));
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
#define BWD(HW) backward_stats(T, &A, t, HW), backward_grads(T, &A, t, HW)
            DISPATCH_HW(hw, BWD)
#undef BWD
        }
        // Implicit barrier above; reduce the partials in fixed thread order.
#pragma omp for schedule(static)
        for (int k = 0; k < d; k++) {
            float zk = 0;
            for (int i = 0; i < nthr; i++) zk += scratch[(size_t)i * per + k];
            dq[k] += g[k] * zk;
            dg[k] += q[k] * zk;
        }
    }
}
