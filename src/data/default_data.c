#include "default_data.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tokenizer/bpe.h"
#include "../tokenizer/pretokenize.h"
#include "../tokenizer/shards.h"
#include "../tokenizer/textfiles.h"
#include "../tokenizer/train.h"
#include "../util/common.h"
#include "corpus.h"

// The tokenizer of `mhar tokenizer train --corpus DIR`: trained on the
// corpus's training split (DIR/train), <|endoftext|> as its special token.
static int train_tokenizer(const char *corpus, int vocab, const char *out) {
    char used[MHAR_PATH_MAX];
    const char *special[] = {CORPUS_SEPARATOR};
    BpeTrainOptions o = {vocab, PAT_MHAR, special, 1, 1};
    BpeTrainStats st;
    Bpe b;
    if (bpe_train_corpus(corpus, &o, &b, &st, used, sizeof used)) return MHAR_ERR;
    int rc = bpe_save(out, &b);
    bpe_free(&b);
    return rc;
}

int default_data_build(const char *dir, const char *stdlib_dir, int vocab, char *train, size_t train_cap,
                       char *val, size_t val_cap) {
    char data_dir[MHAR_PATH_MAX], corpus[MHAR_PATH_MAX], tok[MHAR_PATH_MAX];
    if (path_join(data_dir, sizeof data_dir, dir, "data") || path_join(train, train_cap, data_dir, "train.bin") ||
        path_join(val, val_cap, data_dir, "val.bin") || path_join(corpus, sizeof corpus, data_dir, "corpus") ||
        path_join(tok, sizeof tok, data_dir, "tokenizer.bpe"))
        return MHAR_ERR;
    if (access(train, F_OK) == 0 && access(val, F_OK) == 0) return MHAR_OK;
    if (mkdir(data_dir, 0755) && errno != EEXIST) return mhar_fail("%s: cannot create: %s", data_dir, strerror(errno));
    if (!vocab) vocab = DEFAULT_DATA_VOCAB;
    fprintf(stderr, "no --train given: building the default data in %s (Python standard library,\n"
                    "BPE tokenizer of %d tokens, token shards)\n", data_dir, vocab);
    CorpusOptions co = {.out_dir = corpus, .source = "default", .stdlib_dir = stdlib_dir, .seed = 1,
                        .val_fraction = 0.01, .verbose = 1};
    if (corpus_build(&co) || train_tokenizer(corpus, vocab, tok)) return MHAR_ERR;
    Bpe b;
    if (bpe_load(tok, &b)) return MHAR_ERR;
    ShardOptions so = {.bpe = &b, .corpus = corpus, .out_dir = data_dir, .val_fraction = 0.01, .seed = 1,
                       .max_width = 4, .verbose = 1};
    ShardStats ss;
    int rc = shards_tokenize(&so, &ss);
    bpe_free(&b);
    return rc;
}
