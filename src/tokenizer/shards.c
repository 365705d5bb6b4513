// mhar data tokenize: corpus directory -> train.bin, val.bin (see shards.h).
#include "shards.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../data/tokens.h"
#include "../util/common.h"
#include "../util/dir.h"
#include "textfiles.h"

// Encode files[0..n) into one id stream, in file order. Files are spread over
// the threads largest first (one encoder and cache per thread); each file's
// ids are kept apart until all are done, then joined.
static int encode_files(const Bpe *b, char *const *files, size_t n, int corpus_layout, int eot, IntVec *out,
                        uint64_t *bytes, uint64_t *docs, size_t *skipped) {
    IntVec *part = calloc(n + 1, sizeof(IntVec));
    size_t *order = malloc(sizeof(size_t) * (n + 1));
    off_t *size = malloc(sizeof(off_t) * (n + 1));
    if (!part || !order || !size) { free(part); free(order); free(size); return mhar_fail("out of memory"); }
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        size[i] = stat(files[i], &st) == 0 ? st.st_size : 0;
        order[i] = i;
    }
    // Largest first, so big files start early and the threads end together.
    // A shell sort: the key size[order[.]] is out of reach of a qsort comparator.
    for (size_t gap = n / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < n; i++)
            for (size_t j = i; j >= gap && size[order[j - gap]] < size[order[j]]; j -= gap) {
                size_t t = order[j];
                order[j] = order[j - gap];
                order[j - gap] = t;
            }
    int rc = MHAR_OK;
    char err[1024] = "";
    uint64_t nbytes = 0, ndocs = 0;
    size_t nskip = 0;
#pragma omp parallel reduction(+ : nbytes, ndocs, nskip)
    {
        BpeEncoder *e = bpe_encoder_new(b);
        int my_rc = e ? MHAR_OK : MHAR_ERR;
#pragma omp for schedule(dynamic, 1)
        for (size_t k = 0; k < n; k++) {
            size_t i = order[k];
            unsigned char *s = NULL;
            size_t len = 0;
            if (my_rc == MHAR_OK) my_rc = read_all(files[i], &s, &len);
            if (my_rc == MHAR_OK && (len == 0 || is_binary(s, len))) {
                nskip++;
            } else if (my_rc == MHAR_OK) {
                nbytes += len;
                my_rc = bpe_encode_with(e, s, len, corpus_layout, &part[i]);
                if (my_rc == MHAR_OK && corpus_layout) {
                    for (size_t j = 0; j < part[i].n; j++) ndocs += part[i].v[j] == eot;
                }
                // A document ends with <|endoftext|>: a plain file always, a shard
                // whose last document lacks the separator too.
                if (my_rc == MHAR_OK && (part[i].n == 0 || part[i].v[part[i].n - 1] != eot)) {
                    my_rc = intvec_push(&part[i], &eot, 1);
                    ndocs++;
                }
            }
            free(s);
        }
        if (my_rc != MHAR_OK) {
#pragma omp critical
            {
                if (rc == MHAR_OK) snprintf(err, sizeof err, "%s", mhar_error());
                rc = MHAR_ERR;
            }
        }
        bpe_encoder_free(e);
    }
    if (rc) mhar_fail("%s", err);
    for (size_t i = 0; i < n; i++) {
        if (rc == MHAR_OK) rc = intvec_push(out, part[i].v, part[i].n);
        intvec_free(&part[i]);
    }
    *bytes = nbytes;
    *docs = ndocs;
    *skipped = nskip;
    free(part);
    free(order);
    free(size);
    return rc;
}

