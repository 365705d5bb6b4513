// Reading safetensors checkpoints (safetensors.h): files are memory-mapped;
// opening checks the header's framing and the names, st_check each entry
// against the parameter it should fill, st_read converts straight from the
// mapping into the parameter buffer.
#define _FILE_OFFSET_BITS 64 // files past 2 GiB on 32-bit hosts too
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/dir.h"
#include "../util/json.h"

#define ST_MAX_HEADER 100000000ull      // the reference implementation's limit (100 MB)
#define ST_MAX_EXACT 9007199254740992.0 // 2^53: integers a JSON double holds exactly
#define ST_SINGLE "model.safetensors"
#define ST_INDEX "model.safetensors.index.json"

// ---- one file ----

static int map_file(StFile *f) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mhar_fail("%s: cannot open: %s", f->path, strerror(errno));
    struct stat st;
    int rc = MHAR_OK;
    if (fstat(fd, &st) != 0) rc = mhar_fail("%s: cannot stat: %s", f->path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = mhar_fail("%s: not a regular file", f->path);
    else if (st.st_size < 8)
        rc = mhar_fail("%s: truncated: %lld bytes, shorter than the 8-byte header length", f->path,
                       (long long)st.st_size);
    if (rc == MHAR_OK) {
        f->size = (size_t)st.st_size;
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) rc = mhar_fail("%s: cannot map: %s", f->path, strerror(errno));
        else f->map = p;
    }
    close(fd);
    return rc;
}

// Header length and JSON. Every size is checked against the file before use.
static int parse_header(StFile *f) {
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f->map[i] << (8 * i);
    if (hl > ST_MAX_HEADER)
        return mhar_fail("%s: header length %" PRIu64 " is larger than the %llu-byte limit "
                         "(not a safetensors file?)", f->path, hl, ST_MAX_HEADER);
    if (hl > f->size - 8)
        return mhar_fail("%s: truncated: header length %" PRIu64 " but only %zu bytes follow it", f->path, hl,
                         f->size - 8);
    f->data_start = 8 + hl;
    const char *text = (const char *)f->map + 8, *end = NULL;
    f->header = cJSON_ParseWithLengthOpts(text, (size_t)hl, &end, 0);
    int ok = f->header && cJSON_IsObject(f->header);
    // The format pads with spaces only; anything else after the JSON is damage.
    for (const char *q = end; ok && q < text + hl; q++) ok = *q == ' ';
    if (!ok) return mhar_fail("%s: header is not a valid JSON object", f->path);
    return MHAR_OK;
}

// ---- names ----

