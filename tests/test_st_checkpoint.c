// Checkpoints of one or more safetensors files (src/io/safetensors.h):
// BF16/F16 files written by safetensors_save_range read back as the rounded
// values; an HF index with its shards loads like one file; and each way an
// index and its shards can disagree (missing shard, tensor in another shard
// than the index says, a tensor the index names but the shard lacks, one the
// index does not list, one in two shards, a shard path leaving the
// directory, a tensor of the model missing everywhere), an unreadable dtype
// and an ambiguous directory are refused with the file, the tensor and the
// reason, leaving the destination buffer untouched.
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "io/safetensors.h"
#include "util/common.h"
#include "util/dir.h"

#include "testfiles.h"

static void write_text(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }

// The model: a matrix, a vector, a scalar.
static void small_table(ParamTable *t) {
    ptable_add(t, "model.a", 2, (int[]){3, 5}, INIT_NORMAL, PARAM_MATRIX);
    ptable_add(t, "model.b", 1, (int[]){7}, INIT_ONES, PARAM_MATRIX);
    ptable_add(t, "model.s", 0, NULL, INIT_ZEROS, PARAM_MATRIX);
}

static void fill(const ParamTable *t, float *x) {
    Rng r;
    rng_seed(&r, 3);
    for (size_t i = 0; i < t->total; i++) x[i] = rng_normal(&r) * 100.0f;
}

// Load path (a file, an index or a directory) into a fresh buffer; on error
// the buffer must still hold its sentinel.
static int load(const char *path, int kind, const ParamTable *t, float *y, unsigned dtypes) {
    StCheckpoint c;
    for (size_t i = 0; i < t->total; i++) y[i] = 42.0f;
    int rc = kind == 0 ? st_open(&c, path) : kind == 1 ? st_open_index(&c, path) : st_open_dir(&c, path);
    if (rc == MHAR_OK) rc = st_check(&c, t, dtypes, NULL, NULL);
    if (rc == MHAR_OK) st_read_table(&c, t, y);
    st_close(&c);
    if (rc != MHAR_OK)
        for (size_t i = 0; i < t->total; i++)
            if (y[i] != 42.0f) return mhar_fail("the failed load changed the buffer");
    return rc;
}

static void test_dtypes(const ParamTable *t, const float *x, float *y) {
    const Dtype dts[] = {DTYPE_BF16, DTYPE_F16, DTYPE_F32};
    for (int k = 0; k < 3; k++) {
        const char *p = tpath("conv.safetensors");
        int rc = safetensors_save_range(p, t, 0, t->n, x, dts[k]);
        if (rc == MHAR_OK) rc = load(p, 0, t, y, DTYPES_FLOAT);
        int exact = rc == MHAR_OK;
        for (int i = 0; exact && i < t->n; i++)
            for (size_t j = 0; j < t->p[i].numel; j++) {
                float v = x[t->p[i].offset + j], want = dts[k] == DTYPE_BF16 ? bf16_to_f32(f32_to_bf16(v))
                                                        : dts[k] == DTYPE_F16 ? f16_to_f32(f32_to_f16(v)) : v;
                exact &= memcmp(&want, &y[t->p[i].offset + j], 4) == 0;
            }
        char name[64];
        snprintf(name, sizeof name, "st_ckpt.%s_reads_rounded_values", dtype_flag_name(dts[k]));
        CHECK(exact, name, "rc %d: %s", rc, mhar_error());
    }
    const char *p = tpath("conv.safetensors");
    safetensors_save_range(p, t, 0, t->n, x, DTYPE_BF16);
    int rc = safetensors_load(p, t, y, 0);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "dtype BF16, expected F32") && has(mhar_error(), "'model.a'"),
          "st_ckpt.run_weights_f32_only", "%s", mhar_error());
    rc = safetensors_save_range(p, t, 2, 2, x, DTYPE_F32);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "not in the table"), "st_ckpt.save_range_checked", "%s", mhar_error());
}

// A hand-made header (padded to 8) and data.
static void write_st(const char *path, const char *header, size_t data_bytes) {
    size_t hl = (strlen(header) + 7) / 8 * 8, n = 8 + hl + data_bytes;
    unsigned char *b = calloc(1, n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memset(b + 8, ' ', hl);
    memcpy(b + 8, header, strlen(header));
    write_bytes(path, b, n);
    free(b);
}

static void test_unreadable_dtype(float *y) {
    ParamTable t = {0};
    ptable_add(&t, "w", 1, (int[]){2}, INIT_ZEROS, PARAM_MATRIX);
    const char *cases[][2] = {{"I64", "16"}, {"F64", "16"}, {"F8_E4M3", "2"}};
    for (int i = 0; i < 3; i++) {
        char h[160], name[64];
        snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[0,%s]}}", cases[i][0],
                 cases[i][1]);
        write_st(tpath("i64.safetensors"), h, 16);
        int rc = load(tpath("i64.safetensors"), 0, &t, y, DTYPES_FLOAT);
        char want[64];
        snprintf(want, sizeof want, "dtype %s, expected one of F32, BF16, F16", cases[i][0]);
        snprintf(name, sizeof name, "st_ckpt.refuses_%s", cases[i][0]);
        CHECK(rc == MHAR_ERR && has(mhar_error(), want) && has(mhar_error(), "'w'") &&
                  has(mhar_error(), "i64.safetensors"),
              name, "%s", mhar_error());
    }
    ptable_free(&t);
}

