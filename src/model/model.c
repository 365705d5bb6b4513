// SPEC §1: the decoder, forward and backward. Read top to bottom: parameter
// table, init, activation arena, sublayers, the model pass, load/save.
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../io/safetensors.h"
#include "hf_remote.h"
#include "../kernels/ops.h"
#include "../util/memlimit.h"

#define P(m, off) ((m)->params + (off))
#define G(m, off) ((m)->grads + (off))
#define SRC(m, s) ((m)->sources + (size_t)(s) * (m)->row_floats)     // row s of [2L+1][n, d]
#define DSRC(m, s) ((m)->dsources + (size_t)(s) * (m)->row_floats)
#define INPUT(m, s) ((m)->inputs + (size_t)(s) * (m)->row_floats)

// ---------------------------------------------------------------------------
// Parameter table (SPEC §3 names, HF Qwen3/Llama layout: matrices are [out, in])

static int add(ParamTable *t, size_t *off, int init, ParamClass cls, int ndim, int a, int b, const char *fmt,
               int layer) {
    char name[96];
    snprintf(name, sizeof name, fmt, layer);
    int shape[2] = {a, b};
    int i = ptable_add(t, name, ndim, shape, init, cls);
    if (i < 0) return MHAR_ERR;
    if (off) *off = t->p[i].offset;
    return MHAR_OK;
}

static int build_table(Model *m) {
    const Config *c = &m->cfg;
    ParamTable *t = &m->table;
    int d = c->hidden_size, hd = c->head_dim, qd = c->num_attention_heads * hd;
    int kvd = c->num_key_value_heads * hd, f = c->intermediate_size;
    if (add(t, &m->off_embed, INIT_NORMAL, PARAM_EMBED, 2, c->vocab_size, d, "model.embed_tokens.weight", 0))
        return MHAR_ERR;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        LayerOffsets *o = &m->layers[l];
        const char *pre = "model.layers.%d.";
        char fmt[96], name_l[96];
#define ADD(field, init, cls, nd, a, b, suffix)                              \
        snprintf(fmt, sizeof fmt, "%s%s", pre, suffix);                     \
        if (add(t, &o->field, init, cls, nd, a, b, fmt, l)) return MHAR_ERR;
        ADD(in_norm, INIT_ONES, PARAM_NORM, 1, d, 0, "input_layernorm.weight");
        ADD(wq, INIT_NORMAL, PARAM_MATRIX, 2, qd, d, "self_attn.q_proj.weight");
        ADD(wk, INIT_NORMAL, PARAM_MATRIX, 2, kvd, d, "self_attn.k_proj.weight");
        ADD(wv, INIT_NORMAL, PARAM_MATRIX, 2, kvd, d, "self_attn.v_proj.weight");
        ADD(wo, INIT_NORMAL, PARAM_MATRIX, 2, d, qd, "self_attn.o_proj.weight");
        if (config_qk_norm(c)) {   // qwen3; llama has no per-head q/k norm
            ADD(q_norm, INIT_ONES, PARAM_NORM, 1, hd, 0, "self_attn.q_norm.weight");
            ADD(k_norm, INIT_ONES, PARAM_NORM, 1, hd, 0, "self_attn.k_norm.weight");
        }
        ADD(post_norm, INIT_ONES, PARAM_NORM, 1, d, 0, "post_attention_layernorm.weight");
        ADD(w_gate, INIT_NORMAL, PARAM_MATRIX, 2, f, d, "mlp.gate_proj.weight");
        // right after the gate's rows: [gate; up] is one [2·ffn, d] matrix, one
        // product each way (mlp_sublayer_forward)
        snprintf(fmt, sizeof fmt, "%smlp.up_proj.weight", pre);
        snprintf(name_l, sizeof name_l, fmt, l);
        int up = ptable_add_next(t, name_l, 2, (int[2]){f, d}, INIT_NORMAL, PARAM_MATRIX);
        if (up < 0) return MHAR_ERR;
        o->w_up = t->p[up].offset;
        ADD(w_down, INIT_NORMAL, PARAM_MATRIX, 2, d, f, "mlp.down_proj.weight");
#undef ADD
    }
    if (m->scheme->add_params(t, c)) return MHAR_ERR;
    if (add(t, &m->off_norm, INIT_ONES, PARAM_NORM, 1, d, 0, "model.norm.weight", 0)) return MHAR_ERR;
    m->off_head = m->off_embed;
    if (!c->tie_word_embeddings &&
        add(t, &m->off_head, INIT_NORMAL, PARAM_MATRIX, 2, c->vocab_size, d, "lm_head.weight", 0)) return MHAR_ERR;
    return MHAR_OK;
}

