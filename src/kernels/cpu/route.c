// Depth routing, Route(S, q, g, H) (SPEC §2.2), as the fused kernel of SPEC §5.
//
// Per token t, for sources S_n [d] (n < N), heads h owning the contiguous
// slice [h·hw, (h+1)·hw) of width hw = d/H:
//   ρ_n    = rsqrt(mean_k S_{n,k}² + eps)             (full width)
//   ℓ_{n,h} = ρ_n · Σ_{k∈h} q_k g_k S_{n,k}             (= ⟨q_h, K_{n,h}⟩)
//   w_{n,h} = softmax_n ℓ_{n,h},   x_k = Σ_n w_{n,h(k)} S_{n,k}
// Forward reads every source once (online softmax); backward reads each
// token's sources twice, the second time from L1/L2 (N·d floats per token).
#include "kernels/ops.h"

#include <math.h>
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

// Width reductions use explicit 8-lane vectors (GNU C vector extensions, gcc
// and clang): plain C float sums must stay in order and do not vectorise
// without -ffast-math, and "omp simd reduction" makes gcc 12 finish every sum
// with a serial chain of scalar adds, which dominated the per-head dots. The
// lane split and the final tree are fixed in the code, so results do not
// depend on addresses or on the compiler's choice of vector width.
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

static inline v8 load8(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v); // unaligned load
    return v;
}

static inline float hsum8(v8 v) {
    v4 lo, hi;
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    const v4 a = lo + hi;
    return (a[0] + a[2]) + (a[1] + a[3]);
}

// One slice s [n]: returns Σ s², sets *qgs = Σ q g s.
static float slice_stats(const float *restrict s, const float *restrict q,
                         const float *restrict g, int n, float *qgs) {
    v8 ss = {0}, qs = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = load8(s + k);
        ss += x * x;
        qs += load8(q + k) * load8(g + k) * x;
    }
    float ts = 0, tq = 0; // tail, n % 8 values
    for (; k < n; k++) ts += s[k] * s[k], tq += q[k] * g[k] * s[k];
    *qgs = hsum8(qs) + tq;
    return hsum8(ss) + ts;
}

// As slice_stats, plus *dxs = Σ dx s.
static float slice_stats3(const float *restrict s, const float *restrict q,
                          const float *restrict g, const float *restrict dx,
                          int n, float *qgs, float *dxs) {
    v8 ss = {0}, qs = {0}, ds = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = load8(s + k);
        ss += x * x;
        qs += load8(q + k) * load8(g + k) * x;
        ds += load8(dx + k) * x;
    }
    float ts = 0, tq = 0, td = 0;
    for (; k < n; k++) ts += s[k] * s[k], tq += q[k] * g[k] * s[k], td += dx[k] * s[k];
    *qgs = hsum8(qs) + tq;
    *dxs = hsum8(ds) + td;
    return hsum8(ss) + ts;
}

static float sumsq(const float *restrict s, int n) {
    v8 ss = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 x = load8(s + k);
        ss += x * x;
    }
    float ts = 0;
    for (; k < n; k++) ts += s[k] * s[k];
    return hsum8(ss) + ts;
}

// Prefetch the row [d] that the next token will read: with N sources (plus
// their gradients and w) the per-token streams are too many for the hardware
// prefetchers, and the loads stalled on DRAM (measured: 2x slower without).
static inline void prefetch_row(const float *p, int d, int write) {
    for (int k = 0; k < d; k += 16) // one 64-byte line per call
        if (write) __builtin_prefetch(p + k, 1);
        else __builtin_prefetch(p + k, 0);
}

// ---- forward -------------------------------------------------------------------

// acc [n] = acc·c + p·s: the online-softmax update of one head's accumulator.
static void rescale_add(float *restrict acc, const float *restrict s, float c,
                        float p, int n) {
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const v8 v = load8(acc + k) * c + load8(s + k) * p;
        memcpy(acc + k, &v, sizeof v);
    }
    for (; k < n; k++) acc[k] = acc[k] * c + p * s[k];
}

// Source S [d] of one token: logits lg [hc] of heads [h0, h0 + hc).
static void source_logits(float *restrict lg, const float *restrict S, const float *q,
                          const float *g, int d, int H, int h0, int hc, float eps) {
    const int hw = d / H;
    float ss = 0;
    for (int i = 0; i < hc; i++) {
        const int o = (h0 + i) * hw;
        ss += slice_stats(S + o, q + o, g + o, hw, &lg[i]);
    }
    if (hc < H) ss = sumsq(S, d); // chunked heads: ρ still needs the full width
    const float rho = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = 0; i < hc; i++) lg[i] *= rho;
}

