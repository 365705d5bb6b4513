#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/atomic.h"
#include "../residual/residual.h"
#include "../util/common.h"
#include "../util/json.h"

// Caps well above any model mhar can train; anything larger is a typo or a
// corrupt file, and refusing it keeps every size product far from overflow.
#define MAX_VOCAB (1 << 24)
#define MAX_HIDDEN 65536
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_HEAD_DIM 4096
#define MAX_FFN (1 << 20)
#define MAX_POSITIONS (1 << 20)


typedef struct {
    const char *name;
    int d, layers, heads, kv, hd, ffn, max_pos;
} Preset;

static const Preset PRESETS[] = {
    {"nano", 128, 6, 4, 2, 32, 384, 2048},
    {"micro", 256, 8, 4, 2, 64, 768, 2048},
    {"mini", 384, 12, 6, 2, 64, 1152, 2048},
    {"100m", 512, 12, 8, 4, 64, 1536, 2048},
    {"350m", 1024, 24, 16, 8, 64, 4096, 1024},
    {"1b", 1280, 36, 16, 8, 80, 5120, 1024},
};

// The families, and transformers' defaults for the keys an HF config.json
// may leave out (Qwen3Config, LlamaConfig): a key absent from a file that
// names its model_type means what transformers would read.
typedef struct {
    const char *name;          // model_type, mhar_family, --family
    const char *architecture;  // the transformers class of a baseline run
    int qk_norm;               // per-head RMSNorm on q and k (SPEC §1)
    int hf_head_dim;           // 0: hidden_size / num_attention_heads
    int hf_kv_heads;           // 0: num_attention_heads
    int hf_max_positions;
} Family;

static const Family FAMILIES[] = {
    {"qwen3", "Qwen3ForCausalLM", 1, 128, 32, 32768},
    {"llama", "LlamaForCausalLM", 0, 0, 0, 2048},
};
#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

static const char *const ROPE_TYPES[] = {"default", "linear", "llama3"};
#define N_ROPE_TYPES ((int)(sizeof ROPE_TYPES / sizeof ROPE_TYPES[0]))

int config_family_find(const char *name) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (strcmp(name, FAMILIES[i].name) == 0) return i;
    return -1;
}

const char *config_family_name(int family) {
    return family >= 0 && family < N_FAMILIES ? FAMILIES[family].name : "?";
}

const char *config_family_names(void) { return "qwen3|llama"; }

static const char *const QUERY_INITS[] = {"zero", "normal"};  // RouteQueryInit order
#define N_QUERY_INITS ((int)(sizeof QUERY_INITS / sizeof QUERY_INITS[0]))

int config_query_init_find(const char *name) {
    for (int i = 0; i < N_QUERY_INITS; i++)
        if (strcmp(name, QUERY_INITS[i]) == 0) return i;
    return -1;
}

const char *config_query_init_name(int init) {
    return init >= 0 && init < N_QUERY_INITS ? QUERY_INITS[init] : "?";
}

int config_qk_norm(const Config *c) { return FAMILIES[c->family].qk_norm; }

static void set_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    c->family = FAMILY_QWEN3;
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->rope_type = ROPE_DEFAULT;
    c->rope_factor = 1.0;
    c->rope_low_freq_factor = 1.0;
    c->rope_high_freq_factor = 4.0;
    c->tie_word_embeddings = 1;
    c->max_position_embeddings = 2048;
    strcpy(c->attnres_mode, residual_at(0)->name);  // the registry lists baseline first
    c->attnres_num_heads = 1;
    c->attnres_num_blocks = 0;
    c->route_query_init = ROUTE_QUERY_ZERO;
    c->bos_token_id = -1;
    c->n_eos_token_ids = 0;
}

const char *config_preset_name(int i) {
    return i >= 0 && i < (int)(sizeof PRESETS / sizeof PRESETS[0]) ? PRESETS[i].name : NULL;
}

int config_preset(const char *name, Config *c) {
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const Preset *p = &PRESETS[i];
        if (strcmp(name, p->name) != 0) continue;
        set_defaults(c);
        c->hidden_size = p->d;
        c->num_hidden_layers = p->layers;
        c->num_attention_heads = p->heads;
        c->num_key_value_heads = p->kv;
        c->head_dim = p->hd;
        c->intermediate_size = p->ffn;
        c->max_position_embeddings = p->max_pos;
        return MHAR_OK;
    }
    return mhar_fail("unknown model preset '%s' (known: nano, micro, mini, 100m, 350m, 1b)", name);
}

// ---- RoPE frequencies ----

// transformers' _compute_default_rope_parameters, _compute_linear_scaling_
// rope_parameters and _compute_llama3_parameters (modeling_rope_utils.py),
// in double: llama3 keeps the high frequencies (wavelength below
// original/high_freq_factor), divides the low ones (above original/
// low_freq_factor) by factor, and blends the band between linearly in
// original/wavelength.
void config_rope_inv_freq(const Config *c, double *inv_freq) {
    const int half = c->head_dim / 2;
    for (int j = 0; j < half; j++) {
        double f = pow((double)c->rope_theta, -2.0 * j / c->head_dim);
        if (c->rope_type == ROPE_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_type == ROPE_LLAMA3) {
            const double orig = c->rope_original_max_position_embeddings, wavelen = 2 * M_PI / f;
            const double lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
            if (wavelen > orig / lo) {
                f /= c->rope_factor;
            } else if (wavelen >= orig / hi) {
                const double s = (orig / wavelen - lo) / (hi - lo);
                f = (1 - s) * f / c->rope_factor + s * f;
            }
        }
        inv_freq[j] = f;
    }
}

// ---- validation ----

