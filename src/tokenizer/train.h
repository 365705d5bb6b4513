// BPE training: count the pre-split pieces ("words") of a corpus in hash
// tables (one per thread), then learn merges by the classic incremental
// algorithm: pair counts weighted by word counts, a list of the words each
// pair occurs in, and a max-heap of pairs whose stale entries are refreshed
// when popped. Each merge touches only the words that hold its pair.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "textfiles.h"

typedef struct {
    int vocab_size;  // the whole vocabulary: 256 bytes + merges + specials
    int pattern;     // PAT_* (pretokenize.h)
    const char *const *special;  // special tokens, e.g. "<|endoftext|>"
    int n_special;
    int verbose;     // progress on stderr
} BpeTrainOptions;

typedef struct {
    size_t files, skipped_binary, skipped_empty;
    uint64_t bytes, words, unique_words;
    int merges, banned;  // merges learned; pairs refused (their bytes were already a token)
    double seconds_read, seconds_count, seconds_merge;
} BpeTrainStats;

// Train on in-memory documents (each one document; special token text in
// them is cut out, not learned).
int bpe_train_texts(const unsigned char *const *text, const size_t *len, size_t n_docs,
                    const BpeTrainOptions *o, Bpe *out, BpeTrainStats *st);
// Train on files: binary files (NUL bytes) and empty files are skipped and
// counted in st.
int bpe_train_files(const FileList *files, const BpeTrainOptions *o, Bpe *out, BpeTrainStats *st);
// Train on a corpus directory: its training split DIR/train when there is
// one (mhar data corpus writes it), else every file of DIR. The directory
// read goes into used[cap] for messages.
int bpe_train_corpus(const char *corpus, const BpeTrainOptions *o, Bpe *out, BpeTrainStats *st, char *used,
                     size_t cap);