// Shards: model.a in shard 1; model.b and model.s in shard 2.
static void write_shards(const char *dir, const ParamTable *t, const float *x) {
    char p[MHAR_PATH_MAX];
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    safetensors_save_range(p, t, 0, 1, x, DTYPE_BF16);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    safetensors_save_range(p, t, 1, 2, x, DTYPE_F16);
}

#define S1 "\"model-00001-of-00002.safetensors\""
#define S2 "\"model-00002-of-00002.safetensors\""

static void index_case(const char *dir, const char *name, const char *weight_map, const char *want1,
                       const char *want2, const ParamTable *t, float *y) {
    char p[MHAR_PATH_MAX], text[1024];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    snprintf(text, sizeof text, "{\"metadata\":{\"total_size\":1},\"weight_map\":%s}", weight_map);
    write_text(p, text);
    int rc = load(p, 1, t, y, DTYPES_FLOAT);
    CHECK(rc == MHAR_ERR && has(mhar_error(), want1) && has(mhar_error(), want2), name, "rc %d: %s", rc,
          mhar_error());
}

static void test_index(const ParamTable *t, const float *x, float *y) {
    char dir[512], p[MHAR_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sharded", tmpdir);
    mkdir(dir, 0755);
    write_shards(dir, t, x);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_text(p, "{\"metadata\":{\"total_size\":1},\"weight_map\":{\"model.a\":" S1 ",\"model.b\":" S2
                  ",\"model.s\":" S2 "}}");
    int rc = load(dir, 2, t, y, DTYPES_FLOAT);
    int ok = rc == MHAR_OK;
    for (size_t j = 0; ok && j < 15; j++) ok &= y[t->p[0].offset + j] == bf16_to_f32(f32_to_bf16(x[t->p[0].offset + j]));
    for (size_t j = 0; ok && j < 7; j++) ok &= y[t->p[1].offset + j] == f16_to_f32(f32_to_f16(x[t->p[1].offset + j]));
    ok &= y[t->p[2].offset] == f16_to_f32(f32_to_f16(x[t->p[2].offset]));
    CHECK(ok, "st_ckpt.index_loads_shards", "rc %d: %s", rc, mhar_error());

    index_case(dir, "st_ckpt.index_missing_shard",
               "{\"model.a\":" S1 ",\"model.b\":" S2 ",\"model.s\":\"model-00003-of-00003.safetensors\"}",
               "model-00003-of-00003.safetensors", "missing", t, y);
    index_case(dir, "st_ckpt.index_wrong_shard", "{\"model.a\":" S2 ",\"model.b\":" S2 ",\"model.s\":" S2 "}",
               "'model.a'", "mapped to model-00002", t, y);
    index_case(dir, "st_ckpt.index_tensor_shard_lacks",
               "{\"model.a\":" S1 ",\"model.b\":" S2 ",\"model.s\":" S2 ",\"model.z\":" S1 "}", "'model.z'",
               "lacks it", t, y);
    index_case(dir, "st_ckpt.shard_tensor_not_in_index", "{\"model.a\":" S1 ",\"model.b\":" S2 "}", "'model.s'",
               "not in the index", t, y);
    index_case(dir, "st_ckpt.index_path_outside", "{\"model.a\":\"../x.safetensors\"}", "'model.a'",
               "not the name of a file", t, y);
    index_case(dir, "st_ckpt.index_no_weight_map", "5", "weight_map", "model.safetensors.index.json", t, y);

    // model.a in both shards.
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    safetensors_save_range(p, t, 0, 3, x, DTYPE_F16);
    index_case(dir, "st_ckpt.tensor_in_two_shards", "{\"model.a\":" S1 ",\"model.b\":" S2 ",\"model.s\":" S2 "}",
               "'model.a'", "two shards", t, y);
    // A tensor of the model in no shard.
    safetensors_save_range(p, t, 1, 1, x, DTYPE_F16);
    index_case(dir, "st_ckpt.model_tensor_missing", "{\"model.a\":" S1 ",\"model.b\":" S2 "}", "'model.s'",
               "missing from the checkpoint", t, y);

    // A directory with both forms, or neither.
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    safetensors_save(p, t, x);
    rc = load(dir, 2, t, y, DTYPES_FLOAT);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "ambiguous"), "st_ckpt.dir_both_forms", "%s", mhar_error());
    rc = load(tmpdir, 2, t, y, DTYPES_FLOAT);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "neither"), "st_ckpt.dir_no_weights", "%s", mhar_error());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_st_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) return 2;
    ParamTable t = {0};
    small_table(&t);
    float *x = calloc(t.total, sizeof(float)), *y = calloc(t.total, sizeof(float));
    fill(&t, x);
    test_dtypes(&t, x, y);
    test_unreadable_dtype(y);
    test_index(&t, x, y);
    free(x);
    free(y);
    ptable_free(&t);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) return 2;
    CHECK_EXIT();
}
