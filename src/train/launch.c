#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../data/default_data.h"
#include "../data/tokens.h"
#include "../residual/residual.h"
#include "../tokenizer/run_tokenizer.h"
#include "train.h"
#include "../dist/comm.h"
#include "../kernels/ops.h"
#include "../util/dir.h"

// The model of a fresh run: the preset (vocabulary from the data) or the
// config, then the family, the scheme and its H and N as given. A routed
// scheme given without H gets its registry default.
static int build_config(const RunOptions *o, int data_vocab, Config *c) {
    if (o->config[0]) {
        if (config_load(o->config, c)) return MHAR_ERR;
        if (c->vocab_size < data_vocab)
            return mhar_fail("%s: vocab_size %d is smaller than the data's vocabulary %d", o->config,
                             c->vocab_size, data_vocab);
    } else {
        if (config_preset(o->preset, c)) return MHAR_ERR;
        c->vocab_size = data_vocab;
    }
    if (o->family[0]) {
        c->family = config_family_find(o->family);
        if (c->family < 0) return mhar_fail("--family '%s' is unknown (expected %s)", o->family, config_family_names());
    }
    if (o->residual[0]) {
        snprintf(c->attnres_mode, sizeof c->attnres_mode, "%s", o->residual);
        const ResidualScheme *s = residual_find(o->residual);
        if (s && residual_is_routed(s) && !o->heads) c->attnres_num_heads = s->default_heads;
    }
    if (o->heads) c->attnres_num_heads = o->heads;
    if (o->blocks) c->attnres_num_blocks = o->blocks;
    if (o->route_query_init[0]) {
        c->route_query_init = config_query_init_find(o->route_query_init);
        if (c->route_query_init < 0)
            return mhar_fail("--route-query-init '%s' is unknown (expected zero or normal)", o->route_query_init);
    }
    return config_validate(c, o->config[0] ? o->config : "command-line model options");
}

// A fresh run's token files: as given, or the default data built in
// DIR/data/; recorded as absolute paths, so --resume works from any directory.
static int fresh_data(const TrainLaunch *l, RunOptions *o) {
    if (!o->train[0] != !o->val[0]) return mhar_fail("give both --train and --val (or neither for the built-in data)");
    if (!o->train[0] && default_data_build(l->out, NULL, 0, o->train, sizeof o->train, o->val, sizeof o->val))
        return MHAR_ERR;
    char *t_abs = realpath(o->train, NULL), *v_abs = realpath(o->val, NULL);
    int rc = (t_abs && copy_str(o->train, sizeof o->train, t_abs)) || (v_abs && copy_str(o->val, sizeof o->val, v_abs));
    free(t_abs);
    free(v_abs);
    return rc ? mhar_fail("%s: the absolute path of a token file is too long", l->out) : MHAR_OK;
}

// A fresh model: the one in init_from (e.g. made by mhar convert), or a new
// one at its initialisation (the same on every rank: the seed decides it).
static int fresh_model(const TrainLaunch *l, const TrainState *st, const TokenFile *train, const TokenFile *val,
                       Model *m) {
    const RunOptions *o = &st->opt;
    if (l->init_from) {
        if (model_load(m, l->init_from) || model_check_batch(&m->cfg, o->batch, o->seq)) return MHAR_ERR;
        if (train->vocab_size > m->cfg.vocab_size || val->vocab_size > m->cfg.vocab_size)
            return mhar_fail("token files have vocabulary %d/%d, the model in %s %d", train->vocab_size,
                             val->vocab_size, l->init_from, m->cfg.vocab_size);
        return MHAR_OK;
    }
    int vocab = train->vocab_size > val->vocab_size ? train->vocab_size : val->vocab_size;
    Config c;
    if (build_config(o, vocab, &c) || model_check_batch(&c, o->batch, o->seq))  // before anything is allocated
        return MHAR_ERR;
    if (model_create(m, &c)) return MHAR_ERR;
    model_init_weights(m, o->seed);
    return MHAR_OK;
}

