// A run directory's tokenizer files: writing, copying, loading.
#include "run_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/atomic.h"
#include "../util/common.h"
#include "../util/dir.h"
#include "../util/file.h"
#include "../util/json.h"
#include "export.h"

static const char *const copied_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};

int run_tokenizer_present(const char *dir) {
    char path[MHAR_PATH_MAX];
    return !path_join(path, sizeof path, dir, "tokenizer.json") && path_is_file(path);
}

// tokenizer_config.json for b: what AutoTokenizer needs to build a fast
// tokenizer from tokenizer.json alone, and the special tokens mhar's data uses.
static int write_config(const char *dir, const Bpe *b, int model_max_length) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "tokenizer_config.json")) return MHAR_ERR;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "tokenizer_class", "PreTrainedTokenizerFast");
    cJSON_AddNumberToObject(j, "model_max_length", model_max_length);
    int eot = bpe_eot_id(b);
    char *eot_text = NULL;
    if (eot >= 0 && (eot_text = malloc(bpe_token_len(b, eot) + 1))) {
        memcpy(eot_text, bpe_token(b, eot), bpe_token_len(b, eot));
        eot_text[bpe_token_len(b, eot)] = '\0';
    }
    if (eot_text) cJSON_AddStringToObject(j, "eos_token", eot_text);
    else cJSON_AddNullToObject(j, "eos_token");
    free(eot_text);
    cJSON_AddNullToObject(j, "bos_token");
    cJSON_AddNullToObject(j, "pad_token");
    cJSON_AddNullToObject(j, "unk_token");
    cJSON_AddBoolToObject(j, "add_bos_token", 0);
    cJSON_AddBoolToObject(j, "add_eos_token", 0);
    cJSON_AddBoolToObject(j, "clean_up_tokenization_spaces", 0);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return mhar_fail("%s: out of memory printing JSON", path);
    size_t n = strlen(text);
    text[n] = '\n';  // cJSON_Print's buffer ends in its NUL: room for the newline, written without a NUL
    int rc = atomic_write_file(path, text, n + 1);
    cJSON_free(text);
    return rc;
}

int run_tokenizer_save(const char *dir, const Bpe *b, int model_max_length) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "tokenizer.json") || bpe_export_hf(b, path)) return MHAR_ERR;
    return write_config(dir, b, model_max_length);
}

static int copy_file(const char *from, const char *to) {
    char *data = NULL;
    size_t n = 0;
    if (read_file_max(from, SIZE_MAX, &data, &n)) return MHAR_ERR;
    int rc = atomic_write_file(to, data, n);
    free(data);
    return rc;
}

int run_tokenizer_copy(const char *from, const char *to, int model_max_length) {
    if (!run_tokenizer_present(from)) return mhar_fail("%s: no tokenizer.json to copy", from);
    int have_config = 0;
    for (size_t i = 0; i < sizeof copied_files / sizeof copied_files[0]; i++) {
        char src[MHAR_PATH_MAX], dst[MHAR_PATH_MAX];
        if (path_join(src, sizeof src, from, copied_files[i]) || path_join(dst, sizeof dst, to, copied_files[i]))
            return MHAR_ERR;
        if (!path_is_file(src)) continue;
        if (copy_file(src, dst)) return MHAR_ERR;
        have_config |= i == 1;
    }
    if (have_config) return MHAR_OK;
    Bpe b;
    char src[MHAR_PATH_MAX];
    if (path_join(src, sizeof src, from, "tokenizer.json") || bpe_import_hf(src, &b)) return MHAR_ERR;
    int rc = write_config(to, &b, model_max_length);
    bpe_free(&b);
    return rc;
}

// A special token named in tokenizer_config.json: a string, an AddedToken
// object {"content": ...}, or null / absent (-1).
static int config_token(const Bpe *b, const cJSON *cfg, const char *file, const char *key, int *id) {
    *id = -1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!v || cJSON_IsNull(v)) return MHAR_OK;
    if (!cJSON_IsString(v)) return mhar_fail("%s: %s is neither a string nor null", file, key);
    const char *s = v->valuestring;
    *id = bpe_special_id(b, s);
    if (*id < 0) *id = bpe_token_id(b, (const unsigned char *)s, strlen(s));
    if (*id < 0) return mhar_fail("%s: %s '%.40s' is not a token of tokenizer.json", file, key, s);
    return MHAR_OK;
}

int run_tokenizer_load(const char *dir, RunTokenizer *t) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "tokenizer.json")) return MHAR_ERR;
    if (!path_is_file(path))
        return mhar_fail("%s has no tokenizer (tokenizer.json): it was trained on token files without a "
                         "tokenizer recorded beside them (e.g. mhar data synth)", dir);
    if (bpe_import_hf(path, &t->bpe)) return MHAR_ERR;
    if (path_join(path, sizeof path, dir, "tokenizer_config.json")) goto fail;
    if (!path_is_file(path)) return MHAR_OK;
    cJSON *cfg;
    if (json_load(path, &cfg)) goto fail;
    int rc = cJSON_IsObject(cfg) ? MHAR_OK : mhar_fail("%s: not a JSON object", path);
    if (!rc) rc = config_token(&t->bpe, cfg, path, "bos_token", &t->bos_id);
    if (!rc) rc = config_token(&t->bpe, cfg, path, "eos_token", &t->eos_id);
    cJSON_Delete(cfg);
    if (!rc) return MHAR_OK;
fail:
    bpe_free(&t->bpe);
    return MHAR_ERR;
}

void run_tokenizer_free(RunTokenizer *t) {
    bpe_free(&t->bpe);
}

int run_tokenizer_eot(const RunTokenizer *t) {
    return t->eos_id >= 0 ? t->eos_id : bpe_eot_id(&t->bpe);
}

int run_tokenizer_prefix(const RunTokenizer *t) {
    return t->bos_id >= 0 ? t->bos_id : run_tokenizer_eot(t);
}

int tokenizer_load_file(const char *path, Bpe *b) {
    // A JSON object is a tokenizer.json; anything else is read as a .bpe
    // file, whose loader names what is wrong with it (bad magic, truncated).
    FILE *f = fopen(path, "rb");
    int c = ' ';
    while (f && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) c = fgetc(f);
    if (f) fclose(f);
    return c == '{' ? bpe_import_hf(path, b) : bpe_load(path, b);
}

int tokenizer_beside(const char *token_file, char *out, size_t cap) {
    char dir[MHAR_PATH_MAX];
    if (copy_str(dir, sizeof dir, token_file)) return mhar_fail("%s: path too long", token_file);
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir] = '\0';  // "/x.bin" -> "/"
    else copy_str(dir, sizeof dir, ".");
    static const char *const names[] = {"tokenizer.bpe", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        if (path_join(out, cap, dir, names[i])) return MHAR_ERR;
        if (path_is_file(out)) return 1;
    }
    return 0;
}
