// The pre-split: text is cut into pieces ("words") before BPE, exactly as a
// regex split would cut it, so HF tokenizers (Split + Regex) and tiktoken
// (fancy-regex) reproduce it from the pattern string alone. Each supported
// pattern is hand-compiled here: the functions below follow the regex's
// leftmost-first alternation and greedy backtracking case by case.
#pragma once
#include <stddef.h>

enum {
    PAT_NONE = 0,
    // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    PAT_GPT2 = 1,
    // GPT-4 cl100k / Llama-3, and mhar's own: letters with one leading
    // non-letter, digits in groups of at most 3, punctuation with its
    // trailing newlines, and whitespace runs that keep indentation together
    // (\s*[\r\n]+ ends a run at its last newline; \s+(?!\S) leaves the last
    // space to the next word).
    PAT_LLAMA3 = 2,
    // Qwen2/Qwen3: the Llama-3 pattern with single digits (\p{N}).
    PAT_QWEN2 = 3,
};
#define PAT_MHAR PAT_LLAMA3

// The exact regex string of a pattern id (NULL for an unknown id).
const char *pretok_pattern(int id);
// The id of an exact regex string, PAT_NONE if it is not one we implement.
int pretok_pattern_id(const char *regex);
// A short name: "gpt2", "llama3", "qwen2".
const char *pretok_name(int id);

// End of the piece that starts at s[i] (i < n): the regex match at i. The
// patterns match at every position, so pieces tile the text; text is one
// segment (special tokens already cut out), since (?!\S) looks at its end.
size_t pretok_next(int pat, const unsigned char *s, size_t n, size_t i);

// Is j (0 < j < n) a safe place to cut a text in two: s[j-1] is a newline
// after a non-space ASCII character and s[j] an ASCII letter? Then in every
// supported pattern a piece ends at j whatever follows (the newline is
// matched by \s*[\r\n]+, by punctuation's [\r\n]*, or in GPT-2's alone by
// \s+ as well as by \s+(?!\S) at an end), and no piece crosses j, so the
// two halves split exactly as the whole does. Lets long texts be split and
// encoded in parallel.
int pretok_safe_cut(const unsigned char *s, size_t n, size_t j);
