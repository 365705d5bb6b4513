// config.json parsing: model families, RoPE scaling, and strictness. Every
// key that would change the computed function and that mhar does not
// implement is refused with the key named (one case per key); the files of
// real checkpoints and of transformers' own to_dict() load; mhar's own
// config.json reloads equal for each family and rope type; the RoPE
// frequencies equal transformers' (_compute_llama3_parameters,
// _compute_linear_scaling_rope_parameters), and the model table follows the
// family.
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model/config.h"
#include "model/model.h"
#include "util/file.h"
#include "util/common.h"

static char tmpdir[64];

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

// A Llama-style config.json: the base keys, with `key` replaced by `value`
// (value NULL: dropped; a key not in the base: appended). `extra` is raw
// text appended as is (for duplicate keys), or NULL.
static const char *BASE[][2] = {
    {"model_type", "\"llama\""},
    {"hidden_size", "64"}, {"num_hidden_layers", "2"}, {"num_attention_heads", "4"},
    {"num_key_value_heads", "2"}, {"intermediate_size", "96"}, {"vocab_size", "100"},
    {"max_position_embeddings", "256"}, {"rms_norm_eps", "1e-05"}, {"rope_theta", "500000.0"},
};

static int parse_with(const char *key, const char *value, const char *extra, Config *c) {
    char buf[4096];
    size_t n = 0;
    int found = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (size_t i = 0; i < sizeof BASE / sizeof BASE[0]; i++) {
        const char *v = BASE[i][1];
        if (key && strcmp(key, BASE[i][0]) == 0) v = value, found = 1;
        if (v) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s\": %s", n > 1 ? ", " : "", BASE[i][0], v);
    }
    if (key && !found) n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"%s\": %s", key, value);
    if (extra) n += (size_t)snprintf(buf + n, sizeof buf - n, ", %s", extra);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "}");
    return config_parse(buf, n, "case.json", c);
}

// ---- refusals ------------------------------------------------------------------

typedef struct {
    const char *key, *value;  // replaced or added
    const char *want;         // the message must contain it (the key, as the user wrote it)
} Refusal;

static const Refusal REFUSALS[] = {
    {"mlp_bias", "true", "'mlp_bias'"},
    {"attention_bias", "true", "'attention_bias'"},
    {"pretraining_tp", "2", "'pretraining_tp'"},
    {"use_sliding_window", "true", "'use_sliding_window'"},
    {"attention_dropout", "0.1", "'attention_dropout'"},
    {"is_encoder_decoder", "true", "'is_encoder_decoder'"},
    {"partial_rotary_factor", "0.5", "'partial_rotary_factor'"},
    {"quantization_config", "{\"quant_method\": \"gptq\", \"bits\": 4}", "'quantization_config'"},
    {"hidden_act", "\"gelu\"", "'hidden_act'"},
    {"foo", "1", "mhar does not know key 'foo'; refusing rather than ignoring it"},
    {"rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}", "rope_scaling type 'dynamic'"},
    {"rope_scaling", "{\"type\": \"yarn\", \"factor\": 4.0}", "rope_scaling type 'yarn'"},
    {"rope_scaling", "{\"rope_type\": \"longrope\", \"long_factor\": [1], \"short_factor\": [1]}",
     "rope_scaling type 'longrope'"},
    {"rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"rope_theta\": 500000.0}",
     "rope_parameters type 'yarn'"},
    {"rope_scaling", "{\"rope_type\": \"linear\"}", "'rope_scaling.factor'"},
    {"rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0}",
     "'rope_scaling.high_freq_factor'"},
    {"rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
     "\"high_freq_factor\": 4.0, \"beta_fast\": 32}", "'rope_scaling.beta_fast'"},
    {"rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
     "\"high_freq_factor\": 1.0}", "high_freq_factor"},
    {"rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2.0, \"partial_rotary_factor\": 0.5}",
     "'rope_scaling.partial_rotary_factor'"},
    {"rope_scaling", "{\"rope_type\": \"linear\", \"type\": \"llama3\", \"factor\": 2.0}", "disagree"},
    {"rope_parameters", "{\"rope_type\": \"default\", \"factor\": 2.0}", "'rope_parameters.factor'"},
    {"rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}",
     "rope_theta 500000 and rope_parameters.rope_theta 10000 disagree"},
    {"rope_parameters", "{\"rope_type\": \"linear\", \"factor\": 3.0}",
     "rope_scaling and rope_parameters disagree"},  // with rope_scaling linear 2 (below)
    {"rope_scaling", "[1, 2]", "'rope_scaling'"},
    {"layer_types", "[\"sliding_attention\", \"full_attention\"]", "'sliding_attention'"},
    {"layer_types", "[\"mhar_attention\", \"full_attention\"]", "'mhar_attention'"},
    {"layer_types", "[\"full_attention\"]", "'layer_types' has 1 entries for 2 layers"},
    {"architectures", "[\"MistralForCausalLM\"]", "'MistralForCausalLM'"},
    {"architectures", "[\"Qwen3ForCausalLM\"]", "architectures 'Qwen3ForCausalLM' disagrees"},
    {"model_type", "\"mistral\"", "model_type 'mistral'"},
    {"mhar_family", "\"qwen3\"", "mhar_family 'qwen3' disagrees with model_type 'llama'"},
    {"mhar_family", "\"gpt2\"", "mhar_family 'gpt2'"},
    {"model_type", "\"mhar\"", "model_type 'mhar' needs key 'mhar_family'"},
    {"eos_token_id", "100", "eos_token_id 100 is not in the vocabulary of 100"},
    {"eos_token_id", "[1, -2]", "eos_token_id entry 1 is not a token id"},
    {"eos_token_id", "[0, 1, 2, 3, 4, 5, 6, 7, 8]", "eos_token_id lists 9 ids"},
    {"bos_token_id", "250", "bos_token_id 250 is not in the vocabulary of 100"},
    {"bos_token_id", "\"<s>\"", "'bos_token_id'"},
};

