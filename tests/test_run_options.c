// The one table of run options (train/run_options.h) and what derives from
// it: defaults, state.json (a checkpoint written before the table, with the
// learning rate at float precision and no max_bad_steps, still loads), the
// resume rules, run.json and the sweep's `mhar train` command lines.
#include "check.h"
#include "testfiles.h"
#include "analysis/grid.h"
#include "train/checkpoint.h"
#include "train/run_options.h"
#include "util/common.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_table(void) {
    int n = run_option_count(), dup = 0, bad_flag = 0, bad_def = 0;
    for (int i = 0; i < n; i++) {
        const RunOption *a = run_option_at(i);
        for (int k = 0; k < i; k++) dup |= !strcmp(a->key, run_option_at(k)->key);
        // the flag is the key with '-' for '_'
        char f[64];
        snprintf(f, sizeof f, "%s", a->key);
        for (char *p = f; *p; p++) if (*p == '_') *p = '-';
        bad_flag |= strcmp(f, a->flag) != 0;
        // a number's default is in its range, unset (0) or derived (-1)
        if (a->type != OPT_TEXT && a->type != OPT_U64 && !(a->def >= a->lo && a->def <= a->hi) && a->def != -1 &&
            !(a->def == 0 && (a->use & RUN_ZERO_UNSET)))
            bad_def = 1;
    }
    CHECK(n > 0 && n <= RUN_OPTIONS_MAX && !dup && !bad_flag && !bad_def, "table_consistent",
          "%d options, duplicate key %d, flag not the key %d, default out of range %d", n, dup, bad_flag, bad_def);
    CHECK(run_option_find("eval_every") == run_option_find("eval-every") && run_option_find("eval_every") &&
          !run_option_find("bogus"), "find_by_key_and_flag", "lookup");
}

static void test_defaults(void) {
    RunOptions o;
    run_options_default(&o);
    CHECK(!strcmp(o.preset, "nano") && o.steps == 1000 && o.batch == 8 && o.seq == 256 && o.accum == 1 &&
          o.lr == 5e-4 && o.seed == 1 && o.eval_every == 100 && o.eval_batches == 20 && o.warmup == -1 &&
          o.save_every == -1 && o.max_bad_steps == TRAIN_MAX_BAD_STEPS && !o.residual[0] && !o.heads &&
          !o.wd_exclude[0] && o.z_loss == 0 && o.ema == 0,
          "defaults_are_mhar_trains", "steps %ld batch %d lr %g", o.steps, o.batch, o.lr);
    run_options_finish(&o);
    CHECK(o.warmup == 50 && o.save_every == 100, "finish_derives_warmup_and_save_every", "warmup %ld save %d",
          o.warmup, o.save_every);
    run_options_default(&o);
    o.eval_every = 0;
    o.steps = 77;
    run_options_finish(&o);
    CHECK(o.eval_every == 77 && o.save_every == 0, "finish_eval_every_0_is_end_only", "eval_every %d save %d",
          o.eval_every, o.save_every);
}

