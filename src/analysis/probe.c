#include "probe.h"

#include <math.h>
#include <stdlib.h>

// Slice logits of token t: lg[s·N + n] = ρ_n Σ_{k ∈ slice s} q_k g_k S_{n,k}.
static void slice_logits(double *lg, const float *const *src, int N, size_t t, const float *q, const float *g,
                         int d, int S, float eps) {
    int w = d / S;
    for (int n = 0; n < N; n++) {
        const float *x = src[n] + t * (size_t)d;
        double ss = 0;
        for (int k = 0; k < d; k++) ss += (double)x[k] * x[k];
        double rho = 1.0 / sqrt(ss / d + eps);
        for (int s = 0; s < S; s++) {
            double dot = 0;
            for (int k = s * w; k < (s + 1) * w; k++) dot += (double)q[k] * g[k] * x[k];
            lg[(size_t)s * N + n] = rho * dot;
        }
    }
}

// In place: logits -> log-softmax, as (x - max) - log Σ exp(x - max), so
// logits equal over the sources give exactly -log n whatever their value
// (two such distributions then have a KL of exactly 0).
static void log_softmax(double *x, int n) {
    double mx = x[0], z = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) z += exp(x[i] - mx);
    double lz = log(z);
    for (int i = 0; i < n; i++) x[i] = (x[i] - mx) - lz;
}

// KL(p ‖ r) from log-probabilities.
static double kl(const double *lp, const double *lr, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += exp(lp[i]) * (lp[i] - lr[i]);
    return s;
}

// One token's measure into out[0..blocks) or out[0], with scratch lg of
// (blocks + 1)·N doubles.
typedef void (*TokenMeasure)(double *out, double *lg, const float *const *src, int N, size_t t, const float *q,
                             const float *g, int d, int blocks, float eps);

// The one parallel loop of the analysis code: fn over the tokens [0, n_tok),
// each thread with its own scratch; out_per outputs per token (NaN when the
// scratch cannot be had). This is compute that belongs behind kernels/ops.h
// and moves there with the backend redesign.
static void probe_token_loop(TokenMeasure fn, double *out, int out_per, const float *const *src, int n_src, int n_tok,
                             const float *q, const float *g, int d, int blocks, float eps) {
#pragma omp parallel
    {
        double *lg = malloc(sizeof(double) * (size_t)(blocks + 1) * n_src);
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            double *o = out + (size_t)t * out_per;
            if (!lg) { for (int i = 0; i < out_per; i++) o[i] = NAN; continue; }
            fn(o, lg, src, n_src, (size_t)t, q, g, d, blocks, eps);
        }
        free(lg);
    }
}

// (1/S) Σ_s KL(a_s ‖ α) of token t.
static void width_disagreement_token(double *out, double *lg, const float *const *src, int n_src, size_t t,
                                     const float *q, const float *g, int d, int S, float eps) {
    double *full = lg + (size_t)S * n_src;
    slice_logits(lg, src, n_src, t, q, g, d, S, eps);
    for (int n = 0; n < n_src; n++) {
        full[n] = 0;
        for (int s = 0; s < S; s++) full[n] += lg[(size_t)s * n_src + n];
    }
    log_softmax(full, n_src);
    double sum = 0;
    for (int s = 0; s < S; s++) {
        log_softmax(lg + (size_t)s * n_src, n_src);
        sum += kl(lg + (size_t)s * n_src, full, n_src);
    }
    out[0] = sum / S;
}

// KL(w_h ‖ w̄) of token t for every head h.
static void head_deviation_token(double *out, double *lg, const float *const *src, int n_src, size_t t,
                                 const float *q, const float *g, int d, int H, float eps) {
    double *mean = lg + (size_t)H * n_src;
    slice_logits(lg, src, n_src, t, q, g, d, H, eps);
    for (int n = 0; n < n_src; n++) mean[n] = 0;
    for (int h = 0; h < H; h++) {
        log_softmax(lg + (size_t)h * n_src, n_src);
        for (int n = 0; n < n_src; n++) mean[n] += exp(lg[(size_t)h * n_src + n]) / H;
    }
    for (int n = 0; n < n_src; n++) mean[n] = log(mean[n]);
    for (int h = 0; h < H; h++) out[h] = kl(lg + (size_t)h * n_src, mean, n_src);
}

void probe_width_disagreement(double *out, const float *const *src, int n_src, int n_tok, const float *q,
                              const float *g, int d, int S, float eps) {
    probe_token_loop(width_disagreement_token, out, 1, src, n_src, n_tok, q, g, d, S, eps);
}

void probe_head_deviation(double *out, const float *const *src, int n_src, int n_tok, const float *q,
                          const float *g, int d, int H, float eps) {
    probe_token_loop(head_deviation_token, out, H, src, n_src, n_tok, q, g, d, H, eps);
}

double probe_max_weight_error(const float *w, const float *const *src, int n_src, int n_tok, const float *q,
                              const float *g, int d, int H, float eps) {
    double worst = 0;
    double *lg = malloc(sizeof(double) * (size_t)H * n_src);
    if (!lg) return INFINITY;
    for (int t = 0; t < n_tok; t++) {
        slice_logits(lg, src, n_src, (size_t)t, q, g, d, H, eps);
        for (int h = 0; h < H; h++) {
            log_softmax(lg + (size_t)h * n_src, n_src);
            for (int n = 0; n < n_src; n++) {
                double e = fabs(exp(lg[(size_t)h * n_src + n]) - w[((size_t)n * n_tok + t) * H + h]);
                if (!(e <= worst)) worst = e;  // NaN sticks
            }
        }
    }
    free(lg);
    return worst;
}

void probe_random_query(float *out, const float *q, int d, int blocks, Rng *rng) {
    int w = d / blocks;
    for (int b = 0; b < blocks; b++) {
        const float *qb = q + (size_t)b * w;
        float *ob = out + (size_t)b * w;
        double nq = 0, nz = 0;
        for (int k = 0; k < w; k++) {
            nq += (double)qb[k] * qb[k];
            ob[k] = rng_normal(rng);
            nz += (double)ob[k] * ob[k];
        }
        double scale = nz > 0 ? sqrt(nq / nz) : 0;
        for (int k = 0; k < w; k++) ob[k] = (float)(ob[k] * scale);
    }
}
