// Depth routing, backward (SPEC §5), over tiles of tokens (route_impl.h).
// Per tile, pass 1 walks the sources one at a time over the tile's tokens,
// reading S (and fetching the dS rows pass 2 updates), and keeps the
// per-(source, token, head) statistics; then, token by token, the softmax
// gradient; pass 2, source by source again, updates dS and z, reading S from
// L2 and fetching the next tile's. Source gradients accumulate in place (or
// are written: route_backward_set); dq and dg are reduced from per-thread
// partials in a fixed order, so the result does not depend on timing.
// Compiled with -ffp-contract=fast (Makefile): in cache the backward is bound
// by its instruction count, and FMAs cut it (with the eight-head sums below:
// 0.75-0.83x the time a call at N 17 x d 256, H 8, 1 thread in L2; README).
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
// z [d] | a, b [N, tile, H] | rho [N, tile] | s, best, ap [H], padded.
typedef struct { float *z, *a, *b, *rho, *s, *best, *ap; } Tmp;

static size_t thread_floats(int n_src, int d, int H) {
    const size_t rows = route_tile_rows_bound(n_src, d);
    size_t f = (size_t)d + 2 * rows * H + rows + 3 * (size_t)H;
    return (f + PAD - 1) / PAD * PAD;
}

static Tmp thread_tmp(float *base, int n_src, int d, int H) {
    const size_t rows = route_tile_rows_bound(n_src, d);
    Tmp T = {.z = base, .a = base + d};
    T.b = T.a + rows * H;
    T.rho = T.b + rows * H;
    T.s = T.rho + rows;
    T.best = T.s + H;
    T.ap = T.best + H;
    return T;
}

// Scratch for omp_get_max_threads() threads, so call it under the thread
// count route_backward will run with. It grows with every argument: the size
// for (N, d, H) also serves any call with fewer sources or heads (fewer
// sources get longer tiles, within route_tile_rows_bound).
size_t route_scratch_floats(OpsContext *ctx, int n_src, int d, int H) {
    (void)ctx;
    const size_t own = qg_floats(d) + (size_t)omp_get_max_threads() * thread_floats(n_src, d, H),
                 by_source = route_source_scratch_floats(n_src, d, H);
    return own > by_source ? own : by_source;
}

typedef int v8i __attribute__((vector_size(32)));

