// Hashing shared by the tokenizer's tables (vocabulary, piece cache, word
// counts, pair counts). Not cryptographic; the tables use open addressing
// with power-of-two sizes, so the mix must spread low bits well.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t hash_mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

// Eight bytes at a time; a short tail is read into a zeroed word and the
// length is mixed in, so "a" and "a\0" differ.
static inline uint64_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9FB21C651E98DF25ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return hash_mix(h ^ w);
}

// Smallest power of two >= 2n (a table at most half full), at least 16.
static inline size_t hash_capacity(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c <<= 1;
    return c;
}
