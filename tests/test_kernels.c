// Properties of the CPU kernels of kernels/ops.h that are not "op against
// its reference" (test_ops.c checks every op against a double reference,
// finite differences, determinism and accumulation): optional arguments,
// in-place use, exact zeros, RoPE's inverse and its position offset,
// attention's causality, its lse, and its backward at several thread counts;
// the norm's backward at several thread counts; attention's tile products
// (tile_gemm) against double sums at every edge of their blocking.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/context.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/ops.h"
#include "util/common.h"

static OpsContext *ctx;  // the backend under test

static Rng rng;

static float *fnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static float *frandn(size_t n, float scale) {
    float *a = fnew(n);
    for (size_t i = 0; i < n; i++) a[i] = scale * rng_normal(&rng);
    return a;
}

static float *fcopy(const float *a, size_t n) {
    float *r = fnew(n);
    memcpy(r, a, n * sizeof(float));
    return r;
}

static double *to_d(const float *a, size_t n) {
    double *r = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) r[i] = a[i];
    return r;
}

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

// din = NULL: only dw is computed, and it is the same.
static void test_matmul_din_null(int M, int K, int N) {
    char name[96];
    size_t nin = (size_t)M * K, nw = (size_t)N * K, nout = (size_t)M * N;
    float *in = frandn(nin, 1), *w = frandn(nw, 0.5f), *dout = frandn(nout, 1);
    float *din = fnew(nin), *dw0 = frandn(nw, 1), *dw = fcopy(dw0, nw), *dw2 = fcopy(dw0, nw);
    matmul_backward(ctx, din, dw, dout, in, w, M, K, N);
    matmul_backward(ctx, NULL, dw2, dout, in, w, M, K, N);
    snprintf(name, sizeof name, "matmul_backward_din_null_%dx%dx%d", M, K, N);
    CHECK(same_bits(dw, dw2, nw), name, "dw differs when din is NULL");
    free(in); free(w); free(dout); free(din); free(dw0); free(dw); free(dw2);
}

// backward ∘ forward = identity (orthogonal rotation), and a block of rows
// starting at pos0 + t0 equals those rows of the full run.
static void test_rope(int B, int T, int nh, int hd, int pos0) {
    char name[96];
    int max_pos = 300, half = hd / 2;
    size_t n = (size_t)B * T * nh * hd;
    float *ct = fnew((size_t)max_pos * half), *st = fnew((size_t)max_pos * half);
    double *inv_freq = malloc(sizeof(double) * half);
    for (int j = 0; j < half; j++) inv_freq[j] = pow(10000.0, -2.0 * j / hd);
    rope_table(ctx, ct, st, max_pos, hd, inv_freq);
    free(inv_freq);
    float *x = frandn(n, 1), *y = fcopy(x, n);
    double *xd = to_d(x, n);
    rope_forward(ctx, y, B, T, nh, hd, pos0, ct, st);
    rope_backward(ctx, y, B, T, nh, hd, pos0, ct, st);
    double e = rel_err(y, xd, n);
    snprintf(name, sizeof name, "rope_inverse_hd%d", hd);
    // two float rotations: a few ulp
    CHECK(e < 1e-6, name, "rel_err %.3g", e);

    // same table entries, same arithmetic: bit-identical
    int t0 = T / 3, Tb = T - t0 - 1;
    float *full = fcopy(x, n), *blk = fnew((size_t)B * Tb * nh * hd);
    size_t row = (size_t)nh * hd;
    for (int b = 0; b < B; b++)
        memcpy(blk + (size_t)b * Tb * row, x + ((size_t)b * T + t0) * row, Tb * row * 4);
    rope_forward(ctx, full, B, T, nh, hd, pos0, ct, st);
    rope_forward(ctx, blk, B, Tb, nh, hd, pos0 + t0, ct, st);
    int same = 1;
    for (int b = 0; b < B; b++)
        same &= same_bits(blk + (size_t)b * Tb * row, full + ((size_t)b * T + t0) * row, Tb * row);
    snprintf(name, sizeof name, "rope_pos0_block_hd%d", hd);
    CHECK(same, name, "block rows differ from the full-length rope");
    free(ct); free(st); free(x); free(y); free(xd); free(full); free(blk);
}

