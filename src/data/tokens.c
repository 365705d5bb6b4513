#define _FILE_OFFSET_BITS 64 // token files can pass 2 GiB
#include "tokens.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/atomic.h"
#include "../util/common.h"
#include "../util/memlimit.h"

#define TOK_HEADER 32
#define TOK_CHUNK 65536 // tokens decoded per read / encoded per write
static const char TOK_MAGIC[8] = {'M', 'H', 'A', 'R', 'T', 'O', 'K', '\0'};

// Little-endian field access byte by byte: correct on any host.
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

typedef struct {
    uint32_t width, vocab;
    uint64_t count;
} TokHeader;

static int parse_header(const char *path, const unsigned char *h, uint64_t file_size, TokHeader *o) {
    if (memcmp(h, TOK_MAGIC, 8) != 0) return mhar_fail("%s: bad magic, not an mhar token file", path);
    uint32_t version = get_u32(h + 8);
    if (version != 1) return mhar_fail("%s: version %" PRIu32 ", expected 1", path, version);
    o->width = get_u32(h + 12);
    if (o->width != 2 && o->width != 4)
        return mhar_fail("%s: token width %" PRIu32 ", expected 2 or 4", path, o->width);
    o->count = get_u64(h + 16);
    o->vocab = get_u32(h + 24);
    if (o->vocab < 1 || o->vocab > (uint32_t)INT32_MAX)
        return mhar_fail("%s: vocab_size %" PRIu32 ", expected 1..%d", path, o->vocab, INT32_MAX);
    if (get_u32(h + 28) != 0) return mhar_fail("%s: reserved header field is not 0", path);
    if (o->count < 2) return mhar_fail("%s: token count %" PRIu64 ", need at least 2", path, o->count);
    // Compare by division first: count * width could overflow for a corrupt count.
    uint64_t data = file_size - TOK_HEADER;
    if (o->count > data / o->width)
        return mhar_fail("%s: truncated: header says %" PRIu64 " tokens of %" PRIu32 " bytes but "
                         "only %" PRIu64 " data bytes follow", path, o->count, o->width, data);
    if (o->count * o->width != data)
        return mhar_fail("%s: %" PRIu64 " trailing bytes after the %" PRIu64 " tokens the header "
                         "declares", path, data - o->count * o->width, o->count);
    return MHAR_OK;
}

// Decode n tokens from raw, checking each id against the vocabulary.
static int decode(const char *path, const unsigned char *raw, size_t n, const TokHeader *h,
                  size_t base, int *out) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = raw + i * h->width;
        uint32_t v = h->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : get_u32(p);
        if (v >= h->vocab)
            return mhar_fail("%s: token at index %zu is %" PRIu32 ", not below vocab_size %" PRIu32,
                             path, base + i, v, h->vocab);
        out[i] = (int)v;
    }
    return MHAR_OK;
}

static int read_tokens(const char *path, FILE *f, const TokHeader *h, int *out) {
    unsigned char *raw = malloc((size_t)TOK_CHUNK * 4);
    if (!raw) return mhar_fail("%s: out of memory", path);
    int rc = MHAR_OK;
    for (size_t done = 0; rc == MHAR_OK && done < h->count; done += TOK_CHUNK) {
        size_t n = h->count - done < TOK_CHUNK ? (size_t)(h->count - done) : TOK_CHUNK;
        if (fread(raw, h->width, n, f) != n)
            rc = mhar_fail("%s: truncated: short read at token %zu", path, done);
        else
            rc = decode(path, raw, n, h, done, out + done);
    }
    free(raw);
    return rc;
}

