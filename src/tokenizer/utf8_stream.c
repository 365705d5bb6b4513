#include "utf8_stream.h"

#include <string.h>

// Length of the sequence a lead byte starts (RFC 3629), 0 for a byte that
// cannot start one (a continuation byte, C0, C1, F5..FF).
static int lead_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

// Is s[1..n) (n >= 2) a valid continuation of lead s[0] so far? The second
// byte's range depends on the lead (no overlong forms, no surrogates, no
// code point above U+10FFFF); the others are 80..BF.
static int valid_prefix(const unsigned char *s, int n) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (s[0] == 0xE0) lo = 0xA0;
    else if (s[0] == 0xED) hi = 0x9F;
    else if (s[0] == 0xF0) lo = 0x90;
    else if (s[0] == 0xF4) hi = 0x8F;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return 1;
}

// How many bytes at the end of s[0..n) form a valid sequence still missing
// bytes (0..3).
static int incomplete_tail(const unsigned char *s, size_t n) {
    for (int back = 1; back <= 3 && (size_t)back <= n; back++) {
        const unsigned char *lead = s + n - back;
        if ((*lead & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        int len = lead_length(*lead);
        if (len <= back) return 0;  // complete, ASCII, or not a lead
        return back == 1 || valid_prefix(lead, back) ? back : 0;
    }
    return 0;
}

size_t utf8_stream_push(Utf8Stream *s, const unsigned char *in, size_t n, unsigned char *out) {
    size_t total = (size_t)s->n_held + n;
    memcpy(out, s->held, (size_t)s->n_held);
    memcpy(out + s->n_held, in, n);
    int hold = incomplete_tail(out, total);
    s->n_held = hold;
    memcpy(s->held, out + total - hold, (size_t)hold);
    return total - hold;
}

size_t utf8_stream_flush(Utf8Stream *s, unsigned char *out) {
    size_t n = (size_t)s->n_held;
    memcpy(out, s->held, n);
    s->n_held = 0;
    return n;
}
