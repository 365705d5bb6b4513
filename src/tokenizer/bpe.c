// The BPE model: building and validating it, its file, lookups, decoding.
// Encoding is in encode.c.
#include "bpe.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../io/atomic.h"
#include "../util/common.h"
#include "hash.h"
#include "pretokenize.h"

static const char BPE_MAGIC[8] = {'M', 'H', 'A', 'R', 'B', 'P', 'E', '\0'};
#define BPE_HEADER 32

void bpe_free(Bpe *b) {
    free(b->tok_off);
    free(b->tok_bytes);
    free(b->is_special);
    free(b->special);
    free(b->merges);
    free(b->pair_key);
    free(b->pair_rank);
    free(b->pair_new);
    free(b->vocab_slot);
    memset(b, 0, sizeof *b);
}

int bpe_token_id(const Bpe *b, const unsigned char *s, size_t len) {
    size_t i = hash_bytes(s, len) & b->vocab_mask;
    for (;; i = (i + 1) & b->vocab_mask) {
        int t = b->vocab_slot[i];
        if (t < 0) return -1;
        if (bpe_token_len(b, t) == len && !memcmp(bpe_token(b, t), s, len)) return t;
    }
}

int bpe_special_id(const Bpe *b, const char *text) {
    size_t len = strlen(text);
    for (int k = 0; k < b->n_special; k++) {
        int t = b->special[k];
        if (bpe_token_len(b, t) == len && !memcmp(bpe_token(b, t), text, len)) return t;
    }
    return -1;
}

int bpe_eot_id(const Bpe *b) {
    int t = bpe_special_id(b, "<|endoftext|>");
    return t >= 0 ? t : bpe_special_id(b, "<|end_of_text|>");
}

// Slot of a merge pair: the pair's slot, or the empty slot where it would go.
static size_t pair_slot(const Bpe *b, uint64_t key) {
    size_t i = hash_mix(key) & b->pair_mask;
    while (b->pair_key[i] != UINT64_MAX && b->pair_key[i] != key) i = (i + 1) & b->pair_mask;
    return i;
}

// Validate the parts and fill the lookup tables. On error b is freed.
static int build_tables(Bpe *b, const char *what) {
    int V = b->vocab_size;
    for (int k = 0; k < b->n_special; k++) {
        int t = b->special[k];
        if (t < 0 || t >= V)
            return mhar_fail("%s: special token %d has id %d, outside the vocabulary 0..%d", what, k, t, V - 1);
        if (b->is_special[t]) return mhar_fail("%s: special id %d is listed twice", what, t);
        b->is_special[t] = 1;
        if ((int)bpe_token_len(b, t) > b->max_special_len) b->max_special_len = (int)bpe_token_len(b, t);
    }
    b->vocab_mask = hash_capacity((size_t)V) - 1;
    b->vocab_slot = malloc(sizeof(int) * (b->vocab_mask + 1));
    if (!b->vocab_slot) return mhar_fail("%s: out of memory", what);
    memset(b->vocab_slot, 0xFF, sizeof(int) * (b->vocab_mask + 1));
    for (int t = 0; t < V; t++) {
        if (b->is_special[t]) continue;
        size_t len = bpe_token_len(b, t);
        const unsigned char *s = bpe_token(b, t);
        size_t i = hash_bytes(s, len) & b->vocab_mask;
        for (; b->vocab_slot[i] >= 0; i = (i + 1) & b->vocab_mask) {
            int u = b->vocab_slot[i];
            if (bpe_token_len(b, u) == len && !memcmp(bpe_token(b, u), s, len))
                return mhar_fail("%s: tokens %d and %d have the same bytes", what, u, t);
        }
        b->vocab_slot[i] = t;
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        b->byte_id[c] = bpe_token_id(b, &byte, 1);
        if (b->byte_id[c] < 0)
            return mhar_fail("%s: no token for the single byte 0x%02x; a byte-level BPE needs all 256", what, c);
    }
    b->pair_mask = hash_capacity((size_t)b->n_merges) - 1;
    size_t cap = b->pair_mask + 1;
    b->pair_key = malloc(sizeof(uint64_t) * cap);
    b->pair_rank = malloc(sizeof(int) * cap);
    b->pair_new = malloc(sizeof(int) * cap);
    unsigned char *tmp = malloc(2 * (size_t)BPE_MAX_TOKEN_LEN);
    if (!b->pair_key || !b->pair_rank || !b->pair_new || !tmp) {
        free(tmp);
        return mhar_fail("%s: out of memory", what);
    }
    memset(b->pair_key, 0xFF, sizeof(uint64_t) * cap);
    int rc = MHAR_OK;
    for (int r = 0; r < b->n_merges && rc == MHAR_OK; r++) {
        int l = b->merges[r][0], rt = b->merges[r][1];
        if (l < 0 || l >= V || rt < 0 || rt >= V) {
            rc = mhar_fail("%s: merge %d names token %d, outside the vocabulary 0..%d", what, r,
                           l < 0 || l >= V ? l : rt, V - 1);
            break;
        }
        if (b->is_special[l] || b->is_special[rt]) {
            rc = mhar_fail("%s: merge %d names special token %d", what, r, b->is_special[l] ? l : rt);
            break;
        }
        size_t ll = bpe_token_len(b, l), lr = bpe_token_len(b, rt);
        memcpy(tmp, bpe_token(b, l), ll);
        memcpy(tmp + ll, bpe_token(b, rt), lr);
        int t = ll + lr <= BPE_MAX_TOKEN_LEN ? bpe_token_id(b, tmp, ll + lr) : -1;
        if (t < 0) {
            rc = mhar_fail("%s: merge %d (%d, %d): the merged bytes are not a token of the vocabulary",
                           what, r, l, rt);
            break;
        }
        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rt;
        size_t i = pair_slot(b, key);
        if (b->pair_key[i] == key) {
            rc = mhar_fail("%s: merge %d (%d, %d) repeats merge %d", what, r, l, rt, b->pair_rank[i]);
            break;
        }
        b->pair_key[i] = key;
        b->pair_rank[i] = r;
        b->pair_new[i] = t;
    }
    free(tmp);
    return rc;
}