static int load_open(const char *path, FILE *f, TokHeader *h) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) return mhar_fail("%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return mhar_fail("%s: not a regular file", path);
    uint64_t size = (uint64_t)st.st_size;
    unsigned char hdr[TOK_HEADER];
    if (size < TOK_HEADER)
        return mhar_fail("%s: truncated: %" PRIu64 " bytes, shorter than the 32-byte header", path, size);
    if (fread(hdr, 1, TOK_HEADER, f) != TOK_HEADER) return mhar_fail("%s: cannot read the header", path);
    if (parse_header(path, hdr, size, h)) return MHAR_ERR;
    if (h->count > SIZE_MAX / sizeof(int)) return mhar_fail("%s: too many tokens for this host", path);
    if (mem_check((double)h->count * sizeof(int), "%s: %" PRIu64 " tokens", path, h->count)) return MHAR_ERR;
    return MHAR_OK;
}

int tokens_load(const char *path, TokenFile *tf) {
    memset(tf, 0, sizeof *tf);
    FILE *f = fopen(path, "rb");
    if (!f) return mhar_fail("%s: cannot open: %s", path, strerror(errno));
    TokHeader h = {0};
    int *tok = NULL;
    int rc = load_open(path, f, &h);
    if (rc == MHAR_OK) {
        tok = mhar_alloc((size_t)h.count * sizeof(int));
        rc = tok ? read_tokens(path, f, &h, tok)
                 : mhar_fail("%s: out of memory for %" PRIu64 " tokens", path, h.count);
    }
    fclose(f);
    if (rc != MHAR_OK) {
        mhar_free(tok);
        return MHAR_ERR;
    }
    tf->tokens = tok;
    tf->count = (size_t)h.count;
    tf->vocab_size = (int)h.vocab;
    tf->width = (int)h.width;
    return MHAR_OK;
}

// Checked before anything is written, so a bad id never reaches disk.
static int check_ids(const char *path, const int *tokens, size_t count, int vocab_size) {
    for (size_t i = 0; i < count; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab_size)
            return mhar_fail("%s: token at index %zu is %d, not in 0..%d (vocab_size %d)", path, i,
                             tokens[i], vocab_size - 1, vocab_size);
    return MHAR_OK;
}

static int write_tokens(AtomicFile *a, const int *tokens, size_t count, int width) {
    unsigned char *raw = malloc((size_t)TOK_CHUNK * 4);
    if (!raw) return mhar_fail("%s: out of memory", a->path);
    int rc = MHAR_OK;
    for (size_t done = 0; rc == MHAR_OK && done < count; done += TOK_CHUNK) {
        size_t n = count - done < TOK_CHUNK ? count - done : TOK_CHUNK;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)tokens[done + i];
            if (width == 2) {
                raw[2 * i] = (unsigned char)v;
                raw[2 * i + 1] = (unsigned char)(v >> 8);
            } else {
                put_u32(raw + 4 * i, v);
            }
        }
        rc = atomic_write(a, raw, n * (size_t)width);
    }
    free(raw);
    return rc;
}

int tokens_save(const char *path, const int *tokens, size_t count, int vocab_size) {
    if (vocab_size < 1) return mhar_fail("%s: vocab_size %d, must be positive", path, vocab_size);
    if (count < 2) return mhar_fail("%s: %zu tokens, a token file needs at least 2", path, count);
    if (check_ids(path, tokens, count, vocab_size)) return MHAR_ERR;
    int width = vocab_size <= 65536 ? 2 : 4;
    unsigned char hdr[TOK_HEADER] = {0};
    memcpy(hdr, TOK_MAGIC, 8);
    put_u32(hdr + 8, 1);
    put_u32(hdr + 12, (uint32_t)width);
    put_u64(hdr + 16, (uint64_t)count);
    put_u32(hdr + 24, (uint32_t)vocab_size);
    AtomicFile a;
    if (atomic_open(&a, path)) return MHAR_ERR;
    if (atomic_write(&a, hdr, sizeof hdr) || write_tokens(&a, tokens, count, width)) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}

void tokens_free(TokenFile *tf) {
    mhar_free(tf->tokens);
    memset(tf, 0, sizeof *tf);
}
