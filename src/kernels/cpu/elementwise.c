// Embedding, SwiGLU, softmax cross-entropy, vector and row helpers, AdamW, the weights' EMA.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/ops.h"
#include "context.h"
#include "vmath.h"

// Loops shorter than this run on one thread: a fork costs more than the work.
#define PAR_MIN 32768

// ---- embedding ----------------------------------------------------------------

// tokens [n], emb [V, d] -> out [n, d]
void embedding_forward(OpsContext *ctx, float *restrict out, const int *restrict tokens,
                       const float *restrict emb, int n, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * d, emb + (size_t)tokens[i] * d, sizeof(float) * (size_t)d);
}

// dout [n, d] -> demb [V, d] (accumulates). Threads split the d columns and
// each walks all tokens in order, so repeated tokens are summed in a fixed
// order without atomics, whatever the thread count.
void embedding_backward(OpsContext *ctx, float *restrict demb, const float *restrict dout,
                        const int *restrict tokens, int n, int d, int V) {
    OPS_TIMED(ctx);
    (void)ctx;
    (void)V; // tokens are assumed to lie in [0, V)
    enum { TILE = 64 };
    int ntiles = (d + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if ((size_t)n * d >= PAR_MIN)
    for (int t = 0; t < ntiles; t++) {
        int j0 = t * TILE, nj = d - j0 < TILE ? d - j0 : TILE;
        for (int i = 0; i < n; i++) {
            float *dst = demb + (size_t)tokens[i] * d + j0;
            const float *src = dout + (size_t)i * d + j0;
            for (int j = 0; j < nj; j++) dst[j] += src[j];
        }
    }
}

// ---- SwiGLU: h = silu(gate) ⊙ up, silu(x) = x·sigmoid(x) ----------------------

// gate_up [rows, 2f] -> h [rows, f]
void swiglu_forward(OpsContext *ctx, float *restrict h, const float *restrict gate_up, int rows, int f) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static) if ((size_t)rows * f >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *restrict gate = gate_up + (size_t)r * 2 * f, *restrict up = gate + f;
        float *restrict hr = h + (size_t)r * f;
#pragma omp simd
        for (int i = 0; i < f; i++) {
            float g = gate[i], s = 1.0f / (1.0f + vexp(-g));
            hr[i] = g * s * up[i];
        }
    }
}

// dh [rows, f], gate_up [rows, 2f] -> dgate_up [rows, 2f] (overwritten).
// silu'(g) = s·(1 + g·(1 − s)) with s = sigmoid(g).
void swiglu_backward(OpsContext *ctx, float *restrict dgate_up, const float *restrict dh,
                     const float *restrict gate_up, int rows, int f) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static) if ((size_t)rows * f >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *restrict gate = gate_up + (size_t)r * 2 * f, *restrict up = gate + f;
        const float *restrict dhr = dh + (size_t)r * f;
        float *restrict dgate = dgate_up + (size_t)r * 2 * f, *restrict dup = dgate + f;
#pragma omp simd
        for (int i = 0; i < f; i++) {
            float g = gate[i], s = 1.0f / (1.0f + vexp(-g));
            dgate[i] = dhr[i] * up[i] * s * (1.0f + g * (1.0f - s));
            dup[i] = dhr[i] * g * s;
        }
    }
}

// ---- softmax cross-entropy ------------------------------------------------------

static inline float row_max(const float *restrict x, int V) {
    float m = -INFINITY;
SIMD_MAX_M
    for (int j = 0; j < V; j++) m = x[j] > m ? x[j] : m;
    return m;
}

// Σ_j exp(x[j] − m) over a row of V. Float sums over blocks of 256 vectorise (16 terms per
// lane, ~1e-6 relative); the blocks add up in double, so the error does not
// grow with V.
enum { SUM_BLK = 256 };
static double row_sumexp(const float *restrict x, int V, float m) {
    double s = 0.0;
    for (int j0 = 0; j0 < V; j0 += SUM_BLK) {
        int n = V - j0 < SUM_BLK ? V - j0 : SUM_BLK;
        float part = 0.0f;
#pragma omp simd reduction(+ : part)
        for (int j = j0; j < j0 + n; j++) part += vexp(x[j] - m);
        s += part;
    }
    return s;
}

