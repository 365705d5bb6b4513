// mhar export (hf_export.h): refuse what cannot be written faithfully, then
// write the directory in one piece.
#include "hf_export.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/atomic.h"
#include "../io/safetensors.h"
#include "../model/model.h"
#include "../util/dir.h"
#include "../util/json.h"

#define INDEX_NAME "model.safetensors.index.json"

// ---- what is copied ----

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The files a Hugging Face model directory carries besides config and
// weights: tokenizer, generation settings, remote code.
static int hf_facing(const char *name) {
    static const char *const exact[] = {"special_tokens_map.json", "added_tokens.json", "generation_config.json",
                                        "chat_template.jinja"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (strcmp(name, exact[i]) == 0) return 1;
    return (strncmp(name, "tokenizer", 9) == 0 && ends_with(name, ".json")) || ends_with(name, ".py");
}

static int copy_hf_files(const char *run, const char *tmp, int *copied) {
    DIR *d = opendir(run);
    if (!d) return mhar_fail("%s: cannot read: %s", run, strerror(errno));
    char src[MHAR_PATH_MAX], dst[MHAR_PATH_MAX];
    int rc = MHAR_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        struct stat st;
        if (!hf_facing(e->d_name)) continue;
        if (path_join(src, sizeof src, run, e->d_name) || path_join(dst, sizeof dst, tmp, e->d_name)) {
            rc = MHAR_ERR;
            break;
        }
        if (lstat(src, &st) != 0 || !S_ISREG(st.st_mode)) continue; // links and the like stay behind
        rc = atomic_copy_file(src, dst);
        if (!rc) (*copied)++;
    }
    closedir(d);
    return rc;
}

// ---- config ----

// The run's config.json with the export format named; everything else kept.
static int write_config(const char *run, const char *tmp, Dtype dt) {
    char path[MHAR_PATH_MAX];
    cJSON *root = NULL;
    if (path_join(path, sizeof path, run, "config.json") || json_load(path, &root)) return MHAR_ERR;
    const char *name = dtype_torch_name(dt);
    int rc = cJSON_IsObject(root) ? MHAR_OK : mhar_fail("%s: not a JSON object", path);
    int any = 0;
    for (int k = 0; !rc && k < 2; k++) {
        const char *key = k ? "dtype" : "torch_dtype";
        if (!cJSON_HasObjectItem(root, key)) continue;
        any = 1;
        if (!cJSON_ReplaceItemInObjectCaseSensitive(root, key, cJSON_CreateString(name)))
            rc = mhar_fail("%s: out of memory", path);
    }
    if (!rc && !any && !cJSON_AddStringToObject(root, "torch_dtype", name)) rc = mhar_fail("%s: out of memory", path);
    char *text = rc ? NULL : cJSON_Print(root);
    if (!rc && !text) rc = mhar_fail("%s: out of memory", path);
    size_t n = text ? strlen(text) : 0;
    char *line = rc ? NULL : malloc(n + 1); // the text and a final newline, as config_save writes
    if (!rc && !line) rc = mhar_fail("%s: out of memory", path);
    if (!rc) {
        memcpy(line, text, n);
        line[n] = '\n';
        rc = path_join(path, sizeof path, tmp, "config.json");
    }
    if (!rc) rc = atomic_write_file(path, line, n + 1);
    free(line);
    cJSON_free(text);
    cJSON_Delete(root);
    return rc;
}

// ---- weights ----

static int check_range(const Model *m, Dtype dt, const char *run) {
    for (int i = 0; i < m->table.n; i++) {
        const ParamInfo *p = &m->table.p[i];
        const float *x = m->params + p->offset;
        size_t k = dtype_overflow(dt, x, p->numel);
        if (k < p->numel)
            return mhar_fail("%s: tensor '%s' holds %g at flat index %zu, beyond the range of %s: refusing to write it "
                             "as infinity (export as bf16 or f32)", run, p->name, (double)x[k], k, dtype_torch_name(dt));
    }
    return MHAR_OK;
}