// One token's a [N] (stride as between sources) and w slots wt (stride ws):
// s_h relative to the pivot p = argmax_n w_{n,h}: with Σ_n w = 1,
// a_n − s = (a_n − a_p) − Σ_m w_m (a_m − a_p). When one source takes almost
// all the weight, a_p − s is tiny and Σ w a would lose it to cancellation
// (measured: 6e-3 relative error in dq for a saturated softmax). a becomes
// a − a_p (exactly 0 for n = p), s [H] = Σ_n w (a − a_p). Loops run over
// sources outside, heads inside: wt's source stride is a multiple of 4 KiB.
INLINE void pivot_sums(Tmp T, float *restrict a, size_t as, const float *restrict wt, size_t ws,
                       int n_src, int H) {
    // restrict copies: the scratch slices do not alias, which the compiler
    // cannot see through the struct.
    float *restrict best = T.best, *restrict ap = T.ap, *restrict s = T.s;
    int h0 = 0;
    // Eight heads at a time with explicit selects: written plainly, gcc emits
    // a compare and branch per (n, h) (measured: 8% of the backward).
    for (; h0 + 8 <= H; h0 += 8) {
        v8 b = {-1, -1, -1, -1, -1, -1, -1, -1}, p = {0};
        for (int n = 0; n < n_src; n++) {
            const v8 v = LOAD8(wt + n * ws + h0), an = LOAD8(a + n * as + h0);
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
            if (wt[n * ws + h] > b) b = wt[n * ws + h], p = a[n * as + h];
        best[h] = b, ap[h] = p;
    }
    for (int h = 0; h < H; h++) s[h] = 0;
    for (int n = 0; n < n_src; n++)
        for (int h = 0; h < H; h++) {
            a[n * as + h] -= ap[h];
            s[h] += wt[n * ws + h] * a[n * as + h];
        }
}

// One head slice [hw] of a source row, hw a multiple of 8: the products with
// qg and dx summed over the slice's vectors (lanes still apart, for
// hsum8x8), s² added into the lanes ss[4].
INLINE void slice_vec2(v8 *qv, v8 *dv, v8 ss[4], const float *restrict s, const float *restrict qg,
                       const float *restrict dx, int hw) {
    v8 qa[4] = {{0}}, da[4] = {{0}}; // set by the first vectors (zeros only for the compiler)
    for (int k = 0; k < hw; k += 8) {
        const int j = (k / 8) & 3;
        const v8 x = LOAD8(s + k), pq = LOAD8(qg + k) * x, pd = LOAD8(dx + k) * x;
        ss[j] += x * x;
        if (k < 32) qa[j] = pq, da[j] = pd;
        else qa[j] += pq, da[j] += pd;
    }
    v8 q = qa[0], r = da[0];
    for (int j = 1; j < 4 && 8 * j < hw; j++) q += qa[j], r += da[j];
    *qv = q, *dv = r;
}

// Source row S [d] of a token with gradient dxt: a, b [H], *rho.
INLINE void row_stats(float *restrict a, float *restrict b, float *rho, const float *restrict S,
                      const float *restrict dxt, const Args *A, int hw) {
    const int d = A->d, H = A->H;
    if (hw % 8 == 0) {
        v8 ss[4] = {{0}, {0}, {0}, {0}}, qv[8], dv[8];
        for (int h0 = 0; h0 < H; h0 += 8) {
            const int hc = H - h0 < 8 ? H - h0 : 8;
            for (int i = 0; i < hc; i++) {
                const int o = (h0 + i) * hw;
                slice_vec2(&qv[i], &dv[i], ss, S + o, A->qg + o, dxt + o, hw);
            }
            if (hc == 8) {
                hsum8x8(b + h0, qv);
                hsum8x8(a + h0, dv);
            } else
                for (int i = 0; i < hc; i++) b[h0 + i] = hsum8(&qv[i]), a[h0 + i] = hsum8(&dv[i]);
        }
        *rho = rms_inv(hsum4(ss), d, A->eps);
        return;
    }
    *rho = rms_inv(row_sumsq(S, d), d, A->eps);
    for (int h = 0; h < H; h++) {
        const int o = h * hw;
        b[h] = slice_dot2(S + o, A->qg + o, dxt + o, hw, &a[h]);
    }
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

// Tokens [t0, t1) = the tile; a, b, rho indexed [n][t - t0][h].
INLINE void backward_tile(Tmp T, const Args *A, int t0, int t1, int hw) {
    const int d = A->d, H = A->H, N = A->n_src, nt = t1 - t0;
    const size_t ws = (size_t)A->n_tok * H, as = (size_t)nt * H;
    // Pass 1, source by source: statistics; fetch the dS rows pass 2 updates.
    for (int n = 0; n < N; n++)
        for (int t = t0; t < t1; t++) {
            const size_t i = (size_t)n * nt + (t - t0);
            const float *S = src_row(A, n, t);
            prefetch_row_l2(dsrc_row(A, n, t), d, 1); // for pass 2
            row_stats(T.a + i * H, T.b + i * H, T.rho + i, S, A->dx + (size_t)t * d, A, hw);
        }
    // Per token: dℓ (over a), then c and β (into rho's slot as β, with u = ρ dℓ over a).
    for (int t = t0; t < t1; t++) {
        float *at = T.a + (size_t)(t - t0) * H, *bt = T.b + (size_t)(t - t0) * H;
        const float *wt = A->w + (size_t)t * H;
        pivot_sums(T, at, as, wt, ws, N, H);
        for (int n = 0; n < N; n++) {
            float *dl = at + n * as;
            const float *wn = wt + n * ws, *bn = bt + n * as;
            float c = 0; // ⟨g⊙dK_n, S_n⟩ / ρ_n
            for (int h = 0; h < H; h++) {
                dl[h] = wn[h] * (dl[h] - T.s[h]);
                c += dl[h] * bn[h];
            }
            float *rho = T.rho + (size_t)n * nt + (t - t0);
            const float r = *rho, beta = (r * c) * r * r / (float)d; // r·c first: bounded
            for (int h = 0; h < H; h++) dl[h] *= r; // u
            *rho = beta;
        }
    }
    // Pass 2, source by source: z and the dS rows.
    for (int n = 0; n < N; n++)
        for (int t = t0; t < t1; t++) {
            const size_t i = (size_t)n * nt + (t - t0);
            const float *S = src_row(A, n, t), *dxt = A->dx + (size_t)t * d;
            if (t + nt < A->n_tok) prefetch_row_l2(S + (size_t)nt * d, d, 0); // the next tile's
            const float *wn = A->w + (size_t)n * ws + (size_t)t * H, *u = T.a + i * H;
            float *dS = dsrc_row(A, n, t);
            const float beta = T.rho[i];
            for (int h = 0; h < H; h++) {
                const int o = h * hw;
                slice_grad(T.z + o, dS + o, S + o, dxt + o, A->qg + o, wn[h], u[h], beta, hw,
                           A->set_dsrc);
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
    const int hw = d / H, tile = route_tile_tokens(n_src, d), n_tiles = (n_tok + tile - 1) / tile;
#pragma omp parallel
    {
        const int nthr = omp_get_num_threads();
        const Tmp T = thread_tmp(scratch + (size_t)omp_get_thread_num() * per, n_src, d, H);
        memset(T.z, 0, (size_t)d * sizeof(float));
#pragma omp for schedule(static)
        for (int i = 0; i < n_tiles; i++) {
            const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define BWD(HW) backward_tile(T, &A, t0, t1, HW)
            DISPATCH_HW(hw, BWD)
#undef BWD
        }
        // Implicit barrier above; reduce the partials in fixed thread order.
#pragma omp for schedule(static)
        for (int k = 0; k < d; k++) add_key_grads(dq, dg, q, g, scratch, per, nthr, k);
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