static int check_range(const char *origin, const char *key, int v, int lo, int hi) {
    if (v < lo || v > hi)
        return mhar_fail("%s: %s is %d, expected %d..%d", origin, key, v, lo, hi);
    return MHAR_OK;
}

static int validate_sizes(const Config *c, const char *o) {
    if (check_range(o, "vocab_size", c->vocab_size, 1, MAX_VOCAB) ||
        check_range(o, "hidden_size", c->hidden_size, 1, MAX_HIDDEN) ||
        check_range(o, "num_hidden_layers", c->num_hidden_layers, 1, MAX_LAYERS) ||
        check_range(o, "num_attention_heads", c->num_attention_heads, 1, MAX_HEADS) ||
        check_range(o, "num_key_value_heads", c->num_key_value_heads, 1, MAX_HEADS) ||
        check_range(o, "head_dim", c->head_dim, 1, MAX_HEAD_DIM) ||
        check_range(o, "intermediate_size", c->intermediate_size, 1, MAX_FFN) ||
        check_range(o, "max_position_embeddings", c->max_position_embeddings, 1, MAX_POSITIONS) ||
        check_range(o, "tie_word_embeddings", c->tie_word_embeddings, 0, 1) ||
        check_range(o, "family", c->family, 0, N_FAMILIES - 1))
        return MHAR_ERR;
    return MHAR_OK;
}

static int positive_finite(double v) { return isfinite(v) && v > 0 && v < 1e300; }

