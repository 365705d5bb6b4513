// The parameter table: one contiguous fp32 buffer described by a list of
// (name, shape, offset). It drives init, the optimizer, checkpointing and
// gradient all-reduce, so adding a tensor anywhere is one ptable_add call.
#pragma once
#include <stddef.h>

enum { INIT_NORMAL = 0, INIT_ONES, INIT_ZEROS, INIT_CUSTOM };

typedef struct {
    char name[96];  // SPEC §3 name, e.g. "model.layers.3.self_attn.q_proj.weight"
    int ndim;       // 0..4 (0 = scalar)
    int shape[4];
    size_t offset;  // in floats, into the parameter buffer
    size_t numel;
    int init;       // INIT_* (INIT_CUSTOM: the owner initialises it)
} ParamInfo;

typedef struct {
    ParamInfo *p;
    int n, cap;
    size_t total;   // floats
} ParamTable;

// Append a tensor; returns its index or MHAR_ERR. Offsets are 16-float aligned.
int ptable_add(ParamTable *t, const char *name, int ndim, const int *shape, int init);
int ptable_find(const ParamTable *t, const char *name); // index or -1
void ptable_free(ParamTable *t);