static float *attention_scratch(int B, int T, int nkv, int hd) {
    return fnew(attention_scratch_floats(ctx, B, T, nkv, hd));
}

// Causality, exactly: with k and v changed at positions >= t0, y and lse of
// the rows before t0 keep their bits; with dy zero at rows >= t0, dk and dv
// at positions >= t0 are exactly 0 (no query before a key reaches it), and
// dq of the rows before t0 keeps its bits. A mask that lets one future key
// in, in any tile, breaks one of these.
static void test_attention_causal(int B, int T, int nh, int nkv, int hd, int t0) {
    char name[128];
    size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd, nl = (size_t)B * nh * T;
    size_t qrow = (size_t)nh * hd, krow = (size_t)nkv * hd;
    float *q = frandn(nq, 2), *k = frandn(nk, 2), *v = frandn(nk, 1), *dy = frandn(nq, 1);
    float *k2 = fcopy(k, nk), *v2 = fcopy(v, nk);
    for (int b = 0; b < B; b++)
        for (size_t e = ((size_t)b * T + t0) * krow; e < (size_t)(b + 1) * T * krow; e++)
            k2[e] = 50 * rng_normal(&rng), v2[e] = 1e4f * rng_normal(&rng);
    float *y = fnew(nq), *y2 = fnew(nq), *lse = fnew(nl), *lse2 = fnew(nl);
    float *scratch = attention_scratch(B, T, nkv, hd);
    attention_forward(ctx, y, lse, scratch, q, k, v, B, T, nh, nkv, hd);
    attention_forward(ctx, y2, lse2, scratch, q, k2, v2, B, T, nh, nkv, hd);
    int past_same = 1;
    for (int b = 0; b < B; b++) {
        past_same &= same_bits(y + (size_t)b * T * qrow, y2 + (size_t)b * T * qrow, (size_t)t0 * qrow);
        for (int h = 0; h < nh; h++)
            past_same &= same_bits(lse + ((size_t)b * nh + h) * T, lse2 + ((size_t)b * nh + h) * T, t0);
    }
    snprintf(name, sizeof name, "attention_causal_forward_B%d_T%d_nh%d_nkv%d_hd%d_t%d", B, T, nh, nkv, hd, t0);
    CHECK(past_same, name, "y or lse before position %d depends on a later key", t0);

    for (int b = 0; b < B; b++)
        memset(dy + ((size_t)b * T + t0) * qrow, 0, sizeof(float) * (size_t)(T - t0) * qrow);
    float *dq = fnew(nq), *dq2 = fnew(nq), *dk = fnew(nk), *dv = fnew(nk), *dk2 = fnew(nk), *dv2 = fnew(nk);
    attention_backward(ctx, dq, dk, dv, scratch, dy, y, lse, q, k, v, B, T, nh, nkv, hd);
    attention_backward(ctx, dq2, dk2, dv2, scratch, dy, y2, lse2, q, k2, v2, B, T, nh, nkv, hd);
    int future_zero = 1, dq_same = 1;
    for (int b = 0; b < B; b++) {
        for (size_t e = ((size_t)b * T + t0) * krow; e < (size_t)(b + 1) * T * krow; e++)
            future_zero &= dk[e] == 0 && dv[e] == 0 && dk2[e] == 0 && dv2[e] == 0;
        dq_same &= same_bits(dq + (size_t)b * T * qrow, dq2 + (size_t)b * T * qrow, (size_t)t0 * qrow);
    }
    snprintf(name, sizeof name, "attention_causal_backward_B%d_T%d_nh%d_nkv%d_hd%d_t%d", B, T, nh, nkv, hd, t0);
    CHECK(future_zero && dq_same, name, "dk/dv of a later key not 0 (%d) or dq before %d changed (%d)",
          !future_zero, t0, !dq_same);
    free(q); free(k); free(v); free(dy); free(k2); free(v2); free(y); free(y2); free(lse); free(lse2);
    free(dq); free(dq2); free(dk); free(dv); free(dk2); free(dv2); free(scratch);
}

