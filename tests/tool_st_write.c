// Helper for tests/test_safetensors_py.py: the C side of the cross-check
// against the reference Python safetensors library.
//   tool_st_write FILE          write the known table below to FILE
//   tool_st_write --check FILE  load FILE with the same table and print
//                               "name v0 v1 ..." per tensor (%.9g: exact)
// The table and its values must match expected() in the Python test.
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/params.h"
#include "util/common.h"

static int build(ParamTable *t) {
    int s35[2] = {3, 5}, s7[1] = {7};
    if (ptable_add(t, "model.embed_tokens.weight", 2, s35, INIT_NORMAL, PARAM_MATRIX) < 0 ||
        ptable_add(t, "model.norm.weight", 1, s7, INIT_ONES, PARAM_MATRIX) < 0 ||
        ptable_add(t, "model.layers.0.attn_res_alpha", 0, NULL, INIT_ZEROS, PARAM_MATRIX) < 0)
        return MHAR_ERR;
    return MHAR_OK;
}

// Known values: exact in float32 except 1/(k+1), which both sides compute as
// a correctly rounded float32 division.
static void fill(const ParamTable *t, float *buf) {
    float *a = buf + t->p[0].offset, *b = buf + t->p[1].offset, *s = buf + t->p[2].offset;
    for (int i = 0; i < 15; i++) a[i] = (float)i * 0.5f - 3.0f;
    for (int k = 0; k < 7; k++) b[k] = 1.0f / (float)(k + 1);
    s[0] = -1234.5f;
}

static void print_values(const ParamTable *t, const float *buf) {
    for (int i = 0; i < t->n; i++) {
        printf("%s", t->p[i].name);
        for (size_t j = 0; j < t->p[i].numel; j++) printf(" %.9g", (double)buf[t->p[i].offset + j]);
        printf("\n");
    }
}

int main(int argc, char **argv) {
    int check = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (!(argc == 2 || check)) {
        fprintf(stderr, "usage: %s FILE | --check FILE\n", argv[0]);
        return 2;
    }
    ParamTable t = {0};
    float *buf = NULL;
    int rc = build(&t);
    if (rc == MHAR_OK) rc = (buf = mhar_alloc(t.total * sizeof(float))) ? MHAR_OK : MHAR_ERR;
    if (rc == MHAR_OK && check) {
        rc = safetensors_load(argv[2], &t, buf, 0);
        if (rc == MHAR_OK) print_values(&t, buf);
    } else if (rc == MHAR_OK) {
        fill(&t, buf);
        rc = safetensors_save(argv[1], &t, buf);
    }
    if (rc != MHAR_OK) fprintf(stderr, "error: %s\n", mhar_error());
    mhar_free(buf);
    ptable_free(&t);
    return rc == MHAR_OK ? 0 : 1;
}
