// Tokenizer tests: the pre-split against HF's regex results, BPE merges
// against a naive reference, exact round trips of arbitrary bytes, training,
// parallel = sequential encoding, the file format's validation, and the
// shard writer's refusals.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "data/tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/shards.h"
#include "tokenizer/train.h"
#include "tokenizer/unicode.h"
#include "util/common.h"

static char tmpdir[256];

typedef struct { int pat; const char *text, *pieces; } SplitCase;
static const SplitCase split_cases[] = {
// Generated from HF tokenizers' Split(Regex(pattern)) on the same inputs;
// pieces joined by \x01.
    {PAT_LLAMA3, "def f(x):\x0a""    return x  \x0a""\x0a""", "def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""  \x0a""\x0a"""},
    {PAT_LLAMA3, "\x09""if a:\x0a""\x09""\x09""b = 12345\x0a""", "\x09""if\x01"" a\x01"":\x0a""\x01""\x09""\x01""\x09""b\x01"" =\x01"" \x01""123\x01""45\x01""\x0a"""},
    {PAT_LLAMA3, "I'll've  can't DON'T", "I\x01""'ll\x01""'ve\x01"" \x01"" can\x01""'t\x01"" DON\x01""'T"},
    {PAT_LLAMA3, "x = 3.14159e-10;\x0d""\x0a""  y", "x\x01"" =\x01"" \x01""3\x01"".\x01""141\x01""59\x01""e\x01""-\x01""10\x01"";\x0d""\x0a""\x01"" \x01"" y"},
    {PAT_LLAMA3, "  \x0a""\x0a""    z", "  \x0a""\x0a""\x01""   \x01"" z"},
    {PAT_LLAMA3, "hello world!!  ", "hello\x01"" world\x01""!!\x01""  "},
    {PAT_LLAMA3, "\xc2""\xa0""\xc2""\xa0""word \xe3""\x80""\x80""x", "\xc2""\xa0""\x01""\xc2""\xa0""word\x01"" \x01""\xe3""\x80""\x80""x"},
    {PAT_LLAMA3, "x'\xc5""\xbf""foo", "x\x01""'\xc5""\xbf""\x01""foo"},
    {PAT_LLAMA3, "(\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\xd9""\xa4"") \xc2""\xbd""", "(\x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01""\xd9""\xa4""\x01"")\x01"" \x01""\xc2""\xbd"""},
    {PAT_GPT2, "def f(x):\x0a""    return x  \x0a""\x0a""", "def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""  \x0a""\x0a"""},
    {PAT_GPT2, "\x09""if a:\x0a""\x09""\x09""b = 12345\x0a""", "\x09""\x01""if\x01"" a\x01"":\x01""\x0a""\x09""\x01""\x09""\x01""b\x01"" =\x01"" 12345\x01""\x0a"""},
    {PAT_GPT2, "I'll've  can't DON'T", "I\x01""'ll\x01""'ve\x01"" \x01"" can\x01""'t\x01"" DON\x01""'\x01""T"},
    {PAT_GPT2, "x = 3.14159e-10;\x0d""\x0a""  y", "x\x01"" =\x01"" 3\x01"".\x01""14159\x01""e\x01""-\x01""10\x01"";\x01""\x0d""\x0a"" \x01"" y"},
    {PAT_GPT2, "  \x0a""\x0a""    z", "  \x0a""\x0a""   \x01"" z"},
    {PAT_GPT2, "hello world!!  ", "hello\x01"" world\x01""!!\x01""  "},
    {PAT_GPT2, "\xc2""\xa0""\xc2""\xa0""word \xe3""\x80""\x80""x", "\xc2""\xa0""\x01""\xc2""\xa0""\x01""word\x01"" \x01""\xe3""\x80""\x80""\x01""x"},
    {PAT_GPT2, "x'\xc5""\xbf""foo", "x\x01""'\x01""\xc5""\xbf""foo"},
    {PAT_GPT2, "(\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\xd9""\xa4"") \xc2""\xbd""", "(\x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\xd9""\xa4""\x01"")\x01"" \xc2""\xbd"""},
    {PAT_QWEN2, "def f(x):\x0a""    return x  \x0a""\x0a""", "def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""  \x0a""\x0a"""},
    {PAT_QWEN2, "\x09""if a:\x0a""\x09""\x09""b = 12345\x0a""", "\x09""if\x01"" a\x01"":\x0a""\x01""\x09""\x01""\x09""b\x01"" =\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01""\x0a"""},
    {PAT_QWEN2, "I'll've  can't DON'T", "I\x01""'ll\x01""'ve\x01"" \x01"" can\x01""'t\x01"" DON\x01""'T"},
    {PAT_QWEN2, "x = 3.14159e-10;\x0d""\x0a""  y", "x\x01"" =\x01"" \x01""3\x01"".\x01""1\x01""4\x01""1\x01""5\x01""9\x01""e\x01""-\x01""1\x01""0\x01"";\x0d""\x0a""\x01"" \x01"" y"},
    {PAT_QWEN2, "  \x0a""\x0a""    z", "  \x0a""\x0a""\x01""   \x01"" z"},
    {PAT_QWEN2, "hello world!!  ", "hello\x01"" world\x01""!!\x01""  "},
    {PAT_QWEN2, "\xc2""\xa0""\xc2""\xa0""word \xe3""\x80""\x80""x", "\xc2""\xa0""\x01""\xc2""\xa0""word\x01"" \x01""\xe3""\x80""\x80""x"},
    {PAT_QWEN2, "x'\xc5""\xbf""foo", "x\x01""'\xc5""\xbf""\x01""foo"},
    {PAT_QWEN2, "(\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\xd9""\xa4"") \xc2""\xbd""", "(\x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01""\xd9""\xa4""\x01"")\x01"" \x01""\xc2""\xbd"""},
};

