// mhar data: token-file tools.
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "data/synth.h"
#include "data/tokens.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar data synth --out FILE --vocab V --count N [--kind random|pattern] [--seed S]\n\n"
    "Writes a token file of N synthetic tokens (format: see README).";

static int synth(int argc, char **argv) {
    const char *out = NULL, *kind = "pattern";
    int vocab = 512;
    long count = 100000;
    uint64_t seed = 1;
    Flag flags[] = {
        {"out", FLAG_STR, &out, "token file to write", 0, 0, 0},
        {"vocab", FLAG_INT, &vocab, "vocabulary size (default 512)", 2, 1 << 24, 0},
        {"count", FLAG_LONG, &count, "number of tokens (default 100000)", 2, 1e10, 0},
        {"kind", FLAG_STR, &kind, "random | pattern (default pattern)", 0, 0, 0},
        {"seed", FLAG_U64, &seed, "seed (default 1)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!out) { fprintf(stderr, "error: --out FILE is required\n"); return 2; }
    int *buf = mhar_alloc(sizeof(int) * (size_t)count);
    int rc = buf ? synth_tokens(buf, (size_t)count, vocab, kind, seed) : MHAR_ERR;
    if (!rc) rc = tokens_save(out, buf, (size_t)count, vocab);
    mhar_free(buf);
    if (rc) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    fprintf(stderr, "wrote %ld tokens (vocab %d, %s) to %s\n", count, vocab, kind, out);
    return 0;
}

int cmd_data(int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "synth")) return synth(argc - 1, argv + 1);
    FILE *f = argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) ? stdout : stderr;
    fprintf(f, "usage: mhar data synth [options]   (mhar data synth --help)\n");
    return f == stdout ? 0 : 2;
}
