// mhar train: build or resume a run and train it.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "data/tokens.h"
#include "train/train.h"

static const char *usage =
    "usage: mhar train --out DIR [--preset P | --config FILE] [--residual R]\n"
    "                  [--train FILE --val FILE] [--steps N --batch B --seq T ...] [--resume]\n\n"
    "Trains a Qwen3-style decoder. Without --train/--val it builds the default\n"
    "data in DIR/data/ (the Python standard library found on this machine, a\n"
    "BPE tokenizer of 8192 tokens, token shards) and trains on it. --resume\n"
    "continues the run in DIR bit-identically from its last checkpoint.";

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

// The built-in default data of the README's main job: this machine's Python
// standard library as a corpus, a BPE tokenizer of 8192 tokens trained on
// it, and its token shards, all under DIR/data/ (reused when present). The
// steps are the data and tokenizer commands, run as a user would run them.
static int default_data(const char *dir, char *train, char *val, size_t cap) {
    char data_dir[4096], corpus[4200], tok[4200];
    if (path_join(data_dir, sizeof data_dir, dir, "data") || path_join(train, cap, data_dir, "train.bin") ||
        path_join(val, cap, data_dir, "val.bin") || path_join(corpus, sizeof corpus, data_dir, "corpus") ||
        path_join(tok, sizeof tok, data_dir, "tokenizer.bpe"))
        return MHAR_ERR;
    if (access(train, F_OK) == 0 && access(val, F_OK) == 0) return MHAR_OK;
    if (mkdir_p(data_dir)) return mhar_fail("%s: cannot create: %s", data_dir, strerror(errno));
    fprintf(stderr, "no --train given: building the default data in %s (Python standard library,\n"
                    "BPE tokenizer of 8192 tokens, token shards)\n", data_dir);
    char *corpus_cmd[] = {"corpus", "--out", corpus, NULL};
    char *tok_cmd[] = {"train", "--corpus", corpus, "--vocab", "8192", "--out", tok, NULL};
    char *shard_cmd[] = {"tokenize", "--tokenizer", tok, "--corpus", corpus, "--out", data_dir, NULL};
    if (cmd_data(3, corpus_cmd) || cmd_tokenizer(7, tok_cmd) || cmd_data(7, shard_cmd))
        return mhar_fail("building the default data in %s failed (see above)", data_dir);
    return MHAR_OK;
}

typedef struct {
    const char *out, *preset, *config, *residual, *train, *val;
    const char *init_from;
    int route_heads, route_blocks, resume;
    long stop_at;
    TrainState st;
} TrainArgs;

