// Decoded text shown token by token: a token may end inside a UTF-8
// sequence (byte-level BPE splits characters), so the bytes of an
// incomplete sequence at the end are held back until the sequence is
// complete, or shown as they are once it cannot be (an invalid byte, or the
// end). The bytes shown are exactly the bytes pushed, in order.
#pragma once
#include <stddef.h>

typedef struct {
    unsigned char held[3];  // a valid but incomplete sequence's bytes
    int n_held;
} Utf8Stream;

// Append in[0..n); the bytes that may be shown now go to out (room for
// n + 3), their count is returned.
size_t utf8_stream_push(Utf8Stream *s, const unsigned char *in, size_t n, unsigned char *out);
// At the end: whatever is held (at most 3 bytes) goes to out, count returned.
size_t utf8_stream_flush(Utf8Stream *s, unsigned char *out);