static void test_unicode(void) {
    uint32_t cp;
    const unsigned char a[] = "a", alpha[] = "\xce\xb1", nbsp[] = "\xc2\xa0", han[] = "\xe4\xb8\x80";
    const unsigned char arabic3[] = "\xd9\xa3", over[] = "\xc0\xaf", surr[] = "\xed\xa0\x80", cont[] = "\x80";
    int ok = utf8_decode(a, 1, &cp) == 1 && unicode_class(cp) == UCLASS_LETTER &&
             utf8_decode(alpha, 2, &cp) == 2 && unicode_class(cp) == UCLASS_LETTER &&
             utf8_decode(nbsp, 2, &cp) == 2 && unicode_class(cp) == UCLASS_SPACE &&
             utf8_decode(han, 3, &cp) == 3 && unicode_class(cp) == UCLASS_LETTER &&
             utf8_decode(arabic3, 2, &cp) == 2 && unicode_class(cp) == UCLASS_NUMBER;
    CHECK(ok, "unicode.classes", "letter/space/number classes wrong");
    ok = utf8_decode(over, 2, &cp) == 1 && cp == UNICODE_INVALID && utf8_decode(surr, 3, &cp) == 1 &&
         cp == UNICODE_INVALID && utf8_decode(cont, 1, &cp) == 1 && cp == UNICODE_INVALID &&
         utf8_decode(han, 2, &cp) == 1 && cp == UNICODE_INVALID;
    CHECK(ok, "unicode.invalid_utf8", "overlong, surrogate, stray or cut sequences must be single invalid bytes");
}

