// mhar convert: a baseline run -> a delta_mh model that computes the same
// logits (src/train/convert.h).
#include <stdio.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "commands.h"
#include "train/convert.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar convert --run BASE --out DIR [--route-heads H] [--route-blocks N]\n\n"
    "Converts the baseline run BASE (config.json + model.safetensors) into a\n"
    "delta_mh model (SPEC §2.7) in DIR: the base tensors are copied and every\n"
    "delta tensor starts at its identity init (res_alpha 0, null_source 0,\n"
    "res_proj 0, res_norm 1), so DIR computes exactly BASE's logits; this is\n"
    "checked on a probe batch before anything is written. H routing heads\n"
    "(default 8) must divide hidden_size; N blocks (default min(8, layers)).\n"
    "DIR must not exist (or be empty); it is written atomically.";

int cmd_convert(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    int heads = 0, blocks = 0;
    Flag flags[] = {
        {"run", FLAG_STR, &run, "baseline run directory (config.json + model.safetensors)", 0, 0, 0},
        {"out", FLAG_STR, &out, "output directory (created; must not exist or be empty)", 0, 0, 0},
        {"route-heads", FLAG_INT, &heads, "routing heads H, dividing hidden_size (default 8)", 1, 65536, 0},
        {"route-blocks", FLAG_INT, &blocks, "blocks N of ceil(L/N) layers (default min(8, L))", 1, 1024, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run || !out) { fprintf(stderr, "error: --run and --out are required (see --help)\n"); return 2; }
    ConvertInfo info;
    if (convert_to_delta_mh(run, out, heads, blocks, &info)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    fprintf(stderr, "converted %s -> %s: %s, %d routing heads, %d blocks of %d layers, "
                    "%zu parameters added; logits bit-identical on the probe batch\n",
            run, out, info.mode, info.heads, info.blocks, info.block_layers, info.params_added);
    cJSON *j = cJSON_CreateObject();  // the path may hold any character: let cJSON escape it
    cJSON_AddStringToObject(j, "out", out);
    cJSON_AddStringToObject(j, "attnres_mode", info.mode);
    cJSON_AddNumberToObject(j, "attnres_num_heads", info.heads);
    cJSON_AddNumberToObject(j, "attnres_num_blocks", info.blocks);
    cJSON_AddNumberToObject(j, "params_added", (double)info.params_added);
    cJSON_AddBoolToObject(j, "logits_identical", 1);
    char *text = cJSON_PrintUnformatted(j);
    if (text) printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(j);
    return 0;
}
