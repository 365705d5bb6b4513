// mhar bench --kernel route: the depth-routing kernels timed alone, so that
// a change to them can be measured without a whole training step around it.
// The shape is the largest read of the model: the final read over all 2L+1
// sources of the preset, for B·T tokens. Two regimes per pass:
//   memory  one call over all tokens, as the model calls it: the sources
//           stream from DRAM (or the last-level cache when they fit there);
//   cache   the same number of tokens as calls over one tile (its rows
//           packed) small enough that every thread's share of sources and
//           gradients stays in its L2: the kernel's own arithmetic pace, with
//           memory out of the way.
// Each against the floor of its traffic at the bandwidths measured in the
// same run (what the model's floor counts: route_bytes_site's bytes for
// route_forward/backward, mhar.c's formula for full routing's kernels).
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/ops.h"
#include "../model/config.h"
#include "../residual/residual.h"
#include "../util/cachesize.h"
#include "../util/median.h"

#define KERNEL_MAX_STEPS 1024

// Deterministic values in [-1, 1): the kernels' pace does not depend on them.
static void fill(float *x, size_t n, unsigned seed, float scale) {
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = scale * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
}

// Tokens of the cache tile: a multiple of 8 per thread whose share of
// sources and their gradients (2·n_src·d floats a token) fills at most half
// of one core's L2; at least 8 per thread, at most all tokens.
static int cache_tile(int n_tok, int n_src, int d, int threads) {
    long l2 = cache_bytes(2);
    double per_token = 2.0 * n_src * d * sizeof(float);
    int per_thread = (int)((l2 > 0 ? l2 : 1 << 20) / 2 / per_token) / 8 * 8;
    if (per_thread < 8) per_thread = 8;
    int tile = per_thread * threads;
    return tile < n_tok ? tile : n_tok;
}