// state.json as mhar wrote it before the table (key order, lr at float
// precision, no max_bad_steps): it must load, and the run's float lr is the same.
static void test_old_state(void) {
    const char *run = tpath("old");
    char ck[600];
    snprintf(ck, sizeof ck, "%s/checkpoint", run);
    if (mkdir(run, 0755) || mkdir(ck, 0755)) { perror(run); exit(2); }
    const char *text =
        "{\n\t\"step\":\t4,\n\t\"steps\":\t8,\n\t\"warmup\":\t0,\n\t\"batch\":\t4,\n\t\"seq\":\t32,\n\t\"accum\":\t1,\n"
        "\t\"eval_every\":\t4,\n\t\"eval_batches\":\t2,\n\t\"save_every\":\t4,\n\t\"lr\":\t0.000500000024,\n"
        "\t\"seed\":\t\"18446744073709551615\",\n\t\"train\":\t\"/x/train.bin\",\n\t\"val\":\t\"/x/val.bin\",\n"
        "\t\"data_epoch\":\t0,\n\t\"data_pos\":\t16,\n\t\"bad_steps\":\t0,\n\t\"optimizer_step\":\t4,\n"
        "\t\"tokens_seen\":\t512\n}";
    char path[700];
    snprintf(path, sizeof path, "%s/state.json", ck);
    write_bytes(path, text, strlen(text));
    TrainState st;
    int rc = checkpoint_load_state(run, &st);
    CHECK(rc == MHAR_OK && st.step == 4 && st.opt.steps == 8 && st.opt.batch == 4 && st.opt.seq == 32 &&
          (float)st.opt.lr == 5e-4f && st.opt.seed == UINT64_MAX && st.opt.max_bad_steps == TRAIN_MAX_BAD_STEPS &&
          !st.opt.wd_exclude[0] && st.opt.z_loss == 0 && st.opt.ema == 0 &&
          !strcmp(st.opt.train, "/x/train.bin") && st.data_pos == 16 && st.opt_step == 4 && st.tokens_seen == 512,
          "old_state_json_loads", "rc %d: %s", rc, mhar_error());
    // out of its option's range: the error names the file, the field and the range
    const char *bad = "{\"step\": 1, \"steps\": 8, \"warmup\": 0, \"batch\": 0, \"seq\": 32, \"accum\": 1, "
                      "\"eval_every\": 4, \"eval_batches\": 2, \"save_every\": 4, \"lr\": 0.001, \"seed\": \"1\", "
                      "\"train\": \"t\", \"val\": \"v\", \"data_epoch\": 0, \"data_pos\": 0, \"bad_steps\": 0, "
                      "\"optimizer_step\": 0, \"tokens_seen\": 0}";
    write_bytes(path, bad, strlen(bad));
    rc = checkpoint_load_state(run, &st);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "state.json") && has(mhar_error(), "'batch' = 0 is outside"),
          "state_field_out_of_range_named", "%s", mhar_error());
}

// Written by checkpoint_save's writer and read back: every option the same.
static void test_state_roundtrip(void) {
    RunOptions o, back;
    run_options_default(&o);
    o.lr = 3e-4;
    o.seed = 123456789012345ULL;
    o.max_bad_steps = 100;
    snprintf(o.wd_exclude, sizeof o.wd_exclude, "embed,norm");
    o.z_loss = 1e-4;
    o.ema = 0.999;
    snprintf(o.train, sizeof o.train, "/a \"quoted\" path/train.bin");
    run_options_finish(&o);
    cJSON *j = cJSON_CreateObject();
    run_options_to_json(&o, RUN_STATE, j);
    char *text = cJSON_Print(j);
    cJSON *k = cJSON_Parse(text);
    run_options_default(&back);
    int rc = run_options_from_json(k, RUN_STATE, "x.json", &back);
    int same = rc == MHAR_OK;
    for (int i = 0; same && i < run_option_count(); i++)
        if (run_option_at(i)->use & RUN_STATE) same = run_option_equal(run_option_at(i), &o, &back);
    CHECK(same && back.lr == 3e-4 && strstr(text, "\"lr\":\t0.0003,") && !cJSON_HasObjectItem(k, "preset") &&
          !strcmp(back.wd_exclude, "embed,norm") && back.z_loss == 1e-4 && back.ema == 0.999,
          "state_options_roundtrip", "rc %d: %s\n%s", rc, mhar_error(), text);
    free(text);
    cJSON_Delete(j);
    cJSON_Delete(k);
}

static void test_resume_rules(void) {
    RunOptions saved, given;
    run_options_default(&saved);
    run_options_default(&given);
    int flags[RUN_OPTIONS_MAX] = {0};
    int i_batch = (int)(run_option_find("batch") - run_option_at(0));
    int i_bad = (int)(run_option_find("max_bad_steps") - run_option_at(0));
    int i_lr = (int)(run_option_find("lr") - run_option_at(0));
    given.batch = 16;
    flags[i_batch] = 1;
    int rc = run_options_resume(&saved, &given, flags);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "--batch 16 differs from the run's saved value 8"),
          "resume_keeps_batch", "%s", mhar_error());
    given.batch = 8;
    given.max_bad_steps = 99;
    flags[i_bad] = 1;
    // the learning rate agrees at the precision training uses it (a float)
    saved.lr = 0.000500000024;
    flags[i_lr] = 1;
    rc = run_options_resume(&saved, &given, flags);
    CHECK(rc == MHAR_OK && saved.max_bad_steps == 99, "resume_may_change_max_bad_steps", "rc %d: %s max_bad %ld",
          rc, mhar_error(), saved.max_bad_steps);
    // the recipe is kept: an EMA or a weight-decay exclusion given again must agree
    int i_ema = (int)(run_option_find("ema") - run_option_at(0));
    int i_wd = (int)(run_option_find("wd-exclude") - run_option_at(0));
    memset(flags, 0, sizeof flags);
    saved.ema = 0.999;
    given.ema = 0.99;
    flags[i_ema] = 1;
    rc = run_options_resume(&saved, &given, flags);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "--ema 0.99 differs from the run's saved value 0.999"),
          "resume_keeps_ema", "%s", mhar_error());
    memset(flags, 0, sizeof flags);
    snprintf(given.wd_exclude, sizeof given.wd_exclude, "all");
    flags[i_wd] = 1;
    rc = run_options_resume(&saved, &given, flags);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "--wd-exclude all differs from the run's saved value"),
          "resume_keeps_wd_exclude", "%s", mhar_error());
}

