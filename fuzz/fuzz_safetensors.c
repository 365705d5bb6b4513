// safetensors_load on arbitrary bytes, against a small parameter table with a
// matrix, a vector, a scalar and a 4-d tensor, with and without
// allow_extra; then the checkpoint reader of import (st_open, st_check with
// F32/BF16/F16, st_read_table). Properties: it returns MHAR_OK or MHAR_ERR;
// an error names the file and leaves the destination buffer untouched; a
// success reads exactly the bytes the header points at (converted, for
// BF16/F16, as dtype_to_f32 converts them).
#include <cjson/cJSON.h>

#include "../src/io/safetensors.h"
#include "../src/util/common.h"
#include "fuzz.h"
#include "fuzz_table.h"

static ParamTable table;
static float *buf, *before;

static void setup(void) {
    fuzz_small_table(&table);
    buf = calloc(table.total, sizeof *buf);
    before = calloc(table.total, sizeof *before);
    if (!buf || !before) abort();
}

// Every tensor of the table holds the values at its data_offsets, in the
// header's dtype, checked against an independent parse of the header.
static void check_loaded(const uint8_t *data, size_t size, int f32_only) {
    FUZZ_ASSERT(size >= 8, "loaded a %zu-byte file", size);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)data[i] << (8 * i);
    FUZZ_ASSERT(hl <= size - 8, "header length %llu past the end", (unsigned long long)hl);
    cJSON *root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hl);
    FUZZ_ASSERT(root != NULL, "accepted header is not JSON");
    for (int i = 0; i < table.n; i++) {
        const ParamInfo *p = &table.p[i];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, p->name);
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        Dtype dt;
        FUZZ_ASSERT(cJSON_IsString(dtype) && dtype_from_st_name(dtype->valuestring, &dt) == MHAR_OK,
                    "tensor %s: accepted an unreadable dtype", p->name);
        FUZZ_ASSERT(!f32_only || dt == DTYPE_F32, "tensor %s: accepted %s as F32", p->name, dtype_st_name(dt));
        FUZZ_ASSERT(cJSON_IsArray(offs) && cJSON_IsNumber(offs->child), "tensor %s: no offsets", p->name);
        size_t begin = (size_t)offs->child->valuedouble, n = p->numel * dtype_size(dt);
        FUZZ_ASSERT(begin + n <= size - 8 - hl, "tensor %s: read past the end", p->name);
        float want[8];
        FUZZ_ASSERT(p->numel <= 8, "table tensor %s too large for the check", p->name);
        dtype_to_f32(dt, data + 8 + hl + begin, want, p->numel);
        FUZZ_ASSERT(memcmp(buf + p->offset, want, p->numel * sizeof(float)) == 0, "tensor %s: wrong values", p->name);
    }
    cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!buf) setup();
    const char *path = fuzz_file(data, size);
    for (size_t i = 0; i < table.total; i++) buf[i] = before[i] = (float)i + 0.5f;
    StCheckpoint c;
    int rc = st_open(&c, path);
    if (rc == MHAR_OK) rc = st_check(&c, &table, DTYPES_FLOAT, NULL, NULL);
    if (rc == MHAR_OK) st_read_table(&c, &table, buf);
    st_close(&c);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), path) != NULL, "error does not name the file: %s", mhar_error());
        FUZZ_ASSERT(memcmp(buf, before, table.total * sizeof *buf) == 0, "a failed load changed the buffer");
    } else {
        check_loaded(data, size, 0);
    }
    for (int allow_extra = 0; allow_extra < 2; allow_extra++) {
        for (size_t i = 0; i < table.total; i++) buf[i] = before[i] = (float)i + 0.5f;
        int rc = safetensors_load(path, &table, buf, allow_extra);
        FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
        if (rc == MHAR_ERR) {
            FUZZ_ASSERT(strstr(mhar_error(), path) != NULL, "error does not name the file: %s", mhar_error());
            FUZZ_ASSERT(memcmp(buf, before, table.total * sizeof *buf) == 0, "a failed load changed the buffer");
            continue;
        }
        check_loaded(data, size, 1);
    }
    return 0;
}
