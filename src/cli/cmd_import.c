// mhar import: a Hugging Face checkpoint directory -> a run directory
// (src/train/hf_import.h).
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "commands.h"
#include "io/dtype.h"
#include "train/hf_import.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar import --hf DIR --out RUN [--no-tokenizer]\n\n"
    "Imports the Hugging Face model directory DIR (config.json, and\n"
    "model.safetensors or model.safetensors.index.json with its shards) into the\n"
    "run directory RUN (config.json + fp32 model.safetensors), which eval, sample,\n"
    "train --init-from and convert take. The config goes through mhar's config\n"
    "parser (architectures mhar implements only; attnres_mode baseline unless the\n"
    "file says otherwise). Weights in F32, BF16 or F16 are converted exactly to\n"
    "fp32; any other dtype, a missing or extra tensor, a wrong shape, a missing\n"
    "shard or a damaged file is refused, naming the file and the tensor. Tolerated:\n"
    "*.rotary_emb.inv_freq buffers (skipped), and an lm_head.weight in a tied model\n"
    "if it equals the embedding bit for bit. DIR/tokenizer.json must be one mhar\n"
    "encodes identically (else refused: --no-tokenizer imports the weights only);\n"
    "it is copied with tokenizer_config.json and special_tokens_map.json, and\n"
    "generation_config.json always. RUN must not exist (or be empty); nothing is\n"
    "written unless everything checks out.";

int cmd_import(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    int no_tokenizer = 0;
    Flag flags[] = {
        {"hf", FLAG_STR, &dir, "Hugging Face model directory", 0, 0, 0},
        {"out", FLAG_STR, &out, "run directory to create (must not exist or be empty)", 0, 0, 0},
        {"no-tokenizer", FLAG_BOOL, &no_tokenizer, "import the weights only: no tokenizer check or copy", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!dir || !out) { fprintf(stderr, "error: --hf and --out are required (see --help)\n"); return 2; }
    HfImportOptions o = {.no_tokenizer = no_tokenizer};
    HfImportInfo info;
    if (hf_import(dir, out, &o, &info)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    char dtypes[32] = "";
    for (int t = 0; t < DTYPE_COUNT; t++)
        if (info.dtypes & DTYPE_BIT(t))
            snprintf(dtypes + strlen(dtypes), sizeof dtypes - strlen(dtypes), "%s%s", dtypes[0] ? "+" : "",
                     dtype_st_name((Dtype)t));
    fprintf(stderr, "imported %s -> %s: %zu parameters (%s, %d file%s), %d layers, d=%d, vocab %d, %s head%s%s\n",
            dir, out, info.params, dtypes, info.n_files, info.n_files == 1 ? "" : "s", info.cfg.num_hidden_layers,
            info.cfg.hidden_size, info.cfg.vocab_size, info.cfg.tie_word_embeddings ? "tied" : "untied",
            info.skipped_buffers ? ", rotary inv_freq buffers skipped" : "",
            info.tied_head_dropped ? ", saved tied lm_head equal to the embedding" : "");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "out", out);
    cJSON_AddNumberToObject(j, "params", (double)info.params);
    cJSON_AddStringToObject(j, "dtypes", dtypes);
    cJSON_AddNumberToObject(j, "files", info.n_files);
    cJSON_AddStringToObject(j, "attnres_mode", info.cfg.attnres_mode);
    cJSON_AddNumberToObject(j, "tokenizer_vocab", info.tokenizer_vocab);
    cJSON_AddNumberToObject(j, "files_copied", info.files_copied);
    char *text = cJSON_PrintUnformatted(j);
    if (text) printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(j);
    return 0;
}
