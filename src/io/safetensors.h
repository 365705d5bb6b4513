// safetensors reading and writing. Format: u64 little-endian header length,
// JSON header {name: {dtype, shape, data_offsets}}, raw little-endian data.
//
// Writing: the tensors of a parameter table, in F32 (a run directory, a
// checkpoint) or converted to BF16/F16 (an export; dtype.h rounds).
// Reading: a checkpoint of one file, or of shards listed by an HF index
// (model.safetensors.index.json), memory-mapped and converted tensor by
// tensor straight into the parameter buffer (no copy of a whole file).
// Every reader error names the file, the tensor and the reason, and the
// whole checkpoint is checked before the first value is written.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../model/params.h"
#include "../util/common.h"
#include "dtype.h"

// Write every tensor of `t` (data from `buf`, laid out per the table's
// offsets) to `path` atomically in F32, with {"__metadata__":{"format":"pt"}}.
int safetensors_save(const char *path, const ParamTable *t, const float *buf);
// The tensors first .. first+count-1 of `t`, converted to `dt`. A finite
// value `dt` cannot hold would be written as infinity: callers refuse it
// first (dtype_overflow).
int safetensors_save_range(const char *path, const ParamTable *t, int first, int count, const float *buf,
                           Dtype dt);

// Load into `buf` every tensor named by `t` from the F32 file `path`,
// checking dtype, shape and byte range of each; tensors in the file but not
// in the table are an error unless allow_extra. Errors name the file, the
// tensor, the reason (truncated file, header too large, missing tensor,
// wrong shape...). On error buf is untouched.
int safetensors_load(const char *path, const ParamTable *t, float *buf, int allow_extra);

// ---- a checkpoint of one or more files ----

typedef struct {
    char path[MHAR_PATH_MAX];
    const unsigned char *map; // the whole file, mapped read-only
    size_t size;
    uint64_t data_start;      // 8 + header length
    cJSON *header;
} StFile;

typedef struct {
    const char *name;         // owned by its file's header
    int file;                 // index into files
    const cJSON *entry;       // {dtype, shape, data_offsets}, checked by st_check_tensor
} StTensor;

typedef struct {
    char origin[MHAR_PATH_MAX]; // the .safetensors file or the index, for messages
    StFile *files;
    int n_files;
    StTensor *tensors;        // in file order, file by file
    int n;
    int *by_name;             // indices of tensors, sorted by name
} StCheckpoint;

// One .safetensors file: header read and parsed, names unique.
int st_open(StCheckpoint *c, const char *path);
// An HF index {"weight_map": {tensor: file}} and every shard it names (plain
// file names beside the index). Each shard must exist, hold every tensor the
// index maps to it and nothing the index does not; no tensor in two shards.
int st_open_index(StCheckpoint *c, const char *index_path);
// DIR/model.safetensors or DIR/model.safetensors.index.json (both: refused
// as ambiguous).
int st_open_dir(StCheckpoint *c, const char *dir);
void st_close(StCheckpoint *c);

const StTensor *st_find(const StCheckpoint *c, const char *name); // NULL if absent
// The file that holds x, for messages.
static inline const char *st_path(const StCheckpoint *c, const StTensor *x) { return c->files[x->file].path; }

// x against p: dtype one of `dtypes` (DTYPE_BIT mask), the shape of p, a
// byte span of numel values inside its file's data.
int st_check_tensor(const StCheckpoint *c, const StTensor *x, const ParamInfo *p, unsigned dtypes);
// Every tensor of t present and passing st_check_tensor; every tensor of c
// in t, or skipped because tolerate(name, arg) returns 1 (tolerate NULL:
// none is). Reads no data.
int st_check(const StCheckpoint *c, const ParamTable *t, unsigned dtypes,
             int (*tolerate)(const char *name, void *arg), void *arg);
// After the checks passed: x's values as fp32 into dst (p->numel floats).
void st_read(const StCheckpoint *c, const StTensor *x, const ParamInfo *p, float *dst);
// Every tensor of t into buf at the table's offsets (after st_check).
void st_read_table(const StCheckpoint *c, const ParamTable *t, float *buf);
