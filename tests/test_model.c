// Model-level checks that need no reference implementation: mhar with one
// head is attnres, training is deterministic, the learning-rate schedule has
// its documented shape, the FLOP count. (Every scheme's gradients, causality
// and KV-cache decoding: test_schemes.c, over the registry.)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/model.h"
#include "train/optim.h"

static void nano(Config *c) {
    config_preset("nano", c);
    c->vocab_size = 97;
}

static void train_steps(Model *m, int steps, float *out_loss) {
    AdamW opt;
    adamw_init(&opt, m->ctx, m->table.total);
    int tok[2 * 33];
    for (int i = 0; i < 66; i++) tok[i] = (i * 13 + 1) % m->cfg.vocab_size;
    for (int s = 0; s < steps; s++) {
        model_zero_grad(m);
        *out_loss = model_forward(m, tok, tok + 1);
        model_backward(m, 1.0f);
        adamw_step(&opt, m->params, m->grads, grad_global_norm(m->ctx, m->grads, m->table.total), 1e-3f);
    }
    adamw_free(&opt);
}

// The same seed and thread count give bit-identical parameters.
static void test_deterministic(void) {
    Config c;
    nano(&c);
    Model a, b;
    float la, lb;
    model_create(&a, &c); model_create(&b, &c);
    model_init_weights(&a, 11); model_init_weights(&b, 11);
    model_alloc_acts(&a, 2, 32); model_alloc_acts(&b, 2, 32);
    train_steps(&a, 3, &la);
    train_steps(&b, 3, &lb);
    CHECK(memcmp(a.params, b.params, sizeof(float) * a.table.total) == 0 && la == lb,
          "training_bit_identical", "parameters differ after 3 steps");
    CHECK(la < logf((float)c.vocab_size), "training_reduces_loss", "loss %.4f after 3 steps", la);
    model_free(&a); model_free(&b);
}

static void test_schedule(void) {
    float peak = 1e-3f;
    CHECK(fabsf(lr_schedule(0, 100, 10, peak) - 1e-4f) < 1e-9f, "lr_warmup_first", "%g", lr_schedule(0, 100, 10, peak));
    CHECK(fabsf(lr_schedule(9, 100, 10, peak) - peak) < 1e-9f, "lr_warmup_peak", "%g", lr_schedule(9, 100, 10, peak));
    CHECK(fabsf(lr_schedule(10, 100, 10, peak) - peak) < 1e-9f, "lr_cosine_start", "%g", lr_schedule(10, 100, 10, peak));
    CHECK(fabsf(lr_schedule(55, 100, 10, peak) - 0.55f * peak) < 1e-8f, "lr_cosine_mid", "%g", lr_schedule(55, 100, 10, peak));
    CHECK(fabsf(lr_schedule(100, 100, 10, peak) - 0.1f * peak) < 1e-9f, "lr_cosine_floor", "%g", lr_schedule(100, 100, 10, peak));
}

// Model FLOPs: 6 per parameter per token plus attention, by hand for nano.
static void test_flops(void) {
    Config c;
    nano(&c);
    Model m;
    model_create(&m, &c);
    double params = 97.0 * 128 + 6 * (128 + 128 * 128 + 64 * 128 * 2 + 128 * 128 + 32 + 32 + 128 + 3 * 128 * 384) + 128;
    double want = 6 * params + 12.0 * 6 * 4 * 32 * 256;
    double got = model_train_flops_per_token(&m, 256);
    CHECK(fabs(got - want) < 1e-6 * want, "train_flops_per_token", "got %.0f want %.0f", got, want);
    model_free(&m);
}

// SPEC §2.2: H = 1 is exactly AttnRes, so mhar with one head must be
// bit-identical to attnres in the forward pass and in every gradient.
static void test_mhar_h1_is_attnres(void) {
    Config c;
    nano(&c);
    Model a, b;
    strcpy(c.attnres_mode, "attnres");
    model_create(&a, &c);
    strcpy(c.attnres_mode, "mhar");
    c.attnres_num_heads = 1;
    model_create(&b, &c);
    model_init_weights(&a, 5);
    for (size_t i = 0; i < a.table.total; i++) a.params[i] += 0.01f * (float)((i * 7919) % 13);  // non-zero queries
    memcpy(b.params, a.params, sizeof(float) * a.table.total);
    model_alloc_acts(&a, 2, 16); model_alloc_acts(&b, 2, 16);
    int tok[33];
    for (int i = 0; i < 33; i++) tok[i] = (i * 17 + 3) % c.vocab_size;
    model_zero_grad(&a); model_zero_grad(&b);
    float la = model_forward(&a, tok, tok + 1), lb = model_forward(&b, tok, tok + 1);
    model_backward(&a, 1.0f); model_backward(&b, 1.0f);
    CHECK(la == lb && memcmp(a.grads, b.grads, sizeof(float) * a.table.total) == 0, "mhar_h1_bit_identical_to_attnres",
          "loss %.9g vs %.9g or gradients differ", la, lb);
    model_free(&a); model_free(&b);
}

int main(void) {
    test_mhar_h1_is_attnres();
    test_deterministic();
    test_schedule();
    test_flops();
    CHECK_EXIT();
}