int model_create(Model *m, const Config *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (config_validate(cfg, "model config")) return MHAR_ERR;
    m->scheme = residual_find(cfg->attnres_mode);
    if (!m->scheme) return mhar_fail("residual scheme '%s' is not available", cfg->attnres_mode);
    m->layers = mhar_alloc(sizeof(LayerOffsets) * cfg->num_hidden_layers);
    if (!m->layers || build_table(m)) return MHAR_ERR;
    if (mem_check(sizeof(float) * (double)m->table.total, "a model of %.0fM parameters (weights)",
                  (double)m->table.total / 1e6))
        return MHAR_ERR;
    m->ctx = ops_open();
    if (!m->ctx) return MHAR_ERR;
    m->params = ops_alloc(m->ctx, m->table.total * sizeof(float));
    return m->params ? MHAR_OK : MHAR_ERR;
}

// Apart from model_create: importing, exporting, evaluating and sampling an
// 8B checkpoint need its 32 GB of weights, not 64 GB with gradients.
int model_alloc_grads(Model *m) {
    if (m->grads) return MHAR_OK;
    if (mem_check(sizeof(float) * (double)m->table.total, "the gradients of a model of %.0fM parameters",
                  (double)m->table.total / 1e6))
        return MHAR_ERR;
    m->grads = ops_alloc(m->ctx, m->table.total * sizeof(float));
    return m->grads ? MHAR_OK : MHAR_ERR;
}

void model_init_weights(Model *m, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < m->table.n; i++) {
        const ParamInfo *p = &m->table.p[i];
        float *w = m->params + p->offset;
        for (size_t j = 0; j < p->numel; j++) {
            if (p->init == INIT_NORMAL) w[j] = 0.02f * rng_normal(&rng);
            else if (p->init == INIT_ONES) w[j] = 1.0f;
            else if (p->init == INIT_ZEROS) w[j] = 0.0f;
        }
    }
    // The scheme's own tensors draw from a separate stream so adding a
    // scheme never changes the base model's initial weights.
    if (m->scheme->init_params) {
        rng_seed(&rng, seed ^ 0x5eed5c4e3e000000ull);
        m->scheme->init_params(&m->table, &m->cfg, m->params, &rng);
    }
}

// ---------------------------------------------------------------------------
// Activation arena: every buffer of a (B, T) step carved from one allocation.

// `total` counts the same floats in double: with B·T <= MODEL_MAX_TOKENS
// every single size fits size_t, but an absurd config could overflow their
// sum; the double is checked against memory before `used` is trusted.
typedef struct { float *base; size_t used; int dry; double total; } Carver;

static float *carve(Carver *cv, size_t n) {
    float *p = cv->dry ? NULL : cv->base + cv->used;
    cv->used += (n + 15) / 16 * 16;  // keep every view 64-byte aligned
    cv->total += (double)n + 15;
    return p;
}

