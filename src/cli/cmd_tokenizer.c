// mhar tokenizer: train, encode, decode, export, import (byte-level BPE).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "data/tokens.h"
#include "io/atomic.h"
#include "tokenizer/bpe.h"
#include "tokenizer/export.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/run_tokenizer.h"
#include "tokenizer/textfiles.h"
#include "tokenizer/train.h"
#include "util/common.h"
#include "util/dir.h"

#define NF(f) ((int)(sizeof f / sizeof f[0]))

static int fail(void) {
    fprintf(stderr, "error: %s\n", mhar_error());
    return 1;
}

static int pattern_by_name(const char *name) {
    for (int id = PAT_GPT2; id <= PAT_QWEN2; id++)
        if (!strcmp(name, pretok_name(id))) return id;
    return PAT_NONE;
}

static const char *train_usage =
    "usage: mhar tokenizer train --corpus DIR --out FILE [--vocab 8192 --pattern llama3]\n\n"
    "Learns a byte-level BPE from every regular file under DIR (recursively;\n"
    "files with NUL bytes and empty files are skipped). If DIR/train is a\n"
    "directory (the layout `mhar data corpus` writes), only DIR/train is read,\n"
    "so the validation documents stay unseen. The vocabulary is 256 byte tokens,\n"
    "the merges and <|endoftext|> (the last id).";

