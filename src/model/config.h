// Model configuration: the HF Qwen3 config.json keys (SPEC §3) plus the
// residual scheme. Loaded from a file or a named preset, always validated.
#pragma once
#include <stddef.h>

typedef struct {
    int vocab_size;
    int hidden_size;          // d
    int num_hidden_layers;    // L
    int num_attention_heads;  // nh
    int num_key_value_heads;  // nkv (divides nh)
    int head_dim;             // hd
    int intermediate_size;    // ffn
    int max_position_embeddings;
    float rms_norm_eps;       // 1e-6
    float rope_theta;         // 10000
    int tie_word_embeddings;  // 1 = LM head is embed_tokensᵀ
    char attnres_mode[16];    // baseline|hc|attnres|mhar|block|denseformer|delta_mh
    int attnres_num_heads;    // H for attnres/mhar/block/delta_mh (attnres: 1)
    int attnres_num_blocks;   // N for block routing / delta_mh (0 = full)
} Config;

// Fill c with preset `name` (nano, micro, mini, 100m, 350m, 1b), vocab 0
// (to be set from data), residual "baseline". MHAR_ERR for an unknown name.
int config_preset(const char *name, Config *c);
// Parse and validate an HF-style config.json. Errors name the file and key.
int config_load(const char *path, Config *c);
// The same from the text[0..n) of a config.json (need not be NUL-terminated);
// `origin` names it in errors. config_load reads the file and calls this.
int config_parse(const char *text, size_t n, const char *origin, Config *c);
// 1 when transformers' own Qwen3 class computes this model (the baseline
// scheme); every other scheme's run directory carries mhar's remote code.
int config_hf_native(const Config *c);
// Write config.json atomically, with the HF Qwen3 keys that transformers
// needs to load the directory (architectures, model_type, hidden_act, ...);
// a non-native scheme names MharForCausalLM (model_type "mhar", auto_map,
// one "mhar_<scheme>" layer type per layer) instead of Qwen3ForCausalLM.
int config_save(const char *path, const Config *c);
// Check every field (positive sizes, heads divide, head_dim even, routing
// heads divide width, known mode...). `origin` names where c came from.
int config_validate(const Config *c, const char *origin);
