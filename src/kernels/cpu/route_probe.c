// Reading routing distributions after the fact: statistics of the weights a
// forward pass saved, and the probes of SPEC §4, which recompute the slice
// distributions of one query in double (analysis/probe.h says what they mean).
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "context.h"

static inline const float *row(RouteSources S, int n) {
    return S.tail && n == S.n - 1 ? S.tail : S.base + (size_t)n * S.stride;
}

// Per head: entropy, weight on source 0 and on the last source, summed over
// tokens in token order. Threads split the heads, not the tokens: libgomp
// combines an OpenMP reduction's partials in the order threads finish, so
// on a loaded machine a token split gave different bits run to run.
void route_weight_stats(OpsContext *ctx, double *entropy, double *first, double *last, const float *w,
                        int n_src, int n_tok, int H) {
    OPS_TIMED(ctx);
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double ent = 0, f = 0, l = 0;
        for (int t = 0; t < n_tok; t++) {
            for (int k = 0; k < n_src; k++) {
                double p = w[((size_t)k * n_tok + t) * H + h];
                if (p > 0) ent -= p * log(p);
            }
            f += w[(size_t)t * H + h];
            l += w[((size_t)(n_src - 1) * n_tok + t) * H + h];
        }
        entropy[h] += ent;
        first[h] += f;
        last[h] += l;
    }
}

// Slice logits of token t: lg[s·N + n] = ρ_n Σ_{k ∈ slice s} q_k g_k S_{n,k}.
static void slice_logits(double *lg, RouteSources S, size_t t, const float *q, const float *g, int d, int slices,
                         float eps) {
    const int w = d / slices, N = S.n;
    for (int n = 0; n < N; n++) {
        const float *x = row(S, n) + t * (size_t)d;
        double ss = 0;
        for (int k = 0; k < d; k++) ss += (double)x[k] * x[k];
        double rho = 1.0 / sqrt(ss / d + eps);
        for (int s = 0; s < slices; s++) {
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

void route_probe_width(OpsContext *ctx, double *out, RouteSources S, const float *q, const float *g,
                       int n_tok, int d, int slices, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int N = S.n;
#pragma omp parallel
    {
        double *lg = malloc(sizeof(double) * (size_t)(slices + 1) * N), *full = lg ? lg + (size_t)slices * N : NULL;
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            if (!lg) { out[t] = NAN; continue; }
            slice_logits(lg, S, (size_t)t, q, g, d, slices, eps);
            for (int n = 0; n < N; n++) {
                full[n] = 0;
                for (int s = 0; s < slices; s++) full[n] += lg[(size_t)s * N + n];
            }
            log_softmax(full, N);
            double sum = 0;
            for (int s = 0; s < slices; s++) {
                log_softmax(lg + (size_t)s * N, N);
                sum += kl(lg + (size_t)s * N, full, N);
            }
            out[t] = sum / slices;
        }
        free(lg);
    }
}

void route_probe_heads(OpsContext *ctx, double *out, RouteSources S, const float *q, const float *g,
                       int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int N = S.n;
#pragma omp parallel
    {
        double *lg = malloc(sizeof(double) * (size_t)(H + 1) * N), *mean = lg ? lg + (size_t)H * N : NULL;
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            if (!lg) { for (int h = 0; h < H; h++) out[(size_t)t * H + h] = NAN; continue; }
            slice_logits(lg, S, (size_t)t, q, g, d, H, eps);
            for (int n = 0; n < N; n++) mean[n] = 0;
            for (int h = 0; h < H; h++) {
                log_softmax(lg + (size_t)h * N, N);
                for (int n = 0; n < N; n++) mean[n] += exp(lg[(size_t)h * N + n]) / H;
            }
            for (int n = 0; n < N; n++) mean[n] = log(mean[n]);
            for (int h = 0; h < H; h++) out[(size_t)t * H + h] = kl(lg + (size_t)h * N, mean, N);
        }
        free(lg);
    }
}

double route_probe_weight_error(OpsContext *ctx, const float *w, RouteSources S, const float *q,
                                const float *g, int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int N = S.n;
    double worst = 0;
    double *lg = malloc(sizeof(double) * (size_t)H * N);
    if (!lg) return INFINITY;
    for (int t = 0; t < n_tok; t++) {
        slice_logits(lg, S, (size_t)t, q, g, d, H, eps);
        for (int h = 0; h < H; h++) {
            log_softmax(lg + (size_t)h * N, N);
            for (int n = 0; n < N; n++) {
                double e = fabs(exp(lg[(size_t)h * N + n]) - w[((size_t)n * n_tok + t) * H + h]);
                if (!(e <= worst)) worst = e;  // NaN sticks
            }
        }
    }
    free(lg);
    return worst;
}