int bench_kernel_route(const BenchKernelPlan *p, BenchKernelRun *out) {
    Config c;
    memset(out, 0, sizeof *out);
    if (config_preset(p->preset, &c)) return MHAR_ERR;
    const int d = c.hidden_size, H = p->heads, n = p->batch * p->seq, N = 2 * c.num_hidden_layers + 1;
    if (d % H) return mhar_fail("--route-heads %d does not divide the preset's width %d", H, d);
    if (p->steps > KERNEL_MAX_STEPS) return mhar_fail("--steps %d: the kernel bench times at most %d", p->steps,
                                                      KERNEL_MAX_STEPS);
    // The probes first: they run in a child, before this process starts threads.
    if (bench_limits(&out->lim)) return MHAR_ERR;
    out->n_tok = n, out->d = d, out->n_src = N, out->heads = H, out->threads = ops_threads();
    out->tile = cache_tile(n, N, d, out->threads);
    const size_t row = (size_t)n * d, rows = route_row_floats(n, d);  // a row's floats; the model's stride
    OpsContext *ctx = ops_open();
    if (!ctx) return MHAR_ERR;
    float *src = ops_alloc(ctx, sizeof(float) * N * rows), *dsrc = ops_alloc(ctx, sizeof(float) * N * rows);
    float *x = ops_alloc(ctx, sizeof(float) * row), *dx = ops_alloc(ctx, sizeof(float) * row);
    float *w = ops_alloc(ctx, sizeof(float) * N * n * H), *qg = ops_alloc(ctx, sizeof(float) * 4 * d);
    // Full routing's: each of the N readers' kept dx (the sources' buffer
    // serves), logits (w's size) and ⟨dx, x⟩ (the same), and ρ.
    float *lg = ops_alloc(ctx, sizeof(float) * N * n * H), *cs = ops_alloc(ctx, sizeof(float) * N * n * H);
    float *rho = ops_alloc(ctx, sizeof(float) * n);
    RouteReader *rd = mhar_alloc(sizeof(RouteReader) * N);
    float *scratch = ops_alloc(ctx, sizeof(float) * route_scratch_floats(ctx, N, d, H));
    // "From memory" means it: before each such call a read over twice the
    // last-level cache evicts the kernel's data. Without it a large cache
    // (273 MB on a 2-core Xeon) held micro's between calls: route_gather
    // 2.74-2.76 ms a call against 3.97 evicted, route_forward 2.94-3.40
    // against 4.48-4.59 (H 8, medians of 10, two runs each).
    const size_t n_evict = (size_t)(fmax(64e6, 2e6 * out->lim.bw.llc_mb) / sizeof(float));
    float *evict = ops_alloc(ctx, sizeof(float) * n_evict);
    double evicted = 0;
    int rc = src && dsrc && x && dx && w && qg && lg && cs && rho && rd && scratch && evict
                 ? MHAR_OK : mhar_fail("no memory for the kernel's buffers");
    if (!rc) {
        fill(src, N * rows, 1, 1.0f);
        fill(dx, row, 2, 1.0f);
        fill(qg, d, 3, 0.5f);             // q
        fill(qg + d, d, 4, 0.1f);         // g = 1 + small
        for (int i = 0; i < d; i++) qg[d + i] += 1.0f;
        fill(lg, (size_t)N * n * H, 5, 2.0f);
        fill(cs, (size_t)N * n * H, 6, 0.1f);
        for (int i = 0; i < n; i++) rho[i] = 1.0f;
        vec_zero(ctx, qg + 2 * d, 2 * (size_t)d);  // dq, dg
        vec_zero(ctx, dsrc, N * rows);
        vec_zero(ctx, evict, n_evict);   // written: real pages to read
    }
    const float *q = qg, *g = qg + d;
    float *dq = qg + 2 * d, *dg = qg + 3 * d;
    const float eps = 1e-6f;
    // Traffic for B·T tokens, as the model's floor counts it: route_bytes_site
    // for block's kernels, mhar.c's formula for one call of each of full
    // routing's (slot: n·H floats of one (source, reader) pair).
    const double slot = (double)n * H;
    RouteBytes bytes[BENCH_KERNEL_PASSES] = {{0, 0}};
    route_bytes_forward(&bytes[0], N, n, d, H);
    route_bytes_backward(&bytes[1], N, n, d, H);
    route_bytes_add(&bytes[2], row, N * slot + n);
    route_bytes_add(&bytes[3], N * (row + slot), row + N * slot);
    route_bytes_add(&bytes[4], row + n + N * (row + 3 * slot), row);
    static const char *const pass_name[BENCH_KERNEL_PASSES] = {"forward", "backward", "keys", "mix", "gather"};
    double t[KERNEL_MAX_STEPS];
    for (int reg = 0; reg < 2 && !rc; reg++) {           // 0: memory, 1: cache
        const int tile = reg ? out->tile : n, calls = (n + tile - 1) / tile;
        const size_t stride = route_row_floats(tile, d);
        // The readers of source 0 at this tile: reader j's kept dx is source
        // row j, its slots the j-th of lg, w and cs.
        for (int j = 0; j < N; j++)
            rd[j] = (RouteReader){.q = q, .g = g, .lg = lg + (size_t)j * tile * H, .w = w + (size_t)j * tile * H,
                                  .dx = src + j * stride, .c = cs + (size_t)j * tile * H, .dq = dq, .dg = dg};
        for (int pass = 0; pass < BENCH_KERNEL_PASSES; pass++) {
            for (int s = -1; s < p->steps; s++) {        // one untimed warm-up
                if (!reg) evicted += stream_sum(ctx, evict, n_evict);
                double t0 = now_seconds();
                for (int k = 0; k < calls; k++) {
                    // memory: the whole batch; cache: one tile, again and again,
                    // its rows packed (rows a batch apart would share L2 sets),
                    // both at the model's row stride
                    RouteSources S = {src, stride, N, NULL};
                    RouteGrads dS = {dsrc, stride, NULL};
                    switch (pass) {
                    case 0: route_forward(ctx, x, w, scratch, S, q, g, tile, d, H, eps); break;
                    case 1: route_backward(ctx, dS, dq, dg, scratch, dx, w, S, q, g, tile, d, H, eps); break;
                    case 2: route_keys(ctx, rho, rd, N, scratch, src, tile, d, H, eps); break;
                    case 3: route_mix(ctx, x, w, lg, S, tile, d, H); break;
                    default: route_gather(ctx, dsrc, rd, N, scratch, src, rho, tile, d, H); break;
                    }
                }
                ops_sync(ctx);
                if (s >= 0) t[s] = (now_seconds() - t0) * n / ((double)tile * calls);
            }
            BenchKernelRow *r = &out->row[BENCH_KERNEL_PASSES * reg + pass];
            const Spread sp = spread(t, p->steps);
            r->pass = pass_name[pass];
            r->where = reg ? "cache" : "memory";
            r->ms = 1e3 * sp.median, r->ms_min = 1e3 * sp.min, r->ms_max = 1e3 * sp.max;
            r->bytes = bytes[pass];
            r->floor_ms = 1e3 * (r->bytes.read / (out->lim.bw.read_gbs * 1e9) +
                                 r->bytes.write / (out->lim.bw.rmw_gbs * 1e9));
        }
    }
    // A kernel that produced NaN would time a different path: refuse the figures.
    if (!rc && !(isfinite(x[0]) && isfinite(x[row - 1]) && isfinite(dsrc[0]) && isfinite(dq[0]) &&
                 isfinite(lg[0]) && isfinite(rho[0]) && isfinite(evicted)))
        rc = mhar_fail("the route kernels produced a non-finite value");
    ops_free(ctx, src); ops_free(ctx, dsrc); ops_free(ctx, x); ops_free(ctx, dx);
    ops_free(ctx, w); ops_free(ctx, qg); ops_free(ctx, lg); ops_free(ctx, cs); ops_free(ctx, rho);
    ops_free(ctx, scratch); ops_free(ctx, evict);
    free(rd);
    ops_close(ctx);
    return rc;
}