// Consecutive tensors per shard, a new shard when the next would pass the
// size (a tensor larger than it gets a shard alone). first[s]: the first
// tensor of shard s; first[n] = table size.
static int plan_shards(const ParamTable *t, Dtype dt, uint64_t limit, int *first, int *n) {
    uint64_t fill = 0;
    int s = 0;
    first[0] = 0;
    for (int i = 0; i < t->n; i++) {
        uint64_t b = (uint64_t)t->p[i].numel * dtype_size(dt);
        if (fill > 0 && fill + b > limit) {
            if (++s >= HF_EXPORT_MAX_SHARDS)
                return mhar_fail("more than %d shards of at most %" PRIu64 " bytes: choose a larger --shard-size",
                                 HF_EXPORT_MAX_SHARDS, limit);
            first[s] = i;
            fill = 0;
        }
        fill += b;
    }
    first[++s] = t->n;
    *n = s;
    return MHAR_OK;
}

static int write_index(const char *tmp, const ParamTable *t, const int *first, int n, uint64_t total) {
    char path[MHAR_PATH_MAX], name[64];
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    int ok = root && meta && map && cJSON_AddNumberToObject(meta, "total_size", (double)total);
    for (int s = 0; ok && s < n; s++) {
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n);
        for (int i = first[s]; ok && i < first[s + 1]; i++) ok = cJSON_AddStringToObject(map, t->p[i].name, name) != NULL;
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    int rc = text ? path_join(path, sizeof path, tmp, INDEX_NAME) : mhar_fail("%s: out of memory", INDEX_NAME);
    if (!rc) rc = atomic_write_file(path, text, strlen(text));
    cJSON_free(text);
    cJSON_Delete(root);
    return rc;
}

static int write_weights(const char *tmp, const Model *m, const HfExportOptions *o, HfExportInfo *info) {
    const ParamTable *t = &m->table;
    int *first = malloc(((size_t)t->n + 2) * sizeof *first), n = 0;
    if (!first) return mhar_fail("out of memory planning shards");
    int rc = plan_shards(t, o->dtype, o->shard_bytes, first, &n);
    char path[MHAR_PATH_MAX];
    for (int s = 0; !rc && s < n; s++) {
        rc = n == 1 ? path_join(path, sizeof path, tmp, "model.safetensors")
                    : path_format(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", tmp, s + 1, n);
        if (!rc) rc = safetensors_save_range(path, t, first[s], first[s + 1] - first[s], m->params, o->dtype);
    }
    for (int i = 0; i < t->n; i++) {
        info->params += t->p[i].numel;
        info->bytes += (uint64_t)t->p[i].numel * dtype_size(o->dtype);
    }
    if (!rc && n > 1) rc = write_index(tmp, t, first, n, info->bytes);
    info->n_shards = n;
    free(first);
    return rc;
}

int hf_export(const char *run, const char *out, const HfExportOptions *o, HfExportInfo *info) {
    memset(info, 0, sizeof *info);
    if (o->shard_bytes == 0) return mhar_fail("--shard-size must be at least one byte");
    if (dir_check_new(out)) return MHAR_ERR;
    Model m = {0};
    char tmp[MHAR_PATH_MAX];
    int rc = model_load(&m, run);
    if (!rc) rc = check_range(&m, o->dtype, run);
    if (!rc) rc = dir_stage(out, tmp, sizeof tmp);
    if (!rc) {
        rc = write_config(run, tmp, o->dtype);
        if (!rc) rc = write_weights(tmp, &m, o, info);
        if (!rc) rc = copy_hf_files(run, tmp, &info->files_copied);
        rc = rc ? (dir_discard(tmp), MHAR_ERR) : dir_publish(tmp, out);
    }
    model_free(&m);
    return rc;
}

int hf_parse_size(const char *text, uint64_t *bytes) {
    static const struct { const char *unit; uint64_t scale; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull}, {"TB", 1000000000000ull},
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    };
    char *end;
    errno = 0;
    if (!text[0] || text[0] < '0' || text[0] > '9') return mhar_fail("size '%.40s' is not a number of bytes", text);
    unsigned long long v = strtoull(text, &end, 10);
    for (size_t i = 0; errno == 0 && i < sizeof units / sizeof *units; i++) {
        if (strcmp(end, units[i].unit) != 0) continue;
        if (v > UINT64_MAX / units[i].scale) break;
        *bytes = v * units[i].scale;
        return MHAR_OK;
    }
    return mhar_fail("size '%.40s' is not a number of bytes with an optional unit (KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                     text);
}
