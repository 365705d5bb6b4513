// The parameter table the safetensors fuzz targets load into: a matrix, a
// vector, a scalar and a 4-d tensor, enough for every header shape rule.
#pragma once
#include <stdlib.h>

#include "../src/model/params.h"

static inline void fuzz_small_table(ParamTable *table) {
    static const struct { const char *name; int ndim, shape[4]; } t[] = {
        {"model.a.weight", 2, {2, 3}},
        {"model.b", 1, {4}},
        {"s", 0, {0}},
        {"m.4d", 4, {1, 2, 1, 2}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (ptable_add(table, t[i].name, t[i].ndim, t[i].shape, INIT_ZEROS, PARAM_MATRIX) < 0) abort();
}