// NFC against results Python's unicodedata.normalize("NFC", ...) gives.
static void test_nfc(void) {
    static const struct { const char *in, *out, *name; } cases[] = {
        {"e\xcc\x81", "\xc3\xa9", "nfc.compose"},                       // e + U+0301 -> U+00E9
        {"\xe2\x84\xab", "\xc3\x85", "nfc.singleton"},                  // U+212B ANGSTROM -> U+00C5
        {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81", "nfc.hangul"},  // jamo L V T -> U+AC01
        {"a\xcc\x81\xcc\xa8", "\xc4\x85\xcc\x81", "nfc.reorder"},    // a 0301 0328 -> U+0105 0301
        {"\xea\xb0\x80\xe1\x86\xa8x", "\xea\xb0\x81x", "nfc.hangul_lv_t"},  // U+AC00 + T -> U+AC01
        {"\xcd\x84", "\xcc\x88\xcc\x81", "nfc.excluded"},               // U+0344 -> 0308 0301
        {"\xff" "e\xcc\x81\x80", "\xff\xc3\xa9\x80", "nfc.invalid_bytes_pass"},
    };
    Nfc nf = {0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = nfc_normalize(&nf, (const unsigned char *)cases[k].in, strlen(cases[k].in));
        CHECK(rc == MHAR_OK && nf.len == strlen(cases[k].out) && !memcmp(nf.out, cases[k].out, nf.len),
              cases[k].name, "NFC of \"%s\" is wrong (%zu bytes)", cases[k].in, nf.len);
    }
    nfc_free(&nf);
}

static void test_split(void) {
    for (size_t k = 0; k < sizeof split_cases / sizeof split_cases[0]; k++) {
        const SplitCase *c = &split_cases[k];
        const unsigned char *s = (const unsigned char *)c->text;
        size_t n = strlen(c->text);
        char got[512] = "";
        size_t g = 0;
        for (size_t i = 0; i < n;) {
            size_t j = pretok_next(c->pat, s, n, i);
            if (j <= i || j > n) { strcpy(got, "<no progress>"); break; }
            if (i) got[g++] = '\x01';
            memcpy(got + g, s + i, j - i);
            g += j - i;
            got[g] = '\0';
            i = j;
        }
        char name[64];
        snprintf(name, sizeof name, "split.%s.case%zu", pretok_name(c->pat), k % 9);
        CHECK(!strcmp(got, c->pieces), name, "input \"%s\": got pieces \"%s\", HF gives \"%s\" (\\x01 separates)",
              c->text, got, c->pieces);
    }
    CHECK(pretok_pattern_id(pretok_pattern(PAT_LLAMA3)) == PAT_LLAMA3 && pretok_pattern_id("\\s+") == PAT_NONE,
          "split.pattern_by_string", "exact pattern strings must be recognised, others refused");
}

// A model from token strings and merges given as ids (bytes are ids 0..255).
static int make_model(Bpe *b, const char *const *extra, int n_extra, const int (*merges)[2], int n_merges,
                      const int *special, int n_special, unsigned flags) {
    int V = 256 + n_extra;
    size_t *off = malloc(sizeof(size_t) * (size_t)(V + 1));
    size_t total = 256;
    for (int k = 0; k < n_extra; k++) total += strlen(extra[k]);
    unsigned char *bytes = malloc(total);
    off[0] = 0;
    for (int c = 0; c < 256; c++) { bytes[c] = (unsigned char)c; off[c + 1] = (size_t)c + 1; }
    for (int k = 0; k < n_extra; k++) {
        size_t l = strlen(extra[k]);
        memcpy(bytes + off[256 + k], extra[k], l);
        off[257 + k] = off[256 + k] + l;
    }
    int rc = bpe_build(b, "test model", V, bytes, off, n_merges, merges, n_special, special,
                       pretok_pattern(PAT_LLAMA3), flags);
    free(off);
    free(bytes);
    return rc;
}

static int ids_equal(const IntVec *v, const int *want, size_t n) {
    return v->n == n && !memcmp(v->v, want, sizeof(int) * n);
}

static void test_merges(void) {
    Bpe b;
    BpeEncoder *e;
    IntVec v = {0};
    // "ab" then "abc": lowest rank first.
    const char *tok1[] = {"ab", "abc", "<|endoftext|>"};
    const int m1[][2] = {{'a', 'b'}, {256, 'c'}};
    const int sp1[] = {258};
    int rc = make_model(&b, tok1, 3, m1, 2, sp1, 1, 0);
    CHECK(rc == MHAR_OK, "merges.build", "%s", mhar_error());
    if (rc) return;
    e = bpe_encoder_new(&b);
    bpe_encode_piece(e, (const unsigned char *)"abcab", 5, &v);
    CHECK(ids_equal(&v, (int[]){257, 256}, 2), "merges.rank_order", "abcab -> %zu ids", v.n);
    v.n = 0;
    bpe_encode_with(e, (const unsigned char *)"abc<|endoftext|>ab", 18, 1, &v);
    CHECK(ids_equal(&v, (int[]){257, 258, 256}, 3), "merges.special_token", "got %zu ids", v.n);
    v.n = 0;
    bpe_encode_with(e, (const unsigned char *)"a<|endoftext|>", 14, 0, &v);
    int has_special = 0;
    for (size_t i = 0; i < v.n; i++) has_special |= v.v[i] == 258;
    CHECK(!has_special && v.n > 3, "merges.ordinary_text", "with specials off the literal must stay text");
    bpe_encoder_free(e);
    bpe_free(&b);
    // (b, c) before (a, b): "abc" -> a + bc, and no (a, bc) merge exists.
    const char *tok2[] = {"bc", "ab"};
    const int m2[][2] = {{'b', 'c'}, {'a', 'b'}};
    make_model(&b, tok2, 2, m2, 2, NULL, 0, 0);
    e = bpe_encoder_new(&b);
    v.n = 0;
    bpe_encode_piece(e, (const unsigned char *)"abc", 3, &v);
    CHECK(ids_equal(&v, (int[]){'a', 256}, 2), "merges.lowest_rank_wins", "got %zu ids", v.n);
    // Overlapping equal pairs: "aaa" with (a, a) -> [aa, a], leftmost first.
    bpe_encoder_free(e);
    bpe_free(&b);
    const char *tok3[] = {"aa"};
    const int m3[][2] = {{'a', 'a'}};
    make_model(&b, tok3, 1, m3, 1, NULL, 0, 0);
    e = bpe_encoder_new(&b);
    v.n = 0;
    bpe_encode_piece(e, (const unsigned char *)"aaa", 3, &v);
    CHECK(ids_equal(&v, (int[]){256, 'a'}, 2), "merges.leftmost_on_ties", "got %zu ids", v.n);
    bpe_encoder_free(e);
    bpe_free(&b);
    // ignore_merges: a whole piece that is a token wins over the merges.
    const char *tok4[] = {"bc", "abc"};
    const int m4[][2] = {{'b', 'c'}};
    make_model(&b, tok4, 2, m4, 1, NULL, 0, BPE_IGNORE_MERGES);
    e = bpe_encoder_new(&b);
    v.n = 0;
    bpe_encode_piece(e, (const unsigned char *)"abc", 3, &v);
    CHECK(ids_equal(&v, (int[]){257}, 1), "merges.ignore_merges", "got %zu ids", v.n);
    bpe_encoder_free(e);
    bpe_free(&b);
    intvec_free(&v);
}

// Naive BPE from the merge list: at each step the lowest-rank adjacent pair
// by linear search, leftmost on ties. The reference for both merge paths.
static size_t naive_bpe(const Bpe *b, const unsigned char *s, size_t n, int *out) {
    for (size_t i = 0; i < n; i++) out[i] = b->byte_id[s[i]];
    unsigned char buf[1024];
    for (;;) {
        int best = b->n_merges;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++)
            for (int r = 0; r < best; r++)
                if (b->merges[r][0] == out[i] && b->merges[r][1] == out[i + 1]) { best = r; at = i; break; }
        if (best == b->n_merges) return n;
        int l = out[at], r = out[at + 1];
        size_t ll = bpe_token_len(b, l), lr = bpe_token_len(b, r);
        memcpy(buf, bpe_token(b, l), ll);
        memcpy(buf + ll, bpe_token(b, r), lr);
        out[at] = bpe_token_id(b, buf, ll + lr);
        memmove(out + at + 1, out + at + 2, sizeof(int) * (n - at - 2));
        n--;
    }
}