static void test_refusals(void) {
    char name[160];
    for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
        const Refusal *r = &REFUSALS[i];
        Config c;
        // the rope_parameters disagreement case needs a rope_scaling beside it
        const int pair = contains(r->want, "rope_scaling and rope_parameters");
        int rc = parse_with(r->key, r->value, pair ? "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}"
                                                    : NULL, &c);
        snprintf(name, sizeof name, "config_refuses %s = %.60s", r->key, r->value);
        CHECK(rc == MHAR_ERR && contains(mhar_error(), r->want) && contains(mhar_error(), "case.json"), name,
              "rc %d, message: %s (wanted '%s')", rc, rc ? mhar_error() : "(accepted)", r->want);
    }
    Config c;
    int rc = parse_with(NULL, NULL, "\"hidden_size\": 128", &c);
    CHECK(rc == MHAR_ERR && contains(mhar_error(), "'hidden_size' appears twice"), "config_refuses_duplicate_key",
          "rc %d %s", rc, mhar_error());
    rc = parse_with("rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2.0, \"factor\": 3.0}", NULL, &c);
    CHECK(rc == MHAR_ERR && contains(mhar_error(), "'rope_scaling.factor' appears twice"),
          "config_refuses_duplicate_nested_key", "rc %d %s", rc, mhar_error());
    // The harmless values of the same keys are accepted.
    rc = parse_with(NULL, NULL, "\"mlp_bias\": false, \"attention_bias\": false, \"pretraining_tp\": 1, "
                    "\"attention_dropout\": 0.0, \"use_sliding_window\": false, \"sliding_window\": 4096, "
                    "\"partial_rotary_factor\": 1.0, \"layer_types\": [\"full_attention\", \"full_attention\"], "
                    "\"hidden_act\": \"silu\", \"quantization_config\": null, \"tie_word_embeddings\": true, "
                    "\"architectures\": [\"LlamaForCausalLM\"]", &c);
    CHECK(rc == MHAR_OK, "config_accepts_features_off", "%s", mhar_error());
}

// ---- what loads ----------------------------------------------------------------

