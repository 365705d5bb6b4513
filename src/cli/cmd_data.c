// mhar data: token-file tools.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "data/corpus.h"
#include "data/synth.h"
#include "data/tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/run_tokenizer.h"
#include "tokenizer/shards.h"
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

static const char *corpus_usage =
    "usage: mhar data corpus --out DIR [--source default|full] [--seed S] [--val-fraction F]\n"
    "                        [--stdlib-dir DIR]\n\n"
    "Builds a text corpus: DIR/train/shard-*.txt, DIR/val/shard-*.txt (documents each followed by\n"
    "<|endoftext|>), DIR/docs-{train,val}.tsv and DIR/manifest.json (format: src/data/corpus.h).\n"
    "default: the Python standard library found on this machine. full: Linux kernel sources,\n"
    "Python stdlib, KJV Bible, Jane Austen, GCIDE from Debian packages (a missing one is named with its apt-get line).";

static int corpus(int argc, char **argv) {
    CorpusOptions o = {.source = "default", .seed = 1, .val_fraction = 0.01, .verbose = 1};
    float frac = 0.01f;
    Flag flags[] = {
        {"out", FLAG_STR, &o.out_dir, "output directory (new, empty or a previous corpus)", 0, 0, 0},
        {"source", FLAG_STR, &o.source, "default | full (default: default)", 0, 0, 0},
        {"seed", FLAG_U64, &o.seed, "seed of the train/val split and document order (default 1)", 0, 0, 0},
        {"val-fraction", FLAG_FLOAT, &frac, "validation share of each source's documents (default 0.01)", 1e-6, 0.5, 0},
        {"stdlib-dir", FLAG_STR, &o.stdlib_dir, "Python standard library to use instead of searching", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], corpus_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!o.out_dir) { fprintf(stderr, "error: --out DIR is required\n"); return 2; }
    char exact[32]; // the decimal the user typed, not its float approximation, goes to the manifest
    snprintf(exact, sizeof exact, "%g", frac);
    o.val_fraction = strtod(exact, NULL);
    double t0 = now_seconds();
    if (corpus_build(&o)) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    fprintf(stderr, "wrote the %s corpus to %s in %.1f s\n", o.source, o.out_dir, now_seconds() - t0);
    return 0;
}

static const char *tokenize_usage =
    "usage: mhar data tokenize --tokenizer FILE --corpus DIR --out DIR [--val-fraction 0.01 --seed S]\n\n"
    "Encodes a corpus into DIR/train.bin and DIR/val.bin (token files), documents\n"
    "packed in order, each followed by <|endoftext|>. A corpus from `mhar data\n"
    "corpus` (manifest.json, train/, val/) keeps its split and its documents;\n"
    "in any other directory each file is a document and the files are split by\n"
    "--val-fraction with --seed. Empty and binary (NUL) files are skipped. The\n"
    "tokenizer is written beside them as DIR/tokenizer.bpe: a run trained on them records it.";

static int tokenize(int argc, char **argv) {
    const char *tok = NULL;
    ShardOptions o = {.val_fraction = 0.01, .seed = 1, .max_width = 4, .verbose = 1};
    float frac = 0.01f;
    Flag flags[] = {
        {"tokenizer", FLAG_STR, &tok, "tokenizer file: .bpe (mhar tokenizer train / import) or tokenizer.json", 0, 0, 0},
        {"corpus", FLAG_STR, &o.corpus, "corpus directory", 0, 0, 0},
        {"out", FLAG_STR, &o.out_dir, "output directory (train.bin, val.bin)", 0, 0, 0},
        {"val-fraction", FLAG_FLOAT, &frac, "validation share of a plain directory's files (default 0.01)", 1e-6, 0.5, 0},
        {"seed", FLAG_U64, &o.seed, "seed of a plain directory's split (default 1)", 0, 0, 0},
        {"max-width", FLAG_INT, &o.max_width, "refuse a vocabulary that needs wider tokens (bytes, 2 or 4)", 2, 4, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], tokenize_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!tok || !o.corpus || !o.out_dir) {
        fprintf(stderr, "error: --tokenizer, --corpus and --out are required (see --help)\n");
        return 2;
    }
    if (o.max_width == 3) { fprintf(stderr, "error: --max-width is 2 or 4\n"); return 2; }
    o.val_fraction = frac;
    Bpe b;
    if (tokenizer_load_file(tok, &b)) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    o.bpe = &b;
    ShardStats st;
    int rc = shards_tokenize(&o, &st);
    bpe_free(&b);
    if (rc) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    if (st.corpus_layout && (args_flag(flags, (int)(sizeof flags / sizeof flags[0]), "val-fraction")->given ||
                               args_flag(flags, (int)(sizeof flags / sizeof flags[0]), "seed")->given))
        fprintf(stderr, "note: %s is a built corpus; its own train/val split was used\n", o.corpus);
    printf("{\"train_tokens\": %llu, \"val_tokens\": %llu, \"train_docs\": %llu, \"val_docs\": %llu, "
           "\"bytes\": %llu, \"skipped_files\": %zu, \"seconds\": %.2f}\n",
           (unsigned long long)st.tokens[0], (unsigned long long)st.tokens[1], (unsigned long long)st.docs[0],
           (unsigned long long)st.docs[1], (unsigned long long)(st.bytes[0] + st.bytes[1]), st.skipped, st.seconds);
    return 0;
}

int cmd_data(int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "synth")) return synth(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "tokenize")) return tokenize(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "corpus")) return corpus(argc - 1, argv + 1);
    FILE *f = argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) ? stdout : stderr;
    fprintf(f, "usage: mhar data synth|corpus|tokenize [options]   (mhar data synth --help)\n");
    return f == stdout ? 0 : 2;
}