// Synthetic text with code-like lines, words, numbers and some UTF-8.
static unsigned char *synth_text(size_t n, uint64_t seed) {
    static const char *words[] = {"def", "return", "self", "the", "of", "and", "value", "index", "print",
                                  "import", "numpy", "x", "y", "café", "naïve", "日本", "42", "3.14",
                                  "(", ")", ":", "=", "+", "[i]", "'s", "don't", "    ", "\t", "\n", "\n\n",
                                  "        ", "# comment", "\"str\"", "<|endoftext|>"};
    unsigned char *s = malloc(n);
    Rng r;
    rng_seed(&r, seed);
    size_t i = 0;
    while (i < n) {
        const char *w = words[rng_below(&r, sizeof words / sizeof words[0])];
        size_t l = strlen(w);
        if (i + l + 1 > n) break;
        memcpy(s + i, w, l);
        i += l;
        if (rng_below(&r, 3)) s[i++] = ' ';
    }
    while (i < n) s[i++] = 'z';
    return s;
}

static int train_small(Bpe *b, const unsigned char *text, size_t n, int vocab, int pattern) {
    const unsigned char *docs[1] = {text};
    size_t lens[1] = {n};
    const char *special[] = {"<|endoftext|>"};
    BpeTrainOptions o = {vocab, pattern, special, 1, 0};
    BpeTrainStats st;
    return bpe_train_texts(docs, lens, 1, &o, b, &st);
}

static void test_train_and_roundtrip(void) {
    size_t n = 400000;
    unsigned char *text = synth_text(n, 7);
    Bpe b, b2;
    int rc = train_small(&b, text, n, 600, PAT_LLAMA3);
    CHECK(rc == MHAR_OK && b.vocab_size == 600 && b.n_merges == 600 - 257 && b.n_special == 1 &&
          b.special[0] == 599, "train.sizes", "rc %d vocab %d merges %d: %s", rc, b.vocab_size, b.n_merges,
          mhar_error());
    if (rc) { free(text); return; }
    int ok = 1;
    for (int k = 0; k < b.n_merges; k++) {
        size_t l = bpe_token_len(&b, b.merges[k][0]) + bpe_token_len(&b, b.merges[k][1]);
        ok &= bpe_token_len(&b, 256 + k) == l;
    }
    CHECK(ok, "train.ids_in_merge_order", "token 256+k must be merge k's result");
    rc = train_small(&b2, text, n, 600, PAT_LLAMA3);
    CHECK(rc == MHAR_OK && b2.n_merges == b.n_merges &&
          !memcmp(b.merges, b2.merges, sizeof(int[2]) * (size_t)b.n_merges), "train.deterministic",
          "two runs learned different merges");
    if (!rc) bpe_free(&b2);
    // The special literal is cut out of training: no token holds "endoftext|>".
    int leaked = 0;
    for (int t = 256; t < b.vocab_size - 1; t++)
        leaked |= bpe_token_len(&b, t) >= 3 && memmem(bpe_token(&b, t), bpe_token_len(&b, t), "|>", 2) &&
                  memmem(bpe_token(&b, t), bpe_token_len(&b, t), "<|", 2);
    CHECK(!leaked, "train.special_not_learned", "a merged token spans the special literal");

    IntVec ids = {0};
    rc = bpe_encode(&b, text, n, 1, &ids);
    CHECK(rc == MHAR_OK && ids.n < n / 2, "train.compresses", "%zu bytes -> %zu tokens", n, ids.n);
    unsigned char *dec = NULL;
    size_t len = 0, cap = 0;
    bpe_decode(&b, ids.v, ids.n, &dec, &len, &cap);
    CHECK(len == n && !memcmp(dec, text, n), "roundtrip.text", "decode(encode(text)) != text");

    // Random bytes, invalid UTF-8 and NULs included, in every pattern.
    Rng r;
    rng_seed(&r, 99);
    size_t rn = 200000;
    unsigned char *rnd = malloc(rn);
    for (size_t i = 0; i < rn; i++) {
        uint64_t x = rng_next(&r);
        // a mix: raw bytes, ASCII text, newlines and UTF-8 lead bytes without continuations
        rnd[i] = x % 4 == 0 ? (unsigned char)(x >> 8) : x % 4 == 1 ? (unsigned char)('a' + (x >> 8) % 26)
               : x % 4 == 2 ? (unsigned char)" \n\t'0"[(x >> 8) % 5] : (unsigned char)(0xC0 + (x >> 8) % 64);
    }
    for (int pat = PAT_GPT2; pat <= PAT_QWEN2; pat++) {
        Bpe bp;
        if (train_small(&bp, rnd, rn, 400, pat)) { CHECK(0, "roundtrip.train_random", "%s", mhar_error()); continue; }
        IntVec v = {0};
        len = 0;
        bpe_encode(&bp, rnd, rn, 0, &v);
        bpe_decode(&bp, v.v, v.n, &dec, &len, &cap);
        char name[64];
        snprintf(name, sizeof name, "roundtrip.random_bytes.%s", pretok_name(pat));
        CHECK(len == rn && !memcmp(dec, rnd, rn), name, "random bytes did not round-trip (%zu -> %zu)", rn, len);
        intvec_free(&v);
        bpe_free(&bp);
    }
    // Both merge paths (short: scan, long: heap) against the naive reference.
    BpeEncoder *e = bpe_encoder_new(&b);
    int *ref = malloc(sizeof(int) * 1024);
    int same = 1;
    const size_t lens[] = {2, 5, 17, 64, 65, 300, 900};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        // a single piece: letters only (one regex piece) from the text's letters
        unsigned char piece[1024];
        for (size_t i = 0; i < lens[k]; i++) piece[i] = (unsigned char)"selfdefreturnvalueindex"[(i * 7 + k) % 23];
        IntVec v = {0};
        bpe_encode_piece(e, piece, lens[k], &v);
        size_t m = naive_bpe(&b, piece, lens[k], ref);
        same &= v.n == m && !memcmp(v.v, ref, sizeof(int) * m);
        intvec_free(&v);
    }
    CHECK(same, "merges.scan_and_heap_match_reference", "a merge path differs from the naive BPE");
    free(ref);
    bpe_encoder_free(e);

    // Parallel chunks = one sequential pass, on text long enough to be cut.
    size_t big = 5u << 20;
    unsigned char *bt = synth_text(big, 11);
    IntVec par = {0}, seq = {0};
    bpe_encode(&b, bt, big, 1, &par);
    e = bpe_encoder_new(&b);
    bpe_encode_with(e, bt, big, 1, &seq);
    bpe_encoder_free(e);
    CHECK(par.n == seq.n && !memcmp(par.v, seq.v, sizeof(int) * par.n), "encode.parallel_equals_sequential",
          "%zu vs %zu ids", par.n, seq.n);
    // GPT-2's pattern is the one where a cut after "  \n" would change the
    // split (\s+(?!\S) at a chunk's end): the same check with it.
    Bpe g;
    if (train_small(&g, text, n, 500, PAT_GPT2) == MHAR_OK) {
        par.n = seq.n = 0;
        bpe_encode(&g, bt, big, 1, &par);
        e = bpe_encoder_new(&g);
        bpe_encode_with(e, bt, big, 1, &seq);
        bpe_encoder_free(e);
        CHECK(par.n == seq.n && !memcmp(par.v, seq.v, sizeof(int) * par.n),
              "encode.parallel_equals_sequential.gpt2", "%zu vs %zu ids", par.n, seq.n);
        bpe_free(&g);
    }
    intvec_free(&par);
    intvec_free(&seq);
    free(bt);

    // Save and load: same model, same ids.
    char path[512];
    snprintf(path, sizeof path, "%s/t.bpe", tmpdir);
    Bpe c;
    rc = bpe_save(path, &b);
    if (!rc) rc = bpe_load(path, &c);
    IntVec v2 = {0};
    if (!rc) {
        bpe_encode(&c, text, n, 1, &v2);
        rc = v2.n == ids.n && !memcmp(v2.v, ids.v, sizeof(int) * ids.n) ? MHAR_OK : MHAR_ERR;
        bpe_free(&c);
    }
    CHECK(rc == MHAR_OK, "file.save_load", "%s", mhar_error());
    intvec_free(&v2);
    intvec_free(&ids);
    free(dec);
    free(rnd);
    free(text);
    bpe_free(&b);
}


