#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/atomic.h"
#include "../io/safetensors.h"
#include "../util/dir.h"
#include "../util/json.h"

// Remove a checkpoint directory (only the files a checkpoint holds, plus
// stray temp files an interrupted write left behind).
static void remove_checkpoint_dir(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    char path[MHAR_PATH_MAX];
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.' && (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0))) continue;
        if (path_join(path, sizeof path, dir, e->d_name) == MHAR_OK) unlink(path);
    }
    closedir(dp);
    rmdir(dir);
}

static char *state_to_json(const TrainState *st) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", st->step);
    cJSON_AddNumberToObject(j, "steps", st->steps);
    cJSON_AddNumberToObject(j, "warmup", st->warmup);
    cJSON_AddNumberToObject(j, "batch", st->batch);
    cJSON_AddNumberToObject(j, "seq", st->seq);
    cJSON_AddNumberToObject(j, "accum", st->accum);
    cJSON_AddNumberToObject(j, "eval_every", st->eval_every);
    cJSON_AddNumberToObject(j, "eval_batches", st->eval_batches);
    cJSON_AddNumberToObject(j, "save_every", st->save_every);
    cJSON_AddNumberToObject(j, "max_bad_steps", st->max_bad_steps);
    char lr[32], seed[32];
    snprintf(lr, sizeof lr, "%.9g", st->lr);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)st->seed);
    cJSON_AddRawToObject(j, "lr", lr);
    cJSON_AddStringToObject(j, "seed", seed);  // a string: u64 does not fit a double
    cJSON_AddStringToObject(j, "train", st->train_path);
    cJSON_AddStringToObject(j, "val", st->val_path);
    cJSON_AddNumberToObject(j, "data_epoch", st->data_epoch);
    cJSON_AddNumberToObject(j, "data_pos", st->data_pos);
    cJSON_AddNumberToObject(j, "bad_steps", st->bad_steps);
    cJSON_AddNumberToObject(j, "optimizer_step", st->opt_step);
    cJSON_AddNumberToObject(j, "tokens_seen", st->tokens_seen);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

static int state_from_json(const char *path, const char *text, TrainState *st) {
    cJSON *j = cJSON_Parse(text);
    if (!j) return mhar_fail("%s: not valid JSON", path);
    memset(st, 0, sizeof *st);
    double v[14];
    const char *keys[14] = {"step", "steps", "warmup", "batch", "seq", "accum", "eval_every",
                            "eval_batches", "save_every", "lr", "data_epoch", "data_pos", "bad_steps", "optimizer_step"};
    // Fields stored as int are capped at 1e9 (the flags' own limit), so a
    // corrupt value never overflows the conversion.
    const double hi[14] = {1e15, 1e15, 1e15, 1 << 24, 1 << 24, 1 << 24, 1e9, 1e9, 1e9, 10, 1e15, 1e15, 1e15, 1e15};
    int rc = MHAR_OK;
    for (int i = 0; i < 14 && rc == MHAR_OK; i++) rc = json_get_double(j, path, keys[i], 1, 0, hi[i], &v[i]);
    // Optional: checkpoints written before --max-bad-steps existed lack it.
    double max_bad = TRAIN_MAX_BAD_STEPS;
    if (rc == MHAR_OK) rc = json_get_double(j, path, "max_bad_steps", 0, 1, 1e9, &max_bad);
    double tokens = 0;
    char seed[32];
    if (rc == MHAR_OK) rc = json_get_double(j, path, "tokens_seen", 1, 0, 1e30, &tokens);
    if (rc == MHAR_OK) rc = json_get_string(j, path, "seed", 1, seed, sizeof seed);
    if (rc == MHAR_OK) rc = json_get_string(j, path, "train", 1, st->train_path, sizeof st->train_path);
    if (rc == MHAR_OK) rc = json_get_string(j, path, "val", 1, st->val_path, sizeof st->val_path);
    cJSON_Delete(j);
    if (rc) return rc;
    st->step = (long)v[0]; st->steps = (long)v[1]; st->warmup = (long)v[2];
    st->batch = (int)v[3]; st->seq = (int)v[4]; st->accum = (int)v[5];
    st->eval_every = (int)v[6]; st->eval_batches = (int)v[7]; st->save_every = (int)v[8];
    st->lr = (float)v[9]; st->data_epoch = (long)v[10]; st->data_pos = (long)v[11];
    st->bad_steps = (long)v[12]; st->opt_step = (long)v[13]; st->tokens_seen = tokens;
    st->max_bad_steps = (long)max_bad;
    char *end;
    st->seed = strtoull(seed, &end, 10);
    if (*end || !seed[0]) return mhar_fail("%s: field 'seed' is not an integer", path);
    if (st->batch < 1 || st->seq < 1 || st->accum < 1 || st->step > st->steps)
        return mhar_fail("%s: inconsistent training state (batch, seq, accum or step)", path);
    return MHAR_OK;
}