int bpe_build(Bpe *b, const char *what, int V, const unsigned char *bytes, const size_t *off,
              int M, const int (*merges)[2], int S, const int *special, const char *pattern,
              unsigned flags) {
    memset(b, 0, sizeof *b);
    if (V < 256 || V > BPE_MAX_VOCAB)
        return mhar_fail("%s: vocabulary size %d, expected 256..%d", what, V, BPE_MAX_VOCAB);
    if (M < 0 || M > V) return mhar_fail("%s: %d merges for a vocabulary of %d", what, M, V);
    if (S < 0 || S > V - 256)
        return mhar_fail("%s: %d special tokens leave fewer than the 256 byte tokens in a vocabulary of %d",
                         what, S, V);
    b->pattern = pretok_pattern_id(pattern);
    if (b->pattern == PAT_NONE)
        return mhar_fail("%s: unsupported split pattern \"%.200s\"; supported are exactly the GPT-2, "
                         "Llama-3 and Qwen2 patterns (see pretokenize.h)", what, pattern);
    if (flags & ~(BPE_IGNORE_MERGES | BPE_NFC)) return mhar_fail("%s: unknown flags 0x%x", what, flags);
    b->vocab_size = V;
    b->n_merges = M;
    b->n_special = S;
    b->flags = flags;
    b->tok_off = malloc(sizeof(size_t) * ((size_t)V + 1));
    b->tok_bytes = malloc(off[V] ? off[V] : 1);
    b->is_special = calloc((size_t)V, 1);
    b->special = malloc(sizeof(int) * ((size_t)S + 1));
    b->merges = malloc(sizeof(int[2]) * ((size_t)M + 1));
    if (!b->tok_off || !b->tok_bytes || !b->is_special || !b->special || !b->merges) {
        bpe_free(b);
        return mhar_fail("%s: out of memory", what);
    }
    for (int t = 0; t < V; t++) {
        size_t len = off[t + 1] - off[t];
        if (off[t + 1] < off[t] || len < 1 || len > BPE_MAX_TOKEN_LEN) {
            bpe_free(b);
            return mhar_fail("%s: token %d has length %zu, expected 1..%d", what, t,
                             off[t + 1] < off[t] ? 0 : len, BPE_MAX_TOKEN_LEN);
        }
    }
    memcpy(b->tok_off, off, sizeof(size_t) * ((size_t)V + 1));
    memcpy(b->tok_bytes, bytes, off[V]);
    if (S) memcpy(b->special, special, sizeof(int) * (size_t)S);
    if (M) memcpy(b->merges, merges, sizeof(int[2]) * (size_t)M);
    if (build_tables(b, what)) {
        bpe_free(b);
        return MHAR_ERR;
    }
    return MHAR_OK;
}

// ---- file ----

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// A bounds-checked reader over the file image: every read names what it was
// reading when the file ends early.
typedef struct { const unsigned char *p; size_t n, at; const char *path; } Reader;

static int take(Reader *r, size_t len, const char *field, const unsigned char **out) {
    if (len > r->n - r->at)
        return mhar_fail("%s: truncated: %s needs %zu bytes at offset %zu, the file has %zu", r->path,
                         field, len, r->at, r->n);
    *out = r->p + r->at;
    r->at += len;
    return MHAR_OK;
}