static int by_name(const void *a, const void *b, void *arg) {
    const StTensor *t = arg;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

// Sort the names; a name twice (in one header or in two shards) is an error.
static int index_names(StCheckpoint *c) {
    c->by_name = malloc(((size_t)c->n + 1) * sizeof *c->by_name);
    if (!c->by_name) return mhar_fail("%s: out of memory", c->origin);
    for (int i = 0; i < c->n; i++) c->by_name[i] = i;
    qsort_r(c->by_name, (size_t)c->n, sizeof *c->by_name, by_name, c->tensors);
    for (int i = 1; i < c->n; i++) {
        const StTensor *a = &c->tensors[c->by_name[i - 1]], *b = &c->tensors[c->by_name[i]];
        if (strcmp(a->name, b->name) != 0) continue;
        if (a->file == b->file) return mhar_fail("%s: tensor '%.120s' appears twice in the header", st_path(c, a), a->name);
        return mhar_fail("%s: tensor '%.120s' is in two shards, %s and %s", c->origin, a->name, st_path(c, a),
                         st_path(c, b));
    }
    return MHAR_OK;
}

const StTensor *st_find(const StCheckpoint *c, const char *name) {
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, k = strcmp(c->tensors[c->by_name[mid]].name, name);
        if (k == 0) return &c->tensors[c->by_name[mid]];
        if (k < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

// The entries of file `fi` appended to c->tensors.
static int add_tensors(StCheckpoint *c, int fi) {
    const StFile *f = &c->files[fi];
    int n = 0;
    for (const cJSON *e = f->header->child; e; e = e->next) n++;
    StTensor *t = realloc(c->tensors, ((size_t)c->n + (size_t)n + 1) * sizeof *t);
    if (!t) return mhar_fail("%s: out of memory for %d tensors", f->path, n);
    c->tensors = t;
    for (const cJSON *e = f->header->child; e; e = e->next) {
        if (!e->string) return mhar_fail("%s: header entry without a name", f->path);
        if (strcmp(e->string, "__metadata__") == 0) continue;
        if (!cJSON_IsObject(e))
            return mhar_fail("%s: tensor '%.120s': header entry is not an object", f->path, e->string);
        c->tensors[c->n++] = (StTensor){.name = e->string, .file = fi, .entry = e};
    }
    return MHAR_OK;
}

static int open_file(StCheckpoint *c, const char *path) {
    StFile *f = &c->files[c->n_files];
    memset(f, 0, sizeof *f);
    if (copy_str(f->path, sizeof f->path, path)) return mhar_fail("%.80s...: path too long", path);
    c->n_files++; // st_close releases what is opened, even half
    if (map_file(f) || parse_header(f)) return MHAR_ERR;
    return add_tensors(c, c->n_files - 1);
}

int st_open(StCheckpoint *c, const char *path) {
    memset(c, 0, sizeof *c);
    if (copy_str(c->origin, sizeof c->origin, path)) return mhar_fail("%.80s...: path too long", path);
    c->files = calloc(1, sizeof *c->files);
    if (!c->files) return mhar_fail("%s: out of memory", path);
    if (open_file(c, path)) return MHAR_ERR;
    return index_names(c);
}

void st_close(StCheckpoint *c) {
    for (int i = 0; i < c->n_files; i++) {
        if (c->files[i].map) munmap((void *)c->files[i].map, c->files[i].size);
        cJSON_Delete(c->files[i].header);
    }
    free(c->files);
    free(c->tensors);
    free(c->by_name);
    memset(c, 0, sizeof *c);
}

// ---- an index and its shards ----

// A shard is named by a plain file name beside the index: no directories,
// so an index cannot point outside its checkpoint.
static int shard_name_ok(const char *s) {
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The distinct shard names of the weight map, in sorted order.
static int shard_names(const char *index, const cJSON *map, const char ***names, int *n) {
    int count = cJSON_GetArraySize(map);
    const char **v = malloc(((size_t)count + 1) * sizeof *v);
    if (!v) return mhar_fail("%s: out of memory", index);
    int k = 0;
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
            free(v);
            return mhar_fail("%s: weight_map entry '%.120s' is not the name of a file beside the index", index,
                             e->string ? e->string : "?");
        }
        v[k++] = e->valuestring;
    }
    qsort(v, (size_t)k, sizeof *v, by_string);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || strcmp(v[u - 1], v[i]) != 0) v[u++] = v[i];
    *names = v;
    *n = u;
    return MHAR_OK;
}

// Each tensor where the index says, and each mapped tensor in its shard.
static int check_weight_map(const StCheckpoint *c, const cJSON *map) {
    for (int i = 0; i < c->n; i++) {
        const StTensor *x = &c->tensors[i];
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(map, x->name);
        const char *base = strrchr(st_path(c, x), '/') ? strrchr(st_path(c, x), '/') + 1 : st_path(c, x);
        if (!want)
            return mhar_fail("%s: tensor '%.120s' is not in the index %s", st_path(c, x), x->name, c->origin);
        if (strcmp(want->valuestring, base) != 0)
            return mhar_fail("%s: tensor '%.120s' is mapped to %s but lies in %s", c->origin, x->name,
                             want->valuestring, st_path(c, x));
    }
    for (const cJSON *e = map->child; e; e = e->next)
        if (!st_find(c, e->string))
            return mhar_fail("%s: tensor '%.120s' is mapped to %s, which lacks it", c->origin, e->string,
                             e->valuestring);
    return MHAR_OK;
}

static int open_shards(StCheckpoint *c, const char *index, const cJSON *map) {
    const char **names = NULL;
    int n = 0;
    if (shard_names(index, map, &names, &n)) return MHAR_ERR;
    char dir[MHAR_PATH_MAX] = ".", path[MHAR_PATH_MAX];
    const char *slash = strrchr(index, '/');
    int rc = MHAR_OK;
    if (slash == index) strcpy(dir, "/");
    else if (slash) rc = path_format(dir, sizeof dir, "%.*s", (int)(slash - index), index);
    c->files = rc ? NULL : calloc((size_t)n + 1, sizeof *c->files);
    if (!rc && !c->files) rc = mhar_fail("%s: out of memory", index);
    for (int i = 0; !rc && i < n; i++) {
        rc = path_join(path, sizeof path, dir, names[i]);
        if (!rc && !path_is_file(path))
            rc = mhar_fail("%s: shard %s named by the index is missing (%s)", index, names[i], path);
        if (!rc) rc = open_file(c, path);
    }
    free(names);
    return rc;
}

int st_open_index(StCheckpoint *c, const char *index) {
    memset(c, 0, sizeof *c);
    if (copy_str(c->origin, sizeof c->origin, index)) return mhar_fail("%.80s...: path too long", index);
    cJSON *root = NULL;
    if (json_load(index, &root)) return MHAR_ERR;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = MHAR_OK;
    if (!cJSON_IsObject(root) || !cJSON_IsObject(map) || !map->child)
        rc = mhar_fail("%s: not a safetensors index: no \"weight_map\" object naming tensors", index);
    if (!rc) rc = open_shards(c, index, map);
    if (!rc) rc = index_names(c);
    if (!rc) rc = check_weight_map(c, map);
    cJSON_Delete(root);
    return rc;
}

int st_open_dir(StCheckpoint *c, const char *dir) {
    char single[MHAR_PATH_MAX], index[MHAR_PATH_MAX];
    memset(c, 0, sizeof *c);
    if (path_join(single, sizeof single, dir, ST_SINGLE) || path_join(index, sizeof index, dir, ST_INDEX))
        return MHAR_ERR;
    int has_single = path_is_file(single), has_index = path_is_file(index);
    if (has_single && has_index)
        return mhar_fail("%s: both %s and %s are there; which one holds the weights is ambiguous", dir, ST_SINGLE,
                         ST_INDEX);
    if (has_single) return st_open(c, single);
    if (has_index) return st_open_index(c, index);
    return mhar_fail("%s: neither %s nor %s (mhar reads safetensors checkpoints only)", dir, ST_SINGLE, ST_INDEX);
}

// ---- one entry against the parameter it fills ----

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
    for (int d = 0; d < p->ndim && n < cap; d++) n += (size_t)snprintf(out + n, cap - n, d ? ", %d" : "%d", p->shape[d]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static void format_json_shape(char *out, size_t cap, const cJSON *shape) {
    if (!cJSON_IsArray(shape)) {
        snprintf(out, cap, "%s", shape ? "(not an array)" : "(missing)");
        return;
    }
    size_t n = (size_t)snprintf(out, cap, "[");
    int d = 0;
    for (const cJSON *it = shape->child; it && n < cap; it = it->next, d++) {
        const char *sep = d ? ", " : "";
        if (cJSON_IsNumber(it)) n += (size_t)snprintf(out + n, cap - n, "%s%.17g", sep, it->valuedouble);
        else n += (size_t)snprintf(out + n, cap - n, "%s?", sep);
    }
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static void format_dtypes(char *out, size_t cap, unsigned dtypes) {
    size_t n = 0;
    out[0] = '\0';
    for (int t = 0; t < DTYPE_COUNT && n < cap; t++)
        if (dtypes & DTYPE_BIT(t)) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", dtype_st_name((Dtype)t));
}

static int check_dtype(const char *path, const char *name, const cJSON *e, unsigned dtypes, Dtype *dt) {
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dtype)) return mhar_fail("%s: tensor '%s': dtype missing or not a string", path, name);
    if (dtype_from_st_name(dtype->valuestring, dt) == MHAR_OK && (dtypes & DTYPE_BIT(*dt))) return MHAR_OK;
    char want[64];
    format_dtypes(want, sizeof want, dtypes);
    return mhar_fail("%s: tensor '%s': dtype %.20s, expected %s%s", path, name, dtype->valuestring,
                     strchr(want, ',') ? "one of " : "", want);
}

static int check_shape(const char *path, const ParamInfo *p, const cJSON *shape) {
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
    return mhar_fail("%s: tensor '%s': shape %s in file, expected %s", path, p->name, got, want);
}

static int check_offsets(const StFile *f, const ParamInfo *p, const cJSON *offs, Dtype dt, uint64_t *begin) {
    uint64_t a, b, data = f->size - f->data_start;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &a) ||
        !json_uint(offs->child->next, &b) || b < a)
        return mhar_fail("%s: tensor '%s': data_offsets is not a pair [begin, end] of "
                         "non-negative integers with begin <= end", f->path, p->name);
    uint64_t want = (uint64_t)p->numel * dtype_size(dt);
    if (b - a != want)
        return mhar_fail("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                         " bytes, expected %" PRIu64 " (%zu %s values)", f->path, p->name, a, b, b - a, want,
                         p->numel, dtype_st_name(dt));
    if (b > data)
        return mhar_fail("%s: truncated: tensor '%s' ends at data byte %" PRIu64
                         " but the data section holds only %" PRIu64 " bytes (file size %zu)", f->path, p->name, b,
                         data, f->size);
    *begin = a;
    return MHAR_OK;
}

