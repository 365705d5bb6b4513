// The parameter table: one contiguous fp32 buffer described by a list of
// (name, shape, offset). It drives init, the optimizer, checkpointing and
// gradient all-reduce, so adding a tensor anywhere is one ptable_add call.
#pragma once
#include <stddef.h>

enum { INIT_NORMAL = 0, INIT_ONES, INIT_ZEROS, INIT_CUSTOM };

// What a tensor is, declared with it: recipes that treat kinds apart
// (--wd-exclude: no weight decay on some classes) read it from the table.
typedef enum {
    PARAM_MATRIX = 0,  // projections, MLP matrices, an untied LM head (and tables that are not a model's)
    PARAM_EMBED,       // the token embedding (the tied LM head with it)
    PARAM_NORM,        // the base model's RMSNorm weights (layer norms, q/k norms, the final norm)
    PARAM_ROUTE,       // every tensor a residual scheme declares (queries, key norms, null sources, gates, hc, dwa)
    PARAM_CLASSES
} ParamClass;

typedef struct {
    char name[96];  // SPEC §3 name, e.g. "model.layers.3.self_attn.q_proj.weight"
    int ndim;       // 0..4 (0 = scalar)
    int shape[4];
    size_t offset;  // in floats, into the parameter buffer
    size_t numel;
    int init;       // INIT_* (INIT_CUSTOM: the owner initialises it)
    ParamClass cls;
} ParamInfo;

typedef struct {
    ParamInfo *p;
    int n, cap;
    size_t total;   // floats
} ParamTable;

// Append a tensor; returns its index or MHAR_ERR. Offsets are 16-float aligned
// (but ptable_add_next's).
int ptable_add(ParamTable *t, const char *name, int ndim, const int *shape, int init, ParamClass cls);
// The same, placed right after the last tensor (no padding), so that the two
// are one matrix to a product that reads both (the MLP's gate and up).
int ptable_add_next(ParamTable *t, const char *name, int ndim, const int *shape, int init, ParamClass cls);
int ptable_find(const ParamTable *t, const char *name); // index or -1
void ptable_free(ParamTable *t);

// A set of classes, bit (1u << cls) for each: from "embed,norm,route" (any
// of them, comma-separated), "all" (those three) or "" (none). Errors name
// `origin` and list the choices.
int param_classes_parse(const char *list, const char *origin, unsigned *set);
// The class's name ("matrix", "embed", "norm", "route").
const char *param_class_name(ParamClass cls);