// Naive BPE training: recount every pair from scratch at each step (weighted
// by word counts), take the highest count, ties to the smallest (left, right),
// skip pairs whose bytes already are a token. The reference for the
// incremental trainer's counts, lists and heap.
typedef struct { uint64_t key; int64_t count; } PairCount;
static int cmp_pair(const void *a, const void *b) {
    uint64_t x = ((const PairCount *)a)->key, y = ((const PairCount *)b)->key;
    return (x > y) - (x < y);
}

static void test_train_reference(void) {
    size_t n = 30000;
    unsigned char *text = synth_text(n, 3);
    for (size_t i = 0; i < n; i++) if (text[i] == '<') text[i] = '{';  // no special literals here
    int n_merges = 120, V = 256 + n_merges + 1;
    Bpe b;
    if (train_small(&b, text, n, V, PAT_LLAMA3)) { CHECK(0, "train.matches_naive_reference", "%s", mhar_error()); free(text); return; }
    // words: pieces with counts (quadratic dedup is fine at this size)
    size_t cap = n + 1, nw = 0;
    int **sym = malloc(sizeof(int *) * cap);
    int *len = malloc(sizeof(int) * cap);
    int64_t *cnt = malloc(sizeof(int64_t) * cap);
    size_t *wo = malloc(sizeof(size_t) * cap);
    for (size_t i = 0; i < n;) {
        size_t j = pretok_next(PAT_LLAMA3, text, n, i), k;
        for (k = 0; k < nw; k++)
            if ((size_t)len[k] == j - i && !memcmp(text + wo[k], text + i, j - i)) break;
        if (k == nw) {
            wo[nw] = i;
            len[nw] = (int)(j - i);
            cnt[nw] = 0;
            sym[nw] = malloc(sizeof(int) * (j - i));
            for (size_t q = 0; q < j - i; q++) sym[nw][q] = text[i + q];
            nw++;
        }
        cnt[k]++;
        i = j;
    }
    // token bytes
    unsigned char (*tb)[64] = calloc((size_t)V, 64);
    int *tl = calloc((size_t)V, sizeof(int));
    for (int c = 0; c < 256; c++) { tb[c][0] = (unsigned char)c; tl[c] = 1; }
    int ntok = 256, same = 1;
    PairCount *pc = malloc(sizeof(PairCount) * (n + 1));
    for (int m = 0; m < n_merges && same; m++) {
        size_t np = 0;
        for (size_t w = 0; w < nw; w++)
            for (int i = 0; i + 1 < len[w]; i++)
                pc[np++] = (PairCount){(uint64_t)(uint32_t)sym[w][i] << 32 | (uint32_t)sym[w][i + 1], cnt[w]};
        qsort(pc, np, sizeof *pc, cmp_pair);
        uint64_t best = 0;
        int64_t bestc = 0;
        for (size_t i = 0; i < np;) {
            size_t j = i;
            int64_t c = 0;
            while (j < np && pc[j].key == pc[i].key) c += pc[j++].count;
            int l = (int)(pc[i].key >> 32), r = (int)(uint32_t)pc[i].key, dup = 0;
            for (int t = 0; t < ntok && !dup; t++)
                dup = tl[t] == tl[l] + tl[r] && !memcmp(tb[t], tb[l], (size_t)tl[l]) &&
                      !memcmp(tb[t] + tl[l], tb[r], (size_t)tl[r]);
            if (!dup && tl[l] + tl[r] <= 64 && c > bestc) { best = pc[i].key; bestc = c; }
            i = j;
        }
        int l = (int)(best >> 32), r = (int)(uint32_t)best;
        same &= b.merges[m][0] == l && b.merges[m][1] == r;
        if (!same) printf("merge %d: trainer (%d, %d), reference (%d, %d) count %lld\n", m, b.merges[m][0],
                          b.merges[m][1], l, r, (long long)bestc);
        memcpy(tb[ntok], tb[l], (size_t)tl[l]);
        memcpy(tb[ntok] + tl[l], tb[r], (size_t)tl[r]);
        tl[ntok] = tl[l] + tl[r];
        for (size_t w = 0; w < nw; w++) {
            int o = 0;
            for (int i = 0; i < len[w];) {
                if (i + 1 < len[w] && sym[w][i] == l && sym[w][i + 1] == r) { sym[w][o++] = ntok; i += 2; }
                else sym[w][o++] = sym[w][i++];
            }
            len[w] = o;
        }
        ntok++;
    }
    CHECK(same, "train.matches_naive_reference", "the incremental trainer chose a different merge");
    for (size_t w = 0; w < nw; w++) free(sym[w]);
    free(sym); free(len); free(cnt); free(wo); free(tb); free(tl); free(pc); free(text);
    bpe_free(&b);
}

