// The Qwen3-style decoder of SPEC §1 (or its Llama form, without the
// per-head q/k norm): parameters in one buffer described by
// a ParamTable, activations in one arena sized once per (batch, sequence),
// forward and backward written by hand against kernels/ops.h. The residual
// scheme (SPEC §2) is a plug-in behind residual/residual.h.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "params.h"
#include "../kernels/ops.h"
#include "../residual/residual.h"

typedef struct {   // offsets (in floats) of one layer's tensors in the buffer (q_norm, k_norm: qwen3)
    size_t in_norm, wq, wk, wv, wo, q_norm, k_norm, post_norm, w_gate, w_up, w_down;
} LayerOffsets;

typedef struct {   // saved activations of one attention sublayer (n = B·T)
    float *xn, *rstd;         // normed input [n, d], [n]
    float *q_raw, *k_raw;     // projections before the per-head norm [n, nh·hd], [n, nkv·hd] (qwen3)
    float *q_rstd, *k_rstd;   // [n·nh], [n·nkv] (qwen3)
    float *q, *k, *v;         // (normed +) rotated q, k; v  [n, nh·hd], [n, nkv·hd]
    float *lse;               // log-sum-exp of each query row's scores [B, nh, T]
    float *y;                 // head outputs [n, nh·hd]
} AttnActs;

typedef struct {   // saved activations of one MLP sublayer
    float *xn, *rstd;         // [n, d], [n]
    float *gate_up, *hid;     // [n, 2·ffn]: a row's gate, then its up; [n, ffn] hid = silu(gate) ⊙ up
} MlpActs;

typedef struct {
    Config cfg;
    OpsContext *ctx;          // the backend: every tensor below is its memory
    ParamTable table;
    float *params, *grads;    // table.total floats each
    LayerOffsets *layers;     // [L]
    size_t off_embed, off_norm, off_head;  // off_head == off_embed when tied
    const ResidualScheme *scheme;
    Residual res;

    // Activation arena, sized by model_alloc_acts for (B, T).
    int B, T;
    float *arena;
    size_t arena_floats;
    int *tokens, *targets;    // [n]
    // [2L+1] rows of [n, d] each, row s at s·row_floats: the sublayer
    // outputs (row 0 the embedding), their gradients, the sublayer inputs.
    float *sources, *dsources, *inputs;
    size_t row_floats;
    AttnActs *attn;           // [L]
    MlpActs *mlp;             // [L]
    float *final_xn, *final_rstd, *logits, *losses;  // [n,d], [n], [n,V], [n]
    float *lse;               // [n] the log-sum-exp of each row of logits (with z-loss)
    // PaLM's z-loss: with z_loss = C > 0, model_backward differentiates
    // CE + C·mean(lse²), which keeps the softmax normaliser near 1; the
    // forward still returns the CE alone and sets z_term = C·mean(lse²).
    float z_loss;
    double z_term;
    // backward scratch, shared by all layers
    float *d_x, *d_xn, *d_qraw, *d_kraw, *d_q, *d_k, *d_v, *d_y;
    float *d_gate_up, *d_hid, *att_scratch, *norm_scratch;  // d_gate_up [n, 2·ffn] as gate_up
    float *rope_cos, *rope_sin;  // [max_pos, hd/2]
    // Called by model_backward as each range [lo, hi) of the parameter
    // gradients becomes final, from the head down to the embedding (the
    // ranges cover the table once); NULL: not called. Data-parallel training
    // starts reducing a layer's gradients here while the layers below still
    // run their backward.
    void (*grads_ready)(void *arg, size_t lo, size_t hi);
    void *grads_ready_arg;
} Model;

// Build the parameter table for cfg and allocate params (zeroed).
int model_create(Model *m, const Config *cfg);
// Allocate grads (zeroed), which model_backward and model_zero_grad need;
// only training allocates them. Nothing to do when they exist.
int model_alloc_grads(Model *m);
// SPEC §1 init: matrices N(0, 0.02²), norms 1, scheme tensors per scheme.
void model_init_weights(Model *m, uint64_t seed);
// Load DIR/config.json and DIR/model.safetensors (validated), or save them;
// saving a scheme transformers has no class for also writes mhar's remote
// code (configuration_mhar.py, modeling_mhar.py; model/hf_remote.h).
int model_load(Model *m, const char *dir);
int model_save(const Model *m, const char *dir);
// Size the activation arena for batches of B sequences of T tokens: checks
// model_check_batch, then the arena's size against memory, then allocates.
int model_alloc_acts(Model *m, int B, int T);
// B, T >= 1, T <= max_position_embeddings, B·T <= MODEL_MAX_TOKENS: a
// micro-batch the kernels (int token counts) and the arena arithmetic take.
#define MODEL_MAX_TOKENS (1 << 24)
int model_check_batch(const Config *c, int B, int T);
// tokens, targets [B·T] (targets may be NULL: logits only). Returns the mean
// cross-entropy (0 without targets); m->z_term gets the z-loss term (0
// without z-loss). Logits stay in m->logits.
float model_forward(Model *m, const int *tokens, const int *targets);
// Accumulate into m->grads (model_alloc_grads) the gradient of loss_scale ·
// (mean loss of the last forward, plus its z-loss term). Destroys m->logits.
void model_backward(Model *m, float loss_scale);
void model_zero_grad(Model *m);
void model_free(Model *m);

// Inference with a KV cache: one token at a time, the arena sized (1, 1).
typedef struct {
    OpsContext *ctx;              // the model's backend, which owns the buffers
    int max_len;
    float *k, *v;                 // [L, max_len, nkv·hd] rotated keys, values
    float *scores;                // [max_len]
    float *rope_cos, *rope_sin;   // [max_len, hd/2]
} KVCache;

int kvcache_init(KVCache *kv, Model *m, int max_len);
void kvcache_free(KVCache *kv);
// Feed `token` at position pos (< max_len); returns the next-token logits [V].
const float *model_decode_step(Model *m, KVCache *kv, int token, int pos);

// FLOPs of one training token (forward + backward): 6·params + the
// attention score/value products 12·L·nh·hd·T (PaLM's convention).
double model_train_flops_per_token(const Model *m, int T);
// Bytes a training step of cfg on B x T holds: parameters, gradients, the
// activation arena and AdamW's two moments, from the same table and carving
// as model_create and model_alloc_acts, with nothing allocated; -1 for a
// config or batch they would refuse.
double model_train_bytes(const Config *cfg, int B, int T);
