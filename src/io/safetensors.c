#include "safetensors.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "atomic.h"

// safetensors data is little-endian; mhar writes and reads floats as they lie
// in memory, which is only right on a little-endian host.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif


// ---- writing ----

typedef struct {
    char *s;
    size_t n, cap;
} Str;

// Appends to b, growing it; MHAR_ERR (no message) only when out of memory.
static int str_printf(Str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int str_printf(Str *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) return MHAR_ERR;
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return MHAR_OK;
        }
        size_t cap = b->cap * 2 + (size_t)k + 64;
        char *s = realloc(b->s, cap);
        if (!s) return MHAR_ERR;
        b->s = s;
        b->cap = cap;
    }
}

static int tensor_entry(Str *h, const ParamInfo *p, Dtype dt, size_t begin) {
    if (str_printf(h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", p->name, dtype_st_name(dt))) return MHAR_ERR;
    for (int d = 0; d < p->ndim; d++)
        if (str_printf(h, d ? ",%d" : "%d", p->shape[d])) return MHAR_ERR;
    return str_printf(h, "],\"data_offsets\":[%zu,%zu]}", begin, begin + p->numel * dtype_size(dt));
}

// JSON header in table order, padded with spaces so the data starts 8-aligned.
static int build_header(const ParamTable *t, int first, int count, Dtype dt, Str *h) {
    h->cap = 256 + (size_t)count * 256;
    h->n = 0;
    h->s = malloc(h->cap);
    if (!h->s) return MHAR_ERR;
    if (str_printf(h, "{\"__metadata__\":{\"format\":\"pt\"}")) return MHAR_ERR;
    size_t pos = 0;
    for (int i = first; i < first + count; i++) {
        if (tensor_entry(h, &t->p[i], dt, pos)) return MHAR_ERR;
        pos += t->p[i].numel * dtype_size(dt);
    }
    if (str_printf(h, "}")) return MHAR_ERR;
    while (h->n % 8)
        if (str_printf(h, " ")) return MHAR_ERR;
    return MHAR_OK;
}

// One tensor converted to dt through a bounded buffer, never the whole tensor at once.
static int write_converted(AtomicFile *a, const float *x, size_t n, Dtype dt) {
    enum { CHUNK = 1 << 14 };
    unsigned char out[CHUNK * 4];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        f32_to_dtype(dt, x + i, out, k);
        if (atomic_write(a, out, k * dtype_size(dt))) return MHAR_ERR;
    }
    return MHAR_OK;
}

int safetensors_save(const char *path, const ParamTable *t, const float *buf) {
    return safetensors_save_range(path, t, 0, t->n, buf, DTYPE_F32);
}

int safetensors_save_range(const char *path, const ParamTable *t, int first, int count, const float *buf,
                           Dtype dt) {
    if (first < 0 || count < 0 || first > t->n - count)
        return mhar_fail("%s: tensors %d..%d are not in the table of %d", path, first, first + count - 1, t->n);
    Str h = {0};
    if (build_header(t, first, count, dt, &h)) {
        free(h.s);
        return mhar_fail("%s: out of memory building the safetensors header", path);
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    AtomicFile a;
    int rc = atomic_open(&a, path);
    if (rc == MHAR_OK) rc = atomic_write(&a, len, sizeof len);
    if (rc == MHAR_OK) rc = atomic_write(&a, h.s, h.n);
    for (int i = first; rc == MHAR_OK && i < first + count; i++)
        rc = dt == DTYPE_F32 ? atomic_write(&a, buf + t->p[i].offset, t->p[i].numel * sizeof(float))
                             : write_converted(&a, buf + t->p[i].offset, t->p[i].numel, dt);
    free(h.s);
    if (rc != MHAR_OK) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}

// ---- reading one F32 file (a run directory's weights, optimizer state) ----

static int tolerate_all(const char *name, void *arg) {
    (void)name;
    (void)arg;
    return 1;
}

int safetensors_load(const char *path, const ParamTable *t, float *buf, int allow_extra) {
    StCheckpoint c;
    int rc = st_open(&c, path);
    if (rc == MHAR_OK) rc = st_check(&c, t, DTYPE_BIT(DTYPE_F32), allow_extra ? tolerate_all : NULL, NULL);
    if (rc == MHAR_OK) st_read_table(&c, t, buf);
    st_close(&c);
    return rc;
}