// Token t, heads [h0, h0 + hc): one pass over the sources with an online
// softmax. The accumulator is the token's row of x [d]. The w slots
// [N, n_tok, H] hold exp(ℓ_n − running max); when the max grows by Δ, the
// slots already written are rescaled by exp(−Δ) (a few multiplies, no exp),
// so each (source, head) costs one expf and w needs none at the end.
static void forward_token(float *restrict xt, float *restrict w,
                          const float *const *src, int n_src, const float *q,
                          const float *g, int t, int n_tok, int d, int H,
                          int h0, int hc, float eps) {
    const int hw = d / H;
    const size_t wstride = (size_t)n_tok * H; // between sources in w
    float *wt = w + (size_t)t * H + h0;        // w slot of (source 0, head h0)
    float m[HEAD_CHUNK], l[HEAD_CHUNK], lg[HEAD_CHUNK];
    for (int n = 0; n < n_src; n++) {
        const float *S = src[n] + (size_t)t * d;
        if (t + 1 < n_tok) prefetch_row(S + d, d, 0);
        source_logits(lg, S, q, g, d, H, h0, hc, eps);
        for (int i = 0; i < hc; i++) {
            const int o = (h0 + i) * hw;
            float c = 1, p = 1; // acc = acc·c + p·S, l = l·c + p
            if (n == 0) {
                m[i] = lg[i], l[i] = 0, c = 0;
                memset(xt + o, 0, (size_t)hw * sizeof(float)); // x is garbage
            } else if (lg[i] > m[i]) {
                c = expf(m[i] - lg[i]), m[i] = lg[i];
                for (int j = 0; j < n; j++) wt[j * wstride + i] *= c;
            } else {
                p = expf(lg[i] - m[i]);
            }
            wt[n * wstride + i] = p;
            l[i] = l[i] * c + p;
            rescale_add(xt + o, S + o, c, p, hw);
        }
    }
    for (int i = 0; i < hc; i++) {
        const float inv = 1.0f / l[i];
        rescale_add(xt + (h0 + i) * hw, xt, inv, 0.0f, hw); // x /= l
        for (int n = 0; n < n_src; n++) wt[n * wstride + i] *= inv;
    }
}

void route_forward(float *x, float *w, const float *const *src, int n_src,
                   const float *q, const float *g, int n_tok, int d, int H, float eps) {
    if (n_src <= 0) { // nothing to read: the empty sum
        memset(x, 0, (size_t)n_tok * d * sizeof(float));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n_tok; t++)
        for (int h0 = 0; h0 < H; h0 += HEAD_CHUNK) {
            const int hc = H - h0 < HEAD_CHUNK ? H - h0 : HEAD_CHUNK;
            forward_token(x + (size_t)t * d, w, src, n_src, q, g, t, n_tok, d,
                          H, h0, hc, eps);
        }
}

// ---- backward ------------------------------------------------------------------
//
// With a_{n,h} = ⟨dx_h, S_{n,h}⟩ (= ∂x/∂w), s_h = Σ_n w_{n,h} a_{n,h} and
// b_{n,h} = Σ_{k∈h} q_k g_k S_{n,k} (= ℓ_{n,h}/ρ_n):
//   dℓ_{n,h} = w_{n,h}(a_{n,h} − s_h),  dK_{n,k} = dℓ_{n,h(k)} q_k,  u_{n,h} = ρ_n dℓ_{n,h}
//   dq_k += Σ dℓ ρ_n S_{n,k} g_k = g_k z_k,   dg_k += Σ dK ρ_n S_{n,k} = q_k z_k,
//     where z_k = Σ_{t,n} u_{n,h(k)} S_{n,k}   (one [d] partial per thread)
//   dS_{n,k} += w_{n,h} dx_k + u_{n,h} q_k g_k − β_n S_{n,k},
//     β_n = (ρ_n³/d)·⟨g⊙dK_n, S_n⟩ = (ρ_n³/d)·Σ_h dℓ_{n,h} b_{n,h}.

// Per-thread scratch: z [d] | a [N, H] | b [N, H] | rho [N] | s [H], padded.
static size_t thread_floats(int n_src, int d, int H) {
    size_t f = (size_t)d + 2 * (size_t)n_src * H + (size_t)n_src + (size_t)H;
    return (f + PAD - 1) / PAD * PAD;
}

// Scratch for omp_get_max_threads() threads: call it with the thread count
// that route_backward will run with.
size_t route_scratch_floats(int n_src, int d, int H) {
    return (size_t)omp_get_max_threads() * thread_floats(n_src, d, H);
}

