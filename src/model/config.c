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

static void set_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->tie_word_embeddings = 1;
    c->max_position_embeddings = 2048;
    strcpy(c->attnres_mode, residual_at(0)->name);  // the registry lists baseline first
    c->attnres_num_heads = 1;
    c->attnres_num_blocks = 0;
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
        check_range(o, "tie_word_embeddings", c->tie_word_embeddings, 0, 1))
        return MHAR_ERR;
    return MHAR_OK;
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
    if (!(isfinite(c->rope_theta) && c->rope_theta > 0))
        return mhar_fail("%s: rope_theta %g must be positive and finite", o, (double)c->rope_theta);
    return MHAR_OK;
}

static int validate_residual(const Config *c, const char *o) {
    const char *m = c->attnres_mode;
    const ResidualScheme *s = memchr(m, '\0', sizeof c->attnres_mode) ? residual_find(m) : NULL;
    if (!s) {
        char names[256];
        return mhar_fail("%s: attnres_mode '%.15s' is unknown (expected one of: %s)", o, m,
                         residual_names(names, sizeof names, ", ", NULL));
    }
    return residual_check_shape(s, c->attnres_num_heads, c->attnres_num_blocks, c->hidden_size,
                                c->num_hidden_layers, o);
}

int config_validate(const Config *c, const char *origin) {
    const char *o = origin ? origin : "config";
    if (validate_sizes(c, o) || validate_attention(c, o) || validate_residual(c, o))
        return MHAR_ERR;
    return MHAR_OK;
}

// ---- loading ----

// Integers and booleans come from util/json (json_get_int, json_get_bool):
// an optional key absent leaves *out untouched, and an integer must be exact
// and in range before conversion, so 1e30 or 3.5 never reaches an int.

// A positive float; `shown` is the key as the user sees it (nested keys as
// "outer.inner").
static int get_float_as(const cJSON *obj, const char *path, const char *key, const char *shown,
                        float *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) return MHAR_OK;
    if (!cJSON_IsNumber(it)) return mhar_fail("%s: key '%s' must be a number", path, shown);
    double v = it->valuedouble;
    if (!isfinite(v) || v <= 0 || v > 3.0e38)
        return mhar_fail("%s: key '%s' is %g, expected a positive finite float", path, shown, v);
    *out = (float)v;
    return MHAR_OK;
}

static int get_float(const cJSON *root, const char *path, const char *key, float *out) {
    return get_float_as(root, path, key, key, out);
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

// transformers >= 5 writes rope_theta inside "rope_parameters"; older
// versions write it at top level with an optional "rope_scaling".
static int get_rope(const cJSON *r, const char *path, Config *c) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(r, "rope_parameters");
    if (cJSON_HasObjectItem(r, "rope_theta") || !cJSON_IsObject(params))
        return get_float(r, path, "rope_theta", &c->rope_theta);
    return get_float_as(params, path, "rope_theta", "rope_parameters.rope_theta", &c->rope_theta);
}

// A feature mhar does not implement would make it compute different logits
// from the checkpoint's; refuse it instead of ignoring the key.
static int check_rope_type(const cJSON *obj, const char *path, const char *key) {
    if (!cJSON_IsObject(obj)) return MHAR_OK;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    if (cJSON_IsString(t) && strcmp(t->valuestring, "default") != 0)
        return mhar_fail("%s: %s type '%.40s' is not supported (mhar implements plain RoPE)", path,
                         key, t->valuestring);
    return MHAR_OK;
}

static int check_supported(const cJSON *r, const char *path) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(r, "hidden_act");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
        return mhar_fail("%s: hidden_act must be \"silu\" (SwiGLU MLP)", path);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "attention_bias")))
        return mhar_fail("%s: attention_bias true is not supported (mhar has no biases)", path);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "use_sliding_window")))
        return mhar_fail("%s: use_sliding_window true is not supported (full causal attention only)", path);
    return check_rope_type(cJSON_GetObjectItemCaseSensitive(r, "rope_scaling"), path, "rope_scaling") ||
           check_rope_type(cJSON_GetObjectItemCaseSensitive(r, "rope_parameters"), path, "rope_parameters");
}