static int validate_rope(const Config *c, const char *o) {
    if (!(isfinite(c->rope_theta) && c->rope_theta > 0))
        return mhar_fail("%s: rope_theta %g must be positive and finite", o, (double)c->rope_theta);
    if (check_range(o, "rope type", c->rope_type, 0, N_ROPE_TYPES - 1)) return MHAR_ERR;
    if (c->rope_type == ROPE_DEFAULT) return MHAR_OK;
    if (!positive_finite(c->rope_factor))
        return mhar_fail("%s: rope scaling factor %g must be positive and finite", o, c->rope_factor);
    if (c->rope_type != ROPE_LLAMA3) return MHAR_OK;
    if (!positive_finite(c->rope_low_freq_factor) || !positive_finite(c->rope_high_freq_factor) ||
        !(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return mhar_fail("%s: llama3 rope scaling needs 0 < low_freq_factor (%g) < high_freq_factor (%g)", o,
                         c->rope_low_freq_factor, c->rope_high_freq_factor);
    return check_range(o, "rope scaling original_max_position_embeddings",
                       c->rope_original_max_position_embeddings, 1, MAX_POSITIONS);
}

static int validate_attention(const Config *c, const char *o) {
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return mhar_fail("%s: num_attention_heads %d is not divisible by num_key_value_heads %d",
                         o, c->num_attention_heads, c->num_key_value_heads);
    if (c->hidden_size % c->num_attention_heads != 0)
        return mhar_fail("%s: hidden_size %d is not divisible by num_attention_heads %d", o,
                         c->hidden_size, c->num_attention_heads);
    // RoPE "rotate half" pairs coordinate j with j + head_dim/2.
    if (c->head_dim % 2 != 0) return mhar_fail("%s: head_dim %d is odd, RoPE needs it even", o, c->head_dim);
    if (!(isfinite(c->rms_norm_eps) && c->rms_norm_eps > 0))
        return mhar_fail("%s: rms_norm_eps %g must be positive and finite", o, (double)c->rms_norm_eps);
    return validate_rope(c, o);
}

static int validate_residual(const Config *c, const char *o) {
    const char *m = c->attnres_mode;
    const ResidualScheme *s = memchr(m, '\0', sizeof c->attnres_mode) ? residual_find(m) : NULL;
    if (!s) {
        char names[256];
        return mhar_fail("%s: attnres_mode '%.15s' is unknown (expected one of: %s)", o, m,
                         residual_names(names, sizeof names, ", ", NULL));
    }
    if (c->route_query_init != ROUTE_QUERY_ZERO && c->route_query_init != ROUTE_QUERY_NORMAL)
        return mhar_fail("%s: route_query_init %d is not zero or normal", o, c->route_query_init);
    // A non-zero init of queries that do not exist would be a silent no-op.
    if (c->route_query_init == ROUTE_QUERY_NORMAL && !residual_is_routed(s))
        return mhar_fail("%s: route_query_init normal: residual scheme %s has no routing queries", o, s->name);
    return residual_check_shape(s, c->attnres_num_heads, c->attnres_num_blocks, c->hidden_size,
                                c->num_hidden_layers, o);
}

// A special token outside the vocabulary could never be generated or fed.
static int validate_tokens(const Config *c, const char *o) {
    if (c->bos_token_id >= c->vocab_size || c->bos_token_id < -1)
        return mhar_fail("%s: bos_token_id %d is not in the vocabulary of %d", o, c->bos_token_id, c->vocab_size);
    if (c->n_eos_token_ids < 0 || c->n_eos_token_ids > CONFIG_MAX_EOS)
        return mhar_fail("%s: %d eos_token_id entries (at most %d)", o, c->n_eos_token_ids, CONFIG_MAX_EOS);
    for (int i = 0; i < c->n_eos_token_ids; i++)
        if (c->eos_token_ids[i] < 0 || c->eos_token_ids[i] >= c->vocab_size)
            return mhar_fail("%s: eos_token_id %d is not in the vocabulary of %d", o, c->eos_token_ids[i],
                             c->vocab_size);
    return MHAR_OK;
}

int config_validate(const Config *c, const char *origin) {
    const char *o = origin ? origin : "config";
    if (validate_sizes(c, o) || validate_attention(c, o) || validate_residual(c, o) || validate_tokens(c, o))
        return MHAR_ERR;
    return MHAR_OK;
}

// The fields a rope type does not use are not compared.
int config_equal(const Config *a, const Config *b) {
    int rope = a->rope_type == b->rope_type && memcmp(&a->rope_theta, &b->rope_theta, sizeof(float)) == 0;
    if (rope && a->rope_type != ROPE_DEFAULT) rope = a->rope_factor == b->rope_factor;
    if (rope && a->rope_type == ROPE_LLAMA3)
        rope = a->rope_low_freq_factor == b->rope_low_freq_factor &&
               a->rope_high_freq_factor == b->rope_high_freq_factor &&
               a->rope_original_max_position_embeddings == b->rope_original_max_position_embeddings;
    return rope && a->family == b->family && a->vocab_size == b->vocab_size &&
           a->hidden_size == b->hidden_size && a->num_hidden_layers == b->num_hidden_layers &&
           a->num_attention_heads == b->num_attention_heads &&
           a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
           a->intermediate_size == b->intermediate_size &&
           a->max_position_embeddings == b->max_position_embeddings &&
           memcmp(&a->rms_norm_eps, &b->rms_norm_eps, sizeof(float)) == 0 &&
           a->tie_word_embeddings == b->tie_word_embeddings &&
           strncmp(a->attnres_mode, b->attnres_mode, sizeof a->attnres_mode) == 0 &&
           a->attnres_num_heads == b->attnres_num_heads && a->attnres_num_blocks == b->attnres_num_blocks &&
           a->route_query_init == b->route_query_init &&
           a->bos_token_id == b->bos_token_id && a->n_eos_token_ids == b->n_eos_token_ids &&
           memcmp(a->eos_token_ids, b->eos_token_ids, sizeof(int) * (size_t)a->n_eos_token_ids) == 0;
}

// ---- loading ----

// Integers and booleans come from util/json (json_get_int, json_get_bool):
// an optional key absent leaves *out untouched, and an integer must be exact
// and in range before conversion, so 1e30 or 3.5 never reaches an int.

// What a top-level key may be. mhar refuses what it would otherwise ignore:
// a key it does not know, or a known feature at a value it does not
// implement, would make it compute other logits than the checkpoint's.
typedef enum {
    KEY_READ,         // read by the parsers below
    KEY_META,         // metadata: no effect on the computed function
    KEY_FALSE,        // a feature mhar lacks: only false (or null)
    KEY_ZERO,         // only 0 (or null)
    KEY_AT_MOST_ONE,  // only <= 1 (or null)
    KEY_ONE,          // only 1 (or null)
    KEY_NEVER,        // refused whatever its value (but null)
} KeyRule;

typedef struct {
    const char *key;
    KeyRule rule;
    const char *why;  // what mhar implements instead (the refusal's reason)
} KeySpec;

// Every key of Qwen3Config / LlamaConfig().to_dict() in transformers 5 and
// of the config.json files of Qwen3-0.6B/8B, Llama-3.2-1B and TinyLlama.
static const KeySpec KEYS[] = {
    {"vocab_size", KEY_READ, NULL}, {"hidden_size", KEY_READ, NULL}, {"num_hidden_layers", KEY_READ, NULL},
    {"num_attention_heads", KEY_READ, NULL}, {"num_key_value_heads", KEY_READ, NULL},
    {"head_dim", KEY_READ, NULL}, {"intermediate_size", KEY_READ, NULL},
    {"max_position_embeddings", KEY_READ, NULL}, {"rms_norm_eps", KEY_READ, NULL},
    {"tie_word_embeddings", KEY_READ, NULL}, {"hidden_act", KEY_READ, NULL},
    {"rope_theta", KEY_READ, NULL}, {"rope_scaling", KEY_READ, NULL}, {"rope_parameters", KEY_READ, NULL},
    {"model_type", KEY_READ, NULL}, {"architectures", KEY_READ, NULL}, {"layer_types", KEY_READ, NULL},
    {"mhar_family", KEY_READ, NULL}, {"attnres_mode", KEY_READ, NULL}, {"attnres_num_heads", KEY_READ, NULL},
    {"attnres_num_blocks", KEY_READ, NULL}, {"route_query_init", KEY_READ, NULL},
    {"attention_bias", KEY_FALSE, "mhar has no biases"},
    {"mlp_bias", KEY_FALSE, "mhar has no biases"},
    {"use_sliding_window", KEY_FALSE, "full causal attention only"},
    {"is_encoder_decoder", KEY_FALSE, "a decoder only"},
    {"attention_dropout", KEY_ZERO, "mhar has no dropout"},
    {"pretraining_tp", KEY_AT_MOST_ONE, "projections are not split into tensor-parallel slices"},
    {"partial_rotary_factor", KEY_ONE, "RoPE rotates the whole head"},
    {"quantization_config", KEY_NEVER, "fp32 weights only"},
    // metadata: identity, tokens, storage type, init, sliding-window
    // settings inert without use_sliding_window, outputs of the PyTorch API
    {"_name_or_path", KEY_META, NULL}, {"transformers_version", KEY_META, NULL}, {"auto_map", KEY_META, NULL},
    {"torch_dtype", KEY_META, NULL}, {"dtype", KEY_META, NULL}, {"bos_token_id", KEY_READ, NULL},
    {"eos_token_id", KEY_READ, NULL}, {"pad_token_id", KEY_META, NULL}, {"tokenizer_class", KEY_META, NULL},
    {"use_cache", KEY_META, NULL}, {"initializer_range", KEY_META, NULL}, {"max_window_layers", KEY_META, NULL},
    {"sliding_window", KEY_META, NULL}, {"id2label", KEY_META, NULL}, {"label2id", KEY_META, NULL},
    {"problem_type", KEY_META, NULL}, {"chunk_size_feed_forward", KEY_META, NULL},
    {"output_attentions", KEY_META, NULL}, {"output_hidden_states", KEY_META, NULL},
    {"return_dict", KEY_META, NULL},
};

static const KeySpec *key_spec(const char *key) {
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (strcmp(key, KEYS[i].key) == 0) return &KEYS[i];
    return NULL;
}

// JSON allows a key twice; Python's json keeps the last, cJSON finds the
// first: refuse rather than read the other one.
static int check_duplicates(const cJSON *obj, const char *path, const char *outer) {
    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *b = obj->child; b != a; b = b->next)
            if (strcmp(a->string, b->string) == 0)
                return mhar_fail("%s: key '%s%s%.60s' appears twice", path, outer ? outer : "", outer ? "." : "",
                                 a->string);
    return MHAR_OK;
}

static int check_key(const cJSON *it, const char *path) {
    const KeySpec *k = key_spec(it->string);
    if (!k)
        return mhar_fail("%s: mhar does not know key '%.60s'; refusing rather than ignoring it", path, it->string);
    const int null = cJSON_IsNull(it);
    const double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    int ok = 1;
    switch (k->rule) {
    case KEY_READ: case KEY_META: break;
    case KEY_FALSE: ok = null || cJSON_IsFalse(it); break;
    case KEY_ZERO: ok = null || v == 0; break;
    case KEY_AT_MOST_ONE: ok = null || v <= 1; break;
    case KEY_ONE: ok = null || v == 1; break;
    case KEY_NEVER: ok = null; break;
    }
    if (ok) return MHAR_OK;
    static const char *const want[] = {"", "", "false", "0", "at most 1", "1", "absent"};
    return mhar_fail("%s: key '%s' is not supported unless %s (%s)", path, k->key, want[k->rule], k->why);
}

static int check_keys(const cJSON *root, const char *path) {
    if (check_duplicates(root, path, NULL)) return MHAR_ERR;
    for (const cJSON *it = root->child; it; it = it->next)
        if (check_key(it, path)) return MHAR_ERR;
    return MHAR_OK;
}

// A string member: NULL when absent or null, an error when another type.
static int get_name(const cJSON *obj, const char *path, const char *key, const char **out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!it || cJSON_IsNull(it)) return MHAR_OK;
    if (!cJSON_IsString(it)) return mhar_fail("%s: key '%s' must be a string", path, key);
    *out = it->valuestring;
    return MHAR_OK;
}

