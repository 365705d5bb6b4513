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

// One slice s [n]: returns Σ s², sets *qgs = Σ q g s. "omp simd reduction"
// lets the compiler keep one partial sum per vector lane (plain C float sums
// must stay in order and would not vectorise without -ffast-math); the lane
// split depends only on the compiled code, so results stay reproducible.
static float slice_stats(const float *restrict s, const float *restrict q,
                         const float *restrict g, int n, float *qgs) {
    float ss = 0, qs = 0;
#pragma omp simd reduction(+ : ss, qs)
    for (int k = 0; k < n; k++) {
        ss += s[k] * s[k];
        qs += q[k] * g[k] * s[k];
    }
    *qgs = qs;
    return ss;
}

// As slice_stats, plus *dxs = Σ dx s.
static float slice_stats3(const float *restrict s, const float *restrict q,
                          const float *restrict g, const float *restrict dx,
                          int n, float *qgs, float *dxs) {
    float ss = 0, qs = 0, ds = 0;
#pragma omp simd reduction(+ : ss, qs, ds)
    for (int k = 0; k < n; k++) {
        ss += s[k] * s[k];
        qs += q[k] * g[k] * s[k];
        ds += dx[k] * s[k];
    }
    *qgs = qs;
    *dxs = ds;
    return ss;
}

static float sumsq(const float *restrict s, int n) {
    float ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int k = 0; k < n; k++) ss += s[k] * s[k];
    return ss;
}

// ---- forward -------------------------------------------------------------------

// acc [n] = acc·c + p·s: the online-softmax update of one head's accumulator.
static void rescale_add(float *restrict acc, const float *restrict s, float c,
                        float p, int n) {
    for (int k = 0; k < n; k++) acc[k] = acc[k] * c + p * s[k];
}

// Token t, heads [h0, h0 + hc): one pass over the sources. The accumulator is
// the token's row of x [d]; raw logits go into the w slots [N, n_tok, H] and
// are turned into probabilities once the final max and normaliser are known.
static void forward_token(float *restrict xt, float *restrict w,
                          const float *const *src, int n_src, const float *q,
                          const float *g, int t, int n_tok, int d, int H,
                          int h0, int hc, float eps) {
    const int hw = d / H;
    float m[HEAD_CHUNK], l[HEAD_CHUNK], dot[HEAD_CHUNK];
    for (int n = 0; n < n_src; n++) {
        const float *S = src[n] + (size_t)t * d;
        float ss = 0;
        for (int i = 0; i < hc; i++) {
            const int o = (h0 + i) * hw;
            ss += slice_stats(S + o, q + o, g + o, hw, &dot[i]);
        }
        if (hc < H) ss = sumsq(S, d); // chunked heads: ρ still needs the full width
        const float rho = 1.0f / sqrtf(ss / (float)d + eps);
        float *wn = w + ((size_t)n * n_tok + t) * H + h0;
        for (int i = 0; i < hc; i++) {
            const int o = (h0 + i) * hw;
            const float lg = rho * dot[i];
            wn[i] = lg;
            if (n == 0) { // first source: p = 1, nothing to rescale
                m[i] = lg, l[i] = 1;
                memcpy(xt + o, S + o, (size_t)hw * sizeof(float));
            } else if (lg > m[i]) { // new max: old terms scale by exp(m - lg)
                const float c = expf(m[i] - lg);
                l[i] = l[i] * c + 1, m[i] = lg;
                rescale_add(xt + o, S + o, c, 1.0f, hw);
            } else {
                const float p = expf(lg - m[i]);
                l[i] += p;
                rescale_add(xt + o, S + o, 1.0f, p, hw);
            }
        }
    }
    for (int i = 0; i < hc; i++) {
        const float inv = 1.0f / l[i];
        float *xo = xt + (h0 + i) * hw;
        for (int k = 0; k < hw; k++) xo[k] *= inv;
        for (int n = 0; n < n_src; n++) {
            float *wp = w + ((size_t)n * n_tok + t) * H + h0 + i;
            *wp = expf(*wp - m[i]) * inv;
        }
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
                           const float *const *src, int n_src, const float *q,
                           const float *g, int t, int n_tok, int d, int H, float eps) {
    const int hw = d / H;
    for (int n = 0; n < n_src; n++) {
        const float *S = src[n] + (size_t)t * d;
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
            backward_stats(a, b, rho, s, dxt, w, src, n_src, q, g, t, n_tok, d, H, eps);
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