// logits [n, V], targets [n] -> losses [n] = logsumexp(row) − row[target],
// lse [n] = logsumexp(row) when asked (xent_backward needs it). Returns Σ losses, summed in row order
// (deterministic).
double xent_forward(OpsContext *ctx, float *restrict losses, float *restrict lse, const float *restrict logits,
                    const int *restrict targets, int n, int V) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *x = logits + (size_t)i * V;
        float m = row_max(x, V);
        double s = row_sumexp(x, V, m);
        losses[i] = (float)(log(s) + (double)m - (double)x[targets[i]]);
        if (lse) lse[i] = (float)(log(s) + (double)m);
    }
    double total = 0.0;
    for (int i = 0; i < n; i++) total += losses[i];
    return total;
}

// logits [n, V], targets [n] -> logp [n] = x[target] − max − log Σ exp(x − max)
void token_logprobs(OpsContext *ctx, double *restrict logp, const float *restrict logits,
                    const int *restrict targets, int n, int V) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *x = logits + (size_t)i * V;
        float m = row_max(x, V);
        logp[i] = (double)x[targets[i]] - (double)m - log(row_sumexp(x, V, m));
    }
}

// logits [n, V], targets [n], lse [n] (xent_forward's) -> dlogits [n, V] =
// exp(logits − lse)·(scale + 2·z_scale·lse) − scale·onehot: the gradient of
// scale·Σ losses + z_scale·Σ lse² (z-loss). With the forward's lse each row
// is one pass, read, exp, write, instead of three (max, exp and sum, scale):
// the logits are the step's largest activation. dlogits may alias logits
// (elementwise, same index).
void xent_backward(OpsContext *ctx, float *dlogits, const float *logits, const float *lse, const int *targets, int n,
                   int V, float scale, float z_scale) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *z = dlogits + (size_t)i * V;
        const float *x = logits + (size_t)i * V;
        const float L = lse[i], w = scale + 2.0f * z_scale * L;   // the softmax's weight
#pragma omp simd
        for (int j = 0; j < V; j++) z[j] = vexp(x[j] - L) * w;
        z[targets[i]] -= scale;
    }
}

// ---- vector helpers ---------------------------------------------------------------

// out = a + b, all [n]; out may alias a or b (elementwise, same index)
void vec_add(OpsContext *ctx, float *out, const float *a, const float *b, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// out += a, both [n]
void vec_acc(OpsContext *ctx, float *restrict out, const float *restrict a, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] += a[i];
}

// out += s·a, both [n]
void vec_scale_acc(OpsContext *ctx, float *restrict out, const float *restrict a, float s, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] += s * a[i];
}

// Thread t's piece [*lo, *hi) of n floats: one contiguous piece each, in
// whole 64-byte lines.
static void thread_piece(size_t n, size_t *lo, size_t *hi) {
    const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t per = (n / nt + 15) / 16 * 16;
    *lo = t * per < n ? t * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}

// A large buffer (the gradients, the source gradients: ~100 MB a step at
// micro) is cleared or copied by every thread, one contiguous piece each:
// one core's stores do not reach the memory's write bandwidth (a 4 MB row
// of micro's source gradients, caches flushed: 0.58-0.60 ms by one thread,
// 0.34-0.37 by two).
enum { SPLIT_MIN = 16 * PAR_MIN };

// out = a, [n]
void vec_copy(OpsContext *ctx, float *restrict out, const float *restrict a, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (out == a) return;
    if (n < SPLIT_MIN) {
        memcpy(out, a, n * sizeof(float));
        return;
    }
#pragma omp parallel
    {
        size_t lo, hi;
        thread_piece(n, &lo, &hi);
        memcpy(out + lo, a + lo, (hi - lo) * sizeof(float));
    }
}

// out = 0 [n]
void vec_zero(OpsContext *ctx, float *out, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (n < SPLIT_MIN) {
        memset(out, 0, n * sizeof(float));
        return;
    }
#pragma omp parallel
    {
        size_t lo, hi;
        thread_piece(n, &lo, &hi);
        memset(out + lo, 0, (hi - lo) * sizeof(float));
    }
}