static void carve_all(Model *m, Carver *cv) {
    const Config *c = &m->cfg;
    size_t n = (size_t)m->B * m->T, d = c->hidden_size, f = c->intermediate_size;
    size_t nh = c->num_attention_heads, nkv = c->num_key_value_heads, hd = c->head_dim;
    size_t qk = config_qk_norm(c);  // the pre-norm q, k and their gradients: qwen3 only
    int L = c->num_hidden_layers, rows = 2 * L + 1;
    // Sources, their gradients and the inputs: each one buffer of 2L+1 rows
    // (the routing kernels read a row stride, not a list of pointers), at
    // the stride the kernels are measured at (ops.h: off the 4 KiB multiple).
    m->row_floats = route_row_floats(n, d);
    m->sources = carve(cv, rows * m->row_floats);
    m->dsources = m->scheme->source_grad ? (carve(cv, 0), NULL) : carve(cv, rows * m->row_floats);
    m->inputs = carve(cv, rows * m->row_floats);
    for (int l = 0; l < L; l++) {
        AttnActs *a = &m->attn[l];
        a->xn = carve(cv, n * d); a->rstd = carve(cv, n);
        a->q_raw = carve(cv, qk * n * nh * hd); a->k_raw = carve(cv, qk * n * nkv * hd);
        a->q_rstd = carve(cv, qk * n * nh); a->k_rstd = carve(cv, qk * n * nkv);
        a->q = carve(cv, n * nh * hd); a->k = carve(cv, n * nkv * hd); a->v = carve(cv, n * nkv * hd);
        a->lse = carve(cv, n * nh);
        a->y = carve(cv, n * nh * hd);
        MlpActs *p = &m->mlp[l];
        p->xn = carve(cv, n * d); p->rstd = carve(cv, n);
        p->gate_up = carve(cv, n * 2 * f); p->hid = carve(cv, n * f);
    }
    m->final_xn = carve(cv, n * d); m->final_rstd = carve(cv, n);
    m->logits = carve(cv, n * c->vocab_size); m->losses = carve(cv, n); m->lse = carve(cv, n);
    m->d_x = carve(cv, n * d); m->d_xn = carve(cv, n * d);
    m->d_qraw = carve(cv, qk * n * nh * hd); m->d_kraw = carve(cv, qk * n * nkv * hd);
    m->d_q = carve(cv, n * nh * hd); m->d_k = carve(cv, n * nkv * hd); m->d_v = carve(cv, n * nkv * hd);
    m->d_y = carve(cv, n * nh * hd);
    m->d_gate_up = carve(cv, n * 2 * f); m->d_hid = carve(cv, n * f);
    m->att_scratch = carve(cv, attention_scratch_floats(m->ctx, m->B, m->T, nkv, hd));
    // the norms' backward: the residual-width norms, or the q norm's n·nh rows (k's are fewer)
    size_t norm_floats = rmsnorm_scratch_floats((int)n, (int)d), q_floats = rmsnorm_scratch_floats((int)(n * nh), (int)hd);
    m->norm_scratch = carve(cv, qk && q_floats > norm_floats ? q_floats : norm_floats);
    m->res.scratch_floats = route_scratch_floats(m->ctx, rows, d, c->attnres_num_heads);
    m->res.scratch = carve(cv, m->res.scratch_floats);
    m->res.acts = carve(cv, m->scheme->act_floats(c, (int)n));
    m->rope_cos = carve(cv, (size_t)m->T * hd / 2); m->rope_sin = carve(cv, (size_t)m->T * hd / 2);
    m->tokens = (int *)carve(cv, n); m->targets = (int *)carve(cv, n);
}

int model_check_batch(const Config *c, int B, int T) {
    if (B <= 0 || T <= 0) return mhar_fail("batch %d and sequence %d must be positive", B, T);
    if (T > c->max_position_embeddings)
        return mhar_fail("sequence length %d exceeds max_position_embeddings %d", T, c->max_position_embeddings);
    if ((double)B * T > MODEL_MAX_TOKENS)
        return mhar_fail("batch %d x sequence %d = %.0f tokens per micro-batch, more than the limit %d "
                         "(use --accum for larger batches)", B, T, (double)B * T, MODEL_MAX_TOKENS);
    return MHAR_OK;
}

// cos, sin [n_pos, hd/2] of the config's RoPE frequencies (plain or scaled).
static int rope_tables(Model *m, float *cos_t, float *sin_t, int n_pos) {
    double *inv_freq = mhar_alloc(sizeof(double) * (size_t)(m->cfg.head_dim / 2));
    if (!inv_freq) return MHAR_ERR;
    config_rope_inv_freq(&m->cfg, inv_freq);
    rope_table(m->ctx, cos_t, sin_t, n_pos, m->cfg.head_dim, inv_freq);
    mhar_free(inv_freq);
    return MHAR_OK;
}

