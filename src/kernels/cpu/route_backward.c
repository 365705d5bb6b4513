// Depth routing, backward (SPEC §5): per token, two passes over the sources
// (the second from L1/L2: N·d floats per token); source gradients accumulate
// in place; dq and dg are reduced from per-thread partials in a fixed order,
// so the result does not depend on timing. Compiled with -ffp-contract=fast
// (Makefile): in cache, the backward is bound by its instruction count, not
// by memory (measured on AVX-512: as slow with 16 tokens in L2 as streaming
// from DRAM), and FMAs cut it (with the eight-head sums below: 0.75-0.83x
// the time a call at N 17 x d 256, H 8, 1 thread in L2; README).
#include "kernels/cpu/route_impl.h"

// ---- backward ----------------------------------------------------------------------
//
// With a_{n,h} = ⟨dx_h, S_{n,h}⟩ (= ∂x/∂w), s_h = Σ_n w_{n,h} a_{n,h} and
// b_{n,h} = Σ_{k∈h} q_k g_k S_{n,k} (= ℓ_{n,h}/ρ_n):
//   dℓ_{n,h} = w_{n,h}(a_{n,h} − s_h),  dK_{n,k} = dℓ_{n,h(k)} q_k,  u_{n,h} = ρ_n dℓ_{n,h}
//   dq_k += Σ dℓ ρ_n S_{n,k} g_k = g_k z_k,   dg_k += Σ dK ρ_n S_{n,k} = q_k z_k,
//     where z_k = Σ_{t,n} u_{n,h(k)} S_{n,k}   (one [d] partial per thread)
//   dS_{n,k} += w_{n,h} dx_k + u_{n,h} q_k g_k − β_n S_{n,k},
//     β_n = (ρ_n³/d)·⟨g⊙dK_n, S_n⟩ = (ρ_n³/d)·Σ_h dℓ_{n,h} b_{n,h}.

// Scratch: qg [d] (padded), then per thread
// z [d] | a, b [N, H] | rho [N] | s, best, ap [H], padded.
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
size_t route_scratch_floats(OpsContext *ctx, int n_src, int d, int H) {
    (void)ctx;
    return qg_floats(d) + (size_t)omp_get_max_threads() * thread_floats(n_src, d, H);
}

// s_h relative to the pivot p = argmax_n w_{n,h}: with Σ_n w = 1,
// a_n − s = (a_n − a_p) − Σ_m w_m (a_m − a_p). When one source takes almost
// all the weight, a_p − s is tiny and Σ w a would lose it to cancellation
// (measured: 6e-3 relative error in dq for a saturated softmax). Loops run
// over sources outside, heads inside: wt's source stride is a multiple of 4 KiB.
typedef int v8i __attribute__((vector_size(32)));

INLINE void pivot_sums(Tmp T, const float *restrict wt, size_t ws, int n_src, int H) {
    // restrict copies: the scratch slices do not alias, which the compiler
    // cannot see through the struct.
    float *restrict best = T.best, *restrict ap = T.ap, *restrict a = T.a, *restrict s = T.s;
    int h0 = 0;
    // Eight heads at a time with explicit selects: written plainly, gcc emits
    // a compare and branch per (n, h) (measured: 8% of the backward).
    for (; h0 + 8 <= H; h0 += 8) {
        v8 b = {-1, -1, -1, -1, -1, -1, -1, -1}, p = {0};
        for (int n = 0; n < n_src; n++) {
            const v8 v = LOAD8(wt + n * ws + h0), an = LOAD8(a + n * H + h0);
            const v8i more = v > b;
            b = (v8)(((v8i)v & more) | ((v8i)b & ~more));
            p = (v8)(((v8i)an & more) | ((v8i)p & ~more));
        }
        memcpy(best + h0, &b, sizeof b);
        memcpy(ap + h0, &p, sizeof p);
    }
    for (int h = h0; h < H; h++) {
        float b = -1.0f, p = 0;
        for (int n = 0; n < n_src; n++)
            if (wt[n * ws + h] > b) b = wt[n * ws + h], p = a[n * H + h];
        best[h] = b, ap[h] = p;
    }
    for (int h = 0; h < H; h++) s[h] = 0;
    for (int n = 0; n < n_src; n++)
        for (int h = 0; h < H; h++) {
            a[n * H + h] -= ap[h]; // a becomes a − a_p (exactly 0 for n = p)
            s[h] += wt[n * ws + h] * a[n * H + h];
        }
}

// One head slice [hw] of a source row, hw a multiple of 8: the products with
// qg and dx summed over the slice's vectors (lanes still apart, for
// hsum8x8), s² added into the lanes ss[4]. Also prefetches the lines of the
// slice that the next token will read (S) and update (dS): inside the
// unrolled slice they cost no loop of their own (a separate prefetch loop
// over the row took 9% of the backward's instructions).
INLINE void slice_vec2(v8 *qv, v8 *dv, v8 ss[4], const float *restrict s, const float *restrict qg,
                       const float *restrict dx, const float *s_next, const float *ds_next, int hw) {
    v8 qa[4] = {{0}}, da[4] = {{0}}; // set by the first vectors (zeros only for the compiler)
    for (int k = 0; k < hw; k += 8) {
        const int j = (k / 8) & 3;
        const v8 x = LOAD8(s + k), pq = LOAD8(qg + k) * x, pd = LOAD8(dx + k) * x;
        ss[j] += x * x;
        if (k < 32) qa[j] = pq, da[j] = pd;
        else qa[j] += pq, da[j] += pd;
    }
    if (s_next)
        for (int k = 0; k < hw; k += 16) {
            __builtin_prefetch(s_next + k, 0);
            __builtin_prefetch(ds_next + k, 1);
        }
    v8 q = qa[0], r = da[0];
    for (int j = 1; j < 4 && 8 * j < hw; j++) q += qa[j], r += da[j];
    *qv = q, *dv = r;
}

