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
#include "../model/hf_remote.h"
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
    run_options_to_json(&st->opt, RUN_STATE, j);
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
    run_options_default(&st->opt);
    // progress counters
    double v[6];
    const char *keys[6] = {"step", "data_epoch", "data_pos", "bad_steps", "optimizer_step", "tokens_seen"};
    const double hi[6] = {1e15, 1e15, 1e15, 1e15, 1e15, 1e30};
    int rc = MHAR_OK;
    for (int i = 0; i < 6 && rc == MHAR_OK; i++) rc = json_get_double(j, path, keys[i], 1, 0, hi[i], &v[i]);
    if (rc == MHAR_OK) rc = run_options_from_json(j, RUN_STATE, path, &st->opt);
    cJSON_Delete(j);
    if (rc) return rc;
    st->step = (long)v[0]; st->data_epoch = (long)v[1]; st->data_pos = (long)v[2];
    st->bad_steps = (long)v[3]; st->opt_step = (long)v[4]; st->tokens_seen = v[5];
    if (st->step > st->opt.steps) return mhar_fail("%s: inconsistent training state (step %ld of %ld)", path,
                                                   st->step, st->opt.steps);
    return MHAR_OK;
}

// DIR/checkpoint/NAME (hard-)linked as AT/AS, AT a folder of DIR ("" DIR itself).
static int link_into_run(const char *dir, const char *name, const char *at, const char *as) {
    char src[MHAR_PATH_MAX], tmp[MHAR_PATH_MAX], dst[MHAR_PATH_MAX], sub[MHAR_PATH_MAX], rel[300];
    snprintf(rel, sizeof rel, "checkpoint/%.200s", name);
    if (path_join(src, sizeof src, dir, rel)) return MHAR_ERR;
    if (at[0] ? path_join(sub, sizeof sub, dir, at) : copy_str(sub, sizeof sub, dir)) return MHAR_ERR;
    snprintf(rel, sizeof rel, ".%.200s.link", as);
    if (path_join(tmp, sizeof tmp, sub, rel) || path_join(dst, sizeof dst, sub, as)) return MHAR_ERR;
    unlink(tmp);
    if (link(src, tmp) || rename(tmp, dst))
        return mhar_fail("%s: cannot link the checkpoint's %s: %s", dst, name, strerror(errno));
    return MHAR_OK;
}

// The EMA of the weights as a model directory DIR/ema (config.json and
// model.safetensors, linked to the checkpoint's), which eval, sample and
// --init-from load like any run (and transformers: the remote code too).
static int link_ema(const char *dir, const Model *m) {
    char ema[MHAR_PATH_MAX];
    if (path_join(ema, sizeof ema, dir, "ema") || mkdir_p(ema)) return MHAR_ERR;
    if (link_into_run(dir, "ema.safetensors", "ema", "model.safetensors")) return MHAR_ERR;
    for (int i = 0; !config_hf_native(&m->cfg) && i < hf_remote_file_count; i++)
        if (link_into_run(dir, hf_remote_files[i].name, "ema", hf_remote_files[i].name)) return MHAR_ERR;
    if (link_into_run(dir, "config.json", "ema", "config.json")) return MHAR_ERR;
    return fsync_dir(ema);
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
    if (rc == MHAR_OK && opt->ema) {   // in the model's layout: the table names it
        rc = path_join(path, sizeof path, tmp, "ema.safetensors");
        if (rc == MHAR_OK) rc = safetensors_save(path, &m->table, opt->ema);
    }
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
    if (rc == MHAR_OK) rc = link_into_run(dir, "model.safetensors", "", "model.safetensors");
    for (int i = 0; rc == MHAR_OK && !config_hf_native(&m->cfg) && i < hf_remote_file_count; i++)
        rc = link_into_run(dir, hf_remote_files[i].name, "", hf_remote_files[i].name);
    if (rc == MHAR_OK) rc = link_into_run(dir, "config.json", "", "config.json");
    if (rc == MHAR_OK && opt->ema) rc = link_ema(dir, m);
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
    if (st->opt.ema > 0) {
        if (adamw_add_ema(opt, (float)st->opt.ema, NULL) || path_join(path, sizeof path, ck, "ema.safetensors") ||
            safetensors_load(path, &m->table, opt->ema, 0))
            return MHAR_ERR;
    }
    opt->step = st->opt_step;
    return MHAR_OK;
}