// Every key the same vector: row i's scores are all s_i = q_i·k/sqrt(hd), so
// lse_i = s_i + log(i + 1) (it counts the keys row i sees) and y_i is the
// mean of v_0..v_i. A mask off by one, or an lse missing a tile's
// normaliser or its max, shows here at once.
static void test_attention_uniform(int B, int T, int nh, int nkv, int hd) {
    char name[128];
    size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd, nl = (size_t)B * nh * T;
    float *q = frandn(nq, 2), *k = fnew(nk), *v = frandn(nk, 1), *y = fnew(nq), *lse = fnew(nl);
    float *key = frandn((size_t)nkv * hd, 1);
    for (size_t t = 0; t < (size_t)B * T; t++) memcpy(k + t * nkv * hd, key, sizeof(float) * nkv * hd);
    float *scratch = attention_scratch(B, T, nkv, hd);
    attention_forward(ctx, y, lse, scratch, q, k, v, B, T, nh, nkv, hd);
    free(scratch);
    double lse_err = 0, y_err = 0, lse_max = 0, y_max = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            const int g = h / (nh / nkv);
            for (int i = 0; i < T; i++) {
                const float *qi = q + (((size_t)b * T + i) * nh + h) * hd;
                double s = 0;
                for (int e = 0; e < hd; e++) s += (double)qi[e] * key[g * hd + e];
                const double ref = s / sqrt((double)hd) + log(i + 1.0);
                lse_err = fmax(lse_err, fabs(lse[((size_t)b * nh + h) * T + i] - ref));
                lse_max = fmax(lse_max, fabs(ref));
                for (int e = 0; e < hd; e++) {
                    double mean = 0;
                    for (int j = 0; j <= i; j++) mean += v[(((size_t)b * T + j) * nkv + g) * hd + e];
                    mean /= i + 1;
                    y_err = fmax(y_err, fabs(y[(((size_t)b * T + i) * nh + h) * hd + e] - mean));
                    y_max = fmax(y_max, fabs(mean));
                }
            }
        }
    snprintf(name, sizeof name, "attention_uniform_keys_lse_B%d_T%d_nh%d_nkv%d_hd%d", B, T, nh, nkv, hd);
    // fp32 sums of hd products and of <= T exponentials: ~1e-6 of the largest
    CHECK(lse_err <= 1e-5 * lse_max && y_err <= 1e-5 * y_max, name, "lse err %.2e of %.2e, y err %.2e of %.2e",
          lse_err, lse_max, y_err, y_max);
    free(q); free(k); free(v); free(y); free(lse); free(key);
}

