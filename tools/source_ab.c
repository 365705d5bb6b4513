// Paired A/B of two builds of the source-by-source route kernels
// (route_source.c: route_keys, route_gather) in one process; tools/source_ab.sh
// builds it. As tools/route_ab.c: whole-run timings on a shared 2-core
// machine drift by ±20% within minutes, so each round times A and B back to
// back in alternating order and the median of the per-round ratios B/A is
// printed. Before each call a 256 MiB read evicts the caches (the model's
// source and dx rows come from memory), unless "cache" is asked for.
//   source_ab [gather|keys] [H] [rounds] [readers] [tokens] [d] [memory|cache]
// Defaults: micro's final read (17 readers of d 256, 4096 tokens, H 8).
// One source read by `readers` sites, each with its own dx, logits, weights
// and c; the printed difference is B's output against A's, relative to its
// size (rounding only, where the two sum in different orders).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "ab_common.h"

#define KERNELS(V)                                                                                              \
    void route_gather_##V(OpsContext *, float *, const RouteReader *, int, float *, const float *, const float *, \
                          int, int, int);                                                                     \
    void route_keys_##V(OpsContext *, float *, const RouteReader *, int, float *, const float *, int, int, int, \
                        float);
KERNELS(A)
KERNELS(B)

enum { MAX_ROUNDS = 1000, MAX_READERS = 256, EVICT_FLOATS = 64 << 20 };

int main(int argc, char **argv) {
    const int gather = argc > 1 ? strcmp(argv[1], "keys") != 0 : 1;
    const int H = argc > 2 ? atoi(argv[2]) : 8, R = argc > 3 ? atoi(argv[3]) : 41;
    const int N = argc > 4 ? atoi(argv[4]) : 17, n = argc > 5 ? atoi(argv[5]) : 4096;
    const int d = argc > 6 ? atoi(argv[6]) : 256, evict = argc > 7 ? strcmp(argv[7], "cache") != 0 : 1;
    if ((argc > 1 && strcmp(argv[1], "keys") && strcmp(argv[1], "gather")) || H <= 0 || d <= 0 || d % H ||
        R <= 0 || R > MAX_ROUNDS || N <= 0 || N > MAX_READERS || n <= 0) {
        fprintf(stderr, "usage: source_ab [gather|keys] [H dividing d] [rounds <= %d] [readers <= %d] [tokens] [d] "
                        "[memory|cache]\n", MAX_ROUNDS, MAX_READERS);
        return 2;
    }
    OpsContext *ctx = ops_open();
    if (!ctx) return 1;
    const size_t row = (size_t)n * d, slots = (size_t)n * H;
    // The scratch of either build: the working tree's size, with room for a
    // revision that needed more (per thread, a tile of u for every reader).
    const size_t scratch_n = 2 * route_scratch_floats(ctx, N, d, H) + (size_t)N * 64 * H * 16;
    float *S = ops_alloc(ctx, sizeof(float) * row), *dx = ops_alloc(ctx, sizeof(float) * N * row);
    float *lg = ops_alloc(ctx, sizeof(float) * 2 * N * slots), *w = ops_alloc(ctx, sizeof(float) * N * slots);
    float *c = ops_alloc(ctx, sizeof(float) * N * slots), *rho = ops_alloc(ctx, sizeof(float) * 2 * n);
    float *out = ops_alloc(ctx, sizeof(float) * 2 * row), *qg = ops_alloc(ctx, sizeof(float) * 6 * (size_t)d);
    float *scratch = ops_alloc(ctx, sizeof(float) * scratch_n), *ev = ops_alloc(ctx, sizeof(float) * EVICT_FLOATS);
    RouteReader *rd = malloc(sizeof *rd * 2 * N);
    if (!S || !dx || !lg || !w || !c || !rho || !out || !qg || !scratch || !ev || !rd) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < row; i++) S[i] = uniform();
    for (size_t i = 0; i < N * row; i++) dx[i] = uniform();
    for (size_t i = 0; i < N * slots; i++) lg[i] = uniform(), w[i] = (0.5f + uniform()) / N, c[i] = 0.01f * uniform();
    for (int i = 0; i < n; i++) rho[i] = 1 + 0.1f * uniform();
    for (int i = 0; i < 2 * d; i++) qg[i] = 1 + 0.1f * uniform();
    memset(qg + 2 * d, 0, sizeof(float) * 4 * d);
    memset(ev, 0, sizeof(float) * EVICT_FLOATS);
    // Build v's readers write their logits into lg's half v (keys); the
    // gather's readers share lg's first half.
    for (int v = 0; v < 2; v++)
        for (int j = 0; j < N; j++)
            rd[v * N + j] = (RouteReader){.q = qg, .g = qg + d, .lg = lg + (gather ? 0 : (size_t)v * N * slots) + j * slots,
                                          .w = w + j * slots, .dx = dx + j * row, .c = c + j * slots,
                                          .dq = qg + 2 * d + (size_t)v * d, .dg = qg + 4 * d + (size_t)v * d};
    static double t[2][MAX_ROUNDS], ratio[MAX_ROUNDS];
    double sink = 0;
    for (int r = -2; r < R; r++) { // two untimed rounds first
        double tv[2];
        for (int o = 0; o < 2; o++) {
            const int v = (r + o) & 1; // A then B, or B then A
            if (evict)
                for (size_t i = 0; i < EVICT_FLOATS; i += 16) sink += ev[i];
            const double t0 = now();
            if (gather && v) route_gather_B(ctx, out + row, rd + N, N, scratch, S, rho, n, d, H);
            else if (gather) route_gather_A(ctx, out, rd, N, scratch, S, rho, n, d, H);
            else if (v) route_keys_B(ctx, rho + n, rd + N, N, scratch, S, n, d, H, 1e-6f);
            else route_keys_A(ctx, rho, rd, N, scratch, S, n, d, H, 1e-6f);
            tv[v] = now() - t0;
        }
        if (r < 0) continue;
        t[0][r] = tv[0], t[1][r] = tv[1], ratio[r] = tv[1] / tv[0];
    }
    // B's output against A's: dS, or the logits at every reader.
    const float *a = gather ? out : lg, *b = gather ? out + row : lg + N * slots;
    const size_t m = gather ? row : N * slots;
    double diff = 0, size = 0;
    for (size_t i = 0; i < m; i++) diff = fmax(diff, fabs(a[i] - b[i])), size = fmax(size, fabs(a[i]));
    printf("%s, %d readers x %d tokens x d %d, H %d, %s, %d rounds (medians)%s\n", gather ? "route_gather" : "route_keys",
           N, n, d, H, evict ? "from memory" : "in cache", R, sink == 1.5 ? " " : "");
    printf("A %7.3f ms  B %7.3f ms  B/A %.3f  (B - A: %.1e of the largest output)\n", 1e3 * median(t[0], R),
           1e3 * median(t[1], R), median(ratio, R), size > 0 ? diff / size : diff);
    ops_close(ctx);
    return 0;
}