int model_alloc_acts(Model *m, int B, int T) {
    const Config *c = &m->cfg;
    if (model_check_batch(c, B, T)) return MHAR_ERR;
    ops_free(m->ctx, m->arena);
    m->arena = NULL;  // a refusal below must not leave it dangling for model_free
    m->B = B; m->T = T;
    if (!m->attn) {
        m->attn = mhar_alloc(sizeof(AttnActs) * c->num_hidden_layers);
        m->mlp = mhar_alloc(sizeof(MlpActs) * c->num_hidden_layers);
        if (!m->attn || !m->mlp) return MHAR_ERR;
    }
    Carver cv = {NULL, 0, 1, 0};
    carve_all(m, &cv);
    if (mem_check(cv.total * sizeof(float), "the activations of batch %d x sequence %d", B, T)) return MHAR_ERR;
    m->arena_floats = cv.used;
    m->arena = ops_alloc(m->ctx, cv.used * sizeof(float));
    if (!m->arena) return MHAR_ERR;
    cv = (Carver){m->arena, 0, 0, 0};
    carve_all(m, &cv);
    if (rope_tables(m, m->rope_cos, m->rope_sin, T)) return MHAR_ERR;

    Residual *r = &m->res;
    r->scheme = m->scheme; r->cfg = &m->cfg; r->ctx = m->ctx; r->n_tok = B * T;
    r->sources = m->sources; r->dsources = m->dsources; r->inputs = m->inputs; r->row_floats = m->row_floats;
    r->table = &m->table; r->params = m->params; r->grads = m->grads;
    return m->scheme->bind(r);
}

// ---------------------------------------------------------------------------
// Attention sublayer: x [n, d] -> out [n, d]

static void attention_sublayer_forward(Model *m, int l, const float *x, float *out) {
    const Config *c = &m->cfg;
    const LayerOffsets *o = &m->layers[l];
    AttnActs *a = &m->attn[l];
    int B = m->B, T = m->T, n = B * T, d = c->hidden_size, hd = c->head_dim;
    int nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    float eps = c->rms_norm_eps;
    const int qk = config_qk_norm(c);  // llama projects straight into q, k
    rmsnorm_forward(m->ctx, a->xn, a->rstd, x, P(m, o->in_norm), n, d, eps);
    matmul_forward(m->ctx, qk ? a->q_raw : a->q, a->xn, P(m, o->wq), n, d, nh * hd);
    matmul_forward(m->ctx, qk ? a->k_raw : a->k, a->xn, P(m, o->wk), n, d, nkv * hd);
    matmul_forward(m->ctx, a->v, a->xn, P(m, o->wv), n, d, nkv * hd);
    if (qk) {
        rmsnorm_forward(m->ctx, a->q, a->q_rstd, a->q_raw, P(m, o->q_norm), n * nh, hd, eps);
        rmsnorm_forward(m->ctx, a->k, a->k_rstd, a->k_raw, P(m, o->k_norm), n * nkv, hd, eps);
    }
    rope_forward(m->ctx, a->q, B, T, nh, hd, 0, m->rope_cos, m->rope_sin);
    rope_forward(m->ctx, a->k, B, T, nkv, hd, 0, m->rope_cos, m->rope_sin);
    attention_forward(m->ctx, a->y, a->lse, m->att_scratch, a->q, a->k, a->v, B, T, nh, nkv, hd);
    matmul_forward(m->ctx, out, a->y, P(m, o->wo), n, nh * hd, d);
}

// dout [n, d] -> dx [n, d] (overwritten); parameter grads accumulate. dx
// may be dout itself (Residual's read_grad): dout is read by the first op
// only, dx written by the last (so in the MLP's below).
static void attention_sublayer_backward(Model *m, int l, const float *x, const float *dout, float *dx) {
    const Config *c = &m->cfg;
    const LayerOffsets *o = &m->layers[l];
    AttnActs *a = &m->attn[l];
    int B = m->B, T = m->T, n = B * T, d = c->hidden_size, hd = c->head_dim;
    int nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    matmul_backward(m->ctx, m->d_y, G(m, o->wo), dout, a->y, P(m, o->wo), n, nh * hd, d);
    attention_backward(m->ctx, m->d_q, m->d_k, m->d_v, m->att_scratch, m->d_y, a->y, a->lse, a->q, a->k, a->v,
                       B, T, nh, nkv, hd);
    rope_backward(m->ctx, m->d_q, B, T, nh, hd, 0, m->rope_cos, m->rope_sin);
    rope_backward(m->ctx, m->d_k, B, T, nkv, hd, 0, m->rope_cos, m->rope_sin);
    const int qk = config_qk_norm(c);
    if (qk) {
        rmsnorm_backward(m->ctx, m->d_qraw, G(m, o->q_norm), m->norm_scratch, m->d_q, a->q_raw, P(m, o->q_norm),
                         a->q_rstd, n * nh, hd);
        rmsnorm_backward(m->ctx, m->d_kraw, G(m, o->k_norm), m->norm_scratch, m->d_k, a->k_raw, P(m, o->k_norm),
                         a->k_rstd, n * nkv, hd);
    }
    const float *dq = qk ? m->d_qraw : m->d_q, *dk = qk ? m->d_kraw : m->d_k;  // at the projections' outputs
    matmul_backward(m->ctx, m->d_xn, G(m, o->wq), dq, a->xn, P(m, o->wq), n, d, nh * hd);
    matmul_backward_add(m->ctx, m->d_xn, G(m, o->wk), dk, a->xn, P(m, o->wk), n, d, nkv * hd);
    matmul_backward_add(m->ctx, m->d_xn, G(m, o->wv), m->d_v, a->xn, P(m, o->wv), n, d, nkv * hd);
    rmsnorm_backward(m->ctx, dx, G(m, o->in_norm), m->norm_scratch, m->d_xn, x, P(m, o->in_norm), a->rstd, n, d);
}

