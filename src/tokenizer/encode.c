// Encoding: special-token matching, the pre-split, and BPE merges per piece
// with a per-thread cache of encoded pieces (text repeats its words, so most
// pieces are a hash lookup). Long texts are cut into chunks at safe points
// and encoded on all threads.
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "bpe.h"
#include "hash.h"
#include "normalize.h"
#include "pretokenize.h"
#include "textfiles.h"

// Cache limits: pieces longer than CACHE_MAX_PIECE bytes are rare and not
// worth keeping; when an arena or the table fills, the cache starts over.
#define CACHE_SLOTS (1u << 18)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_BYTES (8u << 20)
#define CACHE_IDS (2u << 20)
#define CACHE_MAX_PIECE 256
// Pieces up to this many bytes merge by scanning an array (fast for short
// pieces); longer ones use a heap, O(n log n).
#define SCAN_MAX 64

typedef struct { uint64_t hash; uint32_t off, len, ids, n_ids; } CacheEntry;

typedef struct { int rank, pos, left, right, newid; } HeapItem;

struct BpeEncoder {
    const Bpe *b;
    CacheEntry *slot;        // [CACHE_SLOTS], len == 0 means empty
    unsigned char *bytes;    // [CACHE_BYTES] piece bytes of the entries
    int *ids;                // [CACHE_IDS] their ids
    uint32_t n_entries, n_bytes, n_ids;
    // scratch for one piece, grown to the longest piece seen
    size_t cap;
    int *sym, *rank, *newid, *prev, *next;
    HeapItem *heap;
    Nfc nfc;                 // normalized text, for tokenizers with BPE_NFC
};

BpeEncoder *bpe_encoder_new(const Bpe *b) {
    BpeEncoder *e = calloc(1, sizeof *e);
    if (!e) { mhar_fail("out of memory"); return NULL; }
    e->b = b;
    e->slot = calloc(CACHE_SLOTS, sizeof(CacheEntry));
    e->bytes = malloc(CACHE_BYTES);
    e->ids = malloc(sizeof(int) * CACHE_IDS);
    if (!e->slot || !e->bytes || !e->ids) {
        bpe_encoder_free(e);
        mhar_fail("out of memory for the encoder cache");
        return NULL;
    }
    return e;
}

void bpe_encoder_free(BpeEncoder *e) {
    if (!e) return;
    free(e->slot);
    free(e->bytes);
    free(e->ids);
    free(e->sym);
    free(e->rank);
    free(e->newid);
    free(e->prev);
    free(e->next);
    free(e->heap);
    nfc_free(&e->nfc);
    free(e);
}

static int grow_scratch(BpeEncoder *e, size_t n) {
    if (n <= e->cap) return MHAR_OK;
    size_t c = e->cap ? e->cap : 256;
    while (c < n) c *= 2;
    int *p[5];
    int **dst[5] = {&e->sym, &e->rank, &e->newid, &e->prev, &e->next};
    for (int k = 0; k < 5; k++) {
        p[k] = realloc(*dst[k], sizeof(int) * c);
        if (!p[k]) return mhar_fail("out of memory for a piece of %zu bytes", n);
        *dst[k] = p[k];
    }
    HeapItem *h = realloc(e->heap, sizeof(HeapItem) * 3 * c);
    if (!h) return mhar_fail("out of memory for a piece of %zu bytes", n);
    e->heap = h;
    e->cap = c;
    return MHAR_OK;
}

// Rank and result of merging (l, r); INT_MAX rank if they do not merge.
static inline int pair_lookup(const Bpe *b, int l, int r, int *newid) {
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t i = hash_mix(key) & b->pair_mask;
    for (;; i = (i + 1) & b->pair_mask) {
        uint64_t k = b->pair_key[i];
        if (k == key) { *newid = b->pair_new[i]; return b->pair_rank[i]; }
        if (k == UINT64_MAX) return INT_MAX;
    }
}