static int take_u32(Reader *r, const char *field, uint32_t *v) {
    const unsigned char *p = NULL;
    if (take(r, 4, field, &p)) return MHAR_ERR;
    *v = get_u32(p);
    return MHAR_OK;
}

static int parse(Reader *r, Bpe *b) {
    const unsigned char *h = NULL;
    if (r->n == 0) return mhar_fail("%s: empty file, not an mhar tokenizer", r->path);
    if (r->n < 8 || memcmp(r->p, BPE_MAGIC, 8) != 0)
        return mhar_fail("%s: bad magic, not an mhar tokenizer file (expected \"MHARBPE\")", r->path);
    if (take(r, BPE_HEADER, "the 32-byte header", &h)) return MHAR_ERR;
    uint32_t version = get_u32(h + 8), V = get_u32(h + 12), M = get_u32(h + 16), S = get_u32(h + 20);
    uint32_t P = get_u32(h + 24), flags = get_u32(h + 28);
    if (version != 1) return mhar_fail("%s: version %" PRIu32 ", expected 1", r->path, version);
    if (V < 256 || V > BPE_MAX_VOCAB)
        return mhar_fail("%s: vocab_size %" PRIu32 ", expected 256..%d", r->path, V, BPE_MAX_VOCAB);
    if (M > V || S > V - 256)
        return mhar_fail("%s: inconsistent sizes: vocab_size %" PRIu32 " with %" PRIu32 " merges and %" PRIu32
                         " special tokens", r->path, V, M, S);
    if (P == 0 || P > 4096) return mhar_fail("%s: pattern length %" PRIu32 ", expected 1..4096", r->path, P);
    const unsigned char *pat = NULL;
    if (take(r, P, "the split pattern", &pat)) return MHAR_ERR;
    char pattern[4097];
    memcpy(pattern, pat, P);
    pattern[P] = '\0';
    if (strlen(pattern) != P) return mhar_fail("%s: the split pattern contains a NUL byte", r->path);
    // The sizes come from the file: before allocating for them, check that
    // the file can hold that much (a token record is at least 5 bytes, a
    // merge 8, a special id 4), so a corrupt header is refused, not allocated.
    uint64_t least = (uint64_t)V * 5 + (uint64_t)M * 8 + (uint64_t)S * 4;
    if (least > r->n - r->at)
        return mhar_fail("%s: truncated: vocab_size %" PRIu32 ", %" PRIu32 " merges and %" PRIu32 " special "
                         "tokens need at least %" PRIu64 " bytes after the pattern, the file has %zu", r->path,
                         V, M, S, least, r->n - r->at);
    // Token records: lengths first, so the byte buffer is allocated once.
    size_t *off = malloc(sizeof(size_t) * ((size_t)V + 1));
    int (*merges)[2] = malloc(sizeof(int[2]) * ((size_t)M + 1));
    int *special = malloc(sizeof(int) * ((size_t)S + 1));
    unsigned char *bytes = NULL;
    int rc = off && merges && special ? MHAR_OK : mhar_fail("%s: out of memory", r->path);
    size_t start = r->at;
    off[0] = 0;
    for (uint32_t t = 0; rc == MHAR_OK && t < V; t++) {
        uint32_t len;
        char field[64];
        snprintf(field, sizeof field, "token %" PRIu32 "'s length", t);
        rc = take_u32(r, field, &len);
        if (rc == MHAR_OK && (len < 1 || len > BPE_MAX_TOKEN_LEN))
            rc = mhar_fail("%s: token %" PRIu32 " has length %" PRIu32 ", expected 1..%d", r->path, t, len,
                           BPE_MAX_TOKEN_LEN);
        const unsigned char *skip;
        snprintf(field, sizeof field, "token %" PRIu32 "'s bytes", t);
        if (rc == MHAR_OK) rc = take(r, len, field, &skip);
        if (rc == MHAR_OK) off[t + 1] = off[t] + len;
    }
    if (rc == MHAR_OK) {
        bytes = malloc(off[V] ? off[V] : 1);
        if (!bytes) rc = mhar_fail("%s: out of memory", r->path);
    }
    if (rc == MHAR_OK) {
        const unsigned char *p = r->p + start;
        for (uint32_t t = 0; t < V; t++) {
            size_t len = off[t + 1] - off[t];
            memcpy(bytes + off[t], p + 4, len);
            p += 4 + len;
        }
    }
    for (uint32_t k = 0; rc == MHAR_OK && k < M; k++) {
        uint32_t l, rt;
        char field[48];
        snprintf(field, sizeof field, "merge %" PRIu32, k);
        rc = take_u32(r, field, &l);
        if (rc == MHAR_OK) rc = take_u32(r, field, &rt);
        if (rc == MHAR_OK && (l >= V || rt >= V))
            rc = mhar_fail("%s: merge %" PRIu32 " names token %" PRIu32 ", outside the vocabulary 0..%" PRIu32,
                           r->path, k, l >= V ? l : rt, V - 1);
        if (rc == MHAR_OK) { merges[k][0] = (int)l; merges[k][1] = (int)rt; }
    }
    for (uint32_t k = 0; rc == MHAR_OK && k < S; k++) {
        uint32_t t;
        rc = take_u32(r, "a special token id", &t);
        if (rc == MHAR_OK && t >= V)
            rc = mhar_fail("%s: special token %" PRIu32 " has id %" PRIu32 ", outside the vocabulary", r->path, k, t);
        if (rc == MHAR_OK) special[k] = (int)t;
    }
    if (rc == MHAR_OK && r->at != r->n)
        rc = mhar_fail("%s: %zu trailing bytes after the %" PRIu32 " special token ids", r->path, r->n - r->at, S);
    if (rc == MHAR_OK)
        rc = bpe_build(b, r->path, (int)V, bytes, off, (int)M, (const int (*)[2])merges, (int)S, special,
                       pattern, flags);
    free(off);
    free(merges);
    free(special);
    free(bytes);
    return rc;
}

