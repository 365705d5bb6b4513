// safetensors_load on arbitrary bytes, against a small parameter table with a
// matrix, a vector, a scalar and a 4-d tensor, with and without
// allow_extra. Properties: it returns MHAR_OK or MHAR_ERR; an error names
// the file and leaves the destination buffer untouched; a success reads
// exactly the bytes the header points at.
#include <cjson/cJSON.h>

#include "../src/io/safetensors.h"
#include "../src/util/common.h"
#include "fuzz.h"

static ParamTable table;
static float *buf, *before;

static void setup(void) {
    static const struct { const char *name; int ndim, shape[4]; } t[] = {
        {"model.a.weight", 2, {2, 3}},
        {"model.b", 1, {4}},
        {"s", 0, {0}},
        {"m.4d", 4, {1, 2, 1, 2}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (ptable_add(&table, t[i].name, t[i].ndim, t[i].shape, INIT_ZEROS) < 0) abort();
    buf = calloc(table.total, sizeof *buf);
    before = calloc(table.total, sizeof *before);
    if (!buf || !before) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!buf) setup();
    const char *path = fuzz_file(data, size);
    for (int allow_extra = 0; allow_extra < 2; allow_extra++) {
        for (size_t i = 0; i < table.total; i++) buf[i] = before[i] = (float)i + 0.5f;
        int rc = safetensors_load(path, &table, buf, allow_extra);
        FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
        if (rc == MHAR_ERR) {
            FUZZ_ASSERT(strstr(mhar_error(), path) != NULL, "error does not name the file: %s", mhar_error());
            FUZZ_ASSERT(memcmp(buf, before, table.total * sizeof *buf) == 0, "a failed load changed the buffer");
            continue;
        }
        // Success: every tensor holds exactly the bytes its data_offsets
        // name, checked against an independent parse of the header.
        FUZZ_ASSERT(size >= 8, "loaded a %zu-byte file", size);
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)data[i] << (8 * i);
        FUZZ_ASSERT(hl <= size - 8, "header length %llu past the end", (unsigned long long)hl);
        cJSON *root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hl);
        FUZZ_ASSERT(root != NULL, "accepted header is not JSON");
        for (int i = 0; i < table.n; i++) {
            const ParamInfo *p = &table.p[i];
            const cJSON *offs = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(root, p->name), "data_offsets");
            FUZZ_ASSERT(cJSON_IsArray(offs) && cJSON_IsNumber(offs->child), "tensor %s: no offsets", p->name);
            size_t begin = (size_t)offs->child->valuedouble, n = p->numel * sizeof(float);
            FUZZ_ASSERT(begin + n <= size - 8 - hl, "tensor %s: read past the end", p->name);
            FUZZ_ASSERT(memcmp(buf + p->offset, data + 8 + hl + begin, n) == 0, "tensor %s: wrong bytes", p->name);
        }
        cJSON_Delete(root);
    }
    return 0;
}
