// The built-in default data of the README's main job (`mhar train` without
// --train/--val): this machine's Python standard library as a corpus (the
// corpus builder's default source), a BPE tokenizer trained on it and its
// token shards, all under DIR/data/:
//   DIR/data/corpus/         corpus_build (src/data/corpus.h)
//   DIR/data/tokenizer.bpe   bpe_train_files (src/tokenizer/train.h)
//   DIR/data/train.bin, val.bin   shards_tokenize (src/tokenizer/shards.h)
// Reused when train.bin and val.bin are already there.
#pragma once
#include <stddef.h>

#define DEFAULT_DATA_VOCAB 8192

// Build (or find) the default data of run directory dir: the paths of its
// token files into train[train_cap] and val[val_cap]. stdlib_dir: the Python
// standard library to use (NULL: search, as the corpus builder does); vocab:
// the tokenizer's vocabulary (0: DEFAULT_DATA_VOCAB). Progress on stderr.
int default_data_build(const char *dir, const char *stdlib_dir, int vocab, char *train, size_t train_cap,
                       char *val, size_t val_cap);