// The backward with its query tiles split over threads (partials added in
// split order) against one task per (batch, kv head): the same to rounding,
// and each bit-identical when run again at the same thread count. The
// forward computes every query tile alike however the tiles are split:
// the same bits at any thread count.
static void test_attention_threads(int T, int nh, int hd) {
    char name[128];
    const int B = 1, nkv = 1;
    size_t nq = (size_t)T * nh * hd, nk = (size_t)T * hd, nl = (size_t)nh * T;
    float *q = frandn(nq, 2), *k = frandn(nk, 2), *v = frandn(nk, 1), *dy = frandn(nq, 1);
    const int saved = ops_threads(), counts[3] = {1, 1, 3};  // backward runs; the forward at 1 thread
    ops_set_threads(1);
    float *y = fnew(nq), *lse = fnew(nl), *fscratch = attention_scratch(B, T, nkv, hd);
    attention_forward(ctx, y, lse, fscratch, q, k, v, B, T, nh, nkv, hd);
    free(fscratch);
    float *g[3][3];
    for (int run = 0; run < 3; run++) {
        ops_set_threads(counts[run]);
        float *scratch = attention_scratch(B, T, nkv, hd);
        g[run][0] = fnew(nq), g[run][1] = fnew(nk), g[run][2] = fnew(nk);
        attention_backward(ctx, g[run][0], g[run][1], g[run][2], scratch, dy, y, lse, q, k, v, B, T, nh, nkv, hd);
        free(scratch);
    }
    // still at 3 threads: the forward, and the backward once more
    float *y3 = fnew(nq), *lse3 = fnew(nl), *again = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    float *scratch = attention_scratch(B, T, nkv, hd);
    attention_forward(ctx, y3, lse3, scratch, q, k, v, B, T, nh, nkv, hd);
    attention_backward(ctx, again, dk, dv, scratch, dy, y, lse, q, k, v, B, T, nh, nkv, hd);
    ops_set_threads(saved);
    const int forward_same = same_bits(y, y3, nq) && same_bits(lse, lse3, nl);
    double err = 0;
    size_t n[3] = {nq, nk, nk};
    for (int i = 0; i < 3; i++) {
        double *ref = to_d(g[0][i], n[i]);
        err = fmax(err, rel_err(g[2][i], ref, n[i]));
        free(ref);
    }
    int same = same_bits(g[0][0], g[1][0], nq) && same_bits(g[0][1], g[1][1], nk) && same_bits(g[0][2], g[1][2], nk) &&
               same_bits(g[2][0], again, nq) && same_bits(g[2][1], dk, nk) && same_bits(g[2][2], dv, nk);
    snprintf(name, sizeof name, "attention_split_threads_T%d_nh%d_hd%d", T, nh, hd);
    // the same products, dk/dv summed in a different grouping: fp32 rounding
    CHECK(err <= 1e-5 && same && forward_same, name, "1 vs 3 threads rel_err %.2e, repeat same bits %d, forward same bits %d",
          err, same, forward_same);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 3; i++) free(g[r][i]);
    free(q); free(k); free(v); free(dy); free(y); free(lse); free(y3); free(lse3); free(again); free(dk); free(dv);
    free(scratch);
}

// The norm's backward sums dw over fixed chunks of rows, then the chunks in
// order: dx and dw the same bits at 1, 2 and 3 threads, with and without dw.
// (Partials split by thread and summed in fp32 fail this; in double they
// would nearly always round to the same fp32 and pass.)
static void test_rmsnorm_threads(int rows, int d) {
    char name[96];
    size_t n = (size_t)rows * d;
    float *x = frandn(n, 2), *dy = frandn(n, 1), *w = frandn((size_t)d, 1), *rstd = fnew((size_t)rows),
          *y = fnew(n), *scratch = fnew(rmsnorm_scratch_floats(rows, d));
    rmsnorm_forward(ctx, y, rstd, x, w, rows, d, 1e-6f);
    const int saved = ops_threads(), counts[3] = {1, 2, 3};
    float *dx[3], *dw[3], *dx_only = fnew(n);
    for (int run = 0; run < 3; run++) {
        ops_set_threads(counts[run]);
        dx[run] = fnew(n), dw[run] = fnew((size_t)d);
        rmsnorm_backward(ctx, dx[run], dw[run], scratch, dy, x, w, rstd, rows, d);
    }
    rmsnorm_backward(ctx, dx_only, NULL, scratch, dy, x, w, rstd, rows, d);
    ops_set_threads(saved);
    int same = same_bits(dx[0], dx_only, n);
    for (int run = 1; run < 3; run++) same = same && same_bits(dx[0], dx[run], n) && same_bits(dw[0], dw[run], (size_t)d);
    double dw_abs = 0;
    for (int j = 0; j < d; j++) dw_abs += fabs(dw[0][j]);
    snprintf(name, sizeof name, "rmsnorm_backward_threads_rows%d_d%d", rows, d);
    CHECK(same && dw_abs > 0, name, "1, 2, 3 threads and dw NULL: same bits %d, sum |dw| %.3g", same, dw_abs);
    for (int run = 0; run < 3; run++) free(dx[run]), free(dw[run]);
    free(x), free(dy), free(w), free(rstd), free(y), free(scratch), free(dx_only);
}