// Short pieces: ids and pair ranks in arrays; each step takes the lowest
// rank (leftmost on ties), merges it and closes the gap.
static size_t merge_scan(const Bpe *b, int *sym, int *rank, int *nw, size_t m) {
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_lookup(b, sym[i], sym[i + 1], &nw[i]);
    while (m > 1) {
        int best = INT_MAX;
        size_t k = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] < best) { best = rank[i]; k = i; }
        if (best == INT_MAX) break;
        sym[k] = nw[k];
        memmove(sym + k + 1, sym + k + 2, sizeof(int) * (m - k - 2));
        if (k + 3 <= m) {  // pairs after the merged one shift down by one
            memmove(rank + k + 1, rank + k + 2, sizeof(int) * (m - k - 3));
            memmove(nw + k + 1, nw + k + 2, sizeof(int) * (m - k - 3));
        }
        m--;
        if (k + 1 < m) rank[k] = pair_lookup(b, sym[k], sym[k + 1], &nw[k]);
        if (k > 0) rank[k - 1] = pair_lookup(b, sym[k - 1], sym[k], &nw[k - 1]);
    }
    return m;
}

// Min-heap on (rank, pos): the same order as the scan, in O(log n) a step.
static inline int heap_less(const HeapItem *a, const HeapItem *c) {
    return a->rank < c->rank || (a->rank == c->rank && a->pos < c->pos);
}
static void heap_push(HeapItem *h, size_t *n, HeapItem x) {
    size_t i = (*n)++;
    while (i > 0 && heap_less(&x, &h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = x;
}
static HeapItem heap_pop(HeapItem *h, size_t *n) {
    HeapItem top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static void push_pair(const Bpe *b, HeapItem *h, size_t *nh, const int *sym, int l, int r) {
    int nw, rk = pair_lookup(b, sym[l], sym[r], &nw);
    if (rk != INT_MAX) heap_push(h, nh, (HeapItem){rk, l, sym[l], sym[r], nw});
}

// Long pieces: a linked list of symbols and a heap of candidate merges. An
// entry is stale when its pair no longer stands at pos; ids at a position
// only ever grow into longer tokens, so comparing the two ids is exact.
static size_t merge_heap(BpeEncoder *e, size_t m) {
    const Bpe *b = e->b;
    int *sym = e->sym, *prev = e->prev, *next = e->next;
    HeapItem *h = e->heap;
    size_t nh = 0;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int)i - 1;
        next[i] = i + 1 < m ? (int)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) push_pair(b, h, &nh, sym, (int)i, (int)i + 1);
    while (nh) {
        HeapItem x = heap_pop(h, &nh);
        int p = x.pos, q = next[p];
        if (sym[p] != x.left || q < 0 || sym[q] != x.right) continue;
        sym[p] = x.newid;
        sym[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0) push_pair(b, h, &nh, sym, prev[p], p);
        if (next[p] >= 0) push_pair(b, h, &nh, sym, p, next[p]);
    }
    size_t k = 0;
    for (int i = 0; i >= 0; i = next[i]) sym[k++] = sym[i];
    return k;
}

// BPE of one piece into e->sym; returns the number of ids.
static int encode_piece(BpeEncoder *e, const unsigned char *s, size_t n, size_t *count) {
    const Bpe *b = e->b;
    if (grow_scratch(e, n)) return MHAR_ERR;
    if (b->flags & BPE_IGNORE_MERGES) {
        int t = n <= BPE_MAX_TOKEN_LEN ? bpe_token_id(b, s, n) : -1;
        if (t >= 0) { e->sym[0] = t; *count = 1; return MHAR_OK; }
    }
    for (size_t i = 0; i < n; i++) e->sym[i] = b->byte_id[s[i]];
    *count = n <= SCAN_MAX ? merge_scan(b, e->sym, e->rank, e->newid, n) : merge_heap(e, n);
    return MHAR_OK;
}

int bpe_encode_piece(BpeEncoder *e, const unsigned char *s, size_t n, IntVec *out) {
    size_t m;
    if (encode_piece(e, s, n, &m)) return MHAR_ERR;
    return intvec_push(out, e->sym, m);
}

static void cache_clear(BpeEncoder *e) {
    memset(e->slot, 0, sizeof(CacheEntry) * CACHE_SLOTS);
    e->n_entries = e->n_bytes = e->n_ids = 0;
}

// A piece through the cache.
static int piece(BpeEncoder *e, const unsigned char *s, size_t n, IntVec *out) {
    if (n == 1) return intvec_push(out, &e->b->byte_id[s[0]], 1);
    if (n > CACHE_MAX_PIECE) return bpe_encode_piece(e, s, n, out);
    uint64_t h = hash_bytes(s, n);
    size_t i = h & (CACHE_SLOTS - 1);
    for (; e->slot[i].len; i = (i + 1) & (CACHE_SLOTS - 1)) {
        CacheEntry *c = &e->slot[i];
        if (c->hash == h && c->len == n && !memcmp(e->bytes + c->off, s, n))
            return intvec_push(out, e->ids + c->ids, c->n_ids);
    }
    size_t m;
    if (encode_piece(e, s, n, &m)) return MHAR_ERR;
    if (e->n_entries >= CACHE_MAX_ENTRIES || e->n_bytes + n > CACHE_BYTES || e->n_ids + m > CACHE_IDS) {
        cache_clear(e);
        for (i = h & (CACHE_SLOTS - 1); e->slot[i].len; i = (i + 1) & (CACHE_SLOTS - 1)) {}
    }
    e->slot[i] = (CacheEntry){h, e->n_bytes, (uint32_t)n, e->n_ids, (uint32_t)m};
    memcpy(e->bytes + e->n_bytes, s, n);
    memcpy(e->ids + e->n_ids, e->sym, sizeof(int) * m);
    e->n_bytes += (uint32_t)n;
    e->n_ids += (uint32_t)m;
    e->n_entries++;
    return intvec_push(out, e->sym, m);
}

// Ordinary text (no special tokens): split, then each piece.
static int encode_ordinary(BpeEncoder *e, const unsigned char *s, size_t n, IntVec *out) {
    int pat = e->b->pattern;
    for (size_t i = 0; i < n;) {
        size_t j = pretok_next(pat, s, n, i);
        if (piece(e, s + i, j - i, out)) return MHAR_ERR;
        i = j;
    }
    return MHAR_OK;
}

// A segment between special tokens: NFC first when the tokenizer asks for it
// (ASCII text is already NFC).
static int encode_segment(BpeEncoder *e, const unsigned char *s, size_t n, IntVec *out) {
    if (e->b->flags & BPE_NFC) {
        size_t i = 0;
        while (i < n && s[i] < 0x80) i++;
        if (i < n) {
            if (nfc_normalize(&e->nfc, s, n)) return MHAR_ERR;
            return encode_ordinary(e, e->nfc.out, e->nfc.len, out);
        }
    }
    return encode_ordinary(e, s, n, out);
}

// The special token that starts at s[i], longest first; -1 if none.
static int special_at(const Bpe *b, const unsigned char *s, size_t n, size_t i, size_t *len) {
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < b->n_special; k++) {
        int t = b->special[k];
        size_t l = bpe_token_len(b, t);
        if (l > best_len && l <= n - i && !memcmp(s + i, bpe_token(b, t), l)) { best = t; best_len = l; }
    }
    *len = best_len;
    return best;
}

