// Model-level checks that need no reference implementation: mhar with one
// head is attnres, training is deterministic, the learning-rate schedule has
// its documented shape, the FLOP count, the parameter classes every scheme
// declares and the recipe's pieces on them (weight decay left off a shard's
// classes, z-loss off by default, the EMA's start). (Every scheme's
// gradients, causality and KV-cache decoding: test_schemes.c, over the
// registry; the recipe against the float64 reference: test_exact.py.)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/model.h"
#include "residual/residual.h"
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
    model_alloc_grads(&a); model_alloc_acts(&a, 2, 32); model_alloc_grads(&b); model_alloc_acts(&b, 2, 32);
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

// Only training needs gradients: a loaded or created model has none (an
// imported 8B checkpoint is its weights alone), model_alloc_grads adds them
// zeroed, once.
static void test_grads_on_demand(void) {
    Config c;
    nano(&c);
    Model m;
    if (model_create(&m, &c)) { CHECK(0, "grads_on_demand", "%s", mhar_error()); return; }
    int none = m.grads == NULL;
    int rc = model_alloc_grads(&m);
    float *first = m.grads;
    int zero = first != NULL;
    for (size_t i = 0; zero && i < m.table.total; i++) zero = m.grads[i] == 0.0f;
    rc = rc || model_alloc_grads(&m);
    CHECK(none && !rc && zero && m.grads == first, "grads_on_demand",
          "after model_create grads %s; model_alloc_grads rc %d, zeroed %d, kept on a second call %d",
          none ? "NULL" : "allocated", rc, zero, m.grads == first);
    model_free(&m);
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
    model_alloc_grads(&a); model_alloc_acts(&a, 2, 16); model_alloc_grads(&b); model_alloc_acts(&b, 2, 16);
    int tok[33];
    for (int i = 0; i < 33; i++) tok[i] = (i * 17 + 3) % c.vocab_size;
    model_zero_grad(&a); model_zero_grad(&b);
    float la = model_forward(&a, tok, tok + 1), lb = model_forward(&b, tok, tok + 1);
    model_backward(&a, 1.0f); model_backward(&b, 1.0f);
    CHECK(la == lb && memcmp(a.grads, b.grads, sizeof(float) * a.table.total) == 0, "mhar_h1_bit_identical_to_attnres",
          "loss %.9g vs %.9g or gradients differ", la, lb);
    model_free(&a); model_free(&b);
}

// The class a tensor must have, from its SPEC §3 name (the model declares
// it with the tensor; this spells the rule out independently).
static ParamClass expected_class(const char *name) {
    static const char *const scheme[] = {"_res_proj.weight", "_res_norm.weight", "_null_source", "_res_alpha",
                                         "dwa_alpha"};
    size_t len = strlen(name);
    if (!strcmp(name, "model.embed_tokens.weight")) return PARAM_EMBED;
    for (size_t i = 0; i < sizeof scheme / sizeof scheme[0]; i++) {
        size_t k = strlen(scheme[i]);
        if (len >= k && !strcmp(name + len - k, scheme[i])) return PARAM_ROUTE;
    }
    if (strstr(name, ".hc_")) return PARAM_ROUTE;
    if (len >= 11 && !strcmp(name + len - 11, "norm.weight")) return PARAM_NORM;
    return PARAM_MATRIX;
}

static void test_param_classes(void) {
    for (int i = 0; i < residual_count(); i++) {
        const ResidualScheme *s = residual_at(i);
        Config c;
        nano(&c);
        strcpy(c.attnres_mode, s->name);
        c.attnres_num_heads = s->default_heads;
        c.attnres_num_blocks = s->needs_blocks ? 3 : 0;
        c.tie_word_embeddings = i % 2;   // an untied head on some: a matrix
        Model m;
        char name[96];
        snprintf(name, sizeof name, "param_classes_%s", s->name);
        if (model_create(&m, &c)) { CHECK(0, name, "%s", mhar_error()); continue; }
        int bad = -1, count[PARAM_CLASSES] = {0};
        for (int k = 0; k < m.table.n; k++) {
            count[m.table.p[k].cls]++;
            if (m.table.p[k].cls != expected_class(m.table.p[k].name)) bad = k;
        }
        int L = c.num_hidden_layers;
        CHECK(bad < 0 && count[PARAM_EMBED] == 1 && count[PARAM_NORM] == 4 * L + 1 &&
              count[PARAM_MATRIX] == 7 * L + !c.tie_word_embeddings && (count[PARAM_ROUTE] > 0) == (i > 0),
              name, "%s is %s; %d embed, %d norm, %d matrix, %d route", bad < 0 ? "-" : m.table.p[bad].name,
              bad < 0 ? "-" : param_class_name(m.table.p[bad].cls), count[PARAM_EMBED], count[PARAM_NORM],
              count[PARAM_MATRIX], count[PARAM_ROUTE]);
        model_free(&m);
    }
    unsigned set = 99;
    int ok = !param_classes_parse("", "x", &set) && set == 0 && !param_classes_parse("all", "x", &set) &&
             set == (1u << PARAM_EMBED | 1u << PARAM_NORM | 1u << PARAM_ROUTE) &&
             !param_classes_parse("route,embed", "x", &set) && set == (1u << PARAM_EMBED | 1u << PARAM_ROUTE);
    CHECK(ok, "param_classes_parse", "set %#x", set);
    CHECK(param_classes_parse("norm,matrix", "--wd-exclude", &set) == MHAR_ERR &&
              strstr(mhar_error(), "--wd-exclude: 'matrix' is not a parameter class"),
          "param_classes_parse_refuses_unknown", "%s", mhar_error());
}

