// RoPE and grouped-query causal attention.
// Attention runs one OpenMP task per (batch, head) forward and per
// (batch, kv head) backward; inside a task every product is a cblas_sgemm,
// which OpenBLAS (openmp build) runs single-threaded inside a parallel region.
// Rows are processed in blocks of ATT_BLOCK so the products only cover the
// causal (lower) part plus the diagonal blocks instead of the full T×T square.
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/ops.h"
#include "vmath.h"

enum { ATT_BLOCK = 64 };

// ---- RoPE ------------------------------------------------------------------------

// -> cos_t, sin_t [max_pos, hd/2], angle = pos · inv_freq[j], in double so
// large positions keep full float accuracy.
void rope_table(OpsContext *ctx, float *cos_t, float *sin_t, int max_pos, int hd, const double *inv_freq) {
    (void)ctx;
    int half = hd / 2;
    for (int j = 0; j < half; j++) {
        for (int p = 0; p < max_pos; p++) {
            double a = p * inv_freq[j];
            cos_t[(size_t)p * half + j] = (float)cos(a);
            sin_t[(size_t)p * half + j] = (float)sin(a);
        }
    }
}

// x1, x2 [half]: (x1, x2) <- (x1·c − x2·s, x2·c + x1·s); sg = −1 gives the
// transpose (inverse) rotation.
static inline void rotate_half(float *restrict x1, float *restrict x2,
                               const float *restrict c, const float *restrict s,
                               float sg, int half) {
    for (int j = 0; j < half; j++) {
        float a = x1[j], b = x2[j], sn = sg * s[j];
        x1[j] = a * c[j] - b * sn;
        x2[j] = b * c[j] + a * sn;
    }
}

// x [B, T, n_heads, hd] in place; token t has position pos0 + t.
static void rope_apply(float *x, int B, int T, int n_heads, int hd, int pos0,
                       const float *cos_t, const float *sin_t, float sg) {
    int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (long bt = 0; bt < (long)B * T; bt++) {
        size_t pos = (size_t)(pos0 + (int)(bt % T));
        const float *c = cos_t + pos * half, *s = sin_t + pos * half;
        float *row = x + (size_t)bt * n_heads * hd;
        for (int h = 0; h < n_heads; h++)
            rotate_half(row + (size_t)h * hd, row + (size_t)h * hd + half, c, s, sg, half);
    }
}

// x [B, T, n_heads, hd], in place
void rope_forward(OpsContext *ctx, float *x, int B, int T, int n_heads, int hd, int pos0,
                  const float *cos_t, const float *sin_t) {
    (void)ctx;
    rope_apply(x, B, T, n_heads, hd, pos0, cos_t, sin_t, 1.0f);
}

// dx [B, T, n_heads, hd], in place: the rotation is orthogonal, so its
// transpose is the rotation by −angle.
void rope_backward(OpsContext *ctx, float *dx, int B, int T, int n_heads, int hd, int pos0,
                   const float *cos_t, const float *sin_t) {
    (void)ctx;
    rope_apply(dx, B, T, n_heads, hd, pos0, cos_t, sin_t, -1.0f);
}

// ---- attention forward -------------------------------------------------------------

// p [T]: softmax over p[0..n) in place, p[n..T) set to 0 (causal mask).
static void softmax_causal_row(float *restrict p, int n, int T) {
    float m = -INFINITY, s = 0.0f;
SIMD_MAX_M
    for (int j = 0; j < n; j++) m = p[j] > m ? p[j] : m;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; j++) {
        float e = vexp(p[j] - m);
        p[j] = e;
        s += e;
    }
    float inv = 1.0f / s;
    for (int j = 0; j < n; j++) p[j] *= inv;
    memset(p + n, 0, sizeof(float) * (size_t)(T - n));
}

// One (batch, head): Q [T, hd] (row stride ldq), K, V [T, hd] (stride ldk)
// -> P [T, T] (row stride T), Y [T, hd] (stride ldq).
static void attention_head_forward(float *Y, float *P, const float *Q, const float *K,
                                   const float *V, int T, int hd, int ldq, int ldk) {
    float scale = 1.0f / sqrtf((float)hd);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
        // S[r0:r1, 0:r1] = scale · Q[r0:r1] · K[0:r1]ᵀ (later columns are masked)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hd, scale,
                    Q + (size_t)r0 * ldq, ldq, K, ldk, 0.0f, P + (size_t)r0 * T, T);
        for (int i = r0; i < r1; i++) softmax_causal_row(P + (size_t)i * T, i + 1, T);
        // Y[r0:r1] = P[r0:r1, 0:r1] · V[0:r1]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, r1, 1.0f,
                    P + (size_t)r0 * T, T, V, ldk, 0.0f, Y + (size_t)r0 * ldq, ldq);
    }
}

// q [B, T, nh, hd], k, v [B, T, nkv, hd] -> y [B, T, nh, hd], att [B, nh, T, T]
void attention_forward(OpsContext *ctx, float *y, float *att, const float *q, const float *k,
                       const float *v, int B, int T, int nh, int nkv, int hd) {
    (void)ctx;
    int rep = nh / nkv, ldq = nh * hd, ldk = nkv * hd;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * nh; bh++) {
        int b = bh / nh, h = bh % nh;
        size_t qo = (size_t)b * T * ldq + (size_t)h * hd;
        size_t ko = (size_t)b * T * ldk + (size_t)(h / rep) * hd;
        attention_head_forward(y + qo, att + (size_t)bh * T * T, q + qo, k + ko, v + ko, T,
                               hd, ldq, ldk);
    }
}