// The file's identity: model_type (qwen3, llama, or mhar for the routed
// remote-code classes), mhar_family, architectures. *hf: the file names a
// model_type, so its absent keys take transformers' defaults.
static int get_identity(const cJSON *r, const char *path, Config *c, int *hf, int *routed_type) {
    const char *type, *fam;
    if (get_name(r, path, "model_type", &type) || get_name(r, path, "mhar_family", &fam)) return MHAR_ERR;
    *hf = type != NULL;
    *routed_type = type && strcmp(type, "mhar") == 0;
    int from_type = type && !*routed_type ? config_family_find(type) : -1;
    if (type && !*routed_type && from_type < 0)
        return mhar_fail("%s: model_type '%.40s' is not supported (mhar reads qwen3, llama, mhar)", path, type);
    int f = fam ? config_family_find(fam) : from_type;
    if (fam && f < 0)
        return mhar_fail("%s: mhar_family '%.40s' is unknown (expected %s)", path, fam, config_family_names());
    if (from_type >= 0 && f != from_type)
        return mhar_fail("%s: mhar_family '%s' disagrees with model_type '%s'", path, fam, type);
    if (*routed_type && f < 0) return mhar_fail("%s: model_type 'mhar' needs key 'mhar_family'", path);
    c->family = f < 0 ? FAMILY_QWEN3 : f;

    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(r, "architectures"), *a;
    if (!arch || cJSON_IsNull(arch)) return MHAR_OK;
    if (!cJSON_IsArray(arch)) return mhar_fail("%s: key 'architectures' must be a list of strings", path);
    cJSON_ArrayForEach(a, arch) {
        if (!cJSON_IsString(a)) return mhar_fail("%s: key 'architectures' must be a list of strings", path);
        int is_family = -1;
        for (int i = 0; i < N_FAMILIES; i++)
            if (strcmp(a->valuestring, FAMILIES[i].architecture) == 0) is_family = i;
        if (is_family < 0 && strcmp(a->valuestring, "MharForCausalLM") != 0)
            return mhar_fail("%s: architectures '%.60s' is not supported (mhar reads Qwen3ForCausalLM, "
                             "LlamaForCausalLM, MharForCausalLM)", path, a->valuestring);
        if (is_family >= 0 && is_family != c->family)
            return mhar_fail("%s: architectures '%s' disagrees with the %s family", path, a->valuestring,
                             FAMILIES[c->family].name);
    }
    return MHAR_OK;
}

// Every layer full causal attention; a routed checkpoint's remote code
// (model_type mhar) names its layers "mhar_...".
static int check_layer_types(const cJSON *r, const char *path, int layers, int routed_type) {
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(r, "layer_types"), *t;
    if (!lt || cJSON_IsNull(lt)) return MHAR_OK;
    if (!cJSON_IsArray(lt)) return mhar_fail("%s: key 'layer_types' must be a list of strings", path);
    if (cJSON_GetArraySize(lt) != layers)
        return mhar_fail("%s: key 'layer_types' has %d entries for %d layers", path, cJSON_GetArraySize(lt),
                         layers);
    cJSON_ArrayForEach(t, lt) {
        if (!cJSON_IsString(t)) return mhar_fail("%s: key 'layer_types' must be a list of strings", path);
        if (strcmp(t->valuestring, "full_attention") == 0) continue;
        if (routed_type && strncmp(t->valuestring, "mhar_", 5) == 0) continue;
        return mhar_fail("%s: layer_types entry '%.40s' is not supported (full_attention only%s)", path,
                         t->valuestring, routed_type ? ", or mhar_* layers" : "");
    }
    return MHAR_OK;
}