// The run's tokenizer (tokenizer/run_tokenizer.h): the one recorded beside
// the training tokens, else the --init-from run's; none for token files
// without one (mhar data synth). A tokenizer whose vocabulary is not the
// token file's belongs to other tokens: left out, with a warning.
// A model without special-token ids takes the stored tokenizer's, so that
// config.json tells transformers' generate() where a document ends.
static int adopt_special_tokens(Model *m, const char *dir) {
    if (!run_tokenizer_present(dir) || m->cfg.bos_token_id >= 0 || m->cfg.n_eos_token_ids > 0) return MHAR_OK;
    RunTokenizer t;
    if (run_tokenizer_load(dir, &t)) return MHAR_ERR;
    int eot = run_tokenizer_eot(&t);
    if (t.bos_id >= 0 && t.bos_id < m->cfg.vocab_size) m->cfg.bos_token_id = t.bos_id;
    if (eot >= 0 && eot < m->cfg.vocab_size) m->cfg.eos_token_ids[m->cfg.n_eos_token_ids++] = eot;
    run_tokenizer_free(&t);
    return MHAR_OK;
}

static int store_tokenizer(const TrainLaunch *l, const char *train_file, const TokenFile *train, Model *m) {
    const int max_len = m->cfg.max_position_embeddings;
    char path[MHAR_PATH_MAX];
    int found = tokenizer_beside(train_file, path, sizeof path);
    if (found < 0) return MHAR_ERR;
    if (!found) {
        if (l->init_from && run_tokenizer_present(l->init_from))
            return run_tokenizer_copy(l->init_from, l->out, max_len) || adopt_special_tokens(m, l->out);
        fprintf(stderr, "note: no tokenizer beside %s: the run records none (token ids only)\n", train_file);
        return MHAR_OK;
    }
    Bpe b;
    if (tokenizer_load_file(path, &b)) return MHAR_ERR;
    int rc = MHAR_OK;
    size_t len = strlen(path);
    if (b.vocab_size != train->vocab_size)
        fprintf(stderr, "warning: %s has a vocabulary of %d, but %s was made for %d: the run records no "
                        "tokenizer\n", path, b.vocab_size, train_file, train->vocab_size);
    else if (len > 5 && !strcmp(path + len - 5, ".json")) {  // an HF file set: copied as it is
        path[len - strlen("/tokenizer.json")] = '\0';
        rc = run_tokenizer_copy(path, l->out, max_len);
    } else
        rc = run_tokenizer_save(l->out, &b, max_len);
    bpe_free(&b);
    return rc || adopt_special_tokens(m, l->out);
}

// This rank's optimizer: fresh moments for its shard, or its shard of the
// checkpoint's (full, freed here).
static int shard_optimizer(const DataParallel *dp, AdamW *full, AdamW *opt) {
    if (!full->state) return adamw_init(opt, dp->ctx, dp->n_mine);
    if (dp->comm->size == 1) {   // one rank owns it all
        *opt = *full;
        memset(full, 0, sizeof *full);
        return MHAR_OK;
    }
    int rc = dp_shard_optimizer(dp, full, opt);
    adamw_free(full);
    return rc;
}

// The continued-training recipe on this rank's model and optimizer: no decay
// on the excluded classes of its shard, z-loss, and a fresh run's EMA
// starting from its first weights (a resumed one loaded its own).
static int recipe(const RunOptions *o, const DataParallel *dp, Model *m, AdamW *opt, int resumed) {
    unsigned classes;
    if (param_classes_parse(o->wd_exclude, "--wd-exclude", &classes) ||
        adamw_exclude_decay(opt, &m->table, dp->lo, classes))
        return MHAR_ERR;
    m->z_loss = (float)o->z_loss;
    if (o->ema > 0 && !resumed) return adamw_add_ema(opt, (float)o->ema, m->params + dp->lo);
    return MHAR_OK;
}