static int link_into_run(const char *dir, const char *name) {
    char src[MHAR_PATH_MAX], tmp[MHAR_PATH_MAX], dst[MHAR_PATH_MAX], rel[300];
    snprintf(rel, sizeof rel, "checkpoint/%.200s", name);
    if (path_join(src, sizeof src, dir, rel)) return MHAR_ERR;
    snprintf(rel, sizeof rel, ".%.200s.link", name);
    if (path_join(tmp, sizeof tmp, dir, rel) || path_join(dst, sizeof dst, dir, name)) return MHAR_ERR;
    unlink(tmp);
    if (link(src, tmp) || rename(tmp, dst))
        return mhar_fail("%s: cannot link the checkpoint's %s: %s", dst, name, strerror(errno));
    return MHAR_OK;
}

int checkpoint_save(const char *dir, const Model *m, const AdamW *opt, const TrainState *st) {
    char tmp[MHAR_PATH_MAX], path[MHAR_PATH_MAX], final[MHAR_PATH_MAX];
    if (path_join(tmp, sizeof tmp, dir, ".checkpoint.tmp") || path_join(final, sizeof final, dir, "checkpoint"))
        return MHAR_ERR;
    remove_checkpoint_dir(tmp);  // a stale one from an interrupted save
    if (mkdir(tmp, 0755)) return mhar_fail("%s: cannot create: %s", tmp, strerror(errno));
    int rc = MHAR_OK;
    rc = path_join(path, sizeof path, tmp, "optimizer.safetensors");
    if (rc == MHAR_OK) rc = safetensors_save(path, &opt->moments, opt->state);
    if (rc == MHAR_OK) rc = model_save(m, tmp);
    if (rc == MHAR_OK) {
        char *text = state_to_json(st);
        rc = path_join(path, sizeof path, tmp, "state.json");
        if (rc == MHAR_OK) rc = text ? atomic_write_file(path, text, strlen(text)) : mhar_fail("out of memory");
        free(text);
    }
    if (rc == MHAR_OK) rc = fsync_dir(tmp);
    if (rc == MHAR_OK) {
        struct stat sb;
        if (stat(final, &sb) == 0) {
            if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE))
                rc = mhar_fail("%s: cannot swap in the new checkpoint: %s", final, strerror(errno));
        } else if (rename(tmp, final)) {
            rc = mhar_fail("%s: cannot move the new checkpoint in place: %s", final, strerror(errno));
        }
    }
    if (rc == MHAR_OK) rc = fsync_dir(dir);
    remove_checkpoint_dir(tmp);  // after a swap: the previous checkpoint
    if (rc == MHAR_OK) rc = link_into_run(dir, "model.safetensors");
    if (rc == MHAR_OK) rc = link_into_run(dir, "config.json");
    if (rc == MHAR_OK) rc = fsync_dir(dir);
    return rc;
}

int checkpoint_load_state(const char *dir, TrainState *st) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, dir, "checkpoint/state.json")) return MHAR_ERR;
    char *text;
    size_t n;
    if (read_file(path, &text, &n)) return MHAR_ERR;
    int rc = state_from_json(path, text, st);
    free(text);
    return rc;
}

int checkpoint_load(const char *dir, Model *m, AdamW *opt, TrainState *st) {
    char ck[MHAR_PATH_MAX], path[MHAR_PATH_MAX];
    if (path_join(ck, sizeof ck, dir, "checkpoint")) return MHAR_ERR;
    if (checkpoint_load_state(dir, st)) return MHAR_ERR;
    if (model_load(m, ck)) return MHAR_ERR;
    if (adamw_init(opt, m->ctx, m->table.total)) return MHAR_ERR;
    if (path_join(path, sizeof path, ck, "optimizer.safetensors")) return MHAR_ERR;
    if (safetensors_load(path, &opt->moments, opt->state, 0)) return MHAR_ERR;
    opt->step = st->opt_step;
    return MHAR_OK;
}
