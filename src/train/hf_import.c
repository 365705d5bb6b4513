// mhar import (hf_import.h): check everything, then write the run directory
// in one piece.
#include "hf_import.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "../io/atomic.h"
#include "../io/safetensors.h"
#include "../model/model.h"
#include "../tokenizer/export.h"
#include "../util/dir.h"
#include "../util/json.h"

#define INV_FREQ_SUFFIX ".rotary_emb.inv_freq"
#define LM_HEAD "lm_head.weight"
#define EMBED "model.embed_tokens.weight"

// Copied verbatim when the tokenizer is imported / always.
static const char *const TOKENIZER_FILES[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
static const char *const OTHER_FILES[] = {"generation_config.json"};

// The config, through the same parser as a run's. When it fails, say which
// model the file describes: "key 'hidden_size' is missing" alone does not
// tell that a GPT-2 checkpoint was given.
static int load_config(const char *dir, Config *cfg) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "config.json")) return MHAR_ERR;
    if (!path_is_file(path)) return mhar_fail("%s: no config.json (not a Hugging Face model directory)", dir);
    if (config_load(path, cfg) == MHAR_OK) return MHAR_OK;
    cJSON *root = json_load_or_null(path);
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "architectures"), 0);
    const char *type = json_string_or(root, "model_type", NULL);
    if (type || cJSON_IsString(arch))
        mhar_fail("%s (model_type '%.40s', architecture %.60s: mhar imports the decoders it implements, "
                  "see mhar import --help)", mhar_error(), type ? type : "?",
                  cJSON_IsString(arch) ? arch->valuestring : "?");
    cJSON_Delete(root);
    return MHAR_ERR;
}

typedef struct {
    int tied, inv_freq;
} Tolerated;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int tolerate(const char *name, void *arg) {
    Tolerated *t = arg;
    if (ends_with(name, INV_FREQ_SUFFIX)) {
        t->inv_freq++;
        return 1;
    }
    return t->tied && strcmp(name, LM_HEAD) == 0;
}

// A tied model's saved lm_head.weight: the embedding's shape and values.
static int check_tied_head(const StCheckpoint *c, const Model *m, const char *config) {
    const StTensor *x = st_find(c, LM_HEAD);
    int e = ptable_find(&m->table, EMBED);
    if (!m->cfg.tie_word_embeddings || !x || e < 0) return MHAR_OK;
    ParamInfo head = m->table.p[e];
    snprintf(head.name, sizeof head.name, "%s", LM_HEAD);
    if (st_check_tensor(c, x, &head, DTYPES_FLOAT)) return MHAR_ERR;
    float *v = mhar_alloc(head.numel * sizeof(float));
    if (!v) return MHAR_ERR;
    st_read(c, x, &head, v);
    int same = memcmp(v, m->params + head.offset, head.numel * sizeof(float)) == 0;
    mhar_free(v);
    if (same) return MHAR_OK;
    return mhar_fail("%s: tensor '%s' differs from '%s', but %s makes the model tied (tie_word_embeddings true, "
                     "or absent: mhar's default), and a tied head is the embedding; if the checkpoint has its own "
                     "head, the config should say tie_word_embeddings false", st_path(c, x), LM_HEAD, EMBED, config);
}

// The weights into m->params: everything checked before the first value is read.
static int load_weights(const char *dir, Model *m, HfImportInfo *info) {
    char config[MHAR_PATH_MAX];
    if (path_join(config, sizeof config, dir, "config.json")) return MHAR_ERR;
    StCheckpoint c;
    Tolerated tol = {.tied = m->cfg.tie_word_embeddings};
    int rc = st_open_dir(&c, dir);
    if (!rc) rc = st_check(&c, &m->table, DTYPES_FLOAT, tolerate, &tol);
    if (!rc) {
        st_read_table(&c, &m->table, m->params);
        rc = check_tied_head(&c, m, config);
    }
    if (!rc) {
        info->n_files = c.n_files;
        info->skipped_buffers = tol.inv_freq;
        info->tied_head_dropped = tol.tied && st_find(&c, LM_HEAD) != NULL;
        for (int i = 0; i < m->table.n; i++) {
            Dtype dt;
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(st_find(&c, m->table.p[i].name)->entry, "dtype");
            if (dtype_from_st_name(d->valuestring, &dt) == MHAR_OK) info->dtypes |= DTYPE_BIT(dt);
        }
    }
    st_close(&c);
    return rc;
}

// tokenizer.json must be one mhar encodes identically, with ids inside the
// embedding; else the run would silently tokenize differently.
static int check_tokenizer(const char *dir, const Config *cfg, int *vocab) {
    char path[MHAR_PATH_MAX];
    *vocab = 0;
    if (path_join(path, sizeof path, dir, "tokenizer.json")) return MHAR_ERR;
    if (!path_is_file(path)) return MHAR_OK;
    Bpe b;
    if (bpe_import_hf(path, &b))
        return mhar_fail("%s; mhar cannot reproduce this tokenizer exactly (pass --no-tokenizer to import the "
                         "weights only)", mhar_error());
    int v = b.vocab_size;
    bpe_free(&b);
    if (v > cfg->vocab_size)
        return mhar_fail("%s: the tokenizer has %d ids but the model's vocab_size is %d", path, v, cfg->vocab_size);
    *vocab = v;
    return MHAR_OK;
}

static int copy_files(const char *dir, const char *tmp, const char *const *names, int n, int *copied) {
    char src[MHAR_PATH_MAX], dst[MHAR_PATH_MAX];
    for (int i = 0; i < n; i++) {
        if (path_join(src, sizeof src, dir, names[i]) || path_join(dst, sizeof dst, tmp, names[i])) return MHAR_ERR;
        if (!path_is_file(src)) continue;
        if (atomic_copy_file(src, dst)) return MHAR_ERR;
        (*copied)++;
    }
    return MHAR_OK;
}

static int write_run(const char *dir, const char *out, const Model *m, HfImportInfo *info) {
    char tmp[MHAR_PATH_MAX];
    if (dir_stage(out, tmp, sizeof tmp)) return MHAR_ERR;
    int rc = model_save(m, tmp);
    if (!rc && info->tokenizer_vocab)
        rc = copy_files(dir, tmp, TOKENIZER_FILES, sizeof TOKENIZER_FILES / sizeof *TOKENIZER_FILES,
                        &info->files_copied);
    if (!rc) rc = copy_files(dir, tmp, OTHER_FILES, sizeof OTHER_FILES / sizeof *OTHER_FILES, &info->files_copied);
    if (rc) {
        dir_discard(tmp);
        return MHAR_ERR;
    }
    return dir_publish(tmp, out);
}

int hf_import(const char *dir, const char *out, const HfImportOptions *o, HfImportInfo *info) {
    Model m = {0};
    memset(info, 0, sizeof *info);
    int rc = load_config(dir, &info->cfg);
    if (!rc) rc = dir_check_new(out);
    if (!rc && !o->no_tokenizer) rc = check_tokenizer(dir, &info->cfg, &info->tokenizer_vocab);
    if (!rc) rc = model_create(&m, &info->cfg);
    if (!rc) rc = load_weights(dir, &m, info);
    if (!rc) rc = write_run(dir, out, &m, info);
    for (int i = 0; !rc && i < m.table.n; i++) info->params += m.table.p[i].numel;
    model_free(&m); // safe on a model model_create left half-built
    return rc;
}
