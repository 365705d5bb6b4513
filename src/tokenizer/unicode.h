// Unicode character classes for the pre-tokenizer patterns, and UTF-8
// decoding that never fails (an invalid byte is one "character" of its own).
#pragma once
#include <stddef.h>
#include <stdint.h>

// The classes the supported regexes distinguish: \p{L}, \p{N}, \s, and the
// rest ([^\s\p{L}\p{N}]). Disjoint: no White_Space code point is L or N.
enum { UCLASS_OTHER = 0, UCLASS_LETTER = 1, UCLASS_NUMBER = 2, UCLASS_SPACE = 3 };

typedef struct { uint32_t lo, hi, cls; } UnicodeRange;
extern const char unicode_version[];
extern const int unicode_n_ranges;
extern const UnicodeRange unicode_ranges[];

// NFC data (tools/gen_unicode_tables.py): combining classes as ranges,
// one-level canonical decompositions {cp, first, second (0 if none)}, and
// primary composites {first, second, composite} sorted by (first, second).
typedef struct { uint32_t a, b, c; } UnicodeDecomp;
extern const int unicode_n_ccc, unicode_n_decomp, unicode_n_comp;
extern const UnicodeRange unicode_ccc[];
extern const UnicodeDecomp unicode_decomp[], unicode_comp[];

// Class of a code point (binary search in the generated table).
int unicode_class(uint32_t cp);

// Decode one character at s[0..n) (n >= 1). Returns its length in bytes and
// stores the code point in *cp. A byte that does not start a well-formed
// UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF)
// is returned alone with *cp = UNICODE_INVALID, which is class OTHER: any
// byte string splits deterministically, and text the reference libraries
// accept (valid UTF-8) never meets this case.
#define UNICODE_INVALID 0xFFFFFFFFu
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