// ---- bad files ----

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }

static int raw_double_A;

// Write a raw tokenizer file: header fields as given, bytes tokens 0..255
// plus extra, merges and specials as given; the pattern is Llama-3's.
static size_t raw_file(unsigned char *buf, uint32_t V, uint32_t n_extra, const char *const *extra, uint32_t M,
                       const uint32_t (*merges)[2], uint32_t S, const uint32_t *special) {
    const char *pat = pretok_pattern(PAT_LLAMA3);
    size_t o = 0;
    memcpy(buf, "MHARBPE", 8);
    put32(buf + 8, 1);
    put32(buf + 12, V);
    put32(buf + 16, M);
    put32(buf + 20, S);
    put32(buf + 24, (uint32_t)strlen(pat));
    put32(buf + 28, 0);
    o = 32;
    memcpy(buf + o, pat, strlen(pat));
    o += strlen(pat);
    for (int c = 0; c < 256; c++) {
        uint32_t len = raw_double_A && c == 'A' ? 2 : 1;
        put32(buf + o, len);
        memset(buf + o + 4, c, len);
        o += 4 + len;
    }
    for (uint32_t k = 0; k < n_extra; k++) {
        put32(buf + o, (uint32_t)strlen(extra[k]));
        memcpy(buf + o + 4, extra[k], strlen(extra[k]));
        o += 4 + strlen(extra[k]);
    }
    for (uint32_t k = 0; k < M; k++) { put32(buf + o, merges[k][0]); put32(buf + o + 4, merges[k][1]); o += 8; }
    for (uint32_t k = 0; k < S; k++) { put32(buf + o, special[k]); o += 4; }
    return o;
}

static void expect_load_error(const char *name, const void *data, size_t n, const char *want) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bpe", tmpdir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    Bpe b;
    int rc = bpe_load(path, &b);
    if (rc == MHAR_OK) bpe_free(&b);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), want) && strstr(mhar_error(), path), name,
          "expected an error naming the file and \"%s\", got rc %d: %s", want, rc, mhar_error());
}