// A positive finite number member; `shown` names it as the user sees it.
static int get_positive(const cJSON *obj, const char *path, const char *key, const char *shown, int required,
                        double *out, int *given) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (given) *given = 0;
    if (!it || cJSON_IsNull(it)) return required ? mhar_fail("%s: key '%s' is required", path, shown) : MHAR_OK;
    if (!cJSON_IsNumber(it)) return mhar_fail("%s: key '%s' must be a number", path, shown);
    double v = it->valuedouble;
    if (!isfinite(v) || v <= 0 || v > 3.0e38)
        return mhar_fail("%s: key '%s' is %g, expected a positive finite number", path, shown, v);
    *out = v;
    if (given) *given = 1;
    return MHAR_OK;
}

static int get_float(const cJSON *root, const char *path, const char *key, float *out) {
    double v = *out;
    if (get_positive(root, path, key, key, 0, &v, NULL)) return MHAR_ERR;
    *out = (float)v;
    return MHAR_OK;
}

// One of the two places transformers reads RoPE settings from: rope_scaling
// (transformers 4 and the Llama 3 checkpoints) or rope_parameters
// (transformers 5, which also moves rope_theta there).
typedef struct {
    int given;          // an object with at least one key
    int type;           // RopeType
    double factor, low, high, theta;
    int original;       // 0: not given (transformers: max_position_embeddings)
    int has_theta;
} RopeSpec;

// The keys each rope type uses, beyond rope_type/type/rope_theta/partial_rotary_factor.
static int rope_key_used(int type, const char *key) {
    if (!strcmp(key, "rope_type") || !strcmp(key, "type") || !strcmp(key, "rope_theta") ||
        !strcmp(key, "partial_rotary_factor"))
        return 1;
    if (type == ROPE_DEFAULT) return 0;
    if (!strcmp(key, "factor")) return 1;
    return type == ROPE_LLAMA3 && (!strcmp(key, "low_freq_factor") || !strcmp(key, "high_freq_factor") ||
                                   !strcmp(key, "original_max_position_embeddings"));
}

static int parse_rope_object(const cJSON *r, const char *path, const char *name, RopeSpec *s) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(r, name);
    memset(s, 0, sizeof *s);
    s->factor = s->low = 1, s->high = 4;
    if (!o || cJSON_IsNull(o)) return MHAR_OK;
    if (!cJSON_IsObject(o)) return mhar_fail("%s: key '%s' must be an object or null", path, name);
    if (!o->child) return MHAR_OK;  // {}: transformers reads it as absent
    if (check_duplicates(o, path, name)) return MHAR_ERR;
    s->given = 1;
    const char *t1, *t2;
    if (get_name(o, path, "rope_type", &t1) || get_name(o, path, "type", &t2)) return MHAR_ERR;
    if (t1 && t2 && strcmp(t1, t2) != 0)
        return mhar_fail("%s: %s.rope_type '%.40s' and %s.type '%.40s' disagree", path, name, t1, name, t2);
    const char *type = t1 ? t1 : t2 ? t2 : "default";
    s->type = -1;
    for (int i = 0; i < N_ROPE_TYPES; i++)
        if (strcmp(type, ROPE_TYPES[i]) == 0) s->type = i;
    if (s->type < 0)
        return mhar_fail("%s: %s type '%.40s' is not supported (mhar implements default, linear, llama3)", path,
                         name, type);
    for (const cJSON *it = o->child; it; it = it->next)
        if (!rope_key_used(s->type, it->string))
            return mhar_fail("%s: key '%s.%.60s' is not used by rope type '%s'; refusing rather than ignoring it",
                             path, name, it->string, type);
    const cJSON *prf = cJSON_GetObjectItemCaseSensitive(o, "partial_rotary_factor");
    if (prf && !cJSON_IsNull(prf) && !(cJSON_IsNumber(prf) && prf->valuedouble == 1))
        return mhar_fail("%s: key '%s.partial_rotary_factor' is not supported unless 1 (RoPE rotates the whole "
                         "head)", path, name);
    char shown[96];
#define SHOWN(k) (snprintf(shown, sizeof shown, "%s.%s", name, k), shown)
    if (get_positive(o, path, "rope_theta", SHOWN("rope_theta"), 0, &s->theta, &s->has_theta)) return MHAR_ERR;
    if (s->type == ROPE_DEFAULT) return MHAR_OK;
    if (get_positive(o, path, "factor", SHOWN("factor"), 1, &s->factor, NULL)) return MHAR_ERR;
    if (s->type != ROPE_LLAMA3) return MHAR_OK;
    if (get_positive(o, path, "low_freq_factor", SHOWN("low_freq_factor"), 1, &s->low, NULL) ||
        get_positive(o, path, "high_freq_factor", SHOWN("high_freq_factor"), 1, &s->high, NULL) ||
        json_get_int(o, path, "original_max_position_embeddings", 0, 1, MAX_POSITIONS, &s->original))
        return MHAR_ERR;
#undef SHOWN
    return MHAR_OK;
}