// ---------------------------------------------------------------------------
// MLP sublayer (SwiGLU): x [n, d] -> out [n, d]

static void mlp_sublayer_forward(Model *m, int l, const float *x, float *out) {
    const Config *c = &m->cfg;
    const LayerOffsets *o = &m->layers[l];
    MlpActs *a = &m->mlp[l];
    int n = m->B * m->T, d = c->hidden_size, f = c->intermediate_size;
    rmsnorm_forward(m->ctx, a->xn, a->rstd, x, P(m, o->post_norm), n, d, c->rms_norm_eps);
    // gate and up in one product ([gate; up] are adjacent in the table): the
    // input is packed once and the GEMM is twice as wide (micro, forward and
    // both backward products: 58.8 against 61.5 ms a layer)
    matmul_forward(m->ctx, a->gate_up, a->xn, P(m, o->w_gate), n, d, 2 * f);
    swiglu_forward(m->ctx, a->hid, a->gate_up, n, f);
    matmul_forward(m->ctx, out, a->hid, P(m, o->w_down), n, f, d);
}

static void mlp_sublayer_backward(Model *m, int l, const float *x, const float *dout, float *dx) {
    const Config *c = &m->cfg;
    const LayerOffsets *o = &m->layers[l];
    MlpActs *a = &m->mlp[l];
    int n = m->B * m->T, d = c->hidden_size, f = c->intermediate_size;
    matmul_backward(m->ctx, m->d_hid, G(m, o->w_down), dout, a->hid, P(m, o->w_down), n, f, d);
    swiglu_backward(m->ctx, m->d_gate_up, m->d_hid, a->gate_up, n, f);
    matmul_backward(m->ctx, m->d_xn, G(m, o->w_gate), m->d_gate_up, a->xn, P(m, o->w_gate), n, d, 2 * f);
    rmsnorm_backward(m->ctx, dx, G(m, o->post_norm), m->norm_scratch, m->d_xn, x, P(m, o->post_norm), a->rstd, n,
                     d);
}

// ---------------------------------------------------------------------------
// The residual scheme's steps, each timed as the "residual" region of the
// op profile (mhar bench sets it against the scheme's traffic floor).

static void res_read(Model *m, int s) {
    double t = ops_profile_clock(m->ctx);
    m->scheme->read(&m->res, s);
    ops_profile_region(m->ctx, "residual", t);
}

static void res_write(Model *m, int s) {
    double t = ops_profile_clock(m->ctx);
    m->scheme->write(&m->res, s);
    ops_profile_region(m->ctx, "residual", t);
}

// Where the gradient of inputs[s] goes: the scheme's row, or d_x.
static float *res_dx(Model *m, int s) { return m->scheme->read_grad ? m->scheme->read_grad(&m->res, s) : m->d_x; }

static void res_read_backward(Model *m, int s) {
    double t = ops_profile_clock(m->ctx);
    m->scheme->read_backward(&m->res, s, res_dx(m, s));
    ops_profile_region(m->ctx, "residual", t);
}

static void res_write_backward(Model *m, int s) {
    double t = ops_profile_clock(m->ctx);
    m->scheme->write_backward(&m->res, s);
    ops_profile_region(m->ctx, "residual", t);
}

