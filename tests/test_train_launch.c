// train_launch (train/launch.h), what `mhar train` runs once its flags are
// parsed: a fresh run whose token file fails to load reports it and frees
// nothing it did not allocate (issue 15 point 7: the Model and AdamW were
// freed uninitialised; the stack is filled with garbage first so such a free
// crashes), the refusals of a fresh run and of a resume, a short run, and its
// resume with a flag that must agree.
#include "check.h"
#include "testfiles.h"
#include "data/synth.h"
#include "data/tokens.h"
#include "train/checkpoint.h"
#include "train/launch.h"
#include "util/common.h"

#include <string.h>
#include <unistd.h>

// Fill the stack below this frame with non-zero bytes: an uninitialised
// pointer of the next call's frame is then garbage, not a lucky NULL.
__attribute__((noinline)) static void poison_stack(void) {
    volatile unsigned char junk[1 << 17];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = 0xA5;
}

static TrainLaunch launch;   // static: RunOptions holds paths

static void fresh(const char *out, const char *train, const char *val) {
    memset(&launch, 0, sizeof launch);
    launch.out = out;
    run_options_default(&launch.opt);
    snprintf(launch.opt.train, sizeof launch.opt.train, "%s", train);
    snprintf(launch.opt.val, sizeof launch.opt.val, "%s", val);
    launch.opt.steps = 4;
    launch.opt.batch = 2;
    launch.opt.seq = 16;
    launch.opt.eval_every = 2;
    launch.opt.eval_batches = 1;
    run_options_finish(&launch.opt);
}

static void write_tokens(const char *path, size_t n, uint64_t seed) {
    int *t = malloc(sizeof(int) * n);
    if (!t || synth_tokens(t, n, 64, "pattern", seed) || tokens_save(path, t, n, 64)) { perror(path); exit(2); }
    free(t);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_train_launch.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    char train[600], val[600], trunc[600];
    snprintf(train, sizeof train, "%s", tpath("train.bin"));
    snprintf(val, sizeof val, "%s", tpath("val.bin"));
    snprintf(trunc, sizeof trunc, "%s", tpath("trunc.bin"));
    write_tokens(train, 4000, 1);
    write_tokens(val, 1000, 2);
    FILE *f = fopen(train, "rb");
    char head[600];
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    write_bytes(trunc, head, got);

    // a fresh run, its training token file truncated
    fresh(tpath("bad"), trunc, val);
    poison_stack();
    int rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "trunc.bin") && has(mhar_error(), "truncated"),
          "fresh_run_bad_token_file_clean_error", "rc %d: %s", rc, mhar_error());
    fresh(tpath("bad2"), train, tpath("missing.bin"));
    poison_stack();
    rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "missing.bin"), "fresh_run_missing_val_file_clean_error", "rc %d: %s",
          rc, mhar_error());

    fresh(tpath("half"), train, "");
    rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "give both --train and --val"), "fresh_run_needs_both_files",
          "rc %d: %s", rc, mhar_error());
    fresh(tpath("none"), train, val);
    launch.resume = 1;
    rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "no checkpoint to resume from"), "resume_needs_checkpoint",
          "rc %d: %s", rc, mhar_error());

    // a short run; then the same directory again, and a resume whose batch differs
    fresh(tpath("run"), train, val);
    launch.stop_at = 2;
    rc = train_launch(&launch);
    TrainState st;
    int rc2 = rc ? rc : checkpoint_load_state(tpath("run"), &st);
    CHECK(rc == MHAR_OK && rc2 == MHAR_OK && st.step == 2 && st.opt.steps == 4 && st.opt.train[0] == '/',
          "short_run_stops_at", "rc %d %d: %s", rc, rc2, mhar_error());
    fresh(tpath("run"), train, val);
    rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "already holds a run"), "fresh_run_refuses_existing", "rc %d: %s", rc,
          mhar_error());
    fresh(tpath("run"), "", "");
    launch.resume = 1;
    launch.opt.batch = 4;
    launch.given[run_option_find("batch") - run_option_at(0)] = 1;
    rc = train_launch(&launch);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "--batch 4 differs"), "resume_batch_must_agree", "rc %d: %s", rc,
          mhar_error());
    fresh(tpath("run"), "", "");
    launch.resume = 1;
    rc = train_launch(&launch);
    rc2 = rc ? rc : checkpoint_load_state(tpath("run"), &st);
    CHECK(rc == MHAR_OK && rc2 == MHAR_OK && st.step == 4, "resume_finishes", "rc %d: %s", rc, mhar_error());

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    CHECK_EXIT();
}