static void test_families(void) {
    Config c;
    int rc = parse_with(NULL, NULL, NULL, &c);
    CHECK(rc == MHAR_OK && c.family == FAMILY_LLAMA && c.rope_type == ROPE_DEFAULT && c.rope_theta == 500000.0f &&
              c.head_dim == 16 && !config_qk_norm(&c),
          "config_llama_base", "rc %d %s family %d", rc, mhar_error(), c.family);

    // model_type mhar (the routed remote-code classes): the family from mhar_family.
    rc = parse_with("model_type", "\"mhar\"", "\"mhar_family\": \"llama\", \"architectures\": [\"MharForCausalLM\"], "
                    "\"auto_map\": {\"AutoConfig\": \"configuration_mhar.MharConfig\"}, "
                    "\"layer_types\": [\"mhar_attention\", \"full_attention\"], \"attnres_mode\": \"mhar\", "
                    "\"attnres_num_heads\": 4", &c);
    CHECK(rc == MHAR_OK && c.family == FAMILY_LLAMA && !strcmp(c.attnres_mode, "mhar"), "config_mhar_model_type",
          "rc %d %s", rc, mhar_error());

    // No model_type (an old mhar run): qwen3, mhar's defaults.
    const char *old = "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                      "\"intermediate_size\": 96, \"vocab_size\": 100}";
    rc = config_parse(old, strlen(old), "old.json", &c);
    CHECK(rc == MHAR_OK && c.family == FAMILY_QWEN3 && c.tie_word_embeddings == 1 && c.head_dim == 16 &&
              c.num_key_value_heads == 4 && config_qk_norm(&c),
          "config_no_model_type_is_qwen3", "rc %d %s", rc, mhar_error());
    // A model_type without mhar_family names the family too, and mhar_family alone does.
    const char *fam = "{\"mhar_family\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                      "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100}";
    rc = config_parse(fam, strlen(fam), "fam.json", &c);
    CHECK(rc == MHAR_OK && c.family == FAMILY_LLAMA && c.tie_word_embeddings == 1, "config_mhar_family_alone",
          "rc %d %s", rc, mhar_error());

    // An HF file that leaves keys out means transformers' defaults for its
    // family: Qwen3Config head_dim 128, num_key_value_heads 32, untied,
    // 32768 positions; LlamaConfig d/nh, nh, untied, 2048.
    const char *q = "{\"model_type\": \"qwen3\", \"hidden_size\": 256, \"num_hidden_layers\": 2, "
                    "\"num_attention_heads\": 32, \"intermediate_size\": 96, \"vocab_size\": 100}";
    rc = config_parse(q, strlen(q), "q.json", &c);
    CHECK(rc == MHAR_OK && c.head_dim == 128 && c.num_key_value_heads == 32 && c.tie_word_embeddings == 0 &&
              c.max_position_embeddings == 32768,
          "config_qwen3_transformers_defaults", "rc %d %s hd %d kv %d tie %d", rc, mhar_error(), c.head_dim,
          c.num_key_value_heads, c.tie_word_embeddings);
    rc = parse_with("num_key_value_heads", "null", "\"head_dim\": null", &c);
    CHECK(rc == MHAR_OK && c.head_dim == 16 && c.num_key_value_heads == 4 && c.tie_word_embeddings == 0,
          "config_llama_transformers_defaults", "rc %d %s", rc, mhar_error());
}