int shards_tokenize(const ShardOptions *o, ShardStats *st) {
    memset(st, 0, sizeof *st);
    const Bpe *b = o->bpe;
    double t0 = now_seconds();
    if (bpe_token_width(b) > o->max_width)
        return mhar_fail("a vocabulary of %d ids needs %d-byte tokens, more than the %d-byte limit", b->vocab_size,
                         bpe_token_width(b), o->max_width);
    int eot = bpe_eot_id(b);
    if (eot < 0) return mhar_fail("the tokenizer has no <|endoftext|> special token to separate documents");
    char manifest[MHAR_PATH_MAX], dir[2][MHAR_PATH_MAX];
    if (path_join(manifest, sizeof manifest, o->corpus, "manifest.json") ||
        path_join(dir[0], sizeof dir[0], o->corpus, "train") || path_join(dir[1], sizeof dir[1], o->corpus, "val"))
        return MHAR_ERR;
    FileList fl[2] = {{0}, {0}};
    int rc = MHAR_OK;
    st->corpus_layout = path_is_file(manifest) && path_is_dir(dir[0]) && path_is_dir(dir[1]);
    if (st->corpus_layout) {
        rc = filelist_scan(dir[0], &fl[0]);
        if (!rc) rc = filelist_scan(dir[1], &fl[1]);
    } else {
        FileList all;
        rc = filelist_scan(o->corpus, &all);
        if (!rc && all.n < 2) rc = mhar_fail("%s: %zu files; a train and a validation split need at least 2",
                                             o->corpus, all.n);
        if (!rc) {
            // Seeded Fisher-Yates shuffle, then the validation prefix.
            Rng r;
            rng_seed(&r, o->seed);
            for (size_t i = all.n - 1; i > 0; i--) {
                size_t j = (size_t)rng_below(&r, i + 1);
                char *t = all.path[i];
                all.path[i] = all.path[j];
                all.path[j] = t;
            }
            size_t nv = (size_t)(o->val_fraction * (double)all.n + 0.5);
            if (nv < 1) nv = 1;
            if (nv > all.n - 1) nv = all.n - 1;
            fl[1].path = malloc(sizeof(char *) * nv);
            fl[0].path = malloc(sizeof(char *) * (all.n - nv));
            if (!fl[0].path || !fl[1].path) rc = mhar_fail("out of memory");
            for (size_t i = 0; !rc && i < all.n; i++) {
                if (i < nv) fl[1].path[fl[1].n++] = all.path[i];
                else fl[0].path[fl[0].n++] = all.path[i];
            }
            if (rc) filelist_free(&all);
            else free(all.path);  // the strings now belong to fl[0] and fl[1]
        }
    }
    static const char *name[2] = {"train.bin", "val.bin"};
    if (!rc && mkdir(o->out_dir, 0777) != 0 && errno != EEXIST)
        rc = mhar_fail("%s: cannot create the directory: %s", o->out_dir, strerror(errno));
    // The tokenizer first: token files never stand without the one that made them.
    char tok_path[MHAR_PATH_MAX];
    if (!rc) rc = path_join(tok_path, sizeof tok_path, o->out_dir, "tokenizer.bpe");
    if (!rc) rc = bpe_save(tok_path, b);
    for (int s = 0; s < 2 && !rc; s++) {
        IntVec ids = {0};
        size_t skipped = 0;
        st->files[s] = fl[s].n;
        rc = encode_files(b, fl[s].path, fl[s].n, st->corpus_layout, eot, &ids, &st->bytes[s], &st->docs[s], &skipped);
        st->skipped += skipped;
        st->files[s] -= skipped;
        if (!rc && ids.n < 2)
            rc = mhar_fail("%s: the %s split has no text (%zu files, all empty or binary)", o->corpus,
                           s ? "validation" : "training", fl[s].n);
        char path[MHAR_PATH_MAX];
        if (!rc) rc = path_join(path, sizeof path, o->out_dir, name[s]);
        if (!rc) rc = tokens_save(path, ids.v, ids.n, b->vocab_size);
        st->tokens[s] = ids.n;
        intvec_free(&ids);
        if (!rc && o->verbose)
            fprintf(stderr, "%s: %zu files, %llu documents, %.1f MB -> %llu tokens\n", path, st->files[s],
                    (unsigned long long)st->docs[s], st->bytes[s] / 1e6, (unsigned long long)st->tokens[s]);
    }
    filelist_free(&fl[0]);
    filelist_free(&fl[1]);
    st->seconds = now_seconds() - t0;
    return rc;
}