static int train(int argc, char **argv) {
    const char *corpus = NULL, *out = NULL, *pattern = "llama3";
    int vocab = 8192, quiet = 0;
    Flag flags[] = {
        {"corpus", FLAG_STR, &corpus, "directory of text files", 0, 0, 0},
        {"out", FLAG_STR, &out, "tokenizer file to write", 0, 0, 0},
        {"vocab", FLAG_INT, &vocab, "vocabulary size, <|endoftext|> included (default 8192)", 257, BPE_MAX_VOCAB, 0},
        {"pattern", FLAG_STR, &pattern, "split pattern: llama3 (default, mhar's), gpt2 or qwen2", 0, 0, 0},
        {"quiet", FLAG_BOOL, &quiet, "no progress lines", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, NF(flags), train_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!corpus || !out) { fprintf(stderr, "error: --corpus and --out are required (see --help)\n"); return 2; }
    int pat = pattern_by_name(pattern);
    if (!pat) { fprintf(stderr, "error: --pattern %s: expected llama3, gpt2 or qwen2\n", pattern); return 2; }
    const char *special[] = {"<|endoftext|>"};
    BpeTrainOptions o = {vocab, pat, special, 1, !quiet};
    BpeTrainStats st;
    Bpe b;
    char used[MHAR_PATH_MAX];
    double t0 = now_seconds();
    int rc = bpe_train_corpus(corpus, &o, &b, &st, used, sizeof used);
    if (rc) return fail();
    rc = mkdir_parent(out) || bpe_save(out, &b);
    double secs = now_seconds() - t0;
    if (rc) { bpe_free(&b); return fail(); }
    if (b.vocab_size < vocab)
        fprintf(stderr, "warning: the corpus ran out of pairs: vocabulary %d, not %d\n", b.vocab_size, vocab);
    fprintf(stderr, "trained on %s: %zu files (%zu binary, %zu empty skipped), %.1f MB, %llu pieces (%llu distinct)\n",
            used, st.files, st.skipped_binary, st.skipped_empty, st.bytes / 1e6, (unsigned long long)st.words,
            (unsigned long long)st.unique_words);
    printf("{\"vocab\": %d, \"merges\": %d, \"bytes\": %llu, \"files\": %zu, \"seconds\": %.2f, "
           "\"seconds_read\": %.2f, \"seconds_count\": %.2f, \"seconds_merge\": %.2f}\n",
           b.vocab_size, b.n_merges, (unsigned long long)st.bytes, st.files, secs, st.seconds_read,
           st.seconds_count, st.seconds_merge);
    bpe_free(&b);
    return 0;
}

static const char *encode_usage =
    "usage: mhar tokenizer encode --tokenizer FILE --in TEXT --out TOKENS [--ordinary --max-width 2|4]\n\n"
    "Encodes a text file into a token file (the engine's format). Literal special\n"
    "token text such as <|endoftext|> becomes the special id, as HF tokenizers\n"
    "does, unless --ordinary. Files with NUL bytes are refused as not text unless\n"
    "--binary (any byte string encodes and decodes exactly).";

static int encode(int argc, char **argv) {
    const char *tok = NULL, *in = NULL, *out = NULL;
    int ordinary = 0, binary = 0, max_width = 4;
    Flag flags[] = {
        {"tokenizer", FLAG_STR, &tok, "tokenizer file (.bpe, or an HF tokenizer.json such as RUN/tokenizer.json)", 0, 0, 0},
        {"in", FLAG_STR, &in, "text file", 0, 0, 0},
        {"out", FLAG_STR, &out, "token file to write", 0, 0, 0},
        {"ordinary", FLAG_BOOL, &ordinary, "special token text is ordinary text", 0, 0, 0},
        {"binary", FLAG_BOOL, &binary, "accept files with NUL bytes", 0, 0, 0},
        {"max-width", FLAG_INT, &max_width, "refuse a vocabulary that needs wider tokens (bytes, 2 or 4)", 2, 4, 0},
    };
    int r = args_parse(argc, argv, flags, NF(flags), encode_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!tok || !in || !out) { fprintf(stderr, "error: --tokenizer, --in and --out are required (see --help)\n"); return 2; }
    if (max_width == 3) { fprintf(stderr, "error: --max-width is 2 or 4\n"); return 2; }
    Bpe b;
    if (tokenizer_load_file(tok, &b)) return fail();
    IntVec ids = {0};
    size_t n = 0;
    int rc = MHAR_OK;
    if (bpe_token_width(&b) > max_width)
        rc = mhar_fail("%s: a vocabulary of %d ids needs %d-byte tokens, more than --max-width %d", tok,
                       b.vocab_size, bpe_token_width(&b), max_width);
    double t0 = now_seconds();
    if (!rc) rc = bpe_encode_file(&b, in, !ordinary, binary, &ids, &n);
    double secs = now_seconds() - t0;
    if (!rc) rc = tokens_save(out, ids.v, ids.n, b.vocab_size);
    if (!rc)
        printf("{\"bytes\": %zu, \"tokens\": %zu, \"bytes_per_token\": %.3f, \"seconds\": %.3f, \"MB_per_s\": %.2f}\n",
               n, ids.n, (double)n / (double)ids.n, secs, n / 1e6 / (secs > 0 ? secs : 1e-9));
    intvec_free(&ids);
    bpe_free(&b);
    return rc ? fail() : 0;
}

static const char *decode_usage =
    "usage: mhar tokenizer decode --tokenizer FILE --in TOKENS --out TEXT\n\n"
    "Writes the bytes of the tokens (special tokens as their text).";

static int decode(int argc, char **argv) {
    const char *tok = NULL, *in = NULL, *out = NULL;
    Flag flags[] = {
        {"tokenizer", FLAG_STR, &tok, "tokenizer file (.bpe, or an HF tokenizer.json such as RUN/tokenizer.json)", 0, 0, 0},
        {"in", FLAG_STR, &in, "token file", 0, 0, 0},
        {"out", FLAG_STR, &out, "text file to write", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, NF(flags), decode_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!tok || !in || !out) { fprintf(stderr, "error: --tokenizer, --in and --out are required (see --help)\n"); return 2; }
    Bpe b;
    if (tokenizer_load_file(tok, &b)) return fail();
    TokenFile tf = {0};
    int rc = tokens_load(in, &tf);
    if (!rc && tf.vocab_size > b.vocab_size)
        rc = mhar_fail("%s: made for a vocabulary of %d, larger than the tokenizer's %d", in, tf.vocab_size,
                       b.vocab_size);
    unsigned char *text = NULL;
    size_t len = 0, cap = 0;
    if (!rc) rc = bpe_decode(&b, tf.tokens, tf.count, &text, &len, &cap);
    if (!rc) rc = atomic_write_file(out, text ? (const void *)text : "", len);
    free(text);
    tokens_free(&tf);
    bpe_free(&b);
    return rc ? fail() : 0;
}

static const char *export_usage =
    "usage: mhar tokenizer export --tokenizer FILE [--hf tokenizer.json] [--tiktoken FILE]\n\n"
    "Writes the tokenizer for the reference libraries: --hf an HF tokenizers\n"
    "tokenizer.json (BPE model, Split(regex) + ByteLevel pre-tokenizer, ByteLevel\n"
    "decoder, special tokens as added tokens); --tiktoken the mergeable ranks\n"
    "(base64 token bytes and rank per line) and FILE.json with the split\n"
    "pattern (pat_str) and special tokens. Prints the split pattern.";

static int export_cmd(int argc, char **argv) {
    const char *tok = NULL, *hf = NULL, *tt = NULL;
    Flag flags[] = {
        {"tokenizer", FLAG_STR, &tok, "tokenizer file (.bpe, or an HF tokenizer.json such as RUN/tokenizer.json)", 0, 0, 0},
        {"hf", FLAG_STR, &hf, "tokenizer.json to write", 0, 0, 0},
        {"tiktoken", FLAG_STR, &tt, "tiktoken ranks file to write (and FILE.json)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, NF(flags), export_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!tok || (!hf && !tt)) { fprintf(stderr, "error: --tokenizer and --hf or --tiktoken are required (see --help)\n"); return 2; }
    Bpe b;
    if (tokenizer_load_file(tok, &b)) return fail();
    int rc = MHAR_OK;
    if (hf) rc = bpe_export_hf(&b, hf);
    if (!rc && tt) rc = bpe_export_tiktoken(&b, tt);
    if (!rc) printf("%s\n", pretok_pattern(b.pattern));
    bpe_free(&b);
    return rc ? fail() : 0;
}

static const char *import_usage =
    "usage: mhar tokenizer import --hf tokenizer.json --out FILE\n\n"
    "Reads an HF tokenizers byte-level BPE (model BPE with vocab and merges; a\n"
    "ByteLevel pre-tokenizer, or Split with the GPT-2, Llama-3 or Qwen2 regex\n"
    "then ByteLevel; no normalizer or NFC), as the GPT-2, Qwen2/3 and Llama-3\n"
    "families ship. mhar then encodes as HF does; added tokens are\n"
    "special tokens. Post-processors (BOS insertion) are not applied.";

static int import_cmd(int argc, char **argv) {
    const char *hf = NULL, *out = NULL;
    Flag flags[] = {
        {"hf", FLAG_STR, &hf, "tokenizer.json to read", 0, 0, 0},
        {"out", FLAG_STR, &out, "tokenizer file to write", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, NF(flags), import_usage);
    if (r) return r > 0 ? 0 : 2;
    if (!hf || !out) { fprintf(stderr, "error: --hf and --out are required (see --help)\n"); return 2; }
    Bpe b;
    if (bpe_import_hf(hf, &b)) return fail();
    int rc = mkdir_parent(out) || bpe_save(out, &b);
    if (!rc)
        fprintf(stderr, "imported %s: vocabulary %d, %d merges, %d special tokens, pattern %s%s%s\n", hf,
                b.vocab_size, b.n_merges, b.n_special, pretok_name(b.pattern),
                b.flags & BPE_IGNORE_MERGES ? ", ignore_merges" : "", b.flags & BPE_NFC ? ", NFC" : "");
    bpe_free(&b);
    return rc ? fail() : 0;
}

static const struct { const char *name; int (*run)(int, char **); } subs[] = {
    {"train", train}, {"encode", encode}, {"decode", decode}, {"export", export_cmd}, {"import", import_cmd},
};

int cmd_tokenizer(int argc, char **argv) {
    for (size_t i = 0; argc >= 1 && i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[0], subs[i].name)) return subs[i].run(argc - 1, argv + 1);
    FILE *f = argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) ? stdout : stderr;
    fprintf(f, "usage: mhar tokenizer train|encode|decode|export|import [options]\n"
               "       (mhar tokenizer SUBCOMMAND --help for its options)\n\n"
               "Byte-level BPE: train on a directory of text, encode text to a token file\n"
               "and back, export to HF tokenizers / tiktoken, import an HF tokenizer.json.\n");
    return f == stdout ? 0 : 2;
}