int bpe_encode_with(BpeEncoder *e, const unsigned char *s, size_t n, int specials, IntVec *out) {
    const Bpe *b = e->b;
    if (!specials || b->n_special == 0) return encode_segment(e, s, n, out);
    // Which bytes can start a special token: a cheap filter before the
    // comparisons (most texts hold few '<').
    unsigned char first[256] = {0};
    for (int k = 0; k < b->n_special; k++) first[bpe_token(b, b->special[k])[0]] = 1;
    size_t seg = 0;
    for (size_t i = 0; i < n; i++) {
        if (!first[s[i]]) continue;
        size_t len;
        int t = special_at(b, s, n, i, &len);
        if (t < 0) continue;
        if (encode_segment(e, s + seg, i - seg, out) || intvec_push(out, &t, 1)) return MHAR_ERR;
        i += len - 1;
        seg = i + 1;
    }
    return encode_segment(e, s + seg, n - seg, out);
}

// A cut for parallel encoding: safe for the split (pretok_safe_cut), and no
// special token occurrence straddles it.
static int safe_cut(const Bpe *b, const unsigned char *s, size_t n, size_t j, int specials) {
    if (!pretok_safe_cut(s, n, j)) return 0;
    if (!specials) return 1;
    for (int k = 0; k < b->n_special; k++) {
        int t = b->special[k];
        size_t l = bpe_token_len(b, t);
        size_t lo = j >= l - 1 ? j - (l - 1) : 0, hi = j + l - 1 < n ? j + l - 1 : n;
        if (l > 1 && hi - lo >= l && memmem(s + lo, hi - lo, bpe_token(b, t), l)) return 0;
    }
    return 1;
}