int train_launch(const TrainLaunch *l) {
    Comm *comm = comm_world();
    const int lead = comm->rank == 0;
    // Zeroed: every exit below frees them, whatever was allocated by then.
    TrainState st = {0};
    Model m = {0};
    AdamW opt = {0}, full = {0};
    DataParallel dp = {0};
    TokenFile train = {0}, val = {0};
    // --accum counts a rank's micro-batches; a run records those of a step
    // over all ranks, so it resumes on any number of ranks that divides them.
    RunOptions given = l->opt;
    given.accum = l->opt.accum * comm->size;
    st.opt = given;
    char ck[MHAR_PATH_MAX];
    unsigned classes;   // refused before anything is made
    if (param_classes_parse(given.wd_exclude, "--wd-exclude", &classes)) return MHAR_ERR;
    int rc = lead ? mkdir_p(l->out) : MHAR_OK;
    if (!rc) rc = path_join(ck, sizeof ck, l->out, "checkpoint/state.json");
    int exists = !rc && access(ck, F_OK) == 0;
    if (comm_agree(comm, rc) || comm_bcast(comm, &exists, sizeof exists, 0)) return MHAR_ERR;
    if (l->resume) {
        if (!exists) return mhar_fail("%s: no checkpoint to resume from", l->out);
        // The options first: a flag that disagrees is refused before the weights load.
        RunOptions kept;
        rc = checkpoint_load_state(l->out, &st);
        if (!rc) rc = run_options_resume(&st.opt, &given, l->given);
        kept = st.opt;
        if (!rc) rc = checkpoint_load(l->out, &m, &full, &st);
        st.opt = kept;   // with what the resume rules let change
        if (!rc && lead) fprintf(stderr, "resuming %s at step %ld of %ld\n", l->out, st.step, st.opt.steps);
    } else {
        if (exists) return mhar_fail("%s already holds a run; use --resume or another --out", l->out);
        // Token files given: each rank reads its own (on its host). The
        // default data: rank 0 builds it and every rank takes its paths.
        const int built = !st.opt.train[0] && !st.opt.val[0];
        rc = lead || !built ? fresh_data(l, &st.opt) : MHAR_OK;
        if (comm_agree(comm, rc)) rc = MHAR_ERR;
        else if (built) rc = comm_bcast(comm, &st.opt, sizeof st.opt, 0);
    }
    if (!rc) rc = tokens_load(st.opt.train, &train);
    if (!rc) rc = tokens_load(st.opt.val, &val);
    if (!rc && !l->resume) rc = fresh_model(l, &st, &train, &val, &m);
    if (!rc && !l->resume && lead) rc = store_tokenizer(l, st.opt.train, &train, &m);
    else if (!rc && (train.vocab_size > m.cfg.vocab_size || val.vocab_size > m.cfg.vocab_size))
        rc = mhar_fail("token files have vocabulary %d/%d, the model %d", train.vocab_size, val.vocab_size,
                       m.cfg.vocab_size);
    if (!rc) rc = model_alloc_grads(&m);  // before dp_init, which reduces them in place
    if (!rc) rc = dp_init(&dp, comm, &m, st.opt.accum);
    if (!rc) rc = shard_optimizer(&dp, &full, &opt);
    if (!rc) rc = model_alloc_acts(&m, st.opt.batch, st.opt.seq);
    if (!rc) rc = recipe(&st.opt, &dp, &m, &opt, l->resume);
    rc = comm_agree(comm, rc);   // a rank that failed is named; all stop
    if (!rc) {
        double params = 0;
        for (int i = 0; i < m.table.n; i++) params += m.table.p[i].numel;
        const char *from = l->init_from ? l->init_from : st.opt.config[0] ? st.opt.config : st.opt.preset;
        if (lead) {
            fprintf(stderr, "model: %s, %s family, %s residual, %.2fM parameters, d %d, %d layers; batch %d x %d x accum %d",
                    l->resume ? l->out : from, config_family_name(m.cfg.family), m.cfg.attnres_mode, params / 1e6, m.cfg.hidden_size,
                    m.cfg.num_hidden_layers, st.opt.batch, st.opt.seq, dp.accum);
            if (comm->size > 1)
                fprintf(stderr, " x %d ranks; optimizer state %.1f MB per rank (ZeRO-1; %.1f MB unsharded)",
                        comm->size, 8.0 * dp.n_mine / 1e6, 8.0 * m.table.total / 1e6);
            fprintf(stderr, "\n");
            // Kernel sets differ in speed by 3x and in the last digits: say which ran.
            const int threads = ops_threads();
            fprintf(stderr, "compute: %s backend, %d thread%s%s, %s\n", ops_backend_name(m.ctx), threads,
                    threads == 1 ? "" : "s", comm->size > 1 ? " a rank" : "", ops_library_name());
            if (st.opt.wd_exclude[0] || st.opt.z_loss > 0 || st.opt.ema > 0)
                fprintf(stderr, "recipe: no weight decay on %s, z-loss %g, EMA %g\n",
                        st.opt.wd_exclude[0] ? st.opt.wd_exclude : "none", st.opt.z_loss, st.opt.ema);
        }
        rc = train_run(l->out, &m, &dp, &opt, &st, &train, &val, l->stop_at);
    }
    dp_free(&dp);
    model_free(&m);
    adamw_free(&opt);
    adamw_free(&full);
    tokens_free(&train);
    tokens_free(&val);
    return rc;
}
