// Text corpora for the tokenizer and the model: `mhar data corpus`.
// (corpus.c builds; sources_*.c read one source each, sources.h.)
//
// Sources
//   default  the Python standard library found on the machine: the first of
//            /usr/lib/python3.N, /usr/local/lib/python3.N, <prefix of each
//            python3 on PATH>/lib/python3.N, $PYENV_ROOT (or ~/.pyenv)/
//            versions/*/lib/python3.N that holds os.py; within a location the
//            highest N. --stdlib-dir DIR overrides the search. Every regular
//            *.py file under it, minus site-packages/, dist-packages/ and
//            __pycache__/; symbolic links are not followed.
//   full     program sources and English prose from Debian packages:
//              python-stdlib  as above                                 code
//              linux-code     *.c, *.h of /usr/src/linux-source-*.tar.xz code
//              linux-docs     Documentation/**/*.rst|*.txt of it        docs
//              bible-kjv      `bible` (bible-kjv), one document per book prose
//              janeaustenr    the novels of r-cran-janeaustenr, read with
//                             Rscript, one document per chapter      prose
//              gcide          /usr/share/dictd/gcide.dict.dz (dict-gcide),
//                             whole entries in ~64 KiB documents     prose
//            The kernel is subsampled so that prose (bible, austen, gcide) is
//            CORPUS_PROSE_SHARE of the text: each candidate file gets the key
//            SHA-256(path inside the tree)[0..8) and the files with the
//            smallest keys are kept up to the byte budget (independent of the
//            archive's order). Kernel files over CORPUS_MAX_KERNEL_FILE bytes
//            (generated register headers) are skipped.
//            Nothing is installed here: a missing package is an error that
//            names it and the apt-get command that installs it.
//
// Every source: files with a NUL byte are binary and skipped; empty files and
// documents containing the separator are skipped; exact duplicates (same
// SHA-256) are removed, keeping the first in (source, origin) order.
// Each source is split by document: the documents are shuffled with the seed
// (one permutation of the whole corpus) and the first round(f * n) of each
// source (at least 1 when it has 2 or more, never all) go to validation.
//
// Output directory (format "mhar-corpus-1"):
//   DIR/train/shard-0000.txt, shard-0001.txt, ...  training documents
//   DIR/val/shard-0000.txt, ...                     validation documents
//   DIR/docs-train.tsv, DIR/docs-val.tsv            one line per document:
//       shard \t offset \t bytes \t sha256 \t source \t origin
//   DIR/manifest.json   sources (roots, Debian packages and versions), counts
//                       and bytes per split and source, the seed, and the
//                       SHA-256 and size of every other output file
// A shard holds whole documents in the shuffled order, each document's bytes
// followed by the 13-byte separator "<|endoftext|>" (so splitting a shard on
// the separator gives the documents, the last piece being empty). A shard is
// at most CORPUS_SHARD_BYTES (a bigger document gets a shard of its own), so
// read_file() can load it. Same inputs, seed and fraction: byte-identical
// outputs, manifest included (it holds no times or dates).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../util/sha256.h" // for the includers that hash with it (src/analysis/grid.c)

#define CORPUS_SEPARATOR "<|endoftext|>"
#define CORPUS_SHARD_BYTES ((size_t)32 << 20)
#define CORPUS_PROSE_SHARE 0.30
#define CORPUS_MAX_KERNEL_FILE ((size_t)256 << 10)
#define CORPUS_MAX_TOTAL ((size_t)300 << 20)

typedef struct {
    const char *out_dir;     // created if missing; must be empty or a previous corpus
    const char *source;      // "default" or "full"
    const char *stdlib_dir;  // NULL: search (see above)
    uint64_t seed;
    double val_fraction;     // (0, 0.5]
    int verbose;             // progress lines on stderr
} CorpusOptions;

// Build the corpus described above. MHAR_OK / MHAR_ERR (message in mhar_error()).
int corpus_build(const CorpusOptions *o);

// The Python standard library the default source would use, into out[cap].
int corpus_find_stdlib(char *out, size_t cap);