// dlogits may alias logits (the model does that): same bits.
static void test_xent_in_place(int n, int V, int big) {
    char name[96];
    size_t nv = (size_t)n * V;
    float *x = big ? fnew(nv) : frandn(nv, 3), *dl = fnew(nv);
    int *tg = calloc(n, sizeof(int));
    if (big)
        for (size_t i = 0; i < nv; i++) x[i] = 160 * rng_uniform(&rng) - 80;
    for (int i = 0; i < n; i++) tg[i] = (int)rng_below(&rng, V);
    float *inplace = fcopy(x, nv), *losses = fnew(n), *lse = fnew(n);
    xent_forward(ctx, losses, lse, x, tg, n, V);
    xent_backward(ctx, dl, x, lse, tg, n, V, 1.0f / n, 0.25f / n);
    xent_backward(ctx, inplace, inplace, lse, tg, n, V, 1.0f / n, 0.25f / n);
    snprintf(name, sizeof name, "xent_backward_in_place_%s%dx%d", big ? "large_logits_" : "", n, V);
    CHECK(same_bits(dl, inplace, nv), name, "in-place result differs");
    free(x); free(dl); free(tg); free(inplace); free(losses); free(lse);
}

// out may alias an input of vec_add (out = out + b).
static void test_vec_add_alias(size_t n) {
    char name[96];
    float *a = frandn(n, 1), *b = frandn(n, 1), *o = fnew(n), *alias = fcopy(a, n);
    vec_add(ctx, o, a, b, n);
    vec_add(ctx, alias, alias, b, n);
    snprintf(name, sizeof name, "vec_add_out_aliases_input_n%zu", n);
    CHECK(same_bits(o, alias, n), name, "aliased result differs");
    free(a); free(b); free(o); free(alias);
}

