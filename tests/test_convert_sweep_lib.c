// The library halves of two commands, called directly (their shell tests,
// test_convert.sh and test_sweep.sh, run them end to end):
//   - convert_to_delta_mh (train/convert.h): a nano baseline becomes a
//     delta_mh model with the registry's default H and min(8, L) blocks whose
//     logits equal the base's bit for bit; a non-baseline run, an H that does
//     not divide the width and a non-empty output are refused, nothing written;
//   - sweep_execute (analysis/sweep.h): a dry run trains nothing and creates
//     no run directory; without a grid, a directory holding none is refused.
#include "check.h"
#include "testfiles.h"
#include "analysis/sweep.h"
#include "data/synth.h"
#include "data/tokens.h"
#include "model/model.h"
#include "residual/residual.h"
#include "train/convert.h"
#include "util/common.h"

#include <sys/stat.h>
#include <unistd.h>

static int logits_equal(const char *a_dir, const char *b_dir) {
    Model a = {0}, b = {0};
    int tokens[2 * 32], same = 0;
    for (int i = 0; i < 64; i++) tokens[i] = (i * 31 + 7) % 64;
    if (!model_load(&a, a_dir) && !model_load(&b, b_dir) && !model_alloc_acts(&a, 2, 32) &&
        !model_alloc_acts(&b, 2, 32)) {
        model_forward(&a, tokens, NULL);
        model_forward(&b, tokens, NULL);
        same = !memcmp(a.logits, b.logits, sizeof(float) * 64 * a.cfg.vocab_size);
    }
    model_free(&a);
    model_free(&b);
    return same;
}

static void test_convert(void) {
    Config c;
    Model base = {0};
    if (config_preset("nano", &c)) { fprintf(stderr, "%s\n", mhar_error()); exit(2); }
    c.vocab_size = 64;
    if (mkdir(tpath("base"), 0755) || model_create(&base, &c)) { perror("base"); exit(2); }
    model_init_weights(&base, 3);
    if (model_save(&base, tpath("base"))) { fprintf(stderr, "%s\n", mhar_error()); exit(2); }
    model_free(&base);

    ConvertInfo info;
    int rc = convert_to_delta_mh(tpath("base"), tpath("conv"), 0, 0, &info);
    int L = c.num_hidden_layers;
    CHECK(rc == MHAR_OK && !strcmp(info.mode, residual_delta_mh.name) && info.heads == residual_delta_mh.default_heads &&
          info.blocks == (L < CONVERT_MAX_DEFAULT_BLOCKS ? L : CONVERT_MAX_DEFAULT_BLOCKS) && info.params_added > 0,
          "convert_defaults_from_registry", "rc %d: %s; H %d N %d", rc, mhar_error(), info.heads, info.blocks);
    CHECK(rc == MHAR_OK && logits_equal(tpath("base"), tpath("conv")), "convert_logits_bit_identical", "differ");
    rc = convert_to_delta_mh(tpath("conv"), tpath("conv2"), 2, 2, &info);
    struct stat sb;
    CHECK(rc == MHAR_ERR && has(mhar_error(), "convert takes a baseline run") && stat(tpath("conv2"), &sb) != 0,
          "convert_refuses_non_baseline", "rc %d: %s", rc, mhar_error());
    rc = convert_to_delta_mh(tpath("base"), tpath("conv3"), 3, 2, &info);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "does not divide") && stat(tpath("conv3"), &sb) != 0,
          "convert_refuses_h_not_dividing", "rc %d: %s", rc, mhar_error());
    rc = convert_to_delta_mh(tpath("base"), tpath("conv"), 2, 2, &info);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "not empty"), "convert_refuses_non_empty_out", "rc %d: %s", rc,
          mhar_error());
}

static void test_sweep(void) {
    int t[3000];
    if (synth_tokens(t, 3000, 64, "pattern", 1) || tokens_save(tpath("train.bin"), t, 3000, 64) ||
        tokens_save(tpath("val.bin"), t, 500, 64)) { fprintf(stderr, "%s\n", mhar_error()); exit(2); }
    const char *grid = "{\"preset\": \"nano\", \"train\": \"train.bin\", \"val\": \"val.bin\", \"seeds\": [1, 2],"
                       " \"schemes\": [{\"residual\": \"baseline\"}, {\"residual\": \"mhar\", \"route_heads\": [2, 4]}],"
                       " \"steps\": 20, \"eval_every\": 2}";
    write_bytes(tpath("grid.json"), grid, strlen(grid));
    SweepOptions o = {.grid = tpath("grid.json"), .out = tpath("sw"), .jobs = 1, .dry_run = 1, .commit = "test"};
    SweepOutcome out;
    fflush(stdout);
    int rc = sweep_execute(&o, &out);
    struct stat sb;
    CHECK(rc == MHAR_OK && !out.failed && !out.stop_signal && stat(tpath("sw/runs"), &sb) == 0 &&
          stat(tpath("sw/runs/nano-baseline-s1"), &sb) != 0 && stat(tpath("sw/grid.json"), &sb) != 0,
          "sweep_dry_run_trains_nothing", "rc %d: %s", rc, mhar_error());
    o.grid = NULL;
    rc = sweep_execute(&o, &out);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "holds no grid.json"), "sweep_without_grid_refused", "rc %d: %s", rc,
          mhar_error());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_convert_sweep_lib.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_convert();
    test_sweep();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    CHECK_EXIT();
}