static void test_sweep_argv(void) {
    SweepRun r;
    memset(&r, 0, sizeof r);
    run_options_default(&r.opt);
    snprintf(r.name, sizeof r.name, "nano-attnres-s1");
    snprintf(r.opt.residual, sizeof r.opt.residual, "attnres");
    r.opt.heads = 1;
    snprintf(r.opt.train, sizeof r.opt.train, "/d/train.bin");
    snprintf(r.opt.val, sizeof r.opt.val, "/d/val.bin");
    run_options_finish(&r.opt);
    char *argv[64], buf[16384], line[4096] = "";
    int rc = sweep_run_args(&r, "/s/runs/x", argv, 64, buf, sizeof buf);
    for (int i = 0; rc == MHAR_OK && argv[i]; i++) {
        strcat(line, argv[i]);
        strcat(line, " ");
    }
    const char *want = "--out /s/runs/x --preset nano --residual attnres --train /d/train.bin --val /d/val.bin "
                       "--steps 1000 --batch 8 --seq 256 --accum 1 --lr 0.0005 --warmup 50 --seed 1 --eval-every 100 "
                       "--eval-batches 20 --save-every 100 ";
    CHECK(rc == MHAR_OK && !strcmp(line, want), "sweep_argv_attnres", "rc %d\n got  %s\n want %s", rc, line, want);
    snprintf(r.opt.residual, sizeof r.opt.residual, "block");
    r.opt.heads = 4;
    r.opt.blocks = 2;
    rc = sweep_run_args(&r, "/s", argv, 64, buf, sizeof buf);
    line[0] = 0;
    for (int i = 0; rc == MHAR_OK && argv[i]; i++) {
        strcat(line, argv[i]);
        strcat(line, " ");
    }
    CHECK(rc == MHAR_OK && has(line, "--residual block --route-heads 4 --route-blocks 2 --train"),
          "sweep_argv_block_heads_blocks", "%s", line);
    rc = sweep_run_args(&r, "/s", argv, 64, buf, 100);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "does not fit"), "sweep_argv_overflow_refused", "rc %d", rc);
    // run.json round trip, and a record of a non-routed run (route_heads 0)
    snprintf(r.opt.residual, sizeof r.opt.residual, "baseline");
    r.opt.heads = r.opt.blocks = 0;
    cJSON *written = sweep_run_to_json(&r);
    char *text = cJSON_Print(written);   // as the file is read: lr is raw text in the written object
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_Delete(written);
    SweepRun back;
    rc = sweep_run_from_json(j, "run.json", &back);
    int same = rc == MHAR_OK && !strcmp(back.name, r.name);
    for (int i = 0; same && i < run_option_count(); i++)
        if (run_option_at(i)->use & RUN_SWEEP) same = run_option_equal(run_option_at(i), &r.opt, &back.opt);
    CHECK(same && cJSON_HasObjectItem(j, "route_heads") && !cJSON_HasObjectItem(j, "max_bad_steps"),
          "run_json_roundtrip", "rc %d: %s", rc, mhar_error());
    cJSON_DeleteItemFromObject(j, "eval_batches");
    rc = sweep_run_from_json(j, "run.json", &back);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "run.json: field 'eval_batches' missing"), "run_json_missing_field",
          "%s", mhar_error());
    cJSON_Delete(j);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_run_options.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_table();
    test_defaults();
    test_old_state();
    test_state_roundtrip();
    test_resume_rules();
    test_sweep_argv();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    CHECK_EXIT();
}
