// mhar bench: training throughput of one or more residual schemes, model
// FLOP/s, and this machine's own sgemm rate measured in the same run.
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "data/synth.h"
#include "model/model.h"
#include "train/optim.h"

static const char *usage =
    "usage: mhar bench --preset P --residual R --batch B --seq T [--steps N --vocab V]\n\n"
    "Times full training steps (forward, backward, AdamW) on random tokens and\n"
    "reports the median. model FLOPs = 6·params + 12·L·nh·hd·T per token.\n"
    "The last line is a JSON object.";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The machine's sgemm rate: median of 5 square 2048³ products (GFLOP/s).
static double measure_sgemm(void) {
    const int n = 2048;
    float *a = mhar_alloc(sizeof(float) * n * n), *b = mhar_alloc(sizeof(float) * n * n);
    float *c = mhar_alloc(sizeof(float) * n * n);
    if (!a || !b || !c) return 0;
    for (size_t i = 0; i < (size_t)n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
    double t[5];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);  // warm-up
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t[r] = now_seconds() - t0;
    }
    mhar_free(a); mhar_free(b); mhar_free(c);
    return 2.0 * n * n * n / median(t, 5) / 1e9;
}

int cmd_bench(int argc, char **argv) {
    const char *preset = "micro", *residual = "baseline";
    int batch = 16, seq = 256, steps = 5, vocab = 8192, heads = 0, blocks = 0;
    Flag flags[] = {
        {"preset", FLAG_STR, &preset, "model preset (default micro)", 0, 0, 0},
        {"residual", FLAG_STR, &residual, "residual scheme (default baseline)", 0, 0, 0},
        {"route-heads", FLAG_INT, &heads, "routing heads for mhar", 1, 4096, 0},
        {"route-blocks", FLAG_INT, &blocks, "blocks for block routing", 1, 1024, 0},
        {"batch", FLAG_INT, &batch, "sequences per step (default 16)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &seq, "tokens per sequence (default 256)", 1, 1 << 20, 0},
        {"steps", FLAG_INT, &steps, "timed steps, after one warm-up (default 5)", 1, 1e6, 0},
        {"vocab", FLAG_INT, &vocab, "vocabulary size (default 8192)", 2, 1 << 24, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    Config c;
    Model m;
    AdamW opt = {0};
    memset(&m, 0, sizeof m);
    int rc = config_preset(preset, &c);
    if (!rc) {
        c.vocab_size = vocab;
        snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", residual);
        if (heads) c.attnres_num_heads = heads;
        if (blocks) c.attnres_num_blocks = blocks;
        rc = model_create(&m, &c);
    }
    if (!rc) { model_init_weights(&m, 1); rc = adamw_init(&opt, m.table.total); }
    if (!rc) rc = model_alloc_acts(&m, batch, seq);
    if (rc) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    size_t n = (size_t)batch * (seq + 1);
    int *tok = mhar_alloc(sizeof(int) * n * 2);
    synth_tokens(tok, n * 2, vocab, "random", 7);
    double *t = malloc(sizeof(double) * steps);
    for (int i = -1; i < steps; i++) {
        double t0 = now_seconds();
        model_zero_grad(&m);
        model_forward(&m, tok, tok + n);
        model_backward(&m, 1.0f);
        adamw_step(&opt, m.params, m.grads, grad_global_norm(m.grads, m.table.total), 1e-4f);
        if (i >= 0) t[i] = now_seconds() - t0;
    }
    double step_s = median(t, steps), tok_s = batch * seq / step_s;
    double gflops = model_train_flops_per_token(&m, seq) * tok_s / 1e9;
    double sgemm = measure_sgemm();
    fprintf(stderr, "%s %s: %.1f ms/step, %.0f tok/s, %.1f model GFLOP/s, sgemm %.1f GFLOP/s, MFU %.1f%%\n",
            preset, residual, step_s * 1e3, tok_s, gflops, sgemm, 100 * gflops / sgemm);
    printf("{\"preset\": \"%s\", \"residual\": \"%s\", \"batch\": %d, \"seq\": %d, \"tok_per_s\": %.1f, "
           "\"model_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"mfu\": %.4f, \"peak_rss_mb\": %.1f}\n",
           preset, residual, batch, seq, tok_s, gflops, sgemm, gflops / sgemm, peak_rss_mb());
    free(t);
    mhar_free(tok);
    adamw_free(&opt);
    model_free(&m);
    return 0;
}