// dtype, shape, offsets; the format and start of the data on success.
static int parse_entry(const StCheckpoint *c, const StTensor *x, const ParamInfo *p, unsigned dtypes, Dtype *dt,
                       const unsigned char **data) {
    const StFile *f = &c->files[x->file];
    uint64_t begin = 0;
    if (check_dtype(f->path, p->name, x->entry, dtypes, dt) ||
        check_shape(f->path, p, cJSON_GetObjectItemCaseSensitive(x->entry, "shape")) ||
        check_offsets(f, p, cJSON_GetObjectItemCaseSensitive(x->entry, "data_offsets"), *dt, &begin))
        return MHAR_ERR;
    *data = f->map + f->data_start + begin;
    return MHAR_OK;
}

int st_check_tensor(const StCheckpoint *c, const StTensor *x, const ParamInfo *p, unsigned dtypes) {
    Dtype dt;
    const unsigned char *data;
    return parse_entry(c, x, p, dtypes, &dt, &data);
}

int st_check(const StCheckpoint *c, const ParamTable *t, unsigned dtypes,
             int (*tolerate)(const char *name, void *arg), void *arg) {
    for (int i = 0; i < c->n; i++) { // file order: the first problem a reader of the file would meet
        const StTensor *x = &c->tensors[i];
        int k = ptable_find(t, x->name);
        if (k >= 0) {
            if (st_check_tensor(c, x, &t->p[k], dtypes)) return MHAR_ERR;
        } else if (!tolerate || !tolerate(x->name, arg)) {
            return mhar_fail("%s: tensor '%.120s' is in the file but not in the model (unexpected tensor)",
                             st_path(c, x), x->name);
        }
    }
    for (int i = 0; i < t->n; i++)
        if (!st_find(c, t->p[i].name))
            return mhar_fail("%s: tensor '%s' is missing from the %s", c->origin, t->p[i].name,
                             c->n_files > 1 ? "checkpoint" : "file");
    return MHAR_OK;
}

void st_read(const StCheckpoint *c, const StTensor *x, const ParamInfo *p, float *dst) {
    Dtype dt;
    const unsigned char *data;
    if (parse_entry(c, x, p, DTYPES_FLOAT, &dt, &data) == MHAR_OK) dtype_to_f32(dt, data, dst, p->numel);
}

void st_read_table(const StCheckpoint *c, const ParamTable *t, float *buf) {
    for (int i = 0; i < t->n; i++) st_read(c, st_find(c, t->p[i].name), &t->p[i], buf + t->p[i].offset);
}
