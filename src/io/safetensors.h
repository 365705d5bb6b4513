// safetensors reading and writing (fp32 tensors only, which is all mhar
// stores). Format: u64 little-endian header length, JSON header, raw data.
#pragma once
#include <stddef.h>
#include "../model/params.h"

// Write every tensor of `t` (data from `buf`, laid out per the table's
// offsets) to `path` atomically, with {"__metadata__":{"format":"pt"}}.
int safetensors_save(const char *path, const ParamTable *t, const float *buf);

// Load into `buf` every tensor named by `t`, checking dtype F32, the shape
// and the byte range of each; tensors in the file but not in the table are
// an error unless allow_extra. Errors name the file, the tensor, the reason
// (truncated file, header too large, missing tensor, wrong shape...).
int safetensors_load(const char *path, const ParamTable *t, float *buf, int allow_extra);