// Llama-3.2-1B's config.json (transformers 4.45) and the keys transformers 5
// writes in LlamaConfig().to_dict().
static void test_real_configs(void) {
    const char *llama32 =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"head_dim\": 64, "
        "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
        "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", "
        "\"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, "
        "\"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, "
        "\"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
        "\"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", "
        "\"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true, \"vocab_size\": 128256}";
    Config c;
    int rc = config_parse(llama32, strlen(llama32), "llama32.json", &c);
    CHECK(rc == MHAR_OK && c.family == FAMILY_LLAMA && c.rope_type == ROPE_LLAMA3 && c.rope_factor == 32 &&
              c.rope_low_freq_factor == 1 && c.rope_high_freq_factor == 4 &&
              c.rope_original_max_position_embeddings == 8192 && c.rope_theta == 500000.0f && c.head_dim == 64 &&
              c.bos_token_id == 128000 && c.n_eos_token_ids == 3 && c.eos_token_ids[0] == 128001 &&
              c.eos_token_ids[2] == 128009,
          "config_llama_3_2_1b", "rc %d %s", rc, mhar_error());
    const char *t5 =
        "{\"_name_or_path\": \"\", \"architectures\": null, \"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 1, \"chunk_size_feed_forward\": 0, \"dtype\": null, \"eos_token_id\": 2, "
        "\"head_dim\": 16, \"hidden_act\": \"silu\", \"hidden_size\": 64, \"id2label\": {\"0\": \"LABEL_0\"}, "
        "\"initializer_range\": 0.02, \"intermediate_size\": 96, \"is_encoder_decoder\": false, "
        "\"label2id\": {\"LABEL_0\": 0}, \"max_position_embeddings\": 2048, \"mlp_bias\": false, "
        "\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
        "\"num_key_value_heads\": 2, \"output_attentions\": false, \"output_hidden_states\": false, "
        "\"pad_token_id\": null, \"pretraining_tp\": 1, \"problem_type\": null, \"return_dict\": true, "
        "\"rms_norm_eps\": 1e-06, \"rope_parameters\": {\"factor\": 8.0, \"high_freq_factor\": 4.0, "
        "\"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 64, \"rope_theta\": 500000.0, "
        "\"rope_type\": \"llama3\"}, \"tie_word_embeddings\": false, \"transformers_version\": \"5.24.0\", "
        "\"use_cache\": true, \"vocab_size\": 100}";
    rc = config_parse(t5, strlen(t5), "t5.json", &c);
    CHECK(rc == MHAR_OK && c.rope_type == ROPE_LLAMA3 && c.rope_factor == 8 &&
              c.rope_original_max_position_embeddings == 64 && c.rope_theta == 500000.0f,
          "config_transformers5_to_dict", "rc %d %s", rc, mhar_error());
    // Both places, agreeing (rope_theta from the top level, as transformers
    // completes rope_scaling), and the legacy "type" key; llama3 without
    // original_max_position_embeddings takes max_position_embeddings.
    rc = parse_with("rope_scaling", "{\"type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                    "\"high_freq_factor\": 4.0}", "\"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"rope_theta\": 500000.0}", &c);
    CHECK(rc == MHAR_OK && c.rope_type == ROPE_LLAMA3 && c.rope_original_max_position_embeddings == 256,
          "config_rope_both_places_agreeing", "rc %d %s orig %d", rc, mhar_error(),
          c.rope_original_max_position_embeddings);
}

// ---- round trip ----------------------------------------------------------------

static void test_roundtrip(void) {
    static const struct { int family, rope; const char *arch, *type; } CASES[] = {
        {FAMILY_QWEN3, ROPE_DEFAULT, "\"Qwen3ForCausalLM\"", "\"model_type\": \"qwen3\""},
        {FAMILY_QWEN3, ROPE_LINEAR, "\"Qwen3ForCausalLM\"", "\"model_type\": \"qwen3\""},
        {FAMILY_LLAMA, ROPE_DEFAULT, "\"LlamaForCausalLM\"", "\"model_type\": \"llama\""},
        {FAMILY_LLAMA, ROPE_LLAMA3, "\"LlamaForCausalLM\"", "\"model_type\": \"llama\""},
    };
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    // Each family and RoPE type as a baseline run (its family's own class)
    // and as a routed run (mhar's remote-code class, the family in mhar_family).
    for (size_t k = 0; k < 2 * sizeof CASES / sizeof CASES[0]; k++) {
        size_t i = k / 2;
        int routed = (int)(k % 2);
        Config a, b;
        config_preset("micro", &a);
        a.vocab_size = 1000;
        a.family = CASES[i].family;
        a.rope_type = CASES[i].rope;
        a.rope_theta = 500000.0f;
        a.rope_factor = 0.1 + 7.9;         // not exactly 8: every digit must survive
        a.rope_low_freq_factor = 1.0 / 3;
        a.rope_high_freq_factor = 4.25;
        a.rope_original_max_position_embeddings = CASES[i].rope == ROPE_LLAMA3 ? 512 : 0;
        // Special tokens: none, one id, a list.
        a.bos_token_id = (int)i % 2 ? 7 : -1;
        a.n_eos_token_ids = (int)i % 3;
        for (int e = 0; e < a.n_eos_token_ids; e++) a.eos_token_ids[e] = 990 + e;
        if (routed) {
            strcpy(a.attnres_mode, "mhar");
            a.attnres_num_heads = 4;
        }
        const char *arch = routed ? "\"MharForCausalLM\"" : CASES[i].arch;
        const char *type = routed ? "\"model_type\": \"mhar\"" : CASES[i].type;
        char name[96];
        snprintf(name, sizeof name, "config_roundtrip %s rope %d %s", config_family_name(a.family), a.rope_type,
                 a.attnres_mode);
        int rc = config_save(p, &a);
        memset(&b, 0x55, sizeof b);
        if (!rc) rc = config_load(p, &b);
        size_t n;
        char *text = NULL;
        read_file(p, &text, &n);
        char fam[64];
        snprintf(fam, sizeof fam, "\"mhar_family\": \"%s\"", config_family_name(a.family));
        CHECK(rc == MHAR_OK && config_equal(&a, &b) && contains(text, arch) && contains(text, type) &&
                  contains(text, fam) && contains(text, a.rope_type ? "\"rope_scaling\": {" : "\"rope_scaling\": null"),
              name, "rc %d %s\n%s", rc, mhar_error(), text ? text : "");
        free(text);
    }
}