// Pass 1 for token t: a (as a − a_pivot), b [N, H], rho [N], s [H].
INLINE void backward_stats(Tmp T, const Args *A, int t, int hw) {
    const int d = A->d, H = A->H;
    const float *dxt = A->dx + (size_t)t * d;
    const int more = t + 1 < A->n_tok;
    for (int n = 0; n < A->n_src; n++) {
        const float *S = src_row(A, n, t);
        prefetch_w(A->w, n, t, A, 0);
        if (hw % 8 == 0) { // heads of whole vectors: eight reduced at once
            const float *s_next = more ? S + d : NULL, *ds_next = more ? dsrc_row(A, n, t + 1) : NULL;
            v8 ss[4] = {{0}, {0}, {0}, {0}}, qv[8], dv[8];
            for (int h0 = 0; h0 < H; h0 += 8) {
                const int hc = H - h0 < 8 ? H - h0 : 8;
                for (int i = 0; i < hc; i++) {
                    const int o = (h0 + i) * hw;
                    slice_vec2(&qv[i], &dv[i], ss, S + o, A->qg + o, dxt + o,
                               more ? s_next + o : NULL, more ? ds_next + o : NULL, hw);
                }
                if (hc == 8) {
                    hsum8x8(T.b + n * H + h0, qv);
                    hsum8x8(T.a + n * H + h0, dv);
                } else
                    for (int i = 0; i < hc; i++) {
                        T.b[n * H + h0 + i] = hsum8(&qv[i]);
                        T.a[n * H + h0 + i] = hsum8(&dv[i]);
                    }
            }
            T.rho[n] = rms_inv(hsum4(ss), d, A->eps);
            continue;
        }
        if (more) {
            prefetch_row(S + d, d, 0);
            prefetch_row(dsrc_row(A, n, t + 1), d, 1);
        }
        T.rho[n] = rms_inv(row_sumsq(S, d), d, A->eps);
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            T.b[n * H + h] = slice_dot2(S + o, A->qg + o, dxt + o, hw, &T.a[n * H + h]);
        }
    }
    pivot_sums(T, A->w + (size_t)t * H, (size_t)A->n_tok * H, A->n_src, H);
}

// One head slice [n] of one source: z += u·S and the source gradient (added,
// or written when set).
INLINE void slice_grad(float *restrict z, float *restrict dS, const float *restrict S,
                       const float *restrict dx, const float *restrict qg, float wt,
                       float u, float beta, int n, int set) {
    for (int k = 0; k < n; k++) z[k] += u * S[k];
    if (set)
        for (int k = 0; k < n; k++) dS[k] = wt * dx[k] + u * qg[k] - beta * S[k];
    else
        for (int k = 0; k < n; k++) dS[k] += (wt * dx[k] + u * qg[k] - beta * S[k]);
}

// Pass 2 for token t: per source, dℓ (overwrites a), β, then z and dS slices.
INLINE void backward_grads(Tmp T, const Args *A, int t, int hw) {
    const int d = A->d, H = A->H;
    const float *dxt = A->dx + (size_t)t * d;
    for (int n = 0; n < A->n_src; n++) {
        const float *S = src_row(A, n, t);
        float *dS = dsrc_row(A, n, t);
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
            slice_grad(T.z + o, dS + o, S + o, dxt + o, A->qg + o, wn[h],
                       r * dl[h], beta, hw, A->set_dsrc);
        }
    }
}

static void backward(RouteGrads dS, float *dq, float *dg, float *scratch, const float *dx,
                     const float *w, RouteSources S, const float *q,
                     const float *g, int n_tok, int d, int H, float eps, int set_dsrc) {
    const int n_src = S.n;
    if (n_src <= 0) return;
    const Args A = {.S = S, .dS = dS, .qg = key_weight(scratch, q, g, d), .dx = dx,
                    .w = w, .n_src = n_src, .n_tok = n_tok, .d = d, .H = H, .eps = eps,
                    .set_dsrc = set_dsrc};
    scratch += qg_floats(d);
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

void route_backward(OpsContext *ctx, RouteGrads dS, float *dq, float *dg, float *scratch,
                    const float *dx, const float *w, RouteSources S, const float *q,
                    const float *g, int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    backward(dS, dq, dg, scratch, dx, w, S, q, g, n_tok, d, H, eps, 0);
}

void route_backward_set(OpsContext *ctx, RouteGrads dS, float *dq, float *dg, float *scratch,
                        const float *dx, const float *w, RouteSources S, const float *q,
                        const float *g, int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    backward(dS, dq, dg, scratch, dx, w, S, q, g, n_tok, d, H, eps, 1);
}