// transformers 5 reads rope_scaling when it is a non-empty object, else
// rope_parameters, and takes rope_theta from that object or else from the
// top level. mhar accepts both places only when they agree, so no value is
// silently passed over.
static int get_rope(const cJSON *r, const char *path, Config *c) {
    RopeSpec s, p;
    if (parse_rope_object(r, path, "rope_scaling", &s) || parse_rope_object(r, path, "rope_parameters", &p))
        return MHAR_ERR;
    if (s.given && p.given &&
        (s.type != p.type || s.factor != p.factor || s.low != p.low || s.high != p.high || s.original != p.original))
        return mhar_fail("%s: rope_scaling and rope_parameters disagree (transformers reads rope_scaling)", path);
    double top = 0;
    int has_top = 0;
    if (get_positive(r, path, "rope_theta", "rope_theta", 0, &top, &has_top)) return MHAR_ERR;
    const double thetas[3] = {top, s.theta, p.theta};
    const int has[3] = {has_top, s.has_theta, p.has_theta};
    static const char *const where[3] = {"rope_theta", "rope_scaling.rope_theta", "rope_parameters.rope_theta"};
    int first = -1;
    for (int i = 0; i < 3; i++) {
        if (!has[i]) continue;
        if (first < 0) first = i;
        else if (thetas[i] != thetas[first])
            return mhar_fail("%s: %s %g and %s %g disagree", path, where[first], thetas[first], where[i], thetas[i]);
    }
    if (first >= 0) c->rope_theta = (float)thetas[first];
    const RopeSpec *use = s.given ? &s : &p;
    if (!use->given) return MHAR_OK;
    c->rope_type = use->type;
    c->rope_factor = use->factor;
    c->rope_low_freq_factor = use->low;
    c->rope_high_freq_factor = use->high;
    c->rope_original_max_position_embeddings = use->original;
    return MHAR_OK;
}

static int get_mode(const cJSON *root, const char *path, char *out, size_t cap) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "attnres_mode");
    if (!it) return MHAR_OK;
    if (!cJSON_IsString(it)) return mhar_fail("%s: key 'attnres_mode' must be a string", path);
    if (strlen(it->valuestring) >= cap || !residual_find(it->valuestring)) {
        char names[256];
        return mhar_fail("%s: attnres_mode '%.40s' is unknown (expected one of: %s)", path, it->valuestring,
                         residual_names(names, sizeof names, ", ", NULL));
    }
    strcpy(out, it->valuestring);
    return MHAR_OK;
}

// Absent (a run older than the key, an HF checkpoint): zero, SPEC's init.
static int get_query_init(const cJSON *root, const char *path, int *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "route_query_init");
    if (!it) return MHAR_OK;
    int v = cJSON_IsString(it) ? config_query_init_find(it->valuestring) : -1;
    if (v < 0) return mhar_fail("%s: key 'route_query_init' must be \"zero\" or \"normal\"", path);
    *out = v;
    return MHAR_OK;
}

static int check_act(const cJSON *r, const char *path) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(r, "hidden_act");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
        return mhar_fail("%s: key 'hidden_act' must be \"silu\" (SwiGLU MLP)", path);
    return MHAR_OK;
}

// An optional integer where null means absent too (LlamaConfig's head_dim,
// num_key_value_heads).
static int get_int_or_null(const cJSON *r, const char *path, const char *key, long hi, int *out) {
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, key))) return MHAR_OK;
    return json_get_int(r, path, key, 0, 1, hi, out);
}

// bos_token_id: null or an id; eos_token_id: null, an id or a list of ids.
// Ranges are config_validate's (they depend on vocab_size).
static int get_token_ids(const cJSON *r, const char *p, Config *c) {
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "bos_token_id")) &&
        json_get_int(r, p, "bos_token_id", 0, 0, MAX_VOCAB, &c->bos_token_id))
        return MHAR_ERR;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(r, "eos_token_id");
    if (!eos || cJSON_IsNull(eos)) return MHAR_OK;
    if (!cJSON_IsArray(eos)) {
        c->n_eos_token_ids = 1;
        return json_get_int(r, p, "eos_token_id", 1, 0, MAX_VOCAB, &c->eos_token_ids[0]);
    }
    int n = cJSON_GetArraySize(eos);
    if (n > CONFIG_MAX_EOS)
        return mhar_fail("%s: eos_token_id lists %d ids, mhar keeps at most %d", p, n, CONFIG_MAX_EOS);
    c->n_eos_token_ids = 0;
    for (const cJSON *it = eos->child; it; it = it->next) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (v < 0 || v > MAX_VOCAB || v != (double)(int)v)
            return mhar_fail("%s: eos_token_id entry %d is not a token id", p, c->n_eos_token_ids);
        c->eos_token_ids[c->n_eos_token_ids++] = (int)v;
    }
    return MHAR_OK;
}