// ops_process_start's decision: start again only when OpenBLAS picked a
// set below AVX2/FMA on a processor that has them; its own modern choice
// (Zen on an AVX-512 Zen 4 included) and any processor without FMA stand.
static void test_blas_core(void) {
    static const struct { const char *chosen; int fma, avx512; const char *want; } c[] = {
        {"Prescott", 1, 1, "SkylakeX"},   {"Prescott", 1, 0, "Haswell"}, {"Nehalem", 1, 0, "Haswell"},
        {"Sandybridge", 1, 1, "SkylakeX"}, {"Prescott", 0, 0, NULL},     {"Haswell", 1, 1, NULL},
        {"Zen", 1, 1, NULL},              {"SkylakeX", 1, 1, NULL},     {"cooperlake", 1, 1, NULL},
        {"SapphireRapids", 1, 1, NULL},   {NULL, 1, 1, NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *got = blas_core_wanted(c[i].chosen, c[i].fma, c[i].avx512);
        char name[96];
        snprintf(name, sizeof name, "blas_core_%s_fma%d_avx512_%d", c[i].chosen ? c[i].chosen : "null", c[i].fma,
                 c[i].avx512);
        CHECK(c[i].want ? got && !strcmp(got, c[i].want) : !got, name, "want %s, got %s",
              c[i].want ? c[i].want : "none", got ? got : "none");
    }
}

// The note ops_library_name adds to a coretype from the environment: only
// an AVX-512 processor running a set without AVX-512 gets it.
static void test_blas_core_avx512_note(void) {
    static const struct { const char *running; int avx512, want; } c[] = {
        {"Haswell", 1, 1},  {"Zen", 1, 1},         {"Prescott", 1, 1},         {"Haswell", 0, 0},
        {"SkylakeX", 1, 0}, {"COOPERLAKE", 1, 0}, {"SapphireRapids", 1, 0}, {NULL, 1, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const int got = blas_core_leaves_avx512(c[i].running, c[i].avx512);
        char name[96];
        snprintf(name, sizeof name, "blas_core_leaves_avx512_%s_%d", c[i].running ? c[i].running : "null",
                 c[i].avx512);
        CHECK(got == c[i].want, name, "want %d, got %d", c[i].want, got);
    }
}

// vec_zero on a buffer large enough for its threaded path (pieces of whole
// lines per thread): every element cleared, nothing past the end touched.
static void test_vec_zero_large(size_t n) {
    float *a = mhar_alloc(sizeof(float) * (n + 16));
    if (!a) { CHECK(0, "vec_zero_large", "out of memory"); return; }
    for (size_t i = 0; i < n + 16; i++) a[i] = 1.0f;
    vec_zero(ctx, a, n);
    size_t nonzero = 0, tail = 0;
    for (size_t i = 0; i < n; i++) nonzero += a[i] != 0.0f;
    for (size_t i = n; i < n + 16; i++) tail += a[i] == 1.0f;
    CHECK(nonzero == 0 && tail == 16, "vec_zero_large", "n %zu: %zu not cleared, %zu of 16 after the end kept", n,
          nonzero, tail);
    mhar_free(a);
}

// The op profile (ops.h): off, nothing is counted; on, each op under its
// name with its calls, a caller's region flagged as one, the ops' time
// inside the region's and the region's inside the wall time around it; an
// op called inside another is counted once, in the outer; on again clears.
static void test_profile(void) {
    static float a[4096], b[4096];
    vec_zero(ctx, a, 4096);   // before: not counted
    ops_profile(ctx, 1);
    const double t0 = now_seconds(), r = ops_profile_clock(ctx);
    vec_zero(ctx, a, 4096);
    vec_zero(ctx, b, 4096);
    vec_add(ctx, a, a, b, 4096);
    ops_profile_region(ctx, "region", r);
    const double wall = now_seconds() - t0;
    const double outer = ops_op_begin(ctx);   // as an op that calls another op
    vec_zero(ctx, a, 4096);
    ops_op_end(ctx, "outer", outer);
    ops_profile(ctx, 0);
    vec_zero(ctx, a, 4096);   // after: not counted
    OpsProfileEntry e[8];
    int n = ops_profile_read(ctx, e, 8);
    CHECK(n == 4 && !strcmp(e[0].name, "vec_zero") && e[0].calls == 2 && !e[0].region &&
          !strcmp(e[1].name, "vec_add") && e[1].calls == 1 && !strcmp(e[2].name, "region") && e[2].region &&
          e[2].calls == 1 && !strcmp(e[3].name, "outer") && e[3].calls == 1 && !e[3].region,
          "profile_names_calls", "%d entries: %s x%ld, %s x%ld, %s x%ld", n, n > 0 ? e[0].name : "", n > 0 ? e[0].calls : 0,
          n > 1 ? e[1].name : "", n > 1 ? e[1].calls : 0, n > 2 ? e[2].name : "", n > 2 ? e[2].calls : 0);
    if (n >= 3)
        CHECK(e[0].seconds > 0 && e[1].seconds > 0 && e[0].seconds + e[1].seconds <= e[2].seconds &&
              e[2].seconds <= wall, "profile_times_nest", "ops %g + %g s, region %g s, wall %g s", e[0].seconds,
              e[1].seconds, e[2].seconds, wall);
    ops_profile(ctx, 1);
    ops_profile(ctx, 0);
    CHECK(ops_profile_read(ctx, e, 8) == 0 && ops_profile_clock(ctx) < 0, "profile_restart_clears", "not cleared");
}

// The FLOPs the products count (ops.h): a matmul 2·M·N·K a product, its
// backward as many products as it computes (no din: one); attention its
// causal pairs (T(T+1)/2 a head and sequence, 2·hd each a product: 2 in the
// forward, 5 in the backward); an op inside another counted in the outer;
// ops that are no products count none; nothing is counted with the profile off.
static void test_profile_flops(void) {
    enum { M = 6, K = 5, N = 3, B = 2, T = 7, NH = 4, NKV = 2, HD = 8 };
    static float in[M * K], w[N * K], out[M * N], din[M * K], dw[N * K];
    static float q[B * T * NH * HD], k[B * T * NKV * HD], v[B * T * NKV * HD], y[B * T * NH * HD], lse[B * NH * T];
    static float dq[B * T * NH * HD], dk[B * T * NKV * HD], dv[B * T * NKV * HD];
    for (int i = 0; i < M * K; i++) in[i] = 0.1f * (float)(i % 7);
    for (int i = 0; i < N * K; i++) w[i] = 0.05f * (float)(i % 5);
    for (int i = 0; i < B * T * NH * HD; i++) q[i] = 0.01f * (float)(i % 11), y[i] = 0.0f;
    for (int i = 0; i < B * T * NKV * HD; i++) k[i] = 0.02f * (float)(i % 13), v[i] = 0.03f * (float)(i % 3);
    float *scratch = mhar_alloc(sizeof(float) * attention_scratch_floats(ctx, B, T, NKV, HD));
    if (!scratch) { CHECK(0, "profile_flops", "no memory"); return; }
    matmul_forward(ctx, out, in, w, M, K, N);   // profile off: not counted
    ops_profile(ctx, 1);
    matmul_forward(ctx, out, in, w, M, K, N);
    matmul_forward(ctx, out, in, w, M, K, N);
    matmul_backward(ctx, din, dw, out, in, w, M, K, N);
    matmul_backward_add(ctx, NULL, dw, out, in, w, M, K, N);
    attention_forward(ctx, y, lse, scratch, q, k, v, B, T, NH, NKV, HD);
    attention_backward(ctx, dq, dk, dv, scratch, y, y, lse, q, k, v, B, T, NH, NKV, HD);
    vec_zero(ctx, din, M * K);
    const double outer = ops_op_begin(ctx);
    matmul_forward(ctx, out, in, w, M, K, N);
    ops_op_end(ctx, "outer", outer);
    ops_profile(ctx, 0);
    mhar_free(scratch);
    OpsProfileEntry e[8];
    const int n = ops_profile_read(ctx, e, 8);
    const double mm = 2.0 * M * N * K, pairs = 2.0 * HD * (T * (T + 1) / 2) * B * NH;
    const char *name[7] = {"matmul_forward", "matmul_backward", "matmul_backward_add", "attention_forward",
                           "attention_backward", "vec_zero", "outer"};
    const double want[7] = {2 * mm, 2 * mm, mm, 2 * pairs, 5 * pairs, 0, mm};
    int ok = n == 7;
    for (int i = 0; ok && i < 7; i++) ok = !strcmp(e[i].name, name[i]) && e[i].flops == want[i];
    CHECK(ok, "profile_flops", "%d entries; %s %g (want %g), %s %g (want %g), %s %g (want %g)", n,
          n > 0 ? e[0].name : "", n > 0 ? e[0].flops : 0, want[0], n > 3 ? e[3].name : "", n > 3 ? e[3].flops : 0,
          want[3], n > 6 ? e[6].name : "", n > 6 ? e[6].flops : 0, want[6]);
}

// tile_gemm against sums in double: m around its 6-row blocks, n around its
// one- and two-vector panels (8 and 16 floats, or 16 and 32 with AVX-512)
// and the scalar columns after them, k from 1 to past its 256-row panel
// copies; A row-major and transposed; written and accumulated. Tolerance:
// 2·(k+1)·FLT_EPSILON·(Σ|αab| + |C|), the bound of a float sum of k
// products; the columns of C's row stride past n must keep their sentinel.
static void test_tile_gemm(void) {
    static const int ms[] = {1, 5, 6, 7, 13, 64}, ns[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 130},
                     ks[] = {1, 3, 64, 129, 300};  // 300: past one 256-row panel copy
    const float alpha = 0.125f, sentinel = 12345.0f;
    for (int trans = 0; trans < 2; trans++)
        for (int acc = 0; acc < 2; acc++) {
            double worst = 0.0;
            int untouched = 1;
            char at[64] = "";
            for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
                for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
                    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
                        const int m = ms[a], n = ns[b], k = ks[c], lda = (trans ? m : k) + 3, ldb = n + 5,
                                  ldc = n + 7;
                        float *A = frandn((size_t)(trans ? k : m) * lda, 1.0f), *B = frandn((size_t)k * ldb, 1.0f);
                        float *C = frandn((size_t)m * ldc, 1.0f), *C0 = fcopy(C, (size_t)m * ldc);
                        for (int i = 0; i < m; i++)
                            for (int j = n; j < ldc; j++) C[(size_t)i * ldc + j] = sentinel;
                        const size_t a_row = trans ? 1 : (size_t)lda, a_col = trans ? (size_t)lda : 1;
                        tile_gemm(m, n, k, alpha, A, a_row, a_col, B, (size_t)ldb, acc, C, (size_t)ldc);
                        for (int i = 0; i < m; i++) {
                            for (int j = 0; j < n; j++) {
                                double sum = 0.0, mag = 0.0;
                                for (int p = 0; p < k; p++) {
                                    const double t = (double)A[i * a_row + p * a_col] * B[(size_t)p * ldb + j];
                                    sum += t, mag += fabs(t);
                                }
                                const double c0 = acc ? C0[(size_t)i * ldc + j] : 0.0;
                                const double want = c0 + alpha * sum;
                                const double tol = 2.0 * (k + 1) * FLT_EPSILON * (alpha * mag + fabs(c0));
                                const double r = fabs(C[(size_t)i * ldc + j] - want) / (tol > 0 ? tol : 1e-30);
                                if (!(r <= worst)) {
                                    worst = r;
                                    snprintf(at, sizeof at, "m %d n %d k %d (%d, %d)", m, n, k, i, j);
                                }
                            }
                            for (int j = n; j < ldc; j++) untouched &= C[(size_t)i * ldc + j] == sentinel;
                        }
                        free(A); free(B); free(C); free(C0);
                    }
            char name[64];
            snprintf(name, sizeof name, "tile_gemm_%s_%s", trans ? "a_transposed" : "a_rows",
                     acc ? "accumulate" : "write");
            CHECK(worst <= 1.0 && untouched, name, "error %.3g of the tolerance at %s; columns past n %s", worst,
                  at, untouched ? "untouched" : "written");
        }
}

int main(void) {
    test_blas_core();
    test_blas_core_avx512_note();
    ctx = ops_open();
    if (!ctx) return 1;
    rng_seed(&rng, 1234);
    test_matmul_din_null(37, 53, 29);
    test_matmul_din_null(257, 130, 67);
    test_matmul_din_null(1, 7, 1);
    test_rope(2, 13, 3, 32, 0);
    test_rope(3, 29, 2, 64, 17);
    // tile edges (64 query rows, 128 keys), GQA 1, 2, 4, hd 16, 64, 128; t0
    // inside a tile and on either tile's edge
    test_attention_causal(2, 37, 4, 2, 32, 20);
    test_attention_causal(2, 130, 2, 2, 64, 64);
    test_attention_causal(1, 200, 4, 1, 16, 129);
    test_attention_causal(1, 300, 2, 1, 32, 128);
    test_attention_causal(3, 67, 4, 4, 128, 65);
    test_attention_causal(1, 1, 2, 1, 16, 0);
    test_attention_uniform(2, 37, 4, 2, 32);
    test_attention_uniform(1, 300, 4, 1, 64);
    test_attention_uniform(2, 129, 2, 2, 128);
    test_attention_uniform(1, 1, 2, 2, 16);
    test_attention_threads(333, 2, 64);
    test_attention_threads(65, 4, 16);
    test_tile_gemm();
    test_rmsnorm_threads(1000, 256);  // 15 full chunks and a short one
    test_rmsnorm_threads(333, 64);
    test_xent_in_place(37, 1001, 0);
    test_xent_in_place(13, 1001, 1);
    test_vec_add_alias(100003);
    test_vec_add_alias(5);
    test_vec_zero_large((size_t)1 << 20);
    test_vec_zero_large(((size_t)1 << 21) + 37);
    test_profile();
    test_profile_flops();
    CHECK_EXIT();
}