// Where the gradient of source s is: the scheme's row, or dsources row s.
static float *res_dsource(Model *m, int s) {
    return m->scheme->source_grad ? m->scheme->source_grad(&m->res, s) : DSRC(m, s);
}

// dsources starts at 0 unless the scheme's backward sets every row itself.
static void res_zero_source_grads(Model *m) {
    double t = ops_profile_clock(m->ctx);
    if (m->dsources && !m->scheme->sets_source_grads)
        vec_zero(m->ctx, m->dsources, (size_t)(2 * m->cfg.num_hidden_layers + 1) * m->row_floats);
    ops_profile_region(m->ctx, "residual", t);
}

// ---------------------------------------------------------------------------
// The whole model

float model_forward(Model *m, const int *tokens, const int *targets) {
    const Config *c = &m->cfg;
    int n = m->B * m->T, d = c->hidden_size, V = c->vocab_size, L = c->num_hidden_layers;
    if (tokens != m->tokens) memcpy(m->tokens, tokens, sizeof(int) * n);
    embedding_forward(m->ctx, SRC(m, 0), tokens, P(m, m->off_embed), n, d);
    for (int l = 0; l < L; l++) {
        int s = 2 * l;
        res_read(m, s);
        attention_sublayer_forward(m, l, INPUT(m, s), SRC(m, s + 1));
        res_write(m, s);
        res_read(m, s + 1);
        mlp_sublayer_forward(m, l, INPUT(m, s + 1), SRC(m, s + 2));
        res_write(m, s + 1);
    }
    res_read(m, 2 * L);
    rmsnorm_forward(m->ctx, m->final_xn, m->final_rstd, INPUT(m, 2 * L), P(m, m->off_norm), n, d, c->rms_norm_eps);
    matmul_forward(m->ctx, m->logits, m->final_xn, P(m, m->off_head), n, d, V);
    m->z_term = 0;
    if (!targets) return 0.0f;
    if (targets != m->targets) memcpy(m->targets, targets, sizeof(int) * n);
    double ce = xent_forward(m->ctx, m->losses, m->lse, m->logits, targets, n, V);
    if (m->z_loss > 0) {
        double squares;
        sum_squares(m->ctx, &squares, m->lse, n, n);
        m->z_term = m->z_loss * squares / n;
    }
    return (float)(ce / n);
}

// The end of layer l's tensors in the table (the scheme's follow the last layer's).
static size_t layer_end(const Model *m, int l) {
    const Config *c = &m->cfg;
    if (l + 1 < c->num_hidden_layers) return m->layers[l + 1].in_norm;
    return m->layers[l].w_down + (size_t)c->hidden_size * c->intermediate_size;
}

static void grads_ready(Model *m, size_t lo, size_t hi) {
    if (m->grads_ready && hi > lo) m->grads_ready(m->grads_ready_arg, lo, hi);
}

void model_backward(Model *m, float loss_scale) {
    const Config *c = &m->cfg;
    int n = m->B * m->T, d = c->hidden_size, V = c->vocab_size, L = c->num_hidden_layers;
    res_zero_source_grads(m);
    float *dlogits = m->logits;  // in place: the logits are not needed again
    xent_backward(m->ctx, dlogits, m->logits, m->lse, m->targets, n, V, loss_scale / n, loss_scale * m->z_loss / n);
    matmul_backward(m->ctx, m->d_xn, G(m, m->off_head), dlogits, m->final_xn, P(m, m->off_head), n, d, V);
    rmsnorm_backward(m->ctx, res_dx(m, 2 * L), G(m, m->off_norm), m->norm_scratch, m->d_xn, INPUT(m, 2 * L), P(m, m->off_norm),
                     m->final_rstd, n, d);
    res_read_backward(m, 2 * L);
    // The final norm and an untied head (a tied one is the embedding's).
    grads_ready(m, m->off_norm, m->table.total);
    for (int l = L - 1; l >= 0; l--) {
        int s = 2 * l + 1;
        res_write_backward(m, s);
        mlp_sublayer_backward(m, l, INPUT(m, s), res_dsource(m, s + 1), res_dx(m, s));
        res_read_backward(m, s);
        s = 2 * l;
        res_write_backward(m, s);
        attention_sublayer_backward(m, l, INPUT(m, s), res_dsource(m, s + 1), res_dx(m, s));
        res_read_backward(m, s);
        grads_ready(m, m->layers[l].in_norm, layer_end(m, l));
    }
    grads_ready(m, layer_end(m, L - 1), m->off_norm);   // the scheme's parameters
    embedding_backward(m->ctx, G(m, m->off_embed), res_dsource(m, 0), m->tokens, n, d, V);
    grads_ready(m, 0, m->layers[0].in_norm);
}

