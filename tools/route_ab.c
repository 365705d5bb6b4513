// Paired A/B of two builds of the route kernels in one process (tools/route_ab.sh
// builds it): on this kind of shared 2-core machine whole-run timings drift
// by ±20% within minutes, so two binaries timed one after the other cannot
// show a 5% change. Here each round times A and B back to back, in
// alternating order, on rotating copies of the problem (together past the
// last-level cache, as the model's sources are), and the medians of the
// per-round ratios B/A are printed. An A/A build reads within ~0.95-1.0 on
// the forward (code placement), so only larger ratios mean anything.
//   route_ab [H] [rounds] [tokens] [chain]: micro's final read, 17 sources x
//   d 256; tokens < 4096 repeats calls over that many tokens (held in
//   cache); chain 1 times the model's 17 reads instead (read s over sources
//   0..s, backward in reverse), where most reads have few sources.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/ops.h"
#include "ab_common.h"

#define KERNELS(V)                                                                                              \
    void route_forward_##V(OpsContext *, float *, float *, float *, RouteSources, const float *, const float *, \
                           int, int, int, float);                                                             \
    void route_backward_##V(OpsContext *, RouteGrads, float *, float *, float *, const float *, const float *, \
                            RouteSources, const float *, const float *, int, int, int, float);                \
    size_t route_scratch_floats_##V(OpsContext *, int, int, int);
KERNELS(A)
KERNELS(B)

enum { MAX_ROUNDS = 1000, COPIES = 4 };

int main(int argc, char **argv) {
    const int H = argc > 1 ? atoi(argv[1]) : 8, R = argc > 2 ? atoi(argv[2]) : 40;
    const int n = argc > 3 ? atoi(argv[3]) : 4096, chain = argc > 4 ? atoi(argv[4]) : 0, N = 17, d = 256;
    if (H <= 0 || d % H || R <= 0 || R > MAX_ROUNDS || n <= 0 || n > 4096 || 4096 % n || (chain != 0 && chain != 1)) {
        fprintf(stderr, "usage: route_ab [H dividing 256] [rounds <= %d] [tokens dividing 4096] [chain 0|1]\n",
                MAX_ROUNDS);
        return 2;
    }
    const int reps = 4096 / n, copies = n == 4096 ? COPIES : 1;
    // As the model lays them out: rows at its stride (route_row_floats), in
    // ops_alloc's memory (2 MiB pages where granted), zeroed.
    const size_t row = (size_t)n * d, stride = route_row_floats(n, d);
    OpsContext *ctx = ops_open();
    if (!ctx) return 1;
    float *src[COPIES], *dsrc[COPIES];
    for (int c = 0; c < copies; c++)
        src[c] = ops_alloc(ctx, sizeof(float) * N * stride), dsrc[c] = ops_alloc(ctx, sizeof(float) * N * stride);
    float *x = ops_alloc(ctx, sizeof(float) * row), *dx = ops_alloc(ctx, sizeof(float) * row);
    float *w = ops_alloc(ctx, sizeof(float) * N * (size_t)n * H), *q = ops_alloc(ctx, sizeof(float) * d);
    float *g = ops_alloc(ctx, sizeof(float) * d), *dq = ops_alloc(ctx, sizeof(float) * d);
    float *dg = ops_alloc(ctx, sizeof(float) * d);
    const size_t sa = route_scratch_floats_A(NULL, N, d, H), sb = route_scratch_floats_B(NULL, N, d, H);
    float *scratch = ops_alloc(ctx, sizeof(float) * (sa > sb ? sa : sb));
    if (!x || !dx || !w || !q || !g || !dq || !dg || !scratch) { fprintf(stderr, "out of memory\n"); return 1; }
    srand(1);
    for (int c = 0; c < copies; c++) {
        if (!src[c] || !dsrc[c]) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < N * stride; i++) src[c][i] = uniform();
    }
    for (size_t i = 0; i < row; i++) dx[i] = uniform();
    for (int i = 0; i < d; i++) q[i] = 0.5f * uniform(), g[i] = 1 + 0.1f * uniform();
    static double fwd[2][MAX_ROUNDS], bwd[2][MAX_ROUNDS], rf[MAX_ROUNDS], rb[MAX_ROUNDS];
    int cp = 0;
    for (int r = -2; r < R; r++) {   // two untimed rounds first
        double tf[2], tb[2];
        for (int o = 0; o < 2; o++) {
            const int v = (r + o) & 1;   // A then B, or B then A
            const RouteGrads dS = {dsrc[cp], stride, NULL};
            const float *base = src[cp];
            cp = (cp + 1) % copies;
            const double t0 = now();
            for (int k = 0; k < reps; k++)
                for (int ns = chain ? 1 : N; ns <= N; ns++) {
                    const RouteSources S = {base, stride, ns, NULL};
                    if (v) route_forward_B(ctx, x, w, scratch, S, q, g, n, d, H, 1e-6f);
                    else route_forward_A(ctx, x, w, scratch, S, q, g, n, d, H, 1e-6f);
                }
            const double t1 = now();
            for (int k = 0; k < reps; k++)
                for (int ns = N; ns >= (chain ? 1 : N); ns--) {
                    const RouteSources S = {base, stride, ns, NULL};
                    if (v) route_backward_B(ctx, dS, dq, dg, scratch, dx, w, S, q, g, n, d, H, 1e-6f);
                    else route_backward_A(ctx, dS, dq, dg, scratch, dx, w, S, q, g, n, d, H, 1e-6f);
                }
            tf[v] = t1 - t0, tb[v] = now() - t1;
        }
        if (r < 0) continue;
        fwd[0][r] = tf[0], fwd[1][r] = tf[1], bwd[0][r] = tb[0], bwd[1][r] = tb[1];
        rf[r] = tf[1] / tf[0], rb[r] = tb[1] / tb[0];
    }
    printf("route kernels, %s x %d tokens x d 256, H %d, %s, %d rounds (medians)\n",
           chain ? "the 17 reads of 1..17 sources" : "17 sources", n, H, n == 4096 ? "from memory" : "from cache", R);
    printf("forward   A %6.2f ms  B %6.2f ms  B/A %.3f\n", 1e3 * median(fwd[0], R), 1e3 * median(fwd[1], R), median(rf, R));
    printf("backward  A %6.2f ms  B %6.2f ms  B/A %.3f\n", 1e3 * median(bwd[0], R), 1e3 * median(bwd[1], R), median(rb, R));
    ops_close(ctx);
    return 0;
}
