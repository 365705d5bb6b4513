// Byte-level BPE: the model, its file format, encoding and decoding.
//
// A token is a byte string; every one of the 256 single bytes is a token, so
// any byte sequence (valid UTF-8 or not) encodes, and decoding concatenates
// token bytes, so decode(encode(x)) == x exactly. Text is first cut into
// pieces by the split pattern (pretokenize.h); each piece starts as single
// bytes and merges apply inside it, lowest merge rank first, leftmost first
// among equal ranks (what HF tokenizers' BPE model does). Special tokens
// (e.g. <|endoftext|>) are matched literally in the text before the split,
// leftmost-longest, and are never produced by merges.
//
// File format (.bpe, little-endian, every field checked on load):
//   0   char[8]  magic "MHARBPE\0"
//   8   u32      version (1)
//   12  u32      vocab_size V: ids 0..V-1, specials included
//   16  u32      n_merges M
//   20  u32      n_special S
//   24  u32      pattern length P (bytes)
//   28  u32      flags: bit 0 = ignore_merges (a whole piece that is a token
//                is emitted as that token, as HF's BPE option of that name);
//                bit 1 = NFC (text between special tokens is normalized to
//                Unicode NFC before the split, as Qwen2/3's normalizer);
//                other bits 0
//   32  P bytes  the split regex, exactly one of pretok_pattern()
//   then V token records: u32 length L (1..65536), L bytes
//   then M merges, in rank order: u32 left id, u32 right id; the merged
//        token is the one whose bytes are left's bytes + right's bytes
//   then S u32 special ids (their token bytes are the literal text)
//   and nothing after. Non-special tokens have distinct bytes; merges name
//   non-special ids below V, appear once and produce a non-special token.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define BPE_IGNORE_MERGES 1u
#define BPE_NFC 2u
#define BPE_MAX_VOCAB (1 << 24) // 16.7M ids; the largest published vocabularies are ~256k
#define BPE_MAX_TOKEN_LEN 65536

typedef struct {
    int vocab_size, n_merges, n_special, pattern;
    unsigned flags;
    size_t *tok_off;            // [V+1] token t is tok_bytes[tok_off[t] .. tok_off[t+1])
    unsigned char *tok_bytes;
    unsigned char *is_special;  // [V]
    int *special;               // [S] ids
    int (*merges)[2];           // [M] (left, right) in rank order
    int byte_id[256];           // id of each single byte
    // merge lookup: open addressing on (left << 32 | right)
    uint64_t *pair_key;         // [pair_cap], UINT64_MAX = empty
    int *pair_rank, *pair_new;  // [pair_cap]
    size_t pair_mask;
    // token lookup by bytes (non-special tokens): open addressing on a hash
    int *vocab_slot;            // [vocab_mask + 1], -1 = empty
    size_t vocab_mask;
    int max_special_len;
} Bpe;

// Build a model from its parts (copied), validating everything the file
// format requires; `what` names the source in error messages.
//   tokens: V byte strings given as one buffer + offsets [V+1]
int bpe_build(Bpe *b, const char *what, int vocab_size, const unsigned char *bytes,
              const size_t *offsets, int n_merges, const int (*merges)[2], int n_special,
              const int *special, const char *pattern, unsigned flags);
int bpe_load(const char *path, Bpe *b);
int bpe_save(const char *path, const Bpe *b);  // atomic
void bpe_free(Bpe *b);

// Lookups.
int bpe_token_id(const Bpe *b, const unsigned char *s, size_t len);  // non-special; -1 if none
int bpe_special_id(const Bpe *b, const char *text);                  // -1 if none
static inline size_t bpe_token_len(const Bpe *b, int id) { return b->tok_off[id + 1] - b->tok_off[id]; }
static inline const unsigned char *bpe_token(const Bpe *b, int id) { return b->tok_bytes + b->tok_off[id]; }
// The id <|endoftext|> has (or <|end_of_text|>, Llama-3's name); -1 if none.
int bpe_eot_id(const Bpe *b);
// The token width (2 or 4 bytes) a token file needs for this vocabulary.
static inline int bpe_token_width(const Bpe *b) { return b->vocab_size <= 65536 ? 2 : 4; }

// A growable id array.
typedef struct { int *v; size_t n, cap; } IntVec;
int intvec_push(IntVec *a, const int *ids, size_t n);
void intvec_free(IntVec *a);

// Per-thread encoding state: a cache of encoded pieces, scratch buffers.
typedef struct BpeEncoder BpeEncoder;
BpeEncoder *bpe_encoder_new(const Bpe *b);
void bpe_encoder_free(BpeEncoder *e);
// Encode text[0..n) and append the ids to out. With specials, literal special
// token text becomes the special id; without, it is ordinary text.
int bpe_encode_with(BpeEncoder *e, const unsigned char *text, size_t n, int specials, IntVec *out);
// The same, cut into chunks at positions where the split is known not to
// depend on what follows, encoded on all threads; same ids as one thread.
int bpe_encode(const Bpe *b, const unsigned char *text, size_t n, int specials, IntVec *out);
// Encode the text file at path for a token file: refused when empty, or
// holding NUL bytes unless binary; a one-token text is padded with
// <|endoftext|> (a token file holds at least 2). *bytes: the file's size.
int bpe_encode_file(const Bpe *b, const char *path, int specials, int binary, IntVec *out, size_t *bytes);
// The ids of one piece (no split, no specials): for tests and training.
int bpe_encode_piece(BpeEncoder *e, const unsigned char *piece, size_t n, IntVec *out);

// Token bytes of ids, appended to *out (malloc'd, grown). Ids must be < V.
int bpe_decode(const Bpe *b, const int *ids, size_t n, unsigned char **out, size_t *len, size_t *cap);