// adamw_exclude_decay over a shard [lo, lo + n) cutting tensors: exactly the
// shard's elements of the excluded tensors are left undecayed; a step with
// zero gradients then shrinks the others by 1 − lr·wd and keeps them.
static void test_exclude_decay_shard(void) {
    Config c;
    nano(&c);
    strcpy(c.attnres_mode, "mhar");
    c.attnres_num_heads = 4;
    Model m;
    model_create(&m, &c);
    const size_t lo = m.table.p[1].offset + 5, n = m.table.total - lo - 300;   // from inside the first norm
    const unsigned set = 1u << PARAM_NORM | 1u << PARAM_ROUTE;
    AdamW opt;
    adamw_init(&opt, m.ctx, n);
    adamw_exclude_decay(&opt, &m.table, lo, set);
    float *p = malloc(sizeof(float) * n), *g = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
    adamw_step(&opt, p, g, 0.0, 0.5f);
    int wrong = 0;
    const float shrunk = 1.0f - 0.5f * opt.weight_decay;
    for (int k = 0; k < m.table.n; k++) {
        const ParamInfo *t = &m.table.p[k];
        for (size_t e = t->offset; e < t->offset + t->numel; e++)
            if (e >= lo && e < lo + n) wrong += p[e - lo] != (set >> t->cls & 1 ? 1.0f : shrunk);
    }
    CHECK(wrong == 0 && m.table.p[1].cls == PARAM_NORM, "exclude_decay_on_a_shard", "%d elements wrong", wrong);
    adamw_exclude_decay(&opt, &m.table, lo, 0);
    CHECK(opt.decay == NULL, "exclude_decay_none_decays_all", "a mask is kept");
    free(p), free(g);
    adamw_free(&opt);
    model_free(&m);
}

// Without z-loss the objective is the CE alone (z_term 0); with it the
// forward still returns the same CE and z_term = C·mean(lse²) > 0. The
// EMA starts at the weights and follows ema = D·ema + (1 − D)·p.
static void test_z_loss_and_ema(void) {
    Config c;
    nano(&c);
    Model m;
    model_create(&m, &c);
    model_init_weights(&m, 3);
    model_alloc_grads(&m); model_alloc_acts(&m, 2, 16);
    int tok[33];
    for (int i = 0; i < 33; i++) tok[i] = (i * 5 + 2) % c.vocab_size;
    float ce = model_forward(&m, tok, tok + 1);
    double z0 = m.z_term;
    m.z_loss = 0.01f;
    float ce_z = model_forward(&m, tok, tok + 1);
    // Logits of spread ~0.2 at init: lse ≈ log V + 0.2²/2, its square within 5% of (log V)².
    double lse = log((double)c.vocab_size);
    CHECK(z0 == 0 && ce_z == ce && fabs(m.z_term - 0.01 * lse * lse) < 0.05 * m.z_term, "z_loss_term",
          "without %g, CE %g vs %g, term %g (about %g)", z0, ce, ce_z, m.z_term, 0.01 * lse * lse);
    AdamW opt;
    adamw_init(&opt, m.ctx, m.table.total);
    int rc = adamw_add_ema(&opt, 0.75f, m.params);
    int start = rc == MHAR_OK && memcmp(opt.ema, m.params, sizeof(float) * m.table.total) == 0;
    float *before = malloc(sizeof(float) * m.table.total);
    memcpy(before, m.params, sizeof(float) * m.table.total);
    model_zero_grad(&m);
    model_forward(&m, tok, tok + 1);
    model_backward(&m, 1.0f);
    adamw_step(&opt, m.params, m.grads, grad_global_norm(m.ctx, m.grads, m.table.total), 1e-2f);
    int follows = 1;
    for (size_t i = 0; i < m.table.total; i++)
        follows &= opt.ema[i] == 0.75f * before[i] + 0.25f * m.params[i];
    CHECK(start && follows, "ema_starts_at_the_weights_and_follows", "start %d, follows %d", start, follows);
    CHECK(adamw_add_ema(&opt, 1.0f, NULL) == MHAR_ERR, "ema_decay_1_refused", "accepted");
    free(before);
    adamw_free(&opt);
    model_free(&m);
}

int main(void) {
    test_param_classes();
    test_exclude_decay_shard();
    test_z_loss_and_ema();
    test_mhar_h1_is_attnres();
    test_deterministic();
    test_schedule();
    test_flops();
    test_grads_on_demand();
    CHECK_EXIT();
}
