// st_open_index on arbitrary index text (model.safetensors.index.json),
// beside fixed shards: a.safetensors (model.a.weight, BF16), b.safetensors
// (model.b, s, m.4d: F32) and c.safetensors (a second model.b). The one
// index that can succeed maps model.a.weight to a and the rest to b.
// Properties: MHAR_OK or MHAR_ERR; an error names the index or a shard and
// leaves the destination buffer untouched; a success holds the shards'
// values exactly.
#include <cjson/cJSON.h>

#include "../src/io/safetensors.h"
#include "../src/util/common.h"
#include "fuzz.h"
#include "fuzz_table.h"

static ParamTable table;
static float *buf, *before, *want;
static char index_path[128];

static void setup(void) {
    fuzz_small_table(&table);
    buf = calloc(table.total, sizeof *buf);
    before = calloc(table.total, sizeof *before);
    want = calloc(table.total, sizeof *want);
    float *vals = calloc(table.total, sizeof *vals);
    if (!buf || !before || !want || !vals) abort();
    for (size_t i = 0; i < table.total; i++) vals[i] = (float)i * 0.37f - 1.5f;
    const char *dir = fuzz_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    if (safetensors_save_range(path, &table, 0, 1, vals, DTYPE_BF16)) abort();
    snprintf(path, sizeof path, "%s/b.safetensors", dir);
    if (safetensors_save_range(path, &table, 1, 3, vals, DTYPE_F32)) abort();
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    if (safetensors_save_range(path, &table, 1, 1, vals, DTYPE_F16)) abort();
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    memcpy(want, vals, table.total * sizeof *want);
    for (size_t j = 0; j < table.p[0].numel; j++)
        want[table.p[0].offset + j] = bf16_to_f32(f32_to_bf16(vals[table.p[0].offset + j]));
    free(vals);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!buf) setup();
    FILE *f = fopen(index_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    for (size_t i = 0; i < table.total; i++) buf[i] = before[i] = (float)i + 0.5f;
    StCheckpoint c;
    int rc = st_open_index(&c, index_path);
    if (rc == MHAR_OK) rc = st_check(&c, &table, DTYPES_FLOAT, NULL, NULL);
    if (rc == MHAR_OK) st_read_table(&c, &table, buf);
    st_close(&c);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), fuzz_dir()) != NULL, "error names no file: %s", mhar_error());
        FUZZ_ASSERT(memcmp(buf, before, table.total * sizeof *buf) == 0, "a failed load changed the buffer");
        return 0;
    }
    for (int i = 0; i < table.n; i++)
        FUZZ_ASSERT(memcmp(buf + table.p[i].offset, want + table.p[i].offset, table.p[i].numel * sizeof *buf) == 0,
                    "tensor %s: wrong values", table.p[i].name);
    return 0;
}