void model_zero_grad(Model *m) { vec_zero(m->ctx, m->grads, m->table.total); }

double model_train_flops_per_token(const Model *m, int T) {
    const Config *c = &m->cfg;
    double params = 0;
    for (int i = 0; i < m->table.n; i++) params += (double)m->table.p[i].numel;
    return 6.0 * params + 12.0 * c->num_hidden_layers * c->num_attention_heads * c->head_dim * T;
}

// ---------------------------------------------------------------------------
// Decoding with a KV cache (sampling). The scheme's read/write run on a
// one-token arena exactly as in training: routing is per token.

int kvcache_init(KVCache *kv, Model *m, int max_len) {
    const Config *c = &m->cfg;
    memset(kv, 0, sizeof *kv);
    if (max_len < 1 || max_len > c->max_position_embeddings)
        return mhar_fail("generation length %d is outside 1..max_position_embeddings %d", max_len,
                         c->max_position_embeddings);
    size_t per = (size_t)c->num_hidden_layers * max_len * c->num_key_value_heads * c->head_dim;
    if (mem_check(2.0 * sizeof(float) * (double)per, "a KV cache of %d positions", max_len)) return MHAR_ERR;
    kv->max_len = max_len;
    kv->ctx = m->ctx;
    kv->k = ops_alloc(kv->ctx, per * sizeof(float));
    kv->v = ops_alloc(kv->ctx, per * sizeof(float));
    kv->scores = ops_alloc(kv->ctx, sizeof(float) * max_len);
    kv->rope_cos = ops_alloc(kv->ctx, sizeof(float) * max_len * c->head_dim / 2);
    kv->rope_sin = ops_alloc(kv->ctx, sizeof(float) * max_len * c->head_dim / 2);
    if (!kv->k || !kv->v || !kv->scores || !kv->rope_cos || !kv->rope_sin) return MHAR_ERR;
    return rope_tables(m, kv->rope_cos, kv->rope_sin, max_len);
}

void kvcache_free(KVCache *kv) {
    ops_free(kv->ctx, kv->k); ops_free(kv->ctx, kv->v); ops_free(kv->ctx, kv->scores);
    ops_free(kv->ctx, kv->rope_cos); ops_free(kv->ctx, kv->rope_sin);
    memset(kv, 0, sizeof *kv);
}

// One token: x [d] -> out [d], attending to cached positions 0..pos.
static void attention_sublayer_decode(Model *m, KVCache *kv, int l, int pos, const float *x, float *out) {
    const Config *c = &m->cfg;
    const LayerOffsets *o = &m->layers[l];
    AttnActs *a = &m->attn[l];
    int d = c->hidden_size, hd = c->head_dim, nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    int kvd = nkv * hd;
    float eps = c->rms_norm_eps;
    float *kc = kv->k + ((size_t)l * kv->max_len) * kvd, *vc = kv->v + ((size_t)l * kv->max_len) * kvd;
    float *k_pos = kc + (size_t)pos * kvd;
    const int qk = config_qk_norm(c);
    rmsnorm_forward(m->ctx, a->xn, a->rstd, x, P(m, o->in_norm), 1, d, eps);
    matmul_forward(m->ctx, qk ? a->q_raw : a->q, a->xn, P(m, o->wq), 1, d, nh * hd);
    matmul_forward(m->ctx, qk ? a->k_raw : k_pos, a->xn, P(m, o->wk), 1, d, kvd);
    matmul_forward(m->ctx, vc + (size_t)pos * kvd, a->xn, P(m, o->wv), 1, d, kvd);
    if (qk) {
        rmsnorm_forward(m->ctx, a->q, a->q_rstd, a->q_raw, P(m, o->q_norm), nh, hd, eps);
        rmsnorm_forward(m->ctx, k_pos, a->k_rstd, a->k_raw, P(m, o->k_norm), nkv, hd, eps);
    }
    rope_forward(m->ctx, a->q, 1, 1, nh, hd, pos, kv->rope_cos, kv->rope_sin);
    rope_forward(m->ctx, k_pos, 1, 1, nkv, hd, pos, kv->rope_cos, kv->rope_sin);
    attention_decode(m->ctx, a->y, kv->scores, a->q, kc, vc, pos + 1, nh, nkv, hd);
    matmul_forward(m->ctx, out, a->y, P(m, o->wo), 1, nh * hd, d);
}