// ---- RoPE frequencies and the model table --------------------------------------

// transformers 5.24's inverse frequencies (float32) for head_dim 32, theta
// 10000: llama3 factor 4, low 1, high 2, original 16 (all three bands), and
// linear factor 2.5.
static const double HF_LLAMA3[16] = {
    1, 0.322779864, 0.079056941, 0.0444569848, 0.0250000004, 0.0140585322, 0.00790569466, 0.00444569858,
    0.00249999994, 0.00140585331, 0.000790569466, 0.000444569858, 0.000250000012, 0.000140585325,
    7.90569466e-05, 4.44569851e-05};
static const double HF_LINEAR[16] = {
    0.400000006, 0.22493653, 0.1264911, 0.0711311772, 0.0399999991, 0.0224936511, 0.0126491114, 0.00711311772,
    0.00399999972, 0.00224936521, 0.00126491114, 0.000711311761, 0.000400000019, 0.000224936521,
    0.000126491112, 7.11311732e-05};

static void test_inv_freq(void) {
    Config c;
    config_preset("nano", &c);
    c.rope_type = ROPE_LLAMA3, c.rope_factor = 4, c.rope_low_freq_factor = 1, c.rope_high_freq_factor = 2;
    c.rope_original_max_position_embeddings = 16;
    double f[16], worst = 0;
    config_rope_inv_freq(&c, f);
    for (int j = 0; j < 16; j++) worst = fmax(worst, fabs(f[j] - HF_LLAMA3[j]) / HF_LLAMA3[j]);
    // transformers computes in float32: a few roundings, <= 3e-7 relative;
    // a band assigned wrongly is off by 4x.
    CHECK(worst < 3e-7, "rope_inv_freq_llama3_vs_transformers", "worst rel err %.3g (tol 3e-7)", worst);
    c.rope_type = ROPE_LINEAR, c.rope_factor = 2.5, worst = 0;
    config_rope_inv_freq(&c, f);
    for (int j = 0; j < 16; j++) worst = fmax(worst, fabs(f[j] - HF_LINEAR[j]) / HF_LINEAR[j]);
    CHECK(worst < 3e-7, "rope_inv_freq_linear_vs_transformers", "worst rel err %.3g (tol 3e-7)", worst);
    c.rope_type = ROPE_DEFAULT, worst = 0;
    config_rope_inv_freq(&c, f);
    for (int j = 0; j < 16; j++) worst = fmax(worst, fabs(f[j] - HF_LINEAR[j] * 2.5) / (HF_LINEAR[j] * 2.5));
    CHECK(worst < 3e-7, "rope_inv_freq_default", "worst rel err %.3g (tol 3e-7)", worst);
}

static void test_model_table(void) {
    Config c;
    config_preset("nano", &c);
    c.vocab_size = 50;
    Model q, l;
    int rc = model_create(&q, &c);
    c.family = FAMILY_LLAMA;
    rc = rc || model_create(&l, &c);
    int qk = 0;
    for (int i = 0; !rc && i < l.table.n; i++) qk += contains(l.table.p[i].name, "_norm.weight") &&
                                                     contains(l.table.p[i].name, "self_attn.");
    CHECK(!rc && qk == 0 && q.table.n == l.table.n + 2 * c.num_hidden_layers &&
              ptable_find(&q.table, "model.layers.0.self_attn.q_norm.weight") >= 0,
          "model_llama_has_no_qk_norm", "rc %d, llama q/k norms %d, tensors %d vs %d", rc, qk, l.table.n, q.table.n);
    model_free(&q);
    model_free(&l);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_config.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_refusals();
    test_families();
    test_real_configs();
    test_roundtrip();
    test_inv_freq();
    test_model_table();
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    remove(p);
    rmdir(tmpdir);
    CHECK_EXIT();
}
