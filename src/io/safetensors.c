#define _FILE_OFFSET_BITS 64 // tensor offsets past 2 GiB on 32-bit hosts too
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../util/common.h"
#include "atomic.h"

// safetensors data is little-endian; mhar writes and reads floats as they lie
// in memory, which is only right on a little-endian host.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_MAX_HEADER 100000000ull // the reference implementation's limit (100 MB)
#define ST_MAX_EXACT 9007199254740992.0 // 2^53: integers a JSON double holds exactly

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

static int tensor_entry(Str *h, const ParamInfo *p, size_t begin) {
    if (str_printf(h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", p->name)) return MHAR_ERR;
    for (int d = 0; d < p->ndim; d++)
        if (str_printf(h, d ? ",%d" : "%d", p->shape[d])) return MHAR_ERR;
    return str_printf(h, "],\"data_offsets\":[%zu,%zu]}", begin, begin + p->numel * sizeof(float));
}

// JSON header in table order, padded with spaces so the data starts 8-aligned.
static int build_header(const ParamTable *t, Str *h) {
    h->cap = 256 + (size_t)t->n * 256;
    h->n = 0;
    h->s = malloc(h->cap);
    if (!h->s) return MHAR_ERR;
    if (str_printf(h, "{\"__metadata__\":{\"format\":\"pt\"}")) return MHAR_ERR;
    size_t pos = 0;
    for (int i = 0; i < t->n; i++) {
        if (tensor_entry(h, &t->p[i], pos)) return MHAR_ERR;
        pos += t->p[i].numel * sizeof(float);
    }
    if (str_printf(h, "}")) return MHAR_ERR;
    while (h->n % 8)
        if (str_printf(h, " ")) return MHAR_ERR;
    return MHAR_OK;
}

int safetensors_save(const char *path, const ParamTable *t, const float *buf) {
    Str h = {0};
    if (build_header(t, &h)) {
        free(h.s);
        return mhar_fail("%s: out of memory building the safetensors header", path);
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    AtomicFile a;
    int rc = atomic_open(&a, path);
    if (rc == MHAR_OK) rc = atomic_write(&a, len, sizeof len);
    if (rc == MHAR_OK) rc = atomic_write(&a, h.s, h.n);
    for (int i = 0; rc == MHAR_OK && i < t->n; i++)
        rc = atomic_write(&a, buf + t->p[i].offset, t->p[i].numel * sizeof(float));
    free(h.s);
    if (rc != MHAR_OK) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}

// ---- reading ----

typedef struct {
    const char *path;
    FILE *f;
    uint64_t file_size, header_len, data_size;
    cJSON *root;
    uint64_t *begin; // per table tensor: byte offset in the data section
    char *seen;      // per table tensor: found in the header
} Reader;

// Header length and JSON. Every size is checked against the file before use.
static int read_header(Reader *r) {
    unsigned char len[8];
    if (r->file_size < 8)
        return mhar_fail("%s: truncated: %" PRIu64 " bytes, shorter than the 8-byte header "
                         "length", r->path, r->file_size);
    if (fread(len, 1, 8, r->f) != 8) return mhar_fail("%s: cannot read the header length", r->path);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)len[i] << (8 * i);
    if (hl > ST_MAX_HEADER)
        return mhar_fail("%s: header length %" PRIu64 " is larger than the %llu-byte limit "
                         "(not a safetensors file?)", r->path, hl, ST_MAX_HEADER);
    if (hl > r->file_size - 8)
        return mhar_fail("%s: truncated: header length %" PRIu64 " but only %" PRIu64
                         " bytes follow it", r->path, hl, r->file_size - 8);
    r->header_len = hl;
    r->data_size = r->file_size - 8 - hl;
    char *text = malloc((size_t)hl + 1);
    if (!text) return mhar_fail("%s: out of memory for a %" PRIu64 "-byte header", r->path, hl);
    if (fread(text, 1, (size_t)hl, r->f) != (size_t)hl) {
        free(text);
        return mhar_fail("%s: truncated: cannot read the %" PRIu64 "-byte header", r->path, hl);
    }
    text[hl] = '\0';
    const char *end = NULL;
    r->root = cJSON_ParseWithLengthOpts(text, (size_t)hl, &end, 0);
    int ok = r->root && cJSON_IsObject(r->root);
    // The format pads with spaces only; anything else after the JSON is damage.
    for (const char *q = end; ok && q < text + hl; q++) ok = *q == ' ';
    free(text);
    if (!ok) return mhar_fail("%s: header is not a valid JSON object", r->path);
    return MHAR_OK;
}

// An exact non-negative integer from a JSON number (doubles hold 2^53 exactly).
static int json_uint(const cJSON *it, uint64_t *out) {
    if (!cJSON_IsNumber(it)) return 0;
    double v = it->valuedouble;
    if (!isfinite(v) || v < 0 || v > ST_MAX_EXACT || v != floor(v)) return 0;
    *out = (uint64_t)v;
    return 1;
}

static void format_table_shape(char *out, size_t cap, const ParamInfo *p) {
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < p->ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, d ? ", %d" : "%d", p->shape[d]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static void format_json_shape(char *out, size_t cap, const cJSON *shape) {
    if (!cJSON_IsArray(shape)) {
        snprintf(out, cap, "%s", shape ? "(not an array)" : "(missing)");
        return;
    }
    size_t n = (size_t)snprintf(out, cap, "[");
    int d = 0;
    for (const cJSON *it = shape ? shape->child : NULL; it && n < cap; it = it->next, d++) {
        const char *sep = d ? ", " : "";
        if (cJSON_IsNumber(it))
            n += (size_t)snprintf(out + n, cap - n, "%s%.17g", sep, it->valuedouble);
        else
            n += (size_t)snprintf(out + n, cap - n, "%s?", sep);
    }
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static int check_shape(const Reader *r, const ParamInfo *p, const cJSON *shape) {
    int ok = cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == p->ndim;
    int d = 0;
    for (const cJSON *it = ok ? shape->child : NULL; it; it = it->next, d++) {
        uint64_t v;
        if (!json_uint(it, &v) || v != (uint64_t)p->shape[d]) ok = 0;
    }
    if (ok) return MHAR_OK;
    char got[128], want[64];
    format_json_shape(got, sizeof got, shape);
    format_table_shape(want, sizeof want, p);
    return mhar_fail("%s: tensor '%s': shape %s in file, expected %s", r->path, p->name, got, want);
}

static int check_offsets(const Reader *r, const ParamInfo *p, const cJSON *offs, uint64_t *begin) {
    uint64_t a, b;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &a) ||
        !json_uint(offs->child->next, &b) || b < a)
        return mhar_fail("%s: tensor '%s': data_offsets is not a pair [begin, end] of "
                         "non-negative integers with begin <= end", r->path, p->name);
    uint64_t want = (uint64_t)p->numel * sizeof(float);
    if (b - a != want)
        return mhar_fail("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                         " bytes, expected %" PRIu64 " (%zu float32)", r->path, p->name, a, b,
                         b - a, want, p->numel);
    if (b > r->data_size)
        return mhar_fail("%s: truncated: tensor '%s' ends at data byte %" PRIu64
                         " but the data section holds only %" PRIu64 " bytes (file size %" PRIu64
                         ")", r->path, p->name, b, r->data_size, r->file_size);
    *begin = a;
    return MHAR_OK;
}

static int check_entry(Reader *r, const ParamInfo *p, const cJSON *e, uint64_t *begin) {
    if (!cJSON_IsObject(e)) return mhar_fail("%s: tensor '%s': header entry is not an object", r->path, p->name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dtype))
        return mhar_fail("%s: tensor '%s': dtype missing or not a string", r->path, p->name);
    if (strcmp(dtype->valuestring, "F32") != 0)
        return mhar_fail("%s: tensor '%s': dtype %.20s, expected F32", r->path, p->name,
                         dtype->valuestring);
    if (check_shape(r, p, cJSON_GetObjectItemCaseSensitive(e, "shape"))) return MHAR_ERR;
    return check_offsets(r, p, cJSON_GetObjectItemCaseSensitive(e, "data_offsets"), begin);
}

// Match header entries with the table: every table tensor exactly once, and
// nothing else unless allowed. No data is read until all of this passes, so a
// bad file leaves buf untouched.
static int check_header(Reader *r, const ParamTable *t, int allow_extra) {
    for (const cJSON *e = r->root->child; e; e = e->next) {
        if (!e->string) return mhar_fail("%s: header entry without a name", r->path);
        if (strcmp(e->string, "__metadata__") == 0) continue;
        int i = ptable_find(t, e->string);
        if (i < 0) {
            if (allow_extra) continue;
            return mhar_fail("%s: tensor '%.120s' is in the file but not in the model "
                             "(unexpected tensor)", r->path, e->string);
        }
        if (r->seen[i]) return mhar_fail("%s: tensor '%s' appears twice in the header", r->path, e->string);
        r->seen[i] = 1;
        if (check_entry(r, &t->p[i], e, &r->begin[i])) return MHAR_ERR;
    }
    for (int i = 0; i < t->n; i++)
        if (!r->seen[i]) return mhar_fail("%s: tensor '%s' is missing from the file", r->path, t->p[i].name);
    return MHAR_OK;
}

// Tensor by tensor straight into buf: the file is never held in memory.
static int read_data(Reader *r, const ParamTable *t, float *buf) {
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        uint64_t at = 8 + r->header_len + r->begin[i];
        if (fseeko(r->f, (off_t)at, SEEK_SET) != 0)
            return mhar_fail("%s: tensor '%s': seek failed: %s", r->path, p->name, strerror(errno));
        if (fread(buf + p->offset, sizeof(float), p->numel, r->f) != p->numel)
            return mhar_fail("%s: truncated: tensor '%s': short read (file changed while "
                             "loading?)", r->path, p->name);
    }
    return MHAR_OK;
}

static int open_reader(Reader *r, const ParamTable *t) {
    r->f = fopen(r->path, "rb");
    if (!r->f) return mhar_fail("%s: cannot open: %s", r->path, strerror(errno));
    struct stat st;
    if (fstat(fileno(r->f), &st) != 0) return mhar_fail("%s: cannot stat: %s", r->path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return mhar_fail("%s: not a regular file", r->path);
    r->file_size = (uint64_t)st.st_size;
    r->begin = calloc((size_t)t->n + 1, sizeof *r->begin);
    r->seen = calloc((size_t)t->n + 1, 1);
    if (!r->begin || !r->seen) return mhar_fail("%s: out of memory", r->path);
    return MHAR_OK;
}

int safetensors_load(const char *path, const ParamTable *t, float *buf, int allow_extra) {
    Reader r = {.path = path};
    int rc = open_reader(&r, t);
    if (rc == MHAR_OK) rc = read_header(&r);
    if (rc == MHAR_OK) rc = check_header(&r, t, allow_extra);
    if (rc == MHAR_OK) rc = read_data(&r, t, buf);
    if (r.f) fclose(r.f);
    cJSON_Delete(r.root);
    free(r.begin);
    free(r.seen);
    return rc;
}
