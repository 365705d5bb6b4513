// Token shards for training: a corpus directory encoded into train.bin and
// val.bin (the engine's token files, data/tokens.h), documents packed in
// order, each followed by <|endoftext|>, with the tokenizer beside them as
// tokenizer.bpe (so a run trained on them records it: run_tokenizer.h).
//
// Two corpus layouts:
//   - a corpus `mhar data corpus` wrote (DIR/manifest.json, DIR/train/,
//     DIR/val/): its split is kept; each shard file holds documents each
//     followed by the literal "<|endoftext|>" (the builder drops documents
//     that contain it), which encodes to the <|endoftext|> id;
//   - any other directory: every regular file under it is one document,
//     encoded as ordinary text (a literal "<|endoftext|>" inside stays text)
//     and followed by the <|endoftext|> id; the files are shuffled with the
//     seed and the first round(val_fraction * n) (at least 1 of 2 or more,
//     never all) form the validation split.
// Empty files and files with NUL bytes are skipped and counted.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

typedef struct {
    const Bpe *bpe;
    const char *corpus, *out_dir;
    double val_fraction;
    uint64_t seed;
    int max_width;  // refuse a vocabulary whose ids need wider tokens (2 or 4)
    int verbose;
} ShardOptions;

typedef struct {
    int corpus_layout;          // 1: the corpus builder's, 0: plain directory
    size_t files[2], skipped;   // [0] train, [1] val
    uint64_t bytes[2], tokens[2], docs[2];
    double seconds;
} ShardStats;

int shards_tokenize(const ShardOptions *o, ShardStats *st);