// Fields in dependency order: head counts before the defaults derived from them.
static int parse_fields(const cJSON *r, const char *p, Config *c) {
    if (json_get_int(r, p, "hidden_size", 1, 1, MAX_HIDDEN, &c->hidden_size) ||
        json_get_int(r, p, "num_hidden_layers", 1, 1, MAX_LAYERS, &c->num_hidden_layers) ||
        json_get_int(r, p, "num_attention_heads", 1, 1, MAX_HEADS, &c->num_attention_heads) ||
        json_get_int(r, p, "intermediate_size", 1, 1, MAX_FFN, &c->intermediate_size) ||
        json_get_int(r, p, "vocab_size", 1, 1, MAX_VOCAB, &c->vocab_size))
        return MHAR_ERR;
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = c->hidden_size / c->num_attention_heads;
    // Cross-field rules (divisibility, modes) are config_validate's job.
    if (json_get_int(r, p, "num_key_value_heads", 0, 1, MAX_HEADS, &c->num_key_value_heads) ||
        json_get_int(r, p, "head_dim", 0, 1, MAX_HEAD_DIM, &c->head_dim) ||
        json_get_int(r, p, "max_position_embeddings", 0, 1, MAX_POSITIONS, &c->max_position_embeddings) ||
        json_get_int(r, p, "attnres_num_heads", 0, 1, MAX_HIDDEN, &c->attnres_num_heads) ||
        json_get_int(r, p, "attnres_num_blocks", 0, 0, MAX_LAYERS, &c->attnres_num_blocks) ||
        get_float(r, p, "rms_norm_eps", &c->rms_norm_eps) ||
        get_rope(r, p, c) || check_supported(r, p) ||
        json_get_bool(r, p, "tie_word_embeddings", 0, &c->tie_word_embeddings) ||
        get_mode(r, p, c->attnres_mode, sizeof c->attnres_mode))
        return MHAR_ERR;
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

int config_hf_native(const Config *c) {
    return strcmp(c->attnres_mode, residual_at(0)->name) == 0;  // baseline, first in the registry
}

// The keys that say which model class reads the directory. A baseline run is
// a plain Qwen3 checkpoint. Any other scheme names mhar's remote code
// (model_save writes it alongside) and lists one "mhar_<scheme>" layer type
// per layer, which transformers' own configs refuse, so loading it into a
// Qwen3ForCausalLM raises instead of dropping the scheme's tensors.
static char *identity_keys(const Config *c) {
    if (config_hf_native(c)) {
        return strdup("  \"architectures\": [\"Qwen3ForCausalLM\"],\n"
                      "  \"model_type\": \"qwen3\",\n");
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

int config_save(const char *path, const Config *c) {
    if (config_validate(c, path)) return MHAR_ERR; // never write a config we would refuse
    char eps[32], theta[32];
    format_float(eps, sizeof eps, c->rms_norm_eps);
    format_float(theta, sizeof theta, c->rope_theta);
    char *identity = identity_keys(c);
    size_t cap = identity ? 2048 + strlen(identity) : 0;
    char *buf = identity ? malloc(cap) : NULL;
    if (!buf) { free(identity); return mhar_fail("%s: out of memory", path); }
    int n = snprintf(buf, cap,
        "{\n"
        "%s"
        "  \"hidden_act\": \"silu\",\n"
        "  \"attention_bias\": false,\n"
        "  \"attention_dropout\": 0.0,\n"
        "  \"use_sliding_window\": false,\n"
        "  \"sliding_window\": null,\n"
        "  \"max_window_layers\": %d,\n"
        "  \"rope_scaling\": null,\n"
        "  \"torch_dtype\": \"float32\",\n"
        "  \"initializer_range\": 0.02,\n"
        "  \"use_cache\": true,\n"
        "  \"bos_token_id\": 0,\n"
        "  \"eos_token_id\": 0,\n"
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
        "  \"attnres_num_blocks\": %d\n"
        "}\n",
        identity, c->num_hidden_layers, c->vocab_size, c->hidden_size, c->num_hidden_layers,
        c->num_attention_heads, c->num_key_value_heads, c->head_dim, c->intermediate_size,
        c->max_position_embeddings, eps, theta, c->tie_word_embeddings ? "true" : "false",
        c->attnres_mode, c->attnres_num_heads, c->attnres_num_blocks);
    int rc = n < 0 || (size_t)n >= cap ? mhar_fail("%s: config text too long", path)
                                       : atomic_write_file(path, buf, (size_t)n);
    free(buf);
    free(identity);
    return rc;
}
