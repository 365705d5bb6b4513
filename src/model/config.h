// Model configuration: the HF config.json keys (SPEC §3) of a model family
// (Qwen3, or Llama: the same decoder without the per-head q/k RMSNorm), its
// RoPE frequencies, plus the residual scheme. Loaded from a file or a named
// preset, always validated; a key mhar does not implement is refused, never
// ignored.
#pragma once
#include <stddef.h>

// The decoder family. Everything else (every residual scheme) runs on both.
typedef enum { FAMILY_QWEN3, FAMILY_LLAMA } ModelFamily;
// transformers' rope_type: plain RoPE, positions divided by a factor, or
// Llama 3.1's per-frequency interpolation (_compute_llama3_parameters).
typedef enum { ROPE_DEFAULT, ROPE_LINEAR, ROPE_LLAMA3 } RopeType;
// How the routing queries (res_proj.weight) start: zero, as SPEC §3 has it
// (every read starts as a uniform average), or N(0, 0.02) as in the paper's
// head-count sweep. Only the initial weights differ; config.json records it.
typedef enum { ROUTE_QUERY_ZERO, ROUTE_QUERY_NORMAL } RouteQueryInit;
// Llama 3.1 lists three end-of-sequence ids; room for a few more.
#define CONFIG_MAX_EOS 8

typedef struct {
    int family;               // ModelFamily
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
    int rope_type;            // RopeType
    double rope_factor;       // linear, llama3: frequencies divided by it (1 otherwise)
    double rope_low_freq_factor, rope_high_freq_factor;  // llama3 (1, 4 otherwise)
    int rope_original_max_position_embeddings;           // llama3 (0 otherwise)
    int tie_word_embeddings;  // 1 = LM head is embed_tokensᵀ
    char attnres_mode[16];    // baseline|hc|attnres|mhar|block|denseformer|delta_mh
    int attnres_num_heads;    // H for attnres/mhar/block/delta_mh (attnres: 1)
    int attnres_num_blocks;   // N for block routing / delta_mh (0 = full)
    int route_query_init;     // RouteQueryInit (config.json "route_query_init": "zero" | "normal")
    // The special tokens generation stops at and starts from (HF's
    // bos_token_id / eos_token_id, which may be a list): -1 / none when the
    // model has no tokenizer. A run trained with one takes its end-of-text.
    int bos_token_id;
    int n_eos_token_ids;
    int eos_token_ids[CONFIG_MAX_EOS];
} Config;

// Fill c with preset `name` (nano, micro, mini, 100m, 350m, 1b), vocab 0
// (to be set from data), family qwen3, residual "baseline". MHAR_ERR for an
// unknown name.
int config_preset(const char *name, Config *c);
// The name of preset i in size order (nano first), NULL past the last.
const char *config_preset_name(int i);
// Parse and validate an HF-style config.json. Errors name the file and key.
int config_load(const char *path, Config *c);
// The same from the text[0..n) of a config.json (need not be NUL-terminated);
// `origin` names it in errors. config_load reads the file and calls this.
// Every top-level key must be one mhar reads, or harmless metadata, or a
// feature at the value mhar implements (attention_bias false, ...); anything
// else is refused with the key named.
int config_parse(const char *text, size_t n, const char *origin, Config *c);
// 1 when transformers' own class of the family (Qwen3ForCausalLM,
// LlamaForCausalLM) computes this model: the baseline scheme. Every other
// scheme's run directory carries mhar's remote code.
int config_hf_native(const Config *c);
// Write config.json atomically, with the HF keys that transformers needs to
// load the directory (architectures, model_type, hidden_act, ...); a
// non-native scheme names MharForCausalLM (model_type "mhar", auto_map, one
// "mhar_<scheme>" layer type per layer) instead of its family's class.
int config_save(const char *path, const Config *c);
// Check every field (positive sizes, heads divide, head_dim even, routing
// heads divide width, known mode...). `origin` names where c came from.
int config_validate(const Config *c, const char *origin);
// Every field equal (floats bit for bit).
int config_equal(const Config *a, const Config *b);

// Families by name ("qwen3", "llama"): the index, or -1.
int config_family_find(const char *name);
const char *config_family_name(int family);
// "qwen3|llama", for help texts and errors.
const char *config_family_names(void);
// Routing-query inits by name ("zero", "normal"): the RouteQueryInit, or -1.
int config_query_init_find(const char *name);
const char *config_query_init_name(int init);
// The family has the per-head RMSNorm on q and k (qwen3).
int config_qk_norm(const Config *c);
// The head_dim/2 RoPE frequencies (radians per position) of c's theta and
// scaling, in double: angle(pos, j) = pos · inv_freq[j].
void config_rope_inv_freq(const Config *c, double *inv_freq);
// One line describing the model ("llama, 6 layers, d 128, ..."), for mhar
// inspect and logs.
void config_describe(const Config *c, char *buf, size_t cap);