static void test_bad_files(void) {
    unsigned char *buf = malloc(1 << 16);
    const char *extra[] = {"ab", "<|endoftext|>"};
    const uint32_t good_m[][2] = {{'a', 'b'}};
    const uint32_t sp[] = {257};
    size_t n = raw_file(buf, 258, 2, extra, 1, good_m, 1, sp);
    char path[512];
    snprintf(path, sizeof path, "%s/good.bpe", tmpdir);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    Bpe b;
    int rc = bpe_load(path, &b);
    CHECK(rc == MHAR_OK && b.vocab_size == 258 && b.n_merges == 1, "file.raw_good_loads", "%s", mhar_error());
    if (!rc) bpe_free(&b);

    expect_load_error("file.empty", "", 0, "empty");
    expect_load_error("file.not_a_tokenizer", "hello, this is a text file\n", 27, "bad magic");
    expect_load_error("file.truncated_header", buf, 20, "truncated");
    expect_load_error("file.truncated_tokens", buf, 32 + 60 + 100, "truncated");
    expect_load_error("file.truncated_merges", buf, n - 6, "truncated");
    unsigned char *longer = malloc(n + 3);
    memcpy(longer, buf, n);
    memset(longer + n, 0, 3);
    expect_load_error("file.trailing_bytes", longer, n + 3, "trailing");
    free(longer);
    const uint32_t unknown_m[][2] = {{'a', 999}};
    n = raw_file(buf, 258, 2, extra, 1, unknown_m, 1, sp);
    expect_load_error("file.merge_names_unknown_token", buf, n, "outside the vocabulary");
    const uint32_t notok_m[][2] = {{'a', 'c'}};
    n = raw_file(buf, 258, 2, extra, 1, notok_m, 1, sp);
    expect_load_error("file.merge_result_not_a_token", buf, n, "not a token");
    const uint32_t special_m[][2] = {{'a', 257}};
    n = raw_file(buf, 258, 2, extra, 1, special_m, 1, sp);
    expect_load_error("file.merge_names_special", buf, n, "special");
    n = raw_file(buf, 258, 2, extra, 1, good_m, 1, sp);
    put32(buf + 20, 5);  // 5 specials in a vocabulary with room for 2
    expect_load_error("file.inconsistent_sizes", buf, n, "inconsistent sizes");
    n = raw_file(buf, 258, 2, extra, 1, good_m, 1, sp);
    put32(buf + 12, 300);  // says 300 tokens; 258 records follow, then merges read as tokens
    expect_load_error("file.vocab_size_mismatch", buf, n, "truncated");
    const char *dup[] = {"ab", "ab"};
    n = raw_file(buf, 258, 2, dup, 1, good_m, 0, NULL);
    expect_load_error("file.duplicate_token", buf, n, "same bytes");
    n = raw_file(buf, 258, 2, extra, 1, good_m, 1, sp);
    memcpy(buf + 32, "\\s+", 3);  // corrupt the pattern
    expect_load_error("file.unknown_pattern", buf, n, "unsupported split pattern");
    // Token 'A' written as "AA": byte 0x41 has no token of its own.
    raw_double_A = 1;
    n = raw_file(buf, 258, 2, extra, 1, good_m, 1, sp);
    raw_double_A = 0;
    expect_load_error("file.missing_byte_token", buf, n, "no token for the single byte 0x41");
    free(buf);
}

// A vocabulary over 65536 ids needs 4-byte tokens: allowed by default, refused
// under a 2-byte limit, and the ids survive a token file.
static void test_wide_vocab(void) {
    int V = 70000, n_extra = V - 256;
    char **extra = malloc(sizeof(char *) * (size_t)n_extra);
    for (int k = 0; k < n_extra; k++) {
        extra[k] = malloc(5);
        snprintf(extra[k], 5, "%c%c%c%c", 'A' + k % 26, 'a' + (k / 26) % 26, 'a' + (k / 676) % 26,
                 'a' + (k / 17576) % 26);
    }
    Bpe b;
    int rc = make_model(&b, (const char *const *)extra, n_extra, NULL, 0, NULL, 0, 0);
    for (int k = 0; k < n_extra; k++) free(extra[k]);
    free(extra);
    CHECK(rc == MHAR_OK && bpe_token_width(&b) == 4, "width.large_vocab_needs_4_bytes", "%s", mhar_error());
    if (rc) return;
    char dir[512], out[512], file[1024];
    snprintf(dir, sizeof dir, "%s/corpus_w", tmpdir);
    snprintf(out, sizeof out, "%s/shards_w", tmpdir);
    mkdir(dir, 0777);
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/doc%d.txt", dir, i);
        FILE *f = fopen(file, "w");
        fputs("hello world\n", f);
        fclose(f);
    }
    ShardOptions o = {&b, dir, out, 0.5, 1, 2, 0};
    ShardStats st;
    rc = shards_tokenize(&o, &st);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "2-byte"), "width.refused_under_2_byte_limit",
          "rc %d: %s", rc, mhar_error());
    int ids[] = {69999, 65536, 3};
    snprintf(file, sizeof file, "%s/wide.bin", tmpdir);
    TokenFile tf = {0};
    rc = tokens_save(file, ids, 3, b.vocab_size);
    if (!rc) rc = tokens_load(file, &tf);
    CHECK(rc == MHAR_OK && tf.width == 4 && tf.count == 3 && tf.tokens[0] == 69999, "width.ids_over_65535_kept",
          "%s", mhar_error());
    tokens_free(&tf);
    bpe_free(&b);
}