#define CHUNK_BYTES ((size_t)1 << 20)

int bpe_encode(const Bpe *b, const unsigned char *s, size_t n, int specials, IntVec *out) {
    // Chunk boundaries: the first safe cut at or after each CHUNK_BYTES step.
    size_t n_cuts = 1, cap = n / CHUNK_BYTES + 2;
    size_t *cut = malloc(sizeof(size_t) * (cap + 1));
    if (!cut) return mhar_fail("out of memory");
    cut[0] = 0;
    for (size_t j = CHUNK_BYTES; j < n; j += CHUNK_BYTES) {
        while (j < n && !safe_cut(b, s, n, j, specials)) j++;
        if (j >= n) break;
        cut[n_cuts++] = j;
    }
    cut[n_cuts] = n;
    IntVec *part = calloc(n_cuts, sizeof(IntVec));
    int rc = part ? MHAR_OK : mhar_fail("out of memory");
    if (rc == MHAR_OK) {
        int nt = omp_get_max_threads();
        if ((size_t)nt > n_cuts) nt = (int)n_cuts;
#pragma omp parallel num_threads(nt)
        {
            BpeEncoder *e = bpe_encoder_new(b);
            if (!e) {
#pragma omp atomic write
                rc = MHAR_ERR;
            }
#pragma omp for schedule(dynamic, 1)
            for (size_t c = 0; c < n_cuts; c++) {
                if (e && bpe_encode_with(e, s + cut[c], cut[c + 1] - cut[c], specials, &part[c])) {
#pragma omp atomic write
                    rc = MHAR_ERR;
                }
            }
            bpe_encoder_free(e);
        }
    }
    for (size_t c = 0; part && c < n_cuts; c++) {
        if (rc == MHAR_OK) rc = intvec_push(out, part[c].v, part[c].n);
        intvec_free(&part[c]);
    }
    free(part);
    free(cut);
    return rc;
}

int bpe_encode_file(const Bpe *b, const char *path, int specials, int binary, IntVec *out, size_t *bytes) {
    unsigned char *text = NULL;
    size_t n = 0;
    int rc = read_all(path, &text, &n);
    if (!rc && n == 0) rc = mhar_fail("%s: empty file, nothing to encode", path);
    if (!rc && !binary && is_binary(text, n))
        rc = mhar_fail("%s: not a text file (NUL byte at offset %zu); --binary encodes it anyway", path,
                       (size_t)((unsigned char *)memchr(text, 0, n) - text));
    if (!rc) rc = bpe_encode(b, text, n, specials, out);
    if (!rc && out->n < 2) {
        int eot = bpe_eot_id(b);
        if (eot < 0) rc = mhar_fail("%s: encodes to a single token; a token file needs 2", path);
        else rc = intvec_push(out, &eot, 1);
    }
    free(text);
    *bytes = n;
    return rc;
}
