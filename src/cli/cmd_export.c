// mhar export: a run directory -> a Hugging Face model directory for sharing
// (src/train/hf_export.h).
#include <inttypes.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "commands.h"
#include "train/hf_export.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar export --run RUN --out DIR [--dtype bf16|f16|f32] [--shard-size SIZE]\n\n"
    "Writes the model of the run directory RUN as a Hugging Face model directory\n"
    "DIR: config.json (the run's, torch_dtype set to the export format), the\n"
    "weights rounded to nearest even in that format (default bf16) in\n"
    "model.safetensors, or sharded as model-0000k-of-0000n.safetensors with\n"
    "model.safetensors.index.json when they exceed SIZE (default 2GB; KB/MB/GB are\n"
    "powers of 1000, KiB/MiB/GiB of 1024), and the run's tokenizer*.json,\n"
    "special_tokens_map.json, added_tokens.json, generation_config.json,\n"
    "chat_template.jinja and *.py files; never the training state. A weight beyond\n"
    "the format's range (f16: |x| >= 65520) is refused, naming the tensor, not\n"
    "written as infinity. DIR must not exist (or be empty); it appears complete\n"
    "or not at all. mhar import of DIR gives back the rounded weights exactly.";

int cmd_export(int argc, char **argv) {
    const char *run = NULL, *out = NULL, *dtype = "bf16", *shard = "2GB";
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory (config.json + model.safetensors)", 0, 0, 0},
        {"out", FLAG_STR, &out, "directory to create (must not exist or be empty)", 0, 0, 0},
        {"dtype", FLAG_STR, &dtype, "bf16 (default), f16 or f32", 0, 0, 0},
        {"shard-size", FLAG_STR, &shard, "most tensor bytes per file (default 2GB)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run || !out) { fprintf(stderr, "error: --run and --out are required (see --help)\n"); return 2; }
    HfExportOptions o = {0};
    if (dtype_from_flag(dtype, &o.dtype)) {
        fprintf(stderr, "error: --dtype '%s': expected bf16, f16 or f32\n", dtype);
        return 2;
    }
    if (hf_parse_size(shard, &o.shard_bytes)) {
        fprintf(stderr, "error: --shard-size: %s\n", mhar_error());
        return 2;
    }
    if (o.shard_bytes == 0) {
        fprintf(stderr, "error: --shard-size must be at least 1 byte\n");
        return 2;
    }
    HfExportInfo info;
    if (hf_export(run, out, &o, &info)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    fprintf(stderr, "exported %s -> %s: %zu parameters as %s, %" PRIu64 " bytes in %d file%s, %d other file%s copied\n",
            run, out, info.params, dtype_torch_name(o.dtype), info.bytes, info.n_shards, info.n_shards == 1 ? "" : "s",
            info.files_copied, info.files_copied == 1 ? "" : "s");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "out", out);
    cJSON_AddStringToObject(j, "dtype", dtype_torch_name(o.dtype));
    cJSON_AddNumberToObject(j, "params", (double)info.params);
    cJSON_AddNumberToObject(j, "bytes", (double)info.bytes);
    cJSON_AddNumberToObject(j, "shards", info.n_shards);
    cJSON_AddNumberToObject(j, "files_copied", info.files_copied);
    char *text = cJSON_PrintUnformatted(j);
    if (text) printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(j);
    return 0;
}
