// mhar eval: validation loss of a run directory on a token file.
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "data/tokens.h"
#include "train/train.h"

static const char *usage =
    "usage: mhar eval --run DIR --data FILE [--batches N --batch B --seq T]\n\n"
    "Mean next-token cross-entropy of the model in DIR over the first N batches\n"
    "of FILE read in order. The last line is a JSON object.";

int cmd_eval(int argc, char **argv) {
    const char *run = NULL, *data = NULL;
    int batches = 50, batch = 8, seq = 256;
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory (config.json + model.safetensors)", 0, 0, 0},
        {"data", FLAG_STR, &data, "token file", 0, 0, 0},
        {"batches", FLAG_INT, &batches, "batches to evaluate (default 50)", 1, 1e9, 0},
        {"batch", FLAG_INT, &batch, "sequences per batch (default 8)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &seq, "tokens per sequence (default 256)", 1, 1 << 20, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run || !data) { fprintf(stderr, "error: --run and --data are required (see --help)\n"); return 2; }
    Model m;
    TokenFile tf = {0};
    int rc = model_load(&m, run);
    if (!rc) rc = tokens_load(data, &tf);
    if (!rc && tf.vocab_size > m.cfg.vocab_size)
        rc = mhar_fail("%s: vocabulary %d is larger than the model's %d", data, tf.vocab_size, m.cfg.vocab_size);
    if (!rc) rc = model_alloc_acts(&m, batch, seq);
    long tokens = 0;
    double loss = 0;
    if (!rc) {
        loss = evaluate(&m, &tf, batches, &tokens, NULL);
        if (tokens == 0) rc = mhar_fail("%s: fewer than one batch of %d x %d tokens", data, batch, seq + 1);
    }
    if (rc) fprintf(stderr, "error: %s\n", mhar_error());
    else printf("{\"val_loss\": %.6f, \"tokens\": %ld}\n", loss, tokens);
    tokens_free(&tf);
    if (m.params) model_free(&m);
    return rc ? 1 : 0;
}