// Fields in dependency order: identity and head counts before the defaults
// derived from them.
static int parse_fields(const cJSON *r, const char *p, Config *c) {
    int hf = 0, routed_type = 0;
    if (check_keys(r, p) || get_identity(r, p, c, &hf, &routed_type)) return MHAR_ERR;
    const Family *f = &FAMILIES[c->family];
    if (hf) c->tie_word_embeddings = 0, c->max_position_embeddings = f->hf_max_positions;
    if (json_get_int(r, p, "hidden_size", 1, 1, MAX_HIDDEN, &c->hidden_size) ||
        json_get_int(r, p, "num_hidden_layers", 1, 1, MAX_LAYERS, &c->num_hidden_layers) ||
        json_get_int(r, p, "num_attention_heads", 1, 1, MAX_HEADS, &c->num_attention_heads) ||
        json_get_int(r, p, "intermediate_size", 1, 1, MAX_FFN, &c->intermediate_size) ||
        json_get_int(r, p, "vocab_size", 1, 1, MAX_VOCAB, &c->vocab_size))
        return MHAR_ERR;
    c->num_key_value_heads = hf && f->hf_kv_heads ? f->hf_kv_heads : c->num_attention_heads;
    c->head_dim = hf && f->hf_head_dim ? f->hf_head_dim : c->hidden_size / c->num_attention_heads;
    // Cross-field rules (divisibility, modes) are config_validate's job.
    if (get_int_or_null(r, p, "num_key_value_heads", MAX_HEADS, &c->num_key_value_heads) ||
        get_int_or_null(r, p, "head_dim", MAX_HEAD_DIM, &c->head_dim) ||
        json_get_int(r, p, "max_position_embeddings", 0, 1, MAX_POSITIONS, &c->max_position_embeddings) ||
        json_get_int(r, p, "attnres_num_heads", 0, 1, MAX_HIDDEN, &c->attnres_num_heads) ||
        json_get_int(r, p, "attnres_num_blocks", 0, 0, MAX_LAYERS, &c->attnres_num_blocks) ||
        get_float(r, p, "rms_norm_eps", &c->rms_norm_eps) || get_rope(r, p, c) || check_act(r, p) ||
        check_layer_types(r, p, c->num_hidden_layers, routed_type) ||
        json_get_bool(r, p, "tie_word_embeddings", 0, &c->tie_word_embeddings) ||
        get_mode(r, p, c->attnres_mode, sizeof c->attnres_mode) ||
        get_query_init(r, p, &c->route_query_init) || get_token_ids(r, p, c))
        return MHAR_ERR;
    if (c->rope_type == ROPE_LLAMA3 && !c->rope_original_max_position_embeddings)
        c->rope_original_max_position_embeddings = c->max_position_embeddings;  // transformers' default
    return MHAR_OK;
}

// cJSON reads at most n bytes, so text need not be NUL-terminated (a fuzzer
// hands over exactly n bytes).
int config_parse(const char *text, size_t n, const char *path, Config *c) {
    cJSON *root;
    if (json_parse(text, n, path, &root)) return MHAR_ERR; // trailing text is damage too
    Config tmp;
    set_defaults(&tmp);
    int rc = cJSON_IsObject(root) ? parse_fields(root, path, &tmp)
                                  : mhar_fail("%s: invalid config: top level is not a JSON object", path);
    cJSON_Delete(root);
    if (rc || config_validate(&tmp, path)) return MHAR_ERR;
    *c = tmp;
    return MHAR_OK;
}

int config_load(const char *path, Config *c) {
    char *text = NULL;
    size_t n = 0;
    if (read_file(path, &text, &n)) return MHAR_ERR;
    int rc = config_parse(text, n, path, c);
    free(text);
    return rc;
}

// ---- saving ----

// Shortest decimal that reads back as the same float (at most %.9g digits),
// so config.json stays readable ("1e-06") and round-trips exactly.
static void format_float(char *out, size_t cap, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(out, cap, "%.*g", prec, (double)v);
        if (strtof(out, NULL) == v) return;
    }
    snprintf(out, cap, "%.9g", (double)v);
}

// The same for a double (at most %.17g).
static void format_double(char *out, size_t cap, double v) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

int config_hf_native(const Config *c) {
    return strcmp(c->attnres_mode, residual_at(0)->name) == 0;  // baseline, first in the registry
}

// The keys that say which model class reads the directory. A baseline run is
// a plain checkpoint of its family's class (Qwen3ForCausalLM or
// LlamaForCausalLM). Any other scheme names mhar's remote code (model_save
// writes it alongside) and lists one "mhar_<scheme>" layer type per layer,
// which transformers' own configs refuse, so loading it into their classes
// raises instead of dropping the scheme's tensors. NULL: out of memory.
static char *identity_keys(const Config *c) {
    if (config_hf_native(c)) {
        char native[160];
        snprintf(native, sizeof native, "  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n",
                 FAMILIES[c->family].architecture, FAMILIES[c->family].name);
        return strdup(native);
    }
    static const char head[] =
        "  \"architectures\": [\"MharForCausalLM\"],\n"
        "  \"model_type\": \"mhar\",\n"
        "  \"auto_map\": {\n"
        "    \"AutoConfig\": \"configuration_mhar.MharConfig\",\n"
        "    \"AutoModelForCausalLM\": \"modeling_mhar.MharForCausalLM\"\n"
        "  },\n"
        "  \"layer_types\": [";
    size_t per_layer = strlen(c->attnres_mode) + 12, cap = sizeof head + (size_t)c->num_hidden_layers * per_layer + 8;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t n = (size_t)snprintf(out, cap, "%s", head);
    for (int i = 0; i < c->num_hidden_layers; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s\"mhar_%s\"", i ? ", " : "", c->attnres_mode);
    snprintf(out + n, cap - n, "],\n");
    return out;
}

// rope_scaling in the form of the Llama 3 checkpoints, which transformers 4
// and 5 both read (5 moves it into rope_parameters with the top-level
// rope_theta): null for plain RoPE.
static void format_rope_scaling(char *out, size_t cap, const Config *c) {
    char f[32], lo[32], hi[32];
    format_double(f, sizeof f, c->rope_factor);
    format_double(lo, sizeof lo, c->rope_low_freq_factor);
    format_double(hi, sizeof hi, c->rope_high_freq_factor);
    if (c->rope_type == ROPE_LINEAR)
        snprintf(out, cap, "{\"rope_type\": \"linear\", \"factor\": %s}", f);
    else if (c->rope_type == ROPE_LLAMA3)
        snprintf(out, cap, "{\"rope_type\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, "
                 "\"high_freq_factor\": %s, \"original_max_position_embeddings\": %d}", f, lo, hi,
                 c->rope_original_max_position_embeddings);
    else
        snprintf(out, cap, "null");
}