int bpe_load(const char *path, Bpe *b) {
    memset(b, 0, sizeof *b);
    char *data;
    size_t n;
    if (read_file(path, &data, &n)) return MHAR_ERR;
    Reader r = {(const unsigned char *)data, n, 0, path};
    int rc = parse(&r, b);
    free(data);
    return rc;
}

int bpe_save(const char *path, const Bpe *b) {
    const char *pattern = pretok_pattern(b->pattern);
    unsigned char h[BPE_HEADER] = {0}, w[8];
    memcpy(h, BPE_MAGIC, 8);
    put_u32(h + 8, 1);
    put_u32(h + 12, (uint32_t)b->vocab_size);
    put_u32(h + 16, (uint32_t)b->n_merges);
    put_u32(h + 20, (uint32_t)b->n_special);
    put_u32(h + 24, (uint32_t)strlen(pattern));
    put_u32(h + 28, b->flags);
    AtomicFile a;
    if (atomic_open(&a, path)) return MHAR_ERR;
    atomic_write(&a, h, sizeof h);
    atomic_write(&a, pattern, strlen(pattern));
    for (int t = 0; t < b->vocab_size; t++) {
        put_u32(w, (uint32_t)bpe_token_len(b, t));
        atomic_write(&a, w, 4);
        atomic_write(&a, bpe_token(b, t), bpe_token_len(b, t));
    }
    for (int k = 0; k < b->n_merges; k++) {
        put_u32(w, (uint32_t)b->merges[k][0]);
        put_u32(w + 4, (uint32_t)b->merges[k][1]);
        atomic_write(&a, w, 8);
    }
    for (int k = 0; k < b->n_special; k++) {
        put_u32(w, (uint32_t)b->special[k]);
        atomic_write(&a, w, 4);
    }
    if (a.failed) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}

// ---- small helpers ----

int intvec_push(IntVec *a, const int *ids, size_t n) {
    if (n == 0) return MHAR_OK;
    if (a->n + n > a->cap) {
        size_t cap = a->cap ? a->cap : 1024;
        while (cap < a->n + n) cap *= 2;
        int *v = realloc(a->v, sizeof(int) * cap);
        if (!v) return mhar_fail("out of memory for %zu token ids", cap);
        a->v = v;
        a->cap = cap;
    }
    memcpy(a->v + a->n, ids, sizeof(int) * n);
    a->n += n;
    return MHAR_OK;
}

void intvec_free(IntVec *a) {
    free(a->v);
    memset(a, 0, sizeof *a);
}

int bpe_decode(const Bpe *b, const int *ids, size_t n, unsigned char **out, size_t *len, size_t *cap) {
    for (size_t i = 0; i < n; i++) {
        int t = ids[i];
        if (t < 0 || t >= b->vocab_size)
            return mhar_fail("token %zu is %d, not in the vocabulary 0..%d", i, t, b->vocab_size - 1);
        size_t l = bpe_token_len(b, t);
        if (*len + l > *cap) {
            size_t c = *cap ? *cap : 4096;
            while (c < *len + l) c *= 2;
            unsigned char *p = realloc(*out, c);
            if (!p) return mhar_fail("out of memory decoding %zu tokens", n);
            *out = p;
            *cap = c;
        }
        memcpy(*out + *len, bpe_token(b, t), l);
        *len += l;
    }
    return MHAR_OK;
}