// out += a + b, all [n]
void vec_acc2(OpsContext *ctx, float *restrict out, const float *restrict a, const float *restrict b, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] += a[i] + b[i];
}

// out = a + s·b, all [n]
void vec_axpy(OpsContext *ctx, float *restrict out, const float *restrict a, float s, const float *restrict b,
              size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + s * b[i];
}

// out [rows, d] = row [d] at every row
void rows_broadcast(OpsContext *ctx, float *restrict out, const float *restrict row, int rows, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static) if ((size_t)rows * d >= PAR_MIN)
    for (int t = 0; t < rows; t++) memcpy(out + (size_t)t * d, row, sizeof(float) * d);
}

// dsum [d] += Σ_r in[r, :]: each task owns TILE columns (one cache line) and
// walks the rows in order, in double: deterministic for any thread count.
void rows_sum(OpsContext *ctx, float *restrict dsum, const float *restrict in, int rows, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
    enum { TILE = 16 };
    const int tiles = (d + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if ((size_t)rows * d >= PAR_MIN)
    for (int i = 0; i < tiles; i++) {
        const int k0 = i * TILE, nk = d - k0 < TILE ? d - k0 : TILE;
        double acc[TILE] = {0};
        for (int t = 0; t < rows; t++)
            for (int k = 0; k < nk; k++) acc[k] += in[(size_t)t * d + k0 + k];
        for (int k = 0; k < nk; k++) dsum[k0 + k] += (float)acc[k];
    }
}

// Σ a² in fixed chunks summed in order: the same bits whatever the thread
// count. Within a block, SQ_LANES running sums (element lo + i to lane
// i mod SQ_LANES), added in lane order, then the tail: one double chain was bound by the add's latency (micro's 8.4M
// gradients: 2.3 ms a step); the lanes are fixed by the code, so the bits do
// not depend on how the compiler vectorises them.
enum { SQ_LANES = 8 };
void sum_squares(OpsContext *ctx, double *out, const float *a, size_t n, size_t block) {
    OPS_TIMED(ctx);
    (void)ctx;
    const size_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        const size_t lo = b * block, hi = lo + block < n ? lo + block : n, whole = lo + (hi - lo) / SQ_LANES * SQ_LANES;
        double lane[SQ_LANES] = {0};
        for (size_t i = lo; i < whole; i += SQ_LANES)
            for (int k = 0; k < SQ_LANES; k++) lane[k] += (double)a[i + k] * a[i + k];
        double acc = 0;
        for (int k = 0; k < SQ_LANES; k++) acc += lane[k];
        for (size_t i = whole; i < hi; i++) acc += (double)a[i] * a[i];
        out[b] = acc;
    }
}

// ---- AdamW ------------------------------------------------------------------------

// One element's step; `shrink` is 1 (exact) for an element that is not decayed.
static inline void adamw_element(float *restrict p, float *restrict m, float *restrict v, float g, float shrink,
                                 AdamWStep s, float step_size) {
    *p *= shrink;
    *m = s.beta1 * *m + (1.0f - s.beta1) * g;
    *v = s.beta2 * *v + (1.0f - s.beta2) * g * g;
    *p -= step_size * *m / (sqrtf(*v) / s.bc2_sqrt + s.eps);
}

// Two loops, with and without a decay mask, so that each vectorises (a
// branch on the mask pointer inside the loop would not); sqrtf vectorises
// because this file is built with -fno-math-errno (v ≥ 0: no error to set).
void adamw_update(OpsContext *ctx, float *restrict p, float *restrict m, float *restrict v,
                  const float *restrict g, const unsigned char *restrict decay, size_t n, AdamWStep s) {
    OPS_TIMED(ctx);
    (void)ctx;
    const float step_size = s.lr / s.bc1, shrink = 1.0f - s.lr * s.weight_decay;
    if (decay) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            adamw_element(p + i, m + i, v + i, g[i] * s.grad_scale, decay[i] ? shrink : 1.0f, s, step_size);
    } else {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) adamw_element(p + i, m + i, v + i, g[i] * s.grad_scale, shrink, s, step_size);
    }
}

void ema_update(OpsContext *ctx, float *restrict ema, const float *restrict p, float decay, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    const float rest = 1.0f - decay;
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) ema[i] = decay * ema[i] + rest * p[i];
}
