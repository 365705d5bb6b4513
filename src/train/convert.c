// Model conversion (SPEC §2.7): a baseline run -> a delta_mh model that
// computes the same logits. Every base tensor is copied; the scheme's tensors
// take their identity init (res_alpha 0, so x_s = r exactly). Before anything
// is written the two models run a probe batch and their logits must agree bit
// for bit. The output directory appears whole or not at all: it is built as
// a temporary sibling and renamed into place.
#include "convert.h"

#include <stdio.h>
#include <string.h>

#include "../model/model.h"
#include "../residual/residual.h"
#include "../tokenizer/run_tokenizer.h"
#include "../util/dir.h"

// The converted config: the base's, with the delta_mh keys.
static int delta_config(const Config *base, const char *run, int H, int N, Config *c) {
    if (strcmp(base->attnres_mode, residual_baseline.name) != 0)
        return mhar_fail("%s: attnres_mode is '%s'; convert takes a %s run (the standard "
                         "residual stream that %s keeps)", run, base->attnres_mode, residual_baseline.name,
                         residual_delta_mh.name);
    int d = base->hidden_size, L = base->num_hidden_layers;
    if (d % H != 0)
        return mhar_fail("--route-heads %d does not divide hidden_size %d of %s (routing heads own "
                         "equal slices of the width)", H, d, run);
    if (N > L) return mhar_fail("--route-blocks %d is more than the %d layers of %s", N, L, run);
    *c = *base;
    snprintf(c->attnres_mode, sizeof c->attnres_mode, "%s", residual_delta_mh.name);
    c->attnres_num_heads = H;
    c->attnres_num_blocks = N;
    return config_validate(c, "converted config");
}

// Base tensors by name; the rest must be the scheme's constant-init tensors.
static int copy_weights(const Model *base, Model *conv) {
    int copied = 0;
    for (int i = 0; i < conv->table.n; i++) {
        const ParamInfo *p = &conv->table.p[i];
        float *dst = conv->params + p->offset;
        int j = ptable_find(&base->table, p->name);
        if (j >= 0) {
            const ParamInfo *b = &base->table.p[j];
            if (b->numel != p->numel)
                return mhar_fail("tensor '%s': %zu values in the base, %zu in the converted model", p->name,
                                 b->numel, p->numel);
            memcpy(dst, base->params + b->offset, sizeof(float) * p->numel);
            copied++;
        } else if (p->init == INIT_ZEROS || p->init == INIT_ONES) {
            for (size_t k = 0; k < p->numel; k++) dst[k] = p->init == INIT_ONES ? 1.0f : 0.0f;
        } else {
            return mhar_fail("tensor '%s' is neither in the base nor constant-initialised (a bug)", p->name);
        }
    }
    if (copied != base->table.n)
        return mhar_fail("%d of the base's %d tensors found in the converted model (a bug)", copied,
                         base->table.n);
    return MHAR_OK;
}

// Both models on one probe batch: the logits must be bit-identical.
static int check_identity(Model *base, Model *conv) {
    const Config *c = &base->cfg;
    int T = c->max_position_embeddings < 64 ? c->max_position_embeddings : 64, B = 2;
    int tokens[128];
    for (int i = 0; i < B * T; i++) tokens[i] = (int)((i * 7919u + 13u) % (unsigned)c->vocab_size);
    if (model_alloc_acts(base, B, T) || model_alloc_acts(conv, B, T)) return MHAR_ERR;
    model_forward(base, tokens, NULL);
    model_forward(conv, tokens, NULL);
    size_t n = (size_t)B * T * c->vocab_size;
    if (memcmp(base->logits, conv->logits, n * sizeof(float)) != 0)
        return mhar_fail("the converted model's logits differ from the base's on the probe batch (a bug); "
                         "nothing written");
    return MHAR_OK;
}

// DIR.tmp.PID gets the model's files and the base's tokenizer, if it has
// one (each written atomically), then becomes DIR.
static int write_atomically(const Model *m, const char *run, const char *out) {
    char tmp[MHAR_PATH_MAX];
    if (dir_stage(out, tmp, sizeof tmp)) return MHAR_ERR;
    if (model_save(m, tmp) ||
        (run_tokenizer_present(run) && run_tokenizer_copy(run, tmp, m->cfg.max_position_embeddings))) {
        dir_discard(tmp);
        return MHAR_ERR;
    }
    return dir_publish(tmp, out);
}

int convert_to_delta_mh(const char *run, const char *out, int heads, int blocks, ConvertInfo *info) {
    char path[MHAR_PATH_MAX];
    Config base_cfg, cfg;
    Model base = {0}, conv = {0};
    memset(info, 0, sizeof *info);
    // The mode first, so a non-baseline run is refused before its weights load.
    if (path_join(path, sizeof path, run, "config.json") || config_load(path, &base_cfg)) return MHAR_ERR;
    if (!heads) heads = residual_delta_mh.default_heads;
    if (!blocks) blocks = base_cfg.num_hidden_layers < CONVERT_MAX_DEFAULT_BLOCKS ? base_cfg.num_hidden_layers
                                                                                : CONVERT_MAX_DEFAULT_BLOCKS;
    int rc = delta_config(&base_cfg, run, heads, blocks, &cfg);
    if (!rc) rc = dir_check_new(out);
    if (!rc) rc = model_load(&base, run);
    if (!rc) rc = model_create(&conv, &cfg);
    if (!rc) rc = copy_weights(&base, &conv);
    if (!rc) rc = check_identity(&base, &conv);
    if (!rc) rc = write_atomically(&conv, run, out);
    if (!rc) {
        info->mode = residual_delta_mh.name;
        info->heads = heads;
        info->blocks = blocks;
        info->block_layers = residual_block_layers(&cfg);
        for (int i = 0; i < conv.table.n; i++)
            if (ptable_find(&base.table, conv.table.p[i].name) < 0) info->params_added += conv.table.p[i].numel;
    }
    model_free(&base);
    model_free(&conv);
    return rc;
}
