// Hand-compiled regex matchers for the supported split patterns. Every case
// below is one alternative of the regex, tried in the regex's order; the
// comments give the backtracking argument where a case needs one.
#include "pretokenize.h"

#include <stdint.h>
#include <string.h>

#include "unicode.h"

static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *pretok_pattern(int id) {
    return id == PAT_GPT2 ? RE_GPT2 : id == PAT_LLAMA3 ? RE_LLAMA3 : id == PAT_QWEN2 ? RE_QWEN2 : NULL;
}

int pretok_pattern_id(const char *re) {
    for (int id = PAT_GPT2; id <= PAT_QWEN2; id++)
        if (!strcmp(re, pretok_pattern(id))) return id;
    return PAT_NONE;
}

const char *pretok_name(int id) {
    return id == PAT_GPT2 ? "gpt2" : id == PAT_LLAMA3 ? "llama3" : id == PAT_QWEN2 ? "qwen2" : "?";
}

// ASCII classes by table: most text is ASCII, and this is the hot path.
static const unsigned char ascii_class[128] = {
    ['\t'] = UCLASS_SPACE, ['\n'] = UCLASS_SPACE, ['\v'] = UCLASS_SPACE, ['\f'] = UCLASS_SPACE,
    ['\r'] = UCLASS_SPACE, [' '] = UCLASS_SPACE,
    ['0'] = 2, ['1'] = 2, ['2'] = 2, ['3'] = 2, ['4'] = 2, ['5'] = 2, ['6'] = 2, ['7'] = 2, ['8'] = 2, ['9'] = 2,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1,
    ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
    ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1,
    ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
    ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

// The character at s[i] (i < n): its class, length and code point.
typedef struct { int cls, len; uint32_t cp; } Char;

static inline Char char_at(const unsigned char *s, size_t n, size_t i) {
    Char c;
    if (s[i] < 0x80) {
        c.cp = s[i];
        c.len = 1;
        c.cls = ascii_class[s[i]];
        return c;
    }
    c.len = utf8_decode(s + i, n - i, &c.cp);
    c.cls = c.cp == UNICODE_INVALID ? UCLASS_OTHER : unicode_class(c.cp);
    return c;
}

static inline int class_at(const unsigned char *s, size_t n, size_t i) {
    return i < n ? char_at(s, n, i).cls : -1;
}

// End of the maximal run of class cls starting at i.
static inline size_t run(const unsigned char *s, size_t n, size_t i, int cls) {
    while (i < n) {
        if (s[i] < 0x80) {
            if (ascii_class[s[i]] != cls) break;
            i++;
        } else {
            Char c = char_at(s, n, i);
            if (c.cls != cls) break;
            i += (size_t)c.len;
        }
    }
    return i;
}

// Length of a contraction after the apostrophe at s[i-1]: s|t|re|ve|m|ll|d,
// 0 if none. With fold, (?i:...) as both engines apply it: ASCII case plus
// U+017F LATIN SMALL LETTER LONG S, whose simple case folding is 's'.
static size_t contraction(const unsigned char *s, size_t n, size_t i, int fold) {
    if (i >= n) return 0;
    unsigned c0 = s[i], c1 = i + 1 < n ? s[i + 1] : 0;
    if (fold) {
        if (c0 == 0xC5 && c1 == 0xBF) return 2;  // U+017F in UTF-8
        c0 |= (c0 >= 'A' && c0 <= 'Z') ? 0x20 : 0;
        c1 |= (c1 >= 'A' && c1 <= 'Z') ? 0x20 : 0;
    }
    if (c0 == 's' || c0 == 't' || c0 == 'm' || c0 == 'd') return 1;
    if ((c0 == 'r' && c1 == 'e') || (c0 == 'v' && c1 == 'e') || (c0 == 'l' && c1 == 'l')) return 2;
    return 0;
}

// A whitespace run from i: its end, and where its last character starts.
static size_t space_run(const unsigned char *s, size_t n, size_t i, size_t *last) {
    *last = i;
    while (i < n) {
        Char c = char_at(s, n, i);
        if (c.cls != UCLASS_SPACE) break;
        *last = i;
        i += (size_t)c.len;
    }
    return i;
}

// \s+(?!\S)|\s+ at a whitespace run [i, e) whose last character starts at
// last: at the end of the text (?!\S) holds and the whole run matches;
// otherwise \s+ gives back one character so that (?!\S) sees whitespace,
// which needs a run of two or more; a single character falls to \s+.
static size_t space_tail(size_t n, size_t i, size_t e, size_t last) {
    if (e == n) return e;
    if (last > i) return last;
    return e;
}

static size_t next_gpt2(const unsigned char *s, size_t n, size_t i) {
    Char c = char_at(s, n, i);
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c.cp == '\'') {
        size_t k = contraction(s, n, i + 1, 0);
        if (k) return i + 1 + k;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a
    // run of one class (the space is taken when the next character starts
    // such a run; a space never starts one itself).
    size_t j = i;
    int cls = c.cls;
    if (c.cp == ' ' && i + 1 < n) {
        int next = class_at(s, n, i + 1);
        if (next != UCLASS_SPACE) { j = i + 1; cls = next; }
    }
    if (cls != UCLASS_SPACE) return run(s, n, j, cls);
    size_t last, e = space_run(s, n, i, &last);
    return space_tail(n, i, e, last);
}

static size_t next_llama3(const unsigned char *s, size_t n, size_t i, int max_digits) {
    Char c = char_at(s, n, i);
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c.cp == '\'') {
        size_t k = contraction(s, n, i + 1, 1);
        if (k) return i + 1 + k;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+ : the optional character is tried first, and
    // a letter cannot be it, so a letter starts a plain letter run.
    if (c.cls == UCLASS_LETTER) return run(s, n, i, UCLASS_LETTER);
    if (c.cls != UCLASS_NUMBER && c.cp != '\r' && c.cp != '\n' && i + (size_t)c.len < n &&
        class_at(s, n, i + (size_t)c.len) == UCLASS_LETTER)
        return run(s, n, i + (size_t)c.len, UCLASS_LETTER);
    // \p{N}{1,3} (Qwen: \p{N})
    if (c.cls == UCLASS_NUMBER) {
        size_t j = i;
        for (int k = 0; k < max_digits && j < n; k++) {
            Char d = char_at(s, n, j);
            if (d.cls != UCLASS_NUMBER) break;
            j += (size_t)d.len;
        }
        return j;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    size_t j = i;
    if (c.cp == ' ' && class_at(s, n, i + 1) == UCLASS_OTHER) j = i + 1;
    if (j > i || c.cls == UCLASS_OTHER) {
        j = run(s, n, j, UCLASS_OTHER);
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    // Whitespace from here on. \s*[\r\n]+ : \s* takes the whole run and
    // backtracks to its last \r or \n, where [\r\n]+ matches that one
    // character (a later one would have been found first). \r and \n are
    // ASCII and never occur inside a multi-byte character, so a byte scan
    // finds them.
    size_t last, e = space_run(s, n, i, &last);
    for (size_t k = e; k > i; k--)
        if (s[k - 1] == '\n' || s[k - 1] == '\r') return k;
    return space_tail(n, i, e, last);
}

size_t pretok_next(int pat, const unsigned char *s, size_t n, size_t i) {
    switch (pat) {
    case PAT_GPT2: return next_gpt2(s, n, i);
    case PAT_LLAMA3: return next_llama3(s, n, i, 3);
    case PAT_QWEN2: return next_llama3(s, n, i, 1);
    default: return n;
    }
}

int pretok_safe_cut(const unsigned char *s, size_t n, size_t j) {
    if (j < 2 || j >= n || s[j - 1] != '\n') return 0;
    unsigned char p = s[j - 2], c = s[j];
    if (p >= 0x80 || ascii_class[p] == UCLASS_SPACE) return 0;
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
