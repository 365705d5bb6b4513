// BPE training (see train.h for the algorithm).
#include "train.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "hash.h"
#include "pretokenize.h"

// ---- word counts ----

typedef struct { uint64_t hash; size_t off; uint32_t len; int64_t count; } WordEntry;

typedef struct {
    WordEntry *e;        // [mask + 1], len == 0 means empty
    size_t mask, n;
    unsigned char *bytes;
    size_t n_bytes, cap_bytes;
    int failed;
} WordTable;

static int wt_init(WordTable *t, size_t slots) {
    memset(t, 0, sizeof *t);
    t->mask = slots - 1;
    t->e = calloc(slots, sizeof(WordEntry));
    t->cap_bytes = 1 << 20;
    t->bytes = malloc(t->cap_bytes);
    if (!t->e || !t->bytes) return mhar_fail("out of memory for the word table");
    return MHAR_OK;
}

static void wt_free(WordTable *t) {
    free(t->e);
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

static int wt_grow(WordTable *t) {
    size_t slots = 2 * (t->mask + 1);
    WordEntry *e = calloc(slots, sizeof(WordEntry));
    if (!e) return mhar_fail("out of memory for the word table");
    for (size_t i = 0; i <= t->mask; i++) {
        if (!t->e[i].len) continue;
        size_t j = t->e[i].hash & (slots - 1);
        while (e[j].len) j = (j + 1) & (slots - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->mask = slots - 1;
    return MHAR_OK;
}

static void wt_add(WordTable *t, const unsigned char *s, size_t len, uint64_t h, int64_t count) {
    if (t->failed) return;
    size_t i = h & t->mask;
    for (; t->e[i].len; i = (i + 1) & t->mask) {
        WordEntry *w = &t->e[i];
        if (w->hash == h && w->len == len && !memcmp(t->bytes + w->off, s, len)) {
            w->count += count;
            return;
        }
    }
    if (t->n_bytes + len > t->cap_bytes) {
        size_t cap = t->cap_bytes;
        while (cap < t->n_bytes + len) cap *= 2;
        unsigned char *b = realloc(t->bytes, cap);
        if (!b) { t->failed = mhar_fail("out of memory for the word table"); return; }
        t->bytes = b;
        t->cap_bytes = cap;
    }
    memcpy(t->bytes + t->n_bytes, s, len);
    t->e[i] = (WordEntry){h, t->n_bytes, (uint32_t)len, count};
    t->n_bytes += len;
    if (++t->n * 2 > t->mask + 1 && wt_grow(t)) t->failed = MHAR_ERR;
}

// Special token literals, cut out of the training text: a first-byte filter
// keeps the scan cheap.
typedef struct { int n; const char *const *s; size_t len[64]; unsigned char first[256]; } Specials;

static int specials_init(Specials *sp, const BpeTrainOptions *o) {
    memset(sp, 0, sizeof *sp);
    if (o->n_special > 64) return mhar_fail("at most 64 special tokens, got %d", o->n_special);
    sp->n = o->n_special;
    sp->s = o->special;
    for (int k = 0; k < sp->n; k++) {
        sp->len[k] = strlen(o->special[k]);
        if (!sp->len[k]) return mhar_fail("special token %d is empty", k);
        sp->first[(unsigned char)o->special[k][0]] = 1;
    }
    return MHAR_OK;
}

static size_t special_at(const Specials *sp, const unsigned char *s, size_t n, size_t i) {
    size_t best = 0;
    if (!sp->first[s[i]]) return 0;
    for (int k = 0; k < sp->n; k++)
        if (sp->len[k] > best && sp->len[k] <= n - i && !memcmp(s + i, sp->s[k], sp->len[k])) best = sp->len[k];
    return best;
}

static void count_segment(WordTable *t, int pattern, const unsigned char *s, size_t n, uint64_t *words) {
    for (size_t a = 0; a < n;) {
        size_t b = pretok_next(pattern, s, n, a);
        wt_add(t, s + a, b - a, hash_bytes(s + a, b - a), 1);
        (*words)++;
        a = b;
    }
}

// Count the pieces of one text, with special token literals cut out.
static void count_text(WordTable *t, int pattern, const Specials *sp, const unsigned char *s, size_t n,
                       uint64_t *words) {
    size_t seg = 0;
    for (size_t i = 0; i < n;) {
        size_t l = special_at(sp, s, n, i);
        if (!l) { i++; continue; }
        count_segment(t, pattern, s + seg, i - seg, words);
        i += l;
        seg = i;
    }
    count_segment(t, pattern, s + seg, n - seg, words);
}

// ---- merges ----

typedef struct { int32_t *v; int32_t n, cap; } WordList;
typedef struct { int64_t count; uint64_t key; int32_t pair; } HeapEntry;

typedef struct {
    // unique words: count, symbols sym[off .. off+len), shrinking as merges apply
    size_t n_words;
    int64_t *wcount;
    size_t *woff;
    int32_t *wlen, *sym;
    uint32_t *stamp;       // the merge that last visited the word (+1)
    // pairs: hashed by key (left << 32 | right) into slot[] -> pair index
    size_t n_pairs, cap_pairs, slot_mask;
    int32_t *slot;
    uint64_t *key;
    int64_t *pcount;
    WordList *where;       // words the pair occurs in (may hold stale entries)
    uint32_t *touched;     // the merge that last created the pair (+1)
    int32_t *new_pairs;    // pairs created by the current merge
    size_t n_new;
    HeapEntry *heap;
    size_t n_heap, cap_heap;
    // tokens learned so far, and a byte-string set over them
    unsigned char *tb;
    size_t *toff, cap_tb;
    int n_tok;
    int32_t *tslot;
    size_t tmask;
    int failed;
} Trainer;

static void trainer_free(Trainer *t) {
    free(t->wcount); free(t->woff); free(t->wlen); free(t->sym); free(t->stamp);
    free(t->slot); free(t->key); free(t->pcount); free(t->touched); free(t->new_pairs);
    if (t->where)
        for (size_t i = 0; i < t->n_pairs; i++) free(t->where[i].v);
    free(t->where); free(t->heap);
    free(t->tb); free(t->toff); free(t->tslot);
    memset(t, 0, sizeof *t);
}

static int heap_before(const HeapEntry *a, const HeapEntry *b) {
    return a->count > b->count || (a->count == b->count && a->key < b->key);
}

static void heap_push(Trainer *t, int64_t count, int32_t p) {
    if (t->n_heap == t->cap_heap) {
        size_t cap = t->cap_heap ? 2 * t->cap_heap : 1 << 16;
        HeapEntry *h = realloc(t->heap, sizeof(HeapEntry) * cap);
        if (!h) { t->failed = mhar_fail("out of memory for the pair heap"); return; }
        t->heap = h;
        t->cap_heap = cap;
    }
    HeapEntry x = {count, t->key[p], p};
    size_t i = t->n_heap++;
    while (i > 0 && heap_before(&x, &t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = x;
}

static HeapEntry heap_pop(Trainer *t) {
    HeapEntry *h = t->heap, top = h[0], x = h[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&h[c + 1], &h[c])) c++;
        if (!heap_before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = x;
    return top;
}

static int pairs_rehash(Trainer *t, size_t slots) {
    int32_t *s = malloc(sizeof(int32_t) * slots);
    if (!s) return mhar_fail("out of memory for the pair table");
    memset(s, 0xFF, sizeof(int32_t) * slots);
    for (size_t p = 0; p < t->n_pairs; p++) {
        size_t i = hash_mix(t->key[p]) & (slots - 1);
        while (s[i] >= 0) i = (i + 1) & (slots - 1);
        s[i] = (int32_t)p;
    }
    free(t->slot);
    t->slot = s;
    t->slot_mask = slots - 1;
    return MHAR_OK;
}

// Index of pair (l, r), created with count 0 when new; -1 on failure.
static int32_t pair_get(Trainer *t, int32_t l, int32_t r) {
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t i = hash_mix(k) & t->slot_mask;
    for (; t->slot[i] >= 0; i = (i + 1) & t->slot_mask)
        if (t->key[t->slot[i]] == k) return t->slot[i];
    if (t->n_pairs == t->cap_pairs) {
        size_t cap = 2 * t->cap_pairs;
        uint64_t *key = realloc(t->key, sizeof(uint64_t) * cap);
        if (key) t->key = key;
        int64_t *pc = realloc(t->pcount, sizeof(int64_t) * cap);
        if (pc) t->pcount = pc;
        WordList *w = realloc(t->where, sizeof(WordList) * cap);
        if (w) t->where = w;
        uint32_t *tc = realloc(t->touched, sizeof(uint32_t) * cap);
        if (tc) t->touched = tc;
        int32_t *np = realloc(t->new_pairs, sizeof(int32_t) * cap);
        if (np) t->new_pairs = np;
        if (!key || !pc || !w || !tc || !np) { t->failed = mhar_fail("out of memory for the pair table"); return -1; }
        t->cap_pairs = cap;
    }
    int32_t p = (int32_t)t->n_pairs++;
    t->key[p] = k;
    t->pcount[p] = 0;
    t->where[p] = (WordList){NULL, 0, 0};
    t->touched[p] = 0;
    t->slot[i] = p;
    if (t->n_pairs * 2 > t->slot_mask + 1 && pairs_rehash(t, 2 * (t->slot_mask + 1))) {
        t->failed = MHAR_ERR;
        return -1;
    }
    return p;
}

static void where_add(Trainer *t, int32_t p, int32_t w) {
    WordList *l = &t->where[p];
    if (l->n && l->v[l->n - 1] == w) return;  // words are visited in order: no repeats in a row
    if (l->n == l->cap) {
        int32_t cap = l->cap ? 2 * l->cap : 4;
        int32_t *v = realloc(l->v, sizeof(int32_t) * (size_t)cap);
        if (!v) { t->failed = mhar_fail("out of memory for the pair lists"); return; }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = w;
}

static void pair_add(Trainer *t, int32_t l, int32_t r, int64_t delta, int32_t w, uint32_t merge) {
    int32_t p = pair_get(t, l, r);
    if (p < 0) return;
    t->pcount[p] += delta;
    if (delta > 0) {
        where_add(t, p, w);
        if (t->touched[p] != merge) {
            t->touched[p] = merge;
            t->new_pairs[t->n_new++] = p;
        }
    }
}

// Token byte strings: the set answers "is this already a token?".
static int tok_find(const Trainer *t, const unsigned char *s, size_t n) {
    size_t i = hash_bytes(s, n) & t->tmask;
    for (; t->tslot[i] >= 0; i = (i + 1) & t->tmask) {
        int u = t->tslot[i];
        if (t->toff[u + 1] - t->toff[u] == n && !memcmp(t->tb + t->toff[u], s, n)) return u;
    }
    return -1;
}

static int tok_add(Trainer *t, const unsigned char *a, size_t na, const unsigned char *b, size_t nb) {
    size_t at = t->toff[t->n_tok];
    if (at + na + nb > t->cap_tb) {
        size_t cap = t->cap_tb * 2 + na + nb;
        unsigned char *p = realloc(t->tb, cap);
        if (!p) return mhar_fail("out of memory for the tokens");
        t->tb = p;
        t->cap_tb = cap;
    }
    if (na) memmove(t->tb + at, a, na);
    if (nb) memmove(t->tb + at + na, b, nb);
    int id = t->n_tok++;
    t->toff[id + 1] = at + na + nb;
    size_t i = hash_bytes(t->tb + at, na + nb) & t->tmask;
    while (t->tslot[i] >= 0) i = (i + 1) & t->tmask;
    t->tslot[i] = id;
    return MHAR_OK;
}

// Apply merge (a, b) -> nt in word w, left to right, updating pair counts:
// each occurrence removes (prev, a), (a, b), (b, next) and adds (prev, nt),
// (nt, next). prev is read from the merged output, so back-to-back
// occurrences ("a b a b" -> "nt nt") net out correctly.
static void merge_word(Trainer *t, int32_t w, int32_t a, int32_t b, int32_t nt, uint32_t merge) {
    int32_t *s = t->sym + t->woff[w];
    int32_t len = t->wlen[w], o = 0;
    int64_t c = t->wcount[w];
    for (int32_t i = 0; i < len;) {
        if (i + 1 < len && s[i] == a && s[i + 1] == b) {
            if (o > 0) {
                pair_add(t, s[o - 1], a, -c, w, merge);
                pair_add(t, s[o - 1], nt, c, w, merge);
            }
            if (i + 2 < len) {
                pair_add(t, b, s[i + 2], -c, w, merge);
                pair_add(t, nt, s[i + 2], c, w, merge);
            }
            s[o++] = nt;
            i += 2;
        } else {
            s[o++] = s[i++];
        }
    }
    t->wlen[w] = o;
}

static int trainer_init(Trainer *t, const WordTable *wt, int V) {
    memset(t, 0, sizeof *t);
    t->n_words = wt->n;
    size_t nw = wt->n ? wt->n : 1;
    t->wcount = malloc(sizeof(int64_t) * nw);
    t->woff = malloc(sizeof(size_t) * nw);
    t->wlen = malloc(sizeof(int32_t) * nw);
    t->stamp = calloc(nw, sizeof(uint32_t));
    t->sym = malloc(sizeof(int32_t) * (wt->n_bytes ? wt->n_bytes : 1));
    t->cap_pairs = 1 << 16;
    t->key = malloc(sizeof(uint64_t) * t->cap_pairs);
    t->pcount = malloc(sizeof(int64_t) * t->cap_pairs);
    t->where = malloc(sizeof(WordList) * t->cap_pairs);
    t->touched = malloc(sizeof(uint32_t) * t->cap_pairs);
    t->new_pairs = malloc(sizeof(int32_t) * t->cap_pairs);
    t->cap_tb = 1 << 16;
    t->tb = malloc(t->cap_tb);
    t->toff = malloc(sizeof(size_t) * ((size_t)V + 1));
    t->tmask = hash_capacity((size_t)V) - 1;
    t->tslot = malloc(sizeof(int32_t) * (t->tmask + 1));
    if (!t->wcount || !t->woff || !t->wlen || !t->stamp || !t->sym || !t->key || !t->pcount || !t->where ||
        !t->touched || !t->new_pairs || !t->tb || !t->toff || !t->tslot)
        return mhar_fail("out of memory for training");
    memset(t->tslot, 0xFF, sizeof(int32_t) * (t->tmask + 1));
    if (pairs_rehash(t, 1 << 17)) return MHAR_ERR;
    // Words, in table order (deterministic: the table is built from a fixed
    // merge of fixed per-chunk tables); symbols start as bytes = ids 0..255.
    size_t w = 0, at = 0;
    for (size_t i = 0; i <= wt->mask; i++) {
        const WordEntry *e = &wt->e[i];
        if (!e->len) continue;
        t->wcount[w] = e->count;
        t->woff[w] = at;
        t->wlen[w] = (int32_t)e->len;
        for (uint32_t k = 0; k < e->len; k++) t->sym[at + k] = wt->bytes[e->off + k];
        at += e->len;
        w++;
    }
    t->toff[0] = 0;
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        if (tok_add(t, &byte, 1, NULL, 0)) return MHAR_ERR;
    }
    // Initial pair counts and lists.
    for (size_t k = 0; k < t->n_words; k++) {
        const int32_t *s = t->sym + t->woff[k];
        for (int32_t i = 0; i + 1 < t->wlen[k]; i++) {
            int32_t p = pair_get(t, s[i], s[i + 1]);
            if (p < 0) return MHAR_ERR;
            t->pcount[p] += t->wcount[k];
            where_add(t, p, (int32_t)k);
        }
        if (t->failed) return MHAR_ERR;
    }
    for (size_t p = 0; p < t->n_pairs; p++) heap_push(t, t->pcount[p], (int32_t)p);
    return t->failed;
}

// Learn merges until the vocabulary holds n_target tokens (bytes + merges)
// or no pair is left. Pairs whose bytes are already a token (the same string
// reached by another split, e.g. (ab, c) after (a, bc)) are refused, so every
// token has one byte string and one merge, and token id = 256 + merge rank:
// the form tiktoken's ranks need.
static int learn(Trainer *t, int n_target, int (*merges)[2], int *n_merges, int *banned, int verbose) {
    unsigned char *tmp = malloc(2 * (size_t)BPE_MAX_TOKEN_LEN);
    if (!tmp) return mhar_fail("out of memory");
    *n_merges = 0;
    *banned = 0;
    double t0 = now_seconds();
    while (t->n_tok < n_target && t->n_heap) {
        HeapEntry top = heap_pop(t);
        int32_t p = top.pair;
        if (top.count != t->pcount[p]) {  // stale: requeue with the current count
            if (t->pcount[p] > 0) heap_push(t, t->pcount[p], p);
            continue;
        }
        if (top.count <= 0) continue;
        int32_t a = (int32_t)(t->key[p] >> 32), b = (int32_t)(uint32_t)t->key[p];
        size_t na = t->toff[a + 1] - t->toff[a], nb = t->toff[b + 1] - t->toff[b];
        if (na + nb > BPE_MAX_TOKEN_LEN) { (*banned)++; continue; }
        memcpy(tmp, t->tb + t->toff[a], na);
        memcpy(tmp + na, t->tb + t->toff[b], nb);
        if (tok_find(t, tmp, na + nb) >= 0) { (*banned)++; continue; }
        int32_t nt = t->n_tok;
        if (tok_add(t, tmp, na, tmp + na, nb)) break;
        uint32_t merge = (uint32_t)*n_merges + 1;
        merges[*n_merges][0] = a;
        merges[*n_merges][1] = b;
        (*n_merges)++;
        t->n_new = 0;
        WordList list = t->where[p];
        t->where[p] = (WordList){NULL, 0, 0};  // the pair is gone: its list is not needed again
        for (int32_t k = 0; k < list.n && !t->failed; k++) {
            int32_t w = list.v[k];
            if (t->stamp[w] == merge) continue;
            t->stamp[w] = merge;
            merge_word(t, w, a, b, nt, merge);
        }
        free(list.v);
        t->pcount[p] = 0;
        for (size_t k = 0; k < t->n_new; k++)
            if (t->pcount[t->new_pairs[k]] > 0) heap_push(t, t->pcount[t->new_pairs[k]], t->new_pairs[k]);
        if (t->failed) break;
        if (verbose && (*n_merges % 1000 == 0))
            fprintf(stderr, "  %d merges (%.1fs), last count %lld\n", *n_merges, now_seconds() - t0,
                    (long long)top.count);
    }
    free(tmp);
    return t->failed;
}

// ---- driver ----

// A piece of the corpus to count: text[doc] from lo to hi.
typedef struct { size_t doc, lo, hi; } Span;
#define SPAN_BYTES ((size_t)1 << 20)

static int count_words(const unsigned char *const *text, const size_t *len, size_t n_docs, int pattern,
                       const Specials *sp, WordTable *out, uint64_t *words) {
    // Spans of about SPAN_BYTES, cut where the split allows (pretok_safe_cut),
    // so large files are counted in parallel too.
    size_t n_spans = 0, cap = 16;
    Span *span = malloc(sizeof(Span) * cap);
    if (!span) return mhar_fail("out of memory");
    for (size_t d = 0; d < n_docs; d++) {
        size_t lo = 0;
        while (lo < len[d]) {
            size_t hi = lo + SPAN_BYTES;
            while (hi < len[d] && !pretok_safe_cut(text[d], len[d], hi)) hi++;
            if (hi > len[d]) hi = len[d];
            if (n_spans == cap) {
                Span *s = realloc(span, sizeof(Span) * (cap *= 2));
                if (!s) { free(span); return mhar_fail("out of memory"); }
                span = s;
            }
            span[n_spans++] = (Span){d, lo, hi};
            lo = hi;
        }
    }
    int nt = omp_get_max_threads();
    WordTable *tab = calloc((size_t)nt, sizeof(WordTable));
    uint64_t *nwords = calloc((size_t)nt, sizeof(uint64_t));
    int rc = tab && nwords ? MHAR_OK : mhar_fail("out of memory");
    for (int k = 0; rc == MHAR_OK && k < nt; k++) rc = wt_init(&tab[k], 1 << 16);
    if (rc == MHAR_OK) {
#pragma omp parallel num_threads(nt)
        {
            int me = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
            for (size_t i = 0; i < n_spans; i++) {
                const Span *s = &span[i];
                // Spans end at safe cuts (a newline, then a letter): inside a
                // special token only if its text holds such a pair, which
                // <|endoftext|> does not.
                count_text(&tab[me], pattern, sp, text[s->doc] + s->lo, s->hi - s->lo, &nwords[me]);
            }
        }
        for (int k = 0; k < nt; k++) {
            if (tab[k].failed) rc = MHAR_ERR;
            *words += nwords[k];
        }
    }
    // Merge the thread tables into the first, in thread order.
    for (int k = 1; rc == MHAR_OK && k < nt; k++) {
        for (size_t i = 0; i <= tab[k].mask; i++) {
            const WordEntry *e = &tab[k].e[i];
            if (e->len) wt_add(&tab[0], tab[k].bytes + e->off, e->len, e->hash, e->count);
        }
        if (tab[0].failed) rc = MHAR_ERR;
    }
    if (rc == MHAR_OK) {
        *out = tab[0];
        tab[0] = (WordTable){0};
    }
    for (int k = 0; tab && k < nt; k++) wt_free(&tab[k]);
    free(tab);
    free(nwords);
    free(span);
    return rc;
}

int bpe_train_texts(const unsigned char *const *text, const size_t *len, size_t n_docs, const BpeTrainOptions *o,
                    Bpe *out, BpeTrainStats *st) {
    memset(out, 0, sizeof *out);
    int V = o->vocab_size;
    if (V < 256 + o->n_special || V > BPE_MAX_VOCAB)
        return mhar_fail("vocabulary size %d: need at least 256 byte tokens + %d special tokens, at most %d", V,
                         o->n_special, BPE_MAX_VOCAB);
    memset(st, 0, sizeof *st);
    Specials sp;
    if (specials_init(&sp, o)) return MHAR_ERR;
    for (size_t d = 0; d < n_docs; d++) st->bytes += len[d];
    double t0 = now_seconds();
    WordTable wt;
    if (count_words(text, len, n_docs, o->pattern, &sp, &wt, &st->words)) return MHAR_ERR;
    st->unique_words = wt.n;
    st->seconds_count = now_seconds() - t0;
    if (o->verbose)
        fprintf(stderr, "counted %llu pieces, %llu distinct, in %.2fs\n", (unsigned long long)st->words,
                (unsigned long long)wt.n, st->seconds_count);
    t0 = now_seconds();
    int n_target = V - o->n_special;
    Trainer t;
    int (*merges)[2] = malloc(sizeof(int[2]) * (size_t)n_target);
    int rc = merges ? trainer_init(&t, &wt, n_target) : mhar_fail("out of memory");
    wt_free(&wt);
    int n_merges = 0;
    if (rc == MHAR_OK) rc = learn(&t, n_target, merges, &n_merges, &st->banned, o->verbose);
    st->merges = n_merges;
    st->seconds_merge = now_seconds() - t0;
    if (rc == MHAR_OK) {
        // The model: bytes, merges (id 256 + rank), then the specials.
        int n_tok = t.n_tok, Vout = n_tok + o->n_special;
        size_t *off = malloc(sizeof(size_t) * ((size_t)Vout + 1));
        unsigned char *bytes = malloc(t.toff[n_tok] + (size_t)o->n_special * 256 + 1);
        int *special = malloc(sizeof(int) * ((size_t)o->n_special + 1));
        if (!off || !bytes || !special) rc = mhar_fail("out of memory");
        if (rc == MHAR_OK) {
            memcpy(off, t.toff, sizeof(size_t) * ((size_t)n_tok + 1));
            memcpy(bytes, t.tb, t.toff[n_tok]);
            for (int k = 0; k < o->n_special; k++) {
                size_t l = sp.len[k] < 256 ? sp.len[k] : 256;
                memcpy(bytes + off[n_tok + k], o->special[k], l);
                off[n_tok + k + 1] = off[n_tok + k] + l;
                special[k] = n_tok + k;
            }
            rc = bpe_build(out, "trained tokenizer", Vout, bytes, off, n_merges, (const int (*)[2])merges,
                           o->n_special, special, pretok_pattern(o->pattern), 0);
        }
        free(off);
        free(bytes);
        free(special);
    }
    trainer_free(&t);
    free(merges);
    return rc;
}

int bpe_train_files(const FileList *files, const BpeTrainOptions *o, Bpe *out, BpeTrainStats *st) {
    memset(st, 0, sizeof *st);
    double t0 = now_seconds();
    unsigned char **text = calloc(files->n + 1, sizeof(unsigned char *));
    size_t *len = calloc(files->n + 1, sizeof(size_t));
    if (!text || !len) { free(text); free(len); return mhar_fail("out of memory"); }
    int rc = MHAR_OK;
    char err[1024] = "";
    size_t n_empty = 0, n_binary = 0;
    // Reading is parallel too: many small files cost more in system calls than in bytes.
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : n_empty, n_binary)
    for (size_t i = 0; i < files->n; i++) {
        unsigned char *s;
        size_t n;
        if (read_all(files->path[i], &s, &n)) {
#pragma omp critical
            {
                if (rc == MHAR_OK) snprintf(err, sizeof err, "%s", mhar_error());
                rc = MHAR_ERR;
            }
            continue;
        }
        if (n == 0 || is_binary(s, n)) {
            n_empty += n == 0;
            n_binary += n != 0;
            free(s);
            continue;
        }
        text[i] = s;
        len[i] = n;
    }
    size_t kept = 0;
    for (size_t i = 0; i < files->n; i++) {
        if (text[i]) { text[kept] = text[i]; len[kept] = len[i]; kept++; }
    }
    st->seconds_read = now_seconds() - t0;
    st->files = kept;
    st->skipped_binary = n_binary;
    st->skipped_empty = n_empty;
    if (rc) mhar_fail("%s", err);
    if (rc == MHAR_OK && kept == 0)
        rc = mhar_fail("no text to train on: %zu files, %zu empty, %zu binary (NUL bytes)", files->n, n_empty,
                       n_binary);
    if (rc == MHAR_OK) {
        BpeTrainStats s2 = *st;
        rc = bpe_train_texts((const unsigned char *const *)text, len, kept, o, out, &s2);
        s2.files = st->files;
        s2.skipped_binary = st->skipped_binary;
        s2.skipped_empty = st->skipped_empty;
        s2.seconds_read = st->seconds_read;
        *st = s2;
    }
    for (size_t i = 0; i < kept; i++) free(text[i]);
    free(text);
    free(len);
    return rc;
}

int bpe_train_corpus(const char *corpus, const BpeTrainOptions *o, Bpe *out, BpeTrainStats *st, char *used,
                     size_t cap) {
    FileList fl;
    if (path_join(used, cap, corpus, "train")) return MHAR_ERR;
    if (filelist_scan(used, &fl)) {  // no train/ folder: the whole directory
        if (copy_str(used, cap, corpus) || filelist_scan(corpus, &fl)) return MHAR_ERR;
    }
    int rc = bpe_train_files(&fl, o, out, st);
    filelist_free(&fl);
    return rc;
}
