// Properties of the CPU kernels of kernels/ops.h that are not "op against
// its reference" (test_ops.c checks every op against a double reference,
// finite differences, determinism and accumulation): optional arguments,
// in-place use, exact zeros, RoPE's inverse and its position offset.
#include <stdint.h>
#include <string.h>

#include "check.h"
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

// The saved probabilities are exactly 0 above the diagonal (the backward
// relies on it; the reference comparison would let 1e-6 through).
static void test_attention_upper_zero(int B, int T, int nh, int nkv, int hd) {
    char name[128];
    size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd, na = (size_t)B * nh * T * T;
    float *q = frandn(nq, 2), *k = frandn(nk, 2), *v = frandn(nk, 1), *y = fnew(nq), *att = fnew(na);
    for (size_t i = 0; i < na; i++) att[i] = NAN;
    attention_forward(ctx, y, att, q, k, v, B, T, nh, nkv, hd);
    int upper_zero = 1;
    for (size_t bh = 0; bh < (size_t)B * nh; bh++)
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++) upper_zero &= att[(bh * T + i) * T + j] == 0;
    snprintf(name, sizeof name, "attention_upper_triangle_zero_B%d_T%d_nh%d_nkv%d_hd%d", B, T, nh, nkv, hd);
    CHECK(upper_zero, name, "att has non-zero entries above the diagonal");
    free(q); free(k); free(v); free(y); free(att);
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
    float *inplace = fcopy(x, nv);
    xent_backward(ctx, dl, x, tg, n, V, 1.0f / n, 0.25f / n);
    xent_backward(ctx, inplace, inplace, tg, n, V, 1.0f / n, 0.25f / n);
    snprintf(name, sizeof name, "xent_backward_in_place_%s%dx%d", big ? "large_logits_" : "", n, V);
    CHECK(same_bits(dl, inplace, nv), name, "in-place result differs");
    free(x); free(dl); free(tg); free(inplace);
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

int main(void) {
    ctx = ops_open();
    if (!ctx) return 1;
    rng_seed(&rng, 1234);
    test_matmul_din_null(37, 53, 29);
    test_matmul_din_null(257, 130, 67);
    test_matmul_din_null(1, 7, 1);
    test_rope(2, 13, 3, 32, 0);
    test_rope(3, 29, 2, 64, 17);
    test_attention_upper_zero(2, 37, 4, 2, 32);
    test_attention_upper_zero(2, 130, 2, 2, 64);
    test_attention_upper_zero(1, 71, 4, 1, 32);
    test_attention_upper_zero(3, 67, 4, 4, 64);
    test_xent_in_place(37, 1001, 0);
    test_xent_in_place(13, 1001, 1);
    test_vec_add_alias(100003);
    test_vec_add_alias(5);
    CHECK_EXIT();
}