const float *model_decode_step(Model *m, KVCache *kv, int token, int pos) {
    const Config *c = &m->cfg;
    Residual *r = &m->res;
    int d = c->hidden_size, L = c->num_hidden_layers;
    embedding_forward(m->ctx, SRC(m, 0), &token, P(m, m->off_embed), 1, d);
    for (int l = 0; l < L; l++) {
        int s = 2 * l;
        m->scheme->read(r, s);
        attention_sublayer_decode(m, kv, l, pos, INPUT(m, s), SRC(m, s + 1));
        m->scheme->write(r, s);
        m->scheme->read(r, s + 1);
        mlp_sublayer_forward(m, l, INPUT(m, s + 1), SRC(m, s + 2));
        m->scheme->write(r, s + 1);
    }
    m->scheme->read(r, 2 * L);
    rmsnorm_forward(m->ctx, m->final_xn, m->final_rstd, INPUT(m, 2 * L), P(m, m->off_norm), 1, d, c->rms_norm_eps);
    matmul_forward(m->ctx, m->logits, m->final_xn, P(m, m->off_head), 1, d, c->vocab_size);
    return m->logits;
}

// ---------------------------------------------------------------------------
// Load / save a run directory (config.json + model.safetensors)

int model_load(Model *m, const char *dir) {
    char path[MHAR_PATH_MAX];
    Config cfg;
    memset(m, 0, sizeof *m);
    if (path_join(path, sizeof path, dir, "config.json")) return MHAR_ERR;
    if (config_load(path, &cfg)) return MHAR_ERR;
    if (model_create(m, &cfg)) return MHAR_ERR;
    if (path_join(path, sizeof path, dir, "model.safetensors")) return MHAR_ERR;
    return safetensors_load(path, &m->table, m->params, 0);
}

int model_save(const Model *m, const char *dir) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "model.safetensors")) return MHAR_ERR;
    if (safetensors_save(path, &m->table, m->params)) return MHAR_ERR;
    if (!config_hf_native(&m->cfg) && hf_remote_save(dir)) return MHAR_ERR;
    if (path_join(path, sizeof path, dir, "config.json")) return MHAR_ERR;
    return config_save(path, &m->cfg);
}

void model_free(Model *m) {
    ops_free(m->ctx, m->params); ops_free(m->ctx, m->grads); ops_free(m->ctx, m->arena);
    mhar_free(m->layers); mhar_free(m->attn); mhar_free(m->mlp);
    residual_release(&m->res);
    ops_close(m->ctx);
    ptable_free(&m->table);
    memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------------------
// The memory of a training step, known before any of it is allocated

double model_train_bytes(const Config *cfg, int B, int T) {
    Model m;
    memset(&m, 0, sizeof m);
    m.cfg = *cfg;
    m.scheme = residual_find(cfg->attnres_mode);
    if (config_validate(cfg, "model config") || !m.scheme || model_check_batch(cfg, B, T)) return -1;
    double bytes = -1;
    m.layers = mhar_alloc(sizeof(LayerOffsets) * cfg->num_hidden_layers);
    m.attn = mhar_alloc(sizeof(AttnActs) * cfg->num_hidden_layers);
    m.mlp = mhar_alloc(sizeof(MlpActs) * cfg->num_hidden_layers);
    m.ctx = ops_open();
    if (m.layers && m.attn && m.mlp && m.ctx && !build_table(&m)) {
        m.B = B; m.T = T;
        Carver cv = {NULL, 0, 1, 0};  // a dry run of model_alloc_acts' carving
        carve_all(&m, &cv);
        bytes = sizeof(float) * (4.0 * (double)m.table.total + cv.total);  // params, grads, AdamW's m and v
    }
    model_free(&m);
    return bytes;
}
