// Test tool: run mhar's model on a fixed batch and dump what the PyTorch
// reference compares (logits, loss, every gradient; or an AdamW trajectory).
//   tool_dump --run DIR --tokens FILE --batch B --seq T --out OUT.safetensors
//             [--steps N --lr X --warmup W] [--wd-exclude LIST --z-loss C --ema D]
// Row b of the batch is tokens[b·(T+1) .. b·(T+1)+T]; targets are shifted by one.
// The recipe flags act as `mhar train`'s (through the same optimizer and
// model calls); a trajectory then also dumps each step's z-loss term
// ("z_terms") and, with --ema, the EMA weights ("ema." + name).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokens.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "train/optim.h"

static int fail(void) { fprintf(stderr, "tool_dump: %s\n", mhar_error()); return 1; }

// A table naming every model tensor with a prefix, laid out like the model's.
static int prefixed(const ParamTable *src, const char *prefix, ParamTable *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < src->n; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s%.80s", prefix, src->p[i].name);
        if (ptable_add(out, name, src->p[i].ndim, src->p[i].shape, INIT_ZEROS, PARAM_MATRIX) < 0) return MHAR_ERR;
    }
    return MHAR_OK;
}

// Copy a model-laid-out buffer into a table-laid-out buffer (offsets may differ).
static float *relayout(const ParamTable *from, const float *buf, const ParamTable *to) {
    float *out = mhar_alloc(sizeof(float) * to->total);
    for (int i = 0; out && i < from->n; i++)
        memcpy(out + to->p[i].offset, buf + from->p[i].offset, sizeof(float) * from->p[i].numel);
    return out;
}

int main(int argc, char **argv) {
    const char *run = NULL, *tok_path = NULL, *out = NULL;
    int B = 0, T = 0, steps = 0, warmup = 0;
    float lr = 1e-3f, z_loss = 0, ema = 0;
    const char *wd_exclude = "";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--run")) run = argv[i + 1];
        else if (!strcmp(argv[i], "--tokens")) tok_path = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr")) lr = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--wd-exclude")) wd_exclude = argv[i + 1];
        else if (!strcmp(argv[i], "--z-loss")) z_loss = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--ema")) ema = (float)atof(argv[i + 1]);
        else { fprintf(stderr, "tool_dump: unknown flag %s\n", argv[i]); return 2; }
    }
    if (!run || !tok_path || !out || B < 1 || T < 1) { fprintf(stderr, "tool_dump: missing flags\n"); return 2; }
    Model m;
    TokenFile tf;
    if (model_load(&m, run) || tokens_load(tok_path, &tf) || model_alloc_grads(&m) || model_alloc_acts(&m, B, T)) return fail();
    m.z_loss = z_loss;
    if (tf.count < (size_t)B * (T + 1)) { fprintf(stderr, "tool_dump: too few tokens\n"); return 1; }
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = tf.tokens[b * (T + 1) + t];
            tg[b * T + t] = tf.tokens[b * (T + 1) + t + 1];
        }
    ParamTable tab = {0};
    float *buf = NULL;
    int shape[3] = {B, T, m.cfg.vocab_size};
    if (steps == 0) {
        model_zero_grad(&m);
        float loss = model_forward(&m, in, tg);
        ParamTable grads;
        if (prefixed(&m.table, "grad.", &grads)) return fail();
        // logits, loss, grads in one table; the logits are copied before the
        // backward pass reuses their buffer.
        ptable_add(&tab, "logits", 3, shape, INIT_ZEROS, PARAM_MATRIX);
        int one = 1;
        ptable_add(&tab, "loss", 1, &one, INIT_ZEROS, PARAM_MATRIX);
        size_t base = tab.total;
        for (int i = 0; i < grads.n; i++)
            ptable_add(&tab, grads.p[i].name, grads.p[i].ndim, grads.p[i].shape, INIT_ZEROS, PARAM_MATRIX);
        buf = mhar_alloc(sizeof(float) * tab.total);
        memcpy(buf + tab.p[0].offset, m.logits, sizeof(float) * B * T * m.cfg.vocab_size);
        buf[tab.p[1].offset] = loss;
        model_backward(&m, 1.0f);
        for (int i = 0; i < m.table.n; i++)
            memcpy(buf + tab.p[2 + i].offset, m.grads + m.table.p[i].offset, sizeof(float) * m.table.p[i].numel);
        (void)base;
        ptable_free(&grads);
    } else {
        AdamW opt;
        unsigned classes;
        if (adamw_init(&opt, m.ctx, m.table.total) || param_classes_parse(wd_exclude, "--wd-exclude", &classes) ||
            adamw_exclude_decay(&opt, &m.table, 0, classes) || (ema > 0 && adamw_add_ema(&opt, ema, m.params)))
            return fail();
        ptable_add(&tab, "losses", 1, &steps, INIT_ZEROS, PARAM_MATRIX);
        ptable_add(&tab, "grad_norm", 1, &steps, INIT_ZEROS, PARAM_MATRIX);
        ptable_add(&tab, "z_terms", 1, &steps, INIT_ZEROS, PARAM_MATRIX);
        ParamTable params, emas;
        if (prefixed(&m.table, "param.", &params) || prefixed(&m.table, "ema.", &emas)) return fail();
        for (int i = 0; i < params.n; i++)
            ptable_add(&tab, params.p[i].name, params.p[i].ndim, params.p[i].shape, INIT_ZEROS, PARAM_MATRIX);
        for (int i = 0; ema > 0 && i < emas.n; i++)
            ptable_add(&tab, emas.p[i].name, emas.p[i].ndim, emas.p[i].shape, INIT_ZEROS, PARAM_MATRIX);
        buf = mhar_alloc(sizeof(float) * tab.total);
        for (int s = 0; s < steps; s++) {
            model_zero_grad(&m);
            buf[tab.p[0].offset + s] = model_forward(&m, in, tg);
            buf[tab.p[2].offset + s] = (float)m.z_term;
            model_backward(&m, 1.0f);
            double norm = grad_global_norm(m.ctx, m.grads, m.table.total);
            buf[tab.p[1].offset + s] = (float)norm;
            adamw_step(&opt, m.params, m.grads, norm, lr_schedule(s, steps, warmup, lr));
        }
        float *p = relayout(&m.table, m.params, &params);
        for (int i = 0; i < params.n; i++)
            memcpy(buf + tab.p[3 + i].offset, p + params.p[i].offset, sizeof(float) * params.p[i].numel);
        mhar_free(p);
        if (ema > 0) {
            float *e = relayout(&m.table, opt.ema, &emas);
            for (int i = 0; i < emas.n; i++)
                memcpy(buf + tab.p[3 + params.n + i].offset, e + emas.p[i].offset, sizeof(float) * emas.p[i].numel);
            mhar_free(e);
        }
        ptable_free(&params);
        ptable_free(&emas);
        adamw_free(&opt);
    }
    if (safetensors_save(out, &tab, buf)) return fail();
    mhar_free(buf);
    ptable_free(&tab);
    free(in); free(tg);
    tokens_free(&tf);
    model_free(&m);
    return 0;
}