// ---- attention backward ------------------------------------------------------------

// One dS row, in place over the dP row d [n + pad]: d_j <- p_j·(d_j − ⟨d, p⟩)
// for j < n, then pad zeros (the rest of the diagonal block).
static void softmax_grad_row(float *restrict d, const float *restrict p, int n, int pad) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++) dot += d[j] * p[j];
    for (int j = 0; j < n; j++) d[j] = p[j] * (d[j] - dot);
    memset(d + n, 0, sizeof(float) * (size_t)pad);
}

// One query head: dY, Q [T, hd] (stride ldq), K, V (stride ldk), P [T, T]
// -> dQ (stride ldq, overwritten), dS [T, T] (scratch; lower part written).
static void attention_head_dq(float *dQ, float *dS, const float *dY, const float *P,
                              const float *K, const float *V, int T, int hd, int ldq,
                              int ldk) {
    float scale = 1.0f / sqrtf((float)hd);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
        // dP[r0:r1, 0:r1] = dY[r0:r1] · V[0:r1]ᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hd, 1.0f,
                    dY + (size_t)r0 * ldq, ldq, V, ldk, 0.0f, dS + (size_t)r0 * T, T);
        for (int i = r0; i < r1; i++)
            softmax_grad_row(dS + (size_t)i * T, P + (size_t)i * T, i + 1, r1 - i - 1);
        // dQ[r0:r1] = scale · dS[r0:r1, 0:r1] · K[0:r1]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, r1, scale,
                    dS + (size_t)r0 * T, T, K, ldk, 0.0f, dQ + (size_t)r0 * ldq, ldq);
    }
}

// One query head's share of its kv head: dK (+)= scale · dSᵀ · Q, dV (+)= Pᵀ · dY,
// by column blocks [c0, c1), which only rows ≥ c0 reach. beta 0 overwrites.
static void attention_head_dkv(float *dK, float *dV, const float *dS, const float *P,
                               const float *Q, const float *dY, int T, int hd, int ldq,
                               int ldk, float beta) {
    float scale = 1.0f / sqrtf((float)hd);
    for (int c0 = 0; c0 < T; c0 += ATT_BLOCK) {
        int n = c0 + ATT_BLOCK < T ? ATT_BLOCK : T - c0;
        size_t pc = (size_t)c0 * T + c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, T - c0, 1.0f, P + pc, T,
                    dY + (size_t)c0 * ldq, ldq, beta, dV + (size_t)c0 * ldk, ldk);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, T - c0, scale, dS + pc,
                    T, Q + (size_t)c0 * ldq, ldq, beta, dK + (size_t)c0 * ldk, ldk);
    }
}

// Floats of scratch attention_backward needs: one [T, T] dS buffer per
// (batch, kv head), the task that owns it (its query heads reuse it in turn).
size_t attention_scratch_floats(int B, int T, int nkv) {
    return (size_t)B * nkv * T * T;
}

// dy [B, T, nh, hd], att [B, nh, T, T], q [B, T, nh, hd], k, v [B, T, nkv, hd]
// -> dq [B, T, nh, hd], dk, dv [B, T, nkv, hd] (all overwritten).
// One task per (batch, kv head): it owns dk/dv of that head and sums its
// query heads in fixed order, so there are no races and no atomics.
void attention_backward(OpsContext *ctx, float *dq, float *dk, float *dv, float *scratch,
                        const float *dy, const float *att, const float *q,
                        const float *k, const float *v, int B, int T, int nh,
                        int nkv, int hd) {
    (void)ctx;
    int rep = nh / nkv, ldq = nh * hd, ldk = nkv * hd;
#pragma omp parallel for schedule(static)
    for (int bg = 0; bg < B * nkv; bg++) {
        int b = bg / nkv, g = bg % nkv;
        size_t ko = (size_t)b * T * ldk + (size_t)g * hd;
        float *dS = scratch + (size_t)bg * T * T;   // this task's own block
        for (int r = 0; r < rep; r++) {
            int h = g * rep + r;
            size_t qo = (size_t)b * T * ldq + (size_t)h * hd;
            const float *P = att + ((size_t)b * nh + h) * T * T;
            attention_head_dq(dq + qo, dS, dy + qo, P, k + ko, v + ko, T, hd, ldq, ldk);
            attention_head_dkv(dk + ko, dv + ko, dS, P, q + qo, dy + qo, T, hd, ldq, ldk,
                               r ? 1.0f : 0.0f);
        }
    }
}

// ---- decoding: one new token against the KV cache ---------------------------------

// q [nh, hd], k_cache, v_cache [n_pos, nkv, hd] -> y [nh, hd]; scores [n_pos]
// scratch. One token's work is small: a single thread.
void attention_decode(OpsContext *ctx, float *y, float *scores, const float *q, const float *k_cache,
                      const float *v_cache, int n_pos, int nh, int nkv, int hd) {
    (void)ctx;
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