// Shards: empty and binary files are skipped; nothing left is an error; a
// plain directory packs each file as one document + <|endoftext|>.
static void test_shards(void) {
    unsigned char *text = synth_text(100000, 5);
    Bpe b;
    train_small(&b, text, 100000, 400, PAT_LLAMA3);
    free(text);
    char dir[512], out[512], file[1024];
    snprintf(dir, sizeof dir, "%s/corpus_bad", tmpdir);
    snprintf(out, sizeof out, "%s/shards_bad", tmpdir);
    mkdir(dir, 0777);
    snprintf(file, sizeof file, "%s/empty.txt", dir);
    fclose(fopen(file, "w"));
    snprintf(file, sizeof file, "%s/blob.bin", dir);
    FILE *f = fopen(file, "wb");
    fwrite("\x7f" "ELF\0\0\0\1", 1, 8, f);
    fclose(f);
    ShardOptions o = {&b, dir, out, 0.5, 1, 4, 0};
    ShardStats st;
    int rc = shards_tokenize(&o, &st);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "empty or binary"), "shards.empty_and_binary_refused",
          "rc %d: %s", rc, mhar_error());
    const char *docs[] = {"first document\n", "second one", "third\n\n"};
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s/doc%d.txt", dir, i);
        f = fopen(file, "w");
        fputs(docs[i], f);
        fclose(f);
    }
    o.val_fraction = 0.3;
    rc = shards_tokenize(&o, &st);
    CHECK(rc == MHAR_OK && st.skipped == 2 && st.docs[0] + st.docs[1] == 3 && st.docs[1] == 1,
          "shards.plain_directory", "rc %d skipped %zu docs %llu+%llu: %s", rc, st.skipped,
          (unsigned long long)st.docs[0], (unsigned long long)st.docs[1], mhar_error());
    TokenFile tr = {0}, va = {0};
    snprintf(file, sizeof file, "%s/train.bin", out);
    rc = tokens_load(file, &tr);
    snprintf(file, sizeof file, "%s/val.bin", out);
    if (!rc) rc = tokens_load(file, &va);
    int eot = bpe_eot_id(&b), n_eot = 0;
    for (size_t i = 0; !rc && i < tr.count; i++) n_eot += tr.tokens[i] == eot;
    for (size_t i = 0; !rc && i < va.count; i++) n_eot += va.tokens[i] == eot;
    // Decoded, the two splits hold each document once, each followed by the separator.
    unsigned char *dec = NULL;
    size_t len = 0, cap = 0;
    if (!rc) rc = bpe_decode(&b, tr.tokens, tr.count, &dec, &len, &cap);
    if (!rc) rc = bpe_decode(&b, va.tokens, va.count, &dec, &len, &cap);
    int all = 1;
    for (int i = 0; !rc && i < 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s<|endoftext|>", docs[i]);
        all &= memmem(dec, len, want, strlen(want)) != NULL;
    }
    CHECK(rc == MHAR_OK && n_eot == 3 && tr.vocab_size == b.vocab_size && all && tr.tokens[tr.count - 1] == eot,
          "shards.documents_separated", "eot count %d, all documents found %d: %s", n_eot, all, mhar_error());
    free(dec);
    tokens_free(&tr);
    tokens_free(&va);
    bpe_free(&b);
}

static const char *tfile(const char *name) {  // tmpdir/name; the last 4 stay valid
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void put(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n)) { perror(path); exit(2); }
    fclose(f);
}

// The library behind `mhar tokenizer train` and `encode`: a corpus
// directory's train/ split is preferred to its top level, and a text file
// encodes to a token file's ids (padding, refusals).
static void test_corpus_and_file(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tfile("corpus_dir"));
    mkdir(dir, 0777);
    mkdir(tfile("corpus_dir/train"), 0777);
    put(tfile("corpus_dir/top.txt"), "zzzz zzzz zzzz zzzz", 19);
    put(tfile("corpus_dir/train/a.txt"), "abab abab abab abab", 19);
    const char *special[] = {"<|endoftext|>"};
    BpeTrainOptions o = {260, PAT_MHAR, special, 1, 0};
    BpeTrainStats st;
    Bpe b;
    char used[512];
    int rc = bpe_train_corpus(dir, &o, &b, &st, used, sizeof used);
    CHECK(rc == MHAR_OK && strstr(used, "corpus_dir/train") && st.files == 1, "train_corpus_prefers_train_split",
          "rc %d, read %s, %zu files: %s", rc, used, st.files, mhar_error());
    if (rc) return;
    IntVec ids = {0};
    size_t n = 0;
    put(tfile("one.txt"), "a", 1);
    rc = bpe_encode_file(&b, tfile("one.txt"), 1, 0, &ids, &n);
    CHECK(rc == MHAR_OK && ids.n == 2 && ids.v[1] == bpe_eot_id(&b) && n == 1, "encode_file_pads_one_token",
          "rc %d, %zu ids", rc, ids.n);
    ids.n = 0;
    put(tfile("nul.txt"), "ab\0cd", 5);
    rc = bpe_encode_file(&b, tfile("nul.txt"), 1, 0, &ids, &n);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "nul.txt") && strstr(mhar_error(), "offset 2"), "encode_file_refuses_nul",
          "%s", mhar_error());
    ids.n = 0;
    rc = bpe_encode_file(&b, tfile("nul.txt"), 1, 1, &ids, &n);
    CHECK(rc == MHAR_OK && ids.n >= 2 && n == 5, "encode_file_binary_ok", "rc %d: %s", rc, mhar_error());
    put(tfile("empty.txt"), "", 0);
    rc = bpe_encode_file(&b, tfile("empty.txt"), 1, 0, &ids, &n);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "empty"), "encode_file_refuses_empty", "%s", mhar_error());
    intvec_free(&ids);
    bpe_free(&b);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_tokenizer.%d", (int)getpid());
    mkdir(tmpdir, 0777);
    test_unicode();
    test_split();
    test_nfc();
    test_merges();
    test_train_and_roundtrip();
    test_train_reference();
    test_bad_files();
    test_wide_vocab();
    test_shards();
    test_corpus_and_file();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    CHECK_EXIT();
}
