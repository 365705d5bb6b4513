// Model conversion (SPEC §2.7): a baseline run -> a delta_mh model in a new
// directory that computes exactly the base's logits (checked on a probe
// batch before anything is written; the directory is written atomically).
#pragma once
#include <stddef.h>

#define CONVERT_MAX_DEFAULT_BLOCKS 8   // blocks N when none is given: min(8, layers)

typedef struct {
    const char *mode;      // the converted model's attnres_mode
    int heads, blocks;     // H and N of the converted model
    int block_layers;      // layers per block, ceil(L / N)
    size_t params_added;   // the delta_mh tensors' values
} ConvertInfo;

// run: a baseline run directory (config.json + model.safetensors); out: must
// not exist or be empty. heads 0: the registry's default H for delta_mh;
// blocks 0: min(CONVERT_MAX_DEFAULT_BLOCKS, layers).
int convert_to_delta_mh(const char *run, const char *out, int heads, int blocks, ConvertInfo *info);