// On --resume the saved options are used; a flag given again must agree.
static int check_resume_flags(const Flag *f, int n, const TrainState *saved, const TrainState *given) {
    struct { const char *flag; double a, b; } nums[] = {
        {"steps", saved->steps, given->steps}, {"batch", saved->batch, given->batch},
        {"seq", saved->seq, given->seq}, {"accum", saved->accum, given->accum},
        {"lr", saved->lr, given->lr}, {"warmup", saved->warmup, given->warmup},
        {"seed", (double)saved->seed, (double)given->seed}, {"eval-every", saved->eval_every, given->eval_every},
        {"eval-batches", saved->eval_batches, given->eval_batches}, {"save-every", saved->save_every, given->save_every},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (args_flag(f, n, nums[i].flag)->given && nums[i].a != nums[i].b)
            return mhar_fail("--%s %g differs from the run's saved value %g (a resumed run keeps its options)",
                             nums[i].flag, nums[i].b, nums[i].a);
    const char *model_flags[] = {"preset", "config", "residual", "route-heads", "route-blocks"};
    for (size_t i = 0; i < 5; i++)
        if (args_flag(f, n, model_flags[i])->given)
            fprintf(stderr, "note: --%s ignored on --resume: the model comes from the checkpoint\n", model_flags[i]);
    return MHAR_OK;
}

static int build_config(const TrainArgs *a, int data_vocab, Config *c) {
    if (a->config) {
        if (config_load(a->config, c)) return MHAR_ERR;
        if (c->vocab_size < data_vocab)
            return mhar_fail("%s: vocab_size %d is smaller than the data's vocabulary %d", a->config,
                             c->vocab_size, data_vocab);
    } else {
        if (config_preset(a->preset, c)) return MHAR_ERR;
        c->vocab_size = data_vocab;
    }
    if (a->residual) snprintf(c->attnres_mode, sizeof c->attnres_mode, "%s", a->residual);
    if (a->route_heads) c->attnres_num_heads = a->route_heads;
    if (a->route_blocks) c->attnres_num_blocks = a->route_blocks;
    if (a->residual && !strcmp(a->residual, "attnres") && !a->route_heads) c->attnres_num_heads = 1;
    if (a->residual && !strcmp(a->residual, "mhar") && !a->route_heads) c->attnres_num_heads = 8;
    return config_validate(c, a->config ? a->config : "command-line model options");
}

static int run(TrainArgs *a, Flag *flags, int n_flags) {
    TrainState *st = &a->st;
    char train_buf[4200], val_buf[4200];
    Model m;
    AdamW opt;
    if (mkdir_p(a->out)) return mhar_fail("%s: cannot create the run directory: %s", a->out, strerror(errno));
    char ck[4300];
    if (path_join(ck, sizeof ck, a->out, "checkpoint/state.json")) return MHAR_ERR;
    int exists = access(ck, F_OK) == 0;
    if (a->resume) {
        TrainState saved;
        if (!exists) return mhar_fail("%s: no checkpoint to resume from", a->out);
        if (checkpoint_load_state(a->out, &saved) || check_resume_flags(flags, n_flags, &saved, st)) return MHAR_ERR;
        long max_bad = st->max_bad_steps;
        if (checkpoint_load(a->out, &m, &opt, st)) return MHAR_ERR;
        // The one option a resume may change: it alters no finite step, and
        // raising it lets a run stopped on non-finite steps go on.
        if (args_flag(flags, n_flags, "max-bad-steps")->given) st->max_bad_steps = max_bad;
        fprintf(stderr, "resuming %s at step %ld of %ld\n", a->out, st->step, st->steps);
    } else {
        if (exists) return mhar_fail("%s already holds a run; use --resume or another --out", a->out);
        if (!a->train != !a->val) return mhar_fail("give both --train and --val (or neither for the built-in data)");
        if (!a->train && default_data(a->out, train_buf, val_buf, sizeof train_buf)) return MHAR_ERR;
        // Absolute paths, so --resume works from any directory.
        const char *tp = a->train ? a->train : train_buf, *vp = a->val ? a->val : val_buf;
        char *t_abs = realpath(tp, NULL), *v_abs = realpath(vp, NULL);
        int bad = copy_str(st->train_path, sizeof st->train_path, t_abs ? t_abs : tp) ||
                  copy_str(st->val_path, sizeof st->val_path, v_abs ? v_abs : vp);
        free(t_abs);
        free(v_abs);
        if (bad) return MHAR_ERR;
    }
    TokenFile train = {0}, val = {0};
    int rc = tokens_load(st->train_path, &train);
    if (!rc) rc = tokens_load(st->val_path, &val);
    if (!rc && !a->resume && a->init_from) {  // e.g. a model made by mhar convert
        rc = model_load(&m, a->init_from);
        if (!rc) rc = model_check_batch(&m.cfg, st->batch, st->seq);
        if (!rc && (train.vocab_size > m.cfg.vocab_size || val.vocab_size > m.cfg.vocab_size))
            rc = mhar_fail("token files have vocabulary %d/%d, the model in %s %d", train.vocab_size,
                           val.vocab_size, a->init_from, m.cfg.vocab_size);
        if (!rc) rc = adamw_init(&opt, m.ctx, m.table.total);
    } else if (!rc && !a->resume) {
        int vocab = train.vocab_size > val.vocab_size ? train.vocab_size : val.vocab_size;
        Config c;
        rc = build_config(a, vocab, &c);
        if (!rc) rc = model_check_batch(&c, st->batch, st->seq);  // before anything is allocated
        if (!rc) rc = model_create(&m, &c);
        if (!rc) { model_init_weights(&m, st->seed); rc = adamw_init(&opt, m.ctx, m.table.total); }
    } else if (!rc && (train.vocab_size > m.cfg.vocab_size || val.vocab_size > m.cfg.vocab_size)) {
        rc = mhar_fail("token files have vocabulary %d/%d, the model %d", train.vocab_size, val.vocab_size,
                       m.cfg.vocab_size);
    }
    if (!rc) rc = model_alloc_acts(&m, st->batch, st->seq);
    if (!rc) {
        double params = 0;
        for (int i = 0; i < m.table.n; i++) params += m.table.p[i].numel;
        fprintf(stderr, "model: %s, %s residual, %.2fM parameters, d %d, %d layers; batch %d x %d x accum %d\n",
                a->init_from ? a->init_from : a->config ? a->config : a->preset, m.cfg.attnres_mode, params / 1e6, m.cfg.hidden_size,
                m.cfg.num_hidden_layers, st->batch, st->seq, st->accum);
        rc = train_run(a->out, &m, &opt, st, &train, &val, a->stop_at);
    }
    if (!a->resume || m.params) model_free(&m);
    adamw_free(&opt);
    tokens_free(&train);
    tokens_free(&val);
    return rc;
}

int cmd_train(int argc, char **argv) {
    TrainArgs a = {.preset = "nano"};
    TrainState *st = &a.st;
    *st = (TrainState){.steps = 1000, .warmup = -1, .batch = 8, .seq = 256, .accum = 1,
                       .eval_every = 100, .eval_batches = 20, .save_every = -1, .lr = 5e-4f, .seed = 1,
                       .max_bad_steps = TRAIN_MAX_BAD_STEPS};
    Flag flags[] = {
        {"out", FLAG_STR, &a.out, "run directory (created)", 0, 0, 0},
        {"preset", FLAG_STR, &a.preset, "nano|micro|mini|100m|350m|1b (default nano)", 0, 0, 0},
        {"config", FLAG_STR, &a.config, "HF-style config.json instead of a preset", 0, 0, 0},
        {"residual", FLAG_STR, &a.residual, "residual scheme (default baseline)", 0, 0, 0},
        {"route-heads", FLAG_INT, &a.route_heads, "routing heads H for mhar/block", 1, 4096, 0},
        {"route-blocks", FLAG_INT, &a.route_blocks, "blocks N for block routing", 1, 1024, 0},
        {"train", FLAG_STR, &a.train, "training token file", 0, 0, 0},
        {"val", FLAG_STR, &a.val, "validation token file", 0, 0, 0},
        {"steps", FLAG_LONG, &st->steps, "optimizer steps (default 1000)", 1, 1e12, 0},
        {"batch", FLAG_INT, &st->batch, "sequences per micro-batch (default 8)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &st->seq, "tokens per sequence (default 256)", 1, 1 << 20, 0},
        {"accum", FLAG_INT, &st->accum, "micro-batches per step (default 1)", 1, 1 << 20, 0},
        {"lr", FLAG_FLOAT, &st->lr, "peak learning rate (default 5e-4)", 1e-12, 10, 0},
        {"warmup", FLAG_LONG, &st->warmup, "warm-up steps (default steps/20)", 0, 1e12, 0},
        {"seed", FLAG_U64, &st->seed, "seed of init and data order (default 1)", 0, 0, 0},
        {"eval-every", FLAG_INT, &st->eval_every, "steps between evaluations (default 100; 0 = end only)", 0, 1e9, 0},
        {"eval-batches", FLAG_INT, &st->eval_batches, "validation batches per evaluation (default 20)", 1, 1e9, 0},
        {"save-every", FLAG_INT, &st->save_every, "steps between checkpoints (default eval-every)", 0, 1e9, 0},
        {"init-from", FLAG_STR, &a.init_from, "start from the model in this run directory (fresh optimizer)", 0, 0, 0},
        {"resume", FLAG_BOOL, &a.resume, "continue the run in --out from its checkpoint", 0, 0, 0},
        {"stop-at", FLAG_LONG, &a.stop_at, "checkpoint and exit after this step (continue with --resume)", 1, 1e12, 0},
        {"max-bad-steps", FLAG_LONG, &st->max_bad_steps,
         "stop after N non-finite steps in a row, none applied (default 5; may change on --resume)", 1, 1e9, 0},
    };
    int n = sizeof flags / sizeof flags[0];
    int r = args_parse(argc, argv, flags, n, usage);
    if (r) return r > 0 ? 0 : 2;
    if (!a.out) { fprintf(stderr, "error: --out DIR is required (see --help)\n"); return 2; }
    if (a.preset && a.config && args_flag(flags, n, "preset")->given) {
        fprintf(stderr, "error: give --preset or --config, not both\n");
        return 2;
    }
    if (a.init_from) {
        const char *model_flags[] = {"preset", "config", "residual", "route-heads", "route-blocks", "resume"};
        for (int i = 0; i < 6; i++)
            if (args_flag(flags, n, model_flags[i])->given) {
                fprintf(stderr, "error: --%s cannot be combined with --init-from: the model comes from %s\n",
                        model_flags[i], a.init_from);
                return 2;
            }
    }
    if (st->warmup < 0) st->warmup = st->steps / 20;
    if (st->save_every < 0) st->save_every = st->eval_every;
    if (st->eval_every == 0) st->eval_every = st->steps < 1000000000 ? (int)st->steps : 1000000000; // end only
    if (run(&a, flags, n)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    return 0;
}
