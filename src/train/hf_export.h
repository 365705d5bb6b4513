// Exporting a run directory for sharing (mhar export): a Hugging Face model
// directory with
//   - config.json: the run's, with "torch_dtype" (and "dtype", where the run
//     has it) set to the export format; every other key kept;
//   - the weights converted to bf16, f16 (round to nearest even) or f32: in
//     model.safetensors, or, past the shard size, in
//     model-0000k-of-0000n.safetensors plus model.safetensors.index.json;
//     a finite weight the format cannot hold (|x| >= 65520 in f16) is
//     refused, naming the tensor, rather than written as infinity;
//   - the run's other HF-facing files copied verbatim: tokenizer*.json,
//     special_tokens_map.json, added_tokens.json, generation_config.json,
//     chat_template.jinja and *.py (remote code). Not the training state
//     (optimizer, state.json, metrics).
// The directory is built beside OUT and renamed into place when complete.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../io/dtype.h"

#define HF_EXPORT_SHARD_BYTES 2000000000ull // default shard size: 2 GB (decimal, as HF counts)
#define HF_EXPORT_MAX_SHARDS 99999          // the file names have five digits

typedef struct {
    Dtype dtype;
    uint64_t shard_bytes; // tensor bytes per shard at most (a larger tensor gets a shard of its own)
} HfExportOptions;

typedef struct {
    int n_shards;       // 1: model.safetensors, no index
    uint64_t bytes;     // tensor bytes written
    size_t params;      // values written
    int files_copied;   // HF-facing files besides config and weights
} HfExportInfo;

// run: a run directory (config.json + fp32 model.safetensors); out: must
// not exist or be empty.
int hf_export(const char *run, const char *out, const HfExportOptions *o, HfExportInfo *info);

// A size such as "2GB", "500MB", "64KiB" or "123456" (bytes): KB/MB/GB/TB
// are powers of 1000, KiB/MiB/GiB/TiB of 1024, as transformers reads them.
int hf_parse_size(const char *text, uint64_t *bytes);