// One head slice [n] of one source: z += u·S and, if dS, the source gradient.
static void slice_grad(float *restrict z, float *restrict dS, const float *restrict S,
                       const float *restrict dx, const float *restrict q,
                       const float *restrict g, float wt, float u, float beta, int n) {
    for (int k = 0; k < n; k++) z[k] += u * S[k];
    if (!dS) return;
    for (int k = 0; k < n; k++) dS[k] += (wt * dx[k] + u * q[k] * g[k] - beta * S[k]);
}

// Pass 1 for token t: a (as a − a_pivot), b [N, H], rho [N], s [H] into the
// thread's scratch.
static void backward_stats(float *restrict a, float *restrict b, float *restrict rho,
                           float *restrict s, const float *dxt, const float *w,
                           const float *const *src, float *const *dsrc, int n_src, const float *q,
                           const float *g, int t, int n_tok, int d, int H, float eps) {
    const int hw = d / H;
    for (int n = 0; n < n_src; n++) {
        const float *S = src[n] + (size_t)t * d;
        if (t + 1 < n_tok) {
            prefetch_row(S + d, d, 0);
            if (dsrc[n]) prefetch_row(dsrc[n] + (size_t)(t + 1) * d, d, 1);
        }
        float ss = 0;
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            ss += slice_stats3(S + o, q + o, g + o, dxt + o, hw, &b[n * H + h], &a[n * H + h]);
        }
        rho[n] = 1.0f / sqrtf(ss / (float)d + eps);
    }
    // s_h relative to the pivot p = argmax_n w_{n,h}: with Σ_n w = 1,
    // a_n − s = (a_n − a_p) − Σ_m w_m (a_m − a_p). When one source takes almost
    // all the weight, a_p − s is tiny and Σ w a would lose it to cancellation.
    for (int h = 0; h < H; h++) {
        int p = 0;
        for (int n = 1; n < n_src; n++)
            if (w[((size_t)n * n_tok + t) * H + h] > w[((size_t)p * n_tok + t) * H + h]) p = n;
        const float ap = a[p * H + h];
        float sh = 0;
        for (int n = 0; n < n_src; n++) {
            a[n * H + h] -= ap; // a becomes a − a_p (exactly 0 for n = p)
            sh += w[((size_t)n * n_tok + t) * H + h] * a[n * H + h];
        }
        s[h] = sh;
    }
}

// Pass 2 for token t: per source, dℓ (overwrites a), β, then z and dS slices.
static void backward_grads(float *restrict z, float *const *dsrc, float *restrict a,
                           const float *restrict b, const float *restrict rho,
                           const float *restrict s, const float *dxt, const float *w,
                           const float *const *src, int n_src, const float *q,
                           const float *g, int t, int n_tok, int d, int H) {
    const int hw = d / H;
    for (int n = 0; n < n_src; n++) {
        const float *S = src[n] + (size_t)t * d;
        float *dS = dsrc[n] ? dsrc[n] + (size_t)t * d : NULL;
        const float *wn = w + ((size_t)n * n_tok + t) * H;
        float *dl = a + n * H;
        float c = 0; // ⟨g⊙dK_n, S_n⟩ / ρ_n
        for (int h = 0; h < H; h++) {
            dl[h] = wn[h] * (dl[h] - s[h]);
            c += dl[h] * b[n * H + h];
        }
        const float r = rho[n], beta = (r * c) * r * r / (float)d; // r·c first: bounded
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            slice_grad(z + o, dS ? dS + o : NULL, S + o, dxt + o, q + o, g + o,
                       wn[h], r * dl[h], beta, hw);
        }
    }
}

void route_backward(float *const *dsrc, float *dq, float *dg, float *scratch,
                    const float *dx, const float *w, const float *const *src,
                    int n_src, const float *q, const float *g, int n_tok, int d,
                    int H, float eps) {
    if (n_src <= 0) return;
    const size_t per = thread_floats(n_src, d, H);
#pragma omp parallel
    {
        const int nthr = omp_get_num_threads();
        float *z = scratch + (size_t)omp_get_thread_num() * per; // [d]
        float *a = z + d, *b = a + (size_t)n_src * H;             // [N, H] each
        float *rho = b + (size_t)n_src * H, *s = rho + n_src;     // [N], [H]
        memset(z, 0, (size_t)d * sizeof(float));
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            const float *dxt = dx + (size_t)t * d;
            backward_stats(a, b, rho, s, dxt, w, src, dsrc, n_src, q, g, t, n_tok, d, H, eps);
            backward_grads(z, dsrc, a, b, rho, s, dxt, w, src, n_src, q, g, t, n_tok, d, H);
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
