// mhar train: build or resume a run and train it (src/train/launch.h). The
// run's options and their flags come from the table in src/train/run_options.c.
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dist/comm.h"
#include "train/launch.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar train --out DIR [--preset P | --config FILE] [--residual R]\n"
    "                  [--train FILE --val FILE] [--steps N --batch B --seq T ...] [--resume]\n\n"
    "Trains a Qwen3-style decoder. Without --train/--val it builds the default\n"
    "data in DIR/data/ (the Python standard library found on this machine, a\n"
    "BPE tokenizer of 8192 tokens, token shards) and trains on it. --resume\n"
    "continues the run in DIR bit-identically from its last checkpoint.";

static const FlagType flag_type[] = {
    [OPT_INT] = FLAG_INT, [OPT_LONG] = FLAG_LONG, [OPT_U64] = FLAG_U64, [OPT_REAL] = FLAG_DOUBLE, [OPT_TEXT] = FLAG_STR,
};

int cmd_train(int argc, char **argv) {
    TrainLaunch l = {0};
    RunOptions *o = &l.opt;
    run_options_default(o);
    // --out, the run options, then what this invocation does with them.
    const int n_opt = run_option_count();
    const char *text[RUN_OPTIONS_MAX] = {0};   // a text option's value, copied into o after parsing
    Flag flags[RUN_OPTIONS_MAX + 4] = {{"out", FLAG_STR, &l.out, "run directory (created)", 0, 0, 0}};
    for (int i = 0; i < n_opt; i++) {
        const RunOption *opt = run_option_at(i);
        void *dst = opt->type == OPT_TEXT ? (void *)&text[i] : run_option_field(opt, o);
        flags[1 + i] = (Flag){opt->flag, flag_type[opt->type], dst, opt->help, opt->lo, opt->hi, 0};
    }
    Flag extra[] = {
        {"init-from", FLAG_STR, &l.init_from, "start from the model in this run directory (fresh optimizer)", 0, 0, 0},
        {"resume", FLAG_BOOL, &l.resume, "continue the run in --out from its checkpoint", 0, 0, 0},
        {"stop-at", FLAG_LONG, &l.stop_at, "checkpoint and exit after this step (continue with --resume)", 1, 1e12, 0},
    };
    int n = 1 + n_opt;
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) flags[n++] = extra[i];
    int r = args_parse(argc, argv, flags, n, usage);
    if (r) return r > 0 ? 0 : 2;
    for (int i = 0; i < n_opt; i++) {
        const RunOption *opt = run_option_at(i);
        l.given[i] = flags[1 + i].given;
        if (text[i] && copy_str(run_option_field(opt, o), opt->size, text[i])) {
            fprintf(stderr, "error: --%s: %s\n", opt->flag, mhar_error());
            return 2;
        }
    }
    if (!l.out) { fprintf(stderr, "error: --out DIR is required (see --help)\n"); return 2; }
    if (o->config[0] && args_flag(flags, n, "preset")->given) {
        fprintf(stderr, "error: give --preset or --config, not both\n");
        return 2;
    }
    for (int i = 0; l.init_from && i < n_opt; i++)
        if (l.given[i] && run_option_at(i)->use & RUN_MODEL) {
            fprintf(stderr, "error: --%s cannot be combined with --init-from: the model comes from %s\n",
                    run_option_at(i)->flag, l.init_from);
            return 2;
        }
    if (l.init_from && l.resume) {
        fprintf(stderr, "error: --resume cannot be combined with --init-from: the model comes from %s\n", l.init_from);
        return 2;
    }
    run_options_finish(o);
    if (train_launch(&l)) {
        // Every rank of a job fails with the same message: rank 0 prints it.
        if (comm_world()->rank == 0) fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    return 0;
}