// The keys only one family's transformers config has.
static void format_family_keys(char *out, size_t cap, const Config *c) {
    if (c->family == FAMILY_LLAMA)
        snprintf(out, cap, "  \"mlp_bias\": false,\n");
    else
        snprintf(out, cap, "  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n"
                 "  \"max_window_layers\": %d,\n", c->num_hidden_layers);
}

int config_save(const char *path, const Config *c) {
    if (config_validate(c, path)) return MHAR_ERR; // never write a config we would refuse
    char eps[32], theta[32], scaling[256], family_keys[160];
    format_float(eps, sizeof eps, c->rms_norm_eps);
    format_float(theta, sizeof theta, c->rope_theta);
    format_rope_scaling(scaling, sizeof scaling, c);
    format_family_keys(family_keys, sizeof family_keys, c);
    char bos[16] = "null", eos[16 * CONFIG_MAX_EOS + 8] = "null";
    if (c->bos_token_id >= 0) snprintf(bos, sizeof bos, "%d", c->bos_token_id);
    if (c->n_eos_token_ids == 1) snprintf(eos, sizeof eos, "%d", c->eos_token_ids[0]);
    if (c->n_eos_token_ids > 1)
        for (int i = 0, n = 0; i < c->n_eos_token_ids; i++)
            n += snprintf(eos + n, sizeof eos - (size_t)n, "%s%d%s", i ? ", " : "[", c->eos_token_ids[i],
                          i + 1 == c->n_eos_token_ids ? "]" : "");
    char *identity = identity_keys(c);
    size_t cap = identity ? 4096 + strlen(identity) : 0;
    char *buf = identity ? malloc(cap) : NULL;
    if (!buf) { free(identity); return mhar_fail("%s: out of memory", path); }
    int n = snprintf(buf, cap,
        "{\n"
        "%s"
        "  \"mhar_family\": \"%s\",\n"
        "  \"hidden_act\": \"silu\",\n"
        "  \"attention_bias\": false,\n"
        "  \"attention_dropout\": 0.0,\n"
        "%s"
        "  \"rope_scaling\": %s,\n"
        "  \"torch_dtype\": \"float32\",\n"
        "  \"initializer_range\": 0.02,\n"
        "  \"use_cache\": true,\n"
        "  \"bos_token_id\": %s,\n"
        "  \"eos_token_id\": %s,\n"
        "  \"vocab_size\": %d,\n"
        "  \"hidden_size\": %d,\n"
        "  \"num_hidden_layers\": %d,\n"
        "  \"num_attention_heads\": %d,\n"
        "  \"num_key_value_heads\": %d,\n"
        "  \"head_dim\": %d,\n"
        "  \"intermediate_size\": %d,\n"
        "  \"max_position_embeddings\": %d,\n"
        "  \"rms_norm_eps\": %s,\n"
        "  \"rope_theta\": %s,\n"
        "  \"tie_word_embeddings\": %s,\n"
        "  \"attnres_mode\": \"%s\",\n"
        "  \"attnres_num_heads\": %d,\n"
        "  \"attnres_num_blocks\": %d,\n"
        "  \"route_query_init\": \"%s\"\n"
        "}\n",
        identity, FAMILIES[c->family].name, family_keys, scaling, bos, eos, c->vocab_size,
        c->hidden_size, c->num_hidden_layers, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
        c->intermediate_size, c->max_position_embeddings, eps, theta, c->tie_word_embeddings ? "true" : "false",
        c->attnres_mode, c->attnres_num_heads, c->attnres_num_blocks, config_query_init_name(c->route_query_init));
    int rc = n < 0 || (size_t)n >= cap ? mhar_fail("%s: config text too long", path)
                                       : atomic_write_file(path, buf, (size_t)n);
    free(buf);
    free(identity);
    return rc;
}

// ---- describing ----

void config_describe(const Config *c, char *buf, size_t cap) {
    char theta[32], rope[160] = "", heads[48] = "";
    format_float(theta, sizeof theta, c->rope_theta);
    if (c->rope_type == ROPE_LINEAR) {
        snprintf(rope, sizeof rope, ", linear scaling factor %g", c->rope_factor);
    } else if (c->rope_type == ROPE_LLAMA3) {
        snprintf(rope, sizeof rope, ", llama3 scaling factor %g (low %g, high %g, original %d positions)",
                 c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                 c->rope_original_max_position_embeddings);
    }
    const ResidualScheme *s = residual_find(c->attnres_mode);
    if (s && s->heads == HEADS_ANY) snprintf(heads, sizeof heads, " H %d", c->attnres_num_heads);
    if (s && s->needs_blocks) snprintf(heads + strlen(heads), sizeof heads - strlen(heads), " N %d",
                                       c->attnres_num_blocks);
    if (c->route_query_init != ROUTE_QUERY_ZERO)
        snprintf(heads + strlen(heads), sizeof heads - strlen(heads), ", queries %s",
                 config_query_init_name(c->route_query_init));
    snprintf(buf, cap, "family %s, residual %s%s; %d layers, d %d, heads %d/%d x %d, ffn %d, vocab %d, %s head; "
             "RoPE theta %s%s", FAMILIES[c->family].name, c->attnres_mode, heads, c->num_hidden_layers,
             c->hidden_size, c->num_attention_heads, c->num_key_value_heads, c->head_dim, c->intermediate_size,
             c->vocab_size, c->tie_word_embeddings ? "tied" : "untied", theta, rope);
}