void bench_kernel_print(const BenchKernelPlan *p, const BenchKernelRun *k) {
    const BenchBandwidth *bw = &k->lim.bw;
    printf("blas: %s\n", ops_library_name());
    printf("machine: sgemm %.1f GFLOP/s; memory read %.1f GB/s, read-modify-write %.1f GB/s (%.0f MiB arrays); "
           "%d threads\n", k->lim.sgemm_gflops, bw->read_gbs, bw->rmw_gbs, bw->array_mib, k->threads);
    printf("route kernels, %s's final read: %d sources x %d tokens x d %d, H %d (sources %.0f MB, last-level cache "
           "%.0f MB; cache tile %d tokens); median of %d\n", p->preset, k->n_src, k->n_tok, k->d, k->heads,
           4.0 * k->n_src * k->n_tok * k->d / 1e6, bw->llc_mb, k->tile, p->steps);
    printf("%-9s %-7s %9s %15s %9s %9s %9s %10s\n", "pass", "where", "ms", "range", "read MB", "write MB",
           "floor ms", "ms/floor");
    for (int i = 0; i < 2 * BENCH_KERNEL_PASSES; i++) {
        const BenchKernelRow *r = &k->row[i];
        char range[32];
        snprintf(range, sizeof range, "%.2f-%.2f", r->ms_min, r->ms_max);
        printf("%-9s %-7s %9.2f %15s %9.1f %9.1f %9.2f %10.2f\n", r->pass, r->where, r->ms, range,
               r->bytes.read / 1e6, r->bytes.write / 1e6, r->floor_ms, r->ms / r->floor_ms);
    }
    printf("{\"kernel\": \"route\", \"preset\": \"%s\", \"batch\": %d, \"seq\": %d, \"tokens\": %d, \"d\": %d, "
           "\"sources\": %d, \"heads\": %d, \"threads\": %d, \"cache_tile\": %d, \"steps\": %d, "
           "\"sgemm_gflops\": %.2f, \"read_gbs\": %.3f, \"rmw_gbs\": %.3f, \"llc_mb\": %.1f",
           p->preset, p->batch, p->seq, k->n_tok, k->d, k->n_src, k->heads, k->threads, k->tile, p->steps,
           k->lim.sgemm_gflops, bw->read_gbs, bw->rmw_gbs, bw->llc_mb);
    for (int i = 0; i < 2 * BENCH_KERNEL_PASSES; i++) {
        const BenchKernelRow *r = &k->row[i];
        printf(", \"%s_%s\": {\"ms\": %.6f, \"ms_min\": %.6f, \"ms_max\": %.6f, \"read_bytes\": %.0f, "
               "\"write_bytes\": %.0f, \"floor_ms\": %.6f, \"over_floor\": %.5f}", r->pass, r->where, r->ms, r->ms_min,
               r->ms_max, r->bytes.read, r->bytes.write, r->floor_ms, r->ms / r->floor_ms);
    }
    printf("}\n");
}
